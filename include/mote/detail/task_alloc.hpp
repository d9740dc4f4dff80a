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
// one (the same worker, a thief, a consumer) puts it in its own cache, or
// sends it home. A thread without a cache takes a fresh block of the class
// size from operator new and deletes what it frees. Larger records come from
// operator new, over-aligned ones from aligned operator new.
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
// give() operator delete, so a use after free of a record is seen.
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

  // `domain`: the caches that live and end together (the workers of one
  // runtime); blocks go home only within one. nullptr: a cache of no domain,
  // to which no block goes home.
  explicit task_cache(const void* domain = nullptr) noexcept : domain_(domain) {}
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
    if (keep_[cls] < keep_max(cls)) ++keep_[cls];
#endif
    return new_block(cls);
  }
  // Keeps a block of class cls (from any cache, or from operator new with
  // that class's size). Owner only.
  void give(void* p, int cls) noexcept {
#if MOTE_TASK_CACHE
    if (count_[cls] < keep_[cls]) {
      auto* b = static_cast<free_block*>(p);
      b->next = head_[cls];
      head_[cls] = b;
      ++count_[cls];
      return;
    }
#endif
    (void)cls;  // unused without the cache
    delete_block(p);
  }

  // Blocks that remember where they came from go home: a block of `home`'s
  // freed by this cache's owner joins a batch, and a full batch (or one for
  // another home) is pushed onto home's return stack with one CAS; home takes
  // back all its returned blocks with one exchange when its own list runs
  // dry. So a producer whose records are freed by a consumer keeps drawing on
  // them, and neither touches the system allocator. Owner of this cache only;
  // `home` is any live cache of the same domain (or this one).
  MOTE_API void give_home(void* p, int cls, task_cache& home) noexcept;
  // take() for blocks that go home: its own list, then its returned blocks.
  // Owner only.
  void* take_returnable(int cls) {
#if MOTE_TASK_CACHE
    // Relaxed: a look only; reclaim()'s acquire exchange is what takes the
    // blocks and their links. A batch missed here is taken next time.
    if (head_[cls] == nullptr && returned_[cls].load(std::memory_order_relaxed) != nullptr)
      reclaim(cls);
#endif
    return take(cls);
  }

 private:
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

  free_block* head_[kClasses] = {};
  std::uint32_t count_[kClasses] = {};
  std::uint32_t keep_[kClasses] = {kKeep, kKeep, kKeep, kKeep, kKeep};
  batch outgoing_[kClasses];
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

// take_record for a block that goes home: mine's list, then the blocks others
// have sent back to it. Keep `home` with the record for give_record_home,
// which reads it: the record must be given back before mine's cache ends
// (before its runtime does). A record that may outlive the caller's runtime
// takes its block with take_record and no home.
//
//   homed_record b = take_record_with_home(tag, bytes, mine);
inline homed_record take_record_with_home(record_tag tag, std::size_t bytes, task_cache* mine) {
  if (tag.cached()) {
    if (mine != nullptr) return {mine->take_returnable(tag.cache_class()), mine};
    return {task_cache::new_block(tag.cache_class()), nullptr};
  }
  return {take_uncached_record(tag, bytes), nullptr};
}

// Gives back a block from take_record_with_home: home, when mine can reach it
// (both of one domain), else into mine's own list (no home, or one of
// another runtime's), else (no cache here) to the system allocator. home,
// when not nullptr, must still be alive (its domain is read).
//
//   give_record_home(b.memory, tag, b.home, mine);
inline void give_record_home(void* memory, record_tag tag, task_cache* home,
                             task_cache* mine) noexcept {
  if (!tag.cached()) {
    give_uncached_record(memory, tag);
  } else if (mine == nullptr) {
    task_cache::delete_block(memory);
  } else if (home != nullptr && home->domain() != nullptr && home->domain() == mine->domain()) {
    mine->give_home(memory, tag.cache_class(), *home);
  } else {
    mine->give(memory, tag.cache_class());
  }
}

}  // namespace mote::detail
