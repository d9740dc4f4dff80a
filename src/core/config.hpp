// Resolution of runtime options: explicit options, then MOTE_* environment
// variables, then defaults from the topology.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "mote/runtime.hpp"
#include "mote/topology.hpp"

namespace mote::detail {

// MOTE_MESH_BALANCE: which of XQueue's balancing protocols the mesh policy
// (scheduler_policy::mesh, src/scheduler/mesh.hpp) runs.
enum class mesh_balance : std::uint8_t {
  none = 0,      // static round-robin (and the rescue of stranded tasks)
  redirect = 1,  // NA-RP: producers steer new tasks to under-loaded workers
  steal = 2,     // NA-WS: under-loaded workers ask loaded ones for tasks
  both = 3,
};

// The MOTE_MESH_BALANCE spelling of each value (what the variable accepts,
// what MOTE_STATS prints).
constexpr const char* mesh_balance_name(mesh_balance b) noexcept {
  switch (b) {
    case mesh_balance::none:
      return "none";
    case mesh_balance::redirect:
      return "redirect";
    case mesh_balance::steal:
      return "steal";
    case mesh_balance::both:
      return "both";
  }
  return "?";
}

struct resolved_config {
  unsigned num_workers = 1;
  std::vector<int> worker_cpus;           // one per worker: an os cpu index, or -1 (unpinned)
  std::chrono::nanoseconds spin{100000};
  scheduler_policy policy = scheduler_policy::work_stealing;  // MOTE_SCHEDULER
  // The NUMA node of each worker's CPU (dense, < num_nodes); an unpinned
  // worker is spread round the nodes by index. The delegation scheduler gives
  // each node an add-queue.
  std::vector<unsigned> worker_nodes;
  mesh_balance balance = mesh_balance::both;  // MOTE_MESH_BALANCE (the mesh policy only)
  unsigned num_nodes = 1;
  std::uint32_t deque_capacity = split_deque::kDefaultCapacity;
  bool assistants = false;
  bool caller_seat = false;               // runtime_options::caller_seat: worker 0 has no thread
  // With a caller seat and a binding: the CPU the binding leaves to the
  // seat's occupant (the first of its cycle, which no worker with a thread
  // has); -1: none (no binding, or every CPU of it has a worker).
  int seat_cpu = -1;
  bool bind_chosen = false;               // runtime_options::bind or MOTE_BIND (not the default)
  std::size_t stack_size = 0;             // runtime_options::stack_size: bytes per worker (0: default)
  bool stats = false;                     // MOTE_STATS=1
  bool adaptive = false;                  // join's: runtime_options::adaptive, MOTE_ADAPTIVE=1
  bool assistants_adaptive = true;        // the workers' assistants' (the same, default on)
  topology machine;                       // what workers were placed by (loop teams use it)
};

// Reads MOTE_NUM_THREADS, MOTE_BIND, MOTE_SPIN_US, MOTE_SCHEDULER (and MOTE_STATS, MOTE_ADAPTIVE) for the options left
// empty. Throws config_error, naming the variable (or option) and the value,
// for anything that cannot be parsed or used on this machine.
// MOTE_ADAPTIVE: 0 or 1, nullopt when unset; config_error naming it otherwise.
MOTE_API std::optional<bool> env_adaptive();
// MOTE_NUM_THREADS: the number of workers it asks for (1..4096), nullopt when
// unset; config_error naming it otherwise.
MOTE_API std::optional<unsigned> env_num_threads();

MOTE_API resolved_config resolve_config(const runtime_options& options, const topology& topo);

}  // namespace mote::detail
