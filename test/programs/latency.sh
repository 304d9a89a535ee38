#!/bin/sh
# SPDX-License-Identifier: MIT
# test-needs: python3
# bench/latency, tiny, with hakmem preloaded: a well-formed RESULT line per
# workload whose percentiles are in order, HIST buckets that add up to its
# samples, and the same percentiles taken from those buckets by the
# report's code (scripts/hakbench/latency.py) as by the program.
# shellcheck source-path=SCRIPTDIR source=../lib/common.sh
. "$(dirname "$0")/../lib/common.sh"

root=$(cd "$(dirname "$0")/../.." && pwd)
prog=$(dirname "$HAKMEM_LIB")/bench/latency
fail() { echo "$*"; exit 1; }

hak "$prog" all 200000 1 > "$work/out" || fail "latency failed"
"$prog" nosuch > /dev/null 2>&1 && fail "latency accepted an unknown workload"

PYTHONPATH="$root/scripts" python3 - "$work/out" <<'PY' || exit 1
import sys
from hakbench import latency, runner

text = open(sys.argv[1]).read()
results = runner.parse_fields(text, "RESULT ")
hists = runner.parse_fields(text, "HIST ")
workloads = [r.get("workload") for r in results]
if workloads != ["random_mixed", "thread_churn"]:
    sys.exit(f"RESULT lines for {workloads}, not random_mixed and thread_churn")
for r in results:
    w = r["workload"]
    try:
        values = [int(r[k]) for k in ("p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns")]
        samples, ops = int(r["samples"]), float(r["ops_per_sec"])
        int(r["resolution_ns"]), int(r["overhead_ns"]), float(r["seconds"])
    except (KeyError, ValueError) as e:
        sys.exit(f"{w}: malformed RESULT line ({e}): {r}")
    if values != sorted(values):
        sys.exit(f"{w}: percentiles out of order: {values}")
    if ops <= 0 or r["bench"] != "latency":
        sys.exit(f"{w}: bad RESULT line {r}")
    mine = [h for h in hists if h["workload"] == w]
    for h in mine:
        if not 0 <= int(h["lo_ns"]) <= int(h["hi_ns"]) or h["op"] not in ("malloc", "free") or int(h["count"]) < 1:
            sys.exit(f"{w}: bad HIST line {h}")
    # about one call in 64 of the 200000 (thread_churn makes a few more calls than asked)
    total = sum(int(h["count"]) for h in mine)
    if total != samples or not 200000 / 64 * 0.8 < samples < 260000 / 64 * 1.2:
        sys.exit(f"{w}: {samples} samples, HIST lines add up to {total}")
    pooled = latency.Histogram()
    pooled.add(mine, r)
    theirs = [pooled.percentile(q) for _, q in latency.PERCENTILES] + [pooled.max_ns]
    if theirs != values:
        sys.exit(f"{w}: the program says {values}, its histogram {theirs}")
PY
echo "latency: random_mixed and thread_churn, percentiles in order and as the histogram says"
