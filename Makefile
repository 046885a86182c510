# Two-command entry points. Each target installs what it needs (Debian 12,
# as root), configures and builds. Everything lands in build/.
#
#   make demo    a 3-member local group multicasting over shared memory
#   make test    the whole test suite through ctest
#   make asan    the suite under AddressSanitizer + UBSan (build-asan/)
#   make tsan    the suite under ThreadSanitizer (build-tsan/)
#   make bench   spindle-bench in build/tools/
#   make install installs the library, headers, pkg-config and CMake files

BUILD   ?= build
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
WERROR  ?= $(if $(CI),ON,OFF)
CTEST_FLAGS ?= --output-on-failure

.PHONY: all deps configure build demo test asan tsan bench install clean

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

test: build
	cd $(BUILD) && ctest $(CTEST_FLAGS)

asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DSPINDLE_ASAN=ON -DCMAKE_BUILD_TYPE=Debug"

tsan:
	$(MAKE) test BUILD=build-tsan CMAKE_FLAGS="-DSPINDLE_TSAN=ON -DCMAKE_BUILD_TYPE=Debug"

bench: build

install: build
	cmake --install $(BUILD)

clean:
	rm -rf build build-asan build-tsan
