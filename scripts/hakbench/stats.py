# SPDX-License-Identifier: MIT
"""Summary statistics of repeated runs."""

import math
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    median: float
    min: float
    max: float
    stdev: float  # sample standard deviation, 0 for a single run

    @property
    def cv(self):
        """Coefficient of variation, in %."""
        return 100.0 * self.stdev / self.mean if self.mean else 0.0


def summarize(values):
    values = list(values)
    if not values:
        return None
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    return Summary(len(values), statistics.fmean(values), statistics.median(values),
                   min(values), max(values), stdev)


@dataclass(frozen=True)
class RankTest:
    u: float  # Mann-Whitney U of the first sample
    p: float  # two-sided p-value
    exact: bool  # p from the exact distribution of U, not the normal approximation
    min_p: float  # the smallest p these sample sizes can give (exact test)


def _u_counts(m, n):
    """counts[u]: how many of the C(m+n, m) orderings of two samples of
    sizes m and n, without ties, give the first one U = u."""
    # table[j][u] for a first sample of size i (built up) and a second of size j
    table = [[1] + [0] * (m * n) for _ in range(n + 1)]
    for _ in range(m):
        new = [[0] * (m * n + 1) for _ in range(n + 1)]
        for j in range(n + 1):
            for u in range(m * n + 1):
                # the largest value belongs to the first sample (it beats all
                # j of the second) or to the second
                new[j][u] = (table[j][u - j] if u >= j else 0) + (new[j - 1][u] if j else 0)
        table = new
    return table[n]


def mann_whitney(a, b):
    """Two-sided Mann-Whitney U test of samples a and b: exact for samples
    of up to 20 values each without ties, else the normal approximation
    with tie and continuity corrections."""
    m, n = len(a), len(b)
    if not m or not n:
        raise ValueError("Mann-Whitney U needs two non-empty samples")
    values = sorted([(x, 0) for x in a] + [(x, 1) for x in b])
    ranks, ties, i = [0.0] * (m + n), [], 0
    while i < m + n:
        j = i
        while j + 1 < m + n and values[j + 1][0] == values[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        ties.append(j - i + 1)
        i = j + 1
    u = sum(r for r, (_, sample) in zip(ranks, values) if sample == 0) - m * (m + 1) / 2
    total = math.comb(m + n, m)
    min_p = min(1.0, 2 / total)
    if max(m, n) <= 20 and all(t == 1 for t in ties):
        counts = _u_counts(m, n)
        below = sum(counts[:int(u) + 1]) / total
        above = sum(counts[int(u):]) / total
        return RankTest(u, min(1.0, 2 * min(below, above)), True, min_p)
    mean = m * n / 2
    var = m * n / 12 * ((m + n + 1) - sum(t ** 3 - t for t in ties) / ((m + n) * (m + n - 1)))
    if var <= 0:
        return RankTest(u, 1.0, False, min_p)
    z = max(0.0, abs(u - mean) - 0.5) / math.sqrt(var)
    return RankTest(u, math.erfc(z / math.sqrt(2)), False, min_p)


def percentile(values, q):
    """The value at quantile q (0 < q <= 1) of `values`, nearest rank: the
    smallest value with at least q of them at or below it; None if empty."""
    values = sorted(values)
    if not values:
        return None
    return values[max(1, math.ceil(q * len(values))) - 1]


def iqr(values):
    """The interquartile range of `values` (the quartiles interpolated
    between the values, as statistics.quantiles' "inclusive" method); 0 for
    a single value, None for none."""
    values = list(values)
    if len(values) < 2:
        return 0.0 if values else None
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1


@dataclass(frozen=True)
class MedianInterval:
    low: float
    high: float
    confidence: float  # the probability that it holds the true median

    def resolution(self, median):
        """Half its width relative to the median, in %: the smallest
        difference between two contenders' medians it resolves."""
        return 100.0 * (self.high - self.low) / 2 / median if median else None


def median_interval(values, confidence=0.9):
    """A distribution-free confidence interval of the median of `values`:
    the k-th smallest to the k-th largest, for the largest k whose interval
    holds the median with at least `confidence` (for a continuous
    distribution, the count of values below the median is binomial(n, 1/2)),
    else the least and the most; None for fewer than two values.  With 5
    values: the least to the most, at 94 %; with 10: the 2nd to the 9th, at
    98 %; with 15: the 4th to the 12th, at 96 %."""
    values = sorted(values)
    n = len(values)
    if n < 2:
        return None

    def coverage(k):
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n

    k = 1
    while k + 1 <= n // 2 and coverage(k + 1) >= confidence:
        k += 1
    return MedianInterval(values[k - 1], values[n - k], coverage(k))
