# Entry points.  `make demo` runs the local demonstration; `make check`
# installs what is missing, builds with -Werror and runs every test, then
# the unit tests again under AddressSanitizer and UBSan, with a sample of
# allocation-failure runs of some of them; `make torture` runs them all.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps peers build demo check test unit asan torture fuzz docs docs-check bench sim-long sim-fleet \
  interop clean python-check python-asan

all: build

deps:
	./scripts/install-deps.sh

# The real peers (KCL 2.x and 3.x, KPL, MultiLangDaemon: Java, test code
# only), pinned in tests/lab/java/pom.xml, into tests/lab/java/.m2.
peers:
	./scripts/install-peers.sh

build:
	cmake -S . -B $(BUILD) -DKN_WERROR=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: deps build
	python3 scripts/demo.py --build $(BUILD)

test: build
	ctest --test-dir $(BUILD) --output-on-failure

unit: build
	ctest --test-dir $(BUILD) -L unit --output-on-failure

# The unit tests under the sanitizers, then the quick torture sample
# (label torture_quick: a few tests, at most about 150 runs per case,
# spread evenly; the Makefile's KT_TORTURE_* settings do not apply).
asan:
	CC=clang cmake -S . -B $(ASAN_BUILD) -DKN_WERROR=ON -DKN_SANITIZE=ON -DKN_BUILD_SHARED=OFF \
	  -DKN_TORTURE=ON -DKN_TORTURE_ALL=OFF
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) -L unit --output-on-failure
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) -L torture_quick --output-on-failure -j 2

# Allocation-failure torture: every unit test run again with its 1st,
# 2nd, ... allocation in the library failing, under the sanitizers; nothing
# may crash, hang or leak (tests/unit/kt.h, tests/torture/).  Per case
# (each KT_RUN of a test), the first KT_TORTURE_FIRST allocations fail one
# by one, then the rest are sampled evenly to the case's end, at most
# KT_TORTURE_MAX runs in all (a case of 200,000 allocations costs as many
# runs as one of 500), and no more than fit in about KT_TORTURE_SECONDS at
# the pace of the case's first run (cases that wait on a server's clock).
# About 25 minutes on 2 cores.  KT_TORTURE_MAX=0 KT_TORTURE_SECONDS=0:
# every allocation of every case (many hours).  TORTURE_TESTS=REGEX picks
# tests (e.g. decode).
TORTURE_TESTS ?= .
KT_TORTURE_FIRST ?= 300
KT_TORTURE_MAX ?= 500
KT_TORTURE_SECONDS ?= 120
torture:
	CC=clang cmake -S . -B $(ASAN_BUILD) -DKN_WERROR=ON -DKN_SANITIZE=ON -DKN_BUILD_SHARED=OFF \
	  -DKN_TORTURE=ON -DKN_TORTURE_ALL=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  KT_TORTURE_FIRST=$(KT_TORTURE_FIRST) KT_TORTURE_MAX=$(KT_TORTURE_MAX) \
	  KT_TORTURE_SECONDS=$(KT_TORTURE_SECONDS) \
	  ctest --test-dir $(ASAN_BUILD) -L '^torture$$' -R '$(TORTURE_TESTS)' --output-on-failure -j 2

fuzz:
	CC=clang cmake -S . -B build-fuzz -DKN_FUZZ=ON -DKN_BUILD_SHARED=OFF -DKN_BUILD_TESTS=OFF
	cmake --build build-fuzz -j $(JOBS)
	./scripts/run-fuzzers.sh build-fuzz 30

docs: build
	$(BUILD)/kncat -X list-md > docs/CONFIGURATION.md
	$(BUILD)/kncat -X list-metrics-md > docs/METRICS.md

docs-check: build
	$(BUILD)/kncat -X list-md | diff -u docs/CONFIGURATION.md - \
	  || { echo "docs/CONFIGURATION.md is stale: run make docs"; exit 1; }
	$(BUILD)/kncat -X list-metrics-md | diff -u docs/METRICS.md - \
	  || { echo "docs/METRICS.md is stale: run make docs"; exit 1; }

check: deps build docs-check format-check
	ctest --test-dir $(BUILD) --output-on-failure -j 2
	$(MAKE) python-check
	$(MAKE) asan
	$(MAKE) fuzz

# The Python package (python/): pip install into a virtual environment
# under $(BUILD), then its pytest suite against the lab (about a minute).
python-check: build
	python/check.sh $(BUILD)

# The same tests with the extension and the library under ASan and UBSan
# (about two minutes; not in make check).
python-asan: build
	python/check.sh --asan $(BUILD)

# libkinesis and the real KCL in one lease table (tests/interop/README.md):
# the mixed-fleet tests, about 7 minutes (not yet in .ci/run: one case is
# not steady, tests/interop/README.md).
interop: deps peers build
	python3 -m pytest -q tests/interop

# A long search of the coordination simulator: SIM_RUNS seeds from
# SIM_SEED, beyond the 10,000 that make check runs (tests/sim/README.md).
SIM_SEED ?= 100001
SIM_RUNS ?= 200000
SIM_FLEET_RUNS ?= 20
sim-long: build
	$(BUILD)/tests/sim/kn_sim --seed $(SIM_SEED) --runs $(SIM_RUNS) --seconds 180

# 1,000 workers on 16 shards, every fault: SIM_FLEET_RUNS runs, then as
# many redeploying under new ids.  About 30 s of one core a run.
sim-fleet: build
	$(BUILD)/tests/sim/kn_sim --seed $(SIM_SEED) --runs $(SIM_FLEET_RUNS) \
	  --workers 1000 --shards 16 --faults all --seconds 180
	KN_SIM_NEW_IDS=1 $(BUILD)/tests/sim/kn_sim --seed $(SIM_SEED) \
	  --runs $(SIM_FLEET_RUNS) --workers 1000 --shards 16 --faults all \
	  --seconds 180

bench: deps build
	python3 bench/run.py --build $(BUILD)

# C sources in the style of .clang-format (clang-format from Debian).
FORMAT_FILES = $(shell git ls-files 'src/*.[ch]' 'include/*.h' 'tools/*.[ch]' \
  'tests/*.[ch]' 'bench/*.c' 'examples/*.[ch]' | grep -v hashkey_table.h)
format:
	clang-format -i $(FORMAT_FILES)

format-check:
	clang-format --dry-run -Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) build-fuzz
