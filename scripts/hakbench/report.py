# SPDX-License-Identifier: MIT
"""The outputs of `make bench`: the terminal table, results.csv, runs.csv and
report.md.  A row is a dict with the keys of COLUMNS, one per benchmark and
allocator."""

import csv

from .allocators import BASELINE
from .runner import OS_CALLS

COLUMNS = (
    "bench", "allocator", "command", "cpu", "runs", "failed",
    "median_ops_per_sec", "mean_ops_per_sec", "cv_pct", f"ratio_to_{BASELINE}",
    "median_wall_s", "median_maxrss_kb", "median_minflt",
    *OS_CALLS, "traced_ops", "hakmem_os_stats",
)
RUN_COLUMNS = ("bench", "allocator", "run", "cpu", "status", "ops_per_sec", "seconds",
               "wall_s", "maxrss_kb", "minflt")
RATIO = f"ratio_to_{BASELINE}"
UNPINNED = "unpinned"


def cpu_cell(cpu):
    """The `cpu` column: the CPU a run was pinned to ("0,1" for several), or UNPINNED."""
    if isinstance(cpu, tuple):
        return ",".join(map(str, cpu))
    return UNPINNED if cpu is None else cpu


def pinning(cell):
    """How a run ran, from its CPU or cpu cell: "pinned to CPU 1", "pinned to CPUs 0,1" or "unpinned"."""
    if cell in (None, UNPINNED):
        return UNPINNED
    cell = cpu_cell(cell)
    return f"pinned to CPU{'s' * (',' in str(cell))} {cell}"


def si(x):
    """1234567 -> '1.23M'."""
    if x is None:
        return "-"
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def num(x, fmt):
    return "-" if x is None else format(x, fmt)


def mib(kb):
    return None if kb is None else kb / 1024


def _cells(row):
    """Terminal and markdown formatting of one row's figures."""
    return {
        "median ops/s": si(row["median_ops_per_sec"]),
        "mean ops/s": si(row["mean_ops_per_sec"]),
        "CV %": num(row["cv_pct"], ".1f"),
        f"vs {BASELINE}": num(row[RATIO], ".3f"),
        "wall s": num(row["median_wall_s"], ".3f"),
        "RSS MiB": num(mib(row["median_maxrss_kb"]), ".1f"),
        "minflt": si(row["median_minflt"]),
        **{c: num(row[c], "d") for c in OS_CALLS},
        "failed": str(row["failed"] or ""),
    }


TERMINAL = ("median ops/s", f"vs {BASELINE}", "CV %", "RSS MiB", "minflt", "mmap", "munmap", "madvise", "failed")


def terminal_table(rows, columns=TERMINAL, cells=_cells, first="benchmark"):
    """One line per row: its benchmark (the `first` column), its allocator,
    and the `columns` of cells(row), a blank line between benchmarks."""
    header = (first, "allocator", *columns)
    lines = [header] + [(r["bench"], r["allocator"], *(cells(r)[c] for c in columns)) for r in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def fmt(line):
        return "  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))).rstrip()

    out, previous = [fmt(header)], None
    for line in lines[1:]:
        if previous is not None and line[0] != previous:
            out.append("")
        out.append(fmt(line))
        previous = line[0]
    return "\n".join(out)


def _csv_value(x):
    if x is None:
        return ""
    if isinstance(x, float):
        return int(x) if x.is_integer() else round(x, 4)
    return x


def write_csv(path, columns, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for row in rows:
            w.writerow({k: _csv_value(row.get(k)) for k in columns})


MARKDOWN = ("median ops/s", "mean ops/s", "CV %", f"vs {BASELINE}", "wall s", "RSS MiB", "minflt", *OS_CALLS)


def markdown(title, machine, method, rows, charts, failures, columns=MARKDOWN, cells=_cells, notes=None):
    """report.md: the machine, the method, the charts, a table per
    benchmark (the `columns` of cells(row) of each allocator; under it
    notes(group) if given, lines about the benchmark's rows), the failures."""
    md = [f"# {title}", "", "## Machine", ""]
    md += [f"- {label}: {value}" for label, value in machine]
    md += ["", "## Method", "", method, ""]
    for chart, caption in charts:
        md += [f"![{caption}]({chart})", ""]
    for bench in dict.fromkeys(r["bench"] for r in rows):
        group = [r for r in rows if r["bench"] == bench]
        md += [f"## {bench}", "", f"`{group[0]['command']}`", ""]
        md.append("| allocator | " + " | ".join(columns) + " |")
        md.append("|---|" + "---:|" * len(columns))
        for r in group:
            figures = cells(r)
            md.append(f"| {r['allocator']} | " + " | ".join(figures[c] for c in columns) + " |")
        md += [f"\n{r['allocator']}'s own count: {r['hakmem_os_stats']}" for r in group if r.get("hakmem_os_stats")]
        md += [f"\n{line}" for line in (notes(group) if notes else ())]
        md.append("")
    if failures:
        md += ["## Failures", ""] + [f"- {f}" for f in failures] + [""]
    return "\n".join(md)
