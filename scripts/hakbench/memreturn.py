# SPDX-License-Identifier: MIT
"""The memory-return run of `make bench`: bench/memory_return under each
allocator, and under hakmem in each of its profiles, once each, one after the
other; the resident set it samples while idle becomes a table, a CSV file
and a chart of RSS over time."""

import os

from . import charts, report, runner
from .allocators import PROFILES, hakmem, profile_of

CSV_COLUMNS = ("allocator", "t_ms", "rss_kb")


def contenders(allocs):
    """The allocators, hakmem once per profile (named hakmem-PROFILE; a
    profile given on its own as well runs once)."""
    out = []
    expanded = any(a.name == "hakmem" for a in allocs)
    for a in allocs:
        if a.name == "hakmem":
            out += [hakmem(a.preload, p) for p in PROFILES]
        elif not (expanded and profile_of(a.name)):
            out.append(a)
    return out


def run(argv, allocs, timeout, progress):
    """{allocator name: (peak line fields, [(t_ms, rss_kb)], Run)}."""
    results = {}
    for a in contenders(allocs):
        progress.step(f"memory_return {a.name}")
        r = runner.run(argv, a.env(), timeout)
        peak = runner.parse_fields(r.stdout, "PEAK ")
        samples = [(int(s["t_ms"]), int(s["rss_kb"])) for s in runner.parse_fields(r.stdout, "SAMPLE ")]
        results[a.name] = (peak[0] if peak else {}, samples, r)
    return results


def _mib(kb):
    return f"{int(kb) / 1024:.1f}" if kb not in (None, "") else "-"


def _at(samples, t_ms):
    """RSS (KiB) of the last sample taken at or before t_ms; None when the
    run sampled for less than t_ms (a short run's last sample is not its
    figure at a time it never reached)."""
    kb = None
    for t, rss in samples:
        if t <= t_ms:
            kb = rss
    return kb if samples and samples[-1][0] >= t_ms else None


def markdown(command, results, chart):
    """The report's section: one row per allocator."""
    marks = (500, 1000, 2000, 5000)
    md = ["## memory_return", "", f"`{command}`", "",
          "Resident set after a peak of small and medium blocks is freed, then with the program idle "
          "(no allocator call); -: the run was idle for less time than that.", ""]
    if chart:
        md += [f"![RSS over time]({chart})", ""]
    md.append("| allocator | peak MiB | just freed MiB | " + " | ".join(f"{t / 1000:g} s idle MiB" for t in marks)
              + " | below 10 % of peak after |")
    md.append("|---|" + "---:|" * (3 + len(marks)))
    for name, (peak, samples, r) in results.items():
        if not r.ok:
            md.append(f"| {name} | {r.status} |" + " |" * (2 + len(marks)))
            continue
        res = r.results[0]
        below = int(res["below_10pct_ms"])
        md.append(f"| {name} | {_mib(peak.get('peak_kb'))} | {_mib(peak.get('freed_kb'))} | "
                  + " | ".join(_mib(_at(samples, t)) for t in marks)
                  + f" | {'never' if below < 0 else f'{below} ms'} |")
    md.append("")
    return md


def write(out, results):
    """memory_return.csv and, with gnuplot, memory_return.svg (its name) or None."""
    rows = [{"allocator": name, "t_ms": t, "rss_kb": kb}
            for name, (peak, samples, r) in results.items() if r.ok  # a failed run's samples: left out
            for t, kb in [(0, peak.get("freed_kb"))] + samples if kb not in (None, "")]
    report.write_csv(os.path.join(out, "memory_return.csv"), CSV_COLUMNS, rows)
    series = {n: [(row["t_ms"] / 1000, int(row["rss_kb"]) / 1024) for row in rows if row["allocator"] == n]
              for n, (_, samples, r) in results.items() if r.ok and samples}
    ok = charts.line_chart(os.path.join(out, "memory_return.svg"),
                           "RSS after freeing the peak, program idle (lower is better)", "seconds idle",
                           [("RSS MiB", series)], log=True, points=True)
    return "memory_return.svg" if ok else None
