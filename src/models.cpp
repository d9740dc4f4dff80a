// Every model the runtime carries, in one list: the core calls their hooks
// (core/extension.hpp) and includes none of their headers. Adding a model
// is adding its folder and its line here (the declaration and the entry).
// The order is the order in which idle workers ask the work sources.
#include "core/extension.hpp"

namespace mote::detail {

extern const model_hooks loops_model;          // src/loops/loops.cpp
extern const model_hooks assistant_model;      // src/assistant/assistant.cpp
extern const model_hooks adaptive_join_model;  // src/adaptive/adaptive.cpp
extern const model_hooks omp_model;            // src/omp/team.cpp

namespace {
const model_hooks* const kModels[] = {
    &loops_model,
    &assistant_model,
    &adaptive_join_model,
    &omp_model,
};
}  // namespace

std::span<const model_hooks* const> registered_models() noexcept { return kModels; }

}  // namespace mote::detail
