// mote's OpenMP model, as the libgomp.so.1 front end (src/omp/gomp/) sees it.
//
// Internal API of libmote (exported, so that libgomp.so.1 can call it; not a
// public header). The answers about the calling thread's team come from the
// team layer (src/omp/team.cpp); the ICVs and the environment are in icv.hpp.
//
//   if (mote::omp::in_parallel()) n = mote::omp::num_threads();
#pragma once

#include "mote/export.hpp"

namespace mote::omp {

// ---- The calling thread's place in the team tree ----------------------------
// The answers of omp_get_thread_num, omp_get_num_threads, omp_get_level,
// omp_get_active_level, omp_get_ancestor_thread_num, omp_get_team_size,
// omp_in_parallel, omp_in_final and omp_get_place_num, for the calling
// thread (any thread). Outside every parallel region: thread 0 of a team of
// 1 at level 0; ancestor_thread_num and team_size answer -1 for a level that
// does not exist; place_num is -1 when the thread is bound to no place.
MOTE_API int thread_num();
MOTE_API int num_threads();
MOTE_API int level();
MOTE_API int active_level();
MOTE_API int ancestor_thread_num(int level);
MOTE_API int team_size(int level);
MOTE_API bool in_parallel();
MOTE_API bool in_final();
MOTE_API int place_num();

// ---- Entry points that mote does not implement --------------------------------
// Prints `mote: libgomp entry point <name> is not implemented` on stderr, one
// line, and aborts. Called by the weak stubs of src/omp/gomp/stubs.cpp;
// defined in libgomp.so.1 (src/omp/gomp/unsupported.cpp).
[[noreturn]] MOTE_API void unsupported(const char* name);

}  // namespace mote::omp
