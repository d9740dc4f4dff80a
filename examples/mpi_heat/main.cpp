// A 2-D Gauss-Seidel heat solver distributed by rows over MPI ranks, each
// rank's tiles relaxed as mote data-flow tasks, the halo rows exchanged with
// isend/irecv bound to their tasks by mote::mpi::iwait: interior tiles compute
// while the halos travel. Checked against the serial solver, bit for bit.
//
//   mpirun -np 2 example_mpi_heat [rows cols block sweeps [blocking]]
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "heat.hpp"
#include "mote/mpi.hpp"

int main(int argc, char** argv) {
  mote::mpi::init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int rows = argc > 1 ? std::atoi(argv[1]) : 256;
  const int cols = argc > 2 ? std::atoi(argv[2]) : 256;
  const int b = argc > 3 ? std::atoi(argv[3]) : 32;
  const int sweeps = argc > 4 ? std::atoi(argv[4]) : 10;
  const bool blocking = argc > 5 && std::strcmp(argv[5], "blocking") == 0;
  if (b <= 0 || rows % (size * b) != 0 || cols % b != 0 || sweeps < 1) {
    if (rank == 0) std::fprintf(stderr, "rows must divide into ranks x block, cols into blocks\n");
    mote::mpi::finalize();
    return 2;
  }

  heat::local_grid g(rows, cols, b, rank, size);
  heat::solve(g, sweeps, blocking, MPI_COMM_WORLD);

  // Every rank checks its rows against the serial solution.
  const double mine = g.max_diff(heat::serial(rows, cols, sweeps));
  double worst = 0;
  MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::printf("heat %dx%d, %d ranks, %dx%d tiles, %d sweeps (%s): max difference from serial %g\n", rows, cols,
                size, b, b, sweeps, blocking ? "blocking" : "iwait", worst);
  }
  mote::mpi::finalize();
  return worst == 0 ? 0 : 1;
}
