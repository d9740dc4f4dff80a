// Task-aware MPI: MPI calls inside mote tasks that do not block the worker
// (libmote_mpi, target mote::mote_mpi; built when MPI is found). docs/mpi.md
// has the guide.
//
// Two modes, as TAMPI gives OmpSs-2 and OpenMP:
//  - blocking: mote::mpi::wait / waitall / recv / send inside a task keep the
//    worker running other ready tasks until the request completes (as a join
//    whose partner was stolen does), instead of blocking the core;
//  - non-blocking: mote::mpi::iwait / iwaitall inside a data-flow task tie the
//    release of the task's accesses to the requests' completion and return at
//    once: successors that read a received buffer run only once it arrived.
// One polling service (MPI_Testsome over every pending request, in one batch)
// is attached to the runtime as a work source: idle workers poll between
// looks for tasks (spaced out, and sleeping between polls, once nothing has
// completed for a while), a busy worker polls when MOTE_MPI_POLL_US (default
// 50) has passed since the last poll and right after a task that called
// iwait; no thread of its own.
//
//   int main(int argc, char** argv) {
//     mote::mpi::init(&argc, &argv);                 // MPI_THREAD_MULTIPLE, attached
//     double halo[64];
//     mote::dataflow df;
//     df.spawn(mote::out(halo), [&] {
//       MPI_Request r;
//       MPI_Irecv(halo, 64, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, &r);
//       mote::mpi::iwait(r);                         // returns now; halo's readers wait
//     });
//     df.spawn(mote::in(halo), [&] { use(halo); });  // runs once the message is in
//     df.wait();
//     mote::mpi::finalize();
//   }
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "mote/export.hpp"

namespace mote {
class runtime;
}  // namespace mote

namespace mote::mpi {

// An MPI call that returned an error (under an error handler that returns,
// such as MPI_ERRORS_RETURN; the default handler aborts first). what() holds
// the call and MPI's error string; code() the MPI error code.
//
//   try { mote::mpi::send(p, 1, MPI_INT, 99, 0, comm); } catch (const mote::mpi::error& e) { ... }
class MOTE_API error : public std::runtime_error {
 public:
  error(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
  int code() const noexcept { return code_; }

 private:
  int code_;
};

// Initialises MPI with MPI_THREAD_MULTIPLE (MPI_Init_thread), places this
// rank on its share of the node (see attach) and attaches the polling
// service to rt; without rt, to the default runtime, made after the
// placement (one worker per core of the share) unless it existed already.
// Throws mote::config_error naming the level the library provided when it
// is less than MPI_THREAD_MULTIPLE (MPI is finalised again then), or when
// MOTE_MPI_POLL_US cannot be parsed. Main thread, once, on every rank.
//
//   mote::mpi::init(&argc, &argv);
MOTE_API void init(int* argc, char*** argv);
MOTE_API void init(int* argc, char*** argv, runtime& rt);

// For a program that initialised MPI itself: checks MPI_Query_thread (
// config_error below MPI_THREAD_MULTIPLE), reads MOTE_MPI_POLL_US, places
// the rank and attaches the polling service to rt. One runtime at a time
// (usage_error otherwise). Also sets the trace file's rank
// (trace::set_file_rank). Collective over MPI_COMM_WORLD (every rank calls
// it): the ranks of one node whose CPU masks overlap (all of them, when the
// launcher bound none) split the CPUs of their mask between them by whole
// cores, in node-rank order; the calling thread's mask is narrowed to the
// share and rt's workers are pinned on it, one per core in turn, unless
// MOTE_BIND (or runtime_options::bind) placed them. docs/mpi.md, "Placement".
//
//   MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
//   mote::mpi::attach(rt);
MOTE_API void attach(runtime& rt);
// Detaches the service. Throws usage_error while requests are outstanding
// (a data-flow scope not waited for, a blocking wait on another thread),
// and leaves it attached then.
MOTE_API void detach();
// Detaches the service and calls MPI_Finalize when init() initialised MPI:
// MPI is finalised whatever happens. Requests still outstanding are
// cancelled and freed, what they were bound to fails (an iwait's task, a
// blocking wait), and then it throws usage_error saying how many. A plain
// MPI_Finalize() does the same (the service detaches first, through an
// attribute of MPI_COMM_SELF), and says so on stderr instead of throwing.
MOTE_API void finalize();

// Waits for the request; sets it to MPI_REQUEST_NULL (as MPI_Wait). On a
// worker (of any runtime) the worker runs other tasks meanwhile, while the
// attached runtime's workers poll; on any other thread it is MPI_Wait.
// Throws mote::mpi::error when the request failed (its code, and which
// request, its envelope and MPI's message in what()). On a worker with no
// service attached it throws usage_error (a worker blocked in MPI would
// deadlock a rank of one worker), leaving the request the caller's.
//
//   MPI_Request r;
//   MPI_Irecv(buf, n, MPI_DOUBLE, src, tag, comm, &r);
//   mote::mpi::wait(r);            // inside a task: other tasks run meanwhile
MOTE_API void wait(MPI_Request& request, MPI_Status* status = MPI_STATUS_IGNORE);
// As wait, for every request (MPI_REQUEST_NULL entries are skipped).
// statuses: one per request, or MPI_STATUSES_IGNORE.
//
//   MPI_Request rs[2];  ...  mote::mpi::waitall(rs);
MOTE_API void waitall(std::span<MPI_Request> requests, MPI_Status* statuses = MPI_STATUSES_IGNORE);

// MPI_Recv and MPI_Send through wait(): the worker runs other tasks while the
// message travels.
//
//   mote::mpi::recv(buf, n, MPI_DOUBLE, src, tag, comm);
MOTE_API void recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
                   MPI_Status* status = MPI_STATUS_IGNORE);
MOTE_API void send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm);

// Binds the request to the end of the running data-flow task: the task's
// accesses are released (and dataflow::wait counts it finished) only once
// the request has completed; returns at once. The request is set to
// MPI_REQUEST_NULL now (the service owns it); *status, when given, is written
// at completion and must live until then (a variable the task's accesses
// cover, typically). A request complete already binds nothing. Outside a
// data-flow task's body it is wait() (the caller cannot go on before the
// completion it asked to be ordered after).
//
// A request that fails fails its task as a throw would: its successors are
// skipped and the scope's wait throws mote::mpi::error with the request's
// own code (if no other exception came first); one that failed already is
// thrown from iwait itself. Tasks that call iwait mark their kind of task:
// later tasks of that kind, and the tasks they directly depend on, get
// priority 1 (mote::priority), so that message tasks and the tasks that feed
// them are not left behind compute tasks readied after them; the worker
// polls right after such a task. With no service attached, iwait inside a
// task is a usage_error (see wait).
//
//   df.spawn(mote::out(buf), [&] {
//     MPI_Request r;
//     MPI_Irecv(buf, n, MPI_DOUBLE, src, tag, comm, &r);
//     mote::mpi::iwait(r);
//   });
MOTE_API void iwait(MPI_Request& request, MPI_Status* status = MPI_STATUS_IGNORE);
// As iwait, for every request (one binding for all).
//
//   MPI_Request rs[2] = {send_up, recv_down};
//   mote::mpi::iwaitall(rs);
MOTE_API void iwaitall(std::span<MPI_Request> requests, MPI_Status* statuses = MPI_STATUSES_IGNORE);

// Counters of the service since attach (any thread; a relaxed snapshot).
struct stats {
  std::uint64_t requests = 0;      // requests handed to the service (not those complete at once)
  std::uint64_t outstanding = 0;   // of which not complete yet
  std::uint64_t failed = 0;        // of which completed with an error (or abandoned at finalize)
  std::uint64_t polls = 0;         // MPI_Testsome calls
  std::uint64_t busy_polls = 0;    // of which by a busy worker, at the interval
  std::uint64_t waits = 0;         // blocking waits that had to wait
  std::int64_t wait_ns = 0;        // time spent in them, summed over threads
};
//   auto s = mote::mpi::get_stats();  std::printf("%llu\n", (unsigned long long)s.outstanding);
MOTE_API stats get_stats() noexcept;

}  // namespace mote::mpi
