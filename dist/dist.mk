# SPDX-License-Identifier: MIT
# Installation: the libraries, the header, the pkg-config file, the CMake
# package, the launcher and the man pages.
#
#   make install [PREFIX=/usr/local] [LIBDIR=$(PREFIX)/lib]
#                [INCLUDEDIR=$(PREFIX)/include] [BINDIR=$(PREFIX)/bin]
#                [MANDIR=$(PREFIX)/share/man] [DESTDIR=staging directory]
#   make uninstall     with the same variables
#   make launcher      $(BUILD)/hakmem, the launcher of the build tree, which
#                      preloads the libraries beside it
#   make man           the man pages, into $(BUILD)/dist/
#   make package       the Debian packages, into $(BUILD)/package/
#   make test-package  the same, then lintian, and (as root) the packages
#                      installed, tried and removed: dist/package.sh
#
# The files that depend on these variables (the installed launcher,
# hakmem.pc, the CMake package, the man pages) are made from the templates in
# dist/ into $(BUILD)/dist/ by every make that needs them, and replaced only
# when their text changes: a second install with another PREFIX gets its own.

PREFIX     ?= /usr/local
BINDIR     ?= $(PREFIX)/bin
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
MANDIR     ?= $(PREFIX)/share/man
PYTHON     ?= python3

PKGCONFIGDIR = $(LIBDIR)/pkgconfig
CMAKEDIR     = $(LIBDIR)/cmake/hakmem
DIST         := $(BUILD)/dist

# A directory as hakmem.pc writes it: relative to ${prefix} when under it.
pc_dir = $(patsubst $(PREFIX)/%,$${prefix}/%,$(1))
# The include directory relative to the CMake package's, which finds the rest
# of the installation from where it is (DESTDIR staging, a moved prefix).
cmake_includedir = $(shell realpath -m -s --relative-to=$(CMAKEDIR) $(INCLUDEDIR))

# $(call configure,LIBDIR): sed filling in the @NAME@s of a template; the
# launcher of the build tree is given an empty LIBDIR.
configure = sed -e 's|@VERSION@|$(VERSION)|g' -e 's|@VERSION_MAJOR@|$(VERSION_MAJOR)|g' \
  -e 's|@SONAME@|$(SONAME)|g' -e 's|@HARDENED_SONAME@|$(HARDENED_SONAME)|g' \
  -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(1)|g' \
  -e 's|@PC_LIBDIR@|$(call pc_dir,$(LIBDIR))|g' -e 's|@PC_INCLUDEDIR@|$(call pc_dir,$(INCLUDEDIR))|g' \
  -e 's|@CMAKE_INCLUDEDIR@|$(cmake_includedir)|g'

.PHONY: install uninstall launcher man
launcher: $(BUILD)/hakmem
man: $(DIST)/hakmem.1 $(DIST)/hakmem.3

$(DIST):
	mkdir -p $@

$(BUILD)/hakmem: dist/hakmem.in FORCE
	@mkdir -p $(@D)
	@$(call configure,) < $< > $@.tmp && chmod 755 $@.tmp
	@$(call update_if_changed,$@)

$(DIST)/%: dist/%.in FORCE | $(DIST)
	@$(call configure,$(LIBDIR)) < $< > $@.tmp
	@$(call update_if_changed,$@)

# ENVIRONMENT is made from the README's table of options.
$(DIST)/hakmem.3: dist/hakmem.3.in README.md scripts/options_man.py FORCE | $(DIST) build-deps
	@$(PYTHON) scripts/options_man.py README.md $< > $@.options
	@$(call configure,$(LIBDIR)) < $@.options > $@.tmp && rm -f $@.options
	@$(call update_if_changed,$@)

INSTALLED_LIBS := libhakmem.so.$(VERSION) $(SONAME) libhakmem.so libhakmem.a \
                  libhakmem-hardened.so.$(VERSION) $(HARDENED_SONAME)
INSTALLED_CMAKE := hakmemConfig.cmake hakmemConfigVersion.cmake

install: lib hardened man $(DIST)/hakmem $(DIST)/hakmem.pc $(INSTALLED_CMAKE:%=$(DIST)/%)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(INCLUDEDIR) \
	  $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man3
	install -m 644 $(LIBSO_FILE) $(LIBA) $(DESTDIR)$(LIBDIR)/
	ln -sfn $(notdir $(LIBSO_FILE)) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sfn $(notdir $(LIBSO_FILE)) $(DESTDIR)$(LIBDIR)/libhakmem.so
	install -m 644 $(BUILD)/libhakmem-hardened.so.$(VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sfn libhakmem-hardened.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(HARDENED_SONAME)
	install -m 644 $(DIST)/hakmem.pc $(DESTDIR)$(PKGCONFIGDIR)/
	install -m 644 $(INSTALLED_CMAKE:%=$(DIST)/%) $(DESTDIR)$(CMAKEDIR)/
	install -m 644 include/hakmem.h $(DESTDIR)$(INCLUDEDIR)/
	install -m 755 $(DIST)/hakmem $(DESTDIR)$(BINDIR)/
	install -m 644 $(DIST)/hakmem.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 644 $(DIST)/hakmem.3 $(DESTDIR)$(MANDIR)/man3/
	@[ -n "$(DESTDIR)" ] || ldconfig 2>/dev/null || echo "ldconfig failed: run it as root, or set LD_LIBRARY_PATH"

uninstall:
	rm -f $(INSTALLED_LIBS:%=$(DESTDIR)$(LIBDIR)/%) $(DESTDIR)$(PKGCONFIGDIR)/hakmem.pc \
	  $(INSTALLED_CMAKE:%=$(DESTDIR)$(CMAKEDIR)/%) $(DESTDIR)$(INCLUDEDIR)/hakmem.h \
	  $(DESTDIR)$(BINDIR)/hakmem $(DESTDIR)$(MANDIR)/man1/hakmem.1 $(DESTDIR)$(MANDIR)/man3/hakmem.3
	rmdir $(DESTDIR)$(CMAKEDIR) 2>/dev/null || true

.PHONY: package test-package
package:
	sh dist/package.sh build $(abspath $(BUILD))/package

test-package: package
	sh dist/package.sh test $(abspath $(BUILD))/package
