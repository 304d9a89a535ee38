#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs hakmem's tests, one after another, and reports one line per test.

    scripts/run_tests.py [--build DIR] [--allocator hakmem|glibc] [-v] [NAME...]

The programs are built by `make test-programs` (see test/test.mk).  Each line
is "PASS|FAIL|SKIP  name  seconds"; a failure is followed by the test's
output.  The last line is "N passed, N failed[, N skipped]"; the exit status
is 1 if any test failed.

--allocator glibc runs only the standard-API tests, without hakmem, to check
the tests themselves; the hakmem-only tests are left out.

Kinds of tests (the `kind` column of the table):
  plain    build/test/X, with LD_PRELOAD=build/libhakmem.so against hakmem,
           as is against glibc
  preload  build/test/X with LD_PRELOAD, hakmem only
  static   build/test/static/X, linked with libhakmem.a (hakmem only)
  standard build/test/standard/X, linked with the `standard` variant
  ubsan    build/test/ubsan/X, linked with an UBSan build of libhakmem.a
  asan     build/test/asan/X, the hak_* API against an ASan build
  tsan     build/test/tsan/X, the hak_* API against a TSan build
  script   a shell script running real programs preloaded with hakmem and
           comparing their output with a run without it (hakmem only)
"""

import argparse
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_EXIT = 77
DEFAULT_TIMEOUT = 120


@dataclass
class Test:
    name: str
    kind: str
    prog: str  # program under build/test/<subdir>/, or script under test/
    env: dict = field(default_factory=dict)
    needs: tuple = ()  # commands that must be installed
    timeout: int = DEFAULT_TIMEOUT


def plain(prog, **kw):
    return Test(prog, "plain", prog, **kw)


def linked(kind, prog, **kw):
    return Test(f"{prog}.{kind}", kind, prog, **kw)


def script(name, path, needs=()):
    return Test(f"prog.{name}", "script", path, needs=needs)


TESTS = [
    # The standard API (passes against glibc too).
    plain("api"),
    plain("align"),
    plain("usable_size"),
    plain("integrity"),
    plain("realloc"),
    plain("threads"),
    plain("cross_thread"),
    plain("thread_churn"),
    plain("thread_exit"),
    plain("fork"),
    plain("dlopen_tls"),
    plain("libc_interop"),
    plain("address_space_limit"),
    # hakmem gives back units freed longer ago than its purge delay; with no
    # delay the test sees the reuse itself, not the timing of a fast test.
    plain("memory_reuse", env={"HAKMEM_PURGE_DELAY_MS": "0"}),
    plain("cxx_new"),
    plain("early"),
    # The preload is in effect.  `early` runs libearly.so's constructor before
    # hakmem's own; with libearly.so preloaded too, the order is reversed.
    Test("preload_check", "preload", "preload_check"),
    Test("memory_lifecycle", "preload", "memory_lifecycle"),
    Test("options", "preload", "options"),
    Test("early.preload_first", "preload", "early",
         env={"LD_PRELOAD": "{test}/libearly.so:{lib}"}),
    # Linked with libhakmem.a.
    linked("static", "api"),
    linked("static", "realloc"),
    linked("static", "threads"),
    linked("static", "cross_thread"),
    linked("static", "fork"),
    linked("static", "cxx_new"),
    linked("static", "early"),
    linked("static", "dlopen_tls"),
    linked("static", "libc_interop"),
    linked("static", "address_space_limit"),
    linked("static", "steady_state"),
    linked("static", "bad_free"),
    linked("static", "hak_api"),
    linked("static", "hak_threads"),
    linked("static", "prewarm"),
    # The `standard` variant, with its consistency checks.
    linked("standard", "integrity"),
    linked("standard", "threads"),
    linked("standard", "cross_thread"),
    linked("standard", "thread_exit"),
    linked("standard", "fork"),
    # Sanitizer builds of the library.
    linked("ubsan", "api"),
    linked("ubsan", "realloc"),
    linked("ubsan", "integrity"),
    linked("ubsan", "threads"),
    linked("ubsan", "cross_thread"),
    linked("ubsan", "thread_exit"),
    linked("ubsan", "hak_api"),
    linked("asan", "hak_api"),
    linked("asan", "hak_threads"),
    linked("tsan", "hak_threads", timeout=180),
    # Real programs under LD_PRELOAD.
    script("python", "test/programs/python.sh", needs=("python3",)),
    script("sort", "test/programs/sort.sh", needs=("sort", "python3")),
    script("git", "test/programs/git.sh", needs=("git",)),
    script("ls", "test/programs/ls.sh", needs=("ls",)),
    script("bash", "test/programs/bash.sh", needs=("bash",)),
    script("gxx", "test/programs/gxx.sh", needs=("g++",)),
    script("bench_smoke", "test/programs/bench_smoke.sh", needs=("python3",)),
    script("options_doc", "test/programs/options_doc.sh", needs=("awk",)),
    script("bench_kit", "test/programs/bench_kit.sh", needs=("python3", "sha256sum")),
    script("soak", "test/programs/soak.sh", needs=("python3", "taskset")),
    script("latency", "test/programs/latency.sh", needs=("python3",)),
    script("scorecard", "test/programs/scorecard.sh", needs=("python3", "taskset")),
    # What a release ships besides the library.
    script("release", "test/programs/release.sh"),
    script("launcher", "test/programs/launcher.sh"),
    script("install", "test/programs/install.sh", needs=("make", "pkg-config", "man", "readelf")),
    script("options_man", "test/programs/options_man.sh", needs=("python3", "man")),
    script("cmake", "test/programs/cmake.sh", needs=("make", "cmake", "readelf")),
]

SANITIZER_ENV = {
    "ubsan": {"UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"},
    "asan": {"ASAN_OPTIONS": "abort_on_error=0:detect_leaks=1"},
    "tsan": {"TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1"},
}

# What TSan says when the address-space layout does not suit it; then it is
# run again without address-space randomisation.
TSAN_LAYOUT_ERROR = re.compile(r"ThreadSanitizer: unexpected memory mapping|"
                               r"FATAL: ThreadSanitizer")


def sanitizer_runtime_present(kind):
    cc = os.environ.get("CC", "cc")
    try:
        out = subprocess.run([cc, f"-print-file-name=lib{kind}.so"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return os.path.isabs(out) and os.path.exists(out)


class Runner:
    def __init__(self, args):
        self.build = os.path.join(ROOT, args.build)
        self.test_dir = os.path.join(self.build, "test")
        self.lib = os.path.join(self.build, "libhakmem.so")
        self.hakmem = args.allocator == "hakmem"
        self.verbose = args.verbose

    def expand(self, value):
        return value.format(test=self.test_dir, lib=self.lib, build=self.build, root=ROOT)

    def command_and_env(self, t):
        """The command line and environment of test t."""
        env = dict(os.environ)
        for var in ("LD_PRELOAD", "HAKMEM_TEST_ALLOCATOR"):
            env.pop(var, None)
        env["HAKMEM_TEST_ALLOCATOR"] = "hakmem" if self.hakmem else "glibc"
        env["LC_ALL"] = "C"
        if t.kind == "script":
            env["HAKMEM_LIB"] = self.lib
            cmd = ["sh", os.path.join(ROOT, t.prog)]
        else:
            sub = "" if t.kind in ("plain", "preload") else t.kind
            cmd = [os.path.join(self.test_dir, sub, t.prog)]
            if t.kind in ("plain", "preload") and self.hakmem:
                env["LD_PRELOAD"] = self.lib
            env.update(SANITIZER_ENV.get(t.kind, {}))
            if t.kind in ("asan", "tsan"):
                # The hak_* API only: malloc is the sanitizer's.
                env.pop("HAKMEM_TEST_ALLOCATOR")
        env.update({k: self.expand(v) for k, v in t.env.items()})
        return cmd, env

    def skip_reason(self, t):
        """Why t cannot run here, or None."""
        for tool in t.needs:
            if not shutil.which(tool):
                return f"{tool} is not installed"
        if t.kind in ("ubsan", "asan", "tsan") and not sanitizer_runtime_present(t.kind):
            return f"the compiler has no {t.kind} runtime"
        return None

    def run(self, t):
        cmd, env = self.command_and_env(t)
        why = self.skip_reason(t)
        if why:
            return "SKIP", 0.0, why, ""
        if t.kind != "script" and not os.access(cmd[0], os.X_OK):
            return "FAIL", 0.0, "not built (see the build output above)", ""
        if self.hakmem and not os.path.exists(self.lib) and t.kind in ("plain", "preload", "script"):
            return "FAIL", 0.0, f"{os.path.relpath(self.lib, ROOT)} does not exist", ""
        status, secs, note, out = self.execute(cmd, env, t.timeout)
        if status == "FAIL" and t.kind == "tsan" and TSAN_LAYOUT_ERROR.search(out):
            arch = platform.machine()
            status, secs, note, out2 = self.execute(["setarch", arch, "-R"] + cmd, env, t.timeout)
            note = (note + "; " if note else "") + "TSan failed to start, rerun with setarch -R"
            out = out + "\n--- rerun with setarch -R ---\n" + out2
        return status, secs, note, out

    @staticmethod
    def execute(cmd, env, timeout):
        def child_setup():
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=child_setup)
        try:
            out, _ = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            timed_out = True
        secs = time.monotonic() - start
        out = out.decode("utf-8", "replace")
        # Whatever the test left running in its process group goes too.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        rc = proc.returncode
        if timed_out:
            return "FAIL", secs, f"timed out after {timeout} s", out
        if rc == 0:
            return "PASS", secs, "", out
        if rc == SKIP_EXIT:
            m = re.search(r"^skip: (.*)$", out, re.M)
            return "SKIP", secs, m.group(1) if m else "", out
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            return "FAIL", secs, f"killed by {name}", out
        return "FAIL", secs, f"exit status {rc}", out


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `run_tests.py --list | head`
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="build directory (default: build)")
    ap.add_argument("--allocator", choices=("hakmem", "glibc"), default="hakmem")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every test's output")
    ap.add_argument("--list", action="store_true", help="list the tests and exit")
    ap.add_argument("names", nargs="*", help="run only tests whose names contain one of these")
    args = ap.parse_args()

    runner = Runner(args)
    tests = [t for t in TESTS if runner.hakmem or t.kind == "plain"]
    if args.names:
        tests = [t for t in tests if any(n in t.name for n in args.names)]
    if args.list:
        for t in tests:
            print(f"{t.name:24} {t.kind:8} {t.prog}")
        return 0
    if not runner.hakmem:
        print("allocator: glibc (the hakmem-only tests are left out)")

    width = max((len(t.name) for t in tests), default=0)
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for t in tests:
        status, secs, note, out = runner.run(t)
        counts[status] += 1
        line = f"{status}  {t.name:{width}}  {secs:7.2f}s"
        if note:
            line += f"  ({note})"
        print(line, flush=True)
        if out and (status == "FAIL" or args.verbose):
            lines = out.rstrip("\n").split("\n")
            if len(lines) > 80 and not args.verbose:
                lines = [f"... ({len(lines) - 80} lines before)"] + lines[-80:]
            print("\n".join("    | " + l for l in lines), flush=True)

    summary = f"{counts['PASS']} passed, {counts['FAIL']} failed"
    if counts["SKIP"]:
        summary += f", {counts['SKIP']} skipped"
    print(summary)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
