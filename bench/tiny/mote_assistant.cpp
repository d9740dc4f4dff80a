// The tiny kernels as a pair of tasks through mote::assistant: this thread
// (pinned) runs one, its assistant (pinned to the other CPU) the other; the
// assistant is woken before the loop and let sleep after it, as a program
// would around a parallel section.
#include <mote/mote.hpp>

#include "driver.hpp"

namespace {
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
  mote::assistant helper;
  assistant_env env{helper};
  mote_bench::extras info;
  info.add("assistant_cpu", static_cast<std::int64_t>(helper.cpu()));
  return mote_bench::tiny::run_suite(o, "mote_assistant", env, info);
}
