# SPDX-License-Identifier: MIT
"""Interleaved runs of one benchmark under several contenders, in rounds
(A B, then B A, ...: so that drifts of the machine, and whatever the run
before leaves behind, hit them all alike), and the difference of two of them
measured round by round: the ratio of their runs in each round, whose spread
is the noise.  The method of scripts/ab, which the scorecard uses for the
build variants too."""

import math
import statistics
import sys

from . import runner


class Failed(Exception):
    """A run failed: .label says whose, .run how."""

    def __init__(self, label, run):
        super().__init__(f"{label} failed: {run.status}")
        self.label, self.run = label, run


def timed(argv, contenders, runs, timeout):
    """Runs argv `runs` times under each contender (label, Allocator,
    {extra environment}), one run of each per round, every other round in the
    reverse order, all on one CPU (runner.pin: argv must be one thread),
    with progress on stderr.  Returns ([the ops/s of each
    contender, round by round], the fields of the last RESULT line).  Raises
    Failed at the first failed run."""
    samples, fields = [[] for _ in contenders], {}
    total, step = len(contenders) * runs, 0
    for i in range(runs):
        order = range(len(contenders)) if i % 2 == 0 else reversed(range(len(contenders)))
        for k in order:
            label, alloc, env = contenders[k]
            step += 1
            print(f"[{step}/{total}] {label.split()[0]} run {i + 1}/{runs}", file=sys.stderr)
            r = runner.run(runner.pin(argv), alloc.env(**env), timeout)
            if not r.ok:
                raise Failed(label, r)
            samples[k].append(r.ops_per_sec)
            fields = r.results[0]
    return samples, fields


def difference(a, b):
    """(delta, noise), in %, of runs b against runs a taken in the same
    rounds: the mean of the rounds' ratios b/a, less 1, and two standard
    errors of that mean, below which a difference can be chance (None with
    fewer than two rounds: no spread to measure).  A drift of the machine
    moves both runs of a round and leaves their ratio alone."""
    ratios = [y / x for x, y in zip(a, b)]
    delta = 100.0 * (statistics.fmean(ratios) - 1.0)
    noise = 200.0 * statistics.stdev(ratios) / math.sqrt(len(ratios)) if len(ratios) > 1 else None
    return delta, noise
