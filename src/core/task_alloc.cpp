// The record allocator's out-of-line side: the slabs of blocks that go home
// (a new slab, one given back), batches sent to a home's return stack and
// taken back in one exchange, and the end of a cache.
#include "mote/detail/task_alloc.hpp"

#include <algorithm>

namespace mote::detail {

namespace {

// Deletes the blocks of a chain of batches (linked by next_batch, each a
// list linked by next).
template <class Block>
void delete_batches(Block* batches) noexcept {
  while (batches != nullptr) {
    Block* below = batches->next_batch;
    for (Block* b = batches; b != nullptr;) {
      Block* next = b->next;
      task_cache::delete_block(b);
      b = next;
    }
    batches = below;
  }
}

}  // namespace

task_cache::spill_pool::~spill_pool() {
  for (auto& stack : stacks_) {
    // Relaxed: the pool ends after every cache that sent to it (their
    // threads have been joined).
    delete_batches(stack.load(std::memory_order_relaxed));
  }
}

task_cache::~task_cache() {
  for (int c = 0; c < kClasses; ++c) {
    for (free_block* b = head_[c]; b != nullptr;) {
      free_block* next = b->next;
      delete_block(b);
      b = next;
    }
    delete_batches(reserve_[c]);
    delete_batches(spilling_[c].head);
#if MOTE_TASK_CACHE
    // Blocks in a batch not sent yet, or on this cache's return stack, are
    // blocks of slabs (of this cache or of another of its domain, which ends
    // with it), freed with their slabs: nothing to walk.
    slab_set& set = slabs_[c];
    for (std::uint32_t i = 0; i < set.size; ++i) {
      if (set.table[i] != nullptr) ::operator delete(set.table[i], std::align_val_t(slab_bytes(c)));
    }
    delete[] set.table;
    delete[] set.has_free;
#endif
  }
}

void* task_cache::take_returnable_slow(int cls) {
#if !MOTE_TASK_CACHE
  // No slabs in this build: a plain block of the class, which give_own
  // deletes (and a program's inline take_returnable never finds a slab).
  return new_block(cls);
#else
  slab_set& set = slabs_[cls];
  for (int round = 0; round < 2; ++round) {
    while (set.first < set.words) {
      if (set.has_free[set.first] != 0) {
        const auto bit = static_cast<std::uint32_t>(std::countr_zero(set.has_free[set.first]));
        return take_from(set, set.first * 64 + bit, cls);
      }
      ++set.first;
    }
    // Every slab is full. Relaxed: a look only; reclaim()'s acquire exchange
    // is what takes the blocks and their links. A batch missed here is taken
    // the next time the slabs are full.
    if (round == 0 && returned_[cls].load(std::memory_order_relaxed) != nullptr) {
      reclaim(cls);
    } else {
      break;
    }
  }
  // A new slab. Everything that throws comes first: the slab, then room for
  // its index; on a throw the cache is as it was.
  void* memory = ::operator new(slab_bytes(cls), std::align_val_t(slab_bytes(cls)));
  std::uint32_t i = set.size;
  if (set.holes != 0) {
    i = 0;
    while (set.table[i] != nullptr) ++i;
    --set.holes;
  } else if (set.size == set.words * 64) {
    const std::uint32_t words = set.words == 0 ? 1 : set.words * 2;
    slab** table;
    std::uint64_t* has_free;
    try {
      table = new slab*[std::size_t{words} * 64];
      try {
        has_free = new std::uint64_t[words];
      } catch (...) {
        delete[] table;
        throw;
      }
    } catch (...) {
      ::operator delete(memory, std::align_val_t(slab_bytes(cls)));
      throw;
    }
    std::copy_n(set.table, set.size, table);
    std::fill_n(has_free, words, std::uint64_t{0});
    std::copy_n(set.has_free, set.words, has_free);
    delete[] set.table;
    delete[] set.has_free;
    set.table = table;
    set.has_free = has_free;
    set.words = words;
    ++set.size;
  } else {
    ++set.size;
  }
  auto* s = static_cast<slab*>(memory);
  s->free = kAllFree;
  s->index = i;
  set.table[i] = s;
  ++set.held;
  set.has_free[i / 64] |= std::uint64_t{1} << (i % 64);
  if (i / 64 < set.first) set.first = i / 64;
  return take_from(set, i, cls);
#endif
}

#if MOTE_TASK_CACHE
void task_cache::release(int cls, slab* s) noexcept {
  slab_set& set = slabs_[cls];
  const std::uint32_t i = s->index;
  set.table[i] = nullptr;
  set.has_free[i / 64] &= ~(std::uint64_t{1} << (i % 64));
  --set.held;
  ++set.holes;
  ::operator delete(s, std::align_val_t(slab_bytes(cls)));
}
#endif

void task_cache::give_home(void* p, int cls, task_cache& home) noexcept {
#if MOTE_TASK_CACHE
  if (&home == this) {
    give_own(p, cls);
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

namespace {

// Pushes the list [head ... ] (linked through `next`) onto a return stack.
template <class Block>
void push_returned(std::atomic<Block*>& stack, Block* head) noexcept {
  // Relaxed: a first guess for the CAS below, which rereads it on failure.
  Block* top = stack.load(std::memory_order_relaxed);
  do {
    head->next_batch = top;
    // Release: the home's acquire exchange in reclaim() sees the batch's
    // links. Only the home ever pops, and it takes the whole stack at once,
    // so a pushed batch is never removed under a pusher (no ABA).
  } while (!stack.compare_exchange_weak(top, head, std::memory_order_release, std::memory_order_relaxed));
}

}  // namespace

void task_cache::send(int cls) noexcept {
  batch& out = outgoing_[cls];
  push_returned(out.home->returned_[cls], out.head);
  out = batch{};
}

void task_cache::send_home(void* p, int cls, task_cache& home) noexcept {
#if MOTE_TASK_CACHE
  auto* b = static_cast<free_block*>(p);
  b->next = nullptr;
  push_returned(home.returned_[cls], b);
#else
  (void)home;
  (void)cls;
  delete_block(p);
#endif
}

void task_cache::spill(void* p, int cls) noexcept {
  batch& out = spilling_[cls];
  auto* b = static_cast<free_block*>(p);
  b->next = out.head;
  b->next_batch = nullptr;
  out.head = b;
  if (++out.count < kBatch) return;
  // Release (in push_returned): the taker's acquire exchange sees the
  // batch's links.
  push_returned(spill_->stacks_[cls], out.head);
  out = batch{};
}

void* task_cache::take_spilled(int cls) noexcept {
  free_block* batches = reserve_[cls];
  if (batches == nullptr) {
    std::atomic<free_block*>& stack = spill_->stacks_[cls];
    // Relaxed: a look that spares the line an exchange when there is
    // nothing. Acquire: pairs with push_returned's release CAS; every
    // batch's links are visible.
    if (stack.load(std::memory_order_relaxed) == nullptr) return nullptr;
    batches = stack.exchange(nullptr, std::memory_order_acquire);
    if (batches == nullptr) return nullptr;
  }
  // The top batch becomes the list (it holds kBatch blocks), the rest stay
  // in reserve; then the usual take.
  reserve_[cls] = batches->next_batch;
  head_[cls] = batches->next;
  count_[cls] = kBatch - 1;
  return batches;
}

void task_cache::reclaim(int cls) noexcept {
  // Acquire: pairs with push_returned's release CAS; every batch's links are
  // visible.
  free_block* stack = returned_[cls].exchange(nullptr, std::memory_order_acquire);
  while (stack != nullptr) {
    free_block* below = stack->next_batch;
    for (free_block* b = stack; b != nullptr;) {
      free_block* next = b->next;
      give_own(b, cls);
      b = next;
    }
    stack = below;
  }
}

}  // namespace mote::detail
