// The distributed 2-D heat solver of examples/mpi_heat and bench/mpi: Gauss-
// Seidel sweeps over a grid whose rows are split among the MPI ranks, each
// rank's part stored as b x b tiles (contiguous, row-major inside), relaxed as
// one data-flow task per tile; the halo rows travel with isend/irecv and are
// bound to their tasks with mote::mpi::iwait (or waited for with
// mote::mpi::wait, the blocking mode).
//
// A point's update reads this sweep's values above and to the left and the
// previous sweep's below and to the right, so rank r's first row needs rank
// r-1's last row of the same sweep (received per column block: the sweep runs
// through the ranks as a wavefront) and its last row needs rank r+1's first
// row of the previous sweep. Every point sees the same neighbours as in a
// point-by-point serial sweep, so the result is the serial one bit for bit.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mote/dataflow.hpp"
#include "mote/mpi.hpp"

namespace heat {

// The starting value of interior point (r, c) of the global grid; the
// boundary is 1 above the grid and 0 on the other three sides.
inline double initial(int r, int c) { return 0.5 * static_cast<double>((r * 7 + c * 13) % 17) / 17.0; }

// The 5-point update, in one expression order for every solver (the results
// agree bit for bit).
inline double update(double east, double above, double below, double west) {
  return 0.25 * (east + above + below) + 0.25 * west;
}

// The serial solver over the whole rows x cols grid (row-major).
inline std::vector<double> serial(int rows, int cols, int sweeps) {
  std::vector<double> u(static_cast<std::size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) u[static_cast<std::size_t>(r) * cols + c] = initial(r, c);
  }
  for (int s = 0; s < sweeps; ++s) {
    for (int r = 0; r < rows; ++r) {
      double* row = &u[static_cast<std::size_t>(r) * cols];
      for (int c = 0; c < cols; ++c) {
        const double above = r > 0 ? row[c - cols] : 1.0;
        const double below = r + 1 < rows ? row[c + cols] : 0.0;
        const double west = c > 0 ? row[c - 1] : 0.0;
        const double east = c + 1 < cols ? row[c + 1] : 0.0;
        row[c] = update(east, above, below, west);
      }
    }
  }
  return u;
}

// One rank's rows of the grid, tiled, with its ghost rows: up[bj] (the last
// row of rank-1, this sweep) and down[bj] (the first row of rank+1, the
// previous sweep), one per column block.
class local_grid {
 public:
  // rows and cols: the global interior; b divides cols and rows / nranks.
  local_grid(int rows, int cols, int b, int rank, int nranks)
      : cols_(cols), b_(b), rank_(rank), nranks_(nranks), rows_(rows / nranks), first_(rank * rows_),
        nbi_(rows_ / b), nbj_(cols / b), u_(static_cast<std::size_t>(rows_) * cols),
        up_(static_cast<std::size_t>(cols), 1.0), down_(static_cast<std::size_t>(cols), 0.0),
        zeros_(static_cast<std::size_t>(b), 0.0) {
    for (int r = 0; r < rows_; ++r) {
      for (int c = 0; c < cols; ++c) at(r, c) = initial(first_ + r, c);
    }
    // The first row of rank+1 before any sweep is the initial value.
    if (rank + 1 < nranks) {
      for (int c = 0; c < cols; ++c) down_[static_cast<std::size_t>(c)] = initial(first_ + rows_, c);
    }
  }

  int block_rows() const { return nbi_; }
  int block_cols() const { return nbj_; }
  int block() const { return b_; }
  int rank() const { return rank_; }
  int ranks() const { return nranks_; }
  int first_row() const { return first_; }
  int rows() const { return rows_; }

  double* tile(int bi, int bj) {
    return u_.data() + (static_cast<std::size_t>(bi) * nbj_ + bj) * static_cast<std::size_t>(b_) * b_;
  }
  double& at(int r, int c) { return tile(r / b_, c / b_)[(r % b_) * b_ + c % b_]; }
  // The ghost rows of column block bj (b values each).
  double* ghost_up(int bj) { return up_.data() + static_cast<std::ptrdiff_t>(bj) * b_; }
  double* ghost_down(int bj) { return down_.data() + static_cast<std::ptrdiff_t>(bj) * b_; }
  // The tile's first and last rows (what the neighbours receive).
  double* top_row(int bj) { return tile(0, bj); }
  double* bottom_row(int bj) { return tile(nbi_ - 1, bj) + static_cast<std::ptrdiff_t>(b_ - 1) * b_; }

  // One Gauss-Seidel pass over tile (bi, bj).
  void relax(int bi, int bj) {
    const int b = b_;
    double* t = tile(bi, bj);
    const double* up = bi > 0 ? tile(bi - 1, bj) + static_cast<std::ptrdiff_t>(b - 1) * b : ghost_up(bj);
    const double* down = bi + 1 < nbi_ ? tile(bi + 1, bj) : ghost_down(bj);
    const double* left = bj > 0 ? tile(bi, bj - 1) + (b - 1) : nullptr;  // a column: stride b
    const double* right = bj + 1 < nbj_ ? tile(bi, bj + 1) : nullptr;
    for (int r = 0; r < b; ++r) {
      double* row = t + static_cast<std::ptrdiff_t>(r) * b;
      const double* above = r == 0 ? up : row - b;
      const double* below = r == b - 1 ? down : row + b;
      double west = left != nullptr ? left[static_cast<std::ptrdiff_t>(r) * b] : 0.0;
      const double east_edge = right != nullptr ? right[static_cast<std::ptrdiff_t>(r) * b] : 0.0;
      for (int c = 0; c < b; ++c) {
        const double east = c + 1 < b ? row[c + 1] : east_edge;
        const double v = update(east, above[c], below[c], west);
        row[c] = v;
        west = v;
      }
    }
  }

  // The largest difference from the serial solution (0 when correct).
  double max_diff(const std::vector<double>& whole) {
    double d = 0;
    for (int r = 0; r < rows_; ++r) {
      for (int c = 0; c < cols_; ++c) {
        const double e = at(r, c) - whole[static_cast<std::size_t>(first_ + r) * cols_ + c];
        d = e > d ? e : (-e > d ? -e : d);
      }
    }
    return d;
  }

 private:
  int cols_, b_, rank_, nranks_, rows_, first_, nbi_, nbj_;
  std::vector<double> u_;
  std::vector<double> up_, down_;  // ghost rows (the global boundary at the edges)
  std::vector<double> zeros_;
};

// Message tags: per direction and column block (messages between two ranks
// with one tag are matched in order, and the data-flow order keeps one
// sweep's messages on a tag before the next sweep's).
inline int tag_down(int bj) { return 2 * bj; }     // a last row, to rank+1
inline int tag_up(int bj) { return 2 * bj + 1; }   // a first row, to rank-1

// `sweeps` Gauss-Seidel sweeps as data-flow tasks: one per tile, one per halo
// message. blocking = false binds each message to its task with iwait (the
// task returns at once; the readers of the halo wait for its arrival);
// blocking = true waits inside the task (the worker runs other tasks
// meanwhile) and waits for the tasks at the end of every sweep. `relax(bi,
// bj)` relaxes one tile (g.relax, or a variant that also times it).
template <class Relax>
void solve(local_grid& g, int sweeps, bool blocking, MPI_Comm comm, Relax relax) {
  const int nbi = g.block_rows(), nbj = g.block_cols(), b = g.block();
  const int above = g.rank() - 1, below = g.rank() + 1;
  const bool has_above = above >= 0, has_below = below < g.ranks();
  auto finish = [blocking](MPI_Request& r) {
    if (blocking) {
      mote::mpi::wait(r);
    } else {
      mote::mpi::iwait(r);
    }
  };
  const std::size_t ts = static_cast<std::size_t>(b) * b;
  mote::dataflow df;
  for (int s = 0; s < sweeps; ++s) {
    for (int bj = 0; bj < nbj; ++bj) {
      // This sweep's last row of the rank above, and the previous sweep's
      // first row of the rank below (the initial values before sweep 1).
      if (has_above) {
        df.spawn(mote::out(g.ghost_up(bj), b), [&g, bj, b, above, comm, finish] {
          MPI_Request r;
          MPI_Irecv(g.ghost_up(bj), b, MPI_DOUBLE, above, tag_down(bj), comm, &r);
          finish(r);
        });
      }
      if (has_below && s > 0) {
        df.spawn(mote::out(g.ghost_down(bj), b), [&g, bj, b, below, comm, finish] {
          MPI_Request r;
          MPI_Irecv(g.ghost_down(bj), b, MPI_DOUBLE, below, tag_up(bj), comm, &r);
          finish(r);
        });
      }
    }
    for (int bi = 0; bi < nbi; ++bi) {
      for (int bj = 0; bj < nbj; ++bj) {
        const double* up = bi > 0 ? g.tile(bi - 1, bj) : g.ghost_up(bj);
        const std::size_t up_n = bi > 0 ? ts : static_cast<std::size_t>(b);
        const double* down = bi + 1 < nbi ? g.tile(bi + 1, bj) : g.ghost_down(bj);
        const std::size_t down_n = bi + 1 < nbi ? ts : static_cast<std::size_t>(b);
        // Left and right: the neighbouring tiles, or (at the edges) the tile
        // itself again, which adds no order.
        const double* left = bj > 0 ? g.tile(bi, bj - 1) : g.tile(bi, bj);
        const double* right = bj + 1 < nbj ? g.tile(bi, bj + 1) : g.tile(bi, bj);
        df.spawn(mote::inout(g.tile(bi, bj), ts), mote::in(up, up_n), mote::in(down, down_n), mote::in(left, ts),
                 mote::in(right, ts), [relax, bi, bj] { relax(bi, bj); });
        // The rows the neighbours wait for, as soon as their tile is done.
        if (bi == 0 && has_above && s + 1 < sweeps) {
          df.spawn(mote::in(g.tile(0, bj), ts), [&g, bj, b, above, comm, finish] {
            MPI_Request r;
            MPI_Isend(g.top_row(bj), b, MPI_DOUBLE, above, tag_up(bj), comm, &r);
            finish(r);
          });
        }
        if (bi == nbi - 1 && has_below) {
          df.spawn(mote::in(g.tile(nbi - 1, bj), ts), [&g, bj, b, below, comm, finish] {
            MPI_Request r;
            MPI_Isend(g.bottom_row(bj), b, MPI_DOUBLE, below, tag_down(bj), comm, &r);
            finish(r);
          });
        }
      }
    }
    // Blocking mode waits for each sweep: a worker runs other tasks on top
    // of a task that waits in MPI, on the same stack, so a receive of sweep
    // s+1 run on top of a receive of sweep s could wait for a message that
    // needs the task below it to end first (docs/mpi.md, "Blocking mode").
    // Within one sweep no receive waits for this rank's own tasks.
    if (blocking) df.wait();
  }
  df.wait();
}
inline void solve(local_grid& g, int sweeps, bool blocking, MPI_Comm comm) {
  solve(g, sweeps, blocking, comm, [&g](int bi, int bj) { g.relax(bi, bj); });
}

}  // namespace heat
