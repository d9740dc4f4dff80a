// A consumer of the installed task-aware MPI library (mote::mote_mpi): one
// rank (a singleton) initialises, binds a self-message to a data-flow task
// and checks its reader saw it.
#include <mote/dataflow.hpp>
#include <mote/mpi.hpp>

int main(int argc, char** argv) {
  mote::mpi::init(&argc, &argv);
  int out = 42, in = 0, seen = 0;
  {
    mote::dataflow df;
    df.spawn(mote::out(in), [&] {
      MPI_Request r[2];
      MPI_Irecv(&in, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r[0]);
      MPI_Isend(&out, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &r[1]);
      mote::mpi::iwaitall(r);
    });
    df.spawn(mote::in(in), [&] { seen = in; });
    df.wait();
  }
  mote::mpi::finalize();
  return seen == 42 ? 0 : 1;
}
