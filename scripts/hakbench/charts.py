# SPDX-License-Identifier: MIT
"""SVG bar charts of a report, drawn by gnuplot: one group of bars per
benchmark, one bar per allocator."""

import subprocess

GNUPLOT = """\
set terminal svg size {width},480 dynamic noenhanced font "sans,11" background "white"
set output "{output}"
set title "{title}"
set ylabel "{ylabel}"
{logscale}
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics
set key outside top center horizontal
{reference}
set yrange [{ymin}:*]
set bmargin 4
set xtics nomirror font "sans,9"
$data << EOD
{data}
EOD
plot for [i=2:{last}] $data using i:xtic(1) title columnheader(i)
"""


def bar_chart(output, title, ylabel, rows, value, log=False, reference=None, ymin=None):
    """Draws value(row) for each benchmark and allocator in `rows`, with a
    dashed line at y = reference if given, the y axis from ymin if given;
    skips rows where value is None.  Returns False when gnuplot failed."""
    benches = list(dict.fromkeys(r["bench"] for r in rows))
    allocs = list(dict.fromkeys(r["allocator"] for r in rows))
    table = {(r["bench"], r["allocator"]): value(r) for r in rows}
    lines = ["bench " + " ".join(allocs)]
    for b in benches:
        cells = [table.get((b, a)) for a in allocs]
        lines.append(b + " " + " ".join("NaN" if c is None else f"{c:.6g}" for c in cells))
    script = GNUPLOT.format(
        width=max(640, 90 * len(benches) * max(1, len(allocs)) // 3),
        output=output, title=title, ylabel=ylabel,
        logscale="set logscale y" if log else "", ymin=ymin if ymin is not None else "*" if log else 0,
        reference="" if reference is None else
        f"set arrow from graph 0, first {reference} to graph 1, first {reference} nohead dashtype 2",
        data="\n".join(lines), last=len(allocs) + 1,
    )
    r = subprocess.run(["gnuplot"], input=script, text=True, capture_output=True)
    return r.returncode == 0


def line_chart(output, title, xlabel, panels, log=False, points=False):
    """Draws `panels` one above the other, on the same x axis: each is
    (ylabel, {series name: [(x, y), ...]}), one line per series.  Returns
    False when gnuplot failed or there was nothing to draw."""
    panels = [(ylabel, {n: pts for n, pts in series.items() if pts}) for ylabel, series in panels]
    panels = [p for p in panels if p[1]]
    if not panels:
        return False
    script = [
        f'set terminal svg size 800,{120 + 300 * len(panels)} dynamic noenhanced font "sans,11" background "white"',
        f'set output "{output}"',
    ]
    plots, blocks = [], 0
    for ylabel, series in panels:
        lines = []
        for name, pts in series.items():
            script += [f"$d{blocks} << EOD", *(f"{x:.6g} {y:.6g}" for x, y in pts), "EOD"]
            lines.append(f'$d{blocks} using 1:2 with {"linespoints" if points else "lines"} title "{name}"')
            blocks += 1
        plots.append((ylabel, lines))
    script += [f'set multiplot layout {len(panels)},1 title "{title}"', "set grid", "set key outside right",
               f'set xlabel "{xlabel}"', "set logscale y" if log else "set yrange [0:*]"]
    for ylabel, lines in plots:
        script += [f'set ylabel "{ylabel}"', "plot " + ", ".join(lines)]
    script += ["unset multiplot", ""]
    r = subprocess.run(["gnuplot"], input="\n".join(script), text=True, capture_output=True)
    return r.returncode == 0
