// mote::stream_graph's threads and its first error; the typed loop of each
// task is in include/mote/stream_graph.hpp.
#include "mote/stream_graph.hpp"

#include "mote/detail/queue_wait.hpp"
#include "mote/topology.hpp"

namespace mote {

stream_graph::stream_graph(runtime* rt)
    : cpus_((rt != nullptr ? *rt : runtime::default_runtime()).worker_cpus()) {}

stream_graph::~stream_graph() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void stream_graph::wait() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void stream_graph::launch(std::unique_ptr<body> b) {
  const int cpu = cpus_.empty() ? -1 : cpus_[threads_.size() % cpus_.size()];
  threads_.emplace_back([b = std::move(b), cpu] {
    const bool pinned = cpu >= 0 && pin_current_thread(cpu);  // refused: it runs unpinned
    detail::spinner_scope spinning(pinned ? cpu : -1);
    b->run();
  });
}

void stream_graph::record(std::exception_ptr e) {
  std::lock_guard<std::mutex> g(error_lock_);
  if (!error_) error_ = std::move(e);
  // Relaxed: see failed_ (the exception goes through error_lock_).
  failed_.store(true, std::memory_order_relaxed);
}

}  // namespace mote
