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
// blocking wait's flag (the ticket lives in the waiter's frame).
struct ticket {
  // Requests not complete yet. Written by the poller, under the poll lock.
  std::uint32_t remaining = 0;
  // The first failed request's MPI error code. Under the poll lock, read by
  // the waiter after `done` (acquire) or by detach().
  int error = MPI_SUCCESS;
  // iwait: fulfilled at the end; empty for a blocking wait.
  dataflow_event event;
  // A blocking wait: set when remaining reaches 0; the worker to wake.
  std::atomic<bool> done{false};
  mote::detail::worker* waiter = nullptr;
};

class service {
 public:
  explicit service(std::int64_t interval_ns);
  service(const service&) = delete;
  service& operator=(const service&) = delete;

  mote::detail::work_source* source() noexcept { return &source_; }

  // Hands the service n requests of ticket t (whose `remaining` counts them);
  // statuses (or nullptr) receive their statuses at completion. The caller
  // then sets its handles to MPI_REQUEST_NULL. Any thread. Throws
  // std::bad_alloc, having taken none of them.
  void add(const MPI_Request* requests, const MPI_Status* const* statuses, std::uint32_t n, ticket* t);

  // One MPI_Testsome over every pending request, and the releases it makes
  // due. Any thread; one at a time (a caller that finds another polling
  // returns false at once). True when something completed.
  bool poll(bool busy) noexcept;
  bool pending() const noexcept { return outstanding_.load(std::memory_order_relaxed) != 0; }

  // The first error of a request whose ticket was an event (nobody waits
  // for it to throw), or MPI_SUCCESS. Under the poll lock.
  int take_async_error() noexcept;

  void note_wait(std::int64_t ns) noexcept {
    // Relaxed: counters, read as a snapshot.
    waits_.fetch_add(1, std::memory_order_relaxed);
    wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
  mote::mpi::stats snapshot() const noexcept;

 private:
  struct entry {
    ticket* owner;
    MPI_Status* status;  // nullptr: ignored
  };

  mote::detail::work_source source_;

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
  int async_error_ = MPI_SUCCESS;

  // Counters (relaxed). outstanding_ is also pending()'s answer: a worker
  // about to sleep sleeps with a timeout while it is nonzero.
  std::atomic<std::uint64_t> outstanding_{0};
  std::atomic<std::uint64_t> requests_total_{0};
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
