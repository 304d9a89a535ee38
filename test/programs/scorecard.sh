#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: python3
# The scorecard at its smallest (scripts/scorecard --smoke, hakmem and
# glibc): every section there, with figures in its tables, the command of
# each, a row per build variant (measured, or saying why it cannot be
# built), and the charts it names beside it.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(dirname "$HAKMEM_LIB")
fail() { echo "$*"; exit 1; }

python3 "$root/scripts/scorecard" --smoke --allocators hakmem,glibc --build "$build" --out "$work/docs" \
  --results "$work/results" > "$work/out" 2>&1 || { cat "$work/out"; fail "scripts/scorecard failed"; }
card=$work/docs/SCORECARD.md
has() { grep -q -- "$1" "$card" || { cat "$card"; fail "SCORECARD.md: no line matching: $1"; }; }

has '^Measured [0-9-]* [0-9:]* UTC by `scripts/scorecard --smoke`'
for section in Summary Machine Speed Memory 'OS calls' 'Memory given back, per hakmem profile' 'Tail latency' Soak \
               'Build variants'; do
  has "^## $section\$"
done
grep -q '^## Failures' "$card" && { cat "$card"; fail "runs failed"; }
has '^- hakmem commit: [0-9a-f]\{12\}'
has '^- speed: hakmem is the fastest on [0-9] of 3 benchmarks$'
# speed: hakmem's throughput and its ratio to glibc, with the benchmark's command
has '^| random_mixed | `random_mixed 20000 400 1` | [0-9.]*[kMG]\? | \**[0-9.]*\** | '
has '^| larson-64k | `larson 2 0.02 100 1 16 65536` | [0-9.]*[kMG]\? | '
has '^`scripts/bench.py --runs 1 --benches random_mixed,larson,larson-64k,memory_return,latency --allocators hakmem,glibc`'
# OS calls per million calls, profiles, latency, soak
has '^| random_mixed | [0-9.]* | [0-9.]* |$'
for profile in speed balanced lean; do has "^| hakmem-$profile | [0-9.]* | "; done
has '^`latency random_mixed 20000 1` (pinned to CPU [0-9]*) and `latency thread_churn 20000 1` (unpinned)'
for w in random_mixed thread_churn; do
  for a in hakmem glibc; do has "^| $w | $a | [0-9,]* | [0-9,]* | [0-9,]* | [0-9,]* | [0-9,]* | [0-9,]* | "; done
done
has '^`scripts/soak --duration 2 --epoch 1 --bench random_mixed --allocators hakmem,glibc`'
has '^| hakmem | 2 | [0-9.]* | '
has '^| glibc | 2 | [0-9.]* | '
# the variants: the default build measured, each variant measured or saying why not
has '^| default | `make lib` | [0-9.]* | [0-9.]* | | | [0-9.]* | |$'
for v in standard hardened observe pgo; do
  grep -q "^| $v | \`make [^\`]*\` | \([0-9.]* | [0-9.]* | [-+][0-9.]* | \|cannot be built: .\)" "$card" ||
    { cat "$card"; fail "no row for the $v variant"; }
done
has '^| standard | `make BUILD=[^`]* VARIANT=standard lib` | [0-9.]* | '
# every chart it names is there
sed -n 's/^!\[[^]]*\](\(.*\))$/\1/p' "$card" > "$work/charts"
[ -s "$work/charts" ] || fail "SCORECARD.md names no chart"
while read -r chart; do
  [ -s "$work/docs/$chart" ] || fail "SCORECARD.md names $chart, which is not beside it"
done < "$work/charts"
echo "scorecard: every section, with figures, commands, variants and charts"
