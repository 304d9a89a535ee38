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
    one_thread: bool = True  # run pinned to one CPU (runner.pin)

    def args(self, size):
        return [str(a) for a in getattr(self, size)]


SUITE = (
    Bench("random_mixed", "random_mixed", (20000000, 400, 1), (5000000, 400, 1), (20000, 400, 1)),
    # off the reference: other size ranges and working sets
    Bench("random_mixed-16-128", "random_mixed", (20000000, 400, 1, 16, 128), (5000000, 400, 1, 16, 128),
          (20000, 400, 1, 16, 128)),
    Bench("random_mixed-1-4096", "random_mixed", (20000000, 400, 1, 1, 4096), (5000000, 400, 1, 1, 4096),
          (20000, 400, 1, 1, 4096)),
    *(
        Bench(f"random_mixed-ws{ws}", "random_mixed", (20000000, ws, 1), (5000000, ws, 1), (20000, ws, 1))
        for ws in (1000, 10000, 100000)
    ),
    Bench("random_mixed-16-128-ws100000", "random_mixed", (20000000, 100000, 1, 16, 128),
          (5000000, 100000, 1, 16, 128), (20000, 1000, 1, 16, 128)),
    # blocks used as programs use them: both ends touched, or written whole
    Bench("random_touch-ends", "random_touch", (20000000, 400, 1, 16, 1040, "ends"),
          (5000000, 400, 1, 16, 1040, "ends"), (20000, 400, 1, 16, 1040, "ends")),
    Bench("random_touch-ends-16-128", "random_touch", (20000000, 1000, 1, 16, 128, "ends"),
          (5000000, 1000, 1, 16, 128, "ends"), (20000, 1000, 1, 16, 128, "ends")),
    Bench("random_touch-ends-16-128-ws100000", "random_touch", (20000000, 100000, 1, 16, 128, "ends"),
          (5000000, 100000, 1, 16, 128, "ends"), (20000, 1000, 1, 16, 128, "ends")),
    Bench("random_touch-whole", "random_touch", (10000000, 400, 1, 16, 1040, "whole"),
          (2000000, 400, 1, 16, 1040, "whole"), (20000, 400, 1, 16, 1040, "whole")),
    Bench("fixed_size-16", "fixed_size", (16, 50000000), (16, 10000000), (16, 10000)),
    Bench("fixed_size-1024", "fixed_size", (1024, 50000000), (1024, 10000000), (1024, 10000)),
    Bench("tiny_hot-8", "tiny_hot", (8, 100, 500000), (8, 100, 100000), (8, 100, 100)),
    Bench("tiny_hot-128", "tiny_hot", (128, 100, 500000), (128, 100, 100000), (128, 100, 100)),
    *(
        Bench(f"patterns-{p}", "patterns", (p, 1000, 20000, 1), (p, 1000, 5000, 1), (p, 100, 10, 1))
        for p in ("lifo", "fifo", "interleave", "random")
    ),
    # a structure of a million blocks (about 70 MiB) built, then freed whole, in the order built or a random one
    *(
        Bench(f"patterns-{p}-1M", "patterns", (p, 1000000, 8, 1), (p, 1000000, 1, 1), (p, 2000, 2, 1))
        for p in ("fifo", "random")
    ),
    Bench("mixed_large", "mixed_large", (500000, 500, 1), (60000, 500, 1), (1000, 50, 1)),
    Bench("larson", "larson", (2, 1.0, 1000, 1), (2, 0.2, 1000, 1), (2, 0.02, 100, 1), one_thread=False),
    # the same server workload with buffers up to 64 KiB: half the blocks are large
    Bench("larson-64k", "larson", (2, 1.0, 1000, 1, 16, 65536), (2, 0.2, 1000, 1, 16, 65536),
          (2, 0.02, 100, 1, 16, 65536), one_thread=False),
    # producers and consumers pinned (a pair across two CPUs while there are CPUs enough, else a pair per CPU): 1 to 4 pairs
    *(
        Bench(f"prodcons-{n}", "prodcons", (10000000 // n, 1024, 1, 16, 1024, n), (2000000 // n, 1024, 1, 16, 1024, n),
              (10000, 64, 1, 16, 1024, n), one_thread=False)
        for n in (1, 2, 4)
    ),
    Bench("prodcons-64B", "prodcons", (5000000, 1024, 1, 64, 64, 2), (1000000, 1024, 1, 64, 64, 2),
          (10000, 64, 1, 64, 64, 2), one_thread=False),
    # more threads than CPUs, left to the scheduler: 2 producers and 2 consumers hand over batches of 4096
    # blocks of 64 B through a mutex and condition variables, a queue of 100 batches (threads sleep and wake)
    Bench("prodcons_batch", "prodcons_batch", (2000, 4096, 64, 64, 2, 2, 100, 1), (250, 4096, 64, 64, 2, 2, 100, 1),
          (3, 256, 64, 64, 2, 2, 4, 1), one_thread=False),
    # memory to and from the OS: blocks of megabytes, threads that come and go
    Bench("big_blocks", "big_blocks", (300, 8, 1, 1 << 20, 64 << 20), (40, 8, 1, 1 << 20, 64 << 20),
          (3, 2, 1, 1 << 20, 4 << 20)),
    Bench("big_blocks-2-24M", "big_blocks", (1000, 16, 1, 2 << 20, 24 << 20), (100, 16, 1, 2 << 20, 24 << 20),
          (3, 2, 1, 2 << 20, 3 << 20)),
    # two threads at once, blocks of 1-4 MiB, one byte of each written: the allocator's own cost
    Bench("big_blocks-threads", "big_blocks", (1000000, 16, 1, 1 << 20, 4 << 20, 2, "first"),
          (200000, 16, 1, 1 << 20, 4 << 20, 2, "first"), (1000, 4, 1, 1 << 20, 2 << 20, 2, "first"),
          one_thread=False),
    Bench("thread_churn", "thread_churn", (20, 4, 100000, 1000, 1), (5, 4, 20000, 1000, 1), (2, 2, 500, 100, 1),
          one_thread=False),
    # threads that live for one calloc and one free of 128 B, 10 alive at a time: a thread's set-up and tear-down
    Bench("thread_once", "thread_once", (5000, 10, 128), (1000, 10, 128), (50, 4, 128), one_thread=False),
)

# Not a throughput benchmark: a peak, then RSS sampled while the program is
# idle, under each allocator and each hakmem profile (scripts/hakbench/memreturn.py).
MEMORY_RETURN = Bench("memory_return", "memory_return", (1024, 5, 100), (256, 2, 100), (8, 0, 100))

# Not a throughput benchmark either: the sampled time of single calls in
# random_mixed and thread churn, a histogram per allocator (scripts/hakbench/latency.py).
# make bench runs each workload in a process of its own (its name in place of
# "all"); bench-smoke runs both in one.
LATENCY = Bench("latency", "latency", ("all", 10000000, 1), ("all", 2000000, 1), ("all", 20000, 1))

# The runs that are not timed like the others, each with a section of its own.
SECTIONS = (MEMORY_RETURN, LATENCY)


def select(selectors):
    """The benchmarks named, in suite order (the memory-return and latency runs
    last): a row's name selects that row, a program's name that is no row's
    name every row of the program."""
    every = (*SUITE, *SECTIONS)
    if not selectors:
        return list(every)
    known = {b.name for b in every} | {b.program for b in every}
    unknown = [s for s in selectors if s not in known]
    if unknown:
        raise SystemExit(f"unknown benchmark {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    rows = {b.name for b in every}
    return [b for b in every if b.name in selectors or (b.program in selectors and b.program not in rows)]
