// TEMPORARY: delete this file (and its line in src/CMakeLists.txt) when the
// team layer (src/omp/team.cpp) lands. It answers as a program that never
// enters a parallel region: thread 0 of a team of 1, level 0.
#include "omp/icv.hpp"
#include "omp/omp.hpp"

namespace mote::omp {

int thread_num() { return 0; }
int num_threads() { return 1; }
int level() { return 0; }
int active_level() { return 0; }
int ancestor_thread_num(int level) { return level == 0 ? 0 : -1; }
int team_size(int level) { return level == 0 ? 1 : -1; }
bool in_parallel() { return false; }
// The initial task is not a final task.
bool in_final() { return false; }
// GNU's libgomp binds the initial thread to the first place as soon as there
// are places; the team layer will do so too.
int place_num() { return globals().places.empty() ? -1 : 0; }

}  // namespace mote::omp
