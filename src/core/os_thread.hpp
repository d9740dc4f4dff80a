// A joinable thread whose stack size can be chosen (std::thread cannot):
// the runtime's workers, with runtime_options::stack_size.
#pragma once

#include <pthread.h>

#include <cerrno>
#include <cstddef>
#include <functional>
#include <memory>
#include <system_error>
#include <utility>

namespace mote::detail {

class os_thread {
 public:
  // Starts f on a new thread with a stack of stack_bytes (0: the system's
  // default). Throws std::system_error when the thread cannot start.
  os_thread(std::size_t stack_bytes, std::function<void()> f) {
    auto body = std::make_unique<std::function<void()>>(std::move(f));
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (stack_bytes != 0) {
      const int e = pthread_attr_setstacksize(&attr, stack_bytes);
      if (e != 0) {
        pthread_attr_destroy(&attr);
        throw std::system_error(e, std::generic_category(), "mote: worker stack size");
      }
    }
    const int e = pthread_create(&id_, &attr, &os_thread::start, body.get());
    pthread_attr_destroy(&attr);
    if (e != 0) throw std::system_error(e, std::generic_category(), "mote: starting a worker thread");
    (void)body.release();  // the thread owns it now
    joinable_ = true;
  }
  os_thread(os_thread&& o) noexcept : id_(o.id_), joinable_(std::exchange(o.joinable_, false)) {}
  os_thread& operator=(os_thread&&) = delete;
  os_thread(const os_thread&) = delete;
  ~os_thread() = default;  // a thread never joined is left running (a child after fork())

  // The thread's handle (pthread_setaffinity_np); valid until join().
  pthread_t native() const noexcept { return id_; }

  void join() noexcept {
    if (joinable_) pthread_join(id_, nullptr);
    joinable_ = false;
  }

 private:
  static void* start(void* p) {
    std::unique_ptr<std::function<void()>> body(static_cast<std::function<void()>*>(p));
    (*body)();
    return nullptr;
  }

  pthread_t id_{};
  bool joinable_ = false;
};

}  // namespace mote::detail
