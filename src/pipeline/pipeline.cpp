// mote::parallel_pipeline's entry: the options resolved, the items' slots
// made, the engine chosen (tasks.cpp, threads.cpp).
#include <algorithm>
#include <new>
#include <stdexcept>

#include "pipeline/engine.hpp"

namespace mote::detail {

namespace pipeline {

item_slots::item_slots(const pipeline_chain& chain, std::uint32_t count)
    : chain_(chain),
      modes_(chain.num_stages),
      count_(count),
      align_(std::max(alignof(slot_header), chain.item_align)),
      item_offset_((sizeof(slot_header) + chain.item_align - 1) / chain.item_align * chain.item_align),
      stride_((item_offset_ + chain.item_size + align_ - 1) / align_ * align_),
      block_(static_cast<std::byte*>(::operator new(stride_ * count, std::align_val_t(align_)))) {
  for (std::size_t i = 0; i < chain.num_stages; ++i) modes_[i] = chain.stages[i].mode;
  modes_[0] = stage_mode::serial_in_order;  // the first stage is called serially
  for (std::uint32_t id = 0; id < count_; ++id) {
    ::new (static_cast<void*>(block_ + std::size_t{id} * stride_)) slot_header{0};
    chain_.make_item(item(id));
  }
}

std::thread (*start_stage_thread)(std::uint32_t, std::function<void()>) = nullptr;
void (*task_engine_allocates)(task_alloc_site) = nullptr;

item_slots::~item_slots() {
  for (std::uint32_t id = 0; id < count_; ++id) chain_.destroy_item(item(id));
  ::operator delete(block_, std::align_val_t(align_));
}

}  // namespace pipeline

void run_pipeline(const pipeline_chain& chain, const pipeline_options& options) {
  runtime& rt = options.rt != nullptr            ? *options.rt
                : runtime::current() != nullptr ? *runtime::current()
                                                : runtime::default_runtime();
  std::size_t max = options.max_in_flight;
  if (max == 0) max = 4 * std::size_t{std::max(1U, rt.num_workers())};
  if (max > (std::size_t{1} << 30)) throw std::invalid_argument("mote::parallel_pipeline: max_in_flight too large");
  const auto max_in_flight = static_cast<std::uint32_t>(max);
  pipeline::item_slots items(chain, max_in_flight);
  if (options.dedicated_threads) {
    pipeline::run_on_threads(items, max_in_flight, rt);
  } else {
    pipeline::run_as_tasks(items, max_in_flight, rt);
  }
}

}  // namespace mote::detail
