// scheduler_policy::work_stealing: a ready task goes on the pool of the
// worker that readied it, where it and thieves find it (the stealing itself
// is the core's, as join needs it under every policy); from any other thread
// it goes through the injection queue. docs/scheduler.md.
#include "mote/runtime.hpp"
#include "core/runtime_impl.hpp"
#include "scheduler/scheduler.hpp"

namespace mote::detail {

namespace {

class work_stealing final : public scheduler {
 public:
  explicit work_stealing(runtime_impl& rt) noexcept : rt_(rt) {}

  bool takes_spawns() const noexcept override { return false; }

  void schedule(queued_task* t, worker* w) override {
    if (w != nullptr && &w->runtime() == &rt_) {
      // A task readied by a finishing task runs where its data is warm, and
      // thieves may take it. The pool's push notifies when it shares.
      if (MOTE_LIKELY(w->pool().push(t))) return;
      rt_.inject(t);  // the pool is full: the injection queue takes it (its mutex, rarely)
      return;
    }
    rt_.submit(t);
  }

  // The pools are the core's to look at (help_once, stealing): nothing else.
  task* take(worker&) noexcept override { return nullptr; }
  bool visible(worker&) noexcept override { return false; }

 private:
  runtime_impl& rt_;
};

}  // namespace

std::unique_ptr<scheduler> make_work_stealing(runtime_impl& rt, const resolved_config&) {
  return std::make_unique<work_stealing>(rt);
}

}  // namespace mote::detail
