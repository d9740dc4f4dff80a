// The data-flow kernels, written once for every runtime.
//
// A kernel is a problem object whose graph(w) issues its tasks, in program
// order, through a flow `w`, the only thing that differs between runtimes:
// each backend's (bench/backends/), with the accesses of namespace dep and the
// serial_flow of bench/backends/dataflow_api.hpp, which says what a flow does.
// The serial flow runs every task at once: program order is a valid order
// for every task graph, so the serial twin is the same source with every
// spawn turned into a call. The problem objects also verify their answer
// against that serial run (reference()) and report a result that equals the
// serial one on every runtime: an integer digest of the bits when the answer
// does not depend on the order of a reduction, else 1 after a relative
// tolerance check (extra.checksum has the float).
#pragma once

#include <cblas.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backends/dataflow_api.hpp"
#include "../common/harness.hpp"

// LAPACK's Cholesky factorization, as libopenblas exports it (a Fortran
// symbol; the trailing argument is the hidden length of `uplo`).
extern "C" void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info,
                        std::size_t uplo_len);

namespace mote_bench::dataflow {

// ---------------------------------------------------------------- helpers

// A deterministic pseudo-random double in [0, 1) for index i (splitmix64).
inline double unit(std::uint64_t i) {
  std::uint64_t z = i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

// FNV-1a over the bits of n doubles, continued from h.
inline std::uint64_t fnv_bits(const double* p, std::size_t n, std::uint64_t h = 14695981039346656037ull) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t bits;
    std::memcpy(&bits, &p[i], sizeof bits);
    for (int k = 0; k < 8; ++k) {
      h ^= (bits >> (8 * k)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

// A digest that survives any JSON reader (53 bits).
inline std::int64_t digest53(std::uint64_t h) { return static_cast<std::int64_t>(h & ((1ull << 53) - 1)); }

// Largest |a[i] - b[i]| relative to the largest |b[i]|.
inline double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 0;
  double diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::fabs(b[i]));
    diff = std::max(diff, std::fabs(a[i] - b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// Calibrated busy work: a dependency chain the compiler cannot shorten.
inline std::uint64_t busy(std::uint64_t seed, std::int64_t steps) {
  std::uint64_t x = seed | 1;
  for (std::int64_t i = 0; i < steps; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    asm volatile("" : "+r"(x));
  }
  return x;
}

// The busy() steps of a "1 us" task: a fixed count, so that every runtime's
// process does the same work (a calibration per process moves by +-15% on a
// shared machine). One step is a dependent multiply-add, 4 cycles: 750 steps
// are 1 us at 3 GHz. busy_ns() measures what they take here.
constexpr std::int64_t kBusySteps1us = 750;

// Nanoseconds one busy(steps) call takes on this thread: the fastest of a few
// tries (preemption only ever makes a try slower).
inline double busy_ns(std::int64_t steps) {
  double best_ns = 1e300;
  for (int t = 0; t < 7; ++t) {
    auto t0 = clock::now();
    for (int i = 0; i < 500; ++i) do_not_optimize(busy(static_cast<std::uint64_t>(i), steps));
    best_ns = std::min(best_ns, 1e9 * seconds_between(t0, clock::now()) / 500.0);
  }
  return best_ns;
}

// The common face of every problem below:
//   std::string name            the kernel's name in the records ("wavefront_8")
//   std::string family          what the task-size sweep groups by ("wavefront")
//   int block                   the task-size parameter
//   std::int64_t tasks          tasks per run
//   void reset()                the input again (untimed)
//   void graph(W& w)            spawn every task (timed, with the wait)
//   std::int64_t reference()    run serially once, keep what to compare with,
//                               return the expected result
//   std::int64_t verify(std::string& why)   the result of the last run; why
//                               says what is wrong when it is wrong
//   void describe(extras&)      parameters for the record

// ---------------------------------------------------------------- chains

// 64 independent chains of 1000 tasks: task k of chain c reads and writes
// chain c's object (inout). The body either only moves the chain's counter on
// when it finds its predecessor's value (which checks the order; "empty"), or
// first does kBusySteps1us steps of busy work (about 1 us). Spawned round by
// round: task k of every chain, then task k + 1 of every chain.
struct alignas(64) chain_object {
  std::int64_t value = 0;
};

class chains {
 public:
  chains(bool quick, double task_us, std::string name)
      : name(std::move(name)), family(this->name), length_(quick ? 250 : 1000), task_us_(task_us),
        objects_(kChains) {
    tasks = std::int64_t{kChains} * length_;
    if (task_us_ > 0) {
      steps_ = static_cast<std::int64_t>(task_us_ * kBusySteps1us + 0.5);
      measured_us_ = busy_ns(steps_) / 1e3;
    }
  }

  std::string name, family;
  int block = 0;
  std::int64_t tasks = 0;

  void reset() {
    for (auto& o : objects_) o.value = 0;
  }

  template <class W>
  void graph(W& w) {
    if (steps_ == 0) {
      for (std::int64_t k = 0; k < length_; ++k) {
        for (auto& o : objects_) {
          w.spawn(
              [obj = &o, k] {
                if (obj->value == k) obj->value = k + 1;
              },
              dep::inout(o));
        }
      }
    } else {
      const std::int64_t steps = steps_;
      for (std::int64_t k = 0; k < length_; ++k) {
        for (auto& o : objects_) {
          w.spawn(
              [obj = &o, k, steps] {
                do_not_optimize(busy(static_cast<std::uint64_t>(k), steps));
                if (obj->value == k) obj->value = k + 1;
              },
              dep::inout(o));
        }
      }
    }
  }

  std::int64_t reference() { return tasks; }

  std::int64_t verify(std::string& why) {
    std::int64_t total = 0;
    for (auto& o : objects_) total += o.value;
    if (total != tasks) why = "chains ran out of order or incompletely";
    return total;
  }

  void describe(extras& e) const {
    e.add("chains", std::int64_t{kChains}).add("length", length_);
    e.add("busy_steps", steps_).add("busy_us_measured", measured_us_);
  }

 private:
  static constexpr int kChains = 64;
  std::int64_t length_;
  double task_us_;
  std::int64_t steps_ = 0;
  double measured_us_ = 0;
  std::vector<chain_object> objects_;
};

// ---------------------------------------------------------------- Gauss-Seidel grid

// An n x n grid of doubles inside a fixed boundary (the top edge hot, the
// others cold), stored as B x B tiles (each tile contiguous, row-major inside,
// so that a block's work touches the same memory whatever B is), relaxed tile
// by tile: the 5-point Gauss-Seidel update. A tile's update reads the last
// row of the tile above and the last column of the tile to the left (this
// sweep's values) and the first row of the tile below and the first column of
// the tile to the right (the previous sweep's): inout on itself, in on each
// neighbour. Every point sees the same neighbours as in a point-by-point
// sweep, so the grid after a sweep is the same, bit for bit, at every B.
class gs_grid {
 public:
  gs_grid(int n, int b)
      : n_(n), b_(b), nb_(n / b), u_(static_cast<std::size_t>(n) * n), hot_(static_cast<std::size_t>(b), 1.0),
        cold_(static_cast<std::size_t>(b), 0.0) {}

  int blocks_per_side() const { return nb_; }
  std::size_t tile_size() const { return static_cast<std::size_t>(b_) * b_; }

  void reset() {
    const std::uint64_t ld = static_cast<std::uint64_t>(n_) + 2;
    for (int r = 0; r < n_; ++r) {
      for (int c = 0; c < n_; ++c) at(r, c) = 0.5 * unit((static_cast<std::uint64_t>(r) + 1) * ld + c + 1);
    }
  }

  double* tile(int bi, int bj) { return u_.data() + (static_cast<std::size_t>(bi) * nb_ + bj) * tile_size(); }
  double& at(int r, int c) { return tile(r / b_, c / b_)[(r % b_) * b_ + c % b_]; }

  // One Gauss-Seidel pass over tile (bi, bj); with Residual, the sum of the
  // squared changes.
  template <bool Residual>
  double relax(int bi, int bj) {
    const int b = b_;
    double* t = tile(bi, bj);
    const double* up = bi > 0 ? tile(bi - 1, bj) + static_cast<std::ptrdiff_t>(b - 1) * b : hot_.data();
    const double* down = bi + 1 < nb_ ? tile(bi + 1, bj) : cold_.data();
    const double* left = bj > 0 ? tile(bi, bj - 1) + (b - 1) : nullptr;  // a column: stride b
    const double* right = bj + 1 < nb_ ? tile(bi, bj + 1) : nullptr;
    double res = 0;
    for (int r = 0; r < b; ++r) {
      double* row = t + static_cast<std::ptrdiff_t>(r) * b;
      const double* above = r == 0 ? up : row - b;
      const double* below = r == b - 1 ? down : row + b;
      double west = left != nullptr ? left[static_cast<std::ptrdiff_t>(r) * b] : 0.0;
      const double east_edge = right != nullptr ? right[static_cast<std::ptrdiff_t>(r) * b] : 0.0;
      for (int c = 0; c < b; ++c) {
        const double east = c + 1 < b ? row[c + 1] : east_edge;
        // West is the value just computed: only its last step waits for it.
        const double v = 0.25 * (east + above[c] + below[c]) + 0.25 * west;
        if constexpr (Residual) {
          const double d = v - row[c];
          res += d * d;
        }
        row[c] = v;
        west = v;
      }
    }
    return res;
  }

  // Spawns f on tile (bi, bj): inout on it, `more` accesses, in on each
  // neighbour that exists.
  template <class W, class F, class... More>
  void spawn_block(W& w, int bi, int bj, F&& f, const More&... more) {
    double* nb[4];
    int k = 0;
    if (bi > 0) nb[k++] = tile(bi - 1, bj);
    if (bj > 0) nb[k++] = tile(bi, bj - 1);
    if (bi + 1 < nb_) nb[k++] = tile(bi + 1, bj);
    if (bj + 1 < nb_) nb[k++] = tile(bi, bj + 1);
    const std::size_t ts = tile_size();
    const auto self = dep::inout(tile(bi, bj), ts);
    switch (k) {
      case 0: w.spawn(f, self, more...); break;
      case 1: w.spawn(f, self, more..., dep::in(nb[0], ts)); break;
      case 2: w.spawn(f, self, more..., dep::in(nb[0], ts), dep::in(nb[1], ts)); break;
      case 3: w.spawn(f, self, more..., dep::in(nb[0], ts), dep::in(nb[1], ts), dep::in(nb[2], ts)); break;
      default:
        w.spawn(f, self, more..., dep::in(nb[0], ts), dep::in(nb[1], ts), dep::in(nb[2], ts), dep::in(nb[3], ts));
    }
  }

  // Over the grid in row-major order: the same at every B.
  std::uint64_t digest() {
    std::uint64_t h = 14695981039346656037ull;
    for (int r = 0; r < n_; ++r) {
      for (int c = 0; c < n_; ++c) h = fnv_bits(&at(r, c), 1, h);
    }
    return h;
  }

 private:
  int n_, b_, nb_;
  std::vector<double> u_;
  std::vector<double> hot_, cold_;  // the boundary rows above and below the grid
};

// ---------------------------------------------------------------- wavefront

// A few blocked Gauss-Seidel sweeps: the blocks of one sweep form a wavefront
// (each waits for the block above and the one to its left), and the next
// sweep follows right behind it.
class wavefront {
 public:
  wavefront(bool quick, int b, std::string name)
      : name(std::move(name)), family("wavefront"), block(b), n_(quick ? 512 : 1024), sweeps_(quick ? 2 : 4),
        grid_(n_, b) {
    const std::int64_t nb = grid_.blocks_per_side();
    tasks = nb * nb * sweeps_;
  }

  std::string name, family;
  int block;
  std::int64_t tasks = 0;

  void reset() { grid_.reset(); }

  template <class W>
  void graph(W& w) {
    const int nb = grid_.blocks_per_side();
    gs_grid* g = &grid_;
    for (int s = 0; s < sweeps_; ++s) {
      for (int bi = 0; bi < nb; ++bi) {
        for (int bj = 0; bj < nb; ++bj) {
          grid_.spawn_block(w, bi, bj, [g, bi, bj] { g->relax<false>(bi, bj); });
        }
      }
    }
  }

  std::int64_t reference() {
    reset();
    serial_flow w;
    graph(w);
    return digest53(grid_.digest());
  }

  std::int64_t verify(std::string& why) {
    (void)why;  // the digest is the check: the grid is bit for bit the serial one
    return digest53(grid_.digest());
  }

  void describe(extras& e) const { e.add("n", std::int64_t{n_}).add("sweeps", std::int64_t{sweeps_}); }

 private:
  int n_, sweeps_;
  gs_grid grid_;
};

// ---------------------------------------------------------------- heat

// The heat equation by Gauss-Seidel time steps on the blocked grid, with the
// residual (sum of squared changes) of each time step as a task reduction:
// every block task adds its part into residual[t]. The grid does not depend
// on the order of the reduction (the result is its digest); the residuals are
// checked against the serial ones with a relative tolerance.
class heat {
 public:
  heat(bool quick, int b, std::string name)
      : name(std::move(name)), family("heat"), block(b), n_(quick ? 512 : 1024), steps_(quick ? 2 : 4),
        grid_(n_, b), residual_(static_cast<std::size_t>(steps_)) {
    const std::int64_t nb = grid_.blocks_per_side();
    tasks = nb * nb * steps_;
  }

  std::string name, family;
  int block;
  std::int64_t tasks = 0;

  void reset() {
    grid_.reset();
    std::fill(residual_.begin(), residual_.end(), 0.0);
  }

  template <class W>
  void graph(W& w) {
    const int nb = grid_.blocks_per_side();
    gs_grid* g = &grid_;
    for (int t = 0; t < steps_; ++t) {
      double& res = residual_[static_cast<std::size_t>(t)];
      w.reduction_scope(res, [&] {
        for (int bi = 0; bi < nb; ++bi) {
          for (int bj = 0; bj < nb; ++bj) {
            grid_.spawn_block(
                w, bi, bj, [g, bi, bj](double& r) { r += g->relax<true>(bi, bj); }, dep::sum(res));
          }
        }
      });
    }
  }

  std::int64_t reference() {
    reset();
    serial_flow w;
    graph(w);
    ref_residual_ = residual_;
    return digest53(grid_.digest());
  }

  std::int64_t verify(std::string& why) {
    const double d = max_rel_diff(residual_, ref_residual_);
    if (!(d <= 1e-9)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "heat residuals differ from serial by %.3g (relative)", d);
      why = buf;
    }
    return digest53(grid_.digest());
  }

  void describe(extras& e) const {
    e.add("n", std::int64_t{n_}).add("steps", std::int64_t{steps_});
    e.add("checksum", residual_.empty() ? 0.0 : residual_.back());
  }

 private:
  int n_, steps_;
  gs_grid grid_;
  std::vector<double> residual_, ref_residual_;
};

// ---------------------------------------------------------------- dot

// The dot product of two arrays, `passes` times over, one task per block and
// pass reducing into one sum (in on both blocks). The elements are small
// integers, so every partial sum is exact and the answer does not depend on
// the reduction's order: the result is the sum itself.
class dot {
 public:
  dot(bool quick, int b, std::string name)
      : name(std::move(name)), family("dot"), block(b), n_(quick ? (1 << 18) : (1 << 20)), passes_(quick ? 4 : 16),
        x_(static_cast<std::size_t>(n_)), y_(static_cast<std::size_t>(n_)) {
    for (std::int64_t i = 0; i < n_; ++i) {
      x_[static_cast<std::size_t>(i)] = static_cast<double>(i * 7 % 13) - 6.0;
      y_[static_cast<std::size_t>(i)] = x_[static_cast<std::size_t>(i)] + static_cast<double>(i * 5 % 11) - 5.0;
    }
    tasks = n_ / b * passes_;
  }

  std::string name, family;
  int block;
  std::int64_t tasks = 0;

  void reset() { sum_ = 0; }

  template <class W>
  void graph(W& w) {
    const std::size_t bs = static_cast<std::size_t>(block);
    w.reduction_scope(sum_, [&] {
      for (int p = 0; p < passes_; ++p) {
        for (std::int64_t i = 0; i < n_; i += block) {
          const double* xs = &x_[static_cast<std::size_t>(i)];
          const double* ys = &y_[static_cast<std::size_t>(i)];
          w.spawn(
              [xs, ys, bs](double& s) {
                double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                std::size_t k = 0;
                for (; k + 4 <= bs; k += 4) {
                  a0 += xs[k] * ys[k];
                  a1 += xs[k + 1] * ys[k + 1];
                  a2 += xs[k + 2] * ys[k + 2];
                  a3 += xs[k + 3] * ys[k + 3];
                }
                for (; k < bs; ++k) a0 += xs[k] * ys[k];
                s += (a0 + a1) + (a2 + a3);
              },
              dep::in(xs, bs), dep::in(ys, bs), dep::sum(sum_));
        }
      }
    });
  }

  std::int64_t reference() {
    // The same sum without tasks.
    double s = 0;
    for (std::int64_t i = 0; i < n_; ++i) s += x_[static_cast<std::size_t>(i)] * y_[static_cast<std::size_t>(i)];
    return static_cast<std::int64_t>(s) * passes_;
  }

  std::int64_t verify(std::string& why) {
    if (sum_ != std::nearbyint(sum_)) why = "dot: a sum of integers is not an integer";
    return static_cast<std::int64_t>(sum_);
  }

  void describe(extras& e) const { e.add("n", n_).add("passes", std::int64_t{passes_}); }

 private:
  std::int64_t n_;
  int passes_;
  std::vector<double> x_, y_;
  double sum_ = 0;
};

// ---------------------------------------------------------------- matmul

// C += A * B on n x n matrices stored as b x b tiles (each tile contiguous,
// row-major): one task per (i, j, k), one cblas_dgemm on tiles, inout on
// C(i,j) and in on A(i,k) and B(k,j). The tasks on one C tile run in k order,
// so C is bit for bit the serial one.
class matmul {
 public:
  matmul(bool quick, int b, std::string name)
      : name(std::move(name)), family("matmul"), block(b), n_(quick ? 256 : 512), nb_(n_ / b),
        a_(static_cast<std::size_t>(n_) * n_), b_(a_.size()), c_(a_.size()) {
    for (int i = 0; i < n_; ++i) {
      for (int j = 0; j < n_; ++j) {
        at(a_, i, j) = 2.0 * unit(static_cast<std::uint64_t>(i) * n_ + j) - 1.0;
        at(b_, i, j) = 2.0 * unit(0x100000000ull + static_cast<std::uint64_t>(i) * n_ + j) - 1.0;
      }
    }
    tasks = std::int64_t{nb_} * nb_ * nb_;
  }

  std::string name, family;
  int block;
  std::int64_t tasks = 0;

  void reset() { std::fill(c_.begin(), c_.end(), 0.0); }

  template <class W>
  void graph(W& w) {
    const int bs = block;
    const std::size_t tile = static_cast<std::size_t>(bs) * bs;
    for (int i = 0; i < nb_; ++i) {
      for (int j = 0; j < nb_; ++j) {
        for (int k = 0; k < nb_; ++k) {
          double* c = tile_of(c_, i, j);
          const double* a = tile_of(a_, i, k);
          const double* b = tile_of(b_, k, j);
          w.spawn(
              [a, b, c, bs] {
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bs, bs, bs, 1.0, a, bs, b, bs, 1.0, c, bs);
              },
              dep::inout(c, tile), dep::in(a, tile), dep::in(b, tile));
        }
      }
    }
  }

  std::int64_t reference() {
    reset();
    serial_flow w;
    graph(w);
    ref_ = c_;
    return digest53(fnv_bits(c_.data(), c_.size()));
  }

  std::int64_t verify(std::string& why) {
    const double d = max_rel_diff(c_, ref_);
    if (!(d <= 1e-12)) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "matmul differs from serial by %.3g (relative)", d);
      why = buf;
    }
    return digest53(fnv_bits(c_.data(), c_.size()));
  }

  void describe(extras& e) const { e.add("n", std::int64_t{n_}); }

 private:
  // Element (i, j) in the tiled layout.
  double& at(std::vector<double>& m, int i, int j) {
    const int ti = i / block, tj = j / block;
    return tile_of(m, ti, tj)[(i % block) * block + j % block];
  }
  double* tile_of(std::vector<double>& m, int ti, int tj) {
    return m.data() + (static_cast<std::size_t>(ti) * nb_ + tj) * block * block;
  }

  int n_, nb_;
  std::vector<double> a_, b_, c_, ref_;
};

// ---------------------------------------------------------------- cholesky

// Blocked right-looking Cholesky (A = L L^T, lower) of a symmetric positive
// definite n x n matrix stored as b x b column-major tiles: per step k one
// potrf on the diagonal tile, a trsm per tile below it, then a syrk per
// diagonal tile and a gemm per tile of the trailing lower triangle (LAPACK
// dpotrf_ and cblas from OpenBLAS, single-threaded). Every tile is updated in
// program order, so L is bit for bit the serial one.
class cholesky {
 public:
  cholesky(bool quick, int b, std::string name)
      : name(std::move(name)), family("cholesky"), block(b), n_(quick ? 384 : 768), nt_(n_ / b),
        a0_(static_cast<std::size_t>(n_) * n_), a_(a0_.size()) {
    for (int i = 0; i < n_; ++i) {
      for (int j = 0; j < n_; ++j) {
        const auto lo = static_cast<std::uint64_t>(std::min(i, j)), hi = static_cast<std::uint64_t>(std::max(i, j));
        at(a0_, i, j) = i == j ? n_ + unit(lo * n_ + hi) : unit(lo * n_ + hi) - 0.5;
      }
    }
    const std::int64_t t = nt_;
    // potrf + trsm + syrk + gemm
    tasks = t + t * (t - 1) / 2 + t * (t - 1) / 2 + t * (t - 1) * (t - 2) / 6;
  }

  std::string name, family;
  int block;
  std::int64_t tasks = 0;

  void reset() {
    a_ = a0_;
    failures_.store(0, std::memory_order_relaxed);
  }

  template <class W>
  void graph(W& w) {
    const int bs = block;
    const std::size_t tile = static_cast<std::size_t>(bs) * bs;
    std::atomic<int>* failures = &failures_;
    for (int k = 0; k < nt_; ++k) {
      double* akk = tile_of(a_, k, k);
      w.spawn(
          [akk, bs, failures] {
            int info = 0;
            dpotrf_("L", &bs, akk, &bs, &info, 1);
            if (info != 0) failures->fetch_add(1, std::memory_order_relaxed);
          },
          dep::inout(akk, tile));
      for (int i = k + 1; i < nt_; ++i) {
        double* aik = tile_of(a_, i, k);
        w.spawn(
            [akk, aik, bs] {
              cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, bs, bs, 1.0, akk, bs, aik,
                          bs);
            },
            dep::inout(aik, tile), dep::in(akk, tile));
      }
      for (int i = k + 1; i < nt_; ++i) {
        double* aik = tile_of(a_, i, k);
        for (int j = k + 1; j < i; ++j) {
          double* ajk = tile_of(a_, j, k);
          double* aij = tile_of(a_, i, j);
          w.spawn(
              [aik, ajk, aij, bs] {
                cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, bs, bs, bs, -1.0, aik, bs, ajk, bs, 1.0, aij, bs);
              },
              dep::inout(aij, tile), dep::in(aik, tile), dep::in(ajk, tile));
        }
        double* aii = tile_of(a_, i, i);
        w.spawn([aik, aii, bs] { cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, bs, bs, -1.0, aik, bs, 1.0, aii, bs); },
                dep::inout(aii, tile), dep::in(aik, tile));
      }
    }
  }

  std::int64_t reference() {
    reset();
    serial_flow w;
    graph(w);
    // Is it a factorization at all? (L L^T)(i, j) against A(i, j) at a few places.
    for (int s = 0; s < 64; ++s) {
      const int i = static_cast<int>(unit(0x5000u + s) * n_);
      const int j = static_cast<int>(unit(0x6000u + s) * (i + 1));
      double v = 0;
      for (int k = 0; k <= j; ++k) v += at(a_, i, k) * at(a_, j, k);
      if (std::fabs(v - at(a0_, i, j)) > 1e-9 * n_) {
        std::fprintf(stderr, "bench: %s: the serial factorization is wrong at (%d, %d)\n", name.c_str(), i, j);
        std::exit(1);
      }
    }
    ref_ = a_;
    return digest53(lower_digest());
  }

  std::int64_t verify(std::string& why) {
    if (failures_.load() != 0) why = "cholesky: potrf failed (matrix not positive definite?)";
    const double d = max_rel_diff(a_, ref_);
    if (!(d <= 1e-12)) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "cholesky differs from serial by %.3g (relative)", d);
      why = buf;
    }
    return digest53(lower_digest());
  }

  void describe(extras& e) const { e.add("n", std::int64_t{n_}); }

 private:
  // Element (i, j) in the tiled layout (column-major tiles, column-major inside).
  double& at(std::vector<double>& m, int i, int j) {
    return tile_of(m, i / block, j / block)[(j % block) * block + i % block];
  }
  double* tile_of(std::vector<double>& m, int ti, int tj) {
    return m.data() + (static_cast<std::size_t>(tj) * nt_ + ti) * block * block;
  }
  std::uint64_t lower_digest() {
    std::uint64_t h = 14695981039346656037ull;
    const std::size_t tile = static_cast<std::size_t>(block) * block;
    for (int j = 0; j < nt_; ++j) {
      for (int i = j; i < nt_; ++i) h = fnv_bits(tile_of(a_, i, j), tile, h);
    }
    return h;
  }

  int n_, nt_;
  std::vector<double> a0_, a_, ref_;
  std::atomic<int> failures_{0};
};

// ---------------------------------------------------------------- nbody

// Blocked n-body time steps (softened gravity): per step one task per block
// pair (i, j) adds block j's pull on the bodies of block i into block i's
// forces (in on both blocks' positions, commutative on block i's forces: the
// pairs of one block may run in any order, one at a time), then one update
// per block (inout on its positions and forces: velocities, positions, forces
// back to zero). The order of the force sums varies, so the answer is checked
// against the serial one with a relative tolerance and the result is 1.
struct body_position {
  double x, y, z, m;
};
struct body_vector {
  double x, y, z;
};

class nbody {
 public:
  nbody(bool quick, int b, std::string name)
      : name(std::move(name)), family("nbody"), block(b), n_(quick ? 512 : 1024), steps_(quick ? 2 : 4), nb_(n_ / b),
        pos0_(static_cast<std::size_t>(n_)), pos_(pos0_.size()), vel_(pos0_.size()), force_(pos0_.size()) {
    for (int i = 0; i < n_; ++i) {
      const auto k = static_cast<std::uint64_t>(i) * 4;
      pos0_[static_cast<std::size_t>(i)] = {unit(k), unit(k + 1), unit(k + 2), 0.5 + unit(k + 3) / n_};
    }
    tasks = (std::int64_t{nb_} * nb_ + nb_) * steps_;
  }

  std::string name, family;
  int block;
  std::int64_t tasks = 0;

  void reset() {
    pos_ = pos0_;
    std::fill(vel_.begin(), vel_.end(), body_vector{0, 0, 0});
    std::fill(force_.begin(), force_.end(), body_vector{0, 0, 0});
  }

  template <class W>
  void graph(W& w) {
    const std::size_t bs = static_cast<std::size_t>(block);
    for (int s = 0; s < steps_; ++s) {
      for (int i = 0; i < nb_; ++i) {
        body_position* pi = &pos_[static_cast<std::size_t>(i) * bs];
        body_vector* fi = &force_[static_cast<std::size_t>(i) * bs];
        for (int j = 0; j < nb_; ++j) {
          body_position* pj = &pos_[static_cast<std::size_t>(j) * bs];
          auto f = [pi, pj, fi, bs] { pull(pi, pj, fi, bs); };
          if (i == j) {
            w.spawn(f, dep::commutative(fi, bs), dep::in(pi, bs));
          } else {
            w.spawn(f, dep::commutative(fi, bs), dep::in(pi, bs), dep::in(pj, bs));
          }
        }
      }
      for (int i = 0; i < nb_; ++i) {
        body_position* pi = &pos_[static_cast<std::size_t>(i) * bs];
        body_vector* vi = &vel_[static_cast<std::size_t>(i) * bs];
        body_vector* fi = &force_[static_cast<std::size_t>(i) * bs];
        w.spawn([pi, vi, fi, bs] { advance(pi, vi, fi, bs); }, dep::inout(pi, bs), dep::inout(fi, bs));
      }
    }
  }

  std::int64_t reference() {
    reset();
    serial_flow w;
    graph(w);
    ref_ = flat();
    return 1;
  }

  std::int64_t verify(std::string& why) {
    const std::vector<double> now = flat();
    const double d = max_rel_diff(now, ref_);
    if (!(d <= 1e-9)) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "nbody positions differ from serial by %.3g (relative)", d);
      why = buf;
      return 0;
    }
    return 1;
  }

  void describe(extras& e) const {
    e.add("n", std::int64_t{n_}).add("steps", std::int64_t{steps_});
    double c = 0;
    for (const auto& p : pos_) c += p.x + p.y + p.z;
    e.add("checksum", c);
  }

 private:
  static constexpr double kSoftening2 = 1e-4;
  static constexpr double kDt = 1e-3;

  // Block j's pull on the bodies of block i, added into fi.
  static void pull(const body_position* pi, const body_position* pj, body_vector* fi, std::size_t bs) {
    for (std::size_t a = 0; a < bs; ++a) {
      double fx = 0, fy = 0, fz = 0;
      const double xa = pi[a].x, ya = pi[a].y, za = pi[a].z;
      for (std::size_t c = 0; c < bs; ++c) {
        const double dx = pj[c].x - xa, dy = pj[c].y - ya, dz = pj[c].z - za;
        const double r2 = dx * dx + dy * dy + dz * dz + kSoftening2;
        const double inv = pj[c].m / (r2 * std::sqrt(r2));
        fx += dx * inv;
        fy += dy * inv;
        fz += dz * inv;
      }
      fi[a].x += fx;
      fi[a].y += fy;
      fi[a].z += fz;
    }
  }

  static void advance(body_position* p, body_vector* v, body_vector* f, std::size_t bs) {
    for (std::size_t a = 0; a < bs; ++a) {
      v[a].x += kDt * f[a].x;
      v[a].y += kDt * f[a].y;
      v[a].z += kDt * f[a].z;
      p[a].x += kDt * v[a].x;
      p[a].y += kDt * v[a].y;
      p[a].z += kDt * v[a].z;
      f[a] = {0, 0, 0};
    }
  }

  std::vector<double> flat() const {
    std::vector<double> out;
    out.reserve(pos_.size() * 3);
    for (const auto& p : pos_) {
      out.push_back(p.x);
      out.push_back(p.y);
      out.push_back(p.z);
    }
    return out;
  }

  int n_, steps_, nb_;
  std::vector<body_position> pos0_, pos_;
  std::vector<body_vector> vel_, force_;
  std::vector<double> ref_;
};

}  // namespace mote_bench::dataflow
