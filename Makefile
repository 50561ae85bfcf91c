# hzc top-level Makefile.  `make check` and `make demo` do all the set-up.
#
#   make            build hzc.ko and libhzc (warnings are errors)
#   make check      install deps, build, run host tests + lint + guest tests
#   make demo       install deps, build, boot the guest and run the example
#   make bench      run the benchmarks in the guest and print their tables
#   make lint       checkpatch --strict, sparse, clang-format
#   make format     apply clang-format to userspace sources
#
# KDIR selects the kernel tree the module is built against (default: the
# Debian kernel the guest boots, see scripts/kver).  BUILD is the CMake
# build directory.

BUILD ?= build
JOBS  ?= $(shell nproc)
KVER  ?= $(shell scripts/kver 2>/dev/null)
KDIR  ?= /lib/modules/$(KVER)/build
CMAKE_BUILD_TYPE ?= RelWithDebInfo

export BUILD KDIR

.PHONY: all deps kmod lib check demo bench lint format clean

all: kmod lib

deps:
	@scripts/deps

kmod:
	$(MAKE) -C kmod KDIR=$(KDIR)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(CMAKE_BUILD_TYPE) -DHZC_WERROR=ON

lib: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j$(JOBS)

# deps first, then a fresh make so KVER/KDIR see the installed kernel.
check:
	@scripts/deps
	@$(MAKE) --no-print-directory all
	@scripts/check

demo:
	@scripts/deps
	@$(MAKE) --no-print-directory all
	@scripts/demo

bench:
	@scripts/deps
	@$(MAKE) --no-print-directory all
	@scripts/bench

lint:
	@scripts/lint

format:
	@git ls-files -- 'userspace/*.cpp' 'userspace/*.h' 'userspace/*.hpp' \
		'tests/*.cpp' 'tests/*.h' 'examples/*.cpp' 'examples/*.c' \
		| xargs -r clang-format -i

clean:
	$(MAKE) -C kmod KDIR=$(KDIR) clean
	rm -rf $(BUILD)
