#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# test-timeout: 600
# test-timeout-full: 2400
"""CPython's own regression tests (Debian's libpython3.11-testsuite) run by
Debian's python3 with hakmem preloaded and every allocation going to malloc
(PYTHONMALLOC=malloc): test_dict, test_list, test_set, test_json and
test_weakref, and with HAKMEM_TEST_SIZE=full also test_gc, test_threading,
test_re, test_pickle, test_io, test_concurrent_futures and
test_multiprocessing_fork (2 worker processes; they inherit the preload).

Whatever fails with hakmem (a module's result, or a test case in the JUnit
report) is run again, module by module, with hakmem and without it.  A
failure that comes again with hakmem and not without it is hakmem's, and
fails this test; one that fails without hakmem too is not hakmem's; one
that does not come again is reported as intermittent.  Exits 77 (skip) when
the test suite is not installed."""

import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

PYTHON = "/usr/bin/python3"
QUICK = ["test_dict", "test_list", "test_set", "test_json", "test_weakref"]
FULL = QUICK + ["test_gc", "test_threading", "test_re", "test_pickle", "test_io",
                "test_concurrent_futures", "test_multiprocessing_fork"]
PER_MODULE_TIMEOUT = 900
# "0:00:01 load avg: 0.70 [ 3/12] test_set passed", "[ 2/12/1] test_x failed (1 failure)"
RESULT_LINE = re.compile(r"\[\s*\d+/\d+(?:/\d+)?\] (test_\w+) (.*)$")
GOOD = ("passed", "skipped", "resource denied", "run no tests")


class Run:
    """One run of regrtest: each module's result, the number of test cases
    run and the names of those that failed."""

    def __init__(self, modules, preload, work, label):
        xml = os.path.join(work, f"{label}.xml")
        env = dict(os.environ, PYTHONMALLOC="malloc", HOME=work, TMPDIR=work)
        env.pop("LD_PRELOAD", None)
        if preload:
            env["LD_PRELOAD"] = preload
        cmd = [PYTHON, "-m", "test", "-j2", "--timeout", str(PER_MODULE_TIMEOUT),
               "--junit-xml", xml] + modules
        proc = subprocess.run(cmd, cwd=work, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.output = proc.stdout.decode("utf-8", "replace")
        with open(os.path.join(work, f"{label}.out"), "w", encoding="utf-8") as f:
            f.write(self.output)
        self.results = {}
        for line in self.output.splitlines():
            m = RESULT_LINE.search(line)
            if m and m.group(1) in modules:
                self.results[m.group(1)] = m.group(2).split(" -- ")[0].strip()
        try:
            cases = list(ET.parse(xml).getroot().iter("testcase"))
        except (OSError, ET.ParseError):
            cases = []
        self.ran = len(cases)
        self.cases = {case.get("name") for case in cases
                      if case.find("failure") is not None or case.find("error") is not None}

    def bad(self, module):
        """Why the module did not pass, or None."""
        result = self.results.get(module)
        if result is None:
            return "no result"
        if not result.startswith(GOOD):
            return result
        cases = sorted(c for c in self.cases if c.startswith(f"test.{module}."))
        return f"failed: {', '.join(cases)}" if cases else None

    def cases_of(self, module):
        return {c for c in self.cases if c.startswith(f"test.{module}.")}


def main():
    lib = os.environ.get("HAKMEM_LIB")
    if not lib or not os.path.exists(lib):
        print(f"HAKMEM_LIB ({lib}) does not exist")
        return 1
    probe = subprocess.run([PYTHON, "-c", "import test.test_dict, test.libregrtest"],
                           capture_output=True)
    if probe.returncode != 0:
        print(f"skip: {PYTHON} has no test suite (Debian: libpython3.11-testsuite)")
        return 77
    maps = subprocess.run([PYTHON, "-c", "print(open('/proc/self/maps').read())"],
                          env=dict(os.environ, LD_PRELOAD=lib), capture_output=True, text=True)
    if "libhakmem" not in maps.stdout:
        print(f"LD_PRELOAD={lib} is not in effect for {PYTHON}")
        return 1

    modules = FULL if os.environ.get("HAKMEM_TEST_SIZE") == "full" else QUICK
    with tempfile.TemporaryDirectory(prefix="hakmem-cpython-") as work:
        first = Run(modules, lib, work, "hakmem")
        bad = {m: first.bad(m) for m in modules if first.bad(m)}
        print(f"{len(modules)} modules, {first.ran} test cases with hakmem: "
              f"{len(modules) - len(bad)} modules passed, {len(bad)} did not "
              f"({len(first.cases)} test cases failed)")
        ours = []
        for module, why in sorted(bad.items()):
            again = Run([module], lib, work, f"hakmem-{module}")
            ref = Run([module], None, work, f"ref-{module}")
            why_again, why_ref = again.bad(module), ref.bad(module)
            only_hakmem = (again.cases_of(module) & first.cases_of(module)) - ref.cases_of(module)
            if why_again and (not why_ref or only_hakmem):
                ours.append(module)
                print(f"FAIL {module} with hakmem, twice: {why_again}; without hakmem: "
                      f"{why_ref or 'passed'}")
                if only_hakmem:
                    print(f"     failing only with hakmem: {', '.join(sorted(only_hakmem))}")
                print("\n".join("     | " + l for l in again.output.splitlines()[-40:]))
            elif why_ref:
                print(f"note: {module} fails without hakmem too ({why_ref}): not hakmem's")
            else:
                print(f"note: {module} failed once with hakmem ({why}) but passed when run"
                      " again: intermittent")
        return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
