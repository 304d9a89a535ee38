# SPDX-License-Identifier: MIT
# Tests.  `make test` installs what the tests need (as root, with apt-get),
# builds the library, its other builds and the test programs into
# $(BUILD)/test/, and runs them all, one after the other, with
# scripts/run_tests.py.  test/README.md describes the kit.
#
#   make test                          everything, against hakmem
#   make test-glibc                    the standard-API tests against glibc
#                                      (checks the tests themselves)
#   make test TESTS='api fork'         only tests whose names contain a word
#   make test-apps                     real software's own tests, at full size
#   make stress, make fuzz             long runs (see below)
#   python3 scripts/run_tests.py -h    the runner's own options
#
# Tests are found by their place; no list names them.  A source's directory
# is its kind, and says how it is built and run:
#
#   test/api/X.c|.cpp   the standard API; passes against glibc too.  Built as
#                       $(BUILD)/test/X (libc only) and run with hakmem
#                       preloaded, or as is against glibc
#   test/preload/X.c    the same build, run only with hakmem preloaded
#   test/hakmem/X.c     hakmem-only: $(BUILD)/test/static/X, linked with
#                       libhakmem.a
#   test/hardened/X.c   the hardened library only: $(BUILD)/test/hardened/X,
#                       linked with libhakmem-hardened.a
#   test/unit/X.c       internals: $(BUILD)/test/unit/X, compiled with -Isrc
#                       (#include "api/api.h") and linked with every object
#                       file of the library
#   test/fuzz/X.c       a libFuzzer target, $(BUILD)/test/fuzz/X (clang), with
#                       its seeds in test/fuzz/corpus/X/
#   test/programs/X.sh  a script running real programs with hakmem preloaded
#   test/apps/X.sh|.py  real software's own tests or workloads with hakmem
#                       preloaded: a quick run in make test, all of it in
#                       make test-apps
#   test/lib/           not tests: libraries the tests load, shell helpers
#
# A test source may start with tag lines, one comment each, before anything
# else (after a #! line in a script):
#
#   /* test-builds: static standard ubsan asan tsan */   more builds to run in
#   /* test-env: VAR=value ... */                        its environment
#   /* test-timeout: 180 */                              seconds (default 120)
#   # test-timeout-full: 900                             the same in test-apps
#   /* test-run: NAME VAR=value ... */                   one more run of the
#                                         plain build, with hakmem preloaded
#   # test-needs: git python3                            commands it needs
#
# Make reads only test-builds (below); scripts/run_tests.py reads them all
# and documents their meaning.  Each build of a test is a program:
#
#   $(BUILD)/test/static/X   linked with libhakmem.a (replaces malloc & co)
#   $(BUILD)/test/standard/X linked with the `standard` variant (checks on)
#   $(BUILD)/test/observe/X  linked with the `observe` variant (fast-path counters)
#   $(BUILD)/test/hardened/X linked with the hardened library
#   $(BUILD)/test/ubsan/X    linked with an UBSan build of libhakmem.a
#   $(BUILD)/test/asan/X     hak_* API against an ASan build (HAK_NO_OVERRIDE)
#   $(BUILD)/test/tsan/X     hak_* API against a TSan build (HAK_NO_OVERRIDE)
#
# A test that needs link flags of its own sets TEST_LDFLAGS_<name> here.

PYTHON ?= python3

TEST_OUT      := $(BUILD)/test
TEST_COMMON   := -O2 -g -D_GNU_SOURCE -fno-builtin -Wall -Wextra -Wno-unused-parameter \
                 -Iinclude -Itest -pthread
TEST_CFLAGS   := -std=gnu11 $(TEST_COMMON)
TEST_CXXFLAGS := -std=gnu++17 $(TEST_COMMON) -fno-allocation-dce
TEST_LDLIBS   := -ldl -pthread
TEST_HDRS     := test/testutil.h include/hakmem.h test/test.mk

# ---- discovery ----
TEST_KINDS := api preload hakmem hardened unit fuzz
test_sources = $(sort $(wildcard test/$(1)/*.c test/$(1)/*.cpp))
test_names = $(basename $(notdir $(call test_sources,$(1))))
TEST_SRCS := $(foreach k,$(TEST_KINDS),$(call test_sources,$(k)))
TEST_NAMES := $(basename $(notdir $(TEST_SRCS)))
ifneq ($(words $(TEST_NAMES)),$(words $(sort $(TEST_NAMES))))
$(error two tests have the same name: $(TEST_SRCS))
endif
$(foreach s,$(TEST_SRCS),$(eval TEST_SRC_$(basename $(notdir $(s))) := $(s)))

# "build:name" for every build named on a test-builds tag line.
TEST_TAGS := $(shell awk 'FNR == 1 { tags = 1 } /SPDX-License-Identifier:/ && FNR == 1 { next } \
  tags && !/^(\/\*|\/\/) *test-[a-z-]+:/ { tags = 0 } \
  tags && /test-builds:/ { sub(/.*test-builds:/, ""); sub(/\*\/.*/, ""); \
    n = split(FILENAME, path, "/"); sub(/\.[a-z]+$$/, "", path[n]); \
    for (i = 1; i <= NF; i++) print $$i ":" path[n] }' $(TEST_SRCS) /dev/null)
test_tagged = $(patsubst $(1):%,%,$(filter $(1):%,$(TEST_TAGS)))

# The programs of each build.
TEST_PLAIN_BINS    := $(addprefix $(TEST_OUT)/,$(call test_names,api) $(call test_names,preload))
TEST_STATIC_BINS   := $(addprefix $(TEST_OUT)/static/,$(call test_names,hakmem) $(call test_tagged,static))
TEST_UNIT_BINS     := $(addprefix $(TEST_OUT)/unit/,$(call test_names,unit))
TEST_STANDARD_BINS := $(addprefix $(TEST_OUT)/standard/,$(call test_tagged,standard))
TEST_OBSERVE_BINS  := $(addprefix $(TEST_OUT)/observe/,$(call test_tagged,observe))
TEST_HARDENED_BINS := $(addprefix $(TEST_OUT)/hardened/,$(call test_names,hardened) $(call test_tagged,hardened))
TEST_UBSAN_BINS    := $(addprefix $(TEST_OUT)/ubsan/,$(call test_tagged,ubsan))
TEST_ASAN_BINS     := $(addprefix $(TEST_OUT)/asan/,$(call test_tagged,asan))
TEST_TSAN_BINS     := $(addprefix $(TEST_OUT)/tsan/,$(call test_tagged,tsan))
FUZZ_NAMES         := $(call test_names,fuzz)
FUZZ_BINS          := $(addprefix $(TEST_OUT)/fuzz/,$(FUZZ_NAMES))

# Libraries the tests load (test/lib/).
TEST_HELPER_LIBS := $(TEST_OUT)/libearly.so $(TEST_OUT)/libearly_dl.so $(TEST_OUT)/libtls_dl.so \
                    $(TEST_OUT)/libcxx_plugin.so $(TEST_OUT)/libcxx_ctor.so $(TEST_OUT)/libatfork.so \
                    $(TEST_OUT)/libframe_a.so $(TEST_OUT)/libframe_b.so
# `early` is linked to libearly.so and `fork_handlers` to libatfork.so, found next
# to them or one directory up.
TEST_LDFLAGS_early := -L$(TEST_OUT) -learly -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/..'
TEST_LDFLAGS_fork_handlers := -L$(TEST_OUT) -latfork -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/..'

# A sanitizer build, or a fuzz target, is tried only if the compiler has
# its runtime.
FUZZ_CC ?= clang
test_have_lib = $(shell test -e "$$($(1) -print-file-name=$(2))" && echo yes)
TEST_SAN_BINS = $(if $(call test_have_lib,$(CC),libubsan.so),$(TEST_UBSAN_BINS)) \
                $(if $(call test_have_lib,$(CC),libasan.so),$(TEST_ASAN_BINS)) \
                $(if $(call test_have_lib,$(CC),libtsan.so),$(TEST_TSAN_BINS))
fuzz_available = $(call test_have_lib,$(FUZZ_CC),libclang_rt.fuzzer-$(shell uname -m).a)

# Every program the runner may run, whether or not this machine can build it;
# the runner checks that it finds the same tests.
TEST_ALL_BINS := $(TEST_PLAIN_BINS) $(TEST_STATIC_BINS) $(TEST_UNIT_BINS) $(TEST_STANDARD_BINS) \
                 $(TEST_OBSERVE_BINS) $(TEST_HARDENED_BINS) \
                 $(TEST_UBSAN_BINS) $(TEST_ASAN_BINS) $(TEST_TSAN_BINS) $(FUZZ_BINS)

UBSAN_FLAGS := -fsanitize=undefined -fno-sanitize-recover=undefined
ASAN_FLAGS  := -fsanitize=address -fno-omit-frame-pointer
TSAN_FLAGS  := -fsanitize=thread

.PHONY: test test-deps test-programs test-plain test-glibc test-apps test-clean test-always

test: test-deps
	@$(MAKE) --no-print-directory all bench-programs $(BUILD)/options_doc
	@$(MAKE) --no-print-directory -k test-programs || \
	  echo "test: some test programs did not build; the runner reports them as FAIL"
	@mkdir -p $(TEST_OUT); printf '%s\n' $(TEST_ALL_BINS) > $(TEST_OUT)/programs.list
	@$(PYTHON) scripts/run_tests.py --build $(BUILD) --make-list $(TEST_OUT)/programs.list $(TESTS)

test-glibc: test-deps
	@$(MAKE) --no-print-directory test-plain
	@$(PYTHON) scripts/run_tests.py --build $(BUILD) --allocator glibc $(TESTS)

# Only the scripts of test/apps, at full size.
test-apps: test-deps
	@$(MAKE) --no-print-directory lib
	@$(PYTHON) scripts/run_tests.py --build $(BUILD) --size full -v app.

test-deps:
	@sh test/deps.sh

test-programs: $(TEST_PLAIN_BINS) $(TEST_STATIC_BINS) $(TEST_UNIT_BINS) $(TEST_STANDARD_BINS) \
               $(TEST_OBSERVE_BINS) $(TEST_HARDENED_BINS) \
               $(TEST_SAN_BINS) $(if $(fuzz_available),$(FUZZ_BINS)) $(BUILD)/pagetest/libhakmem.so
test-plain: $(TEST_PLAIN_BINS)

test-clean:
	rm -rf $(TEST_OUT) $(BUILD)/standard $(BUILD)/observe $(BUILD)/ubsan $(BUILD)/asan $(BUILD)/tsan $(BUILD)/fuzz

# ---- how a test program is built ----
# Each rule removes its target first: a program that no longer builds must
# not leave a stale binary behind for the runner.  The compiler follows the
# source's language; unit tests and hakmem-only ones see the library's
# internal headers.
test_compile = $(if $(filter %.cpp,$<),$(CXX) $(TEST_CXXFLAGS),$(CC) $(TEST_CFLAGS)) \
               $(if $(filter test/unit/% test/hakmem/%,$<),-Isrc)
# Linking libhakmem.a: its malloc replaces libc's; -rdynamic lets the tests
# see with dlsym/dladdr that it does.  Unit tests take every object file.
test_whole_archive = -Wl,--whole-archive $(1) -Wl,--no-whole-archive
test_haklink = -rdynamic $(if $(filter test/unit/%,$<),$(call test_whole_archive,$(1)),$(1)) \
               $(TEST_LDFLAGS_$*) $(TEST_LDLIBS)

.SECONDEXPANSION:
TEST_PREREQS = $$(TEST_SRC_$$*) $(TEST_HDRS)
# Last on a rule's line: what follows `|` is only built first, never a reason to relink.
TEST_LOADED = | $(TEST_HELPER_LIBS)

$(TEST_PLAIN_BINS): $(TEST_OUT)/%: $(TEST_PREREQS) $(TEST_LOADED)
	@mkdir -p $(@D); rm -f $@
	$(test_compile) $< -o $@ $(TEST_LDFLAGS_$*) $(TEST_LDLIBS)

$(TEST_STATIC_BINS): $(TEST_OUT)/static/%: $(TEST_PREREQS) $(LIBA) $(TEST_LOADED)
	@mkdir -p $(@D); rm -f $@
	$(test_compile) $< -o $@ $(call test_haklink,$(LIBA))

$(TEST_UNIT_BINS): $(TEST_OUT)/unit/%: $(TEST_PREREQS) test/unit/unit.h $(LIB_HDRS) $(LIBA) $(TEST_LOADED)
	@mkdir -p $(@D); rm -f $@
	$(test_compile) $< -o $@ $(call test_haklink,$(LIBA))

$(TEST_STANDARD_BINS): $(TEST_OUT)/standard/%: $(TEST_PREREQS) $(BUILD)/standard/libhakmem.a $(TEST_LOADED)
	@mkdir -p $(@D); rm -f $@
	$(test_compile) $< -o $@ $(call test_haklink,$(BUILD)/standard/libhakmem.a)

$(TEST_OBSERVE_BINS): $(TEST_OUT)/observe/%: $(TEST_PREREQS) $(BUILD)/observe/libhakmem.a $(TEST_LOADED)
	@mkdir -p $(@D); rm -f $@
	$(test_compile) $< -o $@ $(call test_haklink,$(BUILD)/observe/libhakmem.a)

$(TEST_HARDENED_BINS): $(TEST_OUT)/hardened/%: $(TEST_PREREQS) $(BUILD)/libhakmem-hardened.a $(TEST_LOADED)
	@mkdir -p $(@D); rm -f $@
	$(test_compile) $< -o $@ $(call test_haklink,$(BUILD)/libhakmem-hardened.a)

$(TEST_UBSAN_BINS): $(TEST_OUT)/ubsan/%: $(TEST_PREREQS) $(BUILD)/ubsan/libhakmem.a $(TEST_LOADED)
	@mkdir -p $(@D); rm -f $@
	$(test_compile) $(UBSAN_FLAGS) $< -o $@ $(call test_haklink,$(BUILD)/ubsan/libhakmem.a)

$(TEST_ASAN_BINS): $(TEST_OUT)/asan/%: $(TEST_PREREQS) $(BUILD)/asan/libhakmem.a $(TEST_LOADED)
	@mkdir -p $(@D); rm -f $@
	$(test_compile) $(ASAN_FLAGS) $< -o $@ $(BUILD)/asan/libhakmem.a $(TEST_LDLIBS)

$(TEST_TSAN_BINS): $(TEST_OUT)/tsan/%: $(TEST_PREREQS) $(BUILD)/tsan/libhakmem.a $(TEST_LOADED)
	@mkdir -p $(@D); rm -f $@
	$(test_compile) $(TSAN_FLAGS) $< -o $@ $(BUILD)/tsan/libhakmem.a $(TEST_LDLIBS)

# ---- libraries the tests load ----
$(TEST_OUT)/libearly.so: test/lib/early_lib.c $(TEST_HDRS)
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) -fPIC -shared $< -o $@

$(TEST_OUT)/libearly_dl.so: test/lib/early_lib.c $(TEST_HDRS)
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) -DEARLY_DLOPEN -fPIC -shared $< -o $@

$(TEST_OUT)/libatfork.so: test/lib/atfork_lib.c $(TEST_HDRS)
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) -fPIC -shared $< -o $@

$(TEST_OUT)/libtls_dl.so: test/lib/tls_lib.c test/test.mk
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) -fPIC -shared $< -o $@

$(TEST_OUT)/libframe_a.so $(TEST_OUT)/libframe_b.so: $(TEST_OUT)/libframe_%.so: test/lib/frame_lib.S test/test.mk
	@mkdir -p $(@D); rm -f $@
	$(CC) $(if $(filter b,$*),-DFRAME_B) -fPIC -shared $< -o $@

$(TEST_OUT)/libcxx_plugin.so: test/lib/cxx_plugin.cpp test/test.mk
	@mkdir -p $(@D); rm -f $@
	$(CXX) $(TEST_CXXFLAGS) -fPIC -shared $< -o $@

$(TEST_OUT)/libcxx_ctor.so: test/lib/cxx_ctor_lib.cpp test/test.mk
	@mkdir -p $(@D); rm -f $@
	$(CXX) $(TEST_CXXFLAGS) -fPIC -shared $< -o $@

# ---- other builds of the library ----
# The library's own Makefile decides whether they are up to date.
$(BUILD)/standard/libhakmem.a: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/standard VARIANT=standard $@

$(BUILD)/observe/libhakmem.a: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/observe VARIANT=observe $@

ifneq ($(VARIANT),hardened)
$(BUILD)/libhakmem-hardened.a: test-always
	@$(MAKE) --no-print-directory VARIANT=hardened $@
endif

# Pretends the page size HAKMEM_TEST_PAGE_SIZE says (test/programs/page_sizes.sh).
$(BUILD)/pagetest/libhakmem.so: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/pagetest EXTRA_CFLAGS=-DHK_TEST_PAGE_SIZE $@

$(BUILD)/ubsan/libhakmem.a: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/ubsan EXTRA_CFLAGS="$(UBSAN_FLAGS)" $@

$(BUILD)/asan/libhakmem.a: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan EXTRA_CFLAGS="$(ASAN_FLAGS) -DHAK_NO_OVERRIDE" $@

$(BUILD)/tsan/libhakmem.a: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan EXTRA_CFLAGS="$(TSAN_FLAGS) -DHAK_NO_OVERRIDE" $@

test-always:

# ---- make stress: the stress test, for long ----
#   make stress [STRESS_SECONDS=600] [STRESS_THREADS=4] [STRESS_SEED=0x...]
#               [STRESS_BUILD=static|standard|hardened|preload]
# Killed (and failed) if it runs two minutes past its time.
STRESS_SECONDS ?= 600
STRESS_THREADS ?= 4
STRESS_BUILD   ?= static
STRESS_PROG_static   := $(TEST_OUT)/static/stress
STRESS_PROG_standard := $(TEST_OUT)/standard/stress
STRESS_PROG_hardened := $(TEST_OUT)/hardened/stress
STRESS_PROG_preload  := $(TEST_OUT)/stress
STRESS_PROG := $(STRESS_PROG_$(STRESS_BUILD))

.PHONY: stress
stress: lib
	@test -n "$(STRESS_PROG)" || { echo "STRESS_BUILD must be static, standard, hardened or preload"; exit 2; }
	@$(MAKE) --no-print-directory $(STRESS_PROG)
	HAKMEM_TEST_ALLOCATOR=hakmem $(if $(filter preload,$(STRESS_BUILD)),LD_PRELOAD=$(LIBSO)) \
	  timeout -k 10 $$(($(STRESS_SECONDS) + 120)) $(STRESS_PROG) --seconds $(STRESS_SECONDS) \
	  --threads $(STRESS_THREADS) $(if $(STRESS_SEED),--seed $(STRESS_SEED))

# ---- fuzz targets: test/fuzz/X.c, with a seed corpus in test/fuzz/corpus/X/ ----
# Built with clang's libFuzzer against a build of the library with
# HAK_NO_OVERRIDE (malloc stays the sanitizer's) and AddressSanitizer, so
# that the library's own memory accesses are checked.  make test runs each
# for a short while (scripts/run_tests.py);
#   make fuzz [FUZZ_SECONDS=60]
# runs each for FUZZ_SECONDS, keeping what it learns in $(BUILD)/fuzz-corpus/X
# and a crashing input in $(BUILD)/fuzz-artifacts/.
FUZZ_SECONDS ?= 60
FUZZ_SAN     := -fsanitize=address -fno-omit-frame-pointer

$(BUILD)/fuzz/libhakmem.a: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/fuzz CC=$(FUZZ_CC) \
	  EXTRA_CFLAGS="$(FUZZ_SAN) -fsanitize=fuzzer-no-link -DHAK_NO_OVERRIDE" $@

$(FUZZ_BINS): $(TEST_OUT)/fuzz/%: test/fuzz/%.c $(TEST_HDRS) $(BUILD)/fuzz/libhakmem.a
	@mkdir -p $(@D); rm -f $@
	$(FUZZ_CC) -std=gnu11 -O1 -g -D_GNU_SOURCE -Wall -Wextra -Iinclude -Itest $(FUZZ_SAN) \
	  -fsanitize=fuzzer $< -o $@ $(BUILD)/fuzz/libhakmem.a -pthread -ldl

.PHONY: fuzz
fuzz: test-deps
	@if [ -z "$(fuzz_available)" ]; then \
	  echo "fuzz: $(FUZZ_CC) with libFuzzer is not installed (Debian: clang, libclang-rt-14-dev); skipped"; \
	else \
	  $(MAKE) --no-print-directory $(FUZZ_BINS) && mkdir -p $(BUILD)/fuzz-artifacts && \
	  for t in $(FUZZ_NAMES); do \
	    mkdir -p $(BUILD)/fuzz-corpus/$$t && \
	    $(TEST_OUT)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -timeout=20 -rss_limit_mb=4096 -error_exitcode=1 \
	      -print_final_stats=1 -artifact_prefix=$(BUILD)/fuzz-artifacts/$$t- \
	      $(BUILD)/fuzz-corpus/$$t test/fuzz/corpus/$$t || exit 1; \
	  done; \
	fi
