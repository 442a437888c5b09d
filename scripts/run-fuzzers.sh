#!/bin/sh
# Runs every libFuzzer target of a KN_FUZZ build for SECONDS each, seeded
# with tests/fuzz/corpus/<name without fuzz_>/ (and <target>.dict when
# there is one).  New inputs go to a scratch directory, so the seed corpus
# in the source tree is only read.  Fails if any target crashes; crash
# inputs are kept in the scratch directory, whose path is printed.
#
#   CC=clang cmake -S . -B build-fuzz -DKN_FUZZ=ON -DKN_BUILD_SHARED=OFF
#   cmake --build build-fuzz -j2
#   scripts/run-fuzzers.sh build-fuzz 60
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 BUILD_DIR SECONDS" >&2
  exit 2
fi
build=$1
seconds=$2
src=$(cd "$(dirname "$0")/.." && pwd)
fuzzers=$(find "$build" -type f -name 'fuzz_*' -perm -u+x | sort)
if [ -z "$fuzzers" ]; then
  echo "no fuzz_* executables under $build (configure with -DKN_FUZZ=ON)" >&2
  exit 2
fi
scratch=$(mktemp -d "${TMPDIR:-/tmp}/kn-fuzz.XXXXXX")
status=0
for f in $fuzzers; do
  name=$(basename "$f")
  seeds="$src/tests/fuzz/corpus/${name#fuzz_}"
  work="$scratch/$name"
  mkdir -p "$work/corpus" "$work/artifacts"
  set -- -max_total_time="$seconds" -artifact_prefix="$work/artifacts/" \
    -print_final_stats=1
  [ -f "$src/tests/fuzz/$name.dict" ] && set -- "$@" -dict="$src/tests/fuzz/$name.dict"
  set -- "$@" "$work/corpus"
  [ -d "$seeds" ] && set -- "$@" "$seeds"
  echo "== $name for ${seconds}s"
  if "$f" "$@" >"$work/log" 2>&1; then
    grep -E '^stat::(number_of_executed_units|new_units_added)' "$work/log" || true
  else
    status=1
    echo "FAILED: $name (log and crash inputs in $work)" >&2
    tail -n 40 "$work/log" >&2
  fi
done
if [ $status -eq 0 ]; then
  rm -rf "$scratch"
  echo "all fuzzers passed"
fi
exit $status
