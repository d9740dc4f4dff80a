// The pipeline on dedicated threads: every serial stage on a thread of its
// own, a parallel stage on one thread per worker, pinned to the runtime's
// CPUs in turn and connected by channels of slot numbers: channel_kind::spsc
// (BatchQueue) between two serial stages, a one-to-one stream, MPMC
// elsewhere. The end of the stream flows down as each stage's last thread
// closes the next stage's channel.
#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "mote/channel.hpp"
#include "mote/detail/platform.hpp"
#include "mote/detail/queue_wait.hpp"
#include "mote/topology.hpp"
#include "pipeline/engine.hpp"

namespace mote::detail::pipeline {
namespace {

// The input side of stage i (i >= 1): a channel of slot numbers, and for an
// in-order stage the items that came early.
struct alignas(cache_line) input {
  std::unique_ptr<channel<std::uint32_t>> ch;
  std::uint64_t next_seq = 0;
  std::vector<std::uint32_t> waiting;
  std::atomic<std::size_t> running{0};  // the stage's threads still running
};

class thread_pipeline {
 public:
  thread_pipeline(item_slots& items, std::uint32_t max_in_flight, runtime& rt)
      : items_(items),
        modes_(items.modes()),
        n_(static_cast<std::uint32_t>(items.num_stages())),
        max_(max_in_flight),
        rt_(rt),
        inputs_(std::make_unique<input[]>(n_)),
        free_(std::make_unique<channel<std::uint32_t>>(std::max<std::size_t>(2, std::size_t{max_} + 1),
                                                       channel_kind::mpmc)) {
    for (std::uint32_t i = 1; i < n_; ++i) {
      // Between two serial stages a one-to-one stream: BatchQueue.
      const bool one_to_one = serial(i - 1) && serial(i);
      inputs_[i].ch = std::make_unique<channel<std::uint32_t>>(std::max<std::size_t>(2, max_),
                                                               one_to_one ? channel_kind::spsc : channel_kind::mpmc);
      if (modes_[i] == stage_mode::serial_in_order) inputs_[i].waiting.assign(max_, kNone);
    }
  }

  void run() {
    for (std::uint32_t id = 0; id < max_; ++id) free_->push(id);
    std::vector<int> cpus = rt_.worker_cpus();
    std::vector<std::thread> threads;
    std::size_t total = 0;
    for (std::uint32_t i = 0; i < n_; ++i) total += copies_of(i);
    threads.reserve(total);  // before any starts: a thread is never left unjoined
    std::size_t next_cpu = 0;
    try {
      for (std::uint32_t i = 0; i < n_; ++i) {
        const std::size_t copies = copies_of(i);
        // Relaxed: stored before the stage's threads start (thread creation
        // orders it before them); they count down with acq_rel below.
        inputs_[i].running.store(copies, std::memory_order_relaxed);
        for (std::size_t c = 0; c < copies; ++c) {
          const int cpu = cpus.empty() ? -1 : cpus[next_cpu++ % cpus.size()];
          auto body = [this, cpu, i] {
            const bool pinned = cpu >= 0 && pin_current_thread(cpu);  // refused: it runs unpinned
            spinner_scope spinning(pinned ? cpu : -1);
            stage_thread(i);
          };
          if (MOTE_UNLIKELY(start_stage_thread != nullptr)) {
            threads.push_back(start_stage_thread(i, body));  // room reserved: cannot throw
          } else {
            threads.emplace_back(body);
          }
        }
      }
    } catch (...) {
      // A thread could not start: a failure like a stage's. The threads that
      // did start stop as they do after one, each channel closed by its own
      // producer: the first stage stops (fail() wakes it), and the end of
      // the stream flows down through the stages whose threads all started.
      // The stage that lacks threads and those after it have fewer
      // consumers or none, but every channel holds all the slots, so no push
      // blocks; what stays in them is destroyed with the slots. Nothing is
      // closed from here: a pusher would find a channel closed under it (a
      // thread's drop into free_ would throw), and an SPSC channel is the
      // producer's to close.
      fail(std::current_exception());
    }
    for (std::thread& t : threads) t.join();
    // The first failure: a stage's that came before a start's is the one.
    if (error_) std::rethrow_exception(error_);
  }

 private:
  bool serial(std::uint32_t i) const noexcept { return modes_[i] != stage_mode::parallel; }
  // Stage i's threads: one for a serial stage, one per worker for a parallel one.
  std::size_t copies_of(std::uint32_t i) const noexcept { return serial(i) ? 1 : std::max(1U, rt_.num_workers()); }

  // Slot id is done with stage i - 1: to stage i's threads.
  void deliver(std::uint32_t i, std::uint32_t id) {
    if (i == n_) {
      free_->push(id);  // never full: it holds every slot number
    } else {
      inputs_[i].ch->push(id);
    }
  }

  // Runs item id through stage i (i >= 1) and passes it on; false when the
  // stage (or the hand-over) threw: then this item, the one that failed, is
  // dropped, and no other.
  bool pass(std::uint32_t i, std::uint32_t id) {
    try {
      items_.run(i, id);
      deliver(i + 1, id);
      return true;
    } catch (...) {
      fail(std::current_exception());
      drop(id);
      return false;
    }
  }

  // Item id has come to serial_in_order stage i (i >= 1): it waits for its
  // turn, or runs, followed by the items that waited for theirs. After a
  // failure here no turn comes again: the items still waiting are dropped at
  // the end of the stream.
  void in_order(std::uint32_t i, std::uint32_t id) {
    input& in = inputs_[i];
    const std::uint64_t seq = items_.seq(id);
    if (seq != in.next_seq) {
      in.waiting[seq % max_] = id;  // at most max_ in flight: no two share a place
      return;
    }
    while (pass(i, id)) {
      ++in.next_seq;
      std::uint32_t& next = in.waiting[in.next_seq % max_];
      if (next == kNone) return;
      id = std::exchange(next, kNone);
    }
  }

  void stage_thread(std::uint32_t i) {
    if (i == 0) {
      try {
        while (!failed()) {
          std::optional<std::uint32_t> id = free_->pop();
          if (!id || *id == kNone) break;  // kNone: a failure woke us
          if (!items_.produce(*id)) {
            free_->push(*id);
            break;
          }
          deliver(1, *id);
        }
      } catch (...) {
        fail(std::current_exception());
      }
    } else {
      input& in = inputs_[i];
      while (std::optional<std::uint32_t> id = in.ch->pop()) {
        if (failed()) {
          drop(*id);
        } else if (modes_[i] == stage_mode::serial_in_order) {
          in_order(i, *id);
        } else {
          pass(i, *id);
        }
      }
      // Closed and drained. Items still waiting for their turn were
      // overtaken by a failure: drop them.
      for (std::uint32_t& w : in.waiting) {
        if (w != kNone) drop(std::exchange(w, kNone));
      }
    }
    // The last thread of a stage ends the stream of the next. Acq_rel: the
    // last one to count down sees everything the stage's other threads did
    // (their releases here) before it closes the next channel.
    if (inputs_[i].running.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (i + 1 < n_) inputs_[i + 1].ch->close();
    }
  }

  void drop(std::uint32_t id) {
    items_.drop(id);
    free_->push(id);
  }

  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> g(error_lock_);
    if (!error_) error_ = std::move(e);
    // Relaxed: see failed_.
    if (!failed_.exchange(true, std::memory_order_relaxed)) {
      // The first stage may be waiting for a slot that a stage holds back
      // for its turn: wake it so that it stops (room for one more: the free
      // channel holds max_in_flight + 1).
      free_->try_push(kNone);
    }
  }

  // Relaxed: a hint that stops the first stage early and makes stage threads
  // drop items; the exception travels under error_lock_, and nothing is read
  // on the strength of the flag, so seeing it late only makes a few more
  // items.
  bool failed() const noexcept { return failed_.load(std::memory_order_relaxed); }

  item_slots& items_;
  const std::vector<stage_mode> modes_;
  std::uint32_t n_;
  std::uint32_t max_;
  runtime& rt_;
  // Each stage's input (the first stage's: its count of threads alone), and
  // the free slots.
  std::unique_ptr<input[]> inputs_;
  std::unique_ptr<channel<std::uint32_t>> free_;
  std::atomic<bool> failed_{false};
  std::mutex error_lock_;
  std::exception_ptr error_;
};

}  // namespace

void run_on_threads(item_slots& items, std::uint32_t max_in_flight, runtime& rt) {
  thread_pipeline(items, max_in_flight, rt).run();
}

}  // namespace mote::detail::pipeline
