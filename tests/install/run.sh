#!/usr/bin/env bash
# Installs mote into a scratch prefix and builds and runs three consumers:
#   find_package(mote CONFIG) + mote::mote, add_subdirectory(<mote source>),
#   and a one-line compile with `pkg-config --cflags --libs mote`.
# With the OpenMP front end (gcc): libgomp.so.1 and mote-omp installed where
# said, and a gcc -fopenmp program run on them.
# Does this for a shared and a static libmote (MOTE_INSTALL_TEST_KINDS picks).
#
#   tests/install/run.sh <mote-source-dir> <scratch-dir>
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 <mote-source-dir> <scratch-dir>" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
mkdir -p "$2"
scratch=$(cd "$2" && pwd)
here="$src/tests/install"
kinds=${MOTE_INSTALL_TEST_KINDS:-shared static}
jobs=${MOTE_INSTALL_TEST_JOBS:-2}

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
# The consumers are built without the sanitizer flags of any enclosing build.
unset CFLAGS CXXFLAGS LDFLAGS

step() { echo "== install test: $*"; }

for kind in $kinds; do
  case $kind in
    shared) shared=ON ;;
    static) shared=OFF ;;
    *) echo "unknown kind '$kind' (expected shared or static)" >&2; exit 2 ;;
  esac
  root="$scratch/$kind"
  prefix="$root/prefix"
  rm -rf "$root"
  mkdir -p "$root"

  step "$kind: build and install mote into $prefix"
  bare=()
  if [[ $kind == shared ]]; then
    # As on a machine without the test and benchmark dependencies: a plain
    # configure of everything must still work, name each missing package in
    # one line, and build and install the library.
    bare=(-DMOTE_BUILD_TESTS=ON -DMOTE_BUILD_BENCH=ON -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
          -DCMAKE_DISABLE_FIND_PACKAGE_TBB=ON -DMOTE_RAPIDJSON_INCLUDE="$root/no-rapidjson")
  else
    bare=(-DMOTE_BUILD_TESTS=OFF)
  fi
  cmake -S "$src" -B "$root/mote-build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=$shared -DMOTE_BUILD_EXAMPLES=OFF "${bare[@]}" \
    -DCMAKE_INSTALL_PREFIX="$prefix" >"$root/mote-configure.log" 2>&1 ||
    { cat "$root/mote-configure.log"; exit 1; }
  if [[ $kind == shared ]]; then
    # CMake wraps long warnings: compare with the lines joined.
    joined=$(tr -s ' \n' '  ' <"$root/mote-configure.log")
    for wanted in "apt-get install libgtest-dev" "apt-get install rapidjson-dev" \
                  "apt-get install libtbb-dev"; do
      grep -qF "$wanted" <<<"$joined" ||
        { cat "$root/mote-configure.log"; echo "the configure does not say: $wanted" >&2; exit 1; }
    done
  fi
  # With the OpenMP front end when the configure chose it (gcc as C compiler).
  targets=(mote)
  omp=OFF
  if grep -q '^MOTE_OMP:BOOL=ON' "$root/mote-build/CMakeCache.txt"; then
    omp=ON
    targets+=(mote_gomp)
  fi
  mpi=OFF
  if grep -q '^MOTE_MPI:BOOL=ON' "$root/mote-build/CMakeCache.txt"; then
    mpi=ON
    targets+=(mote_mpi)
  fi
  cmake --build "$root/mote-build" -j "$jobs" --target "${targets[@]}" >"$root/mote-build.log" ||
    { cat "$root/mote-build.log"; exit 1; }
  cmake --install "$root/mote-build" >"$root/mote-install.log"
  test -f "$prefix/include/mote.h"
  test -f "$prefix/include/mote/mote.hpp"

  if [[ $omp == ON ]]; then
    step "$kind: the OpenMP front end (<libdir>/mote/omp/libgomp.so.1, bin/mote-omp)"
    gomp=$(find "$prefix" -path '*/mote/omp/libgomp.so.1' -print -quit)
    test -n "$gomp" || { echo "libgomp.so.1 is not installed in <libdir>/mote/omp" >&2; exit 1; }
    # No unversioned libgomp.so: a linker must never take mote's for GNU's.
    if [[ -e $(dirname "$gomp")/libgomp.so ]]; then
      echo "an unversioned libgomp.so is installed beside $gomp" >&2
      exit 1
    fi
    test -x "$prefix/bin/mote-omp" || { echo "bin/mote-omp is not installed" >&2; exit 1; }
    # A program built with gcc -fopenmp runs on the installed library through
    # the installed launcher (it checks where omp_get_max_threads comes from).
    cc -fopenmp -O2 -o "$root/omp-app" "$src/tests/test_omp_abi_smoke.c"
    threads=$("$prefix/bin/mote-omp" --threads 3 "$root/omp-app" --library "$gomp" --print-max-threads)
    [[ $threads == 3 ]] || { echo "mote-omp --threads 3: the program saw '$threads'" >&2; exit 1; }
    "$prefix/bin/mote-omp" "$root/omp-app" --library "$gomp"
  fi

  step "$kind: find_package consumer"
  cmake -S "$here/find_package" -B "$root/find_package" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >"$root/find_package.log"
  cmake --build "$root/find_package" -j "$jobs"
  "$root/find_package/app"
  if [[ $mpi == ON ]]; then
    # One rank, a singleton (Open MPI wants the two variables as root).
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$root/find_package/app_mpi"
  fi

  step "$kind: add_subdirectory consumer"
  cmake -S "$here/subdirectory" -B "$root/subdirectory" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=$shared -DMOTE_SOURCE_DIR="$src" \
    >"$root/subdirectory.log"
  cmake --build "$root/subdirectory" -j "$jobs"
  "$root/subdirectory/app"

  step "$kind: pkg-config consumers"
  pc=$(find "$prefix" -name mote.pc -print -quit)
  test -n "$pc"
  pcdir=$(dirname "$pc")
  pkg-config() { PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" command pkg-config "$@"; }
  libdir=$(pkg-config --variable=libdir mote)
  echo "pkg-config --cflags --libs mote: $(pkg-config --cflags --libs mote)"
  # The one-line compile a user would write (rpath only because the prefix is
  # not on the loader's path).
  c++ -std=c++20 -O2 -o "$root/pkgconfig-app" "$here/consumer.cpp" \
    $(pkg-config --cflags --libs mote) -Wl,-rpath,"$libdir"
  "$root/pkgconfig-app"
  # The headers are compiled by the user's compiler: clang++ too, when present.
  if command -v clang++ >/dev/null 2>&1; then
    clang++ -std=c++20 -O2 -o "$root/pkgconfig-clang-app" "$here/consumer.cpp" \
      $(pkg-config --cflags --libs mote) -Wl,-rpath,"$libdir"
    "$root/pkgconfig-clang-app"
  fi
  # The C API from C. A static libmote holds C++ code, so the C++ driver links.
  cc -std=c99 -O2 -c -o "$root/consumer-c.o" "$here/consumer.c" $(pkg-config --cflags mote)
  if [[ $shared == ON ]]; then
    cc -o "$root/pkgconfig-c-app" "$root/consumer-c.o" $(pkg-config --libs mote) -Wl,-rpath,"$libdir"
  else
    c++ -o "$root/pkgconfig-c-app" "$root/consumer-c.o" $(pkg-config --libs mote)
  fi
  "$root/pkgconfig-c-app"
  unset -f pkg-config
done

echo "install test: all consumers passed ($kinds)"
