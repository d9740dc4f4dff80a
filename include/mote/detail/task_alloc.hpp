// The record allocator: memory for the task records that the models make and
// free at a high rate (task_group's tasks, data-flow tasks, and any model's
// records to come), with one rule for size classes, alignment and threads
// that are not workers.
//
// A record of at most task_cache::kLargest bytes whose alignment operator new
// already gives takes a block of the smallest class that holds it: 64, 128,
// 256, 512 or 1024 bytes of operator-new memory, exactly the class's size,
// wherever it comes from. Blocks of a class are therefore interchangeable: a
// worker takes them from its own cache (task_cache, below), and whoever frees
// one (the same worker, a thief) puts it in its own cache. A thread without a
// cache takes a fresh block of the class size from operator new and deletes
// what it frees. Larger records come from operator new, over-aligned ones
// from aligned operator new.
//
// Blocks that go home (take_record_with_home: data-flow records, which one
// worker makes and any worker frees) are not interchangeable: they are cut
// from their home cache's slabs (64 blocks of a class, the first holding the
// slab's header), and the home hands out the lowest free block of its lowest
// slab. Blocks taken one after another are then neighbours in memory, as a
// system allocator that carves them from one free region makes them, and so
// are the records of tasks spawned in a row: a later walk over them in spawn
// order (the predecessors that a sweep of a data-flow graph links to) runs
// along memory, where the hardware prefetches. A list that hands out the
// block freed last scatters such a walk over every block the graph holds: on
// an 8x8-tile wavefront that cost 40% of the wall time, with the same
// instructions.
//
// The allocation returns a record_tag (one byte) that the caller keeps, or,
// when it is a constant, recomputes, and passes back with the block:
//
//   constexpr record_tag tag = record_tag::of(sizeof(R), alignof(R));
//   void* p = take_record(tag, sizeof(R), w->cache());  // off a worker: no cache
//   ...
//   give_record(p, tag, v->cache());  // on any worker v; off one: give_record(p, tag)
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

#include "mote/detail/platform.hpp"
#include "mote/export.hpp"

namespace mote::detail {

// One thread's free lists of record blocks, one per size class, so that a
// spawn and the end of a task cost a few instructions rather than a trip to
// malloc. Every member but give_home's target side (returned_) is the owner's
// alone: call them only from the thread whose cache this is (a worker's).
//
// MOTE_TASK_CACHE=0 (ASan builds) keeps nothing: take() is operator new and
// give() operator delete (and so for the blocks that go home), so a use after
// free of a record is seen.
class task_cache {
 public:
  static constexpr std::size_t kSmallest = 64;
  static constexpr int kClasses = 5;  // 64, 128, 256, 512 and 1024 bytes
  static constexpr std::size_t kLargest = kSmallest << (kClasses - 1);
  // Blocks kept per class at first; more are returned to the system
  // allocator. A worker that runs what others spawn (a thief) would
  // otherwise hoard them. Each block the owner has to take from the system
  // raises its class's limit by one, up to kKeepBytes of blocks: a spawner
  // whose tasks are alive by the tens of thousands at once (a data-flow
  // graph spawned ahead) keeps what its peak needed, instead of paying
  // operator new and delete for every block above the first limit, every
  // time. What others free into this cache does not raise it.
  static constexpr std::uint32_t kKeep = 16384;
  static constexpr std::size_t kKeepBytes = std::size_t{32} << 20;
  static constexpr std::uint32_t keep_max(int cls) noexcept {
    return static_cast<std::uint32_t>(kKeepBytes / size_of(cls)) > kKeep
               ? static_cast<std::uint32_t>(kKeepBytes / size_of(cls))
               : kKeep;
  }

  // The class of a record of `bytes`; kClasses when it is too large.
  static constexpr int class_of(std::size_t bytes) noexcept {
    int c = 0;
    while (c < kClasses && (kSmallest << c) < bytes) ++c;
    return c;
  }
  static constexpr std::size_t size_of(int cls) noexcept { return kSmallest << cls; }

  // A class's blocks begin on a cache line: a record then touches only the
  // lines its bytes need (a 192-byte record three, not four or five), and
  // two records never share a line, which two workers would bounce between
  // them when they run neighbours.
  static void* new_block(int cls) { return ::operator new(size_of(cls), std::align_val_t(cache_line)); }
  static void delete_block(void* p) noexcept { ::operator delete(p, std::align_val_t(cache_line)); }

 private:
  struct free_block;  // below

 public:
  // The blocks that the caches of one runtime's workers had no room for, in
  // batches of kBatch: a worker that frees more blocks than it takes (one
  // that runs what another spawns) sends its surplus here once its lists are
  // full, and a worker that takes more than it frees (the spawner) takes
  // them back before it asks the system allocator. Without it, every task
  // that went from a producer to a consumer cost a malloc on one and a free
  // on the other, about 40% of the time of a 0.1 us task on two workers.
  // Lock-free: batches are pushed with one CAS and taken all at once with one
  // exchange (so no pop can meet a recycled top: no ABA). Must outlive every
  // cache that sends to it.
  class spill_pool {
   public:
    spill_pool() noexcept = default;
    MOTE_API ~spill_pool();  // deletes the blocks still here
    spill_pool(const spill_pool&) = delete;
    spill_pool& operator=(const spill_pool&) = delete;

   private:
    friend class task_cache;
    std::atomic<free_block*> stacks_[kClasses] = {};
  };

  // `domain`: the caches that live and end together (the workers of one
  // runtime); blocks go home only within one. nullptr: a cache of no domain,
  // to which no block goes home. `spill`: the domain's pool for surplus
  // blocks (above), or nullptr (the surplus goes to the system allocator).
  explicit task_cache(const void* domain = nullptr, spill_pool* spill = nullptr) noexcept
      : spill_(spill), domain_(domain) {}
  ~task_cache();
  task_cache(const task_cache&) = delete;
  task_cache& operator=(const task_cache&) = delete;

  const void* domain() const noexcept { return domain_; }

  // A block of class cls: the head of its list, else a fresh one. Owner only.
  void* take(int cls) {
#if MOTE_TASK_CACHE
    if (free_block* b = head_[cls]) {
      head_[cls] = b->next;
      --count_[cls];
      return b;
    }
    if (spill_ != nullptr) {
      if (void* p = take_spilled(cls)) return p;
    }
    if (keep_[cls] < keep_max(cls)) ++keep_[cls];
#endif
    return new_block(cls);
  }
  // Keeps a block of class cls (from any cache, or from operator new with
  // that class's size). Owner only.
  void give(void* p, int cls) noexcept {
#if MOTE_TASK_CACHE
    if (MOTE_LIKELY(count_[cls] < keep_[cls])) {
      auto* b = static_cast<free_block*>(p);
      b->next = head_[cls];
      head_[cls] = b;
      ++count_[cls];
      return;
    }
    if (spill_ != nullptr) {
      spill(p, cls);
      return;
    }
#endif
    (void)cls;  // unused without the cache
    delete_block(p);
  }

  // ---- Blocks that go home: cut from this cache's slabs -----------------
  //
  // A block of class cls from this cache's slabs, the lowest free one (see
  // the top of this file): the lowest slab with a free block, then that
  // slab's lowest. When none is free, the blocks others sent back are taken
  // first (reclaim), then a new slab. Owner only. Throws std::bad_alloc.
  //
  // Inline where a program spawns, so the library decides what a block that
  // goes home is: this takes from slabs only when some exist, and only the
  // library's take_returnable_slow makes them (a library built with
  // MOTE_TASK_CACHE=0 makes none and hands out plain blocks), so code built
  // with and without the cache can share a runtime.
  void* take_returnable(int cls) {
    slab_set& set = slabs_[cls];
    if (MOTE_LIKELY(set.first < set.words && set.has_free[set.first] != 0)) {
      const auto bit = static_cast<std::uint32_t>(std::countr_zero(set.has_free[set.first]));
      return take_from(set, set.first * 64 + bit, cls);
    }
    return take_returnable_slow(cls);
  }
  // Gives back a block of this cache's own slabs. Owner only; called from
  // the library (give_record_home, where records are freed), built as
  // take_returnable_slow is.
  void give_own(void* p, int cls) noexcept {
#if MOTE_TASK_CACHE
    slab_set& set = slabs_[cls];
    slab* s = slab_of(p, cls);
    const auto offset = reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(s);
    const auto b = static_cast<unsigned>(offset >> (kLogSmallest + cls));
    if (s->free == 0) {
      set.has_free[s->index / 64] |= std::uint64_t{1} << (s->index % 64);
      if (s->index / 64 < set.first) set.first = s->index / 64;
    }
    s->free |= std::uint64_t{1} << b;
    if (MOTE_UNLIKELY(s->free == kAllFree) && set.held > keep_slabs(cls)) release(cls, s);
#else
    (void)cls;
    delete_block(p);
#endif
  }
  // A block of `home`'s slabs freed by this cache's owner: home's own go
  // back at once; another cache's join a batch, and a full batch (or one for
  // another home) is pushed onto home's return stack with one CAS, which home
  // takes back in one exchange when its slabs are full. So a producer whose
  // records are freed by a consumer keeps drawing on them, and neither
  // touches the system allocator. Owner of this cache only; `home` is a live
  // cache of the same domain (or this one): a batch may wait here until the
  // domain's end.
  MOTE_API void give_home(void* p, int cls, task_cache& home) noexcept;
  // A block of `home`'s slabs, freed by any thread (one with no cache, or a
  // cache of another domain, which may end before a batch would be sent):
  // pushed alone onto home's return stack. `home` must be alive.
  MOTE_API static void send_home(void* p, int cls, task_cache& home) noexcept;
  // Bytes of class cls's slabs this cache holds (in use or free). Owner only.
  std::size_t slab_bytes_held(int cls) const noexcept { return std::size_t{slabs_[cls].held} * slab_bytes(cls); }

 private:
  static constexpr int kLogSmallest = 6;
  static_assert(kSmallest == std::size_t{1} << kLogSmallest);
  // A slab: 64 blocks of its class, aligned to its size, so that a block
  // finds its slab by masking its address. Block 0 holds this header.
  struct slab {
    std::uint64_t free;   // bit b: block b is free (bit 0, the header's, never)
    std::uint32_t index;  // in its class's table
  };
  static_assert(sizeof(slab) <= kSmallest);
  static constexpr std::uint64_t kAllFree = ~std::uint64_t{1};
  static constexpr std::size_t slab_bytes(int cls) noexcept { return size_of(cls) * 64; }
  static slab* slab_of(void* p, int cls) noexcept {
    return reinterpret_cast<slab*>(reinterpret_cast<std::uintptr_t>(p) & ~(slab_bytes(cls) - 1));
  }
  // Wholly free slabs are kept while the class holds at most kKeepBytes.
  static constexpr std::uint32_t keep_slabs(int cls) noexcept {
    return static_cast<std::uint32_t>(kKeepBytes / slab_bytes(cls));
  }
  // One class's slabs, the owner's alone. table[i]: slab i, or nullptr (one
  // given back; the next new slab takes the index). has_free: bit i set when
  // slab i has a free block; no word below `first` has a bit set.
  struct slab_set {
    slab** table = nullptr;
    std::uint64_t* has_free = nullptr;
    std::uint32_t size = 0;      // table entries in use (slabs and holes)
    std::uint32_t words = 0;     // has_free's words; the table has words * 64 entries
    std::uint32_t first = 0;
    std::uint32_t held = 0;      // slabs in the table
    std::uint32_t holes = 0;     // nullptr entries below `size`
  };
  void* take_from(slab_set& set, std::uint32_t i, int cls) noexcept {
    slab* s = set.table[i];
    const int b = std::countr_zero(s->free);
    s->free &= s->free - 1;
    if (s->free == 0) set.has_free[i / 64] &= ~(std::uint64_t{1} << (i % 64));
    return reinterpret_cast<char*>(s) + (static_cast<std::size_t>(b) << (kLogSmallest + cls));
  }
  MOTE_API void* take_returnable_slow(int cls);
  MOTE_API void release(int cls, slab* s) noexcept;

  static constexpr std::uint32_t kBatch = 32;
  struct free_block {
    free_block* next;
    free_block* next_batch;  // on a return stack: the batch under this one
  };
  static_assert(sizeof(free_block) <= kSmallest);
  struct batch {
    task_cache* home = nullptr;
    free_block* head = nullptr;
    std::uint32_t count = 0;
  };
  MOTE_API void reclaim(int cls) noexcept;
  void send(int cls) noexcept;
  // The spill pool's side (spill_ not nullptr): a block for which the list
  // has no room joins the outgoing batch, a full batch goes to the pool; an
  // empty list takes the next batch of the reserve, which takes the pool's
  // batches all at once when it is empty. nullptr: the pool had none.
  MOTE_API void spill(void* p, int cls) noexcept;
  MOTE_API void* take_spilled(int cls) noexcept;

  free_block* head_[kClasses] = {};
  std::uint32_t count_[kClasses] = {};
  std::uint32_t keep_[kClasses] = {kKeep, kKeep, kKeep, kKeep, kKeep};
  slab_set slabs_[kClasses];
  batch outgoing_[kClasses];
  spill_pool* spill_;
  batch spilling_[kClasses];          // home unused
  free_block* reserve_[kClasses] = {};  // whole batches taken from the pool, linked by next_batch
  // Read by the caches that send blocks here; written once, at construction,
  // so it shares the line that only they and reclaim() write, not the
  // owner's busy one above.
  alignas(cache_line) const void* domain_;
  // Written by the caches of other workers (give_home).
  std::atomic<free_block*> returned_[kClasses] = {};
  char pad_[cache_line - ((kClasses + 1) * sizeof(void*)) % cache_line] = {};
};

// How a record's block was obtained, in one byte: a cache class, plain
// operator new, or aligned operator new with its alignment. What giving the
// block back needs besides its address (and, for blocks that go home, the
// home cache).
class record_tag {
 public:
  // Indeterminate, as a byte is: a record's field, set when its block is taken.
  record_tag() = default;

  // The rule, the same for every record: see the top of this file.
  static constexpr record_tag of(std::size_t bytes, std::size_t align) noexcept {
    if (align > __STDCPP_DEFAULT_NEW_ALIGNMENT__) return aligned(align);
    const int cls = task_cache::class_of(bytes);
    return record_tag(cls < task_cache::kClasses ? static_cast<std::uint8_t>(cls) : kPlain);
  }
  // The system allocator, whatever the size (a model's switch to measure
  // against malloc: MOTE_DATAFLOW_POOLS=0).
  static constexpr record_tag uncached(std::size_t align) noexcept {
    return align > __STDCPP_DEFAULT_NEW_ALIGNMENT__ ? aligned(align) : record_tag(kPlain);
  }

  // From a cache class: the block is that class's size, and any cache takes it.
  constexpr bool cached() const noexcept { return code_ < task_cache::kClasses; }
  constexpr int cache_class() const noexcept { return code_; }
  // Aligned operator new: with this alignment.
  constexpr bool over_aligned() const noexcept { return (code_ & kAligned) != 0; }
  constexpr std::size_t alignment() const noexcept { return std::size_t{1} << (code_ & kLogMask); }

  friend constexpr bool operator==(record_tag, record_tag) noexcept = default;

 private:
  static constexpr std::uint8_t kPlain = 0x40;
  static constexpr std::uint8_t kAligned = 0x80;  // | log2 of the alignment
  static constexpr std::uint8_t kLogMask = 0x3f;
  static_assert(task_cache::kClasses < kPlain);

  constexpr explicit record_tag(std::uint8_t code) noexcept : code_(code) {}
  static constexpr record_tag aligned(std::size_t align) noexcept {
    std::uint8_t log = 0;
    while ((std::size_t{1} << log) < align) ++log;
    return record_tag(static_cast<std::uint8_t>(kAligned | log));
  }

  std::uint8_t code_;
};

// ---- Taking and giving back: any thread ---------------------------------
// `mine` is the calling thread's own cache (its worker's); the forms without
// one, or with nullptr, are for a thread that has none. `bytes` is the
// record's size, the one the tag was made for.

// The system side of both, for blocks that no cache takes.
inline void* take_uncached_record(record_tag tag, std::size_t bytes) {
  if (tag.over_aligned()) return ::operator new(bytes, std::align_val_t(tag.alignment()));
  return ::operator new(bytes);
}
inline void give_uncached_record(void* memory, record_tag tag) noexcept {
  if (tag.over_aligned()) {
    ::operator delete(memory, std::align_val_t(tag.alignment()));
  } else {
    ::operator delete(memory);
  }
}

// A block for a record, on a thread with a cache (a worker: mine is its
// own); with a constant tag, a few instructions from mine's list. Throws
// std::bad_alloc.
//
//   void* p = take_record(tag, sizeof(R), w->cache());
MOTE_ALWAYS_INLINE void* take_record(record_tag tag, std::size_t bytes, task_cache& mine) {
  if (tag.cached()) return mine.take(tag.cache_class());
  return take_uncached_record(tag, bytes);
}
// The same on a thread with no cache: a fresh block (of the class's full
// size when the tag is a class, so that any cache can keep it later).
//
//   void* p = take_record(tag, sizeof(R));
MOTE_ALWAYS_INLINE void* take_record(record_tag tag, std::size_t bytes) {
  if (tag.cached()) return task_cache::new_block(tag.cache_class());
  return take_uncached_record(tag, bytes);
}

// Gives back a block from take_record, taken on any thread: it joins mine's
// list (mine: the calling worker's own cache).
//
//   give_record(p, tag, w->cache());
MOTE_ALWAYS_INLINE void give_record(void* memory, record_tag tag, task_cache& mine) noexcept {
  if (tag.cached()) {
    mine.give(memory, tag.cache_class());
  } else {
    give_uncached_record(memory, tag);
  }
}
// The same on a thread with no cache: to the system allocator.
//
//   give_record(p, tag);
MOTE_ALWAYS_INLINE void give_record(void* memory, record_tag tag) noexcept {
  if (tag.cached()) {
    task_cache::delete_block(memory);
  } else {
    give_uncached_record(memory, tag);
  }
}

// A block that goes home: its address and the cache it goes back to (mine
// when it came from mine's cache, else nullptr).
struct homed_record {
  void* memory;
  task_cache* home;
};

// take_record for a block that goes home: from mine's slabs (the lowest free
// block; see the top of this file). Off a worker (mine nullptr), a block of no
// home, as take_record gives. Keep `home` with the record for
// give_record_home, which reads it: the record must be given back before
// mine's cache ends (before its runtime does). A record that may outlive the
// caller's runtime takes its block with take_record and no home.
//
//   homed_record b = take_record_with_home(tag, bytes, mine);
inline homed_record take_record_with_home(record_tag tag, std::size_t bytes, task_cache* mine) {
  if (tag.cached()) {
    if (mine != nullptr) return {mine->take_returnable(tag.cache_class()), mine};
    return {task_cache::new_block(tag.cache_class()), nullptr};
  }
  return {take_uncached_record(tag, bytes), nullptr};
}

// Gives back a block from take_record_with_home, on any thread: to its home
// (at once when mine is the home; in a batch when mine is of the home's
// domain; alone on the home's return stack otherwise); a block of no home
// into mine's list, or (no cache here) to the system allocator. home, when
// not nullptr, must still be alive.
//
//   give_record_home(b.memory, tag, b.home, mine);
inline void give_record_home(void* memory, record_tag tag, task_cache* home,
                             task_cache* mine) noexcept {
  if (!tag.cached()) {
    give_uncached_record(memory, tag);
  } else if (home == nullptr) {
    if (mine != nullptr) {
      mine->give(memory, tag.cache_class());
    } else {
      task_cache::delete_block(memory);
    }
  } else if (home == mine) {
    mine->give_own(memory, tag.cache_class());
  } else if (mine != nullptr && home->domain() != nullptr && home->domain() == mine->domain()) {
    mine->give_home(memory, tag.cache_class(), *home);
  } else {
    task_cache::send_home(memory, tag.cache_class(), *home);
  }
}

}  // namespace mote::detail
