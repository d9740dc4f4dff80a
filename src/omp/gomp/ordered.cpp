// The ordered construct in a loop (GOMP_ordered_start/end) and the doacross
// waits of ordered(n) loops (GOMP_doacross_post/wait and their _ull forms).
#include <array>
#include <cstdarg>
#include <cstdint>
#include <vector>

#include "omp/gomp/abi.hpp"
#include "omp/worksharing.hpp"

namespace {

// An iteration vector of the doacross loop's dimensions, as the unsigned
// values mote::omp takes.
class iteration {
 public:
  explicit iteration(unsigned dims) {
    values_ = small_.data();
    if (dims > small_.size()) {
      large_.resize(dims);
      values_ = large_.data();
    }
  }
  std::uint64_t& operator[](unsigned i) noexcept { return values_[i]; }
  const std::uint64_t* data() const noexcept { return values_; }

 private:
  std::array<std::uint64_t, 8> small_{};
  std::vector<std::uint64_t> large_;
  std::uint64_t* values_;
};

}  // namespace

extern "C" {

MOTE_GOMP_EXPORT void GOMP_ordered_start() { mote::omp::ordered_start(); }
MOTE_GOMP_EXPORT void GOMP_ordered_end() { mote::omp::ordered_end(); }

// depend(source): counts holds the current iteration, a value per dimension.
MOTE_GOMP_EXPORT void GOMP_doacross_post(long* counts) {
  const unsigned dims = mote::omp::doacross_dims();
  if (dims == 0) return;
  iteration v(dims);
  for (unsigned i = 0; i < dims; ++i) v[i] = static_cast<std::uint64_t>(counts[i]);
  mote::omp::doacross_post(v.data());
}

// depend(sink: ...): the iteration waited for, a value per dimension.
MOTE_GOMP_EXPORT void GOMP_doacross_wait(long first, ...) {
  const unsigned dims = mote::omp::doacross_dims();
  if (dims == 0) return;
  iteration v(dims);
  v[0] = static_cast<std::uint64_t>(first);
  va_list rest;
  va_start(rest, first);
  for (unsigned i = 1; i < dims; ++i) v[i] = static_cast<std::uint64_t>(va_arg(rest, long));
  va_end(rest);
  mote::omp::doacross_wait(v.data());
}

MOTE_GOMP_EXPORT void GOMP_doacross_ull_post(unsigned long long* counts) {
  const unsigned dims = mote::omp::doacross_dims();
  if (dims == 0) return;
  iteration v(dims);
  for (unsigned i = 0; i < dims; ++i) v[i] = counts[i];
  mote::omp::doacross_post(v.data());
}

MOTE_GOMP_EXPORT void GOMP_doacross_ull_wait(unsigned long long first, ...) {
  const unsigned dims = mote::omp::doacross_dims();
  if (dims == 0) return;
  iteration v(dims);
  v[0] = first;
  va_list rest;
  va_start(rest, first);
  for (unsigned i = 1; i < dims; ++i) v[i] = va_arg(rest, unsigned long long);
  va_end(rest);
  mote::omp::doacross_wait(v.data());
}

}  // extern "C"
