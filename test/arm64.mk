# SPDX-License-Identifier: MIT
# The library and its tests built for arm64 (aarch64) with Debian's cross
# compilers, and run on this machine under qemu-user.
#
#   make test-arm64 [TESTS='api fork'] [ARM64_TIMEOUT_SCALE=8]
#                   [ARM64_QEMU='qemu-aarch64 -L /usr/aarch64-linux-gnu -p 65536']
#
# installs what is missing (`test/deps.sh arm64`: gcc-aarch64-linux-gnu,
# g++-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user; as root with
# apt-get, unless HAKMEM_NO_APT=1), builds the libraries and the test programs
# into $(BUILD)/arm64 with the rules of the Makefile and test/test.mk (the
# cross tools as CC, CXX and AR), and runs them with scripts/run_tests.py
# through ARM64_QEMU (--exec-wrapper), every timeout multiplied by
# ARM64_TIMEOUT_SCALE.  qemu-aarch64 is given the target's libraries with -L,
# so nothing depends on the machine's binfmt_misc.  What cannot run emulated
# is skipped, saying why: the scripts of test/programs and test/apps (they
# preload the library into this machine's programs) and the fuzz targets
# (clang's libFuzzer); test/README.md says more.
#
# ARM64_QEMU's -p 16384 or -p 65536 sets the page size the programs see
# (sysconf) and aligns their mappings to it, but qemu-user still accepts, and
# does not enforce, protections of 4 KiB pages: not a kernel of large pages
# (test/README.md).  Without TESTS, ARM64_LARGE_PAGE_TESTS run again so.

ARM64_TOOLS         := CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ AR=aarch64-linux-gnu-ar
ARM64_SYSROOT       ?= /usr/aarch64-linux-gnu
ARM64_QEMU          ?= qemu-aarch64 -L $(ARM64_SYSROOT)
ARM64_TIMEOUT_SCALE ?= 6
# Run again with 64 KiB pages (qemu's -p): the tests of what a page's size
# decides (block alignment, huge blocks, the hardened build's guard pages,
# the class map's pages).  Not the sanitizers' runtimes, nor a second
# preloaded library, which qemu 7.2 cannot load with that page size.
ARM64_LARGE_PAGE_TESTS ?= align realloc usable_size integrity.standard integrity.hardened large_ bad_free \
                          class_map remote_handoff cross_thread.hardened api.hardened hardened.hardened prof.hardened

.PHONY: test-arm64 test-arm64-run

test-arm64:
	@sh test/deps.sh arm64
	@for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-g++ $(firstword $(ARM64_QEMU)); do \
	  command -v $$tool >/dev/null || { echo "test-arm64: $$tool is not installed" >&2; exit 1; }; done
	@$(MAKE) --no-print-directory $(ARM64_TOOLS) BUILD=$(BUILD)/arm64 fuzz_available= test-arm64-run

# Run by test-arm64 with BUILD the arm64 build directory and the cross tools.
test-arm64-run:
	@$(MAKE) --no-print-directory lib hardened
	@$(MAKE) --no-print-directory -k test-programs || \
	  echo "test-arm64: some test programs did not build; the runner reports them as FAIL"
	@mkdir -p $(TEST_OUT); printf '%s\n' $(TEST_ALL_BINS) > $(TEST_OUT)/programs.list
	@CC=$(CC) $(PYTHON) scripts/run_tests.py --build $(BUILD) --make-list $(TEST_OUT)/programs.list \
	  --exec-wrapper '$(ARM64_QEMU)' --timeout-scale $(ARM64_TIMEOUT_SCALE) $(TESTS)
	@if [ -z "$(TESTS)" ]; then echo "test-arm64: again with 64 KiB pages ($(ARM64_QEMU) -p 65536)"; \
	  CC=$(CC) $(PYTHON) scripts/run_tests.py --build $(BUILD) --exec-wrapper '$(ARM64_QEMU) -p 65536' \
	    --timeout-scale $(ARM64_TIMEOUT_SCALE) $(ARM64_LARGE_PAGE_TESTS); fi
