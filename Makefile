# The README's two commands. `make demo`: install what is missing, build gpuscope alone (no test
# package needed), replay the case study (examples/case_study: real JPEGs, real PyTorch, three runs
# under gpuscope and their comparison). `make check`: install the test dependencies, build with the
# tests and -Werror, run the whole suite through ctest, then again under ASan + UBSan. Everything a
# test needs from Debian is installed first, so under make check a skip is a failure
# (GS_CHECK_STRICT=1, docs/testing.md): only the tests labelled needs-pypi (packages Debian does not
# have) may skip, and the last line names them (tests/check_summary.py).
PYTHON      ?= /usr/bin/python3
BUILD       ?= build
BUILD_ASAN  ?= build-asan
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
# Tests at once: most of the suite waits on real jobs, servers and timeouts, so two a core; the tests
# that measure the CPU run theirs CPU first and one at a time (tests/scenarios/CMakeLists.txt).
TEST_JOBS   ?= $(shell echo $$(( $(JOBS) * 2 )))
DEB_BUILD    = cmake make gcc pkg-config libsqlite3-dev libpq-dev libncurses-dev libmicrohttpd-dev libinih-dev libcurl4-openssl-dev libyaml-dev libprotobuf-c-dev protobuf-c-compiler
DEB_DEMO     = $(DEB_BUILD) python3 python3-torch python3-torchvision python3-pil python3-numpy
DEB_CHECK    = $(DEB_DEMO) python3-pandas git libcmocka-dev clang libclang-rt-14-dev sqlite3 procps python3-pip tmux chromium postgresql prometheus prometheus-alertmanager systemd locales-all libxml2-utils openssl python3-grpcio librocm-smi-dev
CONFIGURE    = cmake -S . -DCMAKE_BUILD_TYPE=RelWithDebInfo
CONFIGURE_ASAN = cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DGS_SANITIZE=ON $(TESTS_ON)
# The tests' configuration fails, naming the Debian package, when one of theirs is missing.
TESTS_ON     = -DBUILD_TESTING=ON -DGS_WERROR=ON

MAKEFLAGS   += --no-print-directory

.PHONY: all build build-tests demo check check-asan deps-demo deps-check bench format clean

all: build

# npm builds the web front end (embedded in the binary). A Node.js that brings its own npm (such as
# NodeSource's nodejs package) is kept; otherwise Debian's nodejs and npm are installed.
DEB_NPM      = $(shell command -v npm >/dev/null 2>&1 || echo nodejs npm)

deps-demo:
	@scripts/deps.sh $(DEB_DEMO) $(DEB_NPM)

deps-check:
	@scripts/deps.sh $(DEB_CHECK) $(DEB_NPM)

# gpuscope alone: what a user or a packager builds.
build:
	@$(CONFIGURE) -B $(BUILD) -DBUILD_TESTING=OFF >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-tests:
	@$(CONFIGURE) -B $(BUILD) $(TESTS_ON) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: deps-demo build
	$(PYTHON) examples/case_study/run.py --build $(BUILD)

# Each ctest pass writes check-junit.xml in its build folder, which tests/check_summary.py reads. The
# ASan + UBSan build is made while the plain pass runs (its log: BUILD_ASAN/build.log).
check: deps-check build-tests
	@$(CONFIGURE_ASAN) >/dev/null
	@(cmake --build $(BUILD_ASAN) -j $(JOBS) >$(BUILD_ASAN)/build.log 2>&1; echo $$? >$(BUILD_ASAN)/build.rc) & \
	  cd $(BUILD) && GS_CHECK_STRICT=1 ctest --output-on-failure -j $(TEST_JOBS) --output-junit $(abspath $(BUILD))/check-junit.xml; \
	  rc=$$?; wait; \
	  if [ "$$(cat $(abspath $(BUILD_ASAN))/build.rc)" != 0 ]; then cat $(abspath $(BUILD_ASAN))/build.log; exit 1; fi; \
	  exit $$rc
	$(MAKE) check-asan GS_CHECK_STRICT=1
	@$(PYTHON) tests/check_summary.py $(BUILD) $(BUILD_ASAN)

# Alone (without check's installs), a skip here is a ctest skip; check passes GS_CHECK_STRICT=1. The
# pass runs what the sanitizers add something to: the unit tests and the scripts that reach C no
# other test run under them reaches (label "slow" marks the rest: tests/asan_select.py).
check-asan:
	@$(CONFIGURE_ASAN) >/dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && GS_CHECK_STRICT=$(GS_CHECK_STRICT) ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(TEST_JOBS) -LE slow --output-junit $(abspath $(BUILD_ASAN))/check-junit.xml

bench: build
	bench/run_all.sh --build $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
