// mote's OpenMP model, as the libgomp.so.1 front end (src/omp/gomp/) sees it:
// the teams (team.hpp), the tasks (tasks.hpp) and the ICVs (icv.hpp).
// Internal API of libmote (exported, so that libgomp.so.1 can call it; not a
// public header).
//
//   if (mote::omp::in_parallel()) n = mote::omp::num_threads();
#pragma once

#include "mote/export.hpp"
#include "omp/icv.hpp"
#include "omp/tasks.hpp"
#include "omp/team.hpp"

namespace mote::omp {

// omp_get_place_num: the place the calling thread is bound to, or -1.
MOTE_API int place_num() noexcept;

}  // namespace mote::omp
