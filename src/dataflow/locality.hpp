// The end of a locality window (src/dataflow/dataflow.cpp, "Locality"):
// what the window measured and which mode the next one runs, apart from the
// clock and the kinds' memory, so that a test can drive it with made-up
// windows (tests/test_dataflow.cpp, DataflowWindows).
#pragma once

#include <algorithm>
#include <cstdint>

#include "mote/detail/dataflow_records.hpp"

namespace mote::detail::df_windows {

constexpr std::uint64_t kWindow = 4096;
// A probe of the slower mode comes after kProbeWindows windows at first;
// each probe that confirms the faster one doubles that, up to kMaxProbeWindows
// (a probe costs two windows in the slower mode, the first one settling,
// and a scope whose modes differ threefold lost a third of its time to one
// probe in sixteen); a probe that changes the decision starts it again.
constexpr std::uint32_t kProbeWindows = 16;
constexpr std::uint32_t kMaxProbeWindows = 256;

// The window that began at g.window_start ends at `now`, with `pending`
// tasks of the scope not finished; `body` is the bodies' moving average and
// `try_keep_below` the length under which keep is worth a window (ticks).
// Sets g.keep_local for the next window and starts it at `now`. Returns
// whether the window was measured (its costs are then worth remembering).
// The owner's alone: g's plain fields are its own; keep_local is relaxed (a
// hint the workers read when they ready a task).
inline bool end_window(df_grain& g, std::uint64_t now, std::uint32_t pending, std::uint32_t body,
                       std::uint64_t try_keep_below) noexcept {
  const auto restart = [&] {
    g.window_pending = pending;
    g.window_start = now;
  };
  const int mode = g.keep_local.load(std::memory_order_relaxed) ? 1 : 0;
  if (g.settling) {
    // The window after a change of mode carried the last mode's tasks (keep
    // after share: the owner's pending tasks build up to the throttle, which
    // reads as a window that finished almost nothing): measure the next one.
    g.settling = false;
    restart();
    return false;
  }
  // Ticks per window's worth of tasks finished: a mode that leaves its
  // tasks pending (for the wait to run) has not saved their time.
  const std::int64_t grown = static_cast<std::int64_t>(pending) - static_cast<std::int64_t>(g.window_pending);
  if (grown > static_cast<std::int64_t>(kWindow / 2) && !g.filling) {
    // More than half the window's tasks are still pending: the spawner was
    // filling its throttle (a scope's first window, which starts with
    // nothing pending), and its spawns' ticks scaled by the few that
    // finished read up to 64 times a steady window's (one such window
    // held a scope in the slower mode for a whole run). Not a measurement,
    // once: a scope whose pending tasks never stop growing (throttle off)
    // is measured every other window.
    g.filling = true;
    restart();
    return false;
  }
  g.filling = false;
  const std::int64_t finished = std::max<std::int64_t>(static_cast<std::int64_t>(kWindow) - grown, 64);
  const std::uint64_t ticks = (now - g.window_start) * kWindow / static_cast<std::uint64_t>(finished);
  // A probe's window replaces what its mode measured before: that figure is
  // probe_every windows old, and averaged in, one bad window (a preemption,
  // a first window) outweighed the probes that followed it.
  g.cost[mode] = g.cost[mode] == 0 || g.probing ? ticks : (3 * g.cost[mode] + ticks) / 4;
  int next;
  if (g.cost[1 - mode] == 0) {
    // The other mode's first window; keep only for bodies shorter than
    // try_keep_below (a window of keep runs longer ones one by one).
    next = mode == 0 && (body == 0 || body >= try_keep_below) ? 0 : 1 - mode;
  } else if (g.probing) {
    // The probe's window is over: the faster mode again. A probe that
    // confirmed it doubles the wait for the next one; one that changed it
    // starts the count again.
    g.probing = false;
    next = g.cost[1] < g.cost[0] ? 1 : 0;
    g.probe_every = next != mode ? std::min(2 * g.probe_every, kMaxProbeWindows) : kProbeWindows;
    g.until_probe = g.probe_every;
  } else if (--g.until_probe == 0) {
    g.probing = true;
    next = g.cost[0] <= g.cost[1] ? 1 : 0;  // the slower mode, now and then
  } else {
    next = g.cost[1] < g.cost[0] ? 1 : 0;
  }
  g.keep_local.store(next == 1, std::memory_order_relaxed);
  g.settling = next != mode;
  restart();
  return true;
}

}  // namespace mote::detail::df_windows
