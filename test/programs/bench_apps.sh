#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: python3 sqlite3
# test-timeout: 180
# make bench-apps at its smallest (scripts/bench-apps --quick --rounds 1)
# under hakmem and glibc: sqlite3 and Debian's CPython, and memcached and
# RocksDB's db_bench where they are installed.  The report's results.csv
# must have a row per program and allocator with a positive wall time, peak
# RSS, page fault count and mmap count (strace's run), the runs pinned;
# runs.csv a successful run each; report.md a section per program; and the
# make target must pass QUICK, ROUNDS, APPS, ALLOCATORS and NO_STRACE on.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(dirname "$HAKMEM_LIB")
fail() { echo "$*"; exit 1; }

[ -x /usr/bin/python3 ] || { echo "skip: no /usr/bin/python3 (Debian's python3)"; exit 77; }
apps=sqlite3,python-json
command -v memcached >/dev/null && command -v memcaslap >/dev/null && apps=$apps,memcached
command -v db_bench >/dev/null && apps=$apps,rocksdb-fillrandom

# the target's command line
make -s --no-print-directory -n -C "$root" bench-apps BUILD="$build" QUICK=1 ROUNDS=1 APPS="$apps" \
  ALLOCATORS=hakmem,glibc NO_STRACE=1 > "$work/make.out" 2>&1 || { cat "$work/make.out"; fail "make -n bench-apps failed"; }
grep -q "scripts/bench-apps --build $build --quick --rounds 1 --apps $apps --no-strace --allocators hakmem,glibc\$" \
  "$work/make.out" || { cat "$work/make.out"; fail "make bench-apps does not pass its variables on"; }

# refused: an unknown program, with status 2
rc=0
python3 "$root/scripts/bench-apps" --apps nosuch > "$work/err" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q "unknown app nosuch" "$work/err" || { cat "$work/err"; fail "--apps nosuch: status $rc"; }

python3 "$root/scripts/bench-apps" --build "$build" --out "$work/results" --quick --rounds 1 --apps "$apps" \
  --allocators hakmem,glibc > "$work/out" 2>&1 || { cat "$work/out"; fail "scripts/bench-apps failed"; }
command -v time >/dev/null && [ -x "$(command -v time)" ] || { echo "skip: no GNU time (peak RSS, page faults)"; exit 77; }
command -v strace >/dev/null || { echo "skip: no strace (OS calls)"; exit 77; }

dir=$(ls -d "$work"/results/apps-*)
[ -s "$dir/report.md" ] || fail "no report.md in $dir"
python3 - "$dir" "$apps" <<'PY' || { cat "$work/out"; fail "the report's figures"; }
import csv, os, sys
out, apps = sys.argv[1], sys.argv[2].split(",")
rows = {(r["bench"], r["allocator"]): r for r in csv.DictReader(open(os.path.join(out, "results.csv")))}
for app in apps:
    for alloc in ("hakmem", "glibc"):
        r = rows.get((app, alloc))
        assert r, f"results.csv: no row for {app} under {alloc}"
        assert r["runs"] == "1" and r["failed"] == "0", r
        for col in ("median_wall_s", "median_maxrss_kb", "median_faults", "mmap"):
            assert r[col] and float(r[col]) > 0, f"{app} under {alloc}: {col} = {r[col]!r}"
        assert r["cpu"].replace(",", "").isdigit(), f"{app} under {alloc}: not pinned: {r['cpu']!r}"
        assert float(r["wall_vs_fastest"]) >= 1, r
runs = list(csv.DictReader(open(os.path.join(out, "runs.csv"))))
assert sorted((r["bench"], r["allocator"]) for r in runs) == sorted(rows), runs
assert all(r["status"] == "ok" and float(r["wall_s"]) > 0 for r in runs), runs
md = open(os.path.join(out, "report.md")).read()
for app in apps:
    assert f"\n## {app}\n" in md, f"report.md: no section {app}"
assert "\n- sqlite3: " in md, "report.md: no version of the sqlite3 package"
PY
grep -q '^sqlite3  *hakmem  *[0-9.]*  ' "$work/out" || { cat "$work/out"; fail "no table on the terminal"; }

# the comparison with hakmem round by round: pairs of runs that both ran,
# the mean ratio less 1 and its 95 % interval, none for hakmem itself
PYTHONPATH="$root/scripts" python3 - <<'PY' || fail "apps.paired"
from hakbench import apps, runner
ok = lambda wall: runner.Run("ok", wall=wall)
runs = {("p", "hakmem"): [ok(1.0), ok(2.0), ok(1.0), ok(4.0)],
        ("p", "other"): [ok(1.1), ok(2.4), runner.Run("timed out"), ok(4.0)]}
delta, noise = apps.paired(runs, "p", "other")
assert abs(delta - 10.0) < 1e-9 and abs(noise - 100 * 4.30 * 0.1 / 3 ** 0.5) < 1e-9, (delta, noise)  # t at 2 degrees of freedom
assert apps.paired(runs, "p", "hakmem") == (None, None)
assert apps.paired({("p", "hakmem"): [ok(1.0)], ("p", "other"): [ok(2.0)]}, "p", "other") == (None, None)
PY
echo "bench-apps: $apps under hakmem and glibc, each with its wall time, peak RSS, page faults and OS calls"
