# SPDX-License-Identifier: MIT
# hakmem build.  `make` builds the libraries and the launcher, `make test`
# runs the tests, `make bench` compares hakmem with the other allocators,
# `make install` installs (see dist/dist.mk).
#
#   VARIANT=fast      the default: no statistics counters on the fast paths
#   VARIANT=standard  the same with consistency checks in the slow paths
#   VARIANT=observe   standard + counters on the fast paths (the front metrics' hits)
#   VARIANT=hardened  standard + encoded free lists, canaries, guard pages,
#                     random allocation order: libhakmem-hardened.so (`make`
#                     builds it beside the default)
#   CFLAGS, CPPFLAGS, LDFLAGS
#                     the builder's flags (a distribution's hardening flags,
#                     -O3, ...), after the library's defaults, which they can
#                     override, and before the flags the code needs to be
#                     correct, which they cannot
#   EXTRA_CFLAGS      added last (the sanitizer builds of test/test.mk)
#
# Objects are rebuilt when these flags change.

CC      ?= cc
AR      ?= ar
VARIANT ?= fast
BUILD   ?= build

VARIANT_DEF_fast     := -DHAK_VARIANT=1
VARIANT_DEF_standard := -DHAK_VARIANT=2
VARIANT_DEF_observe  := -DHAK_VARIANT=3
VARIANT_DEF_hardened := -DHAK_VARIANT=4
ifeq ($(VARIANT_DEF_$(VARIANT)),)
$(error VARIANT must be fast, standard, observe or hardened)
endif
LIBNAME := $(if $(filter hardened,$(VARIANT)),libhakmem-hardened,libhakmem)

# The version is the public header's: the library is libhakmem.so.VERSION
# with the soname libhakmem.so.MAJOR.
hakmem_version = $(shell sed -n 's/^.define HAKMEM_VERSION_$(1) \([0-9][0-9]*\)$$/\1/p' include/hakmem.h)
VERSION_MAJOR := $(call hakmem_version,MAJOR)
VERSION       := $(VERSION_MAJOR).$(call hakmem_version,MINOR).$(call hakmem_version,PATCH)
ifneq ($(words $(subst ., ,$(VERSION))),3)
$(error cannot read HAKMEM_VERSION_MAJOR, _MINOR and _PATCH from include/hakmem.h)
endif
SONAME := $(LIBNAME).so.$(VERSION_MAJOR)
HARDENED_SONAME := libhakmem-hardened.so.$(VERSION_MAJOR)

WARN := -Wall -Wextra -Wno-unused-parameter
# Defaults the builder's CFLAGS may override.
LIB_DEFAULT_CFLAGS := -O2 -g -fno-plt -fno-stack-protector $(WARN)
# What the code relies on: GNU C; position-independent code exporting only
# the HK_EXPORT names, whose calls to each other bind locally; one
# %fs-relative access to the thread state (initial-exec TLS); unwind tables
# for the C++ exceptions thrown through operator new; and malloc & co never
# treated as builtins, since this is where they are defined.
LIB_REQUIRED_CFLAGS := -std=gnu11 -fPIC -fvisibility=hidden -fno-semantic-interposition \
               -ftls-model=initial-exec -fexceptions \
               -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc -fno-builtin-free \
               -Werror=implicit-function-declaration
LIB_CFLAGS  := -Iinclude -Isrc $(VARIANT_DEF_$(VARIANT)) $(LIB_DEFAULT_CFLAGS) $(CPPFLAGS) $(CFLAGS) \
               $(LIB_REQUIRED_CFLAGS) $(EXTRA_CFLAGS)
# -z nodelete: a dlclose leaves the library loaded, since threads' exits
# still run its destructor (a pthread key's) and its blocks outlive the call.
LIB_LDFLAGS := -shared -Wl,-soname,$(SONAME) -Wl,-z,now -Wl,-z,nodelete $(LDFLAGS)

LIB_SRCS     := $(wildcard src/*/*.c)
OBJDIR       := $(BUILD)/obj-$(VARIANT)
LIB_OBJS     := $(LIB_SRCS:src/%.c=$(OBJDIR)/%.o)
LIB_HDRS     := $(wildcard src/*/*.h) include/hakmem.h

# The library file, its soname link (what programs load) and the link the
# linker's -lhakmem and LD_PRELOAD=build/libhakmem.so find.
LIBSO_FILE := $(BUILD)/$(LIBNAME).so.$(VERSION)
LIBSO_LINK := $(BUILD)/$(SONAME)
LIBSO      := $(BUILD)/$(LIBNAME).so
LIBA       := $(BUILD)/$(LIBNAME).a

.PHONY: all lib hardened pgo clean test bench readme-options FORCE
.DEFAULT_GOAL := all
all: lib hardened launcher
lib: $(LIBSO) $(LIBSO_LINK) $(LIBA)

# The hardened library, beside the default one, in the same build directory.
hardened:
	@$(if $(filter hardened,$(VARIANT)),true,$(MAKE) --no-print-directory VARIANT=hardened lib)

# $(call update_if_changed,FILE): moves FILE.tmp over FILE only when they
# differ, so that what depends on FILE is rebuilt only when its text changes.
update_if_changed = if cmp -s $(1).tmp $(1); then rm -f $(1).tmp; else mv -f $(1).tmp $(1); fi

$(OBJDIR):
	mkdir -p $@

# The compiler and flags the library was built with.
$(OBJDIR)/flags: FORCE | $(OBJDIR)
	$(file >$@.tmp,$(CC) $(LIB_CFLAGS) $(LIB_LDFLAGS))
	@$(call update_if_changed,$@)

$(OBJDIR)/%.o: src/%.c $(LIB_HDRS) $(OBJDIR)/flags Makefile
	@mkdir -p $(@D)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

$(LIBSO_FILE): $(LIB_OBJS) $(OBJDIR)/flags
	$(CC) $(LIB_CFLAGS) $(LIB_LDFLAGS) -o $@ $(LIB_OBJS) -ldl

$(LIBSO) $(LIBSO_LINK): $(LIBSO_FILE)
	ln -sfn $(notdir $<) $@

$(LIBA): $(LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $(LIB_OBJS)

# Profile-guided build: $(BUILD)/pgo/libhakmem.so, trained on the benchmark
# families (the same objects are built instrumented, run, then built again
# with the profile), none run as it is measured (random_mixed 2000000 400 1
# is the scorecard's instruction count).
PGO_DIR := $(BUILD)/pgo
PGO_TRAINING := "random_mixed 2000000 500 7" "random_mixed 1000000 4000 2 16 1040" \
  "random_mixed 1000000 400 3 1 4096" "fixed_size 64 2000000" "tiny_hot 16 100 20000" \
  "patterns all 500 500 1" "mixed_large 50000 500 1" "larson 2 0.3 1000 1" \
  "thread_churn 4 4 20000 1000 1" "prodcons 500000 1024 1" "big_blocks 20 8 1 1048576 16777216"
pgo: bench-programs
	rm -rf $(PGO_DIR)
	$(MAKE) --no-print-directory BUILD=$(PGO_DIR) EXTRA_CFLAGS="-fprofile-generate -fprofile-update=atomic" lib
	for run in $(PGO_TRAINING); do \
	  LD_PRELOAD=$(abspath $(PGO_DIR))/libhakmem.so $(BUILD)/bench/$$run > /dev/null || exit 1; done
	$(MAKE) --no-print-directory BUILD=$(PGO_DIR) \
	  EXTRA_CFLAGS="-fprofile-use -fprofile-partial-training -Wno-missing-profile" lib

# The README's option list, generated from the library's table of options.
$(BUILD)/options_doc: scripts/options_doc.c $(LIBA)
	$(CC) -std=gnu11 -O2 -Isrc -Iinclude $< -o $@ $(LIBA) -lpthread

readme-options: $(BUILD)/options_doc
	$(BUILD)/options_doc > $(BUILD)/options.md
	awk -v table=$(BUILD)/options.md '/<!-- options:end -->/ { while ((getline line < table) > 0) print line; skip = 0 } \
	  !skip { print } /<!-- options:begin -->/ { skip = 1 }' README.md > $(BUILD)/README.md && mv $(BUILD)/README.md README.md

clean:
	rm -rf $(BUILD)

FORCE:

include dist/dist.mk
-include test/test.mk
-include test/arm64.mk
-include bench/bench.mk
