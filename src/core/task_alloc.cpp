// The record allocator's out-of-line side: blocks that go home (batches sent
// to a home's return stack, taken back in one exchange), and the end of a
// cache.
#include "mote/detail/task_alloc.hpp"

namespace mote::detail {

task_cache::~task_cache() {
  // The caches of a domain end together, once no owner gives any more:
  // blocks still in a batch or on a return stack are blocks of their class
  // (new_block), freed here wherever they came from.
  for (int c = 0; c < kClasses; ++c) {
    free_block* lists[2] = {head_[c], outgoing_[c].head};
    for (free_block* b : lists) {
      while (b != nullptr) {
        free_block* next = b->next;
        delete_block(b);
        b = next;
      }
    }
    // Acquire, as reclaim(): pairs with send()'s release CAS, so the links of
    // every batch pushed here are visible before they are walked.
    free_block* stack = returned_[c].exchange(nullptr, std::memory_order_acquire);
    while (stack != nullptr) {
      free_block* below = stack->next_batch;
      for (free_block* b = stack; b != nullptr;) {
        free_block* next = b->next;
        delete_block(b);
        b = next;
      }
      stack = below;
    }
  }
}

void task_cache::give_home(void* p, int cls, task_cache& home) noexcept {
#if MOTE_TASK_CACHE
  if (&home == this) {
    give(p, cls);
    return;
  }
  batch& out = outgoing_[cls];
  if (out.home != &home && out.count != 0) send(cls);
  auto* b = static_cast<free_block*>(p);
  b->next = out.head;
  out.head = b;
  out.home = &home;
  if (++out.count == kBatch) send(cls);
#else
  (void)home;
  give(p, cls);
#endif
}

void task_cache::send(int cls) noexcept {
  batch& out = outgoing_[cls];
  std::atomic<free_block*>& stack = out.home->returned_[cls];
  // Relaxed: a first guess for the CAS below, which rereads it on failure.
  free_block* top = stack.load(std::memory_order_relaxed);
  do {
    out.head->next_batch = top;
    // Release: the home's acquire exchange in reclaim() sees the batch's
    // links. Only the home ever pops, and it takes the whole stack at once,
    // so a pushed batch is never removed under a pusher (no ABA).
  } while (!stack.compare_exchange_weak(top, out.head, std::memory_order_release,
                                        std::memory_order_relaxed));
  out = batch{};
}

void task_cache::reclaim(int cls) noexcept {
  // Acquire: pairs with send()'s release CAS; every batch's links are visible.
  free_block* stack = returned_[cls].exchange(nullptr, std::memory_order_acquire);
  while (stack != nullptr) {
    free_block* below = stack->next_batch;
    free_block* last = stack;
    std::uint32_t n = 1;
    while (last->next != nullptr) {
      last = last->next;
      ++n;
    }
    last->next = head_[cls];
    head_[cls] = stack;
    count_[cls] += n;
    stack = below;
  }
}

}  // namespace mote::detail
