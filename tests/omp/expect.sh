#!/usr/bin/env bash
# Runs one OpenMP test program and checks what ctest's own pass/fail cannot:
# its stderr and its exit status together.
#
#   expect.sh fail REGEX -- PROGRAM ARGS...
#       The program must fail (non-zero status) and print a line matching
#       REGEX (grep -E) on stderr.
#   expect.sh succeed REGEX -- PROGRAM ARGS...
#       The program must succeed and print a line matching REGEX on stderr.
#   expect.sh bad-env VAR=VALUE REGEX -- PROGRAM ARGS...
#       Run with VAR=VALUE, the program must succeed, print a line matching
#       REGEX on stderr, and print on stdout what it prints with VAR unset
#       (it went on with the value VAR has when unset).
#   expect.sh display EXPECTED -- PROGRAM ARGS...
#       The program must succeed, and its stderr (OMP_DISPLAY_ENV's output)
#       must equal the file EXPECTED once the machine's own parts (the
#       values of OMP_PLACES and GOMP_CPU_AFFINITY, when not empty) read
#       '<machine>'. With MOTE_OMP_UPDATE_EXPECTED=1 it writes EXPECTED instead.
set -euo pipefail

mode=${1:?usage: expect.sh fail|succeed|bad-env|display ...}
shift
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

show() {
  echo "---- stdout:"
  cat "$scratch/out"
  echo "---- stderr:"
  cat "$scratch/err"
}

case $mode in
  fail | succeed)
    regex=$1
    [[ $2 == -- ]] || { echo "expect.sh: -- expected" >&2; exit 2; }
    shift 2
    status=0
    "$@" >"$scratch/out" 2>"$scratch/err" || status=$?
    if [[ $mode == fail && $status -eq 0 ]]; then
      show
      echo "expect.sh: $1 succeeded; a failure (non-zero status) was expected"
      exit 1
    fi
    if [[ $mode == succeed && $status -ne 0 ]]; then
      show
      echo "expect.sh: $1 failed (status $status)"
      exit 1
    fi
    if ! grep -Eq -- "$regex" "$scratch/err"; then
      show
      echo "expect.sh: status $status, but no line on stderr matches: $regex"
      exit 1
    fi
    echo "expect.sh: status $status and stderr matches: $regex"
    ;;
  bad-env)
    assignment=$1
    regex=$2
    [[ $3 == -- ]] || { echo "expect.sh: -- expected" >&2; exit 2; }
    shift 3
    var=${assignment%%=*}
    env -u "$var" "$@" >"$scratch/want" 2>"$scratch/want-err" || {
      echo "expect.sh: $1 failed with $var unset:"
      cat "$scratch/want" "$scratch/want-err"
      exit 1
    }
    status=0
    env "$assignment" "$@" >"$scratch/out" 2>"$scratch/err" || status=$?
    if [[ $status -ne 0 ]]; then
      show
      echo "expect.sh: with $assignment the program failed (status $status); it should go on"
      exit 1
    fi
    if ! grep -Eq -- "$regex" "$scratch/err"; then
      show
      echo "expect.sh: with $assignment no line on stderr matches: $regex"
      exit 1
    fi
    if ! diff -u "$scratch/want" "$scratch/out" >"$scratch/diff"; then
      show
      echo "expect.sh: with $assignment the program saw other settings than with $var unset:"
      cat "$scratch/diff"
      exit 1
    fi
    echo "expect.sh: $assignment reported, and ignored as when unset"
    ;;
  display)
    expected=$1
    [[ $2 == -- ]] || { echo "expect.sh: -- expected" >&2; exit 2; }
    shift 2
    status=0
    "$@" >"$scratch/out" 2>"$scratch/err" || status=$?
    if [[ $status -ne 0 ]]; then
      show
      echo "expect.sh: the program failed (status $status)"
      exit 1
    fi
    sed -E "s/^(  (OMP_PLACES|GOMP_CPU_AFFINITY) = ')[^']+'$/\1<machine>'/" "$scratch/err" \
      >"$scratch/normalised"
    if [[ ${MOTE_OMP_UPDATE_EXPECTED:-0} == 1 ]]; then
      cp "$scratch/normalised" "$expected"
      echo "expect.sh: wrote $expected"
      exit 0
    fi
    if ! diff -u "$expected" "$scratch/normalised"; then
      echo "expect.sh: the OMP_DISPLAY_ENV output differs from $expected (above: - expected, + got)"
      exit 1
    fi
    echo "expect.sh: the OMP_DISPLAY_ENV output is $expected's"
    ;;
  *)
    echo "expect.sh: unknown mode $mode" >&2
    exit 2
    ;;
esac
