#!/bin/sh
# SPDX-License-Identifier: MIT
# The CMake package: after make install into a staging directory, the
# project in test/cmake finds hakmem with find_package and builds two
# programs, one linked with hakmem::hakmem and one with hakmem::hakmem-static;
# both must allocate with hakmem, also once the staged installation has been
# moved elsewhere.  find_package rejects a version of another major number.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

root=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "$*"; exit 1; }
quiet() { # quiet CMD...: runs CMD, showing its output only if it fails
  "$@" > "$work/log" 2>&1 || { cat "$work/log"; fail "$* failed"; }
}

# A multiarch library directory, as Debian's, where CMake looks for packages.
libdir=/usr/lib/$(cc -print-multiarch)
quiet env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$root" BUILD="$work/build" install \
  DESTDIR="$work/stage" PREFIX=/usr LIBDIR="$libdir"

# build_and_run PREFIX: configures, builds and runs the project against the
# installation under PREFIX.
build_and_run() {
  rm -rf "$work/b"
  quiet cmake -S "$root/test/cmake" -B "$work/b" -DCMAKE_PREFIX_PATH="$1" -DCMAKE_BUILD_TYPE=Release
  quiet cmake --build "$work/b"
  for kind in shared static; do
    "$work/b/$kind" > "$work/out" 2>&1 || { cat "$work/out"; fail "the program built as $kind failed"; }
    grep -q '^hakmem ' "$work/out" || fail "$kind printed \"$(cat "$work/out")\""
  done
  readelf -d "$work/b/shared" | grep -q 'NEEDED.*\[libhakmem\.so\.[0-9]*\]' ||
    fail "the program linked with hakmem::hakmem does not load libhakmem by its soname"
  ! readelf -d "$work/b/static" | grep -q 'NEEDED.*libhakmem' ||
    fail "the program linked with hakmem::hakmem-static loads libhakmem.so"
}

build_and_run "$work/stage/usr"
mv "$work/stage" "$work/moved"
build_and_run "$work/moved/usr"

# find_package(hakmem VERSION): same major and not older, or a range.
found() { # found VERSION: what find_package(hakmem VERSION) says
  cmake -S "$root/test/cmake/version" -B "$work/v" -DWANT="$1" -DCMAKE_PREFIX_PATH="$work/moved/usr" 2>&1 |
    sed -n 's/^-- found=//p'
  rm -rf "$work/v"
}
version=$(sed -n 's/^set(PACKAGE_VERSION "\(.*\)")$/\1/p' "$work/moved$libdir/cmake/hakmem/hakmemConfigVersion.cmake")
major=${version%%.*}
[ "$(found "$major")" = 1 ] || fail "find_package(hakmem $major) failed with version $version"
[ "$(found "$((major + 1))")" != 1 ] || fail "find_package(hakmem $((major + 1))) accepted version $version"
[ "$(found "$version...$((major + 1))")" = 1 ] || fail "find_package(hakmem $version...$((major + 1))) failed"
[ "$(found "0...<$version")" != 1 ] || fail "find_package(hakmem 0...<$version) accepted $version"

echo "find_package(hakmem): shared and static targets, staged and moved; version checks of $version"
