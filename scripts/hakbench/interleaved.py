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


def full_squares(n, rounds):
    """Rounds that complete the squares of n items (len(items) for an even
    count, twice that for an odd one), in which every item comes after every
    other equally often; fewer or more leave that balance partial."""
    period = n if n % 2 == 0 else 2 * n
    return n < 2 or rounds % period == 0


def balance_note(n, rounds):
    """A clause for a report's method: whether the rounds complete the squares."""
    if full_squares(n, rounds):
        return ""
    period = n if n % 2 == 0 else 2 * n
    return (f" (with {n} allocators the order is balanced over {period} rounds; over {rounds} it is balanced only "
            "in part: some follow others more often than the rest)")


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


# Student's t, two-sided 95 %, by degrees of freedom (the last for 60 and more).
T95 = (12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26, 2.23, 2.20, 2.18, 2.16, 2.14, 2.13, 2.12, 2.11,
       2.10, 2.09, 2.09, 2.08, 2.07, 2.07, 2.06, 2.06, 2.06, 2.05, 2.05, 2.05, 2.04)


def t95(df):
    return T95[df - 1] if df <= len(T95) else 2.02 if df < 60 else 2.00


def difference(a, b):
    """(delta, noise), in %, of runs b against runs a taken in the same
    rounds: the mean of the rounds' ratios b/a, less 1, and the half-width
    of its 95 % confidence interval (Student's t: 2.26 standard errors at 10
    rounds, 2.78 at 5), below which a difference can be chance (None with
    fewer than two rounds: no spread to measure).  A drift of the machine
    moves both runs of a round and leaves their ratio alone."""
    ratios = [y / x for x, y in zip(a, b)]
    delta = 100.0 * (statistics.fmean(ratios) - 1.0)
    n = len(ratios)
    noise = 100.0 * t95(n - 1) * statistics.stdev(ratios) / math.sqrt(n) if n > 1 else None
    return delta, noise
