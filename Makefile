# The two commands of the README's quick start:
#   make demo   set up, build, and run gpuwhy's main job on its built-in default
#   make test   set up, build, and run the whole test suite
# Everything else here is a step of those two.

BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
# Root is needed for apt and for the BPF tests; under a normal user sudo is used for both.
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: all setup build demo test test-sanitize bench format tidy clean install uninstall deb

# `make install` / `make uninstall` (PREFIX, DESTDIR; packaging/install.sh lists the rest).
PREFIX ?= /usr/local
DESTDIR ?=
export PREFIX DESTDIR

all: build

setup:
	@scripts/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# One progress line while it builds (scripts/build_quiet.sh keeps the output in $(BUILD)/build.log
# and names it when the build fails), then the diagnosis.
demo: setup
	@scripts/build_quiet.sh $(BUILD) $(JOBS)
	@$(SUDO) $(BUILD)/gpuwhy demo --live

test: build
	$(SUDO) env -u SUDO_UID -u SUDO_GID -u SUDO_USER ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

$(ASAN_BUILD)/CMakeCache.txt:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DGW_SANITIZE=ON

test-sanitize: setup $(ASAN_BUILD)/CMakeCache.txt
	cmake --build $(ASAN_BUILD) -j$(JOBS)
	$(SUDO) env -u SUDO_UID -u SUDO_GID -u SUDO_USER ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure --no-tests=error -L sanitize -j$(JOBS)

bench: build
	$(BUILD)/bench/gw_store_bench --events 2000000 --rounds 3
	$(SUDO) $(BUILD)/bench/gw_uprobe_cost

# Issue 7 items 2, 5, 6 (minutes each; BENCHMARKS.md has method and numbers).
.PHONY: bench-capture bench-footprint bench-train
bench-capture: build
	$(SUDO) python3 bench/capture_capacity.py --build $(BUILD)
bench-footprint: build
	$(SUDO) python3 bench/footprint.py --build $(BUILD)
bench-train: build
	$(SUDO) python3 bench/train_overhead.py --build $(BUILD)

# Installs what `make` built (binary, generated man pages and completions, the recorder unit and
# /etc/default/gpuwhy): `make && sudo make install`. It builds nothing, so root writes no files
# into the build tree.
install:
	packaging/install.sh $(BUILD)

uninstall:
	packaging/install.sh --uninstall

# gpuwhy_<version>_<arch>.deb in $(BUILD)/ (packaging/README.md).
deb: build
	packaging/build_deb.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.cc' '*.h' '*.bpf.c')

tidy: build
	clang-tidy -p $(BUILD) $$(git ls-files 'src/*.cc')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
