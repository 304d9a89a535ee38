# SPDX-License-Identifier: MIT
"""Summary statistics of repeated runs."""

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
