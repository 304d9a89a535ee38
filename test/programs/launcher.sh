#!/bin/sh
# SPDX-License-Identifier: MIT
# The launcher of the build tree, hakmem(1): the command runs with hakmem
# preloaded in front of the LD_PRELOAD it had, --profile, --heap-profile
# and --stats set their variables (a relative --heap-profile made absolute), --hardened preloads the hardened build or refuses to run
# without it, and bad usage exits 2 without running anything.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

build=$(dirname "$HAKMEM_LIB")
launcher=$build/hakmem
[ -x "$launcher" ] || { echo "$launcher does not exist (make launcher)"; exit 1; }
root=$(cd "$(dirname "$0")/../.." && pwd)
part() { sed -n "s/^#define HAKMEM_VERSION_$1 \([0-9][0-9]*\)\$/\1/p" "$root/include/hakmem.h"; }
version=$(part MAJOR).$(part MINOR).$(part PATCH)
unset LD_PRELOAD HAKMEM_PROFILE HAKMEM_STATS HAKMEM_PROF

fail() { echo "hakmem $*"; exit 1; }

# expect STATUS CMD...: runs CMD, output to $work/out and $work/err, and
# fails unless it exits with STATUS.
expect() {
  want=$1
  shift
  rc=0
  "$@" > "$work/out" 2> "$work/err" || rc=$?
  [ "$rc" = "$want" ] || { echo "\"$*\" exited $rc, expected $want"; cat "$work/err"; exit 1; }
}

expect 0 "$launcher" --version
[ "$(cat "$work/out")" = "hakmem $version" ] || fail "--version printed \"$(cat "$work/out")\""
expect 0 "$launcher" --help
grep -q '^usage: hakmem ' "$work/out" || fail "--help printed no usage line"

# The command runs with hakmem loaded, and its exit status is the launcher's.
expect 0 "$launcher" cat /proc/self/maps
grep -q 'libhakmem\.so' "$work/out" || fail "ran cat without libhakmem in its maps"
expect 3 "$launcher" -- sh -c 'exit 3'
expect 127 "$launcher" no-such-command-anywhere

# hakmem goes in front of the LD_PRELOAD the command had, which is kept.
expect 0 env LD_PRELOAD=libm.so.6 "$launcher" sh -c 'echo "$LD_PRELOAD"; cat /proc/$$/maps'
first=$(head -1 "$work/out")
[ "$first" = "$(cd "$build" && pwd -P)/libhakmem.so.0:libm.so.6" ] || fail "set LD_PRELOAD=$first"
grep -q 'libhakmem\.so' "$work/out" && grep -q 'libm\.so\.6' "$work/out" ||
  fail "did not load both libhakmem and the libm.so.6 of the LD_PRELOAD it was given"

# Options set their variables, and only they do.
expect 0 "$launcher" sh -c 'echo "${HAKMEM_PROFILE-unset} ${HAKMEM_STATS-unset}"'
[ "$(cat "$work/out")" = "unset unset" ] || fail "without options set \"$(cat "$work/out")\""
expect 0 "$launcher" --profile lean --stats sh -c 'echo "$HAKMEM_PROFILE $HAKMEM_STATS"'
[ "$(cat "$work/out")" = "lean 1" ] || fail "--profile lean --stats set \"$(cat "$work/out")\""
expect 0 "$launcher" --profile=speed sh -c 'echo "$HAKMEM_PROFILE"'
[ "$(cat "$work/out")" = speed ] || fail "--profile=speed set \"$(cat "$work/out")\""
expect 0 "$launcher" --heap-profile /tmp/h.heap sh -c 'echo "$HAKMEM_PROF"'
[ "$(cat "$work/out")" = /tmp/h.heap ] || fail "--heap-profile /tmp/h.heap set \"$(cat "$work/out")\""
expect 0 "$launcher" --heap-profile=h.heap sh -c 'echo "$HAKMEM_PROF"'
[ "$(cat "$work/out")" = "$PWD/h.heap" ] || fail "--heap-profile=h.heap set \"$(cat "$work/out")\""

# Bad usage: a usage line on stderr, status 2, and the command does not run.
for args in "--profile fast" "--bogus" "--stats --nope" "--profile=" "--heap-profile="; do
  # shellcheck disable=SC2086  # the arguments are meant to be split
  expect 2 "$launcher" $args touch "$work/ran"
  [ ! -e "$work/ran" ] || fail "$args ran the command"
  grep -q '^usage: hakmem ' "$work/err" || fail "$args printed no usage line on stderr"
  [ ! -s "$work/out" ] || fail "$args printed on stdout"
done
expect 2 "$launcher"
expect 2 "$launcher" --heap-profile
expect 2 "$launcher" --heap-profile "" true

# --hardened, in a copy of the launcher beside a library directory of its own:
# first without the hardened build, then with one.
mkdir "$work/lib"
cp "$launcher" "$work/lib/hakmem"
ln -s "$(cd "$build" && pwd -P)/libhakmem.so.0" "$work/lib/libhakmem.so.0"
expect 0 "$work/lib/hakmem" cat /proc/self/maps
grep -q 'libhakmem\.so' "$work/out" || fail "copied beside a library did not preload it"
expect 127 "$work/lib/hakmem" --hardened touch "$work/ran"
[ ! -e "$work/ran" ] || fail "--hardened without the hardened build ran the command"
grep -q 'libhakmem-hardened\.so\.0 does not exist' "$work/err" || fail "--hardened said \"$(cat "$work/err")\""
ln -s "$(cd "$build" && pwd -P)/libhakmem-hardened.so.0" "$work/lib/libhakmem-hardened.so.0"
expect 0 "$work/lib/hakmem" --hardened cat /proc/self/maps
grep -q 'libhakmem-hardened\.so' "$work/out" || fail "--hardened did not preload libhakmem-hardened.so.0"

echo "launcher $version: preload, LD_PRELOAD kept, options, --hardened, bad usage"
