// What channels choose, for MOTE_STATS and the trace: every channel reports
// the queue it starts on, and a switch to the MPMC queue at run time.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mote/detail/queue_wait.hpp"
#include "mote/detail/worker.hpp"
#include "mote/trace.hpp"

namespace mote::detail {

namespace {

std::atomic<unsigned long long> channel_counts[3];

void print_channel_stats() {
  const unsigned long long batch = channel_counts[0].load(std::memory_order_relaxed);
  const unsigned long long mpmc = channel_counts[1].load(std::memory_order_relaxed);
  const unsigned long long switched = channel_counts[2].load(std::memory_order_relaxed);
  std::fprintf(stderr,
               "mote: channels (MOTE_STATS): %llu on BatchQueue, %llu on the MPMC queue, "
               "%llu switched to MPMC at run time\n",
               batch, mpmc, switched);
}

bool stats_wanted() noexcept {
  const char* v = std::getenv("MOTE_STATS");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

}  // namespace

void note_channel(const void* ch, unsigned queue) noexcept {
  // Printed at exit, once the first channel exists.
  static const bool registered = stats_wanted() && std::atexit(print_channel_stats) == 0;
  (void)registered;
  // Relaxed: counters read once, at exit.
  channel_counts[queue].fetch_add(1, std::memory_order_relaxed);
  // Tracing is configured by the first runtime or this first look; a
  // program of channels and threads alone is traced too.
  static const bool traced = trace::enabled();
  if (!traced) return;
  trace_buffer* b = current_worker != nullptr ? current_worker->trace() : outside_trace_buffer();
  if (b != nullptr) b->put(trace_kind::channel, queue, ch);
}

}  // namespace mote::detail
