# SPDX-License-Identifier: MIT
# benchmark targets (bench/); see bench/README.md
#
#   make bench                         the comparison, full sizes, RUNS=5
#   make bench QUICK=1                 the same at small sizes (about a minute)
#   make bench RUNS=10 BENCHES=random_mixed,larson ALLOCATORS=hakmem,mimalloc
#   make bench ALLOCATORS=hakmem,mimalloc,mine=/path/to/libmine.so
#                                      any allocator built as a shared object
#   make bench-smoke                   every benchmark once, tiny, hakmem and glibc
#   make bench-callgrind               instructions per random_mixed iteration
#   make bench-threads [ROUNDS=3]      larson, prodcons, thread_churn at 2-64 threads
#   make bench-apps [ROUNDS=5] [QUICK=1] [APPS=sqlite3,rocksdb] [NO_STRACE=1]
#                                      real programs of Debian's packages (RocksDB's db_bench
#                                      and cache_bench, sqlite3, CPython, gcc, memcached), which
#                                      it installs; ALLOCATORS as for bench, by default bench's
#                                      and the mimalloc releases built under /tmp/peers
#   make ab A=main B=HEAD              A/B of two refs on random_mixed
#   make soak DURATION=300 EPOCH=1 ALLOCATORS=hakmem,mimalloc [BENCH=larson]
#                                      one long run per allocator, two side by side
#   make scorecard [QUICK=1]           everything measured afresh into docs/SCORECARD.md

PYTHON ?= python3

BENCH_PROGRAMS := random_mixed fixed_size tiny_hot patterns mixed_large larson prodcons prodcons_batch \
                  big_blocks thread_churn thread_once memory_return random_touch soak latency first_touch \
                  cpu_pingpong
BENCH_PROG_BINS := $(BENCH_PROGRAMS:%=$(BUILD)/bench/%)
BENCH_BINS      := $(BENCH_PROG_BINS) $(BUILD)/bench/libfloor.so
BENCH_CFLAGS    := -std=gnu11 -O2 -g -pthread -Wall -Wextra

BENCH_OPTS = --build $(BUILD) \
  $(if $(filter-out 0,$(QUICK)),--quick) \
  $(if $(RUNS),--runs $(RUNS)) \
  $(if $(BENCHES),--benches $(BENCHES)) \
  $(if $(ALLOCATORS),--allocators $(ALLOCATORS))

SOAK_OPTS = --build $(BUILD) \
  $(if $(DURATION),--duration $(DURATION)) \
  $(if $(EPOCH),--epoch $(EPOCH)) \
  $(if $(BENCH),--bench $(BENCH)) \
  $(if $(ALLOCATORS),--allocators $(ALLOCATORS))

APPS_OPTS = --build $(BUILD) \
  $(if $(filter-out 0,$(QUICK)),--quick) \
  $(if $(ROUNDS),--rounds $(ROUNDS)) \
  $(if $(APPS),--apps $(APPS)) \
  $(if $(filter-out 0,$(NO_STRACE)),--no-strace) \
  $(if $(ALLOCATORS),--allocators $(ALLOCATORS))

SCORECARD_OPTS = --build $(BUILD) \
  $(if $(filter-out 0,$(QUICK)),--quick) \
  $(if $(RUNS),--runs $(RUNS)) \
  $(if $(ALLOCATORS),--allocators $(ALLOCATORS))

.PHONY: build-deps bench-programs bench-smoke bench-callgrind bench-threads bench-apps ab soak scorecard

bench-programs: $(BENCH_BINS)

$(BENCH_PROG_BINS): $(BUILD)/bench/%: bench/%.c bench/bench.h bench/workload.h include/hakmem.h bench/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) $< -o $@ -lm

# The floor under the benchmarks of small blocks (bench/floor.c); -fno-builtin
# keeps calloc from being compiled into a call of itself.
$(BUILD)/bench/libfloor.so: bench/floor.c bench/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) -fno-builtin -fPIC -shared -fvisibility=hidden $< -o $@

# The scripts install the peers and tools they need (GNU time, gnuplot,
# strace, valgrind); a C compiler and python3, when missing, are installed
# here, before anything is built, as test/deps.sh does (as root, with
# apt-get, unless HAKMEM_NO_APT=1).
build-deps:
	@m=""; command -v $(CC) >/dev/null 2>&1 || m=" gcc libc6-dev"; command -v $(PYTHON) >/dev/null 2>&1 || \
	  m="$$m python3"; [ -z "$$m" ] || [ "$${HAKMEM_NO_APT:-0}" = 1 ] || [ "$$(id -u)" != 0 ] || \
	  ! command -v apt-get >/dev/null 2>&1 || { echo "installing$$m"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$m >/dev/null; } || \
	  echo "apt-get could not install$$m"

bench: build-deps lib bench-programs
	$(PYTHON) scripts/bench.py $(BENCH_OPTS)

bench-smoke: build-deps lib bench-programs
	$(PYTHON) scripts/bench.py --smoke --build $(BUILD)

bench-callgrind: build-deps lib bench-programs
	$(PYTHON) scripts/bench.py --callgrind --build $(BUILD) $(if $(ALLOCATORS),--allocators $(ALLOCATORS))

bench-threads: build-deps lib bench-programs
	$(PYTHON) scripts/many-threads --build $(BUILD) $(if $(ROUNDS),--rounds $(ROUNDS)) $(if $(ALLOCATORS),--allocators $(ALLOCATORS))

# The programs' Debian packages are installed by scripts/bench-apps, as the
# peers are by scripts/bench.py.
bench-apps: build-deps lib
	$(PYTHON) scripts/bench-apps $(APPS_OPTS)

ab: build-deps
	$(PYTHON) scripts/ab --build $(BUILD) --refs $(or $(A),main) $(or $(B),HEAD) $(if $(RUNS),--runs $(RUNS))

soak: build-deps lib bench-programs
	$(PYTHON) scripts/soak $(SOAK_OPTS)

scorecard: build-deps lib bench-programs
	$(PYTHON) scripts/scorecard $(SCORECARD_OPTS)
