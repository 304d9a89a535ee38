# SPDX-License-Identifier: MIT
# hakmem build.  `make` builds the libraries, `make test` runs the tests,
# `make bench` compares hakmem with the other allocators.
#
#   VARIANT=fast      the default: no statistics counters on the fast paths
#   VARIANT=standard  the same with consistency checks in the slow paths
#   PREFIX=/usr/local where `make install` puts library, header and .pc file

CC      ?= cc
AR      ?= ar
VARIANT ?= fast
PREFIX  ?= /usr/local
BUILD   ?= build

VARIANT_DEF_fast     := -DHAK_VARIANT=1
VARIANT_DEF_standard := -DHAK_VARIANT=2
ifeq ($(VARIANT_DEF_$(VARIANT)),)
$(error VARIANT must be fast or standard)
endif

WARN        := -Wall -Wextra -Wno-unused-parameter
LIB_CFLAGS  := -std=gnu11 -O2 -g -fPIC -fvisibility=hidden -fno-plt \
               -ftls-model=initial-exec -fno-semantic-interposition \
               -fno-stack-protector -fexceptions -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc -fno-builtin-free \
               -Iinclude $(VARIANT_DEF_$(VARIANT)) $(WARN) $(EXTRA_CFLAGS)
LIB_LDFLAGS := -shared -Wl,-soname,libhakmem.so -Wl,-z,now

LIB_SRCS     := $(wildcard src/*.c)
OBJDIR       := $(BUILD)/obj-$(VARIANT)
LIB_OBJS     := $(LIB_SRCS:src/%.c=$(OBJDIR)/%.o)
LIB_HDRS     := $(wildcard src/*.h) include/hakmem.h

LIBSO := $(BUILD)/libhakmem.so
LIBA  := $(BUILD)/libhakmem.a

.PHONY: all lib clean install uninstall test bench
.DEFAULT_GOAL := all
all: lib
lib: $(LIBSO) $(LIBA)

$(OBJDIR)/%.o: src/%.c $(LIB_HDRS) Makefile
	@mkdir -p $(OBJDIR)
	$(CC) $(LIB_CFLAGS) -c $< -o $@

$(LIBSO): $(LIB_OBJS)
	$(CC) $(LIB_LDFLAGS) -o $@ $(LIB_OBJS)

$(LIBA): $(LIB_OBJS)
	@rm -f $@
	$(AR) rcs $@ $(LIB_OBJS)

$(BUILD)/hakmem.pc: Makefile
	@mkdir -p $(BUILD)
	@printf 'prefix=%s\nlibdir=$${prefix}/lib\nincludedir=$${prefix}/include\n\nName: hakmem\nDescription: general-purpose memory allocator (drop-in malloc)\nVersion: %s\nLibs: -L$${libdir} -lhakmem\nLibs.private: -lpthread\nCflags: -I$${includedir}\n' \
	  '$(PREFIX)' "$$(sed -n 's/^#define HAKMEM_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)/\2/p' include/hakmem.h | paste -sd.)" > $@

install: lib $(BUILD)/hakmem.pc
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 include/hakmem.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/hakmem.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/libhakmem.so $(DESTDIR)$(PREFIX)/lib/libhakmem.a \
	      $(DESTDIR)$(PREFIX)/include/hakmem.h $(DESTDIR)$(PREFIX)/lib/pkgconfig/hakmem.pc

clean:
	rm -rf $(BUILD)

-include test/test.mk
-include bench/bench.mk
