// The tiny kernels as a pair of tasks through a oneTBB task_group, inside a
// task_arena of N threads; one group reused for every pair.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/version.h>

#include "driver.hpp"

namespace {
struct tbb_env {
  tbb::task_arena& arena;
  tbb::task_group* group = nullptr;
  template <class Body>
  void region(Body&& body) {
    arena.execute([&] {
      tbb::task_group g;
      group = &g;
      body();
      group = nullptr;
    });
  }
  template <class F, class G>
  void pair(F& f, G& g) {
    group->run([&g] { g(); });
    f();
    group->wait();
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
  return mote_bench::tiny::run_suite(o, "onetbb", env, info);
}
