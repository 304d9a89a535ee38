#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: make cc ar
# test-timeout: 240
# test-timeout-full: 900
# make -j2 builds hakmem itself from a copy of this tree with hakmem
# preloaded into make, the shell, the compiler driver, cc1, as, collect2, ld
# and ar: the library and a test program (with HAKMEM_TEST_SIZE=full also
# the `standard` variant, every plain test program and the benchmarks).
# Every file the build writes must equal the one of the same build without
# hakmem, and what it built must work: test programs run with the library
# just built preloaded.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

root=$(cd "$(dirname "$0")/../.." && pwd)
tree="$work/tree"
mkdir "$tree"
(cd "$root" && tar cf - Makefile include src test bench scripts dist README.md) | (cd "$tree" && tar xf -)

if [ "${HAKMEM_TEST_SIZE:-quick}" = full ]; then
  targets="lib test-plain bench-programs"
  run="api threads realloc stress"
else
  targets="lib build/test/api"
  run="api"
fi

# Every process under hakmem says so when it exits (HAKMEM_SS_OS_STATS).
export HAKMEM_SS_OS_STATS=1

build() { # build RUNNER: a clean build of $targets in $tree/build
  rm -rf "$tree/build"
  # shellcheck disable=SC2086  # one word per target
  $1 make -C "$tree" -j2 $targets > "$work/make.out" 2>&1 &&
    if [ "${HAKMEM_TEST_SIZE:-quick}" = full ]; then
      $1 make -C "$tree" -j2 VARIANT=standard BUILD=build/standard lib >> "$work/make.out" 2>&1
    fi || { echo "make failed ($1):"; tail -30 "$work/make.out"; exit 1; }
}

plain() { "$@"; }
build plain
mv "$tree/build" "$work/ref-build"
build hak
# At least the driver, cc1 and as for each object file.
objects=$(find "$tree/build" -name '*.o' | wc -l)
processes=$(grep -c '^\[SS_OS_STATS\]' "$work/make.out" || true)
[ "$processes" -ge $((3 * objects)) ] ||
  { echo "only $processes processes ran with hakmem for $objects object files"; exit 1; }
if ! diff -r "$work/ref-build" "$tree/build" > "$work/diff" 2>&1; then
  echo "the build with hakmem preloaded differs from the build without it:"
  head -20 "$work/diff"
  exit 1
fi
echo "$(find "$tree/build" -type f | wc -l) files built identically with and without hakmem ($processes processes under hakmem)"

# What was built works: its tests pass with its own library preloaded.
for t in $run; do
  args=""
  [ "$t" = stress ] && args="--seconds 2"
  # shellcheck disable=SC2086
  HAKMEM_TEST_ALLOCATOR=hakmem LD_PRELOAD="$tree/build/libhakmem.so" "$tree/build/test/$t" $args \
    > "$work/run.out" 2>&1 || { echo "$t, with the library just built:"; tail -20 "$work/run.out"; exit 1; }
  echo "$t passes with the library just built"
done
