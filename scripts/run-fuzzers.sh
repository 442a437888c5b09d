#!/bin/sh
# Runs every libFuzzer target of a KN_FUZZ build for SECONDS each:
#   scripts/run-fuzzers.sh BUILD_DIR [SECONDS]
# Each fuzz_NAME starts from the seed corpus tests/fuzz/corpus/NAME/ (read
# only), with the dictionary tests/fuzz/fuzz_NAME.dict when there is one,
# and keeps what it finds in BUILD_DIR/fuzz-corpus/NAME/.  Exits
# non-zero at the first target that crashes.
set -eu
build=$(cd "${1:?usage: run-fuzzers.sh BUILD_DIR [SECONDS]}" && pwd)
secs=${2:-30}
src=$(cd "$(dirname "$0")/.." && pwd)
found=0
for bin in "$build"/tests/fuzz/fuzz_*; do
  [ -x "$bin" ] && [ -f "$bin" ] || continue
  found=1
  name=$(basename "$bin")
  name=${name#fuzz_}
  work="$build/fuzz-corpus/$name"
  mkdir -p "$work"
  seeds="$src/tests/fuzz/corpus/$name"
  [ -d "$seeds" ] || seeds=
  dict="$src/tests/fuzz/fuzz_$name.dict"
  [ -f "$dict" ] && dict="-dict=$dict" || dict=
  echo "run-fuzzers: $name for ${secs}s"
  (cd "$build" && "$bin" -max_total_time="$secs" -print_final_stats=1 \
    $dict "$work" $seeds)
done
[ "$found" = 1 ] || { echo "run-fuzzers: no fuzz_* targets in $build/tests/fuzz" >&2; exit 1; }
