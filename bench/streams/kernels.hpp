// The stream kernels, written once for every runtime.
//
// A kernel is a class that makes its input once (outside the timing) and
// whose run(par) pushes the whole stream through a pipeline and returns a
// checksum of the answer. The only thing that differs between runtimes is
// `par`, the backend's streams part (bench/backends/); what it does, the
// stage descriptions and the serial pipeline (serial_par) are in
// bench/backends/streams_api.hpp.
//
// The kernels compute with + - * / and comparisons only (no libm: the FIR
// taps and the arctangent are computed here), in a fixed order per output,
// and the target has no FMA (x86-64-v2), so every runtime and both compilers
// give the same bits: the checksums are exact.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "../backends/streams_api.hpp"
#include "../common/rng.hpp"

namespace mote_bench::streams {

// An ordered checksum: the order of the items matters.
struct digest {
  std::uint64_t h = 0x243F6A8885A308D3ull;
  void add(std::uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h *= 0xFF51AFD7ED558CCDull;
  }
  std::int64_t value() const { return static_cast<std::int64_t>(h >> 1); }
};

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// ---------------------------------------------------------------- deterministic math

constexpr double kPi = 3.14159265358979323846;

// sin(x) from + - * / and floor only (Taylor series after range reduction):
// the same bits wherever it runs, unlike a libm call or a compile-time fold.
inline double det_sin(double x) {
  x -= 2 * kPi * std::floor(x / (2 * kPi) + 0.5);  // [-pi, pi]
  if (x > kPi / 2) x = kPi - x;
  if (x < -kPi / 2) x = -kPi - x;  // [-pi/2, pi/2]
  const double x2 = x * x;
  double term = x;
  double sum = x;
  for (int k = 1; k <= 10; ++k) {
    term *= -x2 / static_cast<double>((2 * k) * (2 * k + 1));
    sum += term;
  }
  return sum;
}
inline double det_cos(double x) { return det_sin(x + kPi / 2); }

// arctan(x) to about 1e-3 rad (the demodulator's gain makes it a shape,
// not a measurement): x (pi/4 + 0.273 (1 - |x|)) on [-1, 1], and
// pi/2 - atan(1/x) beyond.
inline float det_atan(float x) {
  const float ax = x < 0 ? -x : x;
  if (ax <= 1.0F) return x * (0.785398163F + 0.273F * (1.0F - ax));
  const float r = 1.0F / x;
  const float ar = 1.0F / ax;
  const float base = r * (0.785398163F + 0.273F * (1.0F - ar));
  return (x > 0 ? 1.5707963268F : -1.5707963268F) - base;
}

// A low-pass FIR (windowed sinc, Hamming), cutoff in cycles per sample.
template <std::size_t N>
std::array<float, N> low_pass_taps(double cutoff, double gain) {
  std::array<double, N> h{};
  double sum = 0;
  const double mid = static_cast<double>(N - 1) / 2;
  for (std::size_t j = 0; j < N; ++j) {
    const double t = static_cast<double>(j) - mid;
    const double sinc = t == 0 ? 2 * cutoff : det_sin(2 * kPi * cutoff * t) / (kPi * t);
    const double window = 0.54 - 0.46 * det_cos(2 * kPi * static_cast<double>(j) / static_cast<double>(N - 1));
    h[j] = sinc * window;
    sum += h[j];
  }
  std::array<float, N> out{};
  for (std::size_t j = 0; j < N; ++j) out[j] = static_cast<float>(h[j] / sum * gain);
  return out;
}

// ---------------------------------------------------------------- fmradio

// FM radio after StreamIt's FMRadio: source -> low-pass FIR decimating by 4
// -> FM demodulator -> equalizer (kBands bands, each the difference of two
// low-pass FIRs times a gain, summed) -> sink. An item is a block of B output
// samples (4B input samples). Stages:
//   source     serial: copies the block's input from the "antenna" (a
//              signal made once per process)
//   low_pass   serial: FIR history (the last 60 input samples) carried by
//              the stage; decimating, polyphase
//   demod      serial: carries the last low-passed sample and the last 63
//              demodulated ones, which it puts in front of the block
//   equalizer  parallel: 2 x kBands FIRs of 64 taps over the block (with
//              its 63-sample history in front): most of the work
//   sink       serial: ordered checksum of the output bits
class fmradio {
 public:
  static constexpr std::size_t kTaps = 64;
  static constexpr std::size_t kDecim = 4;
  static constexpr std::size_t kBands = 6;
  static constexpr std::size_t kHist = kTaps - kDecim;  // input samples the low-pass keeps

  fmradio(std::size_t block, std::size_t total_out)
      : block_(block), items_(total_out / block), signal_(kDecim * items_ * block_) {
    make_signal();
    lp_taps_ = low_pass_taps<kTaps>(0.11, 1.0);
    // Band edges spaced in log from 0.004 to 0.2 cycles per sample (of the
    // decimated rate); each band's gain differs.
    double edge[kBands + 1];
    for (std::size_t b = 0; b <= kBands; ++b) {
      edge[b] = 0.004;
      for (std::size_t k = 0; k < b; ++k) edge[b] *= 1.9193831;  // (0.2 / 0.004)^(1/6)
    }
    for (std::size_t b = 0; b < kBands; ++b) {
      band_hi_[b] = low_pass_taps<kTaps>(edge[b + 1], 1.0);
      band_lo_[b] = low_pass_taps<kTaps>(edge[b], 1.0);
      band_gain_[b] = 0.5F + 0.25F * static_cast<float>(b);
    }
    for (auto& blk : ring_) {
      blk.raw.resize(kHist + kDecim * block_);
      blk.lp.resize(block_);
      blk.dm.resize(kTaps - 1 + block_);
      blk.out.resize(block_);
      blk.acc_hi.resize(block_);
      blk.acc_lo.resize(block_);
      blk.phase.resize(kDecim * (block_ + kTaps / kDecim));
    }
  }

  std::size_t items() const { return items_; }
  std::size_t block() const { return block_; }
  static constexpr int stages = 5;

  template <class Par>
  std::int64_t run(Par& par, std::size_t in_flight) {
    // Stage states, reset for every run.
    std::array<float, kHist> lp_hist{};
    float last_lp = 0;
    std::array<float, kTaps - 1> dm_hist{};
    digest sum;

    auto source = serial_stage([&](std::size_t i) {
      block_buf& b = ring_[i % kRing];
      std::memcpy(b.raw.data() + kHist, signal_.data() + i * kDecim * block_, kDecim * block_ * sizeof(float));
    });
    auto low_pass = serial_stage([&](std::size_t i) {
      block_buf& b = ring_[i % kRing];
      std::memcpy(b.raw.data(), lp_hist.data(), kHist * sizeof(float));
      std::memcpy(lp_hist.data(), b.raw.data() + kDecim * block_, kHist * sizeof(float));
      decimate(b);
    });
    auto demod = serial_stage([&](std::size_t i) {
      block_buf& b = ring_[i % kRing];
      std::memcpy(b.dm.data(), dm_hist.data(), (kTaps - 1) * sizeof(float));
      float prev = last_lp;
      float* d = b.dm.data() + (kTaps - 1);
      for (std::size_t k = 0; k < block_; ++k) {
        d[k] = 0.8F * det_atan(prev * b.lp[k] * 4.0F);
        prev = b.lp[k];
      }
      last_lp = prev;
      std::memcpy(dm_hist.data(), b.dm.data() + block_, (kTaps - 1) * sizeof(float));
    });
    auto equalizer = parallel_stage([&](std::size_t i) { equalize(ring_[i % kRing]); });
    auto sink = serial_stage([&](std::size_t i) {
      const block_buf& b = ring_[i % kRing];
      std::uint64_t acc = 0;
      for (std::size_t k = 0; k < block_; ++k) acc = acc * 0x100000001B3ull + float_bits(b.out[k]);
      sum.add(acc);
    });
    par.pipeline(items_, in_flight, source, low_pass, demod, equalizer, sink);
    return sum.value();
  }

 private:
  struct block_buf {
    std::vector<float> raw;    // kHist history + kDecim * block input samples
    std::vector<float> lp;     // block low-passed samples
    std::vector<float> dm;     // 63 history + block demodulated samples
    std::vector<float> out;    // block equalized samples
    std::vector<float> acc_hi, acc_lo;
    std::vector<float> phase;  // the input split into kDecim phases
  };

  // An FM signal: a carrier whose frequency follows a message of two tones,
  // built by rotating a phasor (the rotation from the half-angle tangent, so
  // only + - * / are used), plus a little noise.
  void make_signal() {
    double zr = 1, zi = 0;    // carrier phasor
    double m1r = 1, m1i = 0;  // message tones
    double m2r = 1, m2i = 0;
    auto rot = [](double t, double& c, double& s) {
      c = (1 - t * t) / (1 + t * t);
      s = 2 * t / (1 + t * t);
    };
    double c1, s1, c2, s2;
    rot(0.0021, c1, s1);
    rot(0.0057, c2, s2);
    rng64 g{12345};
    for (std::size_t k = 0; k < signal_.size(); ++k) {
      const double msg = 0.6 * m1i + 0.4 * m2r;
      double c, s;
      rot(0.35 + 0.08 * msg, c, s);
      const double nr = zr * c - zi * s;
      zi = zr * s + zi * c;
      zr = nr;
      const double a1 = m1r * c1 - m1i * s1;
      m1i = m1r * s1 + m1i * c1;
      m1r = a1;
      const double a2 = m2r * c2 - m2i * s2;
      m2i = m2r * s2 + m2i * c2;
      m2r = a2;
      if ((k & 1023) == 1023) {  // keep the phasors on the unit circle
        const double f = (3 - (zr * zr + zi * zi)) / 2;
        zr *= f;
        zi *= f;
        const double f1 = (3 - (m1r * m1r + m1i * m1i)) / 2;
        m1r *= f1;
        m1i *= f1;
        const double f2 = (3 - (m2r * m2r + m2i * m2i)) / 2;
        m2r *= f2;
        m2i *= f2;
      }
      signal_[k] = static_cast<float>(zr + 0.05 * (g.uniform() - 0.5));
    }
  }

  // lp[k] = sum_j h[j] raw[4k + j], as kDecim phases of contiguous
  // multiply-adds (vectorizable, the same order everywhere).
  void decimate(block_buf& b) const {
    const std::size_t per_phase = block_ + kTaps / kDecim - 1;
    for (std::size_t p = 0; p < kDecim; ++p) {
      float* ph = b.phase.data() + p * (block_ + kTaps / kDecim);
      for (std::size_t m = 0; m < per_phase; ++m) ph[m] = b.raw[kDecim * m + p];
    }
    float* y = b.lp.data();
    for (std::size_t p = 0; p < kDecim; ++p) {
      const float* ph = b.phase.data() + p * (block_ + kTaps / kDecim);
      for (std::size_t q = 0; q < kTaps / kDecim; ++q) {
        const float h = lp_taps_[kDecim * q + p];
        const float* x = ph + q;
        if (p == 0 && q == 0) {
          for (std::size_t k = 0; k < block_; ++k) y[k] = h * x[k];
        } else {
          for (std::size_t k = 0; k < block_; ++k) y[k] += h * x[k];
        }
      }
    }
  }

  static void fir(const std::array<float, kTaps>& h, const float* x, float* y, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) y[k] = h[0] * x[k];
    for (std::size_t j = 1; j < kTaps; ++j) {
      const float c = h[j];
      const float* xj = x + j;
      for (std::size_t k = 0; k < n; ++k) y[k] += c * xj[k];
    }
  }

  void equalize(block_buf& b) const {
    float* out = b.out.data();
    for (std::size_t band = 0; band < kBands; ++band) {
      fir(band_hi_[band], b.dm.data(), b.acc_hi.data(), block_);
      fir(band_lo_[band], b.dm.data(), b.acc_lo.data(), block_);
      const float g = band_gain_[band];
      if (band == 0) {
        for (std::size_t k = 0; k < block_; ++k) out[k] = g * (b.acc_hi[k] - b.acc_lo[k]);
      } else {
        for (std::size_t k = 0; k < block_; ++k) out[k] += g * (b.acc_hi[k] - b.acc_lo[k]);
      }
    }
  }

  std::size_t block_;
  std::size_t items_;
  std::vector<float> signal_;
  std::array<float, kTaps> lp_taps_{};
  std::array<std::array<float, kTaps>, kBands> band_hi_{}, band_lo_{};
  std::array<float, kBands> band_gain_{};
  std::array<block_buf, kRing> ring_;
};

// ---------------------------------------------------------------- trellis

// Viterbi decoding of a stream of frames: convolutional code K = 7, rate
// 1/2 (generators 171, 133 octal), 64 states, frames of F information bits
// plus 6 zero tail bits, BPSK symbols with Gaussian-like noise quantized to
// 8 bits (made once per process). The trellis of a frame is filled column
// by column, each column from the previous one's path metrics; the pipeline
// splits each frame's columns into kRanges consecutive ranges:
//   source       serial: the frame's branch metrics (4 per column)
//   range 0..3   serial: add-compare-select over the range's columns,
//                starting from the metrics the previous range left
//   traceback    serial: from state 0 at the end, the decoded bits; counts
//                the bit errors and adds the frame to the ordered checksum
// Integer metrics: exact everywhere.
class trellis {
 public:
  static constexpr int kRanges = 4;
  static constexpr unsigned kG0 = 0171;
  static constexpr unsigned kG1 = 0133;
  static constexpr int kTail = 6;

  trellis(std::size_t frame_bits, std::size_t total_bits)
      : bits_(frame_bits), cols_(frame_bits + kTail), items_(total_bits / frame_bits) {
    for (unsigned ns = 0; ns < 64; ++ns) {
      for (unsigned m = 0; m < 2; ++m) {
        const unsigned sr = (m << 6) | ns;
        combo_[ns][m] = static_cast<std::uint8_t>(2 * parity(sr & kG0) + parity(sr & kG1));
      }
    }
    // Random bits, encoded, BPSK (+A for 0, -A for 1) plus noise: the sum
    // of 12 uniforms minus 6 (about a standard normal) times sigma.
    truth_.resize(items_ * bits_);
    symbols_.resize(items_ * cols_ * 2);
    rng64 g{777};
    constexpr double kAmp = 32.0;
    constexpr double kSigma = 27.0;
    for (std::size_t f = 0; f < items_; ++f) {
      unsigned state = 0;
      for (std::size_t c = 0; c < cols_; ++c) {
        unsigned bit = 0;
        if (c < bits_) {
          bit = static_cast<unsigned>(g.next() >> 63);
          truth_[f * bits_ + c] = static_cast<std::uint8_t>(bit);
        }
        const unsigned sr = ((state << 1) | bit) & 127;
        state = sr & 63;
        const unsigned o[2] = {parity(sr & kG0), parity(sr & kG1)};
        for (int k = 0; k < 2; ++k) {
          double noise = -6.0;
          for (int u = 0; u < 12; ++u) noise += g.uniform();
          double v = (o[k] != 0 ? -kAmp : kAmp) + kSigma * noise;
          v = std::max(-127.0, std::min(127.0, v));
          symbols_[(f * cols_ + c) * 2 + k] = static_cast<std::int8_t>(v < 0 ? v - 0.5 : v + 0.5);
        }
      }
    }
    for (auto& b : ring_) {
      b.bm.resize(cols_);
      b.surv.resize(cols_);
    }
    for (int s = 0; s <= kRanges; ++s) cut_[s] = cols_ * static_cast<std::size_t>(s) / kRanges;
  }

  std::size_t items() const { return items_; }
  std::size_t block() const { return bits_; }
  static constexpr int stages = kRanges + 2;

  template <class Par>
  std::int64_t run(Par& par, std::size_t in_flight) {
    digest sum;
    std::int64_t errors = 0;
    auto source = serial_stage([&](std::size_t i) {
      block_buf& b = ring_[i % kRing];
      const std::int8_t* sym = symbols_.data() + i * cols_ * 2;
      for (std::size_t c = 0; c < cols_; ++c) {
        const std::int32_t r0 = sym[2 * c];
        const std::int32_t r1 = sym[2 * c + 1];
        b.bm[c] = {r0 + r1, r0 - r1, -r0 + r1, -r0 - r1};  // combo o0 o1 = 00, 01, 10, 11
      }
      b.pm.fill(-(1 << 28));
      b.pm[0] = 0;
    });
    auto r0 = serial_stage([&](std::size_t i) { acs(ring_[i % kRing], 0); });
    auto r1 = serial_stage([&](std::size_t i) { acs(ring_[i % kRing], 1); });
    auto r2 = serial_stage([&](std::size_t i) { acs(ring_[i % kRing], 2); });
    auto r3 = serial_stage([&](std::size_t i) { acs(ring_[i % kRing], 3); });
    static_assert(kRanges == 4, "one stage per range above");
    auto traceback = serial_stage([&](std::size_t i) {
      const block_buf& b = ring_[i % kRing];
      unsigned s = 0;
      std::uint64_t word = 0;
      std::uint64_t acc = 0;
      for (std::size_t c = cols_; c-- > 0;) {
        const unsigned m = static_cast<unsigned>(b.surv[c] >> s) & 1U;
        const unsigned bit = s & 1U;
        if (c < bits_) {
          errors += bit != truth_[i * bits_ + c];
          word = (word << 1) | bit;
          if ((c & 63) == 0) {
            acc = acc * 0x100000001B3ull + word;
            word = 0;
          }
        }
        s = (s >> 1) | (m << 5);
      }
      sum.add(acc);
    });
    par.pipeline(items_, in_flight, source, r0, r1, r2, r3, traceback);
    last_errors_ = errors;
    return sum.value() ^ errors;
  }

  std::int64_t last_errors() const { return last_errors_; }

 private:
  static unsigned parity(unsigned v) { return static_cast<unsigned>(__builtin_popcount(v) & 1); }

  struct block_buf {
    std::vector<std::array<std::int32_t, 4>> bm;
    std::vector<std::uint64_t> surv;
    std::array<std::int32_t, 64> pm;
  };

  // Add-compare-select over range r's columns: new state ns = 2j + bit has
  // the predecessors j (m = 0) and j + 32 (m = 1); ties keep m = 0.
  void acs(block_buf& b, int r) const {
    alignas(64) std::int32_t pm[64];
    alignas(64) std::int32_t next[64];
    std::memcpy(pm, b.pm.data(), sizeof pm);
    for (std::size_t c = cut_[r]; c < cut_[r + 1]; ++c) {
      const std::array<std::int32_t, 4>& bm = b.bm[c];
      std::uint64_t bits = 0;
      for (unsigned ns = 0; ns < 64; ++ns) {
        const unsigned j = ns >> 1;
        const std::int32_t m0 = pm[j] + bm[combo_[ns][0]];
        const std::int32_t m1 = pm[j + 32] + bm[combo_[ns][1]];
        const bool take1 = m1 > m0;
        next[ns] = take1 ? m1 : m0;
        bits |= static_cast<std::uint64_t>(take1) << ns;
      }
      b.surv[c] = bits;
      std::memcpy(pm, next, sizeof pm);
    }
    std::memcpy(b.pm.data(), pm, sizeof pm);
  }

  std::size_t bits_;
  std::size_t cols_;
  std::size_t items_;
  std::uint8_t combo_[64][2]{};
  std::size_t cut_[kRanges + 1]{};
  std::vector<std::uint8_t> truth_;
  std::vector<std::int8_t> symbols_;
  std::array<block_buf, kRing> ring_;
  std::int64_t last_errors_ = 0;
};

// ---------------------------------------------------------------- template

// The seed's "pipeline template": a loop whose iterations depend on each
// other backwards, so that only a pipeline runs it in parallel. Item i is a
// block of W 64-bit words; four serial stages, each with state of its own
// carried from item to item:
//   s  generate: the next W words of a random stream, mixed
//   a  mix the block with what b returned for item i - d (feedback) and
//      with a's running state
//   b  mix again with b's running state; returns 8 words folded from the
//      block: the feedback for item i + d
//   c  ordered checksum
// Each stage does kRounds mixing rounds per word, so the four are about
// equally long. Integer arithmetic: exact everywhere.
class pipeline_template {
 public:
  static constexpr int kRounds = 12;

  pipeline_template(std::size_t words, std::size_t total_words, std::size_t d)
      : words_(words), items_(total_words / words), d_(d) {
    for (auto& b : ring_) b.x.resize(words_);
  }

  std::size_t items() const { return items_; }
  std::size_t block() const { return words_; }
  std::size_t distance() const { return d_; }
  static constexpr int stages = 4;

  static std::uint64_t mix(std::uint64_t x) {
    for (int r = 0; r < kRounds; ++r) {
      x ^= x >> 29;
      x *= 0xBF58476D1CE4E5B9ull;
      x ^= x >> 32;
    }
    return x;
  }

  template <class Par>
  std::int64_t run(Par& par, std::size_t in_flight) {
    std::uint64_t gen = 1;
    std::uint64_t a_state = 3;
    std::uint64_t b_state = 5;
    digest sum;
    auto s = [&](std::size_t i) {
      std::uint64_t* x = ring_[i % kRing].x.data();
      for (std::size_t k = 0; k < words_; ++k) x[k] = mix(gen + k * 0x9E3779B97F4A7C15ull);
      gen += words_ * 0x9E3779B97F4A7C15ull;
    };
    auto a = [&](std::size_t i, const feedback_value* fb) {
      std::uint64_t* x = ring_[i % kRing].x.data();
      static constexpr feedback_value kSeed = {{1, 2, 3, 4, 5, 6, 7, 8}};
      const feedback_value& f = fb != nullptr ? *fb : kSeed;
      for (std::size_t k = 0; k < words_; ++k) x[k] = mix(x[k] ^ f.w[k & 7] ^ a_state);
      a_state = a_state * 0x5851F42D4C957F2Dull + x[words_ - 1];
    };
    auto b = [&](std::size_t i) {
      std::uint64_t* x = ring_[i % kRing].x.data();
      feedback_value out{};
      for (std::size_t k = 0; k < words_; ++k) {
        x[k] = mix(x[k] + b_state);
        out.w[k & 7] ^= x[k];
      }
      b_state = b_state * 0x5851F42D4C957F2Dull + x[0];
      return out;
    };
    auto c = [&](std::size_t i) {
      const std::uint64_t* x = ring_[i % kRing].x.data();
      std::uint64_t acc = 0;
      for (std::size_t k = 0; k < words_; ++k) acc += mix(x[k] ^ k);
      sum.add(acc);
    };
    par.feedback(items_, d_, in_flight, s, a, b, c);
    return sum.value() ^ static_cast<std::int64_t>((a_state ^ b_state) >> 2);
  }

 private:
  struct block_buf {
    std::vector<std::uint64_t> x;
  };
  std::size_t words_;
  std::size_t items_;
  std::size_t d_;
  std::array<block_buf, kRing> ring_;
};

}  // namespace mote_bench::streams
