// Fork-join kernels on oneTBB: tbb::task_group in a task_arena of N threads.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/version.h>

#include "driver.hpp"

namespace {

struct tbb_par {
  template <class F, class G>
  static void fork2(F&& f, G&& g) {
    tbb::task_group group;
    group.run(g);
    f();
    group.wait();
  }
  template <class F>
  static void spawn_each(int n, F&& f) {
    tbb::task_group group;
    for (int i = 0; i < n; ++i) group.run([&f, i] { f(i); });
    group.wait();
  }
};

}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, o.workers);
  tbb::task_arena arena(static_cast<int>(o.workers));
  mote_bench::extras info;
  info.add("tbb_version", TBB_VERSION_STRING).add("tbb_runtime", TBB_runtime_version());
  return mote_bench::fork_join::run_suite<tbb_par>(
      o, "onetbb", [&](auto&& f) { return arena.execute(f); }, info);
}
