// The factory of scheduler policies: one line per policy.
#include "scheduler/scheduler.hpp"

#include "core/config.hpp"

namespace mote::detail {

// Each in its own file of this folder.
std::unique_ptr<scheduler> make_work_stealing(runtime_impl& rt, const resolved_config& config);
std::unique_ptr<scheduler> make_delegation(runtime_impl& rt, const resolved_config& config);
std::unique_ptr<scheduler> make_mesh(runtime_impl& rt, const resolved_config& config);

std::unique_ptr<scheduler> make_scheduler(runtime_impl& rt, const resolved_config& config) {
  switch (config.policy) {
    case scheduler_policy::work_stealing: return make_work_stealing(rt, config);
    case scheduler_policy::delegation: return make_delegation(rt, config);
    case scheduler_policy::mesh: return make_mesh(rt, config);
  }
  return make_work_stealing(rt, config);  // not reached: resolve_config checks the policy
}

}  // namespace mote::detail
