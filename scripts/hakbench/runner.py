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
    cpu: int | None = None  # the CPU it was pinned to, None: left to the scheduler
    stderr: str = ""
    stdout: str = ""

    @property
    def ok(self):
        return self.status == "ok"

    @property
    def ops_per_sec(self):
        return float(self.results[0]["ops_per_sec"])


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
def _on_cpu(cpu):
    """The calling thread on `cpu` alone (None: left as it is) for the
    block, its own affinity back after it: a process spawned in the block
    inherits the CPU from its first instruction on."""
    if cpu is None:
        yield
        return
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, saved)


def _spawn(argv, env, stdout, stderr, timeout, cpu=None):
    """Runs argv in a process group of its own, on `cpu` if given, killed
    after `timeout` seconds.  Returns (status, wall seconds)."""
    t0 = time.perf_counter()
    try:
        with _on_cpu(cpu):
            pid = os.posix_spawnp(
                argv[0], argv, env,
                file_actions=[(os.POSIX_SPAWN_DUP2, stdout.fileno(), 1), (os.POSIX_SPAWN_DUP2, stderr.fileno(), 2)],
                setpgroup=0,
            )
    except OSError as e:
        return f"cannot run {argv[0]}: {e.strerror}", 0.0
    pidfd = os.pidfd_open(pid)
    timed_out = not select.select([pidfd], [], [], timeout)[0]
    if timed_out:
        os.killpg(pid, signal.SIGKILL)  # not reaped yet: the group id cannot be reused
    _, wait_status = os.waitpid(pid, 0)
    wall = time.perf_counter() - t0
    os.close(pidfd)
    return _status(wait_status, timed_out), wall


def pinned_cpu():
    """The CPU single-threaded runs are pinned to: the last this process may
    use.  The virtual CPUs of a shared host can run the same program a third
    faster or slower than each other, and which is the faster changes by the
    hour (bench/soak with SOAK_CPUS=0,1); a single-threaded run left to the
    scheduler lands on either, so contenders compared run on the same one."""
    return max(os.sched_getaffinity(0))


def run(argv, env, timeout, rusage=False, cpu=None):
    """Runs argv to completion and reads its RESULT lines.  With rusage, under
    GNU time for the peak RSS and page faults of the program alone (wait4 on a
    process spawned from here would count the RSS of this Python process,
    which the kernel carries over exec).  With `cpu`, pinned to that CPU by
    the affinity it is spawned with, not by a program such as taskset in
    front of it: GNU time's figures take in every program the measured
    process execs, each under the preloaded allocator.  GNU time itself runs
    without the preload, which `env` gives the program alone: its child,
    until it execs, is a copy of GNU time, whose pages count too, the same
    for every allocator."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(mode="r", suffix=".time") as usage:
        if rusage:
            env = dict(env)
            preload = ["env", "LD_PRELOAD=" + env.pop("LD_PRELOAD")] if "LD_PRELOAD" in env else []
            argv = ["time", "-o", usage.name, "-f", "RUSAGE %M %R", *preload, *argv]
        status, wall = _spawn(argv, env, out, err, timeout, cpu)
        out.seek(0)
        err.seek(0)
        text = out.read().decode(errors="replace")
        r = Run(status, parse_fields(text, "RESULT "), wall, cpu=cpu, stderr=err.read().decode(errors="replace"),
                stdout=text)
        for line in usage.read().splitlines():
            if line.startswith("Command terminated by signal"):
                r.status = signal.Signals(int(line.split()[-1])).name
            elif line.startswith("RUSAGE "):
                r.maxrss_kb, r.minflt = map(int, line.split()[1:])
    if r.ok and not (r.results and all(_well_formed(x) for x in r.results)):
        r.status = "no well-formed RESULT line"
    return r


def os_call_counts(argv, env, timeout):
    """Counts the memory-mapping syscalls of a run, all threads, with strace.
    Returns ({syscall: calls}, Run)."""
    # strace itself runs without the allocator: the preload goes to the traced
    # program only (-E), so that what it prints at exit is the program's alone.
    env = dict(env)
    preload = ["-E", "LD_PRELOAD=" + env.pop("LD_PRELOAD")] if "LD_PRELOAD" in env else []
    with tempfile.NamedTemporaryFile(mode="r", suffix=".strace") as summary:
        traced = ["strace", "-f", "-c", "-o", summary.name, "--seccomp-bpf", *preload,
                  "-e", "trace=" + ",".join(OS_CALLS), *argv]
        r = run(traced, env, timeout)
        counts = dict.fromkeys(OS_CALLS, 0)
        for line in summary.read().splitlines():
            cols = line.split()
            # % time  seconds  usecs/call  calls  [errors]  syscall
            if len(cols) >= 5 and cols[-1] in counts and cols[3].isdigit():
                counts[cols[-1]] = int(cols[3])
    return counts, r

