#!/bin/sh
# SPDX-License-Identifier: MIT
# make install into a staging directory (DESTDIR) with a multiarch-style
# LIBDIR, from a build of its own: the library files, their soname and
# links, hakmem.pc, the launcher and the man pages say where they are; a
# program compiled with pkg-config's flags runs on hakmem; a second install
# with another PREFIX writes a hakmem.pc of its own; uninstall removes it all.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

root=$(cd "$(dirname "$0")/../.." && pwd)
part() { sed -n "s/^#define HAKMEM_VERSION_$1 \([0-9][0-9]*\)\$/\1/p" "$root/include/hakmem.h"; }
major=$(part MAJOR)
version=$major.$(part MINOR).$(part PATCH)
stage=$work/stage
libdir=/usr/lib/test-triplet

fail() { echo "$*"; exit 1; }
# hakmem_make ARG...: make in the source tree, into a build directory of this
# test, whatever the make that runs the tests was given.
hakmem_make() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C "$root" BUILD="$work/build" "$@" > "$work/make.log" 2>&1 ||
    { cat "$work/make.log"; fail "make $* failed"; }
}
soname_of() { readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p'; }

# The library of the build tree the other tests use.
[ "$(soname_of "$HAKMEM_LIB")" = "libhakmem.so.$major" ] ||
  fail "$HAKMEM_LIB has soname \"$(soname_of "$HAKMEM_LIB")\", expected libhakmem.so.$major"

hakmem_make install DESTDIR="$stage" PREFIX=/usr LIBDIR=$libdir
lib=$stage$libdir
for f in "$lib/libhakmem.so.$version" "$lib/libhakmem.a" "$stage/usr/include/hakmem.h" \
         "$lib/pkgconfig/hakmem.pc" "$lib/cmake/hakmem/hakmemConfig.cmake" \
         "$lib/cmake/hakmem/hakmemConfigVersion.cmake" "$stage/usr/bin/hakmem" \
         "$stage/usr/share/man/man1/hakmem.1" "$stage/usr/share/man/man3/hakmem.3"; do
  [ -f "$f" ] || fail "make install did not install ${f#"$stage"}"
done
for link in "libhakmem.so.$major" libhakmem.so; do
  [ "$(readlink "$lib/$link")" = "libhakmem.so.$version" ] || fail "$libdir/$link is not a link to libhakmem.so.$version"
done
[ "$(soname_of "$lib/libhakmem.so.$version")" = "libhakmem.so.$major" ] ||
  fail "the installed library has soname \"$(soname_of "$lib/libhakmem.so.$version")\""
[ -x "$stage/usr/bin/hakmem" ] || fail "the launcher is not executable"

# hakmem.pc, and a program built with its flags (the one of the CMake
# test), against the staged tree.
export PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage"
[ "$(pkg-config --modversion hakmem)" = "$version" ] || fail "hakmem.pc: version $(pkg-config --modversion hakmem)"
[ "$(pkg-config --variable=libdir hakmem)" = "$stage$libdir" ] || fail "hakmem.pc: libdir $(pkg-config --variable=libdir hakmem)"
# shellcheck disable=SC2046  # pkg-config's flags are meant to be split
cc "$root/test/cmake/main.c" -o "$work/prog" $(pkg-config --cflags --libs hakmem) || fail "cannot build with pkg-config's flags"
LD_LIBRARY_PATH=$lib "$work/prog" > "$work/prog.out" || fail "a program linked with -lhakmem does not allocate with hakmem"
grep -q "^hakmem $version " "$work/prog.out" || fail "the program printed \"$(cat "$work/prog.out")\""
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR

# The launcher knows where it was installed, not where it was staged.
"$stage/usr/bin/hakmem" true 2> "$work/err" && fail "the staged launcher found a library in $libdir"
grep -q "^hakmem: $libdir/libhakmem.so.$major does not exist" "$work/err" ||
  fail "the staged launcher said \"$(cat "$work/err")\""
[ "$("$stage/usr/bin/hakmem" --version)" = "hakmem $version" ] || fail "the installed launcher's --version is wrong"

# The man pages render without a warning; hakmem(3) lists every option of the
# README's table.
for page in man1/hakmem.1 man3/hakmem.3; do
  MANWIDTH=80 man --warnings -l "$stage/usr/share/man/$page" > "$work/page" 2> "$work/warnings" ||
    fail "man cannot render $page"
  [ ! -s "$work/warnings" ] || { cat "$work/warnings"; fail "man warns about $page"; }
done
sed -n '/^ENVIRONMENT/,/^FILES/p' "$work/page" > "$work/environment"
variables=$(sed -n '/^<!-- options:begin -->$/,/^<!-- options:end -->$/s/^| *`\{0,1\}\(HAKMEM_[A-Z0-9_]*\).*/\1/p' "$root/README.md")
[ -n "$variables" ] || fail "found no option in README.md"
for v in $variables; do
  grep -q "^ *$v (default: " "$work/environment" || fail "hakmem(3) does not describe $v"
done

# A second install with another PREFIX and the default LIBDIR.
hakmem_make install DESTDIR="$stage" PREFIX=/opt/other
grep -qx 'prefix=/opt/other' "$stage/opt/other/lib/pkgconfig/hakmem.pc" &&
  grep -qx 'libdir=${prefix}/lib' "$stage/opt/other/lib/pkgconfig/hakmem.pc" ||
  { cat "$stage/opt/other/lib/pkgconfig/hakmem.pc"; fail "the second install kept the first one's hakmem.pc"; }
grep -qx "libdir='/opt/other/lib'" "$stage/opt/other/bin/hakmem" || fail "the second install kept the first one's launcher"

hakmem_make uninstall DESTDIR="$stage" PREFIX=/usr LIBDIR=$libdir
hakmem_make uninstall DESTDIR="$stage" PREFIX=/opt/other
left=$(find "$stage" ! -type d)
[ -z "$left" ] || fail "make uninstall left $left"

echo "installed $version twice, soname libhakmem.so.$major, pkg-config, launcher, man pages, uninstalled"
