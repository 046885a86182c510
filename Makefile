# Two-command entry points. Each target installs what it needs (Debian 12,
# as root), configures and builds. Everything lands in build/.
#
#   make demo    a 3-member local group multicasting over shared memory
#   make kv-demo three spindle-kv replicas (RESP on 6400-6402) and a short
#                redis-cli session against them (docs/KV.md)
#   make dds-demo a DDS-style publisher and subscriber (examples/dds,
#                docs/DDS.md)
#   make test    the whole test suite through ctest
#   make asan    the suite under AddressSanitizer + UBSan (build-asan/)
#   make tsan    the suite under ThreadSanitizer (build-tsan/)
#   make bench   spindle-bench in build/tools/
#   make install installs the library, headers, pkg-config and CMake files,
#                the tools and the manual pages
#   make check   static checks (clang-format, layering, environment variables,
#                manual pages, clang-tidy, cppcheck)
#                of the configured build in $(BUILD); non-zero on any finding
#   make models  the protocol models of models/ checked by spin (docs/MODELS.md);
#                non-zero when a model fails or a broken variant is not caught
#   make fuzz    every libFuzzer target for FUZZ_SECONDS (60) each, FUZZ_JOBS
#                (one per core) at a time, built with clang in build-fuzz/;
#                non-zero on any finding (docs/FUZZING.md)
#   make abi     the library's ABI against the baseline abi/ (abidiff,
#                docs/ABI.md); non-zero when a public function was removed
#                or a public type changed other than by appended members
#   make deb     the Debian packages in build-deb/ with dpkg-buildpackage
#                (DEB_BUILD_OPTIONS=nocheck by default: the suite is `make
#                test`), then lintian; non-zero on a lintian error
#                (docs/PACKAGING.md)
#   make deb-check  the packages of `make deb` installed into a clean Debian 12
#                root (debootstrap) and used there: a few minutes, network

BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
WERROR  ?= $(if $(CI),ON,OFF)
CTEST_FLAGS ?= --output-on-failure
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= $(JOBS)
DEB_OUT      ?= build-deb
DEB_BUILD_OPTIONS ?= nocheck

.PHONY: all deps configure build demo dds-demo kv-demo test asan tsan bench install check models fuzz abi deb \
	deb-check clean

all: build

deps:
	@sh scripts/install-deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DSPINDLE_WERROR=$(WERROR) $(CMAKE_FLAGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@sh scripts/demo.sh $(BUILD)

dds-demo: build
	@sh scripts/dds-demo.sh $(BUILD)

kv-demo: build
	@sh scripts/kv-demo.sh $(BUILD)

test: build
	cd $(BUILD) && ctest $(CTEST_FLAGS)

asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DSPINDLE_ASAN=ON -DCMAKE_BUILD_TYPE=Debug"

tsan:
	$(MAKE) test BUILD=build-tsan CMAKE_FLAGS="-DSPINDLE_TSAN=ON -DCMAKE_BUILD_TYPE=Debug"

bench: build

install: build
	cmake --install $(BUILD)

# Re-running cmake on a configured tree refreshes compile_commands.json (new
# files) and the generated headers (include/spindle/version.h) that
# clang-tidy reads; nothing needs to be built.
check: configure
	cmake -S . -B $(BUILD) >/dev/null
	sh scripts/check-static.sh $(BUILD)

# Needs only spin and a C compiler, not the build.
models: deps
	bash scripts/check-models.sh

# Only the fuzz targets and the library they test: tests and tools would
# double the build for nothing the stage runs. Configured every time (cheap)
# so that CC=clang reaches a fresh build-fuzz.
fuzz: deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DSPINDLE_FUZZ=ON -DSPINDLE_BUILD_TESTS=OFF \
		-DSPINDLE_BUILD_TOOLS=OFF -DSPINDLE_WERROR=$(WERROR) -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	bash scripts/fuzz.sh -j $(FUZZ_JOBS) $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Only the library: the ABI is the shared library's (it needs the default
# RelWithDebInfo build type, or Debug, for abidw's debug information).
abi: configure
	cmake --build $(BUILD) -j $(JOBS) --target spindle
	bash scripts/check-abi.sh --strict $(BUILD)

# Builds from a copy of the tree under $(DEB_OUT), so dpkg-buildpackage's
# output stays there too.
deb:
	DEB_BUILD_OPTIONS="$(DEB_BUILD_OPTIONS)" bash scripts/build-deb.sh $(DEB_OUT)

deb-check: deb
	bash scripts/check-deb.sh $(DEB_OUT)

clean:
	rm -rf build build-asan build-tsan $(FUZZ_BUILD) $(DEB_OUT)
