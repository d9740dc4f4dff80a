// Micro benchmarks on mote.
#include <mote/mote.hpp>

#include "driver.hpp"

namespace {

struct mote_env {
  mote::runtime& rt;
  long default_iters = 10'000'000;

  double spawn_loop(long iters) {
    return rt.run([iters] {
      auto t0 = mote_bench::clock::now();
      for (long i = 0; i < iters; ++i) {
        mote::join([] { mote_bench::empty_task_body(); }, [] { mote_bench::empty_task_body(); });
      }
      return mote_bench::seconds_between(t0, mote_bench::clock::now());
    });
  }
  double group_loop(long tasks) {
    return rt.run([tasks] {
      auto t0 = mote_bench::clock::now();
      mote::task_group group;
      for (long done = 0; done < tasks; done += mote_bench::micro::kGroupSize) {
        for (int i = 0; i < mote_bench::micro::kGroupSize; ++i) {
          group.spawn([] { mote_bench::empty_task_body(); });
        }
        group.wait();
      }
      return mote_bench::seconds_between(t0, mote_bench::clock::now());
    });
  }
  double wake_once() {
    mote_bench::clock::time_point started;
    auto submitted = mote_bench::clock::now();
    rt.run([&started] { started = mote_bench::clock::now(); });
    return mote_bench::seconds_between(submitted, started);
  }
  void warm() {
    rt.run([] {
      auto [a, b] = mote::join([] { return mote_bench::micro::small_work(); },
                               [] { return mote_bench::micro::small_work(); });
      mote_bench::do_not_optimize(a + b);
    });
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote::runtime_options options;
  options.num_workers = o.workers;
  mote::runtime rt(options);
  mote_env env{rt};
  mote_bench::extras info;
  info.add("spin_us", static_cast<std::int64_t>(rt.spin().count()));
  return mote_bench::micro::run_suite(o, "mote", env, info);
}
