#!/bin/sh
# SPDX-License-Identifier: MIT
# The Debian packages: `make package` and `make test-package`.
#
#   dist/package.sh build DIR   builds libhakmem0, libhakmem-dev and hakmem
#                               with dpkg-buildpackage (whose check step runs
#                               make test) in a copy of the source tree in
#                               DIR/, where the .debs and .changes land
#   dist/package.sh test DIR    lintian on them (errors fail), then, as root,
#                               installs them with dpkg -i, checks what they
#                               installed, and removes them again unless they
#                               were installed before
#
# As root, and unless HAKMEM_NO_APT=1, the tools and build dependencies are
# installed with apt-get.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
packages="libhakmem0 libhakmem-dev hakmem"

say() { echo "package: $*"; }
die() { echo "package: $*" >&2; exit 1; }

# apt_install PACKAGE...: installs them if it may; false if it may not.
apt_install() {
  [ "$(id -u)" = 0 ] && [ "${HAKMEM_NO_APT:-0}" != 1 ] && command -v apt-get >/dev/null || return 1
  say "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" > /dev/null ||
    { apt-get update -qq > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" > /dev/null; }
}

# need COMMAND PACKAGE: COMMAND is there, or PACKAGE is installed for it.
need() {
  command -v "$1" > /dev/null || apt_install "$2" || die "$1 is missing: apt-get install $2"
}

version() {
  part() { sed -n "s/^#define HAKMEM_VERSION_$1 \([0-9][0-9]*\)\$/\1/p" "$root/include/hakmem.h"; }
  echo "$(part MAJOR).$(part MINOR).$(part PATCH)"
}

# The source tree as it is, build outputs excluded: what git tracks and what
# it does not ignore, or, outside a git checkout, everything but build/.
copy_tree() {
  mkdir -p "$1"
  if git -C "$root" rev-parse --is-inside-work-tree > /dev/null 2>&1; then
    (cd "$root" && git ls-files -z --cached --others --exclude-standard |
       xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
       tar --null -T - -cf -) | tar -C "$1" -xf -
  else
    (cd "$root" && tar --exclude=./build --exclude='./bench/results/*' -cf - .) | tar -C "$1" -xf -
  fi
}

build() {
  out=$1
  need dpkg-buildpackage dpkg-dev
  need dh debhelper
  src=$out/hakmem-$(version)
  rm -rf "$out"
  copy_tree "$src"
  if ! (cd "$src" && dpkg-checkbuilddeps > /dev/null 2>&1); then
    [ "$(id -u)" = 0 ] && [ "${HAKMEM_NO_APT:-0}" != 1 ] ||
      { (cd "$src" && dpkg-checkbuilddeps) || true; die "build dependencies are missing"; }
    say "installing the build dependencies"
    DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq "$src" > /dev/null ||
      { apt-get update -qq > /dev/null && DEBIAN_FRONTEND=noninteractive apt-get build-dep -y -qq "$src" > /dev/null; } ||
      die "apt-get build-dep failed"
  fi
  say "dpkg-buildpackage in $src"
  (cd "$src" && dpkg-buildpackage -us -uc -b)
  say "built: $(cd "$out" && echo ./*.deb ./*.changes)"
}

installed() { dpkg-query -W -f='${Status}' "$1" 2> /dev/null | grep -q 'install ok installed'; }

test_packages() {
  out=$1
  changes=$(ls "$out"/*.changes 2> /dev/null | head -1)
  [ -n "$changes" ] || die "no .changes in $out: make package first"
  need lintian lintian
  say "lintian $(basename "$changes")"
  lintian --fail-on error --display-info "$changes" || die "lintian found errors"

  if [ "$(id -u)" != 0 ]; then
    say "skip: installing the packages needs root"
    return 0
  fi
  need python3 python3
  need cc gcc
  need pkg-config pkg-config
  need cmake cmake
  need man man-db
  need readelf binutils
  version=$(version)
  before=""
  for p in $packages; do installed "$p" && before="$before $p"; done
  debs=""
  for p in $packages; do debs="$debs $(ls "$out/${p}_${version}_"*.deb)"; done
  # shellcheck disable=SC2086  # one word per file
  dpkg -i $debs
  # shellcheck disable=SC2064  # $before is fixed now
  trap "remove_packages '$before'" EXIT
  check_installed "$version"
  say "the installed packages work"
}

remove_packages() {
  remove=""
  for p in $packages; do
    case " $1 " in *" $p "*) ;; *) remove="$remove $p" ;; esac
  done
  # shellcheck disable=SC2086  # one word per package
  [ -z "$remove" ] || dpkg -r $remove > /dev/null
}

check_installed() {
  version=$1
  work=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-package.XXXXXX")
  libdir=/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)
  [ "$(hakmem --version)" = "hakmem $version" ] || die "hakmem --version says $(hakmem --version)"
  [ "$(hakmem python3 -c 'print(1)')" = 1 ] || die "hakmem python3 -c 'print(1)' did not print 1"
  hakmem sh -c 'cat /proc/$$/maps' | grep -q "$libdir/libhakmem\.so" || die "hakmem did not preload $libdir/libhakmem.so.*"
  readelf -d "$libdir/libhakmem.so.${version%%.*}" | grep -q 'SONAME.*\[libhakmem\.so\.[0-9]*\]' ||
    die "$libdir/libhakmem.so.${version%%.*} has no soname"
  [ "$(pkg-config --modversion hakmem)" = "$version" ] || die "pkg-config does not find hakmem $version"
  # shellcheck disable=SC2046  # pkg-config's flags are meant to be split
  cc "$root/test/cmake/main.c" -o "$work/prog" $(pkg-config --cflags --libs hakmem) && "$work/prog" > /dev/null ||
    die "a program built with pkg-config's flags does not run on hakmem"
  cmake -S "$root/test/cmake" -B "$work/cmake" > "$work/log" 2>&1 && cmake --build "$work/cmake" >> "$work/log" 2>&1 &&
    "$work/cmake/shared" > /dev/null && "$work/cmake/static" > /dev/null ||
    { cat "$work/log"; die "find_package(hakmem) against the installed packages failed"; }
  for page in 1 3; do
    man -w "$page" hakmem > /dev/null || die "no hakmem($page) installed"
  done
  rm -rf "$work"
}

case ${1:-} in
  build) build "${2:?build DIR}" ;;
  test) test_packages "${2:?test DIR}" ;;
  *) echo "usage: dist/package.sh build|test DIR" >&2; exit 2 ;;
esac
