// The loop kernels on mote::parallel_for / parallel_reduce (grain g:
// mote::grain(g); automatic: no grain, batches sized as the loop runs) and
// mote::per_worker, started from a task on a worker of an N-worker runtime
// (runtime::run). Nested loops are a parallel_for inside a parallel_for.
#include <mote/loops.hpp>
#include <mote/mote.hpp>

#include "driver.hpp"

namespace {

template <class T>
class mote_locals {
 public:
  template <class Init>
  mote_locals(mote::runtime& rt, Init init) : slots_(rt, std::move(init)) {}
  T& local() { return slots_.local(); }
  template <class F>
  void for_each(F&& f) {
    slots_.for_each(f);
  }

 private:
  mote::per_worker<T> slots_;
};

struct mote_par {
  static constexpr bool concurrent = true;
  static constexpr bool has_auto = true;
  mote::runtime& rt;

  template <class Body>
  void region(Body&& body) {
    rt.run([&] { body(); });
  }
  template <class F>
  void loop(std::size_t n, std::size_t grain, F&& body) {
    if (grain == 0) {
      mote::parallel_for(std::size_t{0}, n, body);
    } else {
      mote::parallel_for(std::size_t{0}, n, mote::grain(grain), body);
    }
  }
  template <class T, class F, class C>
  T reduce(std::size_t n, std::size_t grain, T identity, F&& body, C&& combine) {
    if (grain == 0)
      return mote::parallel_reduce(std::size_t{0}, n, std::move(identity), body, combine);
    return mote::parallel_reduce(std::size_t{0}, n, mote::grain(grain), std::move(identity), body,
                                 combine);
  }
  template <class F>
  void nested(std::size_t rows, std::size_t cols, F&& body) {
    mote::parallel_for(std::size_t{0}, rows, [&body, cols](std::size_t r) {
      mote::parallel_for(std::size_t{0}, cols,
                         [&body, r](std::size_t b, std::size_t e) { body(r, b, e); });
    });
  }
  template <class T, class Init>
  mote_locals<T> locals(Init init) {
    return mote_locals<T>(rt, std::move(init));
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote::runtime_options options;
  options.num_workers = o.workers;
  mote::runtime rt(options);
  mote_bench::extras info;
  info.add("spin_us", static_cast<std::int64_t>(rt.spin().count()));
  mote_par par{rt};
  return mote_bench::loops::run_suite(o, "mote", par, info);
}
