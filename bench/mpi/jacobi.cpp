// The mpi suite's second program: a 2-D 5-point Jacobi solver written the
// way docs/mpi.md teaches it, beside the same solver in pure MPI and in MPI +
// OpenMP. The grid's N x N interior points are split by rows over the ranks;
// each rank holds its rows twice (double-buffered: iteration k reads one
// buffer and writes the other) with a halo row above and below and the fixed
// boundary columns. Every variant computes every point with the same
// expression from the same values, so all agree bit for bit with the serial
// solver (checked through an order-independent hash of the whole grid).
//
//   mote   mote + MPI, non-blocking: a data-flow task per block of rows per
//          iteration, the halo rows received and sent by tasks bound with
//          mote::mpi::iwait, the tasks spawned from the main thread (the
//          program of docs/mpi.md); tags per buffer, since the receives of
//          consecutive iterations are not ordered against each other
//   mpi    pure MPI, one thread per rank: Isend/Irecv of the halos, the rows
//          that need no halo computed meanwhile, Waitall, the two edge rows
//   omp    MPI + OpenMP (GNU libgomp): the halos exchanged by the main thread
//          (Isend/Irecv/Waitall), then the rows in a `parallel for`
//   serial one process, no MPI traffic: prints the hash the others must give
//
// Run under mpiexec; rank 0 prints one JSON record (bench/common/harness.hpp's
// schema): the wall time of each repetition (the slowest rank's) and, in
// "extra", the time the threads spent in the kernel and in MPI waits, summed
// over threads (medians), and whether the grid hashed as --expect.
//
//   mpiexec -np 2 bench_mpi_jacobi --variant mote --workers 1 --n 1024 --iters 100 --block 16
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mote/dataflow.hpp"
#include "mote/mpi.hpp"
#include "mote/runtime.hpp"

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Summed over the rank's threads (relaxed: one add per block of rows).
std::atomic<std::int64_t> g_kernel_ns{0};
std::int64_t g_wait_ns = 0;  // MPI waits, main thread only

// The fixed boundary: 1 above the grid, 0 elsewhere; the interior starts at a
// pattern (so that the hash sees every point move).
double initial(int r, int c) { return 0.5 * static_cast<double>((r * 7 + c * 13) % 17) / 17.0; }

// One rank's rows, double-buffered: rows 0 and m+1 are halos (or the global
// boundary), columns 0 and n+1 the boundary.
struct grid {
  int n, m, first;  // interior columns, local rows, global index of local row 1
  std::size_t stride;
  std::vector<double> buf[2];

  grid(int n_, int ranks, int rank) : n(n_), m(n_ / ranks), first(rank * (n_ / ranks)), stride(n_ + 2) {
    for (auto& b : buf) b.assign(static_cast<std::size_t>(m + 2) * stride, 0.0);
    for (auto& b : buf) {
      for (int i = 0; i <= m + 1; ++i) {
        const int gr = first + i - 1;  // global interior row (-1: the top boundary)
        for (int j = 1; j <= n; ++j) {
          double v;
          if (gr < 0) {
            v = 1.0;
          } else if (gr >= n) {
            v = 0.0;
          } else {
            v = initial(gr, j - 1);
          }
          b[static_cast<std::size_t>(i) * stride + j] = v;
        }
      }
    }
  }
  double* row(int k, int i) { return buf[k & 1].data() + static_cast<std::size_t>(i) * stride; }
};

// Rows [lo, hi] of the buffer written at iteration k from the one read.
void relax(grid& g, int k, int lo, int hi) {
  const std::size_t s = g.stride;
  const double* src = g.row(k, 0);
  double* dst = g.row(k + 1, 0);
  const int n = g.n;
  for (int i = lo; i <= hi; ++i) {
    const double* up = src + (i - 1) * s;
    const double* mid = src + i * s;
    const double* down = src + (i + 1) * s;
    double* out = dst + i * s;
    for (int j = 1; j <= n; ++j) out[j] = 0.25 * (up[j] + down[j] + mid[j - 1] + mid[j + 1]);
  }
}

void relax_timed(grid& g, int k, int lo, int hi) {
  const std::int64_t t0 = now_ns();
  relax(g, k, lo, hi);
  g_kernel_ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
}

// An order-independent hash of the interior after `iters` iterations (in
// buffer iters & 1), over global indices: the same whatever the split.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}
std::uint64_t local_hash(grid& g, int iters) {
  std::uint64_t h = 0;
  for (int i = 1; i <= g.m; ++i) {
    const double* r = g.row(iters, i);
    for (int j = 1; j <= g.n; ++j) {
      std::uint64_t bits;
      std::memcpy(&bits, &r[j], sizeof bits);
      const std::uint64_t index = static_cast<std::uint64_t>(g.first + i - 1) * g.n + (j - 1);
      h += mix(bits ^ mix(index + 0x9e3779b97f4a7c15ULL));
    }
  }
  return h;
}

// Tags: per direction and buffer (iteration parity).
int tag_down(int k) { return 2 * (k & 1); }     // my last row, to rank+1
int tag_up(int k) { return 2 * (k & 1) + 1; }   // my first row, to rank-1

// mote: the program of docs/mpi.md, spawned from the main thread.
void solve_mote(grid& g, int iters, int block, int rank, int ranks) {
  const int up = rank - 1, down = rank + 1;
  const bool has_up = up >= 0, has_down = down < ranks;
  const int n2 = g.n + 2;
  const int blocks = (g.m + block - 1) / block;
  auto blk = [&](int k, int b) { return g.row(k, 1 + b * block); };
  auto blk_rows = [&](int b) { return std::min(block, g.m - b * block); };
  mote::dataflow df;
  for (int k = 0; k < iters; ++k) {
    if (has_up) {
      df.spawn(mote::out(g.row(k, 0), n2), [&g, k, up] {
        MPI_Request r;
        MPI_Irecv(g.row(k, 0) + 1, g.n, MPI_DOUBLE, up, tag_down(k), MPI_COMM_WORLD, &r);
        mote::mpi::iwait(r);
      });
      df.spawn(mote::in(blk(k, 0), static_cast<std::size_t>(blk_rows(0)) * n2), [&g, k, up] {
        MPI_Request r;
        MPI_Isend(g.row(k, 1) + 1, g.n, MPI_DOUBLE, up, tag_up(k), MPI_COMM_WORLD, &r);
        mote::mpi::iwait(r);
      });
    }
    if (has_down) {
      df.spawn(mote::out(g.row(k, g.m + 1), n2), [&g, k, down] {
        MPI_Request r;
        MPI_Irecv(g.row(k, g.m + 1) + 1, g.n, MPI_DOUBLE, down, tag_up(k), MPI_COMM_WORLD, &r);
        mote::mpi::iwait(r);
      });
      df.spawn(mote::in(blk(k, blocks - 1), static_cast<std::size_t>(blk_rows(blocks - 1)) * n2), [&g, k, down] {
        MPI_Request r;
        MPI_Isend(g.row(k, g.m) + 1, g.n, MPI_DOUBLE, down, tag_down(k), MPI_COMM_WORLD, &r);
        mote::mpi::iwait(r);
      });
    }
    for (int b = 0; b < blocks; ++b) {
      const int lo = 1 + b * block, hi = lo + blk_rows(b) - 1;
      const std::size_t size = static_cast<std::size_t>(blk_rows(b)) * n2;
      // Above and below: the neighbouring blocks, or the halo rows.
      const double* above = b > 0 ? blk(k, b - 1) : g.row(k, 0);
      const std::size_t above_n = b > 0 ? static_cast<std::size_t>(blk_rows(b - 1)) * n2 : n2;
      const double* below = b + 1 < blocks ? blk(k, b + 1) : g.row(k, g.m + 1);
      const std::size_t below_n = b + 1 < blocks ? static_cast<std::size_t>(blk_rows(b + 1)) * n2 : n2;
      df.spawn(mote::in(above, above_n), mote::in(blk(k, b), size), mote::in(below, below_n),
               mote::out(blk(k + 1, b), size), [&g, k, lo, hi] { relax_timed(g, k, lo, hi); });
    }
  }
  df.wait();
}

// Pure MPI: the rows that need no halo while the halos travel.
void solve_mpi(grid& g, int iters, int rank, int ranks) {
  const int up = rank - 1, down = rank + 1;
  std::vector<MPI_Request> rs;
  for (int k = 0; k < iters; ++k) {
    rs.clear();
    if (up >= 0) {
      rs.emplace_back();
      MPI_Irecv(g.row(k, 0) + 1, g.n, MPI_DOUBLE, up, tag_down(k), MPI_COMM_WORLD, &rs.back());
      rs.emplace_back();
      MPI_Isend(g.row(k, 1) + 1, g.n, MPI_DOUBLE, up, tag_up(k), MPI_COMM_WORLD, &rs.back());
    }
    if (down < ranks) {
      rs.emplace_back();
      MPI_Irecv(g.row(k, g.m + 1) + 1, g.n, MPI_DOUBLE, down, tag_up(k), MPI_COMM_WORLD, &rs.back());
      rs.emplace_back();
      MPI_Isend(g.row(k, g.m) + 1, g.n, MPI_DOUBLE, down, tag_down(k), MPI_COMM_WORLD, &rs.back());
    }
    if (g.m > 2) relax_timed(g, k, 2, g.m - 1);
    const std::int64_t t0 = now_ns();
    MPI_Waitall(static_cast<int>(rs.size()), rs.data(), MPI_STATUSES_IGNORE);
    g_wait_ns += now_ns() - t0;
    relax_timed(g, k, 1, 1);
    if (g.m > 1) relax_timed(g, k, g.m, g.m);
  }
}

// MPI + OpenMP: exchange, then a parallel loop over the rows.
void solve_omp(grid& g, int iters, int rank, int ranks, int threads) {
  const int up = rank - 1, down = rank + 1;
  std::vector<MPI_Request> rs;
  for (int k = 0; k < iters; ++k) {
    rs.clear();
    if (up >= 0) {
      rs.emplace_back();
      MPI_Irecv(g.row(k, 0) + 1, g.n, MPI_DOUBLE, up, tag_down(k), MPI_COMM_WORLD, &rs.back());
      rs.emplace_back();
      MPI_Isend(g.row(k, 1) + 1, g.n, MPI_DOUBLE, up, tag_up(k), MPI_COMM_WORLD, &rs.back());
    }
    if (down < ranks) {
      rs.emplace_back();
      MPI_Irecv(g.row(k, g.m + 1) + 1, g.n, MPI_DOUBLE, down, tag_up(k), MPI_COMM_WORLD, &rs.back());
      rs.emplace_back();
      MPI_Isend(g.row(k, g.m) + 1, g.n, MPI_DOUBLE, down, tag_down(k), MPI_COMM_WORLD, &rs.back());
    }
    const std::int64_t t0 = now_ns();
    MPI_Waitall(static_cast<int>(rs.size()), rs.data(), MPI_STATUSES_IGNORE);
    g_wait_ns += (now_ns() - t0) * threads;  // every thread of the rank idles meanwhile
#pragma omp parallel num_threads(threads)
    {
      const std::int64_t t1 = now_ns();
#pragma omp for schedule(static) nowait
      for (int i = 1; i <= g.m; ++i) relax(g, k, i, i);
      g_kernel_ns.fetch_add(now_ns() - t1, std::memory_order_relaxed);
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
  const std::string variant = arg(argc, argv, "--variant", "mote");
  const int workers = std::atoi(arg(argc, argv, "--workers", "1"));
  const int n = std::atoi(arg(argc, argv, "--n", "1024"));
  const int iters = std::atoi(arg(argc, argv, "--iters", "100"));
  const int block = std::atoi(arg(argc, argv, "--block", "16"));
  const int reps = std::atoi(arg(argc, argv, "--reps", "3"));
  const int warmup = std::atoi(arg(argc, argv, "--warmup", "1"));
  const std::uint64_t expect = std::strtoull(arg(argc, argv, "--expect", "0"), nullptr, 16);

  if (variant == "serial") {
    grid g(n, 1, 0);
    for (int k = 0; k < iters; ++k) relax(g, k, 1, g.m);
    std::printf("%016" PRIx64 "\n", local_hash(g, iters));
    return 0;
  }
  const bool is_mote = variant == "mote";
  if (is_mote) {
    mote::mpi::init(&argc, &argv);  // places this rank on its share of the node, then the default runtime
  } else {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  }
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const int have = is_mote ? static_cast<int>(mote::runtime::default_runtime().num_workers()) : workers;
  if (n % ranks != 0 || n / ranks < 2 || block < 1 || (variant == "mpi" && workers != 1) ||
      (variant != "mote" && variant != "mpi" && variant != "omp") || (is_mote && have != workers)) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "bench_mpi_jacobi: bad layout (n divisible by ranks, 2 rows each; mpi: 1 worker; mote: "
                   "MOTE_NUM_THREADS=%d gave %d workers)\n",
                   workers, have);
    }
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  std::vector<double> samples, kernel_ms, wait_ms;
  bool correct = true;
  for (int rep = 0; rep < warmup + reps; ++rep) {
    grid g(n, ranks, rank);
    g_kernel_ns.store(0);
    g_wait_ns = 0;
    const std::int64_t wait0 = is_mote ? mote::mpi::get_stats().wait_ns : 0;
    MPI_Barrier(MPI_COMM_WORLD);
    const std::int64_t t0 = now_ns();
    if (is_mote) {
      solve_mote(g, iters, block, rank, ranks);
    } else if (variant == "omp") {
      solve_omp(g, iters, rank, ranks, workers);
    } else {
      solve_mpi(g, iters, rank, ranks);
    }
    const double mine = static_cast<double>(now_ns() - t0) / 1e6;
    if (is_mote) g_wait_ns = mote::mpi::get_stats().wait_ns - wait0;
    const std::uint64_t h = local_hash(g, iters);
    std::uint64_t total_hash = 0;
    MPI_Reduce(&h, &total_hash, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    double sums[2] = {static_cast<double>(g_kernel_ns.load()) / 1e6, static_cast<double>(g_wait_ns) / 1e6};
    double total[2] = {0, 0}, slowest = 0;
    MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(sums, total, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0 && expect != 0 && total_hash != expect) correct = false;
    if (rep >= warmup) {
      samples.push_back(slowest);
      kernel_ms.push_back(total[0]);
      wait_ms.push_back(total[1]);
    }
    if (rank == 0 && rep == 0 && expect == 0) std::fprintf(stderr, "hash %016" PRIx64 "\n", total_hash);
  }
  if (rank == 0) {
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0 : v[v.size() / 2];
    };
    std::string line = "{\"suite\":\"mpi\",\"kernel\":\"jacobi_n" + std::to_string(n) + "\",\"runtime\":\"" +
                       variant + "\",\"ranks\":" + std::to_string(ranks) + ",\"workers\":" + std::to_string(workers) +
                       ",\"unit\":\"ms\",\"samples\":[";
    for (std::size_t i = 0; i < samples.size(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.4f", i == 0 ? "" : ",", samples[i]);
      line += buf;
    }
    char tail[400];
    std::snprintf(tail, sizeof tail,
                  "],\"result\":%d,\"extra\":{\"n\":%d,\"iters\":%d,\"block\":%d,\"threads\":%d,"
                  "\"compute_ms\":%.4f,\"mpi_wait_ms\":%.4f,\"checked\":%d}}",
                  correct ? 1 : 0, n, iters, block, ranks * workers, median(kernel_ms), median(wait_ms),
                  expect != 0 ? 1 : 0);
    line += tail;
    std::puts(line.c_str());
  }
  if (is_mote) {
    mote::mpi::finalize();
  } else {
    MPI_Finalize();
  }
  if (!correct && rank == 0) std::fprintf(stderr, "bench_mpi_jacobi: the grid differs from the serial solver's\n");
  return correct ? 0 : 1;
}
