#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares hakmem with mimalloc, tcmalloc, jemalloc, glibc's malloc and any
allocator given by the path of its shared object.

Every benchmark binary runs unchanged under each allocator (LD_PRELOAD, or
nothing for glibc), one process at a time, the allocators interleaved round-
robin so that drifts of the machine hit them all alike.  Prints a table and
writes bench/results/YYYY-MM-DD-HHMMSS/ (report.md, results.csv, runs.csv,
charts).  See bench/README.md.

  scripts/bench.py [--quick] [--runs N] [--benches a,b] [--allocators a,b,NAME=PATH]
  scripts/bench.py --smoke       each benchmark once, tiny, hakmem and glibc
  scripts/bench.py --callgrind   instructions per random_mixed iteration
"""

import argparse
import os
import sys
import time
from dataclasses import dataclass

from hakbench import (allocators, callgrind, charts, interleaved, latency, machine, memreturn, report, runner,
                      stats, suite)
from hakbench.allocators import BASELINE
from hakbench.runner import tail

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CALLGRIND_ARGS = ("2000000", "400", "1")


class Progress:
    """One status line on stderr, rewritten in place on a terminal."""

    def __init__(self, total):
        self.total, self.done = total, 0
        self.tty = sys.stderr.isatty()

    def step(self, what):
        self.done += 1
        line = f"[{self.done}/{self.total}] {what}"
        print(f"\r{line}\033[K" if self.tty else line, end="" if self.tty else "\n", file=sys.stderr, flush=True)

    def say(self, msg):
        print(("\r\033[K" if self.tty else "") + msg, file=sys.stderr, flush=True)

    def close(self):
        if self.tty:
            print("\r\033[K", end="", file=sys.stderr, flush=True)


def program(build, bench):
    return os.path.join(build, "bench", bench.program)


def run_matrix(benches, allocs, opts, tools, progress):
    """All timed runs, then one strace run per benchmark and allocator.
    Returns (runs: {(bench, alloc): [Run]}, os_calls, self_stats, failures)."""
    traced = "strace" in tools
    runs, os_calls, self_stats, failures = {}, {}, {}, []

    def failed(bench, alloc, what, r):
        failures.append(f"{bench.name} under {alloc.name}, {what}: {r.status}")
        progress.say("\n".join(filter(None, [f"FAIL {failures[-1]}", tail(r.stderr)])))

    rounds = 0  # counted across benchmarks: none always opens one, after the last one's strace runs
    for bench in benches:
        argv = [program(opts.build, bench), *bench.args(opts.size)]
        cpu = runner.pinned_cpu() if bench.one_thread else None
        for i in range(1, opts.runs + 1):
            # the order changes from round to round, so that no allocator
            # always runs right after the same one (fresh pages cost what the
            # run before left behind)
            rounds += 1
            for alloc in interleaved.order(allocs, rounds - 1):
                progress.step(f"{bench.name} {alloc.name} run {i}/{opts.runs}")
                r = runner.run(argv, alloc.env(), opts.timeout, rusage="time" in tools, cpu=cpu)
                runs.setdefault((bench.name, alloc.name), []).append(r)
                if not r.ok:
                    failed(bench, alloc, f"run {i}", r)
        for alloc in allocs if traced else ():
            progress.step(f"{bench.name} {alloc.name} strace")
            env = alloc.env(HAKMEM_SS_OS_STATS="1") if allocators.is_hakmem(alloc.name) else alloc.env()
            counts, r = runner.os_call_counts(argv, env, opts.timeout)
            if not r.ok:
                failed(bench, alloc, "strace run", r)
                continue
            # the malloc and free calls of that run, to count OS calls per call
            os_calls[bench.name, alloc.name] = {
                **counts, "traced_ops": round(sum(float(x["ops_per_sec"]) * float(x["seconds"]) for x in r.results))}
            own = runner.parse_fields(r.stderr, "[SS_OS_STATS]")
            if own:
                self_stats[bench.name, alloc.name] = " ".join(f"{k}={v}" for k, v in own[-1].items())
    return runs, os_calls, self_stats, failures


def median_of(runs, attr):
    s = stats.summarize(x for x in (getattr(r, attr) for r in runs) if x is not None)  # no GNU time: no RSS
    return s.median if s else None


def summarize(benches, allocs, opts, runs, os_calls, self_stats):
    rows = []
    for bench in benches:
        for alloc in allocs:
            all_runs = runs[bench.name, alloc.name]
            good = [r for r in all_runs if r.ok]
            ops = stats.summarize(r.ops_per_sec for r in good)
            calls = os_calls.get((bench.name, alloc.name), {})
            rows.append({
                "bench": bench.name, "allocator": alloc.name,
                "command": " ".join([bench.program, *bench.args(opts.size)]),
                "cpu": report.cpu_cell(all_runs[0].cpu),
                "runs": len(good), "failed": len(all_runs) - len(good),
                "median_ops_per_sec": ops and ops.median, "mean_ops_per_sec": ops and ops.mean,
                "cv_pct": ops and ops.cv,
                "median_wall_s": median_of(good, "wall"),
                "median_maxrss_kb": median_of(good, "maxrss_kb"),
                "median_minflt": median_of(good, "minflt"),
                **{c: calls.get(c) for c in runner.OS_CALLS}, "traced_ops": calls.get("traced_ops"),
                "hakmem_os_stats": self_stats.get((bench.name, alloc.name)),
            })
    base = {r["bench"]: r["median_ops_per_sec"] for r in rows if r["allocator"] == BASELINE}
    for r in rows:
        b = base.get(r["bench"])
        r[report.RATIO] = r["median_ops_per_sec"] / b if b and r["median_ops_per_sec"] else None
    return rows


def raw_rows(runs):
    for (bench, alloc), rs in runs.items():
        for i, r in enumerate(rs, 1):
            yield {"bench": bench, "allocator": alloc, "run": i, "status": r.status, "cpu": report.cpu_cell(r.cpu),
                   "ops_per_sec": r.ops_per_sec if r.ok else None,
                   "seconds": r.results[0]["seconds"] if r.ok else None,
                   "wall_s": f"{r.wall:.6f}", "maxrss_kb": r.maxrss_kb, "minflt": r.minflt}


def method(opts, tools, nallocs):
    """How the figures of a report were taken, for the report."""
    text = [
        f"{opts.runs} runs of each benchmark under each allocator ({opts.size} sizes), one process at a time, "
        "the allocators interleaved in rounds, each round in another order (the rows of a Williams square, "
        "A B E C D, B A C E D, ... for five: none always runs right after the same one)"
        f"{interleaved.balance_note(nallocs, opts.runs)}; "
        "single-threaded benchmarks pinned to one CPU, the same for all (the `cpu` column of results.csv and "
        "runs.csv), by the affinity the benchmark is spawned with: no other program runs before it under the "
        "allocator, where GNU time would count it too.  "
        "Every allocator runs the same binary: hakmem, the peers and "
        "those given by path with LD_PRELOAD, glibc with nothing preloaded; hakmem-PROFILE is hakmem under "
        "HAKMEM_PROFILE=PROFILE (hakmem alone: the default, speed).",
        "Throughput is the benchmark's own figure, malloc and free calls per second of its timed loop: "
        f"median, mean, coefficient of variation, and the median's ratio to {BASELINE}'s.",
        "Peak RSS and minor page faults of each run are measured by GNU time (ru_maxrss, ru_minflt), medians; "
        "GNU time runs without the allocator, which `env` preloads for the benchmark alone."
        if "time" in tools else "No peak RSS nor page faults: GNU time is not installed.",
        "The syscall counts come from one extra, untimed run under `strace -f -c`, in which hakmem (and "
        "hakmem-PROFILE) also counts its own OS calls (HAKMEM_SS_OS_STATS=1)." if "strace" in tools
        else "No syscall counts: strace is not installed.",
    ]
    return "  ".join(text)


def write_report(opts, m):
    """report.md, the CSV files and the charts of a measurement, in a new
    directory under opts.out; returns its path."""
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    out = os.path.join(opts.out, stamp)
    os.makedirs(out)
    report.write_csv(os.path.join(out, "results.csv"), report.COLUMNS, m.rows)
    report.write_csv(os.path.join(out, "runs.csv"), report.RUN_COLUMNS, raw_rows(m.runs))
    drawn = "gnuplot" in m.tools

    chart_list = []
    if drawn:
        if any(r[report.RATIO] for r in m.rows) and charts.bar_chart(
                os.path.join(out, "throughput.svg"), f"Throughput relative to {BASELINE} (median, higher is better)",
                f"ops/s / {BASELINE} ops/s", m.rows, lambda r: r[report.RATIO], reference=1):
            chart_list.append(("throughput.svg", f"throughput relative to {BASELINE}"))
        if charts.bar_chart(os.path.join(out, "rss.svg"), "Peak RSS (median, lower is better)", "MiB", m.rows,
                            lambda r: r["median_maxrss_kb"] and r["median_maxrss_kb"] / 1024, log=True):
            chart_list.append(("rss.svg", "peak RSS"))

    md = report.markdown(f"hakmem benchmarks {stamp}", machine.describe(ROOT, m.allocs), method(opts, m.tools, len(m.allocs)),
                         m.rows, chart_list, m.failures)
    if m.returned:
        command, results = m.returned
        chart = memreturn.write(out, results) if drawn else None
        md += "\n" + "\n".join(memreturn.markdown(command, results, chart))
    if m.latencies:
        args, results = m.latencies
        chart = latency.write(out, args, results, drawn)
        md += "\n" + "\n".join(latency.markdown(args, results, chart))
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(md)
    return out


def smoke(benches, allocs, opts):
    """Each benchmark once at its smallest size; fails on any crash or missing RESULT line."""
    missing = {"hakmem", "glibc"} - {a.name for a in allocs}
    bad = [f"{name}: not available" for name in sorted(missing)]
    total = 0
    for bench in benches:
        argv = [program(opts.build, bench), *bench.args("smoke")]
        for alloc in allocs:
            total += 1
            r = runner.run(argv, alloc.env(), opts.timeout)
            print(f"{'ok  ' if r.ok else 'FAIL'} {bench.name:20} {alloc.name:8} {r.wall:.2f}s "
                  f"{'' if r.ok else r.status}".rstrip())
            if not r.ok:
                bad.append(f"{bench.name} under {alloc.name}: {r.status}")
                if r.stderr.strip():
                    print(tail(r.stderr))
    if bad:
        print(f"bench-smoke: FAILED: {'; '.join(bad)}")
        return 1
    print(f"bench-smoke: all {total} runs ok")
    return 0


def instruction_counts(allocs, opts):
    """Instructions per random_mixed iteration under each allocator: total Ir
    / ITERS, the part of it spent in the benchmark's own loop, and malloc and
    free's part with start-up and exit left out: the difference between runs
    of 2 * ITERS and ITERS iterations, less the loop's, over ITERS."""
    argv = [os.path.join(opts.build, "bench", "random_mixed"), *CALLGRIND_ARGS]
    iters = int(CALLGRIND_ARGS[0])
    double = [argv[0], str(2 * iters), *CALLGRIND_ARGS[1:]]
    print(f"random_mixed {' '.join(CALLGRIND_ARGS)} under callgrind, instructions per iteration "
          f"(steady: {2 * iters} iterations less {iters}, start-up and exit left out):")
    print(f"  {'allocator':15} {'total':>8} {'loop':>8} {'malloc+free':>12} {'steady':>8}")
    status = 0
    for alloc in allocs:
        count, r = callgrind.instructions(argv, alloc.env(), opts.timeout)
        twice, r2 = callgrind.instructions(double, alloc.env(), opts.timeout) if count else (None, r)
        if twice is None:
            print("\n".join(filter(None, [f"  {alloc.name:15} failed: {r2.status}", tail(r2.stderr)])))
            status = 1
        else:
            total, loop = count.total / iters, count.main / iters
            steady = ((twice.total - count.total) - (twice.main - count.main)) / iters
            print(f"  {alloc.name:15} {total:8.2f} {loop:8.2f} {total - loop:12.2f} {steady:8.2f}")
    return status


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="build directory (default build/)")
    p.add_argument("--runs", type=int, default=5, help="runs per benchmark and allocator (default 5)")
    p.add_argument("--quick", action="store_true", help="small sizes: the whole matrix in about a minute")
    p.add_argument("--benches", default="", help="comma-separated benchmarks or programs (default all)")
    p.add_argument("--allocators", default=",".join(allocators.ORDER),
                   help=f"comma-separated, from {','.join(allocators.ORDER)}, {allocators.PROFILES_HELP}, and "
                   "NAME=PATH for an allocator built as a shared object, run under NAME (default: hakmem and the "
                   "peers)")
    p.add_argument("--timeout", type=float, help="seconds before a run is killed (default 600, 60 with --quick)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results"), help="where reports go")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--smoke", action="store_true", help="each benchmark once, tiny, under hakmem and glibc")
    mode.add_argument("--callgrind", action="store_true", help="instructions per random_mixed iteration")
    opts = p.parse_args(argv)
    if opts.runs < 1:
        p.error("--runs must be at least 1")
    try:
        opts.allocator_specs = allocators.parse(n for n in opts.allocators.split(",") if n)
    except ValueError as e:
        p.error(str(e))
    opts.size = "smoke" if opts.smoke else "quick" if opts.quick else "full"
    if opts.timeout is None:
        opts.timeout = 600.0 if opts.size == "full" else 60.0
    return opts


@dataclass
class Measurement:
    allocs: list
    tools: set
    rows: list  # results.csv's, one per benchmark and allocator
    runs: dict  # {(bench, allocator): [Run]}
    failures: list
    returned: tuple | None  # (command, memreturn results) of the memory-return run
    latencies: tuple | None  # (arguments after the workload, latency results) of the latency runs
    out: str = ""  # the report's directory


def measure(opts, benches, allocs, tools):
    """Runs the comparison (the timed matrix, then the memory-return and
    latency runs of `benches`) and writes its report."""
    timed = [b for b in benches if b not in suite.SECTIONS]
    idle = suite.MEMORY_RETURN in benches
    sampled = suite.LATENCY in benches
    progress = Progress(len(timed) * len(allocs) * (opts.runs + ("strace" in tools))
                        + idle * len(memreturn.contenders(allocs))
                        + sampled * len(latency.WORKLOADS) * len(allocs) * min(opts.runs, latency.RUNS))
    runs, os_calls, self_stats, failures = run_matrix(timed, allocs, opts, tools, progress)
    returned = latencies = None
    if idle:
        args = suite.MEMORY_RETURN.args(opts.size)
        results = memreturn.run([program(opts.build, suite.MEMORY_RETURN), *args], allocs, opts.timeout, progress)
        failures += [f"memory_return under {n}: {r.status}" for n, (_, _, r) in results.items() if not r.ok]
        returned = (" ".join(["memory_return", *args]), results)
    if sampled:
        args = suite.LATENCY.args(opts.size)
        results, failed = latency.run(program(opts.build, suite.LATENCY), args, allocs, opts.runs, opts.timeout,
                                      progress)
        failures += failed
        latencies = (args, results)
    progress.close()
    m = Measurement(allocs, tools, summarize(timed, allocs, opts, runs, os_calls, self_stats), runs, failures,
                    returned, latencies)
    m.out = write_report(opts, m)
    return m


def main():
    opts = parse_args()
    benches = suite.select([b for b in opts.benches.split(",") if b])
    hakmem_so = os.path.join(opts.build, "libhakmem.so")
    if opts.smoke:
        allocs, _ = allocators.prepare(["hakmem", "glibc"], hakmem_so)
        return smoke(benches, allocs, opts)
    if opts.callgrind:
        allocs, tools = allocators.prepare(opts.allocator_specs, hakmem_so, tools=("valgrind",))
        return instruction_counts(allocs, opts) if "valgrind" in tools else 1
    allocs, tools = allocators.prepare(opts.allocator_specs, hakmem_so, tools=("time", "gnuplot", "strace"))
    if not allocs:
        sys.exit("no allocator to run")

    m = measure(opts, benches, allocs, tools)
    if m.rows:
        print(report.terminal_table(m.rows))
    if m.returned:
        print("\n" + "\n".join(memreturn.markdown(*m.returned, None)[4:]))
    if m.latencies:
        print("\n" + "\n".join(latency.markdown(*m.latencies, None)[2:]))
    print(f"\nreport: {os.path.relpath(m.out, os.getcwd())}/report.md")
    if m.failures:
        print(f"\n{len(m.failures)} failed runs:\n" + "\n".join("  " + f for f in m.failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
