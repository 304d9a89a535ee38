#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: python3
# The bench kit with any allocator: scripts/bench.py runs one given as
# NAME=PATH under its name and records its file in the report, runs hakmem
# under a profile as hakmem-PROFILE, and refuses
# a path that is not a preloadable shared object; scripts/compare tells a
# real difference between two result directories from noise, and warns of a
# benchmark pinned differently; the rounds' order puts every allocator after
# every other one; scripts/perfdoc counts no NAME-prof as a peer, leaves
# out a row a peer never finished, and tells a lead beyond the noise.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(dirname "$HAKMEM_LIB")
fail() { echo "$*"; exit 1; }

# --- scripts/compare on made-up results ---
mkdir -p "$work/old" "$work/new"
header="bench,allocator,run,status,ops_per_sec,seconds,wall_s,maxrss_kb,minflt"
runs() { # runs BENCH ALLOC MIB_OF_RSS MILLIONS...: one runs.csv row per figure
  b=$1 a=$2 rss=$3
  shift 3
  i=0
  for m in "$@"; do
    i=$((i + 1))
    echo "$b,$a,$i,ok,${m}000000,0.1,0.1,$((rss * 1024)),100"
  done
}
{
  echo "$header"
  runs random_mixed hakmem 2 100 101 102 103 104
  runs random_mixed glibc 2 70 72 74 76 78
  echo "random_mixed,glibc,6,SIGSEGV,,,0.1,,"
  runs larson hakmem 5 50 51 52
  runs prodcons hakmem 4 10 11 12 13 14
  runs tiny_hot hakmem 1 200 201 202 203 204
  runs tiny_hot glibc 1 100 101 102 103 104
} > "$work/old/runs.csv"
{
  echo "$header"
  runs random_mixed hakmem 3 110 111 112 113 114
  runs random_mixed glibc 2 71 73 75 77 79
  runs larson hakmem 5 60 61 62
  runs tiny_hot hakmem 1 220 221 222 223 224
  runs tiny_hot glibc 1 110 111 112 113 114
} > "$work/new/runs.csv"
printf 'bench,allocator,command\nlarson,hakmem,larson 2 1.0\n' > "$work/old/results.csv"
printf 'bench,allocator,command\nlarson,hakmem,larson 2 0.2\n' > "$work/new/results.csv"

python3 "$root/scripts/compare" "$work/old" "$work/new" > "$work/cmp" || { cat "$work/cmp"; fail "compare failed"; }
row() { # row BENCH ALLOC: its line of the table, blanks squeezed
  grep "^$1  *$2 " "$work/cmp" | tr -s ' '
}
# All five runs of NEW above all five of OLD: the exact p is 2/252.
[ "$(row random_mixed hakmem)" = "random_mixed hakmem 5/5 102.00M 112.00M 1.098 1.500 0.00794 faster" ] ||
  { cat "$work/cmp"; fail "random_mixed under hakmem: \"$(row random_mixed hakmem)\""; }
row random_mixed glibc | grep -q ' 5/5 74.00M 75.00M 1.014 1.000 0.69 same$' ||
  { cat "$work/cmp"; fail "random_mixed under glibc (interleaved runs, the failed one left out): \"$(row random_mixed glibc)\""; }
row larson hakmem | grep -q ' 3/3 .* too few runs$' || { cat "$work/cmp"; fail "larson: \"$(row larson hakmem)\""; }
grep -q '^warning: larson ran as `larson 2 1.0` in OLD, `larson 2 0.2` in NEW$' "$work/cmp" ||
  { cat "$work/cmp"; fail "no warning for a benchmark run with other arguments"; }
grep -q '^only in OLD: prodcons under hakmem$' "$work/cmp" || { cat "$work/cmp"; fail "no note of a row OLD alone has"; }
python3 "$root/scripts/compare" "$work/old" "$work/nowhere" > /dev/null 2>&1 && fail "compare accepted a missing directory"
# every allocator faster on one benchmark: the machine moved, said so; not where one stayed the same
grep -q '^warning: every allocator ran faster on tiny_hot' "$work/cmp" || { cat "$work/cmp"; fail "no warning of a machine drift"; }
grep -q 'every allocator ran .* on random_mixed' "$work/cmp" && { cat "$work/cmp"; fail "a drift warning where glibc stayed the same"; }

# --- scripts/compare: a benchmark pinned to another CPU, or not pinned, on one side ---
mkdir -p "$work/pin-old" "$work/pin-new"
pinned() { # pinned CPU_CELL MILLIONS...: runs.csv with the cpu column
  echo "bench,allocator,run,cpu,status,ops_per_sec,seconds,wall_s,maxrss_kb,minflt"
  cpu=$1
  shift
  runs random_mixed hakmem 2 "$@" | sed "s/^\([^,]*,[^,]*,[^,]*\),/\1,$cpu,/"
}
pinned 1 100 101 102 > "$work/pin-old/runs.csv"
pinned unpinned 100 101 102 > "$work/pin-new/runs.csv"
python3 "$root/scripts/compare" "$work/pin-old" "$work/pin-new" > "$work/cmp" || { cat "$work/cmp"; fail "compare failed"; }
grep -q '^warning: random_mixed ran pinned to CPU 1 in OLD, unpinned in NEW$' "$work/cmp" ||
  { cat "$work/cmp"; fail "no warning for a benchmark pinned in OLD alone"; }
# results written before the column: nothing said of pinning
python3 "$root/scripts/compare" "$work/old" "$work/pin-new" > "$work/cmp" || { cat "$work/cmp"; fail "compare failed"; }
grep -q 'pinned' "$work/cmp" && { cat "$work/cmp"; fail "a pinning warning against runs that do not record it"; }

# --- scripts/ab's difference: taken round by round, a drift of the machine that moves both runs of a
# round leaves it alone; without rounds (a mean against a mean) the same runs would be all noise ---
lib=$(cd "$(dirname "$HAKMEM_LIB")" && pwd)/$(basename "$HAKMEM_LIB")
python3 - "$root/scripts" "$lib" <<'PY' || fail "the kit's Python checks (rounds, memory return, profiles)"
import sys
sys.path.insert(0, sys.argv[1])
from hakbench import interleaved
a = [100.0, 80, 120, 90, 110, 95, 105, 85, 115, 100]
d, noise = interleaved.difference(a, [x * 1.02 for x in a])
assert abs(d - 2.0) < 1e-9 and noise < 1e-9, (d, noise)
d, noise = interleaved.difference(a, [x * (1.02 if i % 2 else 0.98) for i, x in enumerate(a)])
assert abs(d) < 1e-9 and 1.0 < noise < 2.0, (d, noise)
assert interleaved.difference([100.0], [101.0])[1] is None
# the rounds' order: each allocator first once in n rounds, and right after each other one equally
# often (over n rounds for an even count, 2n for an odd one), where a rotation keeps every neighbour
from collections import Counter
for n in range(1, 8):
    items = list(range(n))
    firsts, pairs = Counter(), Counter()
    for i in range(n if n % 2 == 0 else 2 * n):
        o = interleaved.order(items, i)
        assert sorted(o) == items, o
        firsts[o[0]] += 1
        pairs.update(zip(o, o[1:]))
    assert len(firsts) == n and len(set(firsts.values())) == 1, (n, firsts)
    assert len(pairs) == n * (n - 1) and len(set(pairs.values())) <= 1, (n, pairs)
assert [interleaved.order("AB", i) for i in range(2)] == [["A", "B"], ["B", "A"]]
# a memory-return run idle for 2 s has no figure at 5 s (not its last sample's)
from hakbench import memreturn, runner
done = runner.Run("ok", [{"below_10pct_ms": "-1"}])
samples = [(t, 1024) for t in range(100, 2001, 100)]
table = memreturn.markdown("memory_return 8 2 100", {"x": ({"peak_kb": "2048", "freed_kb": "2048"}, samples, done)},
                           None)
assert table[-2] == "| x | 2.0 | 2.0 | 1.0 | 1.0 | 1.0 | - | never |", table[-2]
# hakmem-PROFILE runs hakmem under that profile (hakmem alone: no profile set);
# the memory-return run, which runs hakmem once per profile, runs each once
from hakbench import allocators
lib = sys.argv[2]
allocs, _ = allocators.prepare(allocators.parse(["hakmem", "hakmem-lean", "hakmem-balanced"]), lib)
assert [(a.name, a.preload, a.env().get("HAKMEM_PROFILE")) for a in allocs] == [
    ("hakmem", lib, None), ("hakmem-lean", lib, "lean"), ("hakmem-balanced", lib, "balanced")], allocs
assert [a.name for a in memreturn.contenders(allocs)] == ["hakmem-speed", "hakmem-balanced", "hakmem-lean"]
assert [a.name for a in memreturn.contenders(allocs[1:])] == ["hakmem-lean", "hakmem-balanced"]
assert [allocators.is_hakmem(n) for n in ("hakmem", "hakmem-speed", "hakmem-x", "mimalloc")] == [True, True, False,
                                                                                                  False]
PY

# --- scripts/bench.py with an allocator given by path ---
bench() { python3 "$root/scripts/bench.py" --build "$build" --out "$work/results" "$@"; }
if bench --quick --runs 1 --benches random_mixed --allocators "glibc,mine=$HAKMEM_LIB,hakmem-lean" > "$work/bench.out" 2>&1
then :; else
  cat "$work/bench.out"
  fail "bench.py with an allocator given by path failed"
fi
report=$(ls "$work"/results/*/report.md)
results=$(dirname "$report")/results.csv
grep -q '^random_mixed,mine,' "$results" || { cat "$results"; fail "results.csv has no row for mine"; }
grep -q '^random_mixed,hakmem-lean,' "$results" || { cat "$results"; fail "results.csv has no row for hakmem-lean"; }
sum=$(sha256sum "$HAKMEM_LIB" | cut -d' ' -f1)
grep -q "^- mine: $HAKMEM_LIB (soname libhakmem\.so\.[0-9]*, [0-9]* bytes, modified .*, sha256 $sum)\$" "$report" ||
  { grep '^- ' "$report"; fail "report.md does not describe the file of mine"; }

# refused WHAT ALLOCATORS: bench.py must refuse them with status 2, saying WHAT
refused() {
  rc=0
  bench --quick --runs 1 --allocators "$2" > "$work/err" 2>&1 || rc=$?
  [ $rc = 2 ] && grep -q "$1" "$work/err" || { cat "$work/err"; fail "--allocators $2: status $rc"; }
}
refused "mine: $work/none.so does not exist" "hakmem,mine=$work/none.so"
refused "is not an ELF file" "mine=$work/old/runs.csv"
cp "$build/bench/random_mixed" "$work/prog"
refused "cannot be preloaded" "mine=$work/prog"
refused "name of a built-in allocator" "jemalloc=$HAKMEM_LIB"
refused "name of a built-in allocator" "hakmem-lean=$HAKMEM_LIB"
refused "unknown allocator hakmem-fast" "hakmem-fast"
refused "unknown allocator nosuch" "hakmem,nosuch"

# --- scripts/perfdoc on made-up results: NAME-prof is no peer, a row a
# peer never finished is left out and named (of the speed and of the peak
# RSS summaries), the noise is told apart ---
mkdir -p "$work/doc"
{
  echo "bench,allocator,runs,failed,median_ops_per_sec,median_maxrss_kb"
  echo "a,hakmem,5,0,102000000,2048"
  echo "a,glibc,5,0,74000000,1024"
  echo "a,jemalloc-prof,5,0,150000000,4096"
  echo "b,hakmem,5,0,201000000,1024"
  echo "b,glibc,5,0,200000000,1024"
  echo "c,hakmem,5,0,50000000,1024"
  echo "c,glibc,0,5,,"
  echo "a,mimalloc,5,0,60000000,4096"
  echo "b,mimalloc,5,0,100000000,4096"
  echo "c,mimalloc,5,0,40000000,4096"
  echo "d,hakmem,5,0,50000000,1024"
  echo "d,glibc,5,0,40000000,2048"
  echo "d,mimalloc,0,5,,"
} > "$work/doc/results.csv"
{
  echo "$header"
  runs a hakmem 2 100 101 102 103 104
  runs a glibc 1 70 72 74 76 78
  runs a jemalloc-prof 4 150 150 150 150 150
  runs b hakmem 1 199 200 201 202 203
  runs b glibc 1 198 199 200 201 202
} > "$work/doc/runs.csv"
python3 "$root/scripts/perfdoc" "$work/doc" > "$work/doc.md" || fail "perfdoc failed"
grep -q '^| hakmem | 2 of 2 (1 beyond the noise, behind beyond it on 0) |' "$work/doc.md" ||
  { cat "$work/doc.md"; fail "perfdoc: the summary"; }
grep -q '^Not compared, since hakmem or a peer finished no run of them: c, d\.$' "$work/doc.md" ||
  { cat "$work/doc.md"; fail "perfdoc: the rows a peer never finished"; }
# the peak RSS of the same rows: not d's against glibc's alone (mimalloc, which failed, may be leaner)
grep -q '^| hakmem | [^|]* | [^|]* | 1 of 2 | ' "$work/doc.md" ||
  { cat "$work/doc.md"; fail "perfdoc: the peak RSS summary counts a row a peer never finished"; }

# --- the scorecard's summary on made-up rows: a tie is no lead, and a row
# where hakmem or a peer finished no run is not compared but named ---
python3 - "$root/scripts" > "$work/sc.out" 2>&1 <<'EOF' || { cat "$work/sc.out"; fail "scorecard: the summary"; }
import importlib.machinery, sys, types
sys.path.insert(0, sys.argv[1])
sc = importlib.machinery.SourceFileLoader("scorecard", sys.argv[1] + "/scorecard").load_module()
row = lambda b, a, v: {"bench": b, "allocator": a, "median_ops_per_sec": v}
m = types.SimpleNamespace(latencies=None, rows=[
    row("a", "hakmem", 100), row("a", "glibc", 90), row("a", "mimalloc", 95),
    row("b", "hakmem", 100), row("b", "glibc", 100), row("b", "mimalloc", 50),   # a tie: no lead
    row("c", "hakmem", 100), row("c", "glibc", 90), row("c", "mimalloc", None),  # a peer failed: not compared
    row("d", "hakmem", None), row("d", "glibc", 90), row("d", "mimalloc", 80)])  # hakmem failed: not compared
app = lambda n: types.SimpleNamespace(name=n)
wall = lambda b, a, v: {"bench": b, "allocator": a, "median_wall_s": v}
apps_m = types.SimpleNamespace(apps=[app("p"), app("q")], allocs=[app("hakmem"), app("glibc"), app("mimalloc")],
                               rows=[wall("p", "hakmem", 1.0), wall("p", "glibc", 1.1), wall("p", "mimalloc", 1.2),
                                     wall("q", "hakmem", 1.0), wall("q", "glibc", 1.1), wall("q", "mimalloc", None)])
lines = sc.summary(m, [], apps_m)
assert lines[0] == "- speed: hakmem is the fastest on 1 of 2 benchmarks (not compared, hakmem or a peer finished no run: c, d)", lines[0]
assert lines[-2] == "- real programs: hakmem is the fastest on 1 of 1 (not compared, hakmem or a peer finished no run: q)", lines[-2]
EOF

echo "compare: faster, same, too few runs, warnings (arguments, pinning, drift); rounds in a balanced order; bench.py ran and described an allocator given by path; perfdoc's and the scorecard's summaries"
