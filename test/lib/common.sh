# SPDX-License-Identifier: MIT
# Sourced by the scripts in this directory, which run real programs with
# hakmem preloaded and compare what they print with a run without it.
# The runner sets HAKMEM_LIB to the library to preload.
# shellcheck shell=sh disable=SC2034  # $work is used by the scripts
set -eu

: "${HAKMEM_LIB:?HAKMEM_LIB must name libhakmem.so}"
[ -f "$HAKMEM_LIB" ] || { echo "$HAKMEM_LIB does not exist"; exit 1; }
export LC_ALL=C

work=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

# hak CMD...: runs CMD with hakmem preloaded; says so if it fails.
hak() {
  LD_PRELOAD="$HAKMEM_LIB" "$@" || {
    rc=$?
    echo "with hakmem preloaded, \"$*\" failed (status $rc)" >&2
    return $rc
  }
}

# The dynamic loader only warns when it cannot preload a library; make sure
# it can, before anything is compared.
hak cat /proc/self/maps > "$work/maps"
grep -q libhakmem "$work/maps" || { echo "LD_PRELOAD=$HAKMEM_LIB is not in effect"; exit 1; }

# same FILE1 FILE2 WHAT: fails, showing the difference, unless equal.
same() {
  if ! cmp -s "$1" "$2"; then
    echo "$3: output with hakmem differs from the output without it:"
    diff "$1" "$2" | head -40
    exit 1
  fi
}
