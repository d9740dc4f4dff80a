// The mpi suite's program: the distributed Gauss-Seidel heat solver of
// examples/mpi_heat (its kernel, heat.hpp, is shared by every variant) on
// four parallel wrappers:
//   iwait     mote + MPI, non-blocking mode: tiles and halo messages as
//             data-flow tasks, messages bound with mote::mpi::iwait
//   blocking  mote + MPI, blocking mode: the same tasks, mote::mpi::wait
//             inside them, a wait for the tasks after each sweep
//   omp       MPI + OpenMP (GNU libgomp), fork-join per sweep: the halos
//             exchanged outside the parallel region, the tiles of a sweep as
//             anti-diagonal wavefronts of `omp for`
//   mpi       pure MPI, one thread per rank: the tiles column by column,
//             each halo row received just before the tile that reads it
// Run under mpiexec; rank 0 prints one JSON record (bench/common/harness.hpp's
// schema): the wall time of each repetition (the slowest rank's), and in
// "extra" the time the ranks' threads spent computing tiles and waiting in
// MPI calls, summed over threads (median over repetitions). Every
// repetition's grid is checked against the serial solver.
//
//   mpiexec -np 2 bench_mpi_heat --variant iwait --workers 1 --block 64
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../../examples/mpi_heat/heat.hpp"
#include "mote/mpi.hpp"
#include "mote/runtime.hpp"

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Summed over the rank's threads; relaxed adds (one per tile: a tile is
// microseconds, the add nanoseconds).
std::atomic<std::int64_t> g_compute_ns{0};
std::int64_t g_wait_ns = 0;  // the rank's MPI waits (thread-time), main thread only

void relax_timed(heat::local_grid& g, int bi, int bj) {
  const std::int64_t t0 = now_ns();
  g.relax(bi, bj);
  g_compute_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
}

// Wait for MPI requests, counting the time for `threads` threads (all idle).
void timed_waitall(std::vector<MPI_Request>& rs, int threads) {
  if (rs.empty()) return;
  const std::int64_t t0 = now_ns();
  MPI_Waitall(static_cast<int>(rs.size()), rs.data(), MPI_STATUSES_IGNORE);
  g_wait_ns += (now_ns() - t0) * threads;
  rs.clear();
}

// mote, both modes: heat::solve with the tiles timed.
void solve_mote(heat::local_grid& g, int sweeps, bool blocking, mote::runtime& rt) {
  rt.run([&] {
    heat::solve(g, sweeps, blocking, MPI_COMM_WORLD, [&g](int bi, int bj) { relax_timed(g, bi, bj); });
  });
}

// MPI + OpenMP, fork-join per sweep: MPI only outside the parallel region.
void solve_omp(heat::local_grid& g, int sweeps, int threads) {
  const int nbi = g.block_rows(), nbj = g.block_cols(), b = g.block();
  const int above = g.rank() - 1, below = g.rank() + 1;
  const bool has_above = above >= 0, has_below = below < g.ranks();
  std::vector<MPI_Request> recvs, sends;
  for (int s = 0; s < sweeps; ++s) {
    // This sweep's halo from above (the rank above finished its sweep), the
    // previous sweep's from below (posted at the end of the previous sweep).
    if (has_above) {
      for (int bj = 0; bj < nbj; ++bj) {
        recvs.emplace_back();
        MPI_Irecv(g.ghost_up(bj), b, MPI_DOUBLE, above, heat::tag_down(bj), MPI_COMM_WORLD, &recvs.back());
      }
    }
    timed_waitall(recvs, threads);
#pragma omp parallel num_threads(threads)
    for (int d = 0; d < nbi + nbj - 1; ++d) {
      const int lo = std::max(0, d - nbj + 1), hi = std::min(d, nbi - 1);
#pragma omp for schedule(static)
      for (int bi = lo; bi <= hi; ++bi) relax_timed(g, bi, d - bi);
    }
    for (int bj = 0; bj < nbj; ++bj) {
      if (has_below) {
        sends.emplace_back();
        MPI_Isend(g.bottom_row(bj), b, MPI_DOUBLE, below, heat::tag_down(bj), MPI_COMM_WORLD, &sends.back());
      }
      if (has_above && s + 1 < sweeps) {
        sends.emplace_back();
        MPI_Isend(g.top_row(bj), b, MPI_DOUBLE, above, heat::tag_up(bj), MPI_COMM_WORLD, &sends.back());
      }
      if (has_below && s + 1 < sweeps) {
        recvs.emplace_back();
        MPI_Irecv(g.ghost_down(bj), b, MPI_DOUBLE, below, heat::tag_up(bj), MPI_COMM_WORLD, &recvs.back());
      }
    }
    timed_waitall(sends, threads);
  }
  timed_waitall(recvs, threads);
}

// Pure MPI, one thread: tiles column by column; each halo row waited for
// just before the tile that reads it; sends as soon as their tile is done.
void solve_mpi(heat::local_grid& g, int sweeps) {
  const int nbi = g.block_rows(), nbj = g.block_cols(), b = g.block();
  const int above = g.rank() - 1, below = g.rank() + 1;
  const bool has_above = above >= 0, has_below = below < g.ranks();
  std::vector<MPI_Request> down(static_cast<std::size_t>(nbj), MPI_REQUEST_NULL), sends;
  for (int s = 0; s < sweeps; ++s) {
    // Column by column: a valid Gauss-Seidel order (a tile's upper and left
    // neighbours come first), which sends each bottom row after one column
    // of tiles rather than after the whole part, so the rank below starts
    // its sweep as early as the data allows.
    for (int bj = 0; bj < nbj; ++bj) {
      for (int bi = 0; bi < nbi; ++bi) {
        if (bi == 0 && has_above) {
          const std::int64_t t0 = now_ns();
          MPI_Recv(g.ghost_up(bj), b, MPI_DOUBLE, above, heat::tag_down(bj), MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          g_wait_ns += now_ns() - t0;
        }
        if (bi == nbi - 1 && down[static_cast<std::size_t>(bj)] != MPI_REQUEST_NULL) {
          const std::int64_t t0 = now_ns();
          MPI_Wait(&down[static_cast<std::size_t>(bj)], MPI_STATUS_IGNORE);
          g_wait_ns += now_ns() - t0;
        }
        relax_timed(g, bi, bj);
        if (bi == 0 && has_above && s + 1 < sweeps) {
          sends.emplace_back();
          MPI_Isend(g.top_row(bj), b, MPI_DOUBLE, above, heat::tag_up(bj), MPI_COMM_WORLD, &sends.back());
        }
        if (bi == nbi - 1 && has_below) {
          sends.emplace_back();
          MPI_Isend(g.bottom_row(bj), b, MPI_DOUBLE, below, heat::tag_down(bj), MPI_COMM_WORLD, &sends.back());
        }
      }
    }
    // The sends read tiles the next sweep writes; the rank below's next first
    // row comes as the next sweep's ghost_down.
    timed_waitall(sends, 1);
    if (has_below && s + 1 < sweeps) {
      for (int bj = 0; bj < nbj; ++bj) {
        MPI_Irecv(g.ghost_down(bj), b, MPI_DOUBLE, below, heat::tag_up(bj), MPI_COMM_WORLD,
                  &down[static_cast<std::size_t>(bj)]);
      }
    }
  }
}

const char* arg(int argc, char** argv, const char* name, const char* def) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string variant = arg(argc, argv, "--variant", "iwait");
  const int workers = std::atoi(arg(argc, argv, "--workers", "1"));
  const int b = std::atoi(arg(argc, argv, "--block", "64"));
  const int rows = std::atoi(arg(argc, argv, "--rows", "1024"));
  const int cols = std::atoi(arg(argc, argv, "--cols", "1024"));
  const int sweeps = std::atoi(arg(argc, argv, "--sweeps", "20"));
  const int reps = std::atoi(arg(argc, argv, "--reps", "3"));
  const int warmup = std::atoi(arg(argc, argv, "--warmup", "1"));
  const bool is_mote = variant == "iwait" || variant == "blocking";
  // --check 0: no serial reference (the suite's trace run, whose timeline
  // should show the solve rather than the reference's computation).
  const bool check = std::atoi(arg(argc, argv, "--check", "1")) != 0;

  mote::runtime_options o;
  o.num_workers = static_cast<unsigned>(workers);
  mote::runtime* rt = nullptr;
  if (is_mote) {
    rt = new mote::runtime(o);
    mote::mpi::init(&argc, &argv, *rt);
  } else {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (b <= 0 || rows % (size * b) != 0 || cols % b != 0 || (variant == "mpi" && workers != 1)) {
    if (rank == 0) std::fprintf(stderr, "bench_mpi_heat: bad layout (rows %% (ranks x block), cols %% block, mpi: 1 worker)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const std::vector<double> expect = check ? heat::serial(rows, cols, sweeps) : std::vector<double>();

  std::vector<double> samples, compute_ms, wait_ms;
  bool correct = true;
  for (int rep = 0; rep < warmup + reps; ++rep) {
    heat::local_grid g(rows, cols, b, rank, size);
    g_compute_ns.store(0);
    g_wait_ns = 0;
    const std::int64_t wait0 = is_mote ? mote::mpi::get_stats().wait_ns : 0;
    MPI_Barrier(MPI_COMM_WORLD);
    const std::int64_t t0 = now_ns();
    if (is_mote) {
      solve_mote(g, sweeps, variant == "blocking", *rt);
    } else if (variant == "omp") {
      solve_omp(g, sweeps, workers);
    } else {
      solve_mpi(g, sweeps);
    }
    const double mine = static_cast<double>(now_ns() - t0) / 1e6;
    if (is_mote) g_wait_ns = mote::mpi::get_stats().wait_ns - wait0;
    double sums[3] = {static_cast<double>(g_compute_ns.load()) / 1e6, static_cast<double>(g_wait_ns) / 1e6,
                      check ? g.max_diff(expect) : 0.0};
    double total[3] = {0, 0, 0}, slowest = 0, worst = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(sums, total, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&sums[2], &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (worst != 0) correct = false;
    if (rep >= warmup) {
      samples.push_back(slowest);
      compute_ms.push_back(total[0]);
      wait_ms.push_back(total[1]);
    }
  }
  if (rank == 0) {
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0 : v[v.size() / 2];
    };
    std::string line = "{\"suite\":\"mpi\",\"kernel\":\"heat_b" + std::to_string(b) + "\",\"runtime\":\"" + variant +
                       "\",\"ranks\":" + std::to_string(size) + ",\"workers\":" + std::to_string(workers) +
                       ",\"unit\":\"ms\",\"samples\":[";
    for (std::size_t i = 0; i < samples.size(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.4f", i == 0 ? "" : ",", samples[i]);
      line += buf;
    }
    char tail[400];
    std::snprintf(tail, sizeof tail,
                  "],\"result\":%d,\"extra\":{\"block\":%d,\"rows\":%d,\"cols\":%d,\"sweeps\":%d,\"threads\":%d,"
                  "\"compute_ms\":%.4f,\"mpi_wait_ms\":%.4f}}",
                  correct ? 1 : 0, b, rows, cols, sweeps, size * workers, median(compute_ms), median(wait_ms));
    line += tail;
    std::puts(line.c_str());
  }
  if (is_mote) {
    mote::mpi::finalize();
    delete rt;
  } else {
    MPI_Finalize();
  }
  if (!correct && rank == 0) std::fprintf(stderr, "bench_mpi_heat: the grid differs from the serial solver's\n");
  return correct ? 0 : 1;
}
