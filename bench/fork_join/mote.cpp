// Fork-join kernels on mote: fib with mote::join, nqueens with a task_group.
#include <mote/mote.hpp>

#include "driver.hpp"

namespace {

struct mote_par {
  template <class F, class G>
  static void fork2(F&& f, G&& g) {
    mote::join(f, g);
  }
  template <class F>
  static void spawn_each(int n, F&& f) {
    mote::task_group group;
    for (int i = 0; i < n; ++i) group.spawn([&f, i] { f(i); });
    group.wait();
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
  return mote_bench::fork_join::run_suite<mote_par>(
      o, "mote", [&](auto&& f) { return rt.run(f); }, info);
}
