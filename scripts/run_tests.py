#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs hakmem's tests, one after another, and reports one line per test.

    scripts/run_tests.py [--build DIR] [--allocator hakmem|glibc] [--size quick|full]
                         [--make-list FILE] [--exec-wrapper CMD] [--timeout-scale N]
                         [-v] [--list] [NAME...]

The programs are built by `make test-programs` (see test/test.mk).  Each line
is "PASS|FAIL|SKIP  name  seconds"; a failure is followed by the test's
output.  The last line is "N passed, N failed[, N skipped]"; the exit status
is 1 if any test failed.  A program that exits 77 is skipped (a line
"skip: why" in its output says why).

--allocator glibc runs only the standard-API tests, without hakmem, to check
the tests themselves; the hakmem-only tests are left out.

Tests are found by their place (no list names them); a source's directory
under test/ is its kind:

  api/X.c, X.cpp  the standard API, passes against glibc too: build/test/X,
                  run with LD_PRELOAD=build/libhakmem.so against hakmem, as is
                  against glibc.  Test name X.
  preload/X.c     build/test/X, run only with hakmem preloaded.  Name X.
  hakmem/X.c      hakmem only: build/test/static/X, linked with libhakmem.a.
                  Name X.static.
  unit/X.c        internals: build/test/unit/X, linked with every object file
                  of the library.  Name X.unit.
  fuzz/X.c        a libFuzzer target: build/test/fuzz/X (clang), run for
                  FUZZ_SECONDS (20) on the seeds in test/fuzz/corpus/X/ and
                  what it finds meanwhile (a fresh directory each run);
                  skipped when clang has no libFuzzer.  Name X.fuzz.
  programs/X.sh   a shell script running real programs with hakmem preloaded
                  (HAKMEM_LIB names the library) and comparing what they do
                  with a run without it.  Name prog.X.
  apps/X.sh, X.py real software with its own tests or workloads, the same
                  way (a .py script runs with this Python).  HAKMEM_TEST_SIZE
                  says how much: "quick" in make test, "full" with --size full
                  (make test-apps).  Name app.X.
  lib/            not tests: what the tests load or source.

A test source may start with tag lines (after a #! line in a script), each a
comment of its own -- /* test-KEY: VALUE */, // test-KEY: VALUE or
# test-KEY: VALUE:

  test-builds: B...      also run the test in these builds, each named X.B:
                           static    build/test/static/X, with libhakmem.a
                           standard  build/test/standard/X, with the
                                     `standard` variant (consistency checks)
                           ubsan     build/test/ubsan/X, with an UBSan build
                           asan      build/test/asan/X, the hak_* API against
                                     an ASan build (HAK_NO_OVERRIDE)
                           tsan      build/test/tsan/X, the same under TSan
                         (api: static standard ubsan; hakmem: standard ubsan
                         asan tsan; unit: standard ubsan)
  test-env: VAR=V ...    environment of every run of the test
  test-timeout: S        seconds before the test is killed (default 120)
  test-timeout-full: S   the same with --size full
  test-run: NAME VAR=V ...
                         one more run of the plain build, with hakmem
                         preloaded and this environment, named X.NAME
  test-needs: CMD ...    commands that must be installed, else SKIP
  test-not-emulated: WHY skipped with --exec-wrapper, saying why: what the
                         test measures is the emulator's as much as the
                         program's

In values, {test} stands for build/test, {lib} for build/libhakmem.so, {build}
for the build directory and {root} for the source tree.  An unknown tag, a
build a kind does not have, or a C source directly in test/ (in no kind's
directory) is an error.  With --make-list, the programs make
would build (one path a line, written by `make test`) must be those the tests
found here need; otherwise a "discovery" line fails.

--exec-wrapper runs the test programs of another architecture through an
emulator, e.g. 'qemu-aarch64 -L /usr/aarch64-linux-gnu' (make test-arm64,
test/arm64.mk).  The program's LD_PRELOAD then reaches it through
QEMU_SET_ENV, since the emulator's own loader would try to load the library
too and complain; HAKMEM_TEST_EXEC_WRAPPER tells the programs that run
themselves again (test/testutil.h) to do it through the emulator.  What an
emulated run cannot do is skipped, saying why: the scripts (they preload the
library into this machine's programs), the fuzz targets (clang's
libFuzzer, built for this machine), the tests tagged test-not-emulated, and
a test during which the emulator failed one of its own assertions (its
message is the reason).  The ASan builds run without LeakSanitizer, which
needs to stop the threads as a debugger does, and the TSan build starts
without address-space randomisation (setarch -R), as TSan would otherwise
run itself again, which the emulator cannot.  --timeout-scale multiplies
every timeout, the runner's and those the programs set themselves for their
children (HAKMEM_TEST_TIMEOUT_SCALE), for an emulator several times slower.
"""

import argparse
import os
import platform
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEST_DIR = os.path.join(ROOT, "test")
SKIP_EXIT = 77
DEFAULT_TIMEOUT = 120
FUZZ_SECONDS = 20


@dataclass(frozen=True)
class Kind:
    base: str           # the build every test of the kind gets
    extra: tuple = ()   # builds a test-builds tag may add
    glibc: bool = False  # runs against glibc too (--allocator glibc)


# Directories of compiled tests; "plain" is build/test/X, any other build
# build/test/<build>/X.
KINDS = {
    "api": Kind("plain", ("static", "standard", "hardened", "ubsan"), glibc=True),
    "preload": Kind("plain"),
    "hakmem": Kind("static", ("standard", "observe", "hardened", "ubsan", "asan", "tsan")),
    "hardened": Kind("hardened"),
    "unit": Kind("unit", ("standard", "ubsan")),
    "fuzz": Kind("fuzz"),
}
# Directories of scripts, and the prefix of their names.
SCRIPT_KINDS = {"programs": "prog", "apps": "app"}
TAGS = ("builds", "env", "timeout", "timeout-full", "run", "needs", "not-emulated")
TAG_LINE = re.compile(r"^\s*(?:/\*|//|#)\s*test-([a-z-]+):\s*(.*?)\s*(?:\*/)?\s*$")


@dataclass
class Test:
    name: str
    build: str  # plain, static, ..., or script
    path: str   # the program or script
    env: dict = field(default_factory=dict)
    needs: tuple = ()
    timeout: int = DEFAULT_TIMEOUT
    not_emulated: str = ""  # why the test does not run through --exec-wrapper
    preload: bool = False  # hakmem comes in with LD_PRELOAD
    glibc: bool = False    # also part of the run against glibc


class DiscoveryError(Exception):
    pass


def read_tags(path):
    """The tag lines at the top of path, as {key: [value, ...]}."""
    tags = {}
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[0].startswith("#!"):
        lines = lines[1:]
    if lines and "SPDX-License-Identifier:" in lines[0]:
        lines = lines[1:]
    for line in lines:
        m = TAG_LINE.match(line)
        if not m:
            break
        key, value = m.groups()
        if key not in TAGS:
            raise DiscoveryError(f"{os.path.relpath(path, ROOT)}: unknown tag test-{key}")
        tags.setdefault(key, []).append(value)
    return tags


def parse_env(words, where):
    env = {}
    for word in words:
        var, eq, value = word.partition("=")
        if not eq or not var:
            raise DiscoveryError(f"{where}: \"{word}\" is not VAR=value")
        env[var] = value
    return env


def settings(path, tags, size):
    """Environment, needed commands and timeout (at this size) from the tags
    of path."""
    where = os.path.relpath(path, ROOT)
    env = parse_env(" ".join(tags.get("env", [])).split(), where)
    needs = tuple(" ".join(tags.get("needs", [])).split())
    timeout = DEFAULT_TIMEOUT
    for key in ("timeout", "timeout-full") if size == "full" else ("timeout",):
        if key in tags:
            try:
                timeout = int(tags[key][-1])
            except ValueError:
                raise DiscoveryError(f"{where}: test-{key} must be a number of seconds") from None
    return env, needs, timeout


def program_path(build, prog):
    return os.path.join("test", prog) if build == "plain" else os.path.join("test", build, prog)


def listing(directory, suffixes):
    """The files of test/<directory> with one of these suffixes, sorted."""
    path = os.path.join(TEST_DIR, directory)
    return sorted(f for f in os.listdir(path) if f.endswith(suffixes)) if os.path.isdir(path) else []


def discover(size="quick"):
    """Every test in the tree, in a stable order, with its timeout for the
    size of run."""
    tests = []
    for kind_dir, kind in KINDS.items():
        for src in listing(kind_dir, (".c", ".cpp")):
            path = os.path.join(TEST_DIR, kind_dir, src)
            prog = os.path.splitext(src)[0]
            tags = read_tags(path)
            env, needs, timeout = settings(path, tags, size)
            builds = " ".join(tags.get("builds", [])).split()
            for b in builds:
                if b not in kind.extra:
                    raise DiscoveryError(f"test/{kind_dir}/{src}: no build \"{b}\" for test/{kind_dir}"
                                         f" (it has: {' '.join(kind.extra) or 'none'})")
            base_name = prog if kind.base == "plain" else f"{prog}.{kind.base}"
            if kind.base == "fuzz":
                timeout = max(timeout, FUZZ_SECONDS + 60)
            preloaded = kind.base == "plain"
            first = len(tests)
            tests.append(Test(base_name, kind.base, program_path(kind.base, prog), env, needs,
                              timeout, preload=preloaded, glibc=kind.glibc))
            for run in tags.get("run", []):
                words = run.split()
                if not words or not preloaded:
                    raise DiscoveryError(f"test/{kind_dir}/{src}: test-run needs a name, and a"
                                         " test built plain")
                run_env = dict(env, **parse_env(words[1:], f"test/{kind_dir}/{src}"))
                tests.append(Test(f"{prog}.{words[0]}", "plain", program_path("plain", prog),
                                  run_env, needs, timeout, preload=True))
            for b in builds:
                tests.append(Test(f"{prog}.{b}", b, program_path(b, prog), env, needs, timeout))
            for t in tests[first:]:
                t.not_emulated = " ".join(tags.get("not-emulated", []))
    for script_dir, prefix in SCRIPT_KINDS.items():
        for src in listing(script_dir, (".sh", ".py")):
            path = os.path.join(TEST_DIR, script_dir, src)
            env, needs, timeout = settings(path, read_tags(path), size)
            tests.append(Test(f"{prefix}.{os.path.splitext(src)[0]}", "script",
                              os.path.relpath(path, ROOT), env, needs, timeout))
    stray = listing(".", (".c", ".cpp"))
    if stray:
        raise DiscoveryError(f"test/{stray[0]} is in no kind's directory (test/api, test/preload,"
                             " test/hakmem, test/unit, ...): move it to one")
    names = [t.name for t in tests]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise DiscoveryError(f"two tests are named {', '.join(twice)}")
    return tests


SANITIZER_ENV = {
    "ubsan": {"UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"},
    "asan": {"ASAN_OPTIONS": "abort_on_error=0:detect_leaks=1"},
    "tsan": {"TSAN_OPTIONS": "halt_on_error=1:second_deadlock_stack=1"},
}

# What TSan says when the address-space layout does not suit it; then it is
# run again without address-space randomisation.
TSAN_LAYOUT_ERROR = re.compile(r"ThreadSanitizer: unexpected memory mapping|"
                               r"FATAL: ThreadSanitizer")


def compiler_has(cc, library):
    """Whether the compiler cc finds library (a file name) in its own paths."""
    try:
        out = subprocess.run([cc, f"-print-file-name={library}"], capture_output=True,
                             text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return os.path.isabs(out) and os.path.exists(out)


def sanitizer_runtime_present(kind):
    return compiler_has(os.environ.get("CC", "cc"), f"lib{kind}.so")


def fuzzer_present():
    return compiler_has(os.environ.get("FUZZ_CC", "clang"),
                        f"libclang_rt.fuzzer-{platform.machine()}.a")


# The emulator failing one of its own assertions (glib's message, with the
# path of qemu's source file): qemu-user 7.2 does so in a child forked from a
# process with threads as soon as the child starts a thread.  The test then
# did not run; it is skipped, with the emulator's message.
EMULATOR_ASSERTION = re.compile(
    r"^(?:Bail out! )?(ERROR:(?:\.\./)+[\w/.-]+:\d+:\w+: assertion failed.*)$", re.M)

# Why a test of this build is not run through --exec-wrapper.
EMULATED_SKIP = {
    "script": "runs this machine's programs with the library preloaded, which is built for another",
    "fuzz": "clang's libFuzzer is built for this machine only",
}


class Runner:
    def __init__(self, args):
        self.build = os.path.join(ROOT, args.build)
        self.test_dir = os.path.join(self.build, "test")
        self.lib = os.path.join(self.build, "libhakmem.so")
        self.hakmem = args.allocator == "hakmem"
        self.size = args.size
        self.verbose = args.verbose
        self.wrapper = shlex.split(args.exec_wrapper or "")
        self.timeout_scale = args.timeout_scale

    def expand(self, value):
        return value.format(test=self.test_dir, lib=self.lib, build=self.build, root=ROOT)

    def command_and_env(self, t):
        """The command line and environment of test t."""
        env = dict(os.environ)
        for var in ("LD_PRELOAD", "HAKMEM_TEST_ALLOCATOR"):
            env.pop(var, None)
        env["HAKMEM_TEST_ALLOCATOR"] = "hakmem" if self.hakmem else "glibc"
        env["HAKMEM_TEST_SIZE"] = self.size
        env["LC_ALL"] = "C"
        if t.build == "script":
            env["HAKMEM_LIB"] = self.lib
            script = os.path.join(ROOT, t.path)
            cmd = [sys.executable, script] if script.endswith(".py") else ["sh", script]
        elif t.build == "fuzz":
            # A fresh corpus directory (made by run()) first, the seeds after.
            prog = os.path.join(self.build, t.path)
            name = os.path.basename(t.path)
            cmd = [prog, f"-max_total_time={FUZZ_SECONDS}", "-timeout=20", "-rss_limit_mb=4096",
                   "-error_exitcode=1",
                   "-print_final_stats=1", f"-artifact_prefix={prog}-",
                   os.path.join(ROOT, "test", "fuzz", "corpus", name)]
        else:
            cmd = [os.path.join(self.build, t.path)]
            if t.preload and self.hakmem:
                env["LD_PRELOAD"] = self.lib
            env.update(SANITIZER_ENV.get(t.build, {}))
            if t.build in ("asan", "tsan"):
                # The hak_* API only: malloc is the sanitizer's.
                env.pop("HAKMEM_TEST_ALLOCATOR")
        env.update({k: self.expand(v) for k, v in t.env.items()})
        if self.wrapper and t.build != "script":
            cmd = self.wrapper + cmd
            if t.build == "tsan":
                cmd = ["setarch", platform.machine(), "-R"] + cmd
            if t.build == "asan":
                env["ASAN_OPTIONS"] = env["ASAN_OPTIONS"].replace("detect_leaks=1", "detect_leaks=0")
            env["HAKMEM_TEST_EXEC_WRAPPER"] = " ".join(self.wrapper)
            preload = env.pop("LD_PRELOAD", None)
            if preload:
                given = env.get("QEMU_SET_ENV")
                env["QEMU_SET_ENV"] = (given + "," if given else "") + f"LD_PRELOAD={preload}"
        if self.timeout_scale != 1:
            env["HAKMEM_TEST_TIMEOUT_SCALE"] = str(self.timeout_scale)
        return cmd, env

    def skip_reason(self, t):
        """Why t cannot run here, or None."""
        if self.wrapper and (t.not_emulated or t.build in EMULATED_SKIP):
            return f"emulated run: {t.not_emulated or EMULATED_SKIP[t.build]}"
        for tool in t.needs:
            if not shutil.which(tool):
                return f"{tool} is not installed"
        if t.build in ("ubsan", "asan", "tsan") and not sanitizer_runtime_present(t.build):
            return f"the compiler has no {t.build} runtime"
        if t.build == "fuzz" and not fuzzer_present():
            return "clang with libFuzzer is not installed"
        return None

    def run(self, t):
        cmd, env = self.command_and_env(t)
        why = self.skip_reason(t)
        if why:
            return "SKIP", 0.0, why, ""
        if t.build != "script" and not os.access(os.path.join(self.build, t.path), os.X_OK):
            return "FAIL", 0.0, "not built (see the build output above)", ""
        if self.hakmem and not os.path.exists(self.lib) and (t.preload or t.build == "script"):
            return "FAIL", 0.0, f"{os.path.relpath(self.lib, ROOT)} does not exist", ""
        timeout = t.timeout * self.timeout_scale
        if t.build == "fuzz":
            with tempfile.TemporaryDirectory(prefix="corpus-", dir=os.path.dirname(cmd[0])) as d:
                return self.execute(cmd[:-1] + [d, cmd[-1]], env, timeout)
        status, secs, note, out = self.execute(cmd, env, timeout)
        if status == "FAIL" and t.build == "tsan" and TSAN_LAYOUT_ERROR.search(out):
            arch = platform.machine()
            status, secs, note, out2 = self.execute(["setarch", arch, "-R"] + cmd, env, timeout)
            note = (note + "; " if note else "") + "TSan failed to start, rerun with setarch -R"
            out = out + "\n--- rerun with setarch -R ---\n" + out2
        crash = EMULATOR_ASSERTION.search(out) if self.wrapper and status == "FAIL" else None
        if crash:
            status, note = "SKIP", f"emulated run: the emulator failed: {crash.group(1)}"
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


def compare_with_make(tests, build, list_file):
    """What differs between the programs make builds (list_file) and those
    the tests need, as lines of text; empty if nothing."""
    with open(list_file, encoding="utf-8") as f:
        made = {os.path.normpath(os.path.relpath(os.path.join(ROOT, p), build))
                for p in f.read().split()}
    needed = {os.path.normpath(t.path) for t in tests if t.build != "script"}
    lines = [f"make does not build {p}" for p in sorted(needed - made)]
    lines += [f"make builds {p}, which no test runs" for p in sorted(made - needed)]
    return lines


def report(status, name, width, secs, note, out, verbose):
    line = f"{status}  {name:{width}}  {secs:7.2f}s"
    if note:
        line += f"  ({note})"
    print(line, flush=True)
    if out and (status == "FAIL" or verbose):
        lines = out.rstrip("\n").split("\n")
        if len(lines) > 80 and not verbose:
            lines = [f"... ({len(lines) - 80} lines before)"] + lines[-80:]
        print("\n".join("    | " + l for l in lines), flush=True)


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `run_tests.py --list | head`
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="build directory (default: build)")
    ap.add_argument("--allocator", choices=("hakmem", "glibc"), default="hakmem")
    ap.add_argument("--size", choices=("quick", "full"), default="quick",
                    help="how much the scripts of test/apps do (default: quick)")
    ap.add_argument("--make-list", metavar="FILE",
                    help="the programs make builds, to check against the tests found")
    ap.add_argument("--exec-wrapper", metavar="CMD",
                    help="run the test programs through CMD, an emulator (see above)")
    ap.add_argument("--timeout-scale", metavar="N", type=int, default=1,
                    help="multiply every timeout by N (default: 1)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every test's output")
    ap.add_argument("--list", action="store_true", help="list the tests and exit")
    ap.add_argument("names", nargs="*", help="run only tests whose names contain one of these")
    args = ap.parse_args()

    try:
        all_tests = discover(args.size)
    except DiscoveryError as e:
        print(f"run_tests.py: {e}", file=sys.stderr)
        return 2
    runner = Runner(args)
    tests = [t for t in all_tests if runner.hakmem or t.glibc]
    if args.names:
        tests = [t for t in tests if any(n in t.name for n in args.names)]
        unmatched = [n for n in args.names if not any(n in t.name for t in tests)]
        if unmatched:
            print(f"run_tests.py: no test's name contains {', '.join(unmatched)}", file=sys.stderr)
            return 2
    if args.list:
        for t in tests:
            print(f"{t.name:24} {t.build:8} {t.path}")
        return 0
    if not runner.hakmem:
        print("allocator: glibc (the hakmem-only tests are left out)")

    width = max((len(t.name) for t in tests), default=0)
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    if args.make_list:
        diff = compare_with_make(all_tests, runner.build, args.make_list)
        status = "FAIL" if diff else "PASS"
        counts[status] += 1
        report(status, "discovery", width, 0.0, "make and the runner disagree" if diff else "",
               "\n".join(diff), args.verbose)
    for t in tests:
        status, secs, note, out = runner.run(t)
        counts[status] += 1
        report(status, t.name, width, secs, note, out, args.verbose)

    summary = f"{counts['PASS']} passed, {counts['FAIL']} failed"
    if counts["SKIP"]:
        summary += f", {counts['SKIP']} skipped"
    print(summary)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
