// The trace registry and the Chrome trace-event writer. docs/tracing.md has
// the format, the snapshot argument and the costs.
#include <cxxabi.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "mote/error.hpp"
#include "mote/task_group.hpp"
#include "trace/trace_impl.hpp"

namespace mote {
namespace detail {

namespace {

constexpr std::uint64_t kDefaultEvents = 1u << 20;

struct registry {
  std::mutex mutex;
  std::string path;           // MOTE_TRACE, with %r replaced by the rank when known
  std::string path_template;  // MOTE_TRACE as given
  int rank = -1;              // the file's rank (trace::set_file_rank), -1 unknown
  std::uint64_t capacity = kDefaultEvents;
  std::vector<std::unique_ptr<trace_buffer>> buffers;
  int next_outside = 0;
  std::uint64_t start_ticks = 0;
  std::int64_t start_ns = 0;
};

// 0 unread, 1 off, 2 on, 3 bad configuration (error holds the message).
std::atomic<int> trace_status{0};
std::atomic<int> runtime_ids{0};
std::string config_message;
std::once_flag config_once;

registry& reg() {
  // Never destroyed: threads and the exit handler may still use it while
  // static objects are being torn down.
  static registry* r = new registry;
  return *r;
}

void write_at_exit() noexcept {
  try {
    trace::flush();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mote: MOTE_TRACE: %s\n", e.what());
  }
}

// MOTE_TRACE with every %r replaced by the rank (or left as it is while the
// rank is unknown), and %% by %.
std::string path_for_rank(const std::string& tmpl, int rank) {
  std::string out;
  for (std::size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '%' && i + 1 < tmpl.size() && tmpl[i + 1] == 'r' && rank >= 0) {
      out += std::to_string(rank);
      ++i;
    } else {
      out += tmpl[i];
    }
  }
  return out;
}

// The MPI launchers' rank variables, read when MOTE_TRACE has %r and no rank
// was set yet: mpirun (Open MPI), PMI and PMIx launchers (MPICH, Slurm).
int rank_from_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    char* end = nullptr;
    const long k = std::strtol(v, &end, 10);
    if (*end == '\0' && k >= 0 && k < (1L << 30)) return static_cast<int>(k);
  }
  return -1;
}

void read_config() {
  const char* path = std::getenv("MOTE_TRACE");
  if (path == nullptr || *path == '\0') {
    trace_status.store(1, std::memory_order_release);
    return;
  }
  registry& r = reg();
  r.path_template = path;
  if (r.rank < 0 && r.path_template.find("%r") != std::string::npos) r.rank = rank_from_launcher();
  r.path = path_for_rank(r.path_template, r.rank);
  path = r.path.c_str();
  if (const char* n = std::getenv("MOTE_TRACE_EVENTS"); n != nullptr && *n != '\0') {
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(n, &end, 10);
    if (errno != 0 || end == n || *end != '\0' || v < 1024 || v > (1ull << 28) || *n == '-') {
      config_message = std::string("MOTE_TRACE_EVENTS=\"") + n +
                       "\" is not a number of events from 1024 to 268435456";
      trace_status.store(3, std::memory_order_release);
      return;
    }
    std::uint64_t cap = 1;
    while (cap < v) cap <<= 1;
    r.capacity = cap;
  }
  // Create the file now, so that a path that cannot be written is reported
  // when the first runtime starts rather than lost at exit.
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    config_message = std::string("MOTE_TRACE=\"") + path + "\": cannot write the file: " +
                     std::strerror(errno);
    trace_status.store(3, std::memory_order_release);
    return;
  }
  std::fputs("{\"traceEvents\": []}\n", f);
  std::fclose(f);
  r.start_ticks = trace_clock();
  r.start_ns = now_ns();
  std::atexit(write_at_exit);
  // Release: the registry's fields above are complete for every thread that
  // sees status 2 with an acquire load.
  trace_status.store(2, std::memory_order_release);
}

void ensure_config() { std::call_once(config_once, read_config); }

// ---- The writer ------------------------------------------------------------

void append_escaped(std::string& out, const char* s) {
  // JSON string contents: quotes, backslashes and control characters escaped;
  // bytes that are not valid UTF-8 become U+FFFD, so the file always parses.
  const auto* p = reinterpret_cast<const unsigned char*>(s);
  while (*p != 0) {
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++p;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++p;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++p;
    } else {
      int len = 0;
      if ((c & 0xE0) == 0xC0 && c >= 0xC2) {
        len = 2;
      } else if ((c & 0xF0) == 0xE0) {
        len = 3;
      } else if ((c & 0xF8) == 0xF0 && c <= 0xF4) {
        len = 4;
      }
      bool ok = len != 0;
      for (int k = 1; ok && k < len; ++k) ok = (p[k] & 0xC0) == 0x80;
      if (ok) {
        out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(len));
        p += len;
      } else {
        out += "\\ufffd";
        ++p;
      }
    }
  }
}

// A readable name for a task function: the demangled symbol when the dynamic
// symbol table has it (trimmed to the callable's type), else its address.
class namer {
 public:
  const std::string& name_of(const void* fn) {
    auto it = cache_.find(fn);
    if (it != cache_.end()) return it->second;
    std::string name;
    Dl_info info{};
    if (dladdr(fn, &info) != 0 && info.dli_sname != nullptr && info.dli_saddr == fn) {
      int status = 0;
      char* d = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
      name = (status == 0 && d != nullptr) ? trim(d) : info.dli_sname;
      std::free(d);
    } else {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%p", fn);
      name = buf;
    }
    return cache_.emplace(fn, std::move(name)).first->second;
  }

 private:
  // "mote::detail::join_task<T>::run_stolen(...)" -> "T", likewise group_task.
  static std::string trim(std::string s) {
    for (const char* prefix : {"mote::detail::join_task<", "mote::detail::group_task<"}) {
      const std::size_t n = std::strlen(prefix);
      if (s.compare(0, n, prefix) == 0) {
        const std::size_t end = s.rfind(">::");
        if (end != std::string::npos && end > n) return s.substr(n, end - n);
      }
    }
    return s;
  }
  std::unordered_map<const void*, std::string> cache_;
};

const char* wait_name(std::uint64_t what) {
  switch (what) {
    case 0: return "join wait";
    case 1: return "group wait";
    case 2: return "run wait";
    case 3: return "assistant wait";
    default: return "mpi wait";
  }
}

struct open_span {
  trace_kind kind;
  std::uint64_t start;
  std::uint64_t aux;
  const void* what;
  const char* name;  // set by task_name records
};

class writer {
 public:
  writer(std::FILE* f, std::uint64_t t0, double ns_per_tick, int pid)
      : f_(f), t0_(t0), us_per_tick_(ns_per_tick / 1000.0), pid_(pid) {}

  void thread(const trace_buffer& b) {
    std::string line = "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + std::to_string(pid_) +
                       ",\"tid\":" + std::to_string(b.id()) + ",\"args\":{\"name\":\"";
    append_escaped(line, b.label());
    line += "\"}}";
    emit(line);
    emit("{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + std::to_string(pid_) +
         ",\"tid\":" + std::to_string(b.id()) + ",\"args\":{\"sort_index\":" +
         std::to_string(b.id()) + "}}");
  }

  // Turns one buffer's records into events: begin/end pairs become complete
  // ("X") events; ends whose begin was lost to wrapping are skipped; spans
  // still open at the end are closed at the last record, marked unfinished.
  void records(const trace_buffer& b, const std::vector<std::uint64_t>& words) {
    std::vector<open_span> stack;
    std::uint64_t last = 0;
    const std::size_t n = words.size() / trace_buffer::kWords;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t time = words[i * 3];
      const auto kind = static_cast<trace_kind>(words[i * 3 + 1] & 0xff);
      const std::uint64_t aux = words[i * 3 + 1] >> 8;
      const auto* what = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(words[i * 3 + 2]));
      last = std::max(last, time);
      switch (kind) {
        case trace_kind::task_begin:
        case trace_kind::park_begin:
        case trace_kind::wait_begin:
        case trace_kind::barrier_begin:
          stack.push_back({kind, time, aux, what, nullptr});
          break;
        case trace_kind::task_name:
          if (!stack.empty() && stack.back().kind == trace_kind::task_begin) {
            stack.back().name = static_cast<const char*>(what);
          }
          break;
        case trace_kind::task_end:
        case trace_kind::park_end:
        case trace_kind::wait_end:
        case trace_kind::barrier_end: {
          const auto begin = static_cast<trace_kind>(static_cast<int>(kind) - 1);
          if (stack.empty() || stack.back().kind != begin) break;  // begin lost to wrapping
          span(b, stack.back(), time, false);
          stack.pop_back();
          break;
        }
        case trace_kind::spawn: {
          std::string line = instant(b, "spawn", "spawn", time);
          line += ",\"args\":{\"task\":\"";
          append_escaped(line, aux != 0 ? static_cast<const char*>(what) : names_.name_of(what).c_str());
          line += "\"}}";
          emit(line);
          break;
        }
        case trace_kind::steal:
        case trace_kind::failed_steal:
          emit(instant(b, kind == trace_kind::steal ? "steal" : "failed steal", "steal", time) +
               ",\"args\":{\"victim\":" + std::to_string(aux) + "}}");
          break;
        case trace_kind::mesh_redirect:
          emit(instant(b, "redirect", "mesh", time) + ",\"args\":{\"to\":" + std::to_string(aux) + "}}");
          break;
        case trace_kind::mesh_migrate:
          emit(instant(b, "migrate", "mesh", time) + ",\"args\":{\"tasks\":" + std::to_string(aux >> 16) +
               ",\"peer\":" + std::to_string(aux & 0xffff) + "}}");
          break;
        case trace_kind::task_fn:
          if (!stack.empty() && stack.back().kind == trace_kind::task_begin) {
            stack.back().name = names_.name_of(what).c_str();
          }
          break;
        case trace_kind::channel: {
          static const char* const queues[] = {"BatchQueue", "MPMC", "switched to MPMC"};
          char ptr[32];
          std::snprintf(ptr, sizeof ptr, "%p", what);
          emit(instant(b, "channel", "channel", time) + ",\"args\":{\"queue\":\"" + queues[aux % 3] +
               "\",\"channel\":\"" + ptr + "\"}}");
          break;
        }
        case trace_kind::inlined: {
          std::string line = instant(b, aux == 0 ? "inlined submit" : "inlined join", "adaptive", time);
          line += ",\"args\":{\"site\":\"";
          append_escaped(line, static_cast<const char*>(what));
          line += "\"}}";
          emit(line);
          break;
        }
        case trace_kind::mpi_iwait:
        case trace_kind::mpi_done:
          emit(instant(b, kind == trace_kind::mpi_iwait ? "mpi iwait" : "mpi done", "mpi", time) +
               ",\"args\":{\"requests\":" + std::to_string(aux) + "}}");
          break;
        case trace_kind::flow_out:
        case trace_kind::flow_in: {
          // Chrome trace-event flows: "s" inside the releasing task's slice,
          // "f" bound to the enclosing slice of the task it readied.
          std::string line = std::string("{\"ph\":\"") + (kind == trace_kind::flow_out ? "s" : "f") +
                             "\",\"cat\":\"dependency\",\"name\":\"dependency\",\"id\":" +
                             std::to_string(aux) + ",\"pid\":" + std::to_string(pid_) +
                             ",\"tid\":" + std::to_string(b.id()) + ",\"ts\":" + us(time);
          if (kind == trace_kind::flow_in) line += ",\"bp\":\"e\"";
          line += "}";
          emit(line);
          break;
        }
      }
    }
    while (!stack.empty()) {
      span(b, stack.back(), last, true);
      stack.pop_back();
    }
  }

  void notice(const std::string& text, std::uint64_t time) {
    std::string line = "{\"ph\":\"i\",\"s\":\"g\",\"cat\":\"mote\",\"name\":\"";
    append_escaped(line, text.c_str());
    line += "\",\"pid\":" + std::to_string(pid_) + ",\"tid\":0,\"ts\":" + us(time) + "}";
    emit(line);
  }

  void emit(const std::string& line) {
    if (!first_) std::fputs(",\n", f_);
    first_ = false;
    std::fputs(line.c_str(), f_);
  }

 private:
  std::string us(std::uint64_t time) const {
    const double v = time >= t0_ ? static_cast<double>(time - t0_) * us_per_tick_ : 0.0;
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.3f", v);
    return buf;
  }

  std::string instant(const trace_buffer& b, const char* name, const char* cat, std::uint64_t time) {
    return std::string("{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"") + cat + "\",\"name\":\"" + name +
           "\",\"pid\":" + std::to_string(pid_) + ",\"tid\":" + std::to_string(b.id()) +
           ",\"ts\":" + us(time);
  }

  void span(const trace_buffer& b, const open_span& s, std::uint64_t end, bool unfinished) {
    std::string line = "{\"ph\":\"X\",\"cat\":\"";
    switch (s.kind) {
      case trace_kind::task_begin: {
        line += "task\",\"name\":\"";
        const char* name = s.name != nullptr ? s.name
                           : s.aux != 0      ? static_cast<const char*>(s.what)
                                             : names_.name_of(s.what).c_str();
        append_escaped(line, name);
        break;
      }
      case trace_kind::park_begin: line += "idle\",\"name\":\"park"; break;
      case trace_kind::wait_begin: line += "wait\",\"name\":\""; line += wait_name(s.aux); break;
      default: line += "barrier\",\"name\":\"barrier"; break;
    }
    const double dur = end >= s.start ? static_cast<double>(end - s.start) * us_per_tick_ : 0.0;
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.3f", dur);
    line += "\",\"pid\":" + std::to_string(pid_) + ",\"tid\":" + std::to_string(b.id()) +
            ",\"ts\":" + us(s.start) + ",\"dur\":" + buf;
    if (unfinished) line += ",\"args\":{\"unfinished\":true}";
    line += "}";
    emit(line);
  }

  std::FILE* f_;
  std::uint64_t t0_;
  double us_per_tick_;
  int pid_;
  bool first_ = true;
  namer names_;
};

}  // namespace

// ---- trace_buffer ------------------------------------------------------------

trace_buffer::trace_buffer(std::uint64_t capacity, int id, std::string_view label)
    : mask_(capacity - 1), id_(id) {
  words_ = static_cast<std::uint64_t*>(std::calloc(capacity * kWords, sizeof(std::uint64_t)));
  if (words_ == nullptr) throw std::bad_alloc();
  const std::size_t n = std::min(label.size(), sizeof(label_) - 1);
  std::memcpy(label_, label.data(), n);
  label_[n] = '\0';
}

trace_buffer::~trace_buffer() { std::free(words_); }

std::uint64_t trace_buffer::snapshot(std::vector<std::uint64_t>& out) const {
  const std::uint64_t cap = mask_ + 1;
  // Acquire: pairs with put()'s release store; records below p1 are complete.
  const std::uint64_t p1 = published_.load(std::memory_order_acquire);
  const std::uint64_t lo = p1 > cap ? p1 - cap : 0;
  std::vector<std::uint64_t> copy((p1 - lo) * kWords);
  for (std::uint64_t j = lo; j < p1; ++j) {
    std::uint64_t* r = words_ + (j & mask_) * kWords;
    for (std::size_t k = 0; k < kWords; ++k) {
      copy[(j - lo) * kWords + k] = std::atomic_ref<std::uint64_t>(r[k]).load(std::memory_order_acquire);
    }
  }
  // Then the count again: if any word copied above came from a record written
  // after p1 (one that overwrote slot j with record j + cap), our acquire load
  // of it synchronized with put()'s release store, which follows the store of
  // published_ = j + cap; so p2 >= j + cap. Hence the records j > p2 - cap
  // were not overwritten while we copied; the older ones may be torn.
  const std::uint64_t p2 = published_.load(std::memory_order_relaxed);
  const std::uint64_t safe = p2 >= cap ? p2 - cap + 1 : 0;
  const std::uint64_t first = std::max(lo, safe);
  if (first < p1) {
    out.insert(out.end(), copy.begin() + static_cast<std::ptrdiff_t>((first - lo) * kWords), copy.end());
  }
  return first;
}

// ---- Registry ------------------------------------------------------------------

void trace_check_config() {
  ensure_config();
  if (trace_status.load(std::memory_order_acquire) == 3) throw config_error(config_message);
}

bool trace_on() noexcept { return trace_status.load(std::memory_order_acquire) == 2; }

trace_buffer* trace_new_buffer(std::string_view label) {
  if (!trace_on()) return nullptr;
  registry& r = reg();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.buffers.push_back(std::make_unique<trace_buffer>(r.capacity, static_cast<int>(r.buffers.size()), label));
  return r.buffers.back().get();
}

int trace_next_runtime_id() noexcept { return runtime_ids.fetch_add(1, std::memory_order_relaxed); }

void trace_after_fork_in_child() noexcept {
  if (trace_status.load(std::memory_order_relaxed) == 2) trace_status.store(1, std::memory_order_relaxed);
}

trace_buffer* outside_trace_buffer() noexcept {
  if (!trace_on()) return nullptr;
  static thread_local trace_buffer* mine = nullptr;
  if (mine == nullptr) {
    try {
      registry& r = reg();
      int k = 0;
      {
        std::lock_guard<std::mutex> lock(r.mutex);
        k = r.next_outside++;
      }
      mine = trace_new_buffer("thread " + std::to_string(k));
    } catch (...) {
      return nullptr;  // no memory for a buffer: this thread goes untraced
    }
  }
  return mine;
}

void note_outside_spawn(const void* what, bool named) noexcept {
  if (trace_buffer* b = outside_trace_buffer()) b->put(trace_kind::spawn, named ? 1 : 0, what);
}

}  // namespace detail

namespace trace {

bool enabled() noexcept {
  // Once the configuration has been read, its status alone (call_once would
  // cost a data-flow spawn off the workers some 80 instructions a call).
  // Acquire: pairs with read_config's release stores.
  const int status = detail::trace_status.load(std::memory_order_acquire);
  if (MOTE_LIKELY(status != 0)) return status == 2;
  try {
    detail::ensure_config();
  } catch (...) {
    return false;
  }
  return detail::trace_on();
}

void flush() {
  using namespace detail;
  if (!enabled()) return;
  registry& r = reg();
  std::lock_guard<std::mutex> lock(r.mutex);

  // Ticks to time: calibrated over the whole trace so far, at least 20 ms.
  while (now_ns() - r.start_ns < 20'000'000) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::uint64_t ticks = trace_clock();
  const std::int64_t ns = now_ns();
  const double ns_per_tick =
      ticks > r.start_ticks ? static_cast<double>(ns - r.start_ns) / static_cast<double>(ticks - r.start_ticks)
                            : 1.0;

  // Write beside the target and rename over it: the file is never half written.
  const std::string tmp = r.path + ".tmp" + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) {
    throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  }
  std::fputs("{\"traceEvents\": [\n", f);
  writer out(f, r.start_ticks, ns_per_tick, static_cast<int>(::getpid()));
  std::uint64_t lost_total = 0;
  bool wrapped = false;
  std::vector<std::uint64_t> words;
  for (const auto& b : r.buffers) {
    words.clear();
    const std::uint64_t first = b->snapshot(words);
    out.thread(*b);
    out.records(*b, words);
    if (first > 0) {
      wrapped = true;
      lost_total += first;
      out.notice(std::string("trace buffer of ") + b->label() + " wrapped: " + std::to_string(first) +
                     " events lost (MOTE_TRACE_EVENTS raises the limit)",
                 words.empty() ? r.start_ticks : words[0]);
    }
  }
  std::fprintf(f,
               "\n],\n\"displayTimeUnit\": \"ns\",\n\"otherData\": {\"producer\": \"mote\", "
               "\"threads\": %zu, \"events_lost\": %llu, \"wrapped\": %s}}\n",
               r.buffers.size(), static_cast<unsigned long long>(lost_total), wrapped ? "true" : "false");
  const bool write_failed = std::ferror(f) != 0;
  if (std::fclose(f) != 0 || write_failed) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot write " + tmp + ": " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), r.path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + r.path + ": " + why);
  }
}

void set_file_rank(int rank) {
  using namespace detail;
  if (rank < 0) return;
  // The configuration first (once per process): its file may have been
  // created under the template's name, which this replaces.
  if (!enabled()) return;
  registry& r = reg();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.rank = rank;
  const std::string path = path_for_rank(r.path_template, rank);
  if (path == r.path) return;
  // The file read_config() created under the old name goes; the new one is
  // created now, so that a path that cannot be written shows at once.
  std::remove(r.path.c_str());
  r.path = path;
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("MOTE_TRACE: cannot write " + path + ": " + std::strerror(errno));
  std::fputs("{\"traceEvents\": []}\n", f);
  std::fclose(f);
}

}  // namespace trace
}  // namespace mote
