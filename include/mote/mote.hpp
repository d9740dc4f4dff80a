// The whole C++ API of mote.
//
//   #include <mote/mote.hpp>
//   int main() {
//     auto [a, b] = mote::join([] { return 1; }, [] { return 2; });
//     return a + b == 3 ? 0 : 1;
//   }
#pragma once

#include "mote/assistant.hpp"
#include "mote/channel.hpp"
#include "mote/dataflow.hpp"
#include "mote/error.hpp"
#include "mote/join.hpp"
#include "mote/loops.hpp"
#include "mote/pipeline.hpp"
#include "mote/queues/batch_queue.hpp"
#include "mote/queues/mpmc_queue.hpp"
#include "mote/queues/ring.hpp"
#include "mote/runtime.hpp"
#include "mote/sync/delegation_lock.hpp"
#include "mote/sync/ticket_lock.hpp"
#include "mote/task_group.hpp"
#include "mote/trace.hpp"
#include "mote/topology.hpp"
