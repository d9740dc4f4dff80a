// The loop kernels, written once for every runtime.
//
// A kernel is a function template over a parallel wrapper `Par`, the only
// thing that differs between runtimes (serial_par below is the serial one;
// the backends in bench/backends/ have the others). A wrapper has
//
//   static constexpr bool concurrent      bodies may run at once (false: serial,
//                                         whose kernels then skip their atomics)
//   template <class F> void loop(n, grain, body)
//       body(b, e) over sub-ranges of [0, n); grain 0 = the runtime's
//       automatic choice, else batches of `grain` iterations
//   template <class T, class F, class C> T reduce(n, grain, identity, body, combine)
//       body(b, e, acc) folds [b, e) into acc and returns it; combine(a, b)
//   template <class F> void nested(rows, cols, body)
//       body(r, c0, c1): a loop over rows whose body is a loop over columns,
//       automatic grain at both levels
//   template <class T, class Init> auto locals(Init init)
//       one T per thread of the runtime, made by init() on first use: an
//       object with local() and for_each(f)
//
// Every kernel's answer is exact whatever order the runtime runs things in
// (integer counts, sums of dyadic numbers, per-vertex results computed by one
// thread in adjacency order), so its checksum equals the serial one bit for bit.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "../common/rng.hpp"

namespace mote_bench::loops {

// ---------------------------------------------------------------- serial wrapper

template <class T>
class serial_locals {
 public:
  template <class Init>
  explicit serial_locals(Init init) : value_(T(init())) {}
  T& local() { return value_; }
  template <class F>
  void for_each(F&& f) {
    f(value_);
  }

 private:
  T value_;
};

struct serial_par {
  static constexpr bool concurrent = false;
  static constexpr bool has_auto = true;
  template <class Body>
  void loop_region(Body&& body) {
    body();
  }
  template <class F>
  void loop(std::size_t n, std::size_t /*grain*/, F&& body) {
    if (n != 0) body(std::size_t{0}, n);
  }
  template <class T, class F, class C>
  T reduce(std::size_t n, std::size_t /*grain*/, T identity, F&& body, C&& /*combine*/) {
    return n != 0 ? body(std::size_t{0}, n, std::move(identity)) : identity;
  }
  template <class F>
  void nested(std::size_t rows, std::size_t cols, F&& body) {
    for (std::size_t r = 0; r < rows; ++r) body(r, std::size_t{0}, cols);
  }
  template <class T, class Init>
  serial_locals<T> locals(Init init) {
    return serial_locals<T>(std::move(init));
  }
};

// ---------------------------------------------------------------- helpers

// An allocator that puts arrays of 2 MB and more on transparent huge pages
// (madvise; the machine's THP setting is "madvise"). On this VM the first
// touch of a 4 KB page costs tens of microseconds, so an 80 MB array would
// take half a second to fill and a scale-20 graph several seconds to build.
// Every runtime gets the same pages: it changes setup time, and the TLB
// behaviour of every variant alike.
template <class T>
struct huge_allocator {
  using value_type = T;
  static constexpr std::size_t kHuge = std::size_t{2} << 20;
  huge_allocator() noexcept = default;
  template <class U>
  huge_allocator(const huge_allocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHuge) return static_cast<T*>(::operator new(bytes));
    const std::size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
    void* p = std::aligned_alloc(kHuge, rounded);
    if (p == nullptr) throw std::bad_alloc();
    madvise(p, rounded, MADV_HUGEPAGE);  // a hint: without it, 4 KB pages
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHuge) {
      ::operator delete(p);
    } else {
      std::free(p);
    }
  }
  template <class U>
  bool operator==(const huge_allocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using big_vector = std::vector<T, huge_allocator<T>>;

// Runs f(part) for every part in [0, parts) on plain threads, one per
// hardware thread: for building the inputs, before anything is timed (the
// runtime under test is idle then).
template <class F>
void setup_in_parallel(std::size_t parts, F&& f) {
  const std::size_t threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t p = next.fetch_add(1); p < parts; p = next.fetch_add(1)) f(p);
  };
  std::vector<std::thread> helpers;
  for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
}

using mote_bench::rng64;  // ../common/rng.hpp

// An order-sensitive digest of 64-bit words (FNV-1a over the words), as a
// non-negative int64 for the records.
struct digest {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void add(std::uint64_t w) {
    h ^= w;
    h *= 0x100000001b3ull;
  }
  void add_double(double d) {
    std::uint64_t w;
    std::memcpy(&w, &d, sizeof w);
    add(w);
  }
  std::int64_t value() const { return static_cast<std::int64_t>(h >> 1); }
};

// The coefficients of update (x = a*x + b), read at run time so that the
// compiler cannot fold the multiply: a = -1, b = 1 flips each element between
// x0 and 1 - x0, exactly, for x0 = j / 2^20 in [0, 1).
inline volatile double update_a = -1.0;
inline volatile double update_b = 1.0;

inline double update_x0(std::size_t i) {
  return static_cast<double>(i & 0xFFFFF) * (1.0 / 1048576.0);
}

// ---------------------------------------------------------------- update, sum

// x[i] = a*x[i] + b for i in [0, n), batches of `grain` (0: automatic).
template <class Par>
void update(Par& par, double* x, std::size_t n, std::size_t grain) {
  const double a = update_a;
  const double b = update_b;
  par.loop(n, grain, [x, a, b](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) x[i] = a * x[i] + b;
  });
}

// The values summed: multiples of 1/4 below 256, so every partial sum of up to
// 2^40 of them is exact and the total is the same in any order.
inline double sum_value(std::size_t i) { return static_cast<double>(i & 1023) * 0.25; }

// The same plain loop (acc += x[i]) on every runtime; batches of `grain`.
template <class Par>
double sum(Par& par, const double* x, std::size_t n, std::size_t grain) {
  return par.reduce(
      n, grain, 0.0,
      [x](std::size_t lo, std::size_t hi, double acc) {
        for (std::size_t i = lo; i < hi; ++i) acc += x[i];
        return acc;
      },
      [](double a, double b) { return a + b; });
}

// ---------------------------------------------------------------- histogram

constexpr int kBins = 256;
using bins = std::array<std::uint64_t, kBins>;

inline std::uint32_t histogram_key(std::size_t i) {
  rng64 r{0x5eed0000ull + i};
  return static_cast<std::uint32_t>(r.next());
}

// Counts keys by their top 8 bits into per-thread bins, then adds the bins up.
template <class Par>
bins histogram(Par& par, const std::uint32_t* keys, std::size_t n) {
  auto per = par.template locals<bins>([] { return bins{}; });
  par.loop(n, 0, [&per, keys](std::size_t lo, std::size_t hi) {
    bins& h = per.local();
    for (std::size_t i = lo; i < hi; ++i) ++h[keys[i] >> 24];
  });
  bins total{};
  per.for_each([&total](bins& h) {
    for (int b = 0; b < kBins; ++b) total[b] += h[b];
  });
  return total;
}

// ---------------------------------------------------------------- nested

// x[r][c] = a*x[r][c] + b over a rows x cols matrix (row-major), an outer
// loop over the rows and an inner one over the columns.
template <class Par>
void nested_update(Par& par, double* x, std::size_t rows, std::size_t cols) {
  const double a = update_a;
  const double b = update_b;
  par.nested(rows, cols, [x, a, b, cols](std::size_t r, std::size_t lo, std::size_t hi) {
    double* row = x + r * cols;
    for (std::size_t c = lo; c < hi; ++c) row[c] = a * row[c] + b;
  });
}

// ---------------------------------------------------------------- claim, empty loop

// Where the near-empty bodies of claim and empty_loop put what they saw: one
// cache line per thread, the thread's slot found through a thread_local, so a
// body is a few instructions and shares nothing. Each body adds the sum of
// (i + 1) over its batch, so a lost or repeated batch shows in the total.
struct alignas(128) tally_slot {
  std::uint64_t v = 0;
  std::uint64_t calls = 0;
};

struct tally {
  static constexpr unsigned kSlots = 256;
  static inline tally_slot slots[kSlots];
  static inline std::atomic<unsigned> next_slot{0};
  static inline thread_local int mine = -1;

  static void add(std::size_t b, std::size_t e) {
    if (mine < 0)
      mine = static_cast<int>(next_slot.fetch_add(1, std::memory_order_relaxed) % kSlots);
    // sum of (i + 1) for i in [b, e)
    slots[mine].v +=
        (static_cast<std::uint64_t>(e) * (e + 1) - static_cast<std::uint64_t>(b) * (b + 1)) / 2;
    ++slots[mine].calls;
  }
  // Body calls (batches) so far, and the counts back to zero; *own gets the
  // calling thread's. Only between loops.
  static std::uint64_t take_calls(std::uint64_t* own) {
    *own = mine >= 0 ? slots[mine].calls : 0;
    std::uint64_t t = 0;
    for (tally_slot& s : slots) {
      t += s.calls;
      s.calls = 0;
    }
    return t;
  }
  // The total so far, and every slot back to zero. Only between loops.
  static std::uint64_t take() {
    std::uint64_t t = 0;
    for (tally_slot& s : slots) {
      t += s.v;
      s.v = 0;
    }
    return t;
  }
  static std::uint64_t expected(std::size_t n) {
    return static_cast<std::uint64_t>(n) * (n + 1) / 2;
  }
};

// One loop of n iterations, grain 1, with the near-empty body.
template <class Par>
void claim_loop(Par& par, std::size_t n) {
  par.loop(n, 1, [](std::size_t b, std::size_t e) { tally::add(b, e); });
}

// ---------------------------------------------------------------- graphs

// Compressed sparse rows, symmetric, no self-loops or duplicate edges,
// neighbour lists sorted ascending.
struct csr_graph {
  std::int64_t n = 0;
  big_vector<std::int64_t> offsets;  // n + 1
  big_vector<std::int32_t> neighbors;
  std::int64_t degree(std::int64_t v) const { return offsets[v + 1] - offsets[v]; }
  std::int64_t directed_edges() const { return static_cast<std::int64_t>(neighbors.size()); }
};

// Sorts keys of `bits` significant bits: one pass distributes them by their
// top 11 bits, then each bucket (small enough to stay in cache) is sorted by
// least-significant-digit radix passes of 11 bits, the buckets in parallel.
inline void radix_sort(big_vector<std::uint64_t>& keys, int bits) {
  constexpr int kDigit = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kDigit;
  const int top_shift = bits > kDigit ? bits - kDigit : 0;
  big_vector<std::uint64_t> out(keys.size());
  std::vector<std::size_t> start(kBuckets + 1, 0);
  for (const std::uint64_t k : keys) ++start[(k >> top_shift) + 1];
  for (std::size_t b = 0; b < kBuckets; ++b) start[b + 1] += start[b];
  {
    std::vector<std::size_t> at(start.begin(), start.end() - 1);
    for (const std::uint64_t k : keys) out[at[k >> top_shift]++] = k;
  }
  constexpr std::size_t kGroups = 64;  // buckets kBuckets / kGroups at a time per thread
  setup_in_parallel(kGroups, [&](std::size_t group) {
    std::vector<std::uint64_t> tmp;
    std::vector<std::size_t> count(kBuckets);
    for (std::size_t b = group * (kBuckets / kGroups); b < (group + 1) * (kBuckets / kGroups);
         ++b) {
      std::uint64_t* first = out.data() + start[b];
      const std::size_t len = start[b + 1] - start[b];
      if (len < 2) continue;
      if (tmp.size() < len) tmp.resize(len);
      std::uint64_t* from = first;
      std::uint64_t* to = tmp.data();
      for (int shift = 0; shift < top_shift; shift += kDigit) {
        std::fill(count.begin(), count.end(), 0);
        for (std::size_t i = 0; i < len; ++i) ++count[(from[i] >> shift) & (kBuckets - 1)];
        std::size_t sum = 0;
        for (std::size_t& c : count) {
          const std::size_t here = c;
          c = sum;
          sum += here;
        }
        for (std::size_t i = 0; i < len; ++i)
          to[count[(from[i] >> shift) & (kBuckets - 1)]++] = from[i];
        std::swap(from, to);
      }
      if (from != first) std::copy(from, from + len, first);
    }
  });
  keys.swap(out);
}

// The CSR of n = 2^scale vertices from directed edges packed as
// (source << scale) | target: sorted, duplicates dropped, so each list comes
// out sorted ascending.
inline csr_graph csr_from_keys(int scale, big_vector<std::uint64_t>& keys) {
  radix_sort(keys, 2 * scale);
  const std::uint64_t low = (std::uint64_t{1} << scale) - 1;
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  keys.erase(std::remove_if(keys.begin(), keys.end(),
                            [&](std::uint64_t k) { return (k >> scale) == (k & low); }),
             keys.end());
  csr_graph g;
  g.n = std::int64_t{1} << scale;
  g.offsets.assign(static_cast<std::size_t>(g.n) + 1, 0);
  g.neighbors.resize(keys.size());
  const std::uint64_t mask = (std::uint64_t{1} << scale) - 1;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ++g.offsets[static_cast<std::size_t>(keys[i] >> scale) + 1];
    g.neighbors[i] = static_cast<std::int32_t>(keys[i] & mask);
  }
  for (std::int64_t v = 0; v < g.n; ++v) g.offsets[v + 1] += g.offsets[v];
  return g;
}

// Graph500-style Kronecker (R-MAT) graph: 2^scale vertices, edge_factor *
// 2^scale generated edges, each choosing one quadrant of the adjacency matrix
// per bit of the vertex ids with probabilities A = 0.57, B = C = 0.19
// (D = 0.05), quantized to 1/65536; vertex ids then randomly permuted, the
// edges made symmetric, self-loops and duplicates dropped.
inline csr_graph make_kronecker(int scale, int edge_factor = 16,
                                std::uint64_t seed = 0x6a09e667f3bcc909ull) {
  const std::int64_t n = std::int64_t{1} << scale;
  const std::int64_t m = n * edge_factor;
  constexpr std::uint32_t tA = 37355;    // 0.57 * 65536
  constexpr std::uint32_t tAB = 49807;   // (0.57 + 0.19) * 65536
  constexpr std::uint32_t tABC = 62259;  // (0.57 + 0.19 + 0.19) * 65536
  rng64 r{seed};
  big_vector<std::int32_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  for (std::int64_t i = n - 1; i > 0; --i) {
    std::swap(perm[static_cast<std::size_t>(i)],
              perm[r.next() % static_cast<std::uint64_t>(i + 1)]);
  }
  // Edges in 64 slices of their own random streams (so the graph does not
  // depend on how many threads build it), both directions of each; self-loops
  // go when the keys are sorted.
  constexpr std::int64_t kSlices = 64;
  const std::int64_t per_slice = m / kSlices;
  big_vector<std::uint64_t> keys(2 * static_cast<std::size_t>(per_slice * kSlices));
  setup_in_parallel(kSlices, [&](std::size_t slice) {
    rng64 sr{seed ^ (0x9E3779B97F4A7C15ull * (slice + 1))};
    std::uint64_t* out = keys.data() + 2 * slice * static_cast<std::size_t>(per_slice);
    std::uint64_t bits = 0;
    int left = 0;  // 16-bit draws left in `bits`
    for (std::int64_t e = 0; e < per_slice; ++e) {
      std::uint64_t u = 0, v = 0;
      for (int level = 0; level < scale; ++level) {
        if (left == 0) {
          bits = sr.next();
          left = 4;
        }
        const auto p = static_cast<std::uint32_t>(bits & 0xFFFF);
        bits >>= 16;
        --left;
        const std::uint64_t ub = p >= tAB ? 1 : 0;                           // C or D: lower half
        const std::uint64_t vb = (p >= tA && p < tAB) || p >= tABC ? 1 : 0;  // B or D: right half
        u |= ub << level;
        v |= vb << level;
      }
      u = static_cast<std::uint64_t>(perm[u]);
      v = static_cast<std::uint64_t>(perm[v]);
      *out++ = u << scale | v;
      *out++ = v << scale | u;
    }
  });
  return csr_from_keys(scale, keys);
}

// The same graph with vertices renumbered by decreasing degree (ties by id),
// as GAP's triangle counting does for skewed graphs: ordered counting then
// walks the short end of every high-degree list.
inline csr_graph relabel_by_degree(const csr_graph& g, int scale) {
  std::vector<std::int32_t> order(static_cast<std::size_t>(g.n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&g](std::int32_t a, std::int32_t b) { return g.degree(a) > g.degree(b); });
  big_vector<std::uint64_t> rank(static_cast<std::size_t>(g.n));
  for (std::size_t i = 0; i < order.size(); ++i) rank[static_cast<std::size_t>(order[i])] = i;
  big_vector<std::uint64_t> keys;
  keys.reserve(g.neighbors.size());
  for (std::int64_t u = 0; u < g.n; ++u) {
    for (std::int64_t k = g.offsets[u]; k < g.offsets[u + 1]; ++k) {
      keys.push_back(rank[static_cast<std::size_t>(u)] << scale |
                     rank[static_cast<std::size_t>(g.neighbors[static_cast<std::size_t>(k)])]);
    }
  }
  return csr_from_keys(scale, keys);
}

// ---- PageRank, pull direction as in GAP: each iteration one loop computes
// every vertex's outgoing contribution, then one reduce pulls each vertex's
// incoming contributions into its new score and sums the L1 change. A fixed
// number of iterations (no convergence test), so every runtime does the same
// work. Checksum: the bits of every score.
struct pr_state {
  big_vector<double> score, contrib;
  double last_error = 0;
};

template <class Par>
std::int64_t pagerank(Par& par, const csr_graph& g, int iterations, pr_state& st) {
  constexpr double kDamp = 0.85;
  const auto n = static_cast<std::size_t>(g.n);
  st.score.resize(n);
  st.contrib.resize(n);
  double* score = st.score.data();
  double* contrib = st.contrib.data();
  const std::int64_t* off = g.offsets.data();
  const std::int32_t* nb = g.neighbors.data();
  const double init = 1.0 / static_cast<double>(n);
  const double base = (1.0 - kDamp) / static_cast<double>(n);
  par.loop(n, 0, [score, init](std::size_t b, std::size_t e) {
    for (std::size_t u = b; u < e; ++u) score[u] = init;
  });
  for (int it = 0; it < iterations; ++it) {
    par.loop(n, 0, [score, contrib, off](std::size_t b, std::size_t e) {
      for (std::size_t u = b; u < e; ++u) {
        const std::int64_t d = off[u + 1] - off[u];
        contrib[u] = d > 0 ? score[u] / static_cast<double>(d) : 0.0;
      }
    });
    st.last_error = par.reduce(
        n, 0, 0.0,
        [score, contrib, off, nb, base](std::size_t b, std::size_t e, double error) {
          for (std::size_t u = b; u < e; ++u) {
            double incoming = 0;
            for (std::int64_t k = off[u]; k < off[u + 1]; ++k) incoming += contrib[nb[k]];
            const double next = base + kDamp * incoming;
            error += std::fabs(next - score[u]);
            score[u] = next;
          }
          return error;
        },
        [](double a, double b) { return a + b; });
  }
  digest d;
  for (std::size_t u = 0; u < n; ++u) d.add_double(score[u]);
  return d.value();
}

// ---- Triangle counting, ordered, on the degree-relabelled graph with sorted
// lists: for each u, each neighbour v < u, count the common neighbours w < v
// by merging the two lists, so each triangle w < v < u counts once.
template <class Par>
std::int64_t triangles(Par& par, const csr_graph& g) {
  const std::int64_t* off = g.offsets.data();
  const std::int32_t* nb = g.neighbors.data();
  return par.reduce(
      static_cast<std::size_t>(g.n), 0, std::int64_t{0},
      [off, nb](std::size_t b, std::size_t e, std::int64_t count) {
        for (std::size_t u = b; u < e; ++u) {
          const std::int32_t* ub = nb + off[u];
          const std::int32_t* ue = nb + off[u + 1];
          for (const std::int32_t* pv = ub; pv != ue && *pv < static_cast<std::int32_t>(u); ++pv) {
            const std::int32_t v = *pv;
            const std::int32_t* a = ub;
            const std::int32_t* c = nb + off[v];
            const std::int32_t* ce = nb + off[v + 1];
            while (a != ue && c != ce && *a < v && *c < v) {
              if (*a == *c) {
                ++count;
                ++a;
                ++c;
              } else if (*a < *c) {
                ++a;
              } else {
                ++c;
              }
            }
          }
        }
        return count;
      },
      [](std::int64_t a, std::int64_t b) { return a + b; });
}

// ---- Betweenness centrality (Brandes) from a few sources, level-synchronous
// as in GAP: per source, a top-down BFS whose loop over each level's frontier
// claims vertices with a compare-and-swap on their depth, counts shortest
// paths with atomic adds (integers: exact in any order) and collects the next
// frontier in per-thread queues; then, level by level from the deepest, a
// loop over the level pulls each vertex's dependency from its successors.
// Checksum: the bits of every score.
struct bc_state {
  big_vector<std::int32_t> depth, order;
  big_vector<std::uint64_t> sigma;
  big_vector<double> delta, score;
};

inline std::vector<std::int32_t> bc_sources(const csr_graph& g, int count,
                                            std::uint64_t seed = 0x3c6ef372fe94f82bull) {
  rng64 r{seed};
  std::vector<std::int32_t> out;
  while (static_cast<int>(out.size()) < count) {
    const auto v = static_cast<std::int32_t>(r.next() % static_cast<std::uint64_t>(g.n));
    if (g.degree(v) > 0 && std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

template <class Par>
std::int64_t betweenness(Par& par, const csr_graph& g, const std::vector<std::int32_t>& sources,
                         bc_state& st) {
  const auto n = static_cast<std::size_t>(g.n);
  st.depth.resize(n);
  st.order.resize(n);
  st.sigma.resize(n);
  st.delta.resize(n);
  st.score.assign(n, 0.0);
  std::int32_t* depth = st.depth.data();
  std::int32_t* order = st.order.data();
  std::uint64_t* sigma = st.sigma.data();
  double* delta = st.delta.data();
  double* score = st.score.data();
  const std::int64_t* off = g.offsets.data();
  const std::int32_t* nb = g.neighbors.data();
  auto next =
      par.template locals<std::vector<std::int32_t>>([] { return std::vector<std::int32_t>(); });
  std::vector<std::size_t> levels;
  for (const std::int32_t s : sources) {
    par.loop(n, 0, [depth, sigma, delta](std::size_t b, std::size_t e) {
      for (std::size_t v = b; v < e; ++v) {
        depth[v] = -1;
        sigma[v] = 0;
        delta[v] = 0;
      }
    });
    depth[s] = 0;
    sigma[s] = 1;
    order[0] = s;
    levels.assign({0, 1});
    for (std::int32_t d = 0;; ++d) {
      const std::size_t lo = levels[static_cast<std::size_t>(d)];
      const std::size_t hi = levels[static_cast<std::size_t>(d) + 1];
      if (lo == hi) break;
      par.loop(hi - lo, 0,
               [&next, order, depth, sigma, off, nb, lo, d](std::size_t b, std::size_t e) {
                 std::vector<std::int32_t>& q = next.local();
                 for (std::size_t k = lo + b; k < lo + e; ++k) {
                   const std::int32_t u = order[k];
                   const std::uint64_t su = sigma[u];
                   for (std::int64_t i = off[u]; i < off[u + 1]; ++i) {
                     const std::int32_t v = nb[i];
                     if constexpr (Par::concurrent) {
                       std::atomic_ref<std::int32_t> dv(depth[v]);
                       std::int32_t seen = dv.load(std::memory_order_relaxed);
                       if (seen < 0) {
                         if (dv.compare_exchange_strong(seen, d + 1, std::memory_order_relaxed)) {
                           q.push_back(v);
                           seen = d + 1;
                         }
                       }
                       if (seen == d + 1)
                         std::atomic_ref<std::uint64_t>(sigma[v]).fetch_add(
                             su, std::memory_order_relaxed);
                     } else {
                       if (depth[v] < 0) {
                         depth[v] = d + 1;
                         q.push_back(v);
                       }
                       if (depth[v] == d + 1) sigma[v] += su;
                     }
                   }
                 }
               });
      std::size_t end = hi;
      next.for_each([order, &end](std::vector<std::int32_t>& q) {
        std::copy(q.begin(), q.end(), order + end);
        end += q.size();
        q.clear();
      });
      levels.push_back(end);
    }
    // levels = {0, 1, ..., last, last}: levels.size() - 2 non-empty levels.
    for (std::size_t d = levels.size() - 2; d-- > 0;) {
      const std::size_t lo = levels[d];
      const std::size_t hi = levels[d + 1];
      const auto dd = static_cast<std::int32_t>(d);
      par.loop(
          hi - lo, 0,
          [order, depth, sigma, delta, score, off, nb, lo, dd, s](std::size_t b, std::size_t e) {
            for (std::size_t k = lo + b; k < lo + e; ++k) {
              const std::int32_t u = order[k];
              const double su = static_cast<double>(sigma[u]);
              double du = 0;
              for (std::int64_t i = off[u]; i < off[u + 1]; ++i) {
                const std::int32_t v = nb[i];
                if (depth[v] == dd + 1) du += su / static_cast<double>(sigma[v]) * (1.0 + delta[v]);
              }
              delta[u] = du;
              if (u != s) score[u] += du;
            }
          });
    }
  }
  digest dg;
  for (std::size_t v = 0; v < n; ++v) dg.add_double(score[v]);
  return dg.value();
}

}  // namespace mote_bench::loops
