#!/usr/bin/env bash
# The libgomp entry points each OpenMP test program calls: the GOMP_* and
# omp_* symbols its executable leaves undefined (nm -D), as a Markdown table,
# then the C entry points of GNU's libgomp.so.1 that no program calls.
#
#   tests/omp/list_entry_points.sh [BUILD_DIR]            prints the table
#   tests/omp/list_entry_points.sh --update [BUILD_DIR]   rewrites it in tests/omp/README.md
#
# BUILD_DIR defaults to build/release; its tests/omp/omp_* executables must be built.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
update=0
if [[ ${1:-} == --update ]]; then
  update=1
  shift
fi
build=${1:-$here/../../build/release}
bin=$build/tests/omp
gnu=${GNU_LIBGOMP:-/usr/lib/x86_64-linux-gnu/libgomp.so.1}

shopt -s nullglob
programs=()
for exe in "$bin"/omp_*; do
  [[ -x $exe && $exe != *_plain ]] && programs+=("$exe")
done
if [[ ${#programs[@]} -eq 0 ]]; then
  echo "list_entry_points.sh: no omp_* executables in $bin (build them first)" >&2
  exit 1
fi

# The entry points an executable calls: undefined GOMP_*/omp_* dynamic symbols,
# without their version.
calls() {
  nm -D --undefined-only "$1" | awk '{print $NF}' | sed 's/@.*//' |
    { grep -E '^(GOMP|omp)_' || true; } | sort -u
}

table() {
  echo "| program | GOMP_ entry points | omp_ routines |"
  echo "|---|---|---|"
  for exe in "${programs[@]}"; do
    local name=${exe##*/omp_}
    local gomp omp
    gomp=$(calls "$exe" | { grep '^GOMP_' || true; } | paste -sd ' ' - | sed 's/ /, /g')
    omp=$(calls "$exe" | { grep '^omp_' || true; } | paste -sd ' ' - | sed 's/ /, /g')
    echo "| $name | ${gomp:--} | ${omp:--} |"
  done
  echo
  # GNU's C entry points that no program calls (not its version nodes, the
  # offload plugins' entry points, or the Fortran forms ending in _ or _8_).
  local all_called
  all_called=$(for exe in "${programs[@]}"; do calls "$exe"; done | sort -u)
  if [[ -r $gnu ]]; then
    local missing
    missing=$(objdump -T "$gnu" | awk '{print $NF}' | grep -E '^(GOMP|omp)_' |
      grep -vE '^GOMP_[0-9]|^GOMP_PLUGIN_|(_|_8_)$' | sort -u |
      comm -23 - <(echo "$all_called") | paste -sd ' ' - | sed 's/ /, /g')
    echo "Entry points of GNU's libgomp.so.1 that no program calls: ${missing:-none}."
  fi
}

if [[ $update -eq 0 ]]; then
  table
  exit 0
fi

readme=$here/README.md
begin='<!-- entry points: begin (tests/omp/list_entry_points.sh --update) -->'
end='<!-- entry points: end -->'
grep -qF "$begin" "$readme" || { echo "list_entry_points.sh: no marker in $readme" >&2; exit 1; }
generated=$(mktemp)
trap 'rm -f "$generated"' EXIT
table >"$generated"
awk -v begin="$begin" -v end="$end" -v file="$generated" '
  $0 == begin { print; while ((getline line < file) > 0) print line; skip = 1; next }
  $0 == end { skip = 0 }
  !skip { print }
' "$readme" >"$readme.new"
mv "$readme.new" "$readme"
echo "list_entry_points.sh: updated $readme"
