// The slow paths of the ticket locks (include/mote/sync/): waiting for a
// turn on the runtime's wait policy, waking sleepers, and misuse reports.
#include <thread>

#include "mote/error.hpp"
#include "mote/sync/delegation_lock.hpp"
#include "mote/sync/ticket_lock.hpp"
#include "wait/idle.hpp"
#include "wait/event_count.hpp"

namespace mote::detail {

namespace {
// How long a waiter spins before it sleeps: the runtime's default spin
// window. A critical section is short; a holder that lost its CPU is not.
constexpr std::int64_t kLockSpinNs = 100'000;
}  // namespace

void ticket_wait(ticket_slot& s, std::uint64_t ticket) noexcept {
  // A look is one load of a line that the holder's grant will invalidate.
  idle_wait idle(kLockSpinNs, 2);
  for (;;) {
    // Acquire: pairs with grant_next()'s store; see ticket_queue::wait_turn.
    if (s.grant.load(std::memory_order_acquire) >= ticket) return;
    if (idle.spin()) continue;
    // The event count (wait/event_count.hpp), with `sleepers` as its waiter
    // count and `grant` as its epoch: announce, then look again, against
    // grant_next()'s seq_cst store of `grant` and seq_cst load of `sleepers`.
    // Either its load sees us and it wakes us, or our load sees its grant
    // and we do not sleep. The sleep compares the low half of `grant`, so a
    // grant between our load and the sleep makes it return at once.
    event_count::announce(s.sleepers);
    // Acquire: as above.
    const std::uint64_t seen = s.grant.load(std::memory_order_acquire);
    if (seen < ticket) event_word::commit(futex_low_half(&s.grant), static_cast<std::uint32_t>(seen));
    event_count::cancel_wait(s.sleepers);
    // Woken by a grant to another ticket of this slot (more waiters than
    // slots), or spuriously: look again; the spin window is spent, so the
    // next miss sleeps at once.
  }
}

void ticket_wake(ticket_slot& s) noexcept {
  // Every sleeper of the slot: with more waiters than slots, the one whose
  // turn it is may share it with others.
  event_word::notify(futex_low_half(&s.grant), -1);
}

std::size_t default_lock_slots() noexcept {
  const unsigned cpus = std::thread::hardware_concurrency();
  return lock_slots(cpus == 0 ? 1 : cpus);
}

void delegation_misuse(const char* what) { throw usage_error(what); }

}  // namespace mote::detail
