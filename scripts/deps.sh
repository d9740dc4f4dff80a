#!/usr/bin/env bash
# Installs the Debian packages that mote needs, when they are missing.
#
#   scripts/deps.sh [test|bench]
#
# test  (default): compilers, CMake/Ninja, GoogleTest, hwloc, the analysers and
#                  the baselines the test suite builds against.
# bench:           all of test, plus what the benchmark suites and the report
#                  need (matplotlib, OpenBLAS, jemalloc, Boost, RapidJSON).
# Runs non-interactively; uses sudo only when not root.
set -euo pipefail

subset=${1:-test}
test_packages=(
  build-essential cmake ninja-build pkg-config g++ clang clang-tidy cppcheck
  libgtest-dev libgmock-dev libbenchmark-dev libhwloc-dev hwloc libtbb-dev libomp-dev
  python3 valgrind rapidjson-dev libopenmpi-dev openmpi-bin
)
bench_packages=(python3-matplotlib libopenblas-dev libjemalloc-dev libboost-dev rapidjson-dev)

case $subset in
  test) wanted=("${test_packages[@]}") ;;
  bench) wanted=("${test_packages[@]}" "${bench_packages[@]}") ;;
  *) echo "usage: $0 [test|bench]" >&2; exit 2 ;;
esac

missing=()
for package in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  if [[ $status != "install ok installed" ]]; then missing+=("$package"); fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "deps.sh: all ${#wanted[@]} packages for '$subset' are installed"
  exit 0
fi

echo "deps.sh: installing ${missing[*]}"
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "deps.sh: not root and no sudo; install these by hand: ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo -n)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
  "${missing[@]}"
