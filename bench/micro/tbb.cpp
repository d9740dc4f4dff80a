// Micro benchmarks on oneTBB.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/version.h>

#include <atomic>

#include "driver.hpp"

namespace {

struct tbb_env {
  tbb::task_arena& arena;
  long default_iters = 1'000'000;

  double spawn_loop(long iters) {
    return arena.execute([iters] {
      tbb::task_group group;
      auto t0 = mote_bench::clock::now();
      for (long i = 0; i < iters; ++i) {
        group.run([] { mote_bench::empty_task_body(); });
        mote_bench::empty_task_body();
        group.wait();
      }
      return mote_bench::seconds_between(t0, mote_bench::clock::now());
    });
  }
  double group_loop(long tasks) {
    return arena.execute([tasks] {
      auto t0 = mote_bench::clock::now();
      tbb::task_group group;
      for (long done = 0; done < tasks; done += mote_bench::micro::kGroupSize) {
        for (int i = 0; i < mote_bench::micro::kGroupSize; ++i) {
          group.run([] { mote_bench::empty_task_body(); });
        }
        group.wait();
      }
      return mote_bench::seconds_between(t0, mote_bench::clock::now());
    });
  }
  // enqueue, not execute: execute would run the task on the calling thread.
  double wake_once() {
    mote_bench::clock::time_point started;
    std::atomic<int> done{0};
    auto submitted = mote_bench::clock::now();
    arena.enqueue([&] {
      started = mote_bench::clock::now();
      done.store(1, std::memory_order_release);
      done.notify_one();
    });
    done.wait(0, std::memory_order_acquire);
    return mote_bench::seconds_between(submitted, started);
  }
  void warm() {
    arena.execute([] {
      tbb::task_group group;
      std::int64_t a = 0;
      group.run([&a] { a = mote_bench::micro::small_work(); });
      std::int64_t b = mote_bench::micro::small_work();
      group.wait();
      mote_bench::do_not_optimize(a + b);
    });
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, o.workers);
  tbb::task_arena arena(static_cast<int>(o.workers));
  tbb_env env{arena};
  mote_bench::extras info;
  info.add("tbb_version", TBB_VERSION_STRING).add("tbb_runtime", TBB_runtime_version());
  return mote_bench::micro::run_suite(o, "onetbb", env, info);
}
