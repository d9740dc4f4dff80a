// The tiny kernels: graph kernels in the style of the GAP benchmark suite on
// a generated Kronecker graph of 32 vertices and average degree 4, and JSON
// parsing of a ~600-byte document with RapidJSON. Each runs in a few hundred
// nanoseconds to a few microseconds: the task sizes where a runtime's overhead
// decides whether parallel pays. Written once; every variant runs the same code.
//
// Every kernel works on an `instance` of its own (its own copy of the graph and
// its own output arrays), and allocates nothing but what RapidJSON allocates,
// so two instances can run at once without sharing a cache line.
#pragma once

#include <rapidjson/document.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "../common/rng.hpp"

namespace mote_bench::tiny {

constexpr int kScale = 5;              // 2^5 = 32 vertices
constexpr int kVertices = 1 << kScale;
constexpr int kEdgeFactor = 4;         // generated edges per vertex (before symmetrizing)

// Compressed sparse rows, symmetric, no self-loops or duplicate edges,
// neighbour lists sorted ascending. Weights (for SSSP) are 1..255.
struct graph {
  std::array<std::int32_t, kVertices + 1> offsets{};
  std::vector<std::int32_t> neighbors;
  std::vector<std::int32_t> weights;
  std::int32_t degree(int v) const { return offsets[v + 1] - offsets[v]; }
  std::int64_t directed_edges() const { return static_cast<std::int64_t>(neighbors.size()); }
};

using mote_bench::rng64;  // ../common/rng.hpp

// Graph500-style Kronecker (R-MAT) edges: each edge picks one quadrant of the
// adjacency matrix per bit of the vertex ids, with probabilities A=0.57,
// B=0.19, C=0.19 (D=0.05); vertex ids are then permuted, the edges made
// symmetric, and self-loops and duplicates dropped.
inline graph make_kronecker(std::uint64_t seed = 27182818) {
  constexpr double A = 0.57, B = 0.19, C = 0.19;
  rng64 r{seed};
  std::vector<std::pair<int, int>> edges;
  for (int e = 0; e < kEdgeFactor * kVertices; ++e) {
    int u = 0, v = 0;
    for (int bit = 0; bit < kScale; ++bit) {
      const double p = r.uniform();
      const int ub = p > A + B ? 1 : 0;                 // C or D: lower half
      const int vb = (p > A && p <= A + B) || p > A + B + C ? 1 : 0;  // B or D: right half
      u |= ub << bit;
      v |= vb << bit;
    }
    edges.emplace_back(u, v);
  }
  std::array<int, kVertices> perm{};
  for (int i = 0; i < kVertices; ++i) perm[i] = i;
  for (int i = kVertices - 1; i > 0; --i) std::swap(perm[i], perm[static_cast<int>(r.next() % (i + 1))]);
  std::vector<std::pair<int, int>> sym;
  for (auto [u, v] : edges) {
    u = perm[u];
    v = perm[v];
    if (u == v) continue;
    sym.emplace_back(u, v);
    sym.emplace_back(v, u);
  }
  std::sort(sym.begin(), sym.end());
  sym.erase(std::unique(sym.begin(), sym.end()), sym.end());
  graph g;
  for (auto [u, v] : sym) ++g.offsets[u + 1];
  for (int i = 0; i < kVertices; ++i) g.offsets[i + 1] += g.offsets[i];
  g.neighbors.resize(sym.size());
  g.weights.resize(sym.size());
  std::array<int, kVertices> fill{};
  for (auto [u, v] : sym) {
    const int at = g.offsets[u] + fill[u]++;
    g.neighbors[at] = v;
  }
  // Symmetric weights: w(u, v) = w(v, u), from a hash of the pair.
  for (int u = 0; u < kVertices; ++u) {
    for (int i = g.offsets[u]; i < g.offsets[u + 1]; ++i) {
      const int v = g.neighbors[i];
      const std::uint64_t a = static_cast<std::uint64_t>(std::min(u, v));
      const std::uint64_t b = static_cast<std::uint64_t>(std::max(u, v));
      rng64 h{seed ^ (a * 1315423911u + b * 2654435761u)};
      g.weights[i] = 1 + static_cast<std::int32_t>(h.next() % 255);
    }
  }
  return g;
}

// The document: the "widget" example of json.org (about 600 bytes).
inline const char* widget_json() {
  return R"({"widget": {
    "debug": "on",
    "window": {
        "title": "Sample Konfabulator Widget",
        "name": "main_window",
        "width": 500,
        "height": 500
    },
    "image": {
        "src": "Images/Sun.png",
        "name": "sun1",
        "hOffset": 250,
        "vOffset": 250,
        "alignment": "center"
    },
    "text": {
        "data": "Click Here",
        "size": 36,
        "style": "bold",
        "name": "text1",
        "hOffset": 250,
        "vOffset": 100,
        "alignment": "center",
        "onMouseUp": "sun1.opacity = (sun1.opacity / 100) * 90;"
    }
}})";
}

// One kernel's private world: its graph copy, its outputs and scratch space.
struct alignas(128) instance {
  graph g;
  std::string json;  // its own copy of the document
  std::array<std::int32_t, kVertices> parent{}, depth{}, comp{}, queue{}, sigma_i{};
  std::array<std::int64_t, kVertices> dist{};
  std::array<double, kVertices> score{}, contrib{}, delta{}, sigma{};
  std::int64_t result = 0;
};

inline instance make_instance() {
  instance in;
  in.g = make_kronecker();
  in.json = widget_json();
  return in;
}

// ---- BFS: top-down from vertex 0; checksum: sum of depths (+1) and parents.
inline std::int64_t bfs(instance& in) {
  const graph& g = in.g;
  in.parent.fill(-1);
  in.depth.fill(-1);
  int head = 0, tail = 0;
  in.queue[tail++] = 0;
  in.parent[0] = 0;
  in.depth[0] = 0;
  while (head < tail) {
    const int u = in.queue[head++];
    for (int i = g.offsets[u]; i < g.offsets[u + 1]; ++i) {
      const int v = g.neighbors[i];
      if (in.parent[v] < 0) {
        in.parent[v] = u;
        in.depth[v] = in.depth[u] + 1;
        in.queue[tail++] = v;
      }
    }
  }
  std::int64_t sum = 0;
  for (int v = 0; v < kVertices; ++v) sum += (in.depth[v] + 1) * 1000 + in.parent[v];
  return sum;
}

// ---- Connected components, Shiloach-Vishkin: hook roots of larger labels
// under smaller ones across edges, then compress paths, until nothing changes.
inline std::int64_t cc(instance& in) {
  const graph& g = in.g;
  for (int v = 0; v < kVertices; ++v) in.comp[v] = v;
  bool changed = true;
  while (changed) {
    changed = false;
    for (int u = 0; u < kVertices; ++u) {
      for (int i = g.offsets[u]; i < g.offsets[u + 1]; ++i) {
        const int v = g.neighbors[i];
        const int cu = in.comp[u], cv = in.comp[v];
        if (cu < cv && cv == in.comp[cv]) {
          in.comp[cv] = cu;
          changed = true;
        }
      }
    }
    for (int v = 0; v < kVertices; ++v) {
      while (in.comp[v] != in.comp[in.comp[v]]) in.comp[v] = in.comp[in.comp[v]];
    }
  }
  std::int64_t sum = 0;
  for (int v = 0; v < kVertices; ++v) sum += in.comp[v] * (v + 1);
  return sum;
}

// ---- PageRank, pull style as in GAP: damping 0.85, up to 20 iterations,
// stop when the L1 change falls below 1e-4. Checksum: scores scaled, + iterations.
inline std::int64_t pr(instance& in) {
  const graph& g = in.g;
  constexpr double kDamp = 0.85;
  const double base = (1.0 - kDamp) / kVertices;
  in.score.fill(1.0 / kVertices);
  int iter = 0;
  for (; iter < 20; ++iter) {
    for (int u = 0; u < kVertices; ++u) {
      const int d = g.degree(u);
      in.contrib[u] = d > 0 ? in.score[u] / d : 0.0;
    }
    double error = 0;
    for (int u = 0; u < kVertices; ++u) {
      double incoming = 0;
      for (int i = g.offsets[u]; i < g.offsets[u + 1]; ++i) incoming += in.contrib[g.neighbors[i]];
      const double next = base + kDamp * incoming;
      error += std::fabs(next - in.score[u]);
      in.score[u] = next;
    }
    if (error < 1e-4) break;
  }
  std::int64_t sum = iter;
  for (int v = 0; v < kVertices; ++v) sum += static_cast<std::int64_t>(std::llround(in.score[v] * 1e9)) * (v + 1);
  return sum;
}

// ---- SSSP from vertex 0: Dijkstra with a binary heap of (distance, vertex)
// kept in fixed arrays (on a graph this small, GAP's delta-stepping has one
// bucket in practice, which makes it Dijkstra-like). Checksum: sum of distances.
inline std::int64_t sssp(instance& in) {
  const graph& g = in.g;
  constexpr std::int64_t kInf = INT64_MAX / 4;
  in.dist.fill(kInf);
  in.dist[0] = 0;
  // heap of vertices ordered by dist; lazy deletion via stored distances.
  std::array<std::pair<std::int64_t, std::int32_t>, kVertices * 8> heap;
  int n = 0;
  auto push = [&](std::int64_t d, int v) {
    int i = n++;
    heap[static_cast<std::size_t>(i)] = {d, v};
    while (i > 0 && heap[static_cast<std::size_t>((i - 1) / 2)].first > heap[static_cast<std::size_t>(i)].first) {
      std::swap(heap[static_cast<std::size_t>((i - 1) / 2)], heap[static_cast<std::size_t>(i)]);
      i = (i - 1) / 2;
    }
  };
  auto pop = [&]() {
    auto top = heap[0];
    heap[0] = heap[static_cast<std::size_t>(--n)];
    int i = 0;
    for (;;) {
      int l = 2 * i + 1, r = l + 1, m = i;
      if (l < n && heap[static_cast<std::size_t>(l)].first < heap[static_cast<std::size_t>(m)].first) m = l;
      if (r < n && heap[static_cast<std::size_t>(r)].first < heap[static_cast<std::size_t>(m)].first) m = r;
      if (m == i) break;
      std::swap(heap[static_cast<std::size_t>(i)], heap[static_cast<std::size_t>(m)]);
      i = m;
    }
    return top;
  };
  push(0, 0);
  while (n > 0) {
    auto [d, u] = pop();
    if (d != in.dist[u]) continue;
    for (int i = g.offsets[u]; i < g.offsets[u + 1]; ++i) {
      const int v = g.neighbors[i];
      const std::int64_t nd = d + g.weights[i];
      if (nd < in.dist[v] && n < static_cast<int>(heap.size())) {
        in.dist[v] = nd;
        push(nd, v);
      }
    }
  }
  std::int64_t sum = 0;
  for (int v = 0; v < kVertices; ++v) sum += (in.dist[v] == kInf ? -1 : in.dist[v]) * (v + 1);
  return sum;
}

// ---- Triangle counting, ordered (each triangle u < v < w once), by merging
// the sorted neighbour lists of u and v above v.
inline std::int64_t tc(instance& in) {
  const graph& g = in.g;
  std::int64_t triangles = 0;
  for (int u = 0; u < kVertices; ++u) {
    for (int i = g.offsets[u]; i < g.offsets[u + 1]; ++i) {
      const int v = g.neighbors[i];
      if (v <= u) continue;
      int a = g.offsets[u], b = g.offsets[v];
      while (a < g.offsets[u + 1] && b < g.offsets[v + 1]) {
        const int x = g.neighbors[a], y = g.neighbors[b];
        if (x <= v) {
          ++a;
        } else if (y <= v) {
          ++b;
        } else if (x == y) {
          ++triangles;
          ++a;
          ++b;
        } else if (x < y) {
          ++a;
        } else {
          ++b;
        }
      }
    }
  }
  return triangles;
}

// ---- Betweenness centrality (Brandes) from source 0, as GAP's BC does for
// one source: BFS counting shortest paths, then back-propagating dependencies
// in reverse BFS order. Checksum: scores scaled.
inline std::int64_t bc(instance& in) {
  const graph& g = in.g;
  in.depth.fill(-1);
  in.sigma.fill(0.0);
  in.delta.fill(0.0);
  in.score.fill(0.0);
  int head = 0, tail = 0;
  in.queue[tail++] = 0;
  in.depth[0] = 0;
  in.sigma[0] = 1.0;
  while (head < tail) {
    const int u = in.queue[head++];
    for (int i = g.offsets[u]; i < g.offsets[u + 1]; ++i) {
      const int v = g.neighbors[i];
      if (in.depth[v] < 0) {
        in.depth[v] = in.depth[u] + 1;
        in.queue[tail++] = v;
      }
      if (in.depth[v] == in.depth[u] + 1) in.sigma[v] += in.sigma[u];
    }
  }
  for (int k = tail - 1; k > 0; --k) {
    const int w = in.queue[k];
    for (int i = g.offsets[w]; i < g.offsets[w + 1]; ++i) {
      const int v = g.neighbors[i];
      if (in.depth[v] == in.depth[w] - 1) in.delta[v] += in.sigma[v] / in.sigma[w] * (1.0 + in.delta[w]);
    }
    in.score[w] += in.delta[w];
  }
  std::int64_t sum = 0;
  for (int v = 0; v < kVertices; ++v) sum += static_cast<std::int64_t>(std::llround(in.score[v] * 1e6)) * (v + 1);
  return sum;
}

// ---- JSON: parse the widget document (a fresh Document each time) and read
// a few fields back.
inline std::int64_t json(instance& in) {
  rapidjson::Document d;
  d.Parse(in.json.c_str(), in.json.size());
  if (d.HasParseError() || !d.IsObject()) return -1;
  const rapidjson::Value& w = d["widget"];
  std::int64_t sum = w["window"]["width"].GetInt() + w["window"]["height"].GetInt();
  sum += w["image"]["hOffset"].GetInt() + w["text"]["size"].GetInt() + w["text"]["vOffset"].GetInt();
  sum += static_cast<std::int64_t>(std::strlen(w["text"]["onMouseUp"].GetString()));
  sum += static_cast<std::int64_t>(w.MemberCount());
  return sum;
}

struct kernel_entry {
  const char* name;
  std::int64_t (*fn)(instance&);
};

inline constexpr std::array<kernel_entry, 7> kKernels = {{
    {"bc", bc}, {"bfs", bfs}, {"cc", cc}, {"pr", pr}, {"sssp", sssp}, {"tc", tc}, {"json", json}}};

// ---- The synthetic sweep: calibrated busy work, a dependency chain that the
// compiler cannot shorten.
inline std::uint64_t busy(std::uint64_t seed, std::int64_t steps) {
  std::uint64_t x = seed | 1;
  for (std::int64_t i = 0; i < steps; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    asm volatile("" : "+r"(x));
  }
  return x;
}

}  // namespace mote_bench::tiny
