// mote::mpi's entry points (include/mote/mpi.hpp): initialisation, the
// placement of the rank on its share of the node, the attachment of the
// polling service, the blocking and the non-blocking waits. docs/mpi.md has
// the guide.
#include "mote/mpi.hpp"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
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
#include "mote/topology.hpp"
#include "mote/trace.hpp"
#include "mpi/service.hpp"

namespace mote::mpi {

namespace {

using detail::check;
using detail::service;
using detail::ticket;

constexpr std::int64_t kDefaultPollUs = 50;
constexpr unsigned kTraceMpiWait = 4;  // wait_begin's aux for an MPI wait (trace.hpp)
// The priority mote::mpi gives the kinds of task that call iwait (and so the
// tasks that feed them): above ordinary tasks, below what users may choose.
constexpr std::uint8_t kMessagePriority = 1;

// The attached service and its runtime: set by attach(), cleared by
// detach(), which the program orders before and after every other call (as
// MPI_Init and MPI_Finalize are). Acquire / release so that a thread that
// sees the pointer sees the service built.
std::atomic<service*> g_service{nullptr};
std::atomic<runtime*> g_runtime{nullptr};
bool g_initialised_mpi = false;  // by init(): finalize() finalises it (main thread)
// The MPI_COMM_SELF attribute whose deletion, the first step of
// MPI_Finalize, detaches a service still attached (main thread).
int g_finalize_keyval = MPI_KEYVAL_INVALID;

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

// ---- Placement -----------------------------------------------------------------

// The CPUs the calling thread may run on, ascending.
std::vector<int> thread_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// This rank's share of its node: its affinity mask, split with the other
// ranks of the node whose masks overlap it (all of them when the launcher
// bound nobody; none when it gave each its own CPUs), by whole cores, in
// node-rank order; with fewer cores than such ranks, several share a core.
// Collective over MPI_COMM_WORLD.
std::vector<int> node_share() {
  std::vector<int> mine = thread_cpus();  // returned as is when the rank does not share
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  int local = 0, locals = 1;
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &locals);
  const int top = mine.empty() ? 0 : mine.back() + 1;
  int width = 0;
  int rc = MPI_Allreduce(&top, &width, 1, MPI_INT, MPI_MAX, node);
  std::vector<unsigned char> bits(static_cast<std::size_t>(std::max(width, 1)), 0);
  std::vector<unsigned char> all(bits.size() * static_cast<std::size_t>(locals), 0);
  for (int c : mine) bits[static_cast<std::size_t>(c)] = 1;
  if (rc == MPI_SUCCESS) {
    rc = MPI_Allgather(bits.data(), static_cast<int>(bits.size()), MPI_UNSIGNED_CHAR, all.data(),
                       static_cast<int>(bits.size()), MPI_UNSIGNED_CHAR, node);
  }
  MPI_Comm_free(&node);
  check(rc, "mote::mpi placement (MPI_Allreduce / MPI_Allgather on the node)");
  int sharing = 0, index = 0;
  for (int r = 0; r < locals; ++r) {
    bool overlaps = false;
    for (std::size_t c = 0; c < bits.size(); ++c) {
      if (bits[c] != 0 && all[static_cast<std::size_t>(r) * bits.size() + c] != 0) overlaps = true;
    }
    if (!overlaps) continue;
    if (r < local) ++index;
    ++sharing;
  }
  if (sharing <= 1) return mine;
  // The mask's cores (topology::system() is the calling thread's mask's).
  const topology& topo = topology::system();
  std::vector<std::vector<int>> cores;
  for (const cpu_info& c : topo.cpus) {
    if (cores.size() <= static_cast<std::size_t>(c.core)) cores.resize(static_cast<std::size_t>(c.core) + 1);
    cores[static_cast<std::size_t>(c.core)].push_back(c.os_index);
  }
  cores.erase(std::remove_if(cores.begin(), cores.end(), [](const std::vector<int>& v) { return v.empty(); }),
              cores.end());
  const auto n = static_cast<int>(cores.size());
  if (n == 0) return mine;
  const int lo = index * n / sharing;
  const int hi = std::max(lo + 1, (index + 1) * n / sharing);
  std::vector<int> share;
  for (int k = lo; k < hi && k < n; ++k) share.insert(share.end(), cores[k].begin(), cores[k].end());
  std::sort(share.begin(), share.end());
  return share;
}

// Places the calling thread on its share of the node (its mask narrowed to
// it, so that threads and runtimes it makes later stay there) and returns
// one CPU per core of the share, for the workers; empty when MOTE_BIND
// chose the placement. Collective over MPI_COMM_WORLD.
std::vector<int> place_this_thread() {
  const char* bind = std::getenv("MOTE_BIND");
  if (bind != nullptr && *bind != '\0') return {};
  const std::vector<int> share = node_share();
  if (share.empty()) return {};
  if (share != thread_cpus()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : share) CPU_SET(c, &set);
    (void)sched_setaffinity(0, sizeof set, &set);  // refused: the workers are still placed below
  }
  std::vector<int> cycle;
  for (const cpu_info& c : topology::system().cpus) {
    if (c.smt_rank == 0 && std::find(share.begin(), share.end(), c.os_index) != share.end()) {
      cycle.push_back(c.os_index);
    }
  }
  return cycle.empty() ? share : cycle;
}

// ---- Attachment ------------------------------------------------------------------

// Detaches svc (attached to rt) and deletes it: nothing may be outstanding.
void detach_now(service* svc) noexcept {
  runtime* rt = g_runtime.load(std::memory_order_relaxed);
  mote::detail::detach_work_source(*rt, svc->source());
  g_service.store(nullptr, std::memory_order_release);
  g_runtime.store(nullptr, std::memory_order_relaxed);
  delete svc;
}

// MPI_Finalize deletes MPI_COMM_SELF's attributes first: a service still
// attached then lets go of its requests (their tasks fail) and detaches, so
// that no worker polls a finalised MPI.
int on_finalize(MPI_Comm, int, void*, void*) {
  service* svc = g_service.load(std::memory_order_acquire);
  if (svc == nullptr) return MPI_SUCCESS;
  const std::uint64_t abandoned = svc->abandon_all("MPI_Finalize");
  if (abandoned != 0) {
    std::fprintf(stderr,
                 "mote::mpi: MPI_Finalize with %llu request(s) still outstanding: cancelled and freed; the tasks "
                 "bound to them failed (wait for the data-flow scopes, then call mote::mpi::finalize)\n",
                 static_cast<unsigned long long>(abandoned));
  }
  detach_now(svc);
  return MPI_SUCCESS;
}

void ensure_finalize_hook() {
  if (g_finalize_keyval != MPI_KEYVAL_INVALID) return;
  check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &on_finalize, &g_finalize_keyval, nullptr),
        "MPI_Comm_create_keyval");
  check(MPI_Comm_set_attr(MPI_COMM_SELF, g_finalize_keyval, nullptr), "MPI_Comm_set_attr");
}

// ---- Waiting -------------------------------------------------------------------

// Is w a worker of the runtime the service is attached to (which polls it)?
bool of_attached(const mote::detail::worker* w) noexcept {
  return w != nullptr && runtime::current() == g_runtime.load(std::memory_order_relaxed);
}

[[noreturn]] void no_service(const char* call) {
  throw usage_error(std::string(call) +
                    ": called inside a task with no MPI service attached (mote::mpi::init, or mote::mpi::attach "
                    "after MPI_Init_thread with MPI_THREAD_MULTIPLE): the worker would block in MPI_Waitall, and "
                    "with one worker per rank the exchange deadlocks");
}

void set_empty(MPI_Status* status) {
  // MPI_Wait's status for a null request: "empty" (source and tag ANY).
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  status->MPI_ERROR = MPI_SUCCESS;
}

// The first failed request among statuses (an MPI_ERR_IN_STATUS answer),
// as the error of a ticket that held them.
[[noreturn]] void throw_in_status(const MPI_Status* st, std::size_t n, const char* call) {
  ticket t;
  t.count = static_cast<std::uint32_t>(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int e = st[i].MPI_ERROR;
    if (e == MPI_SUCCESS || e == MPI_ERR_PENDING) continue;
    if (t.failures++ == 0) {
      t.error = e;
      t.failed_index = static_cast<std::uint32_t>(i);
      t.failed_source = st[i].MPI_SOURCE;
      t.failed_tag = st[i].MPI_TAG;
    }
  }
  if (t.failures == 0) check(MPI_ERR_IN_STATUS, call);
  throw detail::ticket_error(t, call);
}

// Off a worker: MPI's own wait, traced as an MPI wait on a thread's buffer
// when tracing.
void block_in_mpi(std::span<MPI_Request> requests, MPI_Status* statuses, service* svc, const char* call) {
  mote::detail::trace_buffer* trace = mote::detail::outside_trace_buffer();
  std::vector<MPI_Status> own;
  if (statuses == MPI_STATUSES_IGNORE) {
    own.resize(requests.size());
    statuses = own.data();
  }
  if (trace != nullptr) trace->put(mote::detail::trace_kind::wait_begin, kTraceMpiWait);
  const std::int64_t start = mote::detail::now_ns();
  const int rc = MPI_Waitall(static_cast<int>(requests.size()), requests.data(), statuses);
  if (svc != nullptr) svc->note_wait(mote::detail::now_ns() - start);
  if (trace != nullptr) trace->put(mote::detail::trace_kind::wait_end);
  if (rc == MPI_ERR_IN_STATUS) throw_in_status(statuses, requests.size(), call);
  check(rc, "MPI_Waitall");
}

// The requests still pending, with where each one's status goes, or false
// when all are complete already (or null): Testall then filled every
// status. A request that completed with an error throws mote::mpi::error
// naming it (the complete ones are consumed, as MPI_Testall consumes them;
// the pending ones stay the caller's). A null request's status is set empty
// here, as MPI_Waitall would.
bool pending_requests(std::span<MPI_Request> requests, MPI_Status* statuses, std::vector<MPI_Request>& live,
                      std::vector<const MPI_Status*>& where, const char* call) {
  constexpr std::size_t kInline = 8;
  MPI_Status inline_st[kInline];
  std::vector<MPI_Status> heap_st;
  MPI_Status* st = statuses;
  if (statuses == MPI_STATUSES_IGNORE) {
    if (requests.size() <= kInline) {
      st = inline_st;
    } else {
      heap_st.resize(requests.size());
      st = heap_st.data();
    }
  }
  int flag = 0;
  const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag, st);
  if (rc == MPI_ERR_IN_STATUS) throw_in_status(st, requests.size(), call);
  check(rc, "MPI_Testall");
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

// The blocking wait of a worker (of any runtime): the requests go to the
// service, and the worker runs other tasks of its runtime until the service
// has seen them all complete.
void wait_on_worker(std::span<MPI_Request> requests, MPI_Status* statuses, service& svc,
                    mote::detail::worker& w) {
  // Complete already (or null): no hand-over.
  std::vector<MPI_Request> live;
  std::vector<const MPI_Status*> where;
  if (!pending_requests(requests, statuses, live, where, "mote::mpi::wait")) return;
  ticket t;
  t.remaining = t.count = static_cast<std::uint32_t>(live.size());
  t.waiter = &w;
  svc.add(live.data(), where.data(), t.remaining, &t);
  for (MPI_Request& r : requests) r = MPI_REQUEST_NULL;
  // The attached runtime's workers poll; they may all sleep without a
  // timeout when this is another runtime's worker.
  if (!of_attached(&w)) mote::detail::source_work_added(*g_runtime.load(std::memory_order_relaxed));
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
  if (t.error != MPI_SUCCESS) throw detail::ticket_error(t, "mote::mpi::wait");
}

void do_waitall(std::span<MPI_Request> requests, MPI_Status* statuses) {
  service* svc = g_service.load(std::memory_order_acquire);
  if (mote::detail::worker* w = mote::detail::current_worker) {
    if (svc == nullptr) no_service("mote::mpi::wait");
    wait_on_worker(requests, statuses, *svc, *w);
  } else {
    block_in_mpi(requests, statuses, svc, "mote::mpi::wait");
  }
}

void do_iwaitall(std::span<MPI_Request> requests, MPI_Status* statuses) {
  service* svc = g_service.load(std::memory_order_acquire);
  mote::detail::worker* w = mote::detail::current_worker;
  if (svc == nullptr && (w != nullptr || mote::detail::df_current_task() != nullptr)) no_service("mote::mpi::iwait");
  if (svc == nullptr || mote::detail::df_current_task() == nullptr) {
    // Outside a data-flow task's body there is no task end to defer: the
    // completion the caller asked to be ordered after comes first.
    do_waitall(requests, statuses);
    return;
  }
  // Tasks of this kind (and the tasks that feed them) start or complete
  // communication: from now on they run before ordinary tasks. Whether or
  // not this request is complete already (a small send usually is).
  mote::detail::df_mark_current_urgent(kMessagePriority);
  std::vector<MPI_Request> live;
  std::vector<const MPI_Status*> where;
  if (!pending_requests(requests, statuses, live, where, "mote::mpi::iwait")) return;
  auto t = std::make_unique<ticket>();
  t->remaining = t->count = static_cast<std::uint32_t>(live.size());
  t->event = dataflow_event::open();
  try {
    svc->add(live.data(), where.data(), t->remaining, t.get());
  } catch (...) {
    t->event.fulfill();  // the requests stay the caller's
    throw;
  }
  for (MPI_Request& r : requests) r = MPI_REQUEST_NULL;
  if (of_attached(w)) {
    // This worker polls right after the task: the transfer moves on, and
    // what completed meanwhile releases its successors.
    mote::detail::poll_after_task();
  } else {
    mote::detail::source_work_added(*g_runtime.load(std::memory_order_relaxed));
  }
  if (w != nullptr && MOTE_UNLIKELY(w->trace() != nullptr)) {
    w->trace()->put(mote::detail::trace_kind::mpi_iwait, live.size());
  }
  (void)t.release();  // the service's now: deleted at the release
}

}  // namespace

void init(int* argc, char*** argv) {
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
    // The share first, so that the default runtime, made now if nobody made
    // it yet, has a worker per core of it.
    (void)place_this_thread();
    attach(runtime::default_runtime());
  } catch (...) {
    g_initialised_mpi = false;
    MPI_Finalize();
    throw;
  }
}

void init(int* argc, char*** argv, runtime& rt) {
  (void)poll_interval_ns();
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
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized != 0) throw usage_error("mote::mpi::attach: MPI is finalised already");
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
  // Every rank of the node on its own share of it (collective).
  const std::vector<int> cpus = place_this_thread();
  if (!cpus.empty()) (void)mote::detail::place_workers(rt, cpus);
  ensure_finalize_hook();
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
  detach_now(svc);
}

void finalize() {
  std::uint64_t abandoned = 0;
  if (service* svc = g_service.load(std::memory_order_acquire)) {
    abandoned = svc->abandon_all("mote::mpi::finalize");
    detach_now(svc);
  }
  int rc = MPI_SUCCESS;
  if (g_initialised_mpi) {
    g_initialised_mpi = false;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized == 0) rc = MPI_Finalize();
  }
  if (abandoned != 0) {
    throw usage_error("mote::mpi::finalize: " + std::to_string(abandoned) +
                      " request(s) were still outstanding (a data-flow scope not waited for, a wait on "
                      "another thread): they were cancelled and freed, the tasks bound to them failed, and "
                      "MPI was finalised");
  }
  check(rc, "MPI_Finalize");
}

void wait(MPI_Request& request, MPI_Status* status) {
  if (request == MPI_REQUEST_NULL) {
    if (mote::detail::current_worker != nullptr && g_service.load(std::memory_order_acquire) == nullptr) {
      no_service("mote::mpi::wait");
    }
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
  if (mote::detail::current_worker != nullptr && g_service.load(std::memory_order_acquire) == nullptr) {
    no_service("mote::mpi::recv");
  }
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Irecv(buf, count, type, source, tag, comm, &r), "MPI_Irecv");
  wait(r, status);
}

void send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (mote::detail::current_worker != nullptr && g_service.load(std::memory_order_acquire) == nullptr) {
    no_service("mote::mpi::send");
  }
  MPI_Request r = MPI_REQUEST_NULL;
  check(MPI_Isend(buf, count, type, dest, tag, comm, &r), "MPI_Isend");
  wait(r);
}

void iwait(MPI_Request& request, MPI_Status* status) {
  if (request == MPI_REQUEST_NULL) {
    if (g_service.load(std::memory_order_acquire) == nullptr &&
        (mote::detail::current_worker != nullptr || mote::detail::df_current_task() != nullptr)) {
      no_service("mote::mpi::iwait");
    }
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
