// Choosing the workers: explicit options win over MOTE_* environment
// variables, which win over the defaults from the topology. A value that
// cannot be used is a mote::config_error that names it.
#include <mote/mote.hpp>

#include <chrono>
#include <cstdio>

int main() {
  mote::runtime_options options;
  options.num_workers = 2;                       // else MOTE_NUM_THREADS
  options.bind = mote::binding::parse("none");   // else MOTE_BIND
  options.spin = std::chrono::microseconds(50);  // else MOTE_SPIN_US
  mote::runtime rt(options);
  std::printf("%u workers, spin %lld us\n", rt.num_workers(),
              static_cast<long long>(rt.spin().count()));

  // run() executes a callable on a worker of this runtime and returns its result.
  const int answer = rt.run([] { return 6 * 7; });
  std::printf("answer = %d\n", answer);

  try {
    mote::runtime_options bad;
    bad.bind = mote::binding::parse("sideways", "my_bind_option");
    mote::runtime never(bad);
  } catch (const mote::config_error& e) {
    std::printf("config error: %s\n", e.what());
  }
  return answer == 42 && rt.num_workers() == 2 ? 0 : 1;
}
