#!/usr/bin/env bash
# Builds every benchmark variant and writes the benchmark report.
#
#   scripts/bench.sh            full run (about 25 minutes on 2 cores)
#   scripts/bench.sh --quick    smoke run: one round, few repetitions
#
# Steps: install missing Debian packages (scripts/deps.sh bench when present),
# build mote and the serial / mote / oneTBB / GNU OpenMP variants with g++ in
# build/bench (with the omp suite's C programs, built by gcc, and
# build/bench/omp-llvm, the link that runs them on LLVM's libomp), build the
# LLVM OpenMP variants with clang++ in
# build/bench-llvmomp, then run tools/report.py, which writes
# bench/results/{results.json,REPORT.md,*.png}. Any other argument is passed to
# tools/report.py (see tools/report.py --help).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# ---- dependencies --------------------------------------------------------
if [[ -x scripts/deps.sh ]]; then
  scripts/deps.sh bench
else
  packages=(cmake ninja-build g++ clang libtbb-dev libomp-dev libbenchmark-dev python3-matplotlib
            libhwloc-dev pkg-config)
  missing=()
  for p in "${packages[@]}"; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "bench.sh: installing ${missing[*]}" >&2
    sudo_cmd=()
    [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
jobs="$(nproc)"

# ---- mote + serial, mote, oneTBB, GNU OpenMP variants (g++) ---------------
# CC/CXX pick the compilers on the first configure only; the GNU OpenMP
# variants need g++ (bench/CMakeLists.txt warns and skips them otherwise).
CC=gcc CXX=g++ cmake -S . -B build/bench "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DMOTE_BUILD_BENCH=ON -DMOTE_BUILD_TESTS=OFF -DMOTE_BUILD_EXAMPLES=OFF
cmake --build build/bench --target mote_bench --parallel "$jobs"

# ---- LLVM OpenMP variants (clang++ with libomp) ----------------------------
libomp=""
for candidate in /usr/lib/llvm-14/lib/libomp.so /usr/lib/llvm-*/lib/libomp.so; do
  [[ -e "$candidate" ]] && { libomp="$candidate"; break; }
done
if [[ -z "$libomp" ]]; then
  echo "bench.sh: no LLVM libomp.so found (apt-get install libomp-dev)" >&2
  exit 1
fi
clangxx=clang++
llvm_dir="$(dirname "$(dirname "$libomp")")"   # /usr/lib/llvm-N
[[ -x "$llvm_dir/bin/clang++" ]] && clangxx="$llvm_dir/bin/clang++"
cmake -S bench -B build/bench-llvmomp "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$clangxx" \
  -DMOTE_BENCH_ONLY_OMP=ON -DMOTE_BENCH_LIBOMP="$libomp"
cmake --build build/bench-llvmomp --parallel "$jobs"

# ---- run and report ------------------------------------------------------
python=/usr/bin/python3
[[ -x "$python" ]] || python=python3
# Instruction counts per spawn (repeatable on a noisy machine); skipped with --quick.
if [[ " $* " != *" --quick "* ]] && command -v valgrind >/dev/null; then
  "$python" tools/callgrind_spawn.py --bin-dir build/bench/bench/bin --bin-dir build/bench-llvmomp/bin \
    --out bench/results/callgrind.json
fi
exec "$python" tools/report.py \
  --bin-dir build/bench/bench/bin --bin-dir build/bench-llvmomp/bin "$@"
