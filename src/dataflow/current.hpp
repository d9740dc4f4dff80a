// The data-flow task whose body the calling thread runs (innermost), or
// nullptr: the model's own thread-local, visible inside libmote so that the
// OpenMP layer swaps it inline around each task body (src/omp/tasks.cpp: an
// OpenMP task's scopes are siblings, not nested in the data-flow task that
// may be running the body). Everyone else goes through df_current_task and
// df_exchange_current_task (mote/detail/dataflow_records.hpp).
#pragma once

#include "mote/detail/dataflow_records.hpp"

namespace mote::detail {

// Initial-exec: libmote is loaded with the program or by a dlopen that its
// static TLS block has room for (as every thread-local of the core's).
extern constinit thread_local df_task* tl_df_current __attribute__((tls_model("initial-exec")));

}  // namespace mote::detail
