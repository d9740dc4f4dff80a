// mote::mpi's entry points (include/mote/mpi.hpp): initialisation and the
// attachment of the polling service, the blocking and the non-blocking
// waits. docs/mpi.md has the guide.
#include "mote/mpi.hpp"

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <vector>

#include "mote/dataflow.hpp"
#include "mote/detail/dataflow_records.hpp"
#include "mote/detail/platform.hpp"
#include "mote/detail/work_source.hpp"
#include "mote/detail/worker.hpp"
#include "mote/error.hpp"
#include "mote/runtime.hpp"
#include "mote/trace.hpp"
#include "mpi/service.hpp"

namespace mote::mpi {

namespace {

using detail::check;
using detail::service;
using detail::ticket;

constexpr std::int64_t kDefaultPollUs = 50;
constexpr unsigned kTraceMpiWait = 4;  // wait_begin's aux for an MPI wait (trace.hpp)

// The attached service and its runtime: set by attach(), cleared by
// detach(), which the program orders before and after every other call (as
// MPI_Init and MPI_Finalize are). Acquire / release so that a thread that
// sees the pointer sees the service built.
std::atomic<service*> g_service{nullptr};
std::atomic<runtime*> g_runtime{nullptr};
bool g_initialised_mpi = false;  // by init(): finalize() finalises it (main thread)

const char* level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "an unknown thread level";
  }
}

// MOTE_MPI_POLL_US: microseconds, 1 to 1 000 000.
std::int64_t poll_interval_ns() {
  const char* v = std::getenv("MOTE_MPI_POLL_US");
  if (v == nullptr || *v == '\0') return kDefaultPollUs * 1000;
  char* end = nullptr;
  errno = 0;
  const long long us = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || us < 1 || us > 1'000'000) {
    throw config_error(std::string("MOTE_MPI_POLL_US=\"") + v +
                       "\" is not a polling interval in microseconds from 1 to 1000000");
  }
  return static_cast<std::int64_t>(us) * 1000;
}

// The worker of the attached runtime that the calling thread is, or nullptr
// (a thread outside it, which blocks in MPI instead).
mote::detail::worker* attached_worker(service*& svc) noexcept {
  svc = g_service.load(std::memory_order_acquire);
  mote::detail::worker* w = mote::detail::current_worker;
  if (svc == nullptr || w == nullptr) return nullptr;
  runtime* rt = g_runtime.load(std::memory_order_relaxed);  // ordered by g_service's acquire
  return runtime::current() == rt ? w : nullptr;
}

void set_empty(MPI_Status* status) {
  // MPI_Wait's status for a null request: "empty" (source and tag ANY).
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  status->MPI_ERROR = MPI_SUCCESS;
}

// Outside a worker, or complete already: MPI's own wait, traced as an MPI
// wait on a thread's buffer when tracing.
void block_in_mpi(std::span<MPI_Request> requests, MPI_Status* statuses, service* svc) {
  mote::detail::trace_buffer* trace = mote::detail::outside_trace_buffer();
  if (trace != nullptr) trace->put(mote::detail::trace_kind::wait_begin, kTraceMpiWait);
  const std::int64_t start = mote::detail::now_ns();
  const int rc = MPI_Waitall(static_cast<int>(requests.size()), requests.data(), statuses);
  if (svc != nullptr) svc->note_wait(mote::detail::now_ns() - start);
  if (trace != nullptr) trace->put(mote::detail::trace_kind::wait_end);
  if (rc == MPI_ERR_IN_STATUS && statuses != MPI_STATUSES_IGNORE) {
    for (std::size_t i = 0; i < requests.size(); ++i) check(statuses[i].MPI_ERROR, "MPI_Waitall");
  }
  check(rc, "MPI_Waitall");
}

// The requests still pending, with where each one's status goes, or false
// when all are complete already (or null): Testall then filled every
// status, and touched nothing otherwise. A null request's status is set
// empty here, as MPI_Waitall would.
bool pending_requests(std::span<MPI_Request> requests, MPI_Status* statuses, std::vector<MPI_Request>& live,
                      std::vector<const MPI_Status*>& where) {
  int flag = 0;
  check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, statuses), "MPI_Testall");
  if (flag != 0) return false;
  live.reserve(requests.size());
  where.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i] == MPI_REQUEST_NULL) {
      if (statuses != MPI_STATUSES_IGNORE) set_empty(&statuses[i]);
      continue;
    }
    live.push_back(requests[i]);
    where.push_back(statuses != MPI_STATUSES_IGNORE ? &statuses[i] : nullptr);
  }
  return true;
}

// The blocking wait of a worker: the requests go to the service, and the
// worker runs other tasks until the service has seen them all complete.
void wait_on_worker(std::span<MPI_Request> requests, MPI_Status* statuses, service& svc,
                    mote::detail::worker& w) {
  // Complete already (or null): no hand-over.
  std::vector<MPI_Request> live;
  std::vector<const MPI_Status*> where;
  if (!pending_requests(requests, statuses, live, where)) return;
  ticket t;
  t.remaining = static_cast<std::uint32_t>(live.size());
  t.waiter = &w;
  svc.add(live.data(), where.data(), t.remaining, &t);
  for (MPI_Request& r : requests) r = MPI_REQUEST_NULL;
  const std::int64_t start = mote::detail::now_ns();
  mote::detail::help_until(
      w,
      [](const void* p) noexcept {
        // Acquire: pairs with the poller's release store; its writes of the
        // statuses and the error are ours.
        return static_cast<const ticket*>(p)->done.load(std::memory_order_acquire);
      },
      &t, kTraceMpiWait);
  svc.note_wait(mote::detail::now_ns() - start);
  if (t.error != MPI_SUCCESS) throw error("mote::mpi::wait: " + detail::error_string(t.error), t.error);
}

void do_waitall(std::span<MPI_Request> requests, MPI_Status* statuses) {
  service* svc = nullptr;
  if (mote::detail::worker* w = attached_worker(svc)) {
    wait_on_worker(requests, statuses, *svc, *w);
  } else {
    block_in_mpi(requests, statuses, svc);
  }
}

void do_iwaitall(std::span<MPI_Request> requests, MPI_Status* statuses) {
  service* svc = g_service.load(std::memory_order_acquire);
  if (svc == nullptr || mote::detail::df_current_task() == nullptr) {
    // Outside a data-flow task's body there is no task end to defer: the
    // completion the caller asked to be ordered after comes first.
    do_waitall(requests, statuses);
    return;
  }
  std::vector<MPI_Request> live;
  std::vector<const MPI_Status*> where;
  if (!pending_requests(requests, statuses, live, where)) return;
  auto t = std::make_unique<ticket>();
  t->remaining = static_cast<std::uint32_t>(live.size());
  t->event = dataflow_event::open();
  try {
    svc->add(live.data(), where.data(), t->remaining, t.get());
  } catch (...) {
    t->event.fulfill();  // the requests stay the caller's
    throw;
  }
  for (MPI_Request& r : requests) r = MPI_REQUEST_NULL;
  if (mote::detail::worker* w = mote::detail::current_worker) {
    if (MOTE_UNLIKELY(w->trace() != nullptr)) w->trace()->put(mote::detail::trace_kind::mpi_iwait, live.size());
  }
  (void)t.release();  // the service's now: deleted at the release
}

}  // namespace

void init(int* argc, char*** argv) { init(argc, argv, runtime::default_runtime()); }

void init(int* argc, char*** argv, runtime& rt) {
  (void)poll_interval_ns();  // a bad MOTE_MPI_POLL_US fails before MPI starts
  int provided = 0;
  check(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
  if (provided < MPI_THREAD_MULTIPLE) {
    MPI_Finalize();
    throw config_error(std::string("mote::mpi::init: the MPI library provides ") + level_name(provided) +
                       "; mote::mpi needs MPI_THREAD_MULTIPLE (workers call MPI concurrently)");
  }
  g_initialised_mpi = true;
  try {
    attach(rt);
  } catch (...) {
    g_initialised_mpi = false;
    MPI_Finalize();
    throw;
  }
}

void attach(runtime& rt) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (initialised == 0) throw usage_error("mote::mpi::attach: MPI is not initialised (mote::mpi::init does both)");
  int provided = 0;
  check(MPI_Query_thread(&provided), "MPI_Query_thread");
  if (provided < MPI_THREAD_MULTIPLE) {
    throw config_error(std::string("mote::mpi::attach: MPI was initialised with ") + level_name(provided) +
                       "; mote::mpi needs MPI_THREAD_MULTIPLE (MPI_Init_thread)");
  }
  if (g_service.load(std::memory_order_acquire) != nullptr) {
    throw usage_error("mote::mpi::attach: the MPI service is attached already (detach it first)");
  }
  auto svc = std::make_unique<service>(poll_interval_ns());
  int rank = 0;
  check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  mote::trace::set_file_rank(rank);
  mote::detail::attach_work_source(rt, svc->source());
  g_runtime.store(&rt, std::memory_order_relaxed);
  // Release: see g_service.
  g_service.store(svc.release(), std::memory_order_release);
}

void detach() {
  service* svc = g_service.load(std::memory_order_acquire);
  if (svc == nullptr) return;
  if (svc->pending()) {
    throw usage_error("mote::mpi::detach: requests are still outstanding (wait for the data-flow scopes "
                      "and the blocking waits that use them first)");
  }
  runtime* rt = g_runtime.load(std::memory_order_relaxed);
  mote::detail::detach_work_source(*rt, svc->source());
  g_service.store(nullptr, std::memory_order_release);
  g_runtime.store(nullptr, std::memory_order_relaxed);
  const int err = svc->take_async_error();
  delete svc;
  if (err != MPI_SUCCESS) {
    throw error("mote::mpi: a request bound with iwait failed: " + detail::error_string(err), err);
  }
}

void finalize() {
  detach();
  if (g_initialised_mpi) {
    g_initialised_mpi = false;
    check(MPI_Finalize(), "MPI_Finalize");
  }
}

void wait(MPI_Request& request, MPI_Status* status) {
  if (request == MPI_REQUEST_NULL) {
    set_empty(status);
    return;
  }
  do_waitall(std::span<MPI_Request>(&request, 1), status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status);
}

void waitall(std::span<MPI_Request> requests, MPI_Status* statuses) {
  if (requests.empty()) return;
  do_waitall(requests, statuses);
}

void recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Irecv(buf, count, type, source, tag, comm, &r), "MPI_Irecv");
  wait(r, status);
}

void send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Isend(buf, count, type, dest, tag, comm, &r), "MPI_Isend");
  wait(r);
}

void iwait(MPI_Request& request, MPI_Status* status) {
  if (request == MPI_REQUEST_NULL) {
    set_empty(status);
    return;
  }
  do_iwaitall(std::span<MPI_Request>(&request, 1), status == MPI_STATUS_IGNORE ? MPI_STATUSES_IGNORE : status);
}

void iwaitall(std::span<MPI_Request> requests, MPI_Status* statuses) {
  if (requests.empty()) return;
  do_iwaitall(requests, statuses);
}

stats get_stats() noexcept {
  service* svc = g_service.load(std::memory_order_acquire);
  return svc != nullptr ? svc->snapshot() : stats{};
}

}  // namespace mote::mpi
