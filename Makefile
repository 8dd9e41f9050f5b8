# The README's two commands. `make demo`: install what is missing, build, run a real PyTorch
# training under gpuscope and show its report. `make check`: install the test dependencies, build,
# run the whole suite through ctest, then again under ASan + UBSan.
PYTHON      ?= /usr/bin/python3
BUILD       ?= build
BUILD_ASAN  ?= build-asan
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)
DEB_BUILD    = cmake make gcc pkg-config libsqlite3-dev
DEB_DEMO     = $(DEB_BUILD) python3 python3-torch
DEB_CHECK    = $(DEB_DEMO) libcmocka-dev clang libclang-rt-14-dev sqlite3 procps python3-pip

.PHONY: all build demo check check-asan deps-demo deps-check bench format clean

all: build

deps-demo:
	@scripts/deps.sh $(DEB_DEMO)

deps-check:
	@scripts/deps.sh $(DEB_CHECK)

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: deps-demo build
	PYTHONPATH=$(CURDIR)/clients/python $(BUILD)/gpuscope run --name demo -- $(PYTHON) examples/train.py
	$(BUILD)/gpuscope report demo

check: deps-check build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) check-asan

check-asan:
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DGS_SANITIZE=ON >/dev/null
	@cmake --build $(BUILD_ASAN) -j $(JOBS)
	cd $(BUILD_ASAN) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -LE slow

bench: build
	bench/run_all.sh --build $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
