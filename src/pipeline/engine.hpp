// What the two pipeline engines share: the items in flight. The typed side
// (include/mote/pipeline.hpp) hands over a detail::pipeline_chain; the
// engines (tasks.cpp, threads.cpp) move slot numbers and run stages on them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "mote/detail/platform.hpp"
#include "mote/pipeline.hpp"

namespace mote::detail::pipeline {

// No slot.
inline constexpr std::uint32_t kNone = ~std::uint32_t{0};

// The items in flight: one slot per item, each the item's number in the
// stream and the values the stages made of it (storage the typed side lays
// out), made once per run in one block. The number lies on the line of the
// item's first values, so it travels with the item.
//
// Thread roles: produce() is the first stage's (one caller at a time); run()
// and drop() are called by whoever holds the slot; seq() is read by whoever
// holds the slot or finds it waiting at a gate it owns.
class item_slots {
 public:
  item_slots(const pipeline_chain& chain, std::uint32_t count);
  ~item_slots();
  item_slots(const item_slots&) = delete;
  item_slots& operator=(const item_slots&) = delete;

  std::size_t num_stages() const noexcept { return chain_.num_stages; }
  // The stages' modes, the first stage's made serial_in_order (it is called
  // serially whatever it says).
  const std::vector<stage_mode>& modes() const noexcept { return modes_; }
  std::uint64_t seq(std::uint32_t id) const noexcept { return header(id).seq; }

  // Makes the first stage's next item in slot id, numbered in the stream;
  // false at the end of the stream. Rethrows what the stage throws.
  bool produce(std::uint32_t id) {
    header(id).seq = next_seq_;
    if (!chain_.stages[0].run(chain_.context, item(id))) return false;
    ++next_seq_;
    return true;
  }

  // Runs stage i (i >= 1) on the item in slot id: its input value becomes its
  // output. Rethrows what the stage throws.
  void run(std::size_t i, std::uint32_t id) { chain_.stages[i].run(chain_.context, item(id)); }

  // Destroys what the item in slot id still holds: the slot is empty again.
  void drop(std::uint32_t id) noexcept {
    chain_.destroy_item(item(id));
    chain_.make_item(item(id));
  }

 private:
  struct slot_header {
    std::uint64_t seq;
  };

  slot_header& header(std::uint32_t id) const noexcept {
    return *static_cast<slot_header*>(static_cast<void*>(block_ + std::size_t{id} * stride_));
  }
  void* item(std::uint32_t id) const noexcept { return block_ + std::size_t{id} * stride_ + item_offset_; }

  const pipeline_chain chain_;  // a copy: one load less per stage run
  std::vector<stage_mode> modes_;
  std::uint32_t count_;
  std::size_t align_;
  std::size_t item_offset_;
  std::size_t stride_;
  std::byte* block_;
  // The first stage's own, written once per item: on a line of its own, away
  // from the fields above that every stage reads once per item.
  alignas(cache_line) std::uint64_t next_seq_ = 0;
};

// The engines: return when the first stage has stopped and every item is
// through; rethrow the first exception of a stage (or of the engine itself:
// a thread that could not start, memory for a task).
void run_as_tasks(item_slots& items, std::uint32_t max_in_flight, runtime& rt);
void run_on_threads(item_slots& items, std::uint32_t max_in_flight, runtime& rt);

// ---- Test seams (tests/test_pipeline_faults.cpp) ------------------------------
// nullptr in production, where each costs a load and a not-taken branch on
// a path that starts a thread or spawns a task anyway. Set them only while
// no pipeline runs.
//
// The thread engine starts each stage thread through this instead of
// std::thread's constructor (stage: the stage's index; body: what the thread
// runs). It may throw what a failed start throws (std::system_error).
//
//   start_stage_thread = [](std::uint32_t, std::function<void()> body) { return std::thread(body); };
extern std::thread (*start_stage_thread)(std::uint32_t stage, std::function<void()> body);
// Where the task engine allocates, inside a task: a hand-on's spawn (the
// record of the task that takes a stage on) and an item's place in a serial
// stage's queue of arrivals. Called just before; it may throw std::bad_alloc
// as the allocation would.
enum class task_alloc_site : std::uint8_t { hand_on, gate_queue };
extern void (*task_engine_allocates)(task_alloc_site site);

}  // namespace mote::detail::pipeline
