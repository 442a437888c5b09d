#!/bin/sh
# The package's tests with the extension and the C library built under
# AddressSanitizer and UndefinedBehaviorSanitizer (gcc), loaded into the
# ordinary interpreter with LD_PRELOAD.  Leak detection is off: the
# interpreter keeps memory until exit by design (test_leaks.py counts the
# package's Python objects with tracemalloc instead).  `make python-asan`;
# about two minutes, not part of make check.
#
#   python/check-asan.sh [BUILD_DIR] [PYTEST_ARGS...]
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
case "$build" in /*) ;; *) build="$src/$build" ;; esac
venv="$build/python-venv"
out="$build/python-asan"

[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -c 'import pytest' 2>/dev/null \
  || "$venv/bin/pip" install -q pytest
san="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
cmake -S "$src/python" -B "$out" -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_C_FLAGS="$san -fno-omit-frame-pointer" \
  -DCMAKE_MODULE_LINKER_FLAGS="$san" \
  -DPython_EXECUTABLE="$("$venv/bin/python" -c 'import sys; print(sys.executable)')"
cmake --build "$out" --target _libkinesis -j 2
rm -rf "$out/pkg" && mkdir -p "$out/pkg/libkinesis"
cp "$src"/python/src/libkinesis/*.py "$src"/python/src/libkinesis/py.typed \
  "$out"/_libkinesis*.so "$out/pkg/libkinesis/"
cd "$src/python"
LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  PYTHONPATH="$out/pkg" KN_SOURCE_DIR="$src" KN_BUILD_DIR="$build" \
  KNCAT="$build/kncat" \
  exec "$venv/bin/python" -m pytest -p no:cacheprovider -q "$@" tests
