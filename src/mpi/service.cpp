// The MPI polling service (service.hpp): batching, completion and release.
#include "mpi/service.hpp"

#include <algorithm>
#include <functional>

#include "mote/detail/worker.hpp"
#include "mote/trace.hpp"

namespace mote::mpi::detail {

std::string error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}

service::service(std::int64_t interval_ns) {
  source_.poll = [](void* ctx, bool busy) noexcept { return static_cast<service*>(ctx)->poll(busy); };
  source_.pending = [](void* ctx) noexcept { return static_cast<const service*>(ctx)->pending(); };
  source_.ctx = this;
  source_.interval_ns = interval_ns;
}

void service::add(const MPI_Request* requests, const MPI_Status* const* statuses, std::uint32_t n, ticket* t) {
  {
    std::lock_guard<std::mutex> lock(incoming_mutex_);
    // Room first, so that a bad_alloc leaves nothing half added.
    incoming_requests_.reserve(incoming_requests_.size() + n);
    incoming_entries_.reserve(incoming_entries_.size() + n);
    for (std::uint32_t i = 0; i < n; ++i) {
      incoming_requests_.push_back(requests[i]);
      incoming_entries_.push_back({t, statuses != nullptr ? const_cast<MPI_Status*>(statuses[i]) : nullptr});
    }
    // Relaxed: the mutex orders the arrays; the count only lets a poll skip
    // the mutex.
    incoming_size_.store(incoming_requests_.size(), std::memory_order_relaxed);
  }
  // Relaxed: counters. outstanding_ is read by pending() as a hint for the
  // last look before a sleep; the adding thread is awake and polls itself
  // (or waits with a timed sleep), so no wake-up hangs on this order.
  outstanding_.fetch_add(n, std::memory_order_relaxed);
  requests_total_.fetch_add(n, std::memory_order_relaxed);
}

bool service::poll(bool busy) noexcept {
  if (!pending()) return false;
  std::unique_lock<std::mutex> lock(poll_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // another worker polls right now
  if (incoming_size_.load(std::memory_order_relaxed) != 0) {
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
  const auto n = static_cast<int>(requests_.size());
  if (n == 0) return false;
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
    }
    done = n;
  }
  if (done == MPI_UNDEFINED || done == 0) return false;
  // The completions, highest index first, so that swap-removing one never
  // moves another completed entry.
  std::sort(indices_.begin(), indices_.begin() + done, std::greater<>());
  // The releases: a fulfilment ends a data-flow task on this thread (its
  // successors go to the scheduler; no task body runs here), a flag lets a
  // waiter go. Outside the lock, so that other pollers are not held up;
  // inside it only when there is no memory to list them.
  auto release = [](ticket* t) noexcept {
    if (t->event) {
      try {
        t->event.fulfill();  // a non-empty event: does not throw
      } catch (...) {
      }
      delete t;
      return;
    }
    // Read before the store: once the waiter sees `done` its frame (and the
    // ticket) may be gone. The worker lives as long as its runtime.
    mote::detail::worker* waiter = t->waiter;
    // Release: the statuses and `error` written under the lock are the
    // waiter's after its acquire load of `done`.
    t->done.store(true, std::memory_order_release);
    if (waiter != nullptr) mote::detail::wake_waiting(*waiter);
  };
  std::vector<ticket*> finished;
  try {
    finished.reserve(static_cast<std::size_t>(done));
  } catch (...) {
  }
  for (int k = 0; k < done; ++k) {
    const auto i = static_cast<std::size_t>(indices_[static_cast<std::size_t>(k)]);
    const entry e = entries_[i];
    const int err = rc == MPI_SUCCESS ? MPI_SUCCESS : statuses_[i].MPI_ERROR;
    if (e.status != nullptr) *e.status = statuses_[i];
    if (err != MPI_SUCCESS && e.owner->error == MPI_SUCCESS) e.owner->error = err;
    if (--e.owner->remaining == 0) {
      // An iwait's error has nobody to throw to: detach() rethrows it.
      if (e.owner->event && e.owner->error != MPI_SUCCESS && async_error_ == MPI_SUCCESS) {
        async_error_ = e.owner->error;
      }
      if (finished.size() < finished.capacity()) {
        finished.push_back(e.owner);
      } else {
        release(e.owner);
      }
    }
    requests_[i] = requests_.back();
    requests_.pop_back();
    entries_[i] = entries_.back();
    entries_.pop_back();
  }
  // Relaxed: a counter (see add()).
  outstanding_.fetch_sub(static_cast<std::uint64_t>(done), std::memory_order_relaxed);
  lock.unlock();
  if (mote::detail::worker* w = mote::detail::current_worker) {
    if (MOTE_UNLIKELY(w->trace() != nullptr)) {
      w->trace()->put(mote::detail::trace_kind::mpi_done, static_cast<std::uint64_t>(done));
    }
  }
  for (ticket* t : finished) release(t);
  return true;
}

int service::take_async_error() noexcept {
  std::lock_guard<std::mutex> lock(poll_mutex_);
  const int e = async_error_;
  async_error_ = MPI_SUCCESS;
  return e;
}

mote::mpi::stats service::snapshot() const noexcept {
  mote::mpi::stats s;
  s.requests = requests_total_.load(std::memory_order_relaxed);
  s.outstanding = outstanding_.load(std::memory_order_relaxed);
  s.polls = polls_.load(std::memory_order_relaxed);
  s.busy_polls = busy_polls_.load(std::memory_order_relaxed);
  s.waits = waits_.load(std::memory_order_relaxed);
  s.wait_ns = wait_ns_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace mote::mpi::detail
