# SPDX-License-Identifier: MIT
"""The benchmark matrix: which programs `make bench` runs, with which arguments."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Bench:
    name: str  # its row in the report
    program: str  # the binary in BUILD/bench/
    full: tuple  # arguments of `make bench`
    quick: tuple  # QUICK=1: a few tens of milliseconds
    smoke: tuple  # bench-smoke: the smallest run that still goes through the code

    def args(self, size):
        return [str(a) for a in getattr(self, size)]


SUITE = (
    Bench("random_mixed", "random_mixed", (20000000, 400, 1), (5000000, 400, 1), (20000, 400, 1)),
    Bench("fixed_size-16", "fixed_size", (16, 50000000), (16, 10000000), (16, 10000)),
    Bench("fixed_size-1024", "fixed_size", (1024, 50000000), (1024, 10000000), (1024, 10000)),
    Bench("tiny_hot-8", "tiny_hot", (8, 100, 500000), (8, 100, 100000), (8, 100, 100)),
    Bench("tiny_hot-128", "tiny_hot", (128, 100, 500000), (128, 100, 100000), (128, 100, 100)),
    *(
        Bench(f"patterns-{p}", "patterns", (p, 1000, 20000, 1), (p, 1000, 5000, 1), (p, 100, 10, 1))
        for p in ("lifo", "fifo", "interleave", "random")
    ),
    Bench("mixed_large", "mixed_large", (500000, 500, 1), (60000, 500, 1), (1000, 50, 1)),
    Bench("larson", "larson", (2, 1.0, 1000, 1), (2, 0.2, 1000, 1), (2, 0.02, 100, 1)),
    # the same server workload with buffers up to 64 KiB: half the blocks are large
    Bench("larson-64k", "larson", (2, 1.0, 1000, 1, 16, 65536), (2, 0.2, 1000, 1, 16, 65536),
          (2, 0.02, 100, 1, 16, 65536)),
    Bench("prodcons", "prodcons", (10000000, 1024, 1), (2000000, 1024, 1), (10000, 64, 1)),
    # memory to and from the OS: blocks of megabytes, threads that come and go
    Bench("big_blocks", "big_blocks", (300, 8, 1, 1 << 20, 64 << 20), (40, 8, 1, 1 << 20, 64 << 20),
          (3, 2, 1, 1 << 20, 4 << 20)),
    Bench("big_blocks-2-24M", "big_blocks", (1000, 16, 1, 2 << 20, 24 << 20), (100, 16, 1, 2 << 20, 24 << 20),
          (3, 2, 1, 2 << 20, 3 << 20)),
    Bench("thread_churn", "thread_churn", (20, 4, 100000, 1000, 1), (5, 4, 20000, 1000, 1), (2, 2, 500, 100, 1)),
)

# Not a throughput benchmark: a peak, then RSS sampled while the program is
# idle, under each allocator and each hakmem profile (scripts/hakbench/memreturn.py).
MEMORY_RETURN = Bench("memory_return", "memory_return", (1024, 5, 100), (256, 2, 100), (8, 0, 100))

# Not a throughput benchmark either: the sampled time of single calls in
# random_mixed and thread churn, a histogram per allocator (scripts/hakbench/latency.py).
LATENCY = Bench("latency", "latency", ("all", 10000000, 1), ("all", 2000000, 1), ("all", 20000, 1))

# The runs that are not timed like the others, each with a section of its own.
SECTIONS = (MEMORY_RETURN, LATENCY)


def select(selectors):
    """The benchmarks named, by row name or program name, in suite order (the
    memory-return and latency runs last)."""
    every = (*SUITE, *SECTIONS)
    if not selectors:
        return list(every)
    known = {b.name for b in every} | {b.program for b in every}
    unknown = [s for s in selectors if s not in known]
    if unknown:
        raise SystemExit(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return [b for b in every if b.name in selectors or b.program in selectors]
