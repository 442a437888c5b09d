#!/bin/sh
# Builds the package from this checkout into a virtual environment under the
# build directory (`pip install ./python`, as a user would) and runs its
# tests against the lab's servers.  `make python-check` runs it; so does
# `make check`.
#
#   python/check.sh [--asan] [BUILD_DIR] [PYTEST_ARGS...]
#
# The environment sees the system's packages (boto3 for the lab); pytest
# is installed into it when the system has none.  The extension's CMake
# build is kept in BUILD_DIR/python-build, so a second run only relinks.
#
# --asan (`make python-asan`, about two minutes, not in make check): the
# extension and the library built with gcc's AddressSanitizer and UBSan in
# BUILD_DIR/python-asan and loaded into the ordinary interpreter with
# LD_PRELOAD.  Leak detection is off: the interpreter keeps memory until
# exit by design (test_leaks.py counts the package's Python objects with
# tracemalloc instead).
set -eu
asan=0
if [ "${1:-}" = --asan ]; then asan=1; shift; fi
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
case "$build" in /*) ;; *) build="$src/$build" ;; esac
venv="$build/python-venv"

[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -c 'import pytest' 2>/dev/null \
  || "$venv/bin/pip" install -q pytest
if [ $asan = 0 ]; then
  "$venv/bin/pip" install -q --disable-pip-version-check \
    --config-settings=build-dir="$build/python-build" "$src/python"
else
  out="$build/python-asan"
  san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
  cmake -S "$src/python" -B "$out" -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_C_FLAGS="$san -fno-omit-frame-pointer" \
    -DCMAKE_MODULE_LINKER_FLAGS="$san" \
    -DPython_EXECUTABLE="$("$venv/bin/python" -c 'import sys; print(sys.executable)')"
  cmake --build "$out" --target _libkinesis -j 2
  rm -rf "$out/pkg" && mkdir -p "$out/pkg/libkinesis"
  cp "$src"/python/src/libkinesis/*.py "$src"/python/src/libkinesis/py.typed \
    "$out"/_libkinesis*.so "$out/pkg/libkinesis/"
  export PYTHONPATH="$out/pkg"
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
  export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
fi
cd "$src/python"
KN_SOURCE_DIR="$src" KN_BUILD_DIR="$build" KNCAT="$build/kncat" \
  exec "$venv/bin/python" -m pytest -p no:cacheprovider -q "$@" tests
