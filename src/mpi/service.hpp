// The MPI polling service: the requests that tasks wait for, tested in one
// batch (MPI_Testsome) by whichever worker polls, and what each completion
// releases (a data-flow task's event, or a blocked wait). Attached to one
// runtime as its work source (include/mote/detail/work_source.hpp).
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "mote/dataflow.hpp"
#include "mote/detail/work_source.hpp"
#include "mote/mpi.hpp"

namespace mote::detail {
class worker;
}  // namespace mote::detail

namespace mote::mpi::detail {

// What a group of requests releases when the last of them completes: the
// event of an iwait (the service owns the ticket and deletes it), or a
// blocking wait's flag (the ticket lives in the waiter's frame). The fields
// below `remaining` are written by the poller under the poll lock and read
// by the waiter after `done` (acquire), or by the release of an event.
struct ticket {
  // Requests not complete yet.
  std::uint32_t remaining = 0;
  // The requests of the binding (for the error's text).
  std::uint32_t count = 0;
  // Its failed requests; the first one's MPI error code, place in the
  // binding (0-based) and envelope.
  std::uint32_t failures = 0;
  int error = MPI_SUCCESS;
  std::uint32_t failed_index = 0;
  int failed_source = MPI_ANY_SOURCE;
  int failed_tag = MPI_ANY_TAG;
  // Set when MPI was finalised with the requests still pending (the call
  // that did it: "mote::mpi::finalize", "MPI_Finalize").
  const char* abandoned_by = nullptr;
  // iwait: fulfilled (or failed) at the end; empty for a blocking wait.
  dataflow_event event;
  // A blocking wait: set when remaining reaches 0; the worker to wake.
  std::atomic<bool> done{false};
  mote::detail::worker* waiter = nullptr;
};

// The error a failed ticket stands for: the call ("mote::mpi::iwait", ...),
// which request of how many, its envelope and MPI's message, and how many
// more of its requests failed.
mote::mpi::error ticket_error(const ticket& t, const char* call);

class service {
 public:
  explicit service(std::int64_t interval_ns);
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  mote::detail::work_source* source() noexcept { return &source_; }

  // Hands the service n requests of ticket t (whose `remaining` counts them);
  // statuses (or nullptr) receive their statuses at completion. The caller
  // then sets its handles to MPI_REQUEST_NULL. Any thread. Throws
  // std::bad_alloc, having taken none of them. The count of outstanding
  // requests grows seq_cst: after it, a thread that is not a worker of the
  // attached runtime wakes one (mote::detail::source_work_added).
  void add(const MPI_Request* requests, const MPI_Status* const* statuses, std::uint32_t n, ticket* t);

  // One MPI_Testsome over every pending request, and the releases it makes
  // due. Any thread; one at a time (a caller that finds another polling
  // returns false at once). True when something completed. An idle poll
  // (busy = false) after a long time without progress is spaced out (see
  // gap_ns) and returns false at once inside the gap.
  bool poll(bool busy) noexcept;
  bool pending() const noexcept { return outstanding_.load(std::memory_order_relaxed) != 0; }
  // The work source's sleep_ns: -1 with nothing outstanding, else how long
  // an idle worker may sleep before it polls again: the interval, longer
  // the longer nothing has completed (up to kMaxGapNs).
  std::int64_t sleep_ns() const noexcept;

  // MPI is being finalised with requests still pending: cancels and frees
  // each one, and fails what it was bound to (the iwait's task fails, a
  // blocking wait throws), naming `by`. Returns how many there were. Takes
  // the poll lock (waits for a poll in progress). Any thread.
  std::uint64_t abandon_all(const char* by) noexcept;

  void note_wait(std::int64_t ns) noexcept {
    // Relaxed: counters, read as a snapshot.
    waits_.fetch_add(1, std::memory_order_relaxed);
    wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
  mote::mpi::stats snapshot() const noexcept;

  // The longest spacing of idle polls (and sleeps between them).
  static constexpr std::int64_t kMaxGapNs = 1'000'000;

 private:
  struct entry {
    ticket* owner;
    MPI_Status* status;   // nullptr: ignored
    std::uint32_t index;  // its place in its ticket's binding
  };

  // Idle polls are spaced by this much once nothing has completed (nor been
  // added) for a while: a sixteenth of that while, capped at kMaxGapNs.
  std::int64_t gap_ns(std::int64_t now) const noexcept;
  // Merges the requests handed in since the last poll (under poll_mutex_).
  void take_incoming() noexcept;
  // Records request `e`'s completion with status st (error err) in its
  // ticket; true when the ticket is complete (under poll_mutex_).
  bool complete(const entry& e, const MPI_Status& st, int err) noexcept;
  // What a complete ticket releases (outside the lock, or inside it when
  // there is no memory to list it).
  static void release(ticket* t) noexcept;

  mote::detail::work_source source_;
  std::int64_t interval_ns_;

  // Handed in, not yet seen by a poll. incoming_size_ lets a poll skip the
  // mutex when nothing came (relaxed: a stale zero defers them one poll).
  std::mutex incoming_mutex_;
  std::vector<MPI_Request> incoming_requests_;
  std::vector<entry> incoming_entries_;
  std::atomic<std::size_t> incoming_size_{0};

  // The poller's arrays, in step, under poll_mutex_.
  std::mutex poll_mutex_;
  std::vector<MPI_Request> requests_;
  std::vector<entry> entries_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;

  // The last completion or addition, and the last idle poll (relaxed:
  // they only space polls out).
  std::atomic<std::int64_t> last_progress_ns_{0};
  std::atomic<std::int64_t> last_idle_poll_ns_{0};

  // Counters (relaxed, but for the seq_cst increment of outstanding_ in
  // add()). outstanding_ is also pending()'s answer: a worker about to sleep
  // sleeps with a timeout while it is nonzero.
  std::atomic<std::uint64_t> outstanding_{0};
  std::atomic<std::uint64_t> requests_total_{0};
  std::atomic<std::uint64_t> failed_{0};
  std::atomic<std::uint64_t> polls_{0};
  std::atomic<std::uint64_t> busy_polls_{0};
  std::atomic<std::uint64_t> waits_{0};
  std::atomic<std::int64_t> wait_ns_{0};
};

// MPI's message for an error code.
std::string error_string(int code);
// Throws mote::mpi::error for rc != MPI_SUCCESS, naming the call.
inline void check(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw mote::mpi::error(std::string(call) + ": " + error_string(rc), rc);
}

}  // namespace mote::mpi::detail
