# SPDX-License-Identifier: MIT
"""Interleaved runs of one benchmark under several contenders, in rounds
whose order changes from one to the next (A B, then B A, ...: see order(),
so that drifts of the machine, and whatever the run before leaves behind,
hit them all alike), and the difference of two of them measured round by
round: the ratio of their runs in each round, whose spread is the noise.
The method of scripts/ab, which the scorecard uses for the build variants
too; make bench, its latency runs and scripts/many-threads order their
rounds the same way."""

import math
import statistics
import sys

from . import runner


def _williams_row(n, shift):
    """Row `shift` of a Williams square of order n: 0, 1, n-1, 2, n-2, ...,
    each plus shift, modulo n."""
    first = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]
    return [(x + shift) % n for x in first]


def order(items, i):
    """The order of `items` in round i (from 0): rows of a Williams square
    (a balanced Latin square), each item first once in len(items) rounds,
    and every item right after every other one equally often: once each in
    len(items) rounds for an even count, twice in 2 * len(items) for an odd
    one, where the odd rounds take the rows mirrored (shifted to keep the
    firsts distinct).  A rotation (A B C, B C A, ...) would keep each item
    after the same one in every round; this way none follows the same one
    throughout, so what a run leaves behind (fresh pages, caches, the
    machine's spells) falls on every contender alike.  Two items alternate:
    A B, B A."""
    n = len(items)
    if n % 2 and i % 2:
        row = _williams_row(n, i - (n + 1) // 2)[::-1]  # starts with item i mod n
    else:
        row = _williams_row(n, i)
    return [items[k] for k in row]


class Failed(Exception):
    """A run failed: .label says whose, .run how."""

    def __init__(self, label, run):
        super().__init__(f"{label} failed: {run.status}")
        self.label, self.run = label, run


def timed(argv, contenders, runs, timeout):
    """Runs argv `runs` times under each contender (label, Allocator,
    {extra environment}), one run of each per round, in the rounds' order(),
    all on one CPU (runner.pinned_cpu: argv must be one thread), with
    progress on stderr.  Returns ([the ops/s of each
    contender, round by round], the fields of the last RESULT line).  Raises
    Failed at the first failed run."""
    samples, fields = [[] for _ in contenders], {}
    total, step, cpu = len(contenders) * runs, 0, runner.pinned_cpu()
    for i in range(runs):
        for k in order(range(len(contenders)), i):
            label, alloc, env = contenders[k]
            step += 1
            print(f"[{step}/{total}] {label.split()[0]} run {i + 1}/{runs}", file=sys.stderr)
            r = runner.run(argv, alloc.env(**env), timeout, cpu=cpu)
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
