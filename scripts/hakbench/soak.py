# SPDX-License-Identifier: MIT
"""Soak runs: bench/soak under each allocator for a long time, reported
every epoch, and what the epochs say: stability of the throughput, drift of
throughput and resident set from the start of the run to its end, the
spread of the time per call from epoch to epoch, and the system calls that
go on after the start.

Allocators run two at a time, side by side, each on a CPU of its own,
and they swap CPUs at every epoch, together (SOAK_CPUS and SOAK_START,
bench/soak.c): the CPUs of a virtual machine can differ by a third in speed
and drift apart during a run, and each soak takes half its epochs on each
(an even count of epochs: see even_duration), so that whatever else the
machine does hits both alike.  More than two run in pairs, one pair after
the other (an odd one out runs alone, taking turns on the two CPUs all the
same).  A machine with one CPU runs them one at a time."""

import csv
import math
import os
import threading
import time

from . import charts, report, runner, stats
from .allocators import BASELINE

WORKLOADS = ("random_mixed", "larson", "thread_churn")
CSV_COLUMNS = ("allocator", "cpu", "epoch", "t_s", "ops", "ops_per_sec", "ns_per_op", "rss_kb", "minflt", "maps",
               "mmap", "munmap", "madvise", "mremap", "mapped_kb")
OS_CALLS = ("mmap", "munmap", "madvise", "mremap")  # counted by hakmem itself (hak_os_stats)
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999))
NS_COLUMNS = (*(f"ns_per_op_{label}" for label, _ in PERCENTILES), "ns_per_op_max")
SUMMARY_COLUMNS = ("allocator", "epochs", "mean_ops_per_sec", "cv_pct", "cv_cpu_pct", "drift_pct", "rss_first_kb",
                   "rss_last_kb", "rss_peak_kb", "rss_drift_pct", *NS_COLUMNS, "minflt_after_first", "maps_first",
                   "maps_last", "os_calls_after_first")

# What a soak of hakmem beside mimalloc is held to: the resident set grows
# by 1 % at most from the first fifth of the run to the last, the
# throughput moves by 2 % at most, and varies from epoch to epoch no more
# than the baseline's in the same run (within a CPU: see _cv_within_cpu).
RSS_DRIFT_MAX = 1.0
DRIFT_MAX = 2.0
# Seconds between starting a pair's processes and their first epoch, which
# both start at the same instant: enough for either to be loaded and set up.
START_LEAD = 0.5


def groups(allocs, cpus):
    """The allocators in the groups that run together: pairs, or one at a
    time on a single CPU."""
    width = 2 if len(cpus) >= 2 else 1
    return [allocs[i:i + width] for i in range(0, len(allocs), width)]


def even_duration(duration, epoch):
    """`duration`, an epoch longer if it holds an odd count of epochs: a
    soak that takes turns on two CPUs then spends as many epochs on each."""
    epochs = int(duration / epoch + 1e-9)  # as bench/soak counts them
    return duration + epoch if epochs % 2 else duration


def run(program, allocs, workload, duration, epoch, say):
    """Runs `program workload duration epoch` under each allocator, pairs
    side by side, taking turns on two CPUs, the pair's first epoch at the
    same instant.  Returns {allocator name: Run}, in the order given."""
    cpus = sorted(os.sched_getaffinity(0))[:2]
    argv = [program, workload, f"{duration:g}", f"{epoch:g}"]
    timeout = duration + START_LEAD + 120
    results = {}
    for n, group in enumerate(groups(allocs, cpus), 1):
        turns = [",".join(map(str, cpus[k:] + cpus[:k])) for k in range(len(group))]
        side = " beside ".join(f"{a.name} (CPUs {t})" for a, t in zip(group, turns))
        until = time.strftime("%H:%M:%S", time.localtime(time.time() + START_LEAD + duration))
        say(f"soak {n}/{len(groups(allocs, cpus))}: {side}, {workload} for {duration:g} s, until about {until}")
        start = f"{time.monotonic() + START_LEAD:.6f}"  # CLOCK_MONOTONIC, bench/soak's clock
        threads = []
        for a, t in zip(group, turns):
            def one(a=a, t=t):
                results[a.name] = runner.run(argv, a.env(SOAK_CPUS=t, SOAK_START=start), timeout)
            threads.append(threading.Thread(target=one))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return {a.name: results[a.name] for a in allocs}


def epoch_rows(results):
    """soak.csv's rows, from the EPOCH lines of each run."""
    for name, r in results.items():
        for e in runner.parse_fields(r.stdout, "EPOCH "):
            yield {"allocator": name, "cpu": e.get("cpu"), "epoch": int(e["n"]),
                   **{c: e.get(c) for c in CSV_COLUMNS[3:]}}


def read_csv(path):
    """soak.csv's rows, numbers as numbers."""
    with open(path, newline="") as f:
        return [{k: (v if k == "allocator" else float(v) if v not in ("", None) else None) for k, v in row.items()}
                for row in csv.DictReader(f)]


def _drift(values):
    """% change of the mean of the last fifth of `values` from the mean of
    the first fifth, each fifth rounded down to an even count of epochs
    (two at least), so that it holds as many epochs on each of the two CPUs
    a soak takes turns on."""
    fifth = max(2, len(values) // 5 // 2 * 2) if len(values) >= 2 else 1
    first, last = stats.summarize(values[:fifth]).mean, stats.summarize(values[-fifth:]).mean
    return 100.0 * (last - first) / first if first else None


def _cv_within_cpu(epochs):
    """CV (%) of the epochs' throughput, each divided by the mean of the
    epochs on its CPU: what varies from epoch to epoch, without the
    difference between the two CPUs a soak takes turns on (a fifth on this
    kind of machine at times, which alone made the CV of all the epochs
    10 % for two allocators).  The plain CV where the epochs ran
    on one CPU; None where a CPU had fewer than two epochs (its one epoch
    would be its own mean: a CV of 0 that measured nothing)."""
    by_cpu = {}
    for e in epochs:
        by_cpu.setdefault(e["cpu"], []).append(float(e["ops_per_sec"]))
    if any(len(v) < 2 for v in by_cpu.values()):
        return None
    means = {cpu: stats.summarize(v).mean for cpu, v in by_cpu.items()}
    if not all(means.values()):
        return None
    return stats.summarize(float(e["ops_per_sec"]) / means[e["cpu"]] for e in epochs).cv


def _percentile(values, q):
    """The value at quantile q of `values` (nearest rank), or None where
    they are too few (under 1 / (1 - q)) for its rank to be below the top:
    with 60 epochs, p99 and p99.9 would both be the maximum."""
    return stats.percentile(values, q) if math.ceil(q * len(values)) < len(values) else None


def analyze(rows):
    """One summary (a dict of SUMMARY_COLUMNS) per allocator, in order."""
    out = []
    for name in dict.fromkeys(r["allocator"] for r in rows):
        epochs = sorted((r for r in rows if r["allocator"] == name), key=lambda r: float(r["epoch"]))
        ops = [float(e["ops_per_sec"]) for e in epochs]
        rss = [float(e["rss_kb"]) for e in epochs]
        ns = [float(e["ns_per_op"]) for e in epochs]
        s = stats.summarize(ops)
        counted = [e for e in epochs[1:] if e.get("mmap") not in (None, "")]
        out.append({
            "allocator": name, "epochs": len(epochs), "mean_ops_per_sec": s.mean, "cv_pct": s.cv,
            "cv_cpu_pct": _cv_within_cpu(epochs),
            "drift_pct": _drift(ops), "rss_first_kb": rss[0], "rss_last_kb": rss[-1], "rss_peak_kb": max(rss),
            "rss_drift_pct": _drift(rss),
            **{f"ns_per_op_{label}": _percentile(ns, q) for label, q in PERCENTILES}, "ns_per_op_max": max(ns),
            "minflt_after_first": sum(float(e["minflt"]) for e in epochs[1:]),
            "maps_first": epochs[0]["maps"], "maps_last": epochs[-1]["maps"],
            "os_calls_after_first": sum(float(e[c]) for e in counted for c in OS_CALLS) if counted else None,
        })
    return out


def _f(x, fmt):
    return "-" if x is None else format(float(x), fmt)


def _mib(kb):
    return _f(kb and float(kb) / 1024, ".1f")


def targets(summaries):
    """{allocator: (RSS drift ok, throughput drift ok, CV ok or None)}: the
    lead's soak criteria, CV within a CPU against the baseline's when it ran too."""
    base = next((s["cv_cpu_pct"] for s in summaries if s["allocator"] == BASELINE), None)
    return {s["allocator"]: (s["rss_drift_pct"] is not None and s["rss_drift_pct"] <= RSS_DRIFT_MAX,
                             s["drift_pct"] is not None and abs(s["drift_pct"]) <= DRIFT_MAX,
                             None if base is None or s["allocator"] == BASELINE or s["cv_cpu_pct"] is None
                             else s["cv_cpu_pct"] <= base)
            for s in summaries}


def tables(summaries):
    """Markdown: the summary table, then the criteria met."""
    md = ["| allocator | epochs | mean M ops/s | CV % | CV % within a CPU | drift % | RSS first MiB | last | peak | "
          "RSS drift % | ns/op p50 | p90 | p99 | p99.9 | max | page faults after epoch 1 | mappings first → last | "
          "hakmem's OS calls after epoch 1 |",
          "|---|" + "---:|" * 17]
    for s in summaries:
        md.append(" | ".join([
            f"| {s['allocator']}", str(s["epochs"]), _f(s["mean_ops_per_sec"] / 1e6, ".2f"), _f(s["cv_pct"], ".2f"),
            _f(s["cv_cpu_pct"], ".2f"), _f(s["drift_pct"], "+.2f"), _mib(s["rss_first_kb"]), _mib(s["rss_last_kb"]),
            _mib(s["rss_peak_kb"]), _f(s["rss_drift_pct"], "+.2f"), *(_f(s[c], ".2f") for c in NS_COLUMNS),
            _f(s["minflt_after_first"], ".0f"), f"{_f(s['maps_first'], '.0f')} → {_f(s['maps_last'], '.0f')}",
            _f(s["os_calls_after_first"], ".0f")]) + " |")
    mark = {True: "yes", False: "**no**", None: "-"}
    md += ["", f"| allocator | RSS drift ≤ +{RSS_DRIFT_MAX:g} % | throughput drift within ±{DRIFT_MAX:g} % | "
           f"CV within a CPU no worse than {BASELINE}'s |", "|---|---|---|---|"]
    md += [f"| {name} | " + " | ".join(mark[t] for t in checks) + " |" for name, checks in targets(summaries).items()]
    return md


def chart(path, rows):
    """Throughput and RSS over time, one line per allocator."""
    names = dict.fromkeys(r["allocator"] for r in rows)

    def series(value):
        return {n: [(float(r["t_s"]), value(r)) for r in rows if r["allocator"] == n] for n in names}
    return charts.line_chart(path, "Soak: throughput and RSS over time", "seconds",
                             [("M ops/s", series(lambda r: float(r["ops_per_sec"]) / 1e6)),
                              ("RSS MiB", series(lambda r: float(r["rss_kb"]) / 1024))])


HOW = ("Each allocator ran bench/soak, one process for the whole run, the workload's state kept from one epoch "
       "to the next; two at a time side by side, each on a CPU of its own, the two swapping CPUs at the end of every "
       "epoch, together, for as many epochs on each CPU.  Per epoch: malloc and free "
       "calls per second, and wall time per call (ns/op: the epoch's time divided by its calls, all threads); "
       "the resident set at the epoch's end; page faults and, under hakmem only, hakmem's own count of its "
       "mmap, munmap, madvise and mremap calls (hak_os_stats) in the epoch; the process's mappings.  "
       "Drift: the mean of the last fifth of the epochs against the mean of the first fifth.  CV: of the "
       "epochs' throughput; within a CPU: each epoch's throughput divided by the mean of the allocator's epochs "
       "on the same CPU, so that the difference between the two CPUs does not count as the allocator's "
       "variation.  ns/op percentiles: over the epochs (nearest rank), a proxy for "
       "tail latency; - where the epochs are too few for one to be below the maximum (100 for p99, 1000 for p99.9).")


def write(out, command, results, machine_info, drawn):
    """soak.csv, soak_summary.csv, soak-NAME.log, soak.svg (when drawn) and
    soak.md into `out`.  Returns (summaries, failures)."""
    rows = list(epoch_rows(results))
    report.write_csv(os.path.join(out, "soak.csv"), CSV_COLUMNS, rows)
    for name, r in results.items():
        with open(os.path.join(out, f"soak-{name}.log"), "w") as f:
            f.write(r.stdout + r.stderr)
    rows = read_csv(os.path.join(out, "soak.csv"))
    failures = [f"soak under {name}: {r.status}" for name, r in results.items() if not r.ok]
    rows = [r for r in rows if r["allocator"] in {n for n, x in results.items() if x.ok}]  # a failed run's epochs: not drawn either
    summaries = analyze(rows)
    report.write_csv(os.path.join(out, "soak_summary.csv"), SUMMARY_COLUMNS, summaries)
    md = [f"# hakmem soak {os.path.basename(out)}", "", "## Machine", ""]
    md += [f"- {label}: {value}" for label, value in machine_info]
    md += ["", "## Method", "", f"`{command}`", "", HOW, ""]
    if drawn and chart(os.path.join(out, "soak.svg"), rows):
        md += ["![throughput and RSS over time](soak.svg)", ""]
    md += ["## Results", ""] + tables(summaries) + [""]
    if failures:
        md += ["## Failures", ""] + [f"- {f}" for f in failures] + [""]
    with open(os.path.join(out, "soak.md"), "w") as f:
        f.write("\n".join(md))
    return summaries, failures
