# SPDX-License-Identifier: MIT
"""Interleaved runs of one benchmark under several contenders (A B A B ...,
so that drifts of the machine hit them all alike), and the difference of
two of them against the noise of the runs: the method of scripts/ab, which
the scorecard uses for the build variants too."""

import math
import sys

from . import runner, stats


class Failed(Exception):
    """A run failed: .label says whose, .run how."""

    def __init__(self, label, run):
        super().__init__(f"{label} failed: {run.status}")
        self.label, self.run = label, run


def timed(argv, contenders, runs, timeout):
    """Runs argv `runs` times under each contender (label, Allocator,
    {extra environment}), interleaved, with progress on stderr.  Returns
    ([Summary of the ops/s of each contender], the fields of the last
    RESULT line).  Raises Failed at the first failed run."""
    samples, fields = [[] for _ in contenders], {}
    total = len(contenders) * runs
    for i in range(runs):
        for k, (label, alloc, env) in enumerate(contenders):
            print(f"[{len(contenders) * i + k + 1}/{total}] {label.split()[0]} run {i + 1}/{runs}", file=sys.stderr)
            r = runner.run(argv, alloc.env(**env), timeout)
            if not r.ok:
                raise Failed(label, r)
            samples[k].append(r.ops_per_sec)
            fields = r.results[0]
    return [stats.summarize(s) for s in samples], fields


def difference(a, b):
    """(delta, noise), in % of a's mean: how far b's mean is above a's, and
    two standard errors of the difference of the means, below which a
    difference can be chance."""
    delta = 100.0 * (b.mean - a.mean) / a.mean
    noise = 200.0 * math.sqrt(a.stdev ** 2 / a.n + b.stdev ** 2 / b.n) / a.mean
    return delta, noise
