# SPDX-License-Identifier: MIT
"""Running one benchmark process and reading what it reports.

stdout and stderr go to files, so a chatty allocator cannot block on a full
pipe; a run that hangs is killed with its whole process group."""

import contextlib
import os
import select
import signal
import tempfile
import time
from dataclasses import dataclass, field

OS_CALLS = ("mmap", "munmap", "madvise", "mremap", "brk")


@dataclass
class Run:
    status: str  # "ok", or why the run failed: "SIGSEGV", "exit 1", "timeout", ...
    results: list = field(default_factory=list)  # one dict per RESULT line
    wall: float = 0.0  # seconds, spawn to exit
    maxrss_kb: int | None = None  # measured with rusage=True only
    minflt: int | None = None
    majflt: int | None = None
    cpu: int | tuple | None = None  # the CPU (or CPUs) it was pinned to, None: left to the scheduler
    stderr: str = ""
    stdout: str = ""

    @property
    def ok(self):
        return self.status == "ok"

    @property
    def ops_per_sec(self):
        return float(self.results[0]["ops_per_sec"])


def tail(text, n=5):
    """The last n lines of a run's output, indented, to show under its failure."""
    return "\n".join("    " + line for line in text.strip().splitlines()[-n:])


def parse_fields(text, prefix):
    """key=value pairs of the lines that start with `prefix`, one dict each."""
    return [
        dict(tok.split("=", 1) for tok in line[len(prefix):].split() if "=" in tok)
        for line in text.splitlines()
        if line.startswith(prefix)
    ]


def _well_formed(result):
    try:
        return "bench" in result and float(result["ops_per_sec"]) > 0 and float(result["seconds"]) > 0
    except (KeyError, ValueError):
        return False


def _status(wait_status, timed_out):
    if timed_out:
        return "timeout"
    if os.WIFSIGNALED(wait_status):
        return signal.Signals(os.WTERMSIG(wait_status)).name
    code = os.waitstatus_to_exitcode(wait_status)
    return "ok" if code == 0 else f"exit {code}"


@contextlib.contextmanager
def _on_cpu(cpu, cwd=None):
    """The calling thread on `cpu` alone, or on the CPUs of a tuple (None:
    left as it is), and in directory `cwd` if given, for the block, its own
    affinity and directory back after it: a process spawned in the block
    inherits both from its first instruction on."""
    saved_dir = os.getcwd() if cwd else None
    saved = os.sched_getaffinity(0) if cpu is not None else None
    try:
        if cpu is not None:
            os.sched_setaffinity(0, {cpu} if isinstance(cpu, int) else set(cpu))
        if cwd:
            os.chdir(cwd)
        yield
    finally:
        if saved is not None:
            os.sched_setaffinity(0, saved)
        if saved_dir:
            os.chdir(saved_dir)


def _start(argv, env, stdout, stderr, cpu=None, cwd=None):
    """Spawns argv in a process group of its own, on `cpu` if given, in
    `cwd` if given.  Returns (pid, start time, None), or (None, 0.0, why it
    cannot be run)."""
    t0 = time.perf_counter()
    try:
        with _on_cpu(cpu, cwd):
            pid = os.posix_spawnp(
                argv[0], argv, env,
                file_actions=[(os.POSIX_SPAWN_DUP2, stdout.fileno(), 1), (os.POSIX_SPAWN_DUP2, stderr.fileno(), 2)],
                setpgroup=0,
            )
    except OSError as e:
        return None, 0.0, f"cannot run {argv[0]}: {e.strerror}"
    return pid, t0, None


def _wait(pid, t0, timeout):
    """Waits for the process `pid` started at t0, killed with its group
    after `timeout` seconds.  Returns (status, wall seconds)."""
    pidfd = os.pidfd_open(pid)
    timed_out = not select.select([pidfd], [], [], timeout)[0]
    if timed_out:
        os.killpg(pid, signal.SIGKILL)  # not reaped yet: the group id cannot be reused
    _, wait_status = os.waitpid(pid, 0)
    wall = time.perf_counter() - t0
    os.close(pidfd)
    return _status(wait_status, timed_out), wall


def _spawn(argv, env, stdout, stderr, timeout, cpu=None, cwd=None):
    """Runs argv in a process group of its own, on `cpu` if given, killed
    after `timeout` seconds.  Returns (status, wall seconds)."""
    pid, t0, why = _start(argv, env, stdout, stderr, cpu, cwd)
    return (why, 0.0) if pid is None else _wait(pid, t0, timeout)


def pinned_cpu():
    """The CPU single-threaded runs are pinned to: the last this process may
    use.  The virtual CPUs of a shared host can run the same program a third
    faster or slower than each other, and which is the faster changes by the
    hour (bench/soak with SOAK_CPUS=0,1); a single-threaded run left to the
    scheduler lands on either, so contenders compared run on the same one."""
    return max(os.sched_getaffinity(0))


def pinned_cpus(threads):
    """Where a run of `threads` threads is pinned: pinned_cpu() for one,
    else a tuple of the last `threads` CPUs this process may use (all of
    them if fewer), the same for every contender: a program of two threads
    on the two CPUs of a small machine, each run alike, not left to share
    one CPU in a run and spread over two in the next."""
    if threads == 1:
        return pinned_cpu()
    return tuple(sorted(os.sched_getaffinity(0))[-threads:])


def _timed(argv, env, usage):
    """argv under GNU time, writing to `usage`, the preload given to argv alone."""
    env = dict(env)
    # through env either way, so that every allocator's run pays the same exec
    preload = ["env", "LD_PRELOAD=" + env.pop("LD_PRELOAD")] if "LD_PRELOAD" in env else ["env", "-u", "LD_PRELOAD"]
    return ["time", "-o", usage, "-f", "RUSAGE %M %R %F", *preload, *argv], env


def _finish(r, out, err, usage, results):
    """Fills Run r from the files of its output, its GNU time report and,
    with `results`, its RESULT lines, which must then be well-formed."""
    out.seek(0)
    err.seek(0)
    r.stdout = out.read().decode(errors="replace")
    r.stderr = err.read().decode(errors="replace")
    r.results = parse_fields(r.stdout, "RESULT ")
    for line in usage.read().splitlines():
        if line.startswith("Command terminated by signal"):
            r.status = signal.Signals(int(line.split()[-1])).name
        elif line.startswith("RUSAGE "):
            r.maxrss_kb, r.minflt, r.majflt = map(int, line.split()[1:])
    if results and r.ok and not (r.results and all(_well_formed(x) for x in r.results)):
        r.status = "no well-formed RESULT line"
    return r


def run(argv, env, timeout, rusage=False, cpu=None, cwd=None, results=True):
    """Runs argv to completion and reads its RESULT lines.  With rusage, under
    GNU time for the peak RSS and page faults of the program alone (wait4 on a
    process spawned from here would count the RSS of this Python process,
    which the kernel carries over exec).  With `cpu`, pinned to that CPU (or
    the CPUs of a tuple) by the affinity it is spawned with, not by a program
    such as taskset in front of it: GNU time's figures take in every program
    the measured process execs, each under the preloaded allocator.  GNU time
    itself runs without the preload, which `env` gives the program alone: its
    child, until it execs, is a copy of GNU time, whose pages count too, the
    same for every allocator.  In directory `cwd` if given.  Without
    `results`, a program that prints no RESULT line (any program) is
    successful when it exits 0."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r", suffix=".time") as usage:
        if rusage:
            argv, env = _timed(argv, env, usage.name)
        status, wall = _spawn(argv, env, out, err, timeout, cpu, cwd)
        return _finish(Run(status, wall=wall, cpu=cpu), out, err, usage, results)


@contextlib.contextmanager
def serving(argv, env, rusage=False, cpu=None, cwd=None, stop_timeout=30.0):
    """Runs argv, a server, for the duration of the block, as run() runs a
    program (GNU time, CPUs, directory); yields its Run, whose figures are
    filled in after the block: the server is then stopped with SIGINT to
    its process group (GNU time ignores it while it waits, strace detaches
    and prints its summary; the server exits as on a ^C), killed if it has
    not ended within stop_timeout seconds.  Its status is "ok" when it exited
    0 or on that SIGINT; r.wall is the time it ran."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r", suffix=".time") as usage:
        if rusage:
            argv, env = _timed(argv, env, usage.name)
        pid, t0, why = _start(argv, env, out, err, cpu, cwd)
        r = Run(why or "ok", cpu=cpu)
        try:
            yield r
        finally:
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGINT)
                status, r.wall = _wait(pid, t0, stop_timeout)
                r.status = "ok" if status in ("ok", "SIGINT") else status
                _finish(r, out, err, usage, False)
                if r.status == "SIGINT":
                    r.status = "ok"


def strace_command(argv, env, summary):
    """(argv, env) of argv under `strace -f -c` counting the memory-mapping
    syscalls of all its threads and children into the file `summary`."""
    # strace itself runs without the allocator: the preload goes to the traced
    # program only (-E), so that what it prints at exit is the program's alone.
    env = dict(env)
    preload = ["-E", "LD_PRELOAD=" + env.pop("LD_PRELOAD")] if "LD_PRELOAD" in env else []
    return ["strace", "-f", "-c", "-o", summary, "--seccomp-bpf", *preload,
            "-e", "trace=" + ",".join(OS_CALLS), *argv], env


def strace_counts(text):
    """{syscall: calls} of OS_CALLS from the summary strace -c wrote."""
    counts = dict.fromkeys(OS_CALLS, 0)
    for line in text.splitlines():
        cols = line.split()
        # % time  seconds  usecs/call  calls  [errors]  syscall
        if len(cols) >= 5 and cols[-1] in counts and cols[3].isdigit():
            counts[cols[-1]] = int(cols[3])
    return counts


def os_call_counts(argv, env, timeout, cwd=None, results=True):
    """Counts the memory-mapping syscalls of a run, all threads, with strace.
    Returns ({syscall: calls}, Run)."""
    with tempfile.NamedTemporaryFile(mode="r", suffix=".strace") as summary:
        traced, env = strace_command(argv, env, summary.name)
        r = run(traced, env, timeout, cwd=cwd, results=results)
        return strace_counts(summary.read()), r
