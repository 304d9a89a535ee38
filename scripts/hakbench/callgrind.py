# SPDX-License-Identifier: MIT
"""Instruction counts under valgrind's callgrind: deterministic, unlike time,
so small changes to a fast path show even on a noisy machine."""

import os
import tempfile
from dataclasses import dataclass

from . import runner


@dataclass(frozen=True)
class Count:
    total: int  # instructions (Ir) of the whole run, all threads
    main: int  # of which in main() itself, callees excluded: the benchmark's own loop


def _function(spec, names):
    """The name in an fn= or cfn= spec, "(id) name" or "(id)" once the id
    has been given a name (function names share one table)."""
    if not spec.startswith("("):
        return spec
    ref, _, name = spec.partition(" ")
    if name:
        names[ref] = name
    return names.get(ref)


def _main_self_cost(lines):
    """Sums the cost lines under fn=main in a callgrind output file, leaving
    out the line after each calls=, which is the inclusive cost of a callee."""
    names, in_main, callee_cost, total = {}, False, False, 0
    for line in lines:
        if line.startswith("fn="):
            in_main = _function(line[3:].strip(), names) == "main"
        elif line.startswith("cfn="):
            _function(line[4:].strip(), names)
        elif line.startswith("calls="):
            callee_cost = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            if in_main and not callee_cost:
                cols = line.split()
                total += int(cols[1]) if len(cols) > 1 else 0
            callee_cost = False
    return total


def instructions(argv, env, timeout):
    """Runs argv under callgrind.  Returns (Count or None, Run)."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "callgrind.out")
        r = runner.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv], env, timeout)
        if not r.ok or not os.path.exists(out):
            return None, r
        with open(out) as f:
            lines = f.read().splitlines()
    total = next((int(l.split()[1]) for l in lines if l.startswith(("summary:", "totals:"))), None)
    return (Count(total, _main_self_cost(lines)) if total else None), r
