#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: sort python3
# sort(1) with hakmem preloaded, on a generated file of 200000 lines, with
# several key options, and in parallel with a small buffer (threads and
# temporary files); compared with the same sorts without hakmem.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

python3 - "$work/input" <<'PY'
import random, sys
random.seed(42)
with open(sys.argv[1], "w") as f:
    for i in range(200000):
        word = "".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(random.randrange(1, 30)))
        f.write("%s %d %s\n" % (word, random.randrange(1000000), "x" * random.randrange(0, 200)))
PY

n=0
for opts in "" "-n -k2" "-u -k1,1" "-r" "--parallel=2 -S 1M" "-k3 -s --parallel=2"; do
  n=$((n + 1))
  # shellcheck disable=SC2086  # the options are meant to be split
  sort $opts "$work/input" > "$work/ref$n"
  # shellcheck disable=SC2086
  hak sort $opts "$work/input" > "$work/hak$n"
  same "$work/hak$n" "$work/ref$n" "sort $opts"
done
[ "$(wc -l < "$work/hak1")" -eq 200000 ] || { echo "sort lost lines"; exit 1; }
echo "6 sorts of 200000 lines identical"
