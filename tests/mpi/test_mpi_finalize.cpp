// mote::mpi::finalize() and a plain MPI_Finalize() while a request bound
// with iwait is still pending (its message never comes): MPI is finalised
// either way, the service lets go of the request, and the task bound to it
// fails (its successor is skipped, the scope's wait throws mote::mpi::error)
// instead of waiting forever or polling a finalised MPI. Run by ctest under
// mpiexec with 2 ranks, one mode per test:
//
//   mpiexec -np 2 test_mpi_finalize finalize   # mote::mpi::finalize() throws usage_error, MPI finalised
//   mpiexec -np 2 test_mpi_finalize plain      # MPI_Finalize() detaches the service first
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>

#include "mote/dataflow.hpp"
#include "mote/error.hpp"
#include "mote/mpi.hpp"
#include "mote/runtime.hpp"

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "test_mpi_finalize: %s\n", what);
  std::fflush(stderr);
  _exit(1);  // no destructor waits for a scope that cannot end
}

}  // namespace

int main(int argc, char** argv) {
  const bool plain = argc > 1 && std::strcmp(argv[1], "plain") == 0;
  mote::runtime_options o;
  o.num_workers = 2;
  o.spin = std::chrono::microseconds(20);
  mote::runtime rt(o);
  mote::mpi::init(&argc, &argv, rt);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int partner = (rank ^ 1) < size ? (rank ^ 1) : rank;

  int buf = -1, successor = 0;
  std::atomic<bool> bound{false};
  mote::dataflow df(rt);
  df.spawn(mote::out(buf), [&] {
    MPI_Request r;
    MPI_Irecv(&buf, 1, MPI_INT, partner, 999, MPI_COMM_WORLD, &r);  // nobody sends tag 999
    mote::mpi::iwait(r);
    bound.store(true);
  });
  df.spawn(mote::in(buf), [&] { successor = 1; });
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!bound.load()) {
    if (std::chrono::steady_clock::now() > limit) return fail("the receive was never bound");
    std::this_thread::yield();
  }
  MPI_Barrier(MPI_COMM_WORLD);

  if (plain) {
    MPI_Finalize();
  } else {
    bool threw = false;
    try {
      mote::mpi::finalize();
    } catch (const mote::usage_error& e) {
      threw = std::string(e.what()).find("outstanding") != std::string::npos;
      if (rank == 0) std::printf("finalize: %s\n", e.what());
    }
    if (!threw) fail("mote::mpi::finalize() with a request outstanding did not throw usage_error");
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized == 0) fail("MPI was not finalised");
  if (mote::mpi::get_stats().outstanding != 0) fail("the service still holds the request");
  bool failed = false;
  try {
    df.wait();
  } catch (const mote::mpi::error& e) {
    failed = true;
    if (rank == 0) std::printf("the bound task: %s\n", e.what());
  }
  if (!failed) fail("the task bound to the abandoned request did not fail");
  if (successor != 0) fail("the successor of the abandoned receive ran");
  // The runtime goes on without MPI.
  const int v = rt.run([] { return 6 * 7; });
  if (v != 42) fail("the runtime no longer runs tasks");
  if (rank == 0) std::printf("test_mpi_finalize %s: passed\n", plain ? "plain" : "finalize");
  return 0;
}
