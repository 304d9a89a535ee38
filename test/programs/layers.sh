#!/bin/sh
# SPDX-License-Identifier: MIT
# The library's layers call one way (scripts/layers): the tree passes, and a
# copy of it with a lower layer including a higher one's header, or a file
# declaring a function another defines, fails.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/hakmem-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 "$root/scripts/layers" --root "$root" || { echo "the tree's layers call back up (above)"; exit 1; }
plant() {  # plant FILE LINE: a copy of src/ with LINE added to FILE must fail
  rm -rf "$work/src"
  cp -r "$root/src" "$work/src"
  printf '%s\n' "$2" >> "$work/src/$1"
  if python3 "$root/scripts/layers" --root "$work" > "$work/out"; then
    echo "scripts/layers passed src/$1 with: $2"
    exit 1
  fi
  grep -q "src/$1" "$work/out" || { echo "scripts/layers did not name src/$1:"; cat "$work/out"; exit 1; }
}
plant os/os.c '#include "thread/thread.h"'
plant region/huge.c 'HK_HIDDEN bool hk_purge_all(void);'
plant base/base.h '#include "map/map.h"'
echo "$(ls "$root/src" | wc -l) layers, every include downward; planted violations caught"
