#!/usr/bin/env bash
# The test command of mote.
#
#   scripts/test.sh
#
# Installs missing Debian packages (scripts/deps.sh test), then:
#   release   Release build in build/release, every ctest test (install test included; also
#             GCC 12's libgomp testsuite on mote's libgomp.so.1, label omp_gcc, at 1, 2, 4 threads)
#   tsan      ThreadSanitizer build in build/tsan, ctest without the install test and omp_gcc
#   asan      AddressSanitizer + UBSan build with clang++ in build/asan-clang, ctest without
#             the install test and omp_gcc (the other builds use g++: every file compiles with both)
#   tidy      the core's include rule (scripts/check_includes.py), then clang-tidy
#             (.clang-tidy) over src/, with build/release's compile commands
#   docs      every complete ```cpp program in README.md and docs/*.md compiles
# Every stage runs even when an earlier one failed; the last line sums them up
# and the exit status is nonzero when any failed.
#
# MOTE_TEST_STAGES="release docs" runs a subset; MOTE_TEST_SKIP_DEPS=1 skips deps.sh.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$(pwd)
jobs=2

configure_and_build() {
  local dir=$1
  shift
  cmake -S "$root" -B "$root/$dir" -G Ninja "$@"
  cmake --build "$root/$dir" -j "$jobs"
}

stage_release() {
  configure_and_build build/release -DCMAKE_BUILD_TYPE=Release -DMOTE_SANITIZE=
  ctest --test-dir "$root/build/release" --output-on-failure -j "$jobs"
}

# Sanitizer builds: Debug, so that assertions are on (MoteSanitize.cmake adds
# -O1 -g). Examples and the install test add nothing under a sanitizer.
stage_tsan() {
  configure_and_build build/tsan -DCMAKE_BUILD_TYPE=Debug -DMOTE_SANITIZE=thread \
    -DMOTE_BUILD_EXAMPLES=OFF
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
  # TSan's shadow memory layout needs the default address-space layout; high
  # mmap randomisation on newer kernels breaks it, so run without ASLR.
  local norandom=()
  if setarch "$(uname -m)" -R true 2>/dev/null; then norandom=(setarch "$(uname -m)" -R); fi
  # Each test runs up to 4 times: more interleavings for the race detector.
  # That includes the <binary>.mesh entries: the models' randomized tests
  # again under MOTE_SCHEDULER=mesh (tests/CMakeLists.txt).
  # The OpenMP programs (label omp: about 200 processes) run once: they are
  # whole programs with many regions each, and four runs of each would
  # double the stage.
  local status=0
  "${norandom[@]}" ctest --test-dir "$root/build/tsan" --output-on-failure -j "$jobs" -LE 'install|omp|mpi' \
    --repeat until-fail:4 || status=1
  "${norandom[@]}" ctest --test-dir "$root/build/tsan" --output-on-failure -j "$jobs" -L omp -LE omp_gcc \
    || status=1
  # The MPI tests (label mpi, under mpiexec), twice. Open MPI is not built
  # with TSan: its own races and lock orders are suppressed (tests/mpi/tsan.supp),
  # and the calls it makes (its memcpy of a message, on whichever thread drives
  # its progress) are ignored, since its hand-over to the thread that sees the
  # completion is through atomics TSan cannot see.
  TSAN_OPTIONS="$TSAN_OPTIONS ignore_noninstrumented_modules=1 suppressions=$root/tests/mpi/tsan.supp" \
    "${norandom[@]}" \
    ctest --test-dir "$root/build/tsan" --output-on-failure -L mpi --repeat until-fail:2 || status=1
  return "$status"
}

# clang++ here, g++ everywhere else: every file is built by both compilers
# users have, and clang's UBSan adds checks g++'s lacks (enum loads, for one).
stage_asan() {
  configure_and_build build/asan-clang -DCMAKE_BUILD_TYPE=Debug -DMOTE_SANITIZE=address \
    -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DMOTE_BUILD_EXAMPLES=OFF
  export ASAN_OPTIONS="abort_on_error=1 halt_on_error=1 detect_stack_use_after_return=1 ${ASAN_OPTIONS:-}"
  export UBSAN_OPTIONS="halt_on_error=1 abort_on_error=1 print_stacktrace=1 ${UBSAN_OPTIONS:-}"
  ctest --test-dir "$root/build/asan-clang" --output-on-failure -j "$jobs" -LE 'install|omp_gcc' \
    --repeat until-fail:4
}

stage_tidy() {
  # The core includes no model and no scheduler policy (docs/design.md).
  local rule=0
  /usr/bin/python3 "$root/scripts/check_includes.py" --self-test || rule=$?
  /usr/bin/python3 "$root/scripts/check_includes.py" --root "$root" || rule=$?
  local db="$root/build/release/compile_commands.json"
  if [[ ! -f $db ]]; then
    cmake -S "$root" -B "$root/build/release" -G Ninja -DCMAKE_BUILD_TYPE=Release
  fi
  # The sources under src/ that the build compiles (so every file has its flags).
  local files
  files=$(/usr/bin/python3 -c '
import json, os, sys
root = sys.argv[1]
seen = set()
for e in json.load(open(sys.argv[2])):
    f = os.path.normpath(os.path.join(e["directory"], e["file"]))
    if f.startswith(os.path.join(root, "src") + os.sep) and f not in seen:
        seen.add(f)
        print(f)
' "$root" "$db" | sort)
  if [[ -z $files ]]; then
    echo "tidy: no files under src/ in $db" >&2
    return 1
  fi
  echo "clang-tidy: $(wc -l <<<"$files") files"
  # clang-tidy exits nonzero when a check listed in WarningsAsErrors fires, and
  # xargs then exits 123.
  local log="$root/build/release/clang-tidy.log" status=0
  xargs -P "$jobs" -n 1 clang-tidy -p "$root/build/release" --quiet <<<"$files" >"$log" 2>&1 ||
    status=$?
  grep -v -e '^[0-9]* warnings\? generated\.$' -e '^Suppressed [0-9]* warnings' \
    -e '^Use -header-filter=' -e '^[0-9]* warnings\? treated as errors$' "$log" || true
  if grep -q 'warning:' "$log"; then
    echo "clang-tidy: the warnings above are reported, not fatal (see .clang-tidy)"
  fi
  if [[ $rule -ne 0 ]]; then
    return 1
  fi
  return "$status"
}

stage_docs() {
  if [[ ! -d $root/build/release ]]; then
    configure_and_build build/release -DCMAKE_BUILD_TYPE=Release
  fi
  cmake --build "$root/build/release" -j "$jobs" --target mote
  /usr/bin/python3 "$root/scripts/check_doc_examples.py" --build-dir "$root/build/release" \
    --jobs "$jobs"
}

# One stage per process, so that `set -e` holds inside it.
if [[ ${1:-} == --stage ]]; then
  "stage_$2"
  exit $?
fi

start=$SECONDS
if [[ ${MOTE_TEST_SKIP_DEPS:-0} != 1 ]]; then
  "$root/scripts/deps.sh" test
fi

stages=${MOTE_TEST_STAGES:-release tsan asan tidy docs}
passed=()
failed=()
for stage in $stages; do
  if ! declare -F "stage_$stage" >/dev/null; then
    echo "unknown stage '$stage'" >&2
    exit 2
  fi
  echo "===== stage $stage ($((SECONDS - start)) s so far)"
  stage_start=$SECONDS
  # Each stage's output is kept (build/test-logs/), so that the summary at the
  # end can name what failed: a CI log is often read from its tail only.
  mkdir -p "$root/build/test-logs"
  if "$root/scripts/test.sh" --stage "$stage" 2>&1 | tee "$root/build/test-logs/$stage.log"; then
    passed+=("$stage")
    echo "===== stage $stage passed in $((SECONDS - stage_start)) s"
  else
    failed+=("$stage")
    echo "===== stage $stage FAILED after $((SECONDS - stage_start)) s"
  fi
done

elapsed=$((SECONDS - start))
if [[ ${#failed[@]} -eq 0 ]]; then
  echo "test.sh: PASS (${passed[*]}) in ${elapsed} s"
else
  # What failed, once more at the very end: each failed stage's failing tests
  # and the first lines of the first sanitizer or test-failure report.
  for stage in "${failed[@]}"; do
    log="$root/build/test-logs/$stage.log"
    echo "----- stage $stage: what failed"
    grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Child aborted|Exception|Not Run)\)' "$log" | sort -u || true
    grep -m1 -A24 -E '^(WARNING: ThreadSanitizer|==[0-9]+==ERROR|.*runtime error:|.*: Failure$)' "$log" || true
    grep -m3 -E 'SUMMARY: |error:|FAILED' "$log" || true
  done
  echo "test.sh: FAIL (failed: ${failed[*]}; passed: ${passed[*]:-none}) in ${elapsed} s"
  exit 1
fi
