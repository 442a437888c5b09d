#!/bin/sh
# Builds the package from this checkout into a virtual environment under the
# build directory (`pip install ./python`, as a user would) and runs its
# tests against the lab's servers.  `make python-check` runs it; so does
# `make check`.
#
#   python/check.sh [BUILD_DIR] [PYTEST_ARGS...]
#
# The environment sees the system's packages (boto3 for the lab); pytest
# is installed into it when the system has none.  The extension's CMake
# build is kept in BUILD_DIR/python-build, so a second run only relinks.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
case "$build" in /*) ;; *) build="$src/$build" ;; esac
venv="$build/python-venv"

[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -c 'import pytest' 2>/dev/null \
  || "$venv/bin/pip" install -q pytest
"$venv/bin/pip" install -q --disable-pip-version-check \
  -C build-dir="$build/python-build" "$src/python"
cd "$src/python"
KN_SOURCE_DIR="$src" KN_BUILD_DIR="$build" KNCAT="$build/kncat" \
  exec "$venv/bin/python" -m pytest -p no:cacheprovider -q "$@" tests
