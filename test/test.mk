# SPDX-License-Identifier: MIT
# Tests.  `make test` installs what the tests need (as root, with apt-get),
# builds the library, its `standard` and sanitizer builds and the test
# programs into $(BUILD)/test/, and runs them all, one after the other, with
# scripts/run_tests.py.
#
#   make test                          everything, against hakmem
#   make test-glibc                    the standard-API tests against glibc
#                                      (checks the tests themselves)
#   make test TESTS='api fork'         only tests whose names contain a word
#   python3 scripts/run_tests.py -h    the runner's own options
#
# Test programs (see the table in scripts/run_tests.py):
#   $(BUILD)/test/X          plain programs: run against glibc, or against
#                            hakmem with LD_PRELOAD=$(BUILD)/libhakmem.so
#   $(BUILD)/test/static/X   linked with libhakmem.a (replaces malloc & co)
#   $(BUILD)/test/standard/X linked with the `standard` variant (checks on)
#   $(BUILD)/test/ubsan/X    linked with an UBSan build of libhakmem.a
#   $(BUILD)/test/asan/X     hak_* API against an ASan build (HAK_NO_OVERRIDE)
#   $(BUILD)/test/tsan/X     hak_* API against a TSan build (HAK_NO_OVERRIDE)

PYTHON ?= python3

TEST_OUT      := $(BUILD)/test
TEST_COMMON   := -O2 -g -D_GNU_SOURCE -fno-builtin -Wall -Wextra -Wno-unused-parameter \
                 -Iinclude -Itest -pthread
TEST_CFLAGS   := -std=gnu11 $(TEST_COMMON)
TEST_CXXFLAGS := -std=gnu++17 $(TEST_COMMON) -fno-allocation-dce
TEST_LDLIBS   := -ldl -pthread
TEST_HDRS     := test/testutil.h include/hakmem.h test/test.mk
# Linking libhakmem.a: its malloc replaces libc's; -rdynamic lets the tests
# see with dlsym/dladdr that it does.
TEST_HAKLINK   = -rdynamic $(1) $(TEST_LDLIBS)

# Plain programs: the standard-API tests, which pass against glibc too, and
# preload_check (run only with hakmem preloaded).
TEST_PLAIN := api align usable_size integrity realloc threads cross_thread \
              thread_churn thread_exit fork dlopen_tls libc_interop \
              address_space_limit memory_reuse preload_check memory_lifecycle options
# Linked with libhakmem.a (the last four are hakmem-only).
TEST_STATIC := api realloc threads cross_thread fork early dlopen_tls \
               libc_interop address_space_limit \
               steady_state bad_free hak_api hak_threads prewarm stats
TEST_STANDARD := integrity threads cross_thread thread_exit fork
TEST_UBSAN  := api realloc integrity threads cross_thread thread_exit hak_api
TEST_ASAN   := hak_api hak_threads
TEST_TSAN   := hak_threads

TEST_PLAIN_BINS := $(TEST_PLAIN:%=$(TEST_OUT)/%) $(TEST_OUT)/cxx_new \
                   $(TEST_OUT)/early $(TEST_OUT)/libearly.so $(TEST_OUT)/libearly_dl.so \
                   $(TEST_OUT)/libtls_dl.so
TEST_STATIC_BINS := $(TEST_STATIC:%=$(TEST_OUT)/static/%) $(TEST_OUT)/static/cxx_new \
                    $(TEST_STANDARD:%=$(TEST_OUT)/standard/%)

# A sanitizer build is tried only if the compiler has its runtime.
test_have_rt = $(shell test -e "$$($(CC) -print-file-name=lib$(1).so)" && echo yes)
TEST_SAN_BINS = \
  $(if $(call test_have_rt,ubsan),$(TEST_UBSAN:%=$(TEST_OUT)/ubsan/%)) \
  $(if $(call test_have_rt,asan),$(TEST_ASAN:%=$(TEST_OUT)/asan/%)) \
  $(if $(call test_have_rt,tsan),$(TEST_TSAN:%=$(TEST_OUT)/tsan/%))

UBSAN_FLAGS := -fsanitize=undefined -fno-sanitize-recover=undefined
ASAN_FLAGS  := -fsanitize=address -fno-omit-frame-pointer
TSAN_FLAGS  := -fsanitize=thread

.PHONY: test test-deps test-programs test-plain test-glibc test-clean test-always

test: test-deps
	@$(MAKE) --no-print-directory all bench-programs $(BUILD)/options_doc
	@$(MAKE) --no-print-directory -k test-programs || \
	  echo "test: some test programs did not build; the runner reports them as FAIL"
	@$(PYTHON) scripts/run_tests.py --build $(BUILD) $(TESTS)

test-glibc: test-deps
	@$(MAKE) --no-print-directory test-plain
	@$(PYTHON) scripts/run_tests.py --build $(BUILD) --allocator glibc $(TESTS)

test-deps:
	@sh test/deps.sh

test-programs: $(TEST_PLAIN_BINS) $(TEST_STATIC_BINS) $(TEST_SAN_BINS)
test-plain: $(TEST_PLAIN_BINS)

test-clean:
	rm -rf $(TEST_OUT) $(BUILD)/standard $(BUILD)/ubsan $(BUILD)/asan $(BUILD)/tsan

# Each rule removes its target first: a program that no longer builds must
# not leave a stale binary behind for the runner.

# ---- plain programs ----
$(TEST_OUT)/%: test/%.c $(TEST_HDRS)
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LDLIBS)

$(TEST_OUT)/cxx_new: test/cxx_new.cpp $(TEST_HDRS)
	@mkdir -p $(@D); rm -f $@
	$(CXX) $(TEST_CXXFLAGS) $< -o $@ $(TEST_LDLIBS)

$(TEST_OUT)/libearly.so: test/early_lib.c $(TEST_HDRS)
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) -fPIC -shared $< -o $@

$(TEST_OUT)/libearly_dl.so: test/early_lib.c $(TEST_HDRS)
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) -DEARLY_DLOPEN -fPIC -shared $< -o $@

$(TEST_OUT)/libtls_dl.so: test/tls_lib.c test/test.mk
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) -fPIC -shared $< -o $@

# Never calls pthread_create; linked to libearly.so, found next to it.
$(TEST_OUT)/early: test/early.c $(TEST_OUT)/libearly.so $(TEST_OUT)/libearly_dl.so $(TEST_HDRS)
	@mkdir -p $(@D); rm -f $@
	$(CC) $(filter-out -pthread,$(TEST_CFLAGS)) $< -o $@ -L$(TEST_OUT) -learly \
	  -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/..' -ldl

# ---- linked with libhakmem.a ----
$(TEST_OUT)/static/%: test/%.c $(TEST_HDRS) $(LIBA)
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) $< -o $@ $(call TEST_HAKLINK,$(LIBA))

$(TEST_OUT)/static/cxx_new: test/cxx_new.cpp $(TEST_HDRS) $(LIBA)
	@mkdir -p $(@D); rm -f $@
	$(CXX) $(TEST_CXXFLAGS) $< -o $@ $(call TEST_HAKLINK,$(LIBA))

$(TEST_OUT)/static/early: test/early.c $(TEST_OUT)/libearly.so $(TEST_OUT)/libearly_dl.so $(TEST_HDRS) $(LIBA)
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) $< -o $@ -L$(TEST_OUT) -learly -Wl,-rpath,'$$ORIGIN/..' \
	  $(call TEST_HAKLINK,$(LIBA))

# ---- other builds of the library ----
# The library's own Makefile decides whether they are up to date.
$(BUILD)/standard/libhakmem.a: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/standard VARIANT=standard $@

$(BUILD)/ubsan/libhakmem.a: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/ubsan EXTRA_CFLAGS="$(UBSAN_FLAGS)" $@

$(BUILD)/asan/libhakmem.a: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/asan EXTRA_CFLAGS="$(ASAN_FLAGS) -DHAK_NO_OVERRIDE" $@

$(BUILD)/tsan/libhakmem.a: test-always
	@$(MAKE) --no-print-directory BUILD=$(BUILD)/tsan EXTRA_CFLAGS="$(TSAN_FLAGS) -DHAK_NO_OVERRIDE" $@

test-always:

$(TEST_OUT)/standard/%: test/%.c $(TEST_HDRS) $(BUILD)/standard/libhakmem.a
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) $< -o $@ $(call TEST_HAKLINK,$(BUILD)/standard/libhakmem.a)

$(TEST_OUT)/ubsan/%: test/%.c $(TEST_HDRS) $(BUILD)/ubsan/libhakmem.a
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) $(UBSAN_FLAGS) $< -o $@ $(call TEST_HAKLINK,$(BUILD)/ubsan/libhakmem.a)

$(TEST_OUT)/asan/%: test/%.c $(TEST_HDRS) $(BUILD)/asan/libhakmem.a
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) $(ASAN_FLAGS) $< -o $@ $(BUILD)/asan/libhakmem.a $(TEST_LDLIBS)

$(TEST_OUT)/tsan/%: test/%.c $(TEST_HDRS) $(BUILD)/tsan/libhakmem.a
	@mkdir -p $(@D); rm -f $@
	$(CC) $(TEST_CFLAGS) $(TSAN_FLAGS) $< -o $@ $(BUILD)/tsan/libhakmem.a $(TEST_LDLIBS)
