// Placeholder: the worksharing constructs' state (replaced by the worksharing part).
#pragma once
namespace mote::omp {
struct ws_thread_state {};
struct ws_team_state {
  explicit ws_team_state(unsigned /*n*/) {}
};
}  // namespace mote::omp
