# SPDX-License-Identifier: MIT
"""Real programs from Debian's packages under each allocator (make
bench-apps): RocksDB's db_bench and cache_bench, the sqlite3 shell, CPython,
gcc and memcached, each run as its users benchmark it, timed from outside
(wall time, peak RSS and page faults by GNU time; mmap, munmap, madvise,
mremap and brk in one extra run under strace).  The allocators are
interleaved in rounds as make bench's are (interleaved.order), each run
pinned the same way for all: a program of one thread to one CPU, of two to
two."""

import getpass
import glob
import os
import shutil
import socket
import statistics
import tempfile
import time
from dataclasses import dataclass

from . import allocators, charts, interleaved, machine, report, runner, stats

# Debian's CPython, not whatever python3 is first on PATH (a pyenv shim is a
# shell script, which the preload would measure too).
PYTHON = "/usr/bin/python3"
TMP = "/var/tmp"  # on local disk, where /tmp may be memory
TARGET_PCT = 3.0  # the difference the rounds should resolve
CONFIDENCE = 0.9  # of the median's interval the resolution is taken from


def _items_sql(path, rows):
    """sqlite3's script: `rows` INSERT statements in one transaction (a
    shell parses and runs each, as an import does), an index, LIKE scans, an
    UPDATE of a seventh of the rows, two GROUP BYs."""
    with open(path, "w") as f:
        f.write("CREATE TABLE items(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, price REAL, note TEXT);\n"
                "BEGIN;\n")
        for i in range(1, rows + 1):
            x = i * 2654435761 % 4294967296
            f.write(f"INSERT INTO items VALUES({i},{x % 1000},'item-{x:08x}',{x % 100000 / 100},'{'n' * (x % 64)}');\n")
        f.write("COMMIT;\n"
                "CREATE INDEX items_grp ON items(grp, price);\n"
                "SELECT count(*) FROM items WHERE name LIKE '%ab%';\n"
                "SELECT count(*), sum(length(note)) FROM items WHERE note LIKE 'nnnnnnnnnn%' AND name LIKE 'item-f%';\n"
                "UPDATE items SET price = price * 1.1, note = note || '+' WHERE grp % 7 = 0;\n"
                "SELECT grp, count(*), round(sum(price), 2), max(name) FROM items GROUP BY grp\n"
                "  ORDER BY 3 DESC LIMIT 5;\n"
                "SELECT substr(name, 6, 2) AS p, count(*), avg(length(note)) FROM items GROUP BY p\n"
                "  ORDER BY p LIMIT 5;\n")


@dataclass(frozen=True)
class App:
    name: str  # its row in the report; APPS selects by it or by the part before its first '-'
    what: str  # what it does, for the report
    packages: tuple  # the Debian packages it needs
    commands: tuple  # the programs they must have installed
    threads: int  # the CPUs it is pinned to: 1, or 2 for a program of two threads and more
    steps: tuple  # argv templates, run one after the other in a fresh directory, timed together
    sizes: dict  # {"full": {parameter: value}, "quick": {...}}
    server: tuple = ()  # argv template of a server the steps talk to: the server runs under the allocator
    prepare: object = None  # prepare(parameters, inputs directory): writes its input files, untimed
    missing: str = ""  # what it means when the commands are not there after installing the packages


APPS = (
    App("rocksdb-readwhilewriting",
        "db_bench: fillseq of 300k keys of 200 B (one thread), then readrandom and readwhilewriting with 2 "
        "reader threads (and a writer) on the same database, on local disk",
        ("rocksdb-tools",), ("db_bench",), 2,
        (("db_bench", "--benchmarks=fillseq", "--num={num}", "--value_size=200", "--threads=1", "--db={run}/db"),
         ("db_bench", "--benchmarks=readrandom,readwhilewriting", "--use_existing_db=1", "--num={num}",
          "--reads={reads}", "--value_size=200", "--threads=2", "--db={run}/db")),
        {"full": {"num": 300000, "reads": 60000}, "quick": {"num": 20000, "reads": 5000}}),
    App("rocksdb-fillrandom", "db_bench: fillrandom of 300k keys of 200 B, one writing thread (RocksDB flushes "
        "and compacts on threads of its own: two CPUs), on local disk",
        ("rocksdb-tools",), ("db_bench",), 2,
        (("db_bench", "--benchmarks=fillrandom", "--num={num}", "--value_size=200", "--threads=1", "--db={run}/db"),),
        {"full": {"num": 300000}, "quick": {"num": 20000}}),
    *(App(f"rocksdb-cache-{label}",
          f"cache_bench: RocksDB's block cache (LRU), 2 threads, {value} B values, a cache of {cache >> 20} MiB "
          "filled first, then lookups, inserts and erases",
          ("rocksdb-tools",), ("cache_bench",), 2,
          (("cache_bench", "-threads=2", f"-value_bytes={value}", "-cache_size={cache}", "-ops_per_thread={ops}"),),
          {"full": {"cache": cache, "ops": ops}, "quick": {"cache": cache >> 4, "ops": 20000}},
          missing="rocksdb-tools installs no cache_bench here")
      for label, value, cache, ops in (("256", 256, 64 << 20, 400000), ("4k", 4096, 256 << 20, 200000))),
    App("sqlite3", "the sqlite3 shell, an in-memory database: a script of INSERTs in one transaction, an index, "
        "LIKE scans, an UPDATE, GROUP BYs", ("sqlite3",), ("sqlite3",), 1,
        (("sqlite3", "-batch", ":memory:", ".read {inputs}/items.sql"),),
        {"full": {"rows": 600000}, "quick": {"rows": 20000}},
        prepare=lambda p, inputs: _items_sql(os.path.join(inputs, "items.sql"), p["rows"])),
    App("python-json", "CPython (Debian's python3): records as dicts, to JSON and back, indexed and sorted "
        "(bench/apps/pyjson.py)", ("python3",), (PYTHON,), 1,
        ((PYTHON, "-I", "{root}/bench/apps/pyjson.py", "{records}"),),
        {"full": {"records": 100000}, "quick": {"records": 5000}}),
    App("gcc", "gcc -O2 -g compiling C: the benchmark programs of bench/, one cc1 after the other",
        ("gcc",), ("gcc",), 1,
        (("gcc", "-std=gnu11", "-O2", "-g", "-pthread", "-I{root}/include", "-c", "{root}/{sources}"),),
        {"full": {"sources": "bench/*.c"}, "quick": {"sources": "bench/fixed_size.c"}}),
    App("memcached", "memcached (2 threads) under the allocator, loaded over loopback by memaslap (not under it): "
        "a bounded count of gets and sets, 16 connections; the time is the load's, the RSS, faults and OS calls "
        "the server's", ("memcached", "libmemcached-tools"), ("memcached", "memcaslap"), 2,
        (("memcaslap", "-s", "127.0.0.1:{port}", "-T", "1", "-c", "16", "-x", "{ops}"),),
        {"full": {"ops": 200000}, "quick": {"ops": 10000}},
        server=("memcached", "{as_user}", "-l", "127.0.0.1", "-p", "{port}", "-U", "0", "-t", "2", "-m", "256")),
)


def select(selectors):
    """The apps named (a name, or the part of names before their first '-':
    `rocksdb` for the four), in APPS' order; all for none."""
    if not selectors:
        return list(APPS)
    known = {a.name for a in APPS} | {a.name.split("-")[0] for a in APPS}
    unknown = [s for s in selectors if s not in known]
    if unknown:
        raise ValueError(f"unknown app {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [a for a in APPS if a.name in selectors or a.name.split("-")[0] in selectors]


def _expand(template, values, globs=True):
    """argv of an argv template: each {name} replaced by values[name]; an
    element that is one {name} whose value is a list stands for its items
    (none for an empty list); with `globs`, an element with * after that,
    for the files it matches, sorted, as a shell would."""
    argv = []
    for element in template:
        key = element[1:-1] if element.startswith("{") and element.endswith("}") else None
        if key in values and isinstance(values[key], list):
            argv += values[key]
            continue
        arg = element.format(**values)
        argv += sorted(glob.glob(arg)) or [arg] if globs and "*" in arg else [arg]
    return argv


def _values(app, size, root, run_dir, inputs, port):
    user = ["-u", getpass.getuser()] if os.geteuid() == 0 else []  # memcached will not run as root without it
    return {**app.sizes[size], "root": root, "run": run_dir, "inputs": inputs, "port": port, "as_user": user}


SHOWN = {"root": ".", "run": "$RUN", "inputs": "$INPUTS", "port": "$PORT", "as_user": []}


def command(app, size):
    """The commands of an app, for the report: the server (measured), then
    the steps, with its directories and port as $RUN, $INPUTS and $PORT."""
    values = {**app.sizes[size], **SHOWN}
    shown = " && ".join(" ".join(_expand(s, values, globs=False)) for s in app.steps)
    return f"{' '.join(_expand(app.server, values))} & {shown}" if app.server else shown


def needed(apps):
    """The Debian packages of `apps` whose programs are missing."""
    return sorted({p for a in apps if not all(shutil.which(c) for c in a.commands) for p in a.packages})


def available(apps):
    """(the apps that can run, [(app, why not)] of those that cannot)."""
    ok, skipped = [], []
    for a in apps:
        gone = [c for c in a.commands if not shutil.which(c)]
        if not gone:
            ok.append(a)
        else:
            installed = all(allocators.package_version(p) for p in a.packages)
            why = a.missing if installed and a.missing else \
                f"no {', '.join(gone)} (package {' '.join(a.packages)} " \
                f"{'installed' if installed else 'not installed: needs root and apt-get, and HAKMEM_NO_APT unset'})"
            skipped.append((a, why))
    return ok, skipped


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port, seconds):
    """Whether something accepts connections on 127.0.0.1:port within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.02)
    return False


def _total(xs):
    xs = list(xs)
    return None if not xs or any(x is None for x in xs) else sum(xs)


def _combined(runs, measured, cpu):
    """One Run of an app's run: the first failure's status (ok if none), the
    steps' wall time added up, the peak RSS of the `measured` runs (the
    steps, or the server) and their page faults added up."""
    bad = next((r for r in runs + measured if not r.ok), None)
    return runner.Run(bad.status if bad else "ok", wall=sum(r.wall for r in runs),
                      maxrss_kb=max((r.maxrss_kb for r in measured if r.maxrss_kb is not None), default=None),
                      minflt=_total(r.minflt for r in measured), majflt=_total(r.majflt for r in measured),
                      cpu=cpu, stderr=bad.stderr if bad else "")


@dataclass
class Context:
    size: str
    root: str
    inputs: str  # the app's input files, written once
    tmp: str  # where each run gets a fresh directory
    timeout: float
    rusage: bool


def run_app(app, alloc, ctx, strace=False):
    """One run of `app` under `alloc` in a fresh directory, removed after.
    Returns its combined Run, and with `strace` the counts of OS calls of
    the run under `strace -f -c` too: ({syscall: calls} or None, Run)."""
    cpu = runner.pinned_cpus(app.threads)
    run_dir = tempfile.mkdtemp(prefix=f"{app.name}-", dir=ctx.tmp)
    try:
        port = _free_port() if app.server else None
        values = _values(app, ctx.size, ctx.root, run_dir, ctx.inputs, port)
        steps = [_expand(s, values) for s in app.steps]
        env = alloc.env()
        if not app.server:
            if strace:
                counted = [runner.os_call_counts(s, env, ctx.timeout, cwd=run_dir, results=False) for s in steps]
                runs = [r for _, r in counted]
                counts = {c: sum(k[c] for k, _ in counted) for c in runner.OS_CALLS}
                return counts, _combined(runs, runs, cpu)
            runs = [runner.run(s, env, ctx.timeout, rusage=ctx.rusage, cpu=cpu, cwd=run_dir, results=False)
                    for s in steps]
            return None, _combined(runs, runs, cpu)
        # the clients run without the allocator, on the same CPUs
        client_env = allocators.Allocator("client", None).env()
        server = _expand(app.server, values)
        with tempfile.NamedTemporaryFile(mode="r", suffix=".strace") as summary:
            rusage = ctx.rusage and not strace
            if strace:
                server, env = runner.strace_command(server, env, summary.name)
            runs = []
            with runner.serving(server, env, rusage=rusage, cpu=cpu, cwd=run_dir) as srv:
                if srv.ok and not _listening(port, 10.0):
                    runs.append(runner.Run(f"{app.server[0]} not listening on 127.0.0.1:{port}", cpu=cpu))
                for s in steps if srv.ok and not runs else ():
                    runs.append(runner.run(s, client_env, ctx.timeout, cpu=cpu, cwd=run_dir, results=False))
                    if not runs[-1].ok:
                        break
            counts = runner.strace_counts(summary.read()) if strace else None
        return counts, _combined(runs, [srv], cpu)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


@dataclass
class Measurement:
    allocs: list
    apps: list  # those that ran
    skipped: list  # [(app, why)] of those that could not
    rows: list  # results.csv's, one per app and allocator
    runs: dict  # {(app name, allocator name): [Run]}
    failures: list
    size: str
    rounds: int
    tools: set
    out: str = ""  # the report's directory


def _summary(app, alloc, size, runs, counts):
    good = [r for r in runs if r.ok]
    walls = [r.wall for r in good]
    s = stats.summarize(walls)
    interval = stats.median_interval(walls, CONFIDENCE)

    def median(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    faults = [r.minflt + r.majflt for r in good if r.minflt is not None and r.majflt is not None]
    return {
        "bench": app.name, "allocator": alloc.name, "command": command(app, size),
        "cpu": report.cpu_cell(runs[0].cpu), "runs": len(good), "failed": len(runs) - len(good),
        "median_wall_s": s and s.median, "min_wall_s": s and s.min, "max_wall_s": s and s.max,
        "iqr_wall_s": stats.iqr(walls), "resolution_pct": interval and interval.resolution(s.median),
        "median_maxrss_kb": median(r.maxrss_kb for r in good), "median_faults": median(faults),
        "median_minflt": median(r.minflt for r in good), "median_majflt": median(r.majflt for r in good),
        **{c: (counts or {}).get(c) for c in runner.OS_CALLS},
    }


COLUMNS = ("bench", "allocator", "command", "cpu", "runs", "failed", "median_wall_s", "min_wall_s", "max_wall_s",
           "iqr_wall_s", "resolution_pct", "wall_vs_fastest", "vs_hakmem_pct", "vs_hakmem_noise_pct",
           "median_maxrss_kb", "median_faults", "median_minflt", "median_majflt", *runner.OS_CALLS)
RUN_COLUMNS = ("bench", "allocator", "run", "cpu", "status", "wall_s", "maxrss_kb", "minflt", "majflt")


def measure(apps, allocs, size, rounds, tools, progress, tmp, root, timeout):
    """Runs every app under every allocator, `rounds` rounds each in
    another order, then once more under strace if it is among `tools`.
    Returns a Measurement (without its report)."""
    runs, counts, failures = {}, {}, []
    traced = "strace" in tools
    work = tempfile.mkdtemp(prefix="hakmem-apps-", dir=tmp)
    try:
        for app in apps:
            inputs = os.path.join(work, app.name)
            os.makedirs(inputs)
            if app.prepare:
                app.prepare(app.sizes[size], inputs)
            ctx = Context(size, root, inputs, work, timeout, "time" in tools)

            def check(alloc, what, r):
                if not r.ok:
                    failures.append(f"{app.name} under {alloc.name}, {what}: {r.status}")
                    progress.say("\n".join(filter(None, [f"FAIL {failures[-1]}", runner.tail(r.stderr)])))

            for i in range(rounds):
                for alloc in interleaved.order(allocs, i):
                    progress.step(f"{app.name} {alloc.name} run {i + 1}/{rounds}")
                    _, r = run_app(app, alloc, ctx)
                    runs.setdefault((app.name, alloc.name), []).append(r)
                    check(alloc, f"run {i + 1}", r)
            for alloc in allocs if traced else ():
                progress.step(f"{app.name} {alloc.name} strace")
                c, r = run_app(app, alloc, ctx, strace=True)
                check(alloc, "strace run", r)
                if r.ok:
                    counts[app.name, alloc.name] = c
            shutil.rmtree(inputs, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [_summary(app, alloc, size, runs[app.name, alloc.name], counts.get((app.name, alloc.name)))
            for app in apps for alloc in allocs]
    for app in apps:
        group = [r for r in rows if r["bench"] == app.name]
        fastest = min((r["median_wall_s"] for r in group if r["median_wall_s"]), default=None)
        for r in group:
            r["wall_vs_fastest"] = r["median_wall_s"] / fastest if fastest and r["median_wall_s"] else None
            r["vs_hakmem_pct"], r["vs_hakmem_noise_pct"] = paired(runs, app.name, r["allocator"])
    return Measurement(allocs, apps, [], rows, runs, failures, size, rounds, tools)


def paired(runs, app, alloc):
    """(difference, noise), in %, of `alloc`'s wall time against hakmem's,
    round by round (interleaved.difference: a spell of the machine that
    slows both runs of a round leaves their ratio alone); (None, None) for
    hakmem itself, or without two rounds that both ran."""
    mine, theirs = runs.get((app, "hakmem")), runs.get((app, alloc))
    if alloc == "hakmem" or not mine or not theirs:
        return None, None
    pairs = [(a.wall, b.wall) for a, b in zip(mine, theirs) if a.ok and b.ok]
    if len(pairs) < 2:
        return None, None
    return interleaved.difference(*zip(*pairs))


def raw_rows(runs):
    for (app, alloc), rs in runs.items():
        for i, r in enumerate(rs, 1):
            yield {"bench": app, "allocator": alloc, "run": i, "status": r.status, "cpu": report.cpu_cell(r.cpu),
                   "wall_s": f"{r.wall:.6f}", "maxrss_kb": r.maxrss_kb, "minflt": r.minflt, "majflt": r.majflt}


def cells(row):
    """Terminal and markdown formatting of one row's figures."""
    num = report.num
    spread = "-" if row["min_wall_s"] is None else f"{row['min_wall_s']:.3f}-{row['max_wall_s']:.3f}"
    return {
        "wall s": num(row["median_wall_s"], ".3f"),
        "min-max s": spread,
        "IQR s": num(row["iqr_wall_s"], ".3f"),
        "res %": num(row["resolution_pct"], ".1f"),
        "vs fastest": num(row["wall_vs_fastest"], ".3f"),
        "vs hakmem %": "-" if row.get("vs_hakmem_pct") is None else
                       f"{row['vs_hakmem_pct']:+.1f} ±{row['vs_hakmem_noise_pct']:.1f}",
        "RSS MiB": num(report.mib(row["median_maxrss_kb"]), ".1f"),
        "faults": report.si(row["median_faults"]),
        **{c: num(row[c], "d") for c in runner.OS_CALLS},
        "failed": str(row["failed"] or ""),
    }


TABLE = ("wall s", "min-max s", "IQR s", "res %", "vs fastest", "vs hakmem %", "RSS MiB", "faults", *runner.OS_CALLS,
         "failed")


def resolution_note(group):
    """The line under an app's table: the rounds' resolution against the target."""
    worst = max((r["resolution_pct"] for r in group if r["resolution_pct"] is not None), default=None)
    if worst is None:
        return [f"Resolution: none (one run each; {TARGET_PCT:g} % needs 5 rounds or more)."]
    verdict = "reached" if worst <= TARGET_PCT else "not reached: more rounds, or a quieter machine"
    fewest = min(r["runs"] for r in group if r["resolution_pct"] is not None)
    held = 1 - 2 / 2 ** fewest  # the least and the most, the widest interval there is
    weak = (f"; with {fewest} runs the range holds the median with only {held * 100:.0f} % confidence, not "
            f"{CONFIDENCE * 100:.0f} %") if held < CONFIDENCE else ""
    lines = [f"Resolution: ±{worst:.1f} % at worst (target {TARGET_PCT:g} %: {verdict}){weak}."]
    noise = max((r["vs_hakmem_noise_pct"] for r in group if r.get("vs_hakmem_noise_pct") is not None), default=None)
    if noise is not None:
        verdict = "reached" if noise <= TARGET_PCT else "not reached"
        lines.append(f"Against hakmem round by round: ±{noise:.1f} % at worst ({verdict}).")
    return lines


def method(m):
    """How the figures of a report were taken."""
    return "  ".join([
        f"{m.rounds} run{'s' * (m.rounds != 1)} of each program under each allocator ({m.size} sizes), one at a "
        "time, the allocators interleaved in rounds, each round in another order (the rows of a Williams square, "
        "as make bench's: none always runs right after the same one)"
        f"{interleaved.balance_note(len(m.allocs), m.rounds)}.  Every allocator runs the same Debian "
        "binaries: hakmem, the peers and those given by path with LD_PRELOAD, glibc with nothing preloaded.  "
        "A program of one thread runs pinned to one CPU, a program of two threads or more to two, the same for "
        "every allocator (the `cpu` column), by the affinity it is spawned with.  Each run gets a fresh "
        "directory under the temporary directory given (on local disk), removed after it; inputs are written "
        "once per program, untimed.",
        "Wall time: the program's steps from spawn to exit, added up (for memcached, the load's); median, least "
        "and most, interquartile range, and the resolution: half the width of a distribution-free interval of "
        f"the median holding it with {CONFIDENCE:.0%} confidence or more (the k-th smallest to the k-th largest "
        "run: for 5 to 7 rounds the least and the most, 94-98 %; for 8, the 2nd and the 7th, 93 %), relative to the median: two allocators whose "
        "ranges (min-max) do not overlap differ beyond the runs' scatter.  `vs fastest`: the median over the "
        "least median of all allocators.  `vs hakmem %`: the allocator's time against hakmem's round by round, "
        "the mean of the rounds' ratios less 1 (above 0: hakmem is faster), and the half-width of its 95 % "
        "confidence interval (Student's t), below which a difference can be chance; a spell of the machine that "
        "slows both runs of a round leaves their ratio alone, so this resolves finer than the medians.",
        "Peak RSS (the largest of the steps' processes) and page faults (minor and major, all processes added "
        "up) by GNU time, which runs without the allocator, medians." if "time" in m.tools
        else "No peak RSS nor page faults: GNU time is not installed.",
        "mmap, munmap, madvise, mremap and brk: one extra, untimed run under `strace -f -c` (every thread and "
        "child process)." if "strace" in m.tools else "No OS call counts (strace not run).",
    ])


def write_report(m, out_root, machine_info, charts_drawn):
    """report.md, results.csv, runs.csv and the charts, in a new directory
    apps-YYYY-MM-DD-HHMMSS under out_root; returns its path."""
    stamp = time.strftime("%Y-%m-%d-%H%M%S")
    out = os.path.join(out_root, f"apps-{stamp}")
    os.makedirs(out)
    report.write_csv(os.path.join(out, "results.csv"), COLUMNS, m.rows)
    report.write_csv(os.path.join(out, "runs.csv"), RUN_COLUMNS, raw_rows(m.runs))
    chart_list = []
    if charts_drawn and m.rows:
        if charts.bar_chart(os.path.join(out, "wall.svg"), "Wall time relative to the fastest (median, lower is "
                            "better)", "time / fastest", m.rows, lambda r: r["wall_vs_fastest"], reference=1):
            chart_list.append(("wall.svg", "wall time relative to the fastest"))
        if charts.bar_chart(os.path.join(out, "rss.svg"), "Peak RSS (median, lower is better)", "MiB", m.rows,
                            lambda r: r["median_maxrss_kb"] and r["median_maxrss_kb"] / 1024, log=True):
            chart_list.append(("rss.svg", "peak RSS"))
    md = report.markdown(f"hakmem under real programs {stamp}", machine_info, method(m), m.rows, chart_list,
                         m.failures, columns=TABLE, cells=cells,
                         notes=lambda group: [next(a.what for a in m.apps if a.name == group[0]["bench"]) + ".",
                                              *resolution_note(group)])
    if m.skipped:
        md += "## Not run\n\n" + "".join(f"- {a.name}: {why}\n" for a, why in m.skipped)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(md)
    return out


def run(selected, allocs, tools, size, rounds, progress, root, tmp, out, timeout=None, head=None):
    """Runs the `selected` apps that can run here (their packages installed
    beforehand: needed()) under `allocs`, with progress(total) on stderr,
    and writes the report under `out`.  Returns the Measurement."""
    runnable, skipped = available(selected)
    for a, why in skipped:
        allocators.note(f"skipping {a.name}: {why}")
    progress = progress(len(runnable) * len(allocs) * (rounds + ("strace" in tools)))
    timeout = timeout or (600.0 if size == "full" else 120.0)
    m = measure(runnable, allocs, size, rounds, tools, progress, tmp, root, timeout)
    progress.close()
    m.skipped = skipped
    packages = sorted({p for a in selected for p in a.packages})
    m.out = write_report(m, out, machine.describe(root, allocs, head, packages), "gnuplot" in tools)
    return m


def terminal(m):
    """The terminal's table, with the programs not run under it."""
    text = report.terminal_table(m.rows, TABLE, cells, first="program") if m.rows else "no program ran"
    return text + "".join(f"\nnot run: {a.name}: {why}" for a, why in m.skipped)
