# hzc top-level Makefile.  `make check` and `make demo` do all the set-up.
#
#   make            build hzc.ko and libhzc (with whatever the build directory
#                   is configured for: by default tests, tools and benchmarks)
#   make check      install the check deps, build everything (warnings are
#                   errors), run lint, the harness self-tests, host and guest tests
#   make demo       install the demo deps, build hzc.ko, libhzc, hzc-demo and
#                   hzc-info only, boot the guest and run the example (scripts/demo)
#   make bench      install the bench deps, build, run the benchmarks in the guest
#   make bench-native  install the bench deps, build, run the collectives natively on this
#                   host next to Open MPI, MPICH and memcpy (scripts/bench-native)
#   make bench-hosts  install the bench deps, build, run AllReduce across the two
#                   guests of scripts/vm-run --hosts 2 next to ib_write_bw and Open MPI
#                   (scripts/bench-hosts)
#   make install    install libhzc, its headers, CMake package and pkg-config
#                   file, the tools, the uapi header and hzc.ko
#                   (PREFIX, default /usr/local; DESTDIR for staging)
#   make dkms-install  install hzc.ko's source as /usr/src/hzc-<version> and
#                   dkms add, build and install it (make -C kmod dkms-install)
#   make deb        the Debian packages hzc-dkms, libhzc0, libhzc-dev and
#                   hzc-tools in BUILD/deb/ (scripts/deb), checked by lintian
#   make deb-check  make deb, then tests/harness/deb: the packages unpacked in
#                   the guest, the module built there by dkms, loaded, used
#   make lint       checkpatch --strict, sparse, clang-format
#   make format     apply clang-format to userspace sources
#
# KDIR selects the kernel tree the module is built against.  It is never
# computed here: kmod/Makefile picks its default (the Debian kernel the guest
# boots, scripts/kver) when the module is built, which is after the deps step
# has installed that kernel.  A KDIR given on the command line or in the
# environment reaches kmod/Makefile unchanged.  BUILD is the CMake build
# directory.  HZC_DEPS replaces scripts/deps (the harness self-test runs a
# stand-in).

BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_BUILD_TYPE ?= RelWithDebInfo
PREFIX ?= /usr/local
DESTDIR ?=
HZC_DEPS ?= scripts/deps

export BUILD HZC_DEPS

CMAKE_CONFIGURE = cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(CMAKE_BUILD_TYPE)

.PHONY: all deps kmod lib lib-check lib-bench lib-demo check demo fuzz bench bench-native bench-hosts install dkms-install deb deb-check \
	lint format clean

all: kmod lib

deps:
	@"$(HZC_DEPS)"

kmod:
	$(MAKE) -C kmod

# A fresh build directory gets the project's defaults (tests, tools and
# benchmarks; no -Werror); an existing one keeps its options.
$(BUILD)/CMakeCache.txt:
	$(CMAKE_CONFIGURE)

lib: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# Everything, warnings as errors (make check, CI). A fresh build directory gets line tables
# only (-g1: backtraces and profiles keep file and line; a third less compile time than -g);
# an existing one keeps its flags (`make lib` first for full debug information).
CHECK_FLAGS ?= -O2 -g1 -DNDEBUG
lib-check:
	$(CMAKE_CONFIGURE) -DHZC_WERROR=ON -DHZC_BUILD_TESTS=ON -DHZC_BUILD_BENCHMARKS=ON \
		$(if $(wildcard $(BUILD)/CMakeCache.txt),,-DCMAKE_C_FLAGS_RELWITHDEBINFO="$(CHECK_FLAGS)" \
		-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(CHECK_FLAGS)")
	cmake --build $(BUILD) -j$(JOBS)

# Tests and benchmarks (make bench); -Werror as configured.
lib-bench:
	$(CMAKE_CONFIGURE) -DHZC_BUILD_TESTS=ON -DHZC_BUILD_BENCHMARKS=ON
	cmake --build $(BUILD) -j$(JOBS)

# Only what the demo runs.  A fresh build directory is configured without
# tests and benchmarks (their packages are not demo deps).  One target per
# cmake --build: the Makefile generator builds several targets of one call
# concurrently, each with its own copy of the shared dependencies.
lib-demo:
	@[ -f $(BUILD)/CMakeCache.txt ] || \
		{ echo "$(CMAKE_CONFIGURE) -DHZC_BUILD_TESTS=OFF -DHZC_BUILD_BENCHMARKS=OFF"; \
		  $(CMAKE_CONFIGURE) -DHZC_BUILD_TESTS=OFF -DHZC_BUILD_BENCHMARKS=OFF; }
	cmake --build $(BUILD) -j$(JOBS) --target hzc-demo
	cmake --build $(BUILD) -j$(JOBS) --target hzc-info

# Each entry point runs its deps step first and then builds in a new make, so
# nothing about the kernel is decided before the kernel is installed.
check:
	@"$(HZC_DEPS)" check
	@$(MAKE) --no-print-directory kmod lib-check
	@scripts/check

demo:
	@scripts/demo

# The fuzzers for FUZZ_SECONDS each (make check runs them 5 s), adding what reached new code
# to fuzz/corpus/ (scripts/fuzz).
FUZZ_SECONDS ?= 1800
fuzz:
	@"$(HZC_DEPS)" check
	@scripts/fuzz --seconds $(FUZZ_SECONDS) --merge

bench:
	@"$(HZC_DEPS)" bench
	@$(MAKE) --no-print-directory kmod lib-bench
	@scripts/bench

bench-native:
	@"$(HZC_DEPS)" bench
	@$(MAKE) --no-print-directory lib-bench
	@scripts/bench-native

bench-hosts:
	@"$(HZC_DEPS)" bench
	@$(MAKE) --no-print-directory kmod lib-bench
	@scripts/bench-hosts

install: kmod lib
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)
	$(if $(DESTDIR),,-ldconfig)
	$(MAKE) -C kmod install DESTDIR=$(DESTDIR)

dkms-install:
	$(MAKE) -C kmod dkms-install

deb:
	@"$(HZC_DEPS)" package
	@scripts/deb

deb-check: deb
	@tests/harness/deb --out $(BUILD)/results/deb $(BUILD)/deb

lint:
	@scripts/lint

format:
	@git ls-files -- 'userspace/*.cpp' 'userspace/*.h' 'userspace/*.hpp' \
		'tests/*.cpp' 'tests/*.h' 'examples/*.cpp' 'examples/*.c' \
		| xargs -r clang-format -i

clean:
	$(MAKE) -C kmod clean
	rm -rf $(BUILD)
