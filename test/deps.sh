#!/bin/sh
# SPDX-License-Identifier: MIT
# Installs what `make test` (with the argument arm64: `make test-arm64`)
# needs that a fresh Debian system may lack: as
# root with apt-get, unless HAKMEM_NO_APT=1 (a package build, which must use
# what its Build-Depends installed); otherwise it says what is missing, and
# the runner skips the tests that need it.
set -u

missing=""
need() { missing="$missing $1"; }

if [ "${1:-}" = arm64 ]; then
  # `make test-arm64` (test/arm64.mk): the cross compilers, the target's C
  # library and qemu-user, which runs the programs.
  command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || need gcc-aarch64-linux-gnu
  command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || need g++-aarch64-linux-gnu
  [ -e /usr/aarch64-linux-gnu/include/stdio.h ] || need libc6-dev-arm64-cross
  command -v qemu-aarch64 >/dev/null 2>&1 || need qemu-user
else
  command -v python3 >/dev/null 2>&1 || need python3
  command -v git >/dev/null 2>&1 || need git
  command -v g++ >/dev/null 2>&1 || need g++
  command -v setarch >/dev/null 2>&1 || need util-linux
  command -v sort >/dev/null 2>&1 || need coreutils
  command -v sqlite3 >/dev/null 2>&1 || need sqlite3
  command -v cmake >/dev/null 2>&1 || need cmake
  command -v pkg-config >/dev/null 2>&1 || need pkg-config
  command -v man >/dev/null 2>&1 || need man-db
  command -v readelf >/dev/null 2>&1 || need binutils
  command -v google-pprof >/dev/null 2>&1 || need google-perftools  # reads the heap profiles (prof.*)

  # Debian's python3 and its own regression tests (test/apps/cpython.py).
  if [ -x /usr/bin/python3 ]; then
    /usr/bin/python3 -c 'import test.test_dict' >/dev/null 2>&1 ||
      need "libpython$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')-testsuite"
  else
    need python3
  fi

  # gcc's sanitizer runtimes (the link-time .so is a symlink to them).
  cc=${CC:-cc}
  for pair in asan:libasan8 tsan:libtsan2 ubsan:libubsan1; do
    rt=${pair%%:*} pkg=${pair#*:}
    lib=$($cc -print-file-name="lib$rt.so" 2>/dev/null)
    [ -e "$lib" ] || need "$pkg"
  done

  # clang's libFuzzer, for the fuzz targets.
  fuzz_cc=${FUZZ_CC:-clang}
  lib=$($fuzz_cc -print-file-name="libclang_rt.fuzzer-$(uname -m).a" 2>/dev/null)
  [ -e "$lib" ] || need "clang libclang-rt-dev"
fi

[ -z "$missing" ] && exit 0

install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || return 1
  # shellcheck disable=SC2086  # one word per package
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

if [ "${HAKMEM_NO_APT:-0}" = 1 ]; then
  echo "test: missing$missing (HAKMEM_NO_APT=1: the tests that need them are skipped)"
elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "test: installing$missing"
  install || echo "test: apt-get could not install$missing; the tests that need them are skipped"
else
  echo "test: missing$missing (not root: the tests that need them are skipped)"
fi
command -v python3 >/dev/null 2>&1 || { echo "test: python3 is required to run the tests" >&2; exit 1; }
exit 0
