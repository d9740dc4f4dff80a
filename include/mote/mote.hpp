// The whole C++ API of mote.
//
//   #include <mote/mote.hpp>
//   int main() {
//     auto [a, b] = mote::join([] { return 1; }, [] { return 2; });
//     return a + b == 3 ? 0 : 1;
//   }
#pragma once

#include "mote/assistant.hpp"
#include "mote/dataflow.hpp"
#include "mote/error.hpp"
#include "mote/join.hpp"
#include "mote/loops.hpp"
#include "mote/runtime.hpp"
#include "mote/sync/delegation_lock.hpp"
#include "mote/sync/ticket_lock.hpp"
#include "mote/task_group.hpp"
#include "mote/trace.hpp"
#include "mote/topology.hpp"
