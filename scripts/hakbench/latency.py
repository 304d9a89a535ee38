# SPDX-License-Identifier: MIT
"""The latency run of `make bench`: bench/latency under each allocator, a
few times, interleaved, each workload in a process of its own; the
histograms of an allocator's runs are added up and their percentiles become
a table, latency.csv and a chart.

bench/latency times one malloc or free call in 64, at random, and prints
its histogram (HIST lines: 8 buckets per power of two) and a RESULT line
per workload.  Percentiles here are taken as the program takes them: the
top of the bucket that holds the rank (nearest rank), at most the largest
sample."""

import math
import os
from dataclasses import dataclass, field

from . import charts, interleaved, report, runner

RUNS = 3  # at most, whatever --runs says: every run adds samples to the same histogram
# (workload, one thread): random_mixed pinned to one CPU as make bench pins
# its single-threaded benchmarks, thread churn's threads left to the
# scheduler as its multi-threaded ones are
WORKLOADS = (("random_mixed", True), ("thread_churn", False))
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999))
CSV_COLUMNS = ("workload", "allocator", "runs", "samples", "p50_ns", "p90_ns", "p99_ns", "p99.9_ns", "max_ns",
               "malloc_p99.9_ns", "free_p99.9_ns", "resolution_ns", "overhead_ns", "command", "cpu")


@dataclass
class Histogram:
    """The pooled samples of one workload under one allocator."""
    buckets: dict = field(default_factory=dict)  # (op, lo_ns, hi_ns) -> count
    max_ns: int = 0
    runs: int = 0
    resolution_ns: int = 0
    overhead_ns: int = 0
    cpu: int | None = None  # the CPU its runs were pinned to, None: left to the scheduler

    def add(self, hist_lines, result):
        for h in hist_lines:
            key = (h["op"], int(h["lo_ns"]), int(h["hi_ns"]))
            self.buckets[key] = self.buckets.get(key, 0) + int(h["count"])
        self.max_ns = max(self.max_ns, int(result["max_ns"]))
        self.resolution_ns = max(self.resolution_ns, int(result["resolution_ns"]))
        self.overhead_ns = max(self.overhead_ns, int(result["overhead_ns"]))
        self.runs += 1

    def samples(self, op=None):
        return sum(n for (o, _, _), n in self.buckets.items() if op in (None, o))

    def percentile(self, q, op=None):
        """The value at quantile q of the samples of `op` (None: every call)."""
        counts = {}
        for (o, lo, hi), n in self.buckets.items():
            if op in (None, o):
                counts[lo, hi] = counts.get((lo, hi), 0) + n
        total = sum(counts.values())
        if not total:
            return None
        rank, seen = max(1, math.ceil(q * total)), 0
        for (lo, hi), n in sorted(counts.items()):
            seen += n
            if seen >= rank:
                return min(hi, self.max_ns)
        return self.max_ns


def command(workload, args):
    """The command line of one workload's runs, from the suite's arguments
    (all OPS SEED)."""
    return " ".join(["latency", workload, *args[1:]])


def _pool(results, name, r):
    """Adds the histograms of run r, under allocator `name`, to results."""
    hists = runner.parse_fields(r.stdout, "HIST ")
    for res in r.results:
        w = res["workload"]
        results.setdefault(w, {}).setdefault(name, Histogram(cpu=r.cpu)).add(
            [h for h in hists if h["workload"] == w], res)


def run(program, args, allocs, runs, timeout, progress):
    """({workload: {allocator name: Histogram}}, [failures]): the suite's
    arguments `args` (all OPS SEED) one workload at a time, RUNS runs at most
    of each allocator, the rounds in the order of make bench's
    (interleaved.order)."""
    results, failures = {}, []
    runs = min(runs, RUNS)
    for workload, one_thread in WORKLOADS:
        cpu = runner.pinned_cpu() if one_thread else None
        for i in range(1, runs + 1):
            for a in interleaved.order(allocs, i - 1):
                progress.step(f"latency {workload} {a.name} run {i}/{runs}")
                r = runner.run([program, workload, *args[1:]], a.env(), timeout, cpu=cpu)
                if r.ok:
                    _pool(results, a.name, r)
                else:
                    failures.append(f"latency {workload} under {a.name}, run {i}: {r.status}")
    return results, failures


def how(args, results):
    """The sentence that says how `results` were measured: the commands,
    their pinning, the runs."""
    runs = max((h.runs for by in results.values() for h in by.values()), default=0)
    each = " and ".join(f"`{command(w, args)}` ({report.pinning(next(iter(by.values())).cpu)})"
                        for w, by in results.items())
    return f"{each}, {runs} run{'s' * (runs != 1)} of each allocator, interleaved, their samples pooled"


def _ns(x):
    return "-" if x is None else f"{x:,}"


def rows(args, results):
    """latency.csv's rows."""
    for workload, by_alloc in results.items():
        for name, h in by_alloc.items():
            yield {"workload": workload, "allocator": name, "runs": h.runs, "samples": h.samples(),
                   **{f"{label}_ns": h.percentile(q) for label, q in PERCENTILES}, "max_ns": h.max_ns,
                   "malloc_p99.9_ns": h.percentile(0.999, "malloc"), "free_p99.9_ns": h.percentile(0.999, "free"),
                   "resolution_ns": h.resolution_ns, "overhead_ns": h.overhead_ns,
                   "command": command(workload, args), "cpu": report.cpu_cell(h.cpu)}


TABLE = ("samples", *(f"{label} ns" for label, _ in PERCENTILES), "max ns", "malloc p99.9 ns", "free p99.9 ns")


def table(results):
    """Markdown table lines: one row per workload and allocator."""
    md = ["| workload | allocator | " + " | ".join(TABLE) + " |", "|---|---|" + "---:|" * len(TABLE)]
    for workload, by_alloc in results.items():
        for name, h in by_alloc.items():
            cells = [f"{h.samples():,}", *(_ns(h.percentile(q)) for _, q in PERCENTILES), _ns(h.max_ns),
                     _ns(h.percentile(0.999, "malloc")), _ns(h.percentile(0.999, "free"))]
            md.append(f"| {workload} | {name} | " + " | ".join(cells) + " |")
    return md


def markdown(args, results, chart):
    """The report's section."""
    resolution = max((h.resolution_ns for by in results.values() for h in by.values()), default=0)
    md = ["## latency", "", how(args, results), "",
          "Time of single malloc and free calls, one in 64 sampled at random, less the timer's own cost "
          f"(its resolution here: {resolution} ns); percentiles of all the calls timed.", ""]
    if chart:
        md += [f"![latency]({chart})", ""]
    return md + table(results) + [""]


def write(out, args, results, chart=True):
    """latency.csv and, with `chart`, latency.svg by gnuplot: its name, or
    None."""
    report.write_csv(os.path.join(out, "latency.csv"), CSV_COLUMNS, rows(args, results))
    bars = [{"bench": f"{workload}-{label}", "allocator": name, "ns": h.percentile(q)}
            for workload, by_alloc in results.items() for label, q in PERCENTILES[2:]
            for name, h in by_alloc.items()]
    ok = chart and bars and charts.bar_chart(os.path.join(out, "latency.svg"),
                                   "Sampled malloc/free latency (lower is better)", "ns", bars,
                                   lambda r: r["ns"] or None, log=True, ymin=1)
    return "latency.svg" if ok else None
