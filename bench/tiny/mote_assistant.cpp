// The tiny kernels as a pair of tasks through mote::assistant: this thread
// (pinned) runs one, its assistant (pinned to the other CPU) the other; the
// assistant is woken before the loop and let sleep after it, as a program
// would around a parallel section.
//
// Built twice (bench/CMakeLists.txt): bench_tiny_moteassist with
// assistant_options::adaptive off (runtime "mote_assistant", today's
// behaviour: every task goes through the ring) and bench_tiny_moteassistadapt
// with it on (runtime "mote_assistant_adaptive", MOTE_BENCH_TINY_ADAPTIVE=1:
// submit() may run a task in place when its call site's tasks are short
// against the hand-off).
#include <mote/mote.hpp>

#include "driver.hpp"

#ifndef MOTE_BENCH_TINY_ADAPTIVE
#  define MOTE_BENCH_TINY_ADAPTIVE 0
#endif

namespace {
constexpr bool kAdaptive = MOTE_BENCH_TINY_ADAPTIVE != 0;

struct assistant_env {
  mote::assistant& helper;
  template <class Body>
  void region(Body&& body) {
    helper.wake_up_hint();
    body();
    helper.sleep_hint();
  }
  template <class F, class G>
  void pair(F& f, G& g) {
    helper.submit([&g] { g(); });
    f();
    helper.wait();
  }
};
}  // namespace

int main(int argc, char** argv) {
  auto o = mote_bench::parse_options(argc, argv);
  mote_bench::tiny::pin_to(0);
  mote::assistant_options options;
  options.adaptive = kAdaptive;
  mote::assistant helper(options);
  assistant_env env{helper};
  mote_bench::extras info;
  info.add("assistant_cpu", static_cast<std::int64_t>(helper.cpu()));
  info.add("adaptive", std::int64_t{kAdaptive ? 1 : 0});
  return mote_bench::tiny::run_suite(o, kAdaptive ? "mote_assistant_adaptive" : "mote_assistant", env, info);
}
