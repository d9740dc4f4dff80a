// The trace registry's side that the runtime uses (src/trace/trace.cpp).
#pragma once

#include <string_view>

#include "mote/trace.hpp"

namespace mote::detail {

// Reads MOTE_TRACE and MOTE_TRACE_EVENTS once per process. Throws
// config_error, naming the variable and the value, when the file cannot be
// written or the size cannot be parsed; every later call throws the same.
void trace_check_config();

// Is tracing on? (After trace_check_config() succeeded.)
bool trace_on() noexcept;

// A new buffer, owned by the registry until the process ends, labelled for
// the trace's thread names. nullptr when tracing is off.
trace_buffer* trace_new_buffer(std::string_view label);

// A number for each runtime created while tracing, to tell their workers
// apart in thread names.
int trace_next_runtime_id() noexcept;

// In a child process after fork(): tracing stops (the child would otherwise
// overwrite the parent's file with a copy of its events).
void trace_after_fork_in_child() noexcept;

}  // namespace mote::detail
