// Exceptions that mote itself throws.
#pragma once

#include <stdexcept>
#include <string>

#include "mote/export.hpp"

namespace mote {

// A configuration value (an option or a MOTE_* environment variable) that
// cannot be used. The message names the variable or option and the value.
//
//   try { mote::runtime rt; } catch (const mote::config_error& e) { std::puts(e.what()); }
class MOTE_API config_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A task_group was destroyed while it still had tasks that nobody waited for.
// The destructor has cancelled what had not started and waited for the rest
// before throwing this, so nothing dangles.
class MOTE_API missing_wait : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// Misuse of mote that it detects at run time and reports instead of leaving
// undefined: a second wait() on a group while another thread waits for it,
// work for a runtime created before fork() in the child process, an
// assistant called from a thread other than its owner. Nothing was started or
// lost by the call that throws it.
//
//   try { g.wait(); } catch (const mote::usage_error& e) { std::puts(e.what()); }
class MOTE_API usage_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

}  // namespace mote
