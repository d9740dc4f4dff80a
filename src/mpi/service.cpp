// The MPI polling service (service.hpp): batching, completion and release.
#include "mpi/service.hpp"

#include <algorithm>
#include <exception>

#include "mote/detail/platform.hpp"
#include "mote/detail/worker.hpp"
#include "mote/trace.hpp"

namespace mote::mpi::detail {

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

mote::mpi::error ticket_error(const ticket& t, const char* call) {
  std::string what = std::string(call) + ": ";
  if (t.abandoned_by != nullptr) {
    what += std::string(t.abandoned_by) + " finalised MPI while " +
            (t.count == 1 ? std::string("the request was") : std::to_string(t.failures) + " of the requests were") +
            " still pending (cancelled and freed)";
    return mote::mpi::error(what, t.error);
  }
  what += "request " + std::to_string(t.failed_index + 1) + " of " + std::to_string(t.count) + " failed";
  if (t.failed_source != MPI_ANY_SOURCE || t.failed_tag != MPI_ANY_TAG) {
    what += " (source " + std::to_string(t.failed_source) + ", tag " + std::to_string(t.failed_tag) + ")";
  }
  what += ": " + error_string(t.error);
  if (t.failures > 1) what += "; " + std::to_string(t.failures - 1) + " more of its requests failed";
  return mote::mpi::error(what, t.error);
}

service::service(std::int64_t interval_ns) : interval_ns_(interval_ns) {
  source_.poll = [](void* ctx, bool busy) noexcept { return static_cast<service*>(ctx)->poll(busy); };
  source_.sleep_ns = [](void* ctx) noexcept { return static_cast<const service*>(ctx)->sleep_ns(); };
  source_.ctx = this;
  source_.interval_ns = interval_ns;
  // Relaxed: set before the service is published (attach's release).
  last_progress_ns_.store(mote::detail::now_ns(), std::memory_order_relaxed);
}

std::int64_t service::gap_ns(std::int64_t now) const noexcept {
  // Relaxed: a timestamp that only spaces polls out.
  const std::int64_t idle = now - last_progress_ns_.load(std::memory_order_relaxed);
  return std::clamp<std::int64_t>(idle / 16, 0, kMaxGapNs);
}

std::int64_t service::sleep_ns() const noexcept {
  if (!pending()) return -1;
  return std::max(interval_ns_, gap_ns(mote::detail::now_ns()));
}

void service::add(const MPI_Request* requests, const MPI_Status* const* statuses, std::uint32_t n, ticket* t) {
  {
    std::lock_guard<std::mutex> lock(incoming_mutex_);
    // Room first, so that a bad_alloc leaves nothing half added.
    incoming_requests_.reserve(incoming_requests_.size() + n);
    incoming_entries_.reserve(incoming_entries_.size() + n);
    for (std::uint32_t i = 0; i < n; ++i) {
      incoming_requests_.push_back(requests[i]);
      incoming_entries_.push_back({t, statuses != nullptr ? const_cast<MPI_Status*>(statuses[i]) : nullptr, i});
    }
    // Relaxed: the mutex orders the arrays; the count only lets a poll skip
    // the mutex.
    incoming_size_.store(incoming_requests_.size(), std::memory_order_relaxed);
  }
  // A new request: polls come at full rate again (relaxed, as gap_ns).
  last_progress_ns_.store(mote::detail::now_ns(), std::memory_order_relaxed);
  // seq_cst: the publication of the event count's Dekker pair with a worker
  // about to sleep (its last look asks sleep_ns, which reads this count):
  // either it sees the request and sleeps with a timeout, or the caller's
  // wake-up (source_work_added) sees its announcement. A worker of the
  // attached runtime that adds polls itself and needs no wake-up.
  outstanding_.fetch_add(n, std::memory_order_seq_cst);
  // Relaxed: a counter.
  requests_total_.fetch_add(n, std::memory_order_relaxed);
}

void service::take_incoming() noexcept {
  if (incoming_size_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard<std::mutex> in(incoming_mutex_);
  try {
    requests_.insert(requests_.end(), incoming_requests_.begin(), incoming_requests_.end());
    entries_.insert(entries_.end(), incoming_entries_.begin(), incoming_entries_.end());
    incoming_requests_.clear();
    incoming_entries_.clear();
    incoming_size_.store(0, std::memory_order_relaxed);
  } catch (...) {
    // No memory to take them in now: the arrays are as they were (the
    // inserts' strong guarantee, or requests_ one batch longer, trimmed
    // here); the next poll tries again.
    requests_.resize(entries_.size());
  }
}

bool service::complete(const entry& e, const MPI_Status& st, int err) noexcept {
  if (e.status != nullptr) *e.status = st;
  ticket& t = *e.owner;
  if (err != MPI_SUCCESS) {
    if (t.failures++ == 0) {
      t.error = err;
      t.failed_index = e.index;
      t.failed_source = st.MPI_SOURCE;
      t.failed_tag = st.MPI_TAG;
    }
    // Relaxed: a counter.
    failed_.fetch_add(1, std::memory_order_relaxed);
  }
  return --t.remaining == 0;
}

void service::release(ticket* t) noexcept {
  if (t->event) {
    if (t->error == MPI_SUCCESS) {
      try {
        t->event.fulfill();  // a non-empty event: does not throw
      } catch (...) {
      }
    } else {
      // The task bound to the request fails as a task that throws does.
      std::exception_ptr e;
      try {
        e = std::make_exception_ptr(ticket_error(*t, "mote::mpi::iwait"));
      } catch (...) {
        e = std::current_exception();  // no memory for the text: the bad_alloc
      }
      try {
        t->event.fail(e);  // a non-empty event and exception: does not throw
      } catch (...) {
      }
    }
    delete t;
    return;
  }
  // Read before the store: once the waiter sees `done` its frame (and the
  // ticket) may be gone. The worker lives as long as its runtime.
  mote::detail::worker* waiter = t->waiter;
  // Release: the statuses and the error fields written under the lock are
  // the waiter's after its acquire load of `done`.
  t->done.store(true, std::memory_order_release);
  if (waiter != nullptr) mote::detail::wake_waiting(*waiter);
}

bool service::poll(bool busy) noexcept {
  if (!pending()) return false;
  if (!busy) {
    // An idle poll after a long quiet is spaced out: a peer that is late
    // (or gone) costs a few polls a millisecond, not a core. Relaxed: a
    // timestamp; two pollers that both pass only poll twice.
    const std::int64_t now = mote::detail::now_ns();
    const std::int64_t gap = gap_ns(now);
    if (gap > 0 && now - last_idle_poll_ns_.load(std::memory_order_relaxed) < gap) return false;
    last_idle_poll_ns_.store(now, std::memory_order_relaxed);
  }
  std::unique_lock<std::mutex> lock(poll_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // another worker polls right now
  take_incoming();
  const auto n = static_cast<int>(requests_.size());
  if (n == 0) return false;
  // Relaxed: counters.
  polls_.fetch_add(1, std::memory_order_relaxed);
  if (busy) busy_polls_.fetch_add(1, std::memory_order_relaxed);
  try {
    indices_.resize(static_cast<std::size_t>(n));
    statuses_.resize(static_cast<std::size_t>(n));
  } catch (...) {
    return false;  // no memory for the batch: the next poll tries again
  }
  int done = 0;
  const int rc = MPI_Testsome(n, requests_.data(), &done, indices_.data(), statuses_.data());
  if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
    // The call itself failed: nothing says which request is done, and none
    // may ever be. Fail every one, so that nothing waits forever.
    for (int i = 0; i < n; ++i) {
      indices_[static_cast<std::size_t>(i)] = i;
      statuses_[static_cast<std::size_t>(i)].MPI_ERROR = rc;
      statuses_[static_cast<std::size_t>(i)].MPI_SOURCE = MPI_ANY_SOURCE;
      statuses_[static_cast<std::size_t>(i)].MPI_TAG = MPI_ANY_TAG;
      requests_[static_cast<std::size_t>(i)] = MPI_REQUEST_NULL;
    }
    done = n;
  }
  if (done == MPI_UNDEFINED || done == 0) return false;
  // The tickets it completes, released after the lock; without memory to
  // list them, released under it.
  std::vector<ticket*> finished;
  try {
    finished.reserve(static_cast<std::size_t>(done));
  } catch (...) {
  }
  // statuses_[k] belongs to indices_[k] (MPI_Testsome writes them
  // compactly). Under MPI_SUCCESS the statuses' error fields are not set.
  for (int k = 0; k < done; ++k) {
    const auto i = static_cast<std::size_t>(indices_[static_cast<std::size_t>(k)]);
    const MPI_Status& st = statuses_[static_cast<std::size_t>(k)];
    const int err = rc == MPI_SUCCESS ? MPI_SUCCESS : st.MPI_ERROR;
    if (complete(entries_[i], st, err)) {
      if (finished.size() < finished.capacity()) {
        finished.push_back(entries_[i].owner);
      } else {
        release(entries_[i].owner);
      }
    }
    requests_[i] = MPI_REQUEST_NULL;  // MPI_Testsome did so too
  }
  // Drop the completed entries (those now null), keeping the others' order.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    requests_[kept] = requests_[i];
    entries_[kept] = entries_[i];
    ++kept;
  }
  requests_.resize(kept);
  entries_.resize(kept);
  // Relaxed: a counter (see add()), and a timestamp.
  outstanding_.fetch_sub(static_cast<std::uint64_t>(done), std::memory_order_relaxed);
  last_progress_ns_.store(mote::detail::now_ns(), std::memory_order_relaxed);
  // The releases: a fulfilment ends a data-flow task on this thread (its
  // successors go to the scheduler; no task body runs here), a flag lets a
  // waiter go. Outside the lock, so that other pollers are not held up.
  lock.unlock();
  if (mote::detail::worker* w = mote::detail::current_worker) {
    if (MOTE_UNLIKELY(w->trace() != nullptr)) {
      w->trace()->put(mote::detail::trace_kind::mpi_done, static_cast<std::uint64_t>(done));
    }
  }
  for (ticket* t : finished) release(t);
  return true;
}

std::uint64_t service::abandon_all(const char* by) noexcept {
  std::unique_lock<std::mutex> lock(poll_mutex_);
  take_incoming();
  std::vector<ticket*> finished;
  std::uint64_t count = 0;
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    MPI_Request r = requests_[i];
    if (r == MPI_REQUEST_NULL) continue;
    ++count;
    // A receive must not write into its buffer later; a send may finish on
    // its own. Either way MPI forgets the request.
    (void)MPI_Cancel(&r);
    (void)MPI_Request_free(&r);
    ticket& t = *entries_[i].owner;
    t.abandoned_by = by;
    MPI_Status st{};
    st.MPI_SOURCE = MPI_ANY_SOURCE;
    st.MPI_TAG = MPI_ANY_TAG;
    st.MPI_ERROR = MPI_ERR_PENDING;
    if (complete(entries_[i], st, MPI_ERR_PENDING)) {
      try {
        finished.push_back(&t);
      } catch (...) {
        release(&t);  // no memory to list it: release it here, under the lock
      }
    }
  }
  requests_.clear();
  entries_.clear();
  // Relaxed: a counter.
  outstanding_.fetch_sub(count, std::memory_order_relaxed);
  lock.unlock();
  for (ticket* t : finished) release(t);
  return count;
}

mote::mpi::stats service::snapshot() const noexcept {
  mote::mpi::stats s;
  s.requests = requests_total_.load(std::memory_order_relaxed);
  s.outstanding = outstanding_.load(std::memory_order_relaxed);
  s.failed = failed_.load(std::memory_order_relaxed);
  s.polls = polls_.load(std::memory_order_relaxed);
  s.busy_polls = busy_polls_.load(std::memory_order_relaxed);
  s.waits = waits_.load(std::memory_order_relaxed);
  s.wait_ns = wait_ns_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace mote::mpi::detail
