/* SPDX-License-Identifier: MIT */
/* The sampled heap profile (HAKMEM_PROF, hak_prof_dump): one allocation in
 * about every HAKMEM_PROF_SAMPLE bytes is recorded with its stack, and the
 * profile is written in the legacy heap-profile text that pprof reads.
 *
 * Where the bytes are counted: on malloc's slow path only (api/alloc.c), so
 * that the fast paths are the same instructions with profiling on or off.
 * A refill counts every block it puts in the thread's list, and the malloc
 * that made it is the one sampled when the thread's countdown, drawn from
 * an exponential distribution of mean HAKMEM_PROF_SAMPLE, crosses zero
 * (each crossing in one count adds one sample's weight to it).  The bias:
 * which call is sampled is the one that found its list empty, so among
 * call sites that take blocks of the same class at the same time the share
 * of samples follows the share of calls, not of bytes kept; blocks freed and
 * taken again from a thread's own list, without a refill, are not counted.
 * Call sites of distinct sizes, and heaps that grow, are measured without
 * bias.
 *
 * A sampled block's free reaches the slow path, where its record goes: a
 * huge block's does, and a large class's block is flagged in the class
 * map (api/alloc.c).  A small class's block shares its unit, so a huge
 * block of the class's usable size is sampled in its place: a stand-in,
 * whose record keeps that size for malloc_usable_size and realloc.  Freed,
 * one stand-in of a class per shard of the records is kept for its next
 * samples, with its record, which tells a second free (the heap's
 * statistics count them as huge blocks in use).  Each sample stands for its crossings
 * times the sampling period in bytes; the dump converts these estimates to
 * the counts whose unsampling by pprof (heap_v2: divide by 1 - exp(-size /
 * period)) gives them back.
 *
 * Nothing here allocates through the allocator: the tables are mapped at
 * start-up, stacks come from hk_unwind (unwind.c), or from backtrace()
 * under the thread's guard (its first call loads libgcc_s, served without
 * sampling), and profiles are written with write() from a buffer on the
 * stack. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "service/service.h"

#define DEPTH 32              /* frames kept of a stack */
#define SKIP 2                /* hk_prof_sample's frame and sampled()'s, which the router tail-calls */
#define STACKS (1u << 14)     /* distinct stacks */
#define SHARD_BITS 3          /* the records in 8 tables by their blocks' regions, each behind a lock of its own */
#define SHARDS (1u << SHARD_BITS)
#define RECORD_BITS_FIRST 7   /* each table at start: 4 KiB */
#define RECORD_BITS_MAX 16    /* 2 MiB: all 8, 393 216 live sampled blocks, 192 GiB of heap at the default period */
#define LEAKS_SHOWN 10        /* stacks in the leak report */

/* A stack's estimates (samples times their weights) from the blocks of
 * one shard, written under its lock: threads sampling one call site at
 * once, each in a shard of its own, share no line, and take no lock of
 * the stack's.  A block's record moved by realloc to another shard takes
 * its weight away there: a shard's figures may fall below 0, their sum not. */
typedef struct tally {
  double live_objs, live_bytes, all_objs, all_bytes;
} __attribute__((aligned(64))) tally_t;

/* A stack is found without a lock: its slot, once its hash is stored
 * (release, last), is never written again but for its tallies. */
typedef struct stack {
  uint64_t hash;              /* 0: a free slot */
  unsigned depth;
  void *pc[DEPTH];
  tally_t tally[SHARDS];
} stack_t;

typedef struct record {
  uintptr_t p;                /* 0: a free slot */
  uint64_t crossings;
  size_t size;                /* usable bytes, for the weights */
  uint32_t stack;
  uint32_t stand_in : 31;     /* a huge block standing for a class's block: its usable size; else 0 */
  uint32_t kept : 1;          /* a stand-in freed, kept for a later sample: not live */
} record_t;

bool hk_prof_on;
/* The records of sampled blocks in shards, by the 128 MiB of address
 * space a block lies in: huge blocks, and those standing in for small
 * ones, come from regions of that size (region/huge.c), each of one arena,
 * so that threads of different arenas sampling at once lock shards of
 * their own (the first eight regions, side by side in the space reserved
 * at start-up, each its own).  Shards by a hash of the address, each used
 * by every thread in turn, passed their lines back and forth:
 * big_blocks-threads, every block sampled, ran at 0.35 of its unsampled
 * speed, 0.54 with these.  Each table is sized to its live samples, at
 * most half full, so that its lookups stay in cache and its pages are
 * touched as the samples need them (one table of the largest size hashed
 * across took a page fault per new sample's address). */
typedef struct shard {
  uint8_t busy;               /* its lock (shard_lock) */
  record_t *records;          /* replaced under the lock; read relaxed out of it for a prefetch */
  unsigned bits;
  size_t count;
} __attribute__((aligned(64))) shard_t;
static shard_t shards[SHARDS];

/* A shard's lock, held for a lookup and a few stores: a byte taken spinning,
 * then yielding to a holder that lost its CPU (a dump holds them all a
 * while).  A mutex's lock and unlock were 110 of a sample's 1 270
 * instructions.  Counted and skipped in fork's handlers as the allocator's
 * mutexes are (base.h). */
static void shard_lock(shard_t *sh) {
  if (hk_forking) return;
  hk_locks_held++;
  for (unsigned spins = 0; __atomic_exchange_n(&sh->busy, 1, __ATOMIC_ACQUIRE);)
    while (__atomic_load_n(&sh->busy, __ATOMIC_RELAXED)) spins++ < 100 ? hk_pause() : (void)sched_yield();
}
static void shard_unlock(shard_t *sh) {
  if (hk_forking) return;
  __atomic_store_n(&sh->busy, 0, __ATOMIC_RELEASE);
  hk_locks_held--;
}
static stack_t *stacks;
static pthread_mutex_t stacks_lock = PTHREAD_MUTEX_INITIALIZER;  /* a new stack's slot */
/* The slots made, in the order made: what a dump or the leak report reads,
 * not the table, whose 13 MiB a first read maps page by page (a short
 * program's profile took 3 300 page faults and 50 ms at its exit).
 * Appended under stacks_lock, the count stored last (release). */
static uint32_t made[STACKS];
static unsigned nmade;
static unsigned stacks_made(void) { return __atomic_load_n(&nmade, __ATOMIC_ACQUIRE); }
static double period;
/* HAKMEM_PROF_INTERVAL_MB: the estimated bytes of the live samples, kept
 * only then, and the figure at the next numbered dump. */
static bool intervals;        /* set at start-up */
static int64_t live_total, next_dump;  /* bytes; next_dump written under dump_lock, read relaxed */
static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned dumps;
/* By class, a stand-in kept per shard (its own), not linked through its
 * memory, which the thread that freed it has in its cache, not the
 * sampling one: written under the shard's lock, with the stand-in's
 * record, and read as a hint without it.  A class's 8 on one line. */
static void *kept[HK_NCLASS + 1][SHARDS] __attribute__((aligned(64)));
__thread int64_t hk_prof_countdown __attribute__((tls_model("initial-exec")));
static __thread uint64_t rng __attribute__((tls_model("initial-exec")));
static __thread bool in_prof __attribute__((tls_model("initial-exec")));  /* backtrace may allocate */

/* ---- arithmetic without libm -------------------------------------------------- */
/* ln m for m in [0.7, 1.4]: an atanh series. */
static double ln_series(double m) {
  double z = (m - 1) / (m + 1), z2 = z * z, sum = 0;
  for (int k = 11; k >= 1; k -= 2) sum = sum * z2 + 1.0 / k;
  return 2 * z * sum;
}

/* ln x for x in (0, 1]: its exponent, the logarithm of the mantissa's top
 * LN_BITS bits from a table, and three terms of ln(1 + d), |d| < 2^-LN_BITS,
 * for the rest.  No division: a count a period or two past a crossing
 * draws an interval per crossing (the series took 11 % of
 * big_blocks-threads' time when every crossing drew one). */
#define LN_BITS 7
static double ln_at[1 << LN_BITS], inverse_at[1 << LN_BITS];

static void ln_table(void) {
  for (int i = 0; i < 1 << LN_BITS; i++) {
    double c = 1 + (i + 0.5) / (1 << LN_BITS);  /* the middle of the mantissas with these top bits */
    ln_at[i] = c > 1.41421356 ? ln_series(c / 2) + 0.6931471805599453 : ln_series(c);
    inverse_at[i] = 1 / c;
  }
}

static double ln(double x) {
  uint64_t b;
  memcpy(&b, &x, sizeof b);
  int e = (int)(b >> 52 & 0x7ff) - 1023, i = (int)(b >> (52 - LN_BITS) & ((1 << LN_BITS) - 1));
  b = (b & ~(0x7ffull << 52)) | 1023ull << 52;
  double m;
  memcpy(&m, &b, sizeof m);
  double d = (m - (1 + (i + 0.5) / (1 << LN_BITS))) * inverse_at[i];
  return e * 0.6931471805599453 + ln_at[i] + d * (1 - d * (0.5 - d * (1.0 / 3)));
}

/* e^-x for x >= 0: halved down to a small argument, a Taylor series, squared back. */
static double exp_neg(double x) {
  if (x > 700) return 0;
  int n = 0;
  while (x > 0.125) x /= 2, n++;
  double t = 1, term = 1;
  for (int k = 1; k < 10; k++) term *= -x / k, t += term;
  while (n--) t *= t;
  return t;
}

static double uniform(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)((rng >> 11) + 1) / 9007199254740992.0;  /* (0, 1] */
}

/* The bytes to the thread's next sample: exponentially distributed, mean the period. */
static int64_t interval(void) { return (int64_t)(-ln(uniform()) * period) + 1; }

/* Poisson-distributed, of mean lambda: the inverse of its distribution
 * function at one uniform draw up to 500; above, the normal law of the
 * same mean and variance (its skew is under 5 %), from twelve uniform
 * draws. */
static uint64_t poisson(double lambda) {
  double u = uniform();
  if (lambda > 500) {
    for (int i = 0; i < 11; i++) u += uniform();
    double x = lambda + (u - 6) / exp_neg(ln(lambda) / 2) + 0.5;  /* sqrt(lambda) = 1 / e^-(ln(lambda) / 2) */
    return (uint64_t)x;
  }
  double p = exp_neg(lambda), f = p;
  uint64_t k = 0;
  while (u > f && p > 0) p *= lambda / ++k, f += p;
  return k;
}

/* ---- sampling --------------------------------------------------------------- */
uint64_t hk_prof_crossed(size_t bytes) {
  if (in_prof) {  /* the profile's own calls (backtrace's) are never sampled */
    hk_prof_countdown += (int64_t)bytes;
    return 0;
  }
  if (!rng) {  /* the thread's first count: its countdown was 0 */
    rng = ((uintptr_t)&rng * 0x9e3779b97f4a7c15ull) ^ (uint64_t)clock() ^ (uint64_t)getpid() << 32;
    if (!rng) rng = 1;
    hk_prof_countdown += interval();
  }
  if (hk_prof_countdown > 0) return 0;
  /* Crossed: once, and then as often as a Poisson process of the same rate
   * crosses the bytes past it, after which the interval left is a new one
   * (the process has no memory).  An interval per crossing costs less only
   * for a count a period or two past it. */
  double past = (double)-hk_prof_countdown / period;
  if (past < 2) {
    uint64_t crossings = 0;
    while (hk_prof_countdown <= 0) hk_prof_countdown += interval(), crossings++;
    return crossings;
  }
  hk_prof_countdown = interval();
  return 1 + poisson(past);
}

static uint64_t stack_hash(void *const *pc, unsigned n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned i = 0; i < n; i++) h = (h ^ (uintptr_t)pc[i]) * 0x100000001b3ull;
  return h | 1;
}

/* The stack's slot, found without the lock, made under it if new; NULL if
 * its probes are all taken (said once: the table is full, or nearly), so
 * that a sample of a new stack then costs STACK_PROBES looks, not a table's. */
#define STACK_PROBES 64
static stack_t *stack_of(void *const *pc, unsigned n) {
  static bool full_said;
  uint64_t h = stack_hash(pc, n);
  for (bool locked = false;; locked = true) {
    for (unsigned i = (unsigned)h, tries = 0; tries < STACK_PROBES; i++, tries++) {
      stack_t *s = &stacks[i % STACKS];
      uint64_t at = __atomic_load_n(&s->hash, __ATOMIC_ACQUIRE);
      if (!at && !locked) break;
      if (!at) {
        s->depth = n;
        memcpy(s->pc, pc, n * sizeof *pc);
        __atomic_store_n(&s->hash, h, __ATOMIC_RELEASE);
        made[nmade] = i % STACKS;
        __atomic_store_n(&nmade, nmade + 1, __ATOMIC_RELEASE);
      }
      if (!at || (at == h && s->depth == n && !memcmp(s->pc, pc, n * sizeof *pc))) {
        if (locked) hk_unlock(&stacks_lock);
        return s;
      }
    }
    if (locked) {
      bool say = !full_said;
      full_said = true;
      hk_unlock(&stacks_lock);
      if (say)
        hk_message("hakmem: heap profile: no room for more stacks (%u kept): samples of new ones are not recorded\n",
                   STACKS);
      return NULL;
    }
    hk_lock(&stacks_lock);
  }
}

/* An address's hash, whose top bits pick its record's slot in its shard. */
static uint64_t address_hash(uintptr_t p) { return (p >> 4) * 0x9e3779b97f4a7c15ull; }
static shard_t *shard_of(const void *p) { return &shards[(uintptr_t)p / HK_REGION_SIZE % SHARDS]; }
static size_t slot_of(uintptr_t p, unsigned bits) { return (size_t)(address_hash(p) >> (64 - bits)); }
static size_t record_mask(const shard_t *sh) { return ((size_t)1 << sh->bits) - 1; }

/* Where p's record is out of the lock, for a prefetch: read relaxed, and a
 * table the lock's holder replaces meanwhile is only a wasted prefetch. */
static const void *record_hint(const shard_t *sh, const void *p) {
  record_t *table = __atomic_load_n(&sh->records, __ATOMIC_RELAXED);
  return &table[slot_of((uintptr_t)p, __atomic_load_n(&sh->bits, __ATOMIC_RELAXED))];
}

/* The record of p, or its free slot (linear probing; one slot is always free). */
static record_t *record_at(shard_t *sh, uintptr_t p) {
  size_t i = slot_of(p, sh->bits);
  while (sh->records[i].p != p && sh->records[i].p) i = (i + 1) & record_mask(sh);
  return &sh->records[i];
}

/* The table at twice its size, its records hashed anew; false if there is no memory for it. */
static bool records_grow(shard_t *sh) {
  unsigned bits = sh->bits + 1;
  record_t *old = sh->records, *table = hk_os_map(sizeof *table << bits);
  if (!table) return false;
  for (size_t i = 0; i <= record_mask(sh); i++) {
    if (!old[i].p) continue;
    size_t j = slot_of(old[i].p, bits);
    while (table[j].p) j = (j + 1) & (((size_t)1 << bits) - 1);
    table[j] = old[i];
  }
  __atomic_store_n(&sh->records, table, __ATOMIC_RELAXED);
  __atomic_store_n(&sh->bits, bits, __ATOMIC_RELAXED);
  hk_os_unmap(old, sizeof *old << (bits - 1));
  return true;
}

/* p's record, made if new (counted, its fields the caller's); NULL if the table is full. */
static record_t *record_add(shard_t *sh, uintptr_t p) {
  record_t *r = record_at(sh, p);
  if (r->p) return r;
  size_t size = record_mask(sh) + 1;  /* grown at half full; three quarters where it cannot grow */
  if (sh->count >= size / 2 && (sh->bits == RECORD_BITS_MAX || !records_grow(sh)) && sh->count >= size / 4 * 3)
    return NULL;
  sh->count++;
  return record_at(sh, p);
}

/* The live records of huge blocks per address hash: a filter, read
 * without the lock, that spares the frees of blocks never sampled a lookup
 * under the lock and a touch of the records' table (a huge block's free
 * made a page fault of it).  A large class's block sampled is flagged in
 * the class map instead: its sample and its free skip the filter, whose
 * line, written at one and read at the other, missed at both (larson-64k
 * with the profile on: 1.03 times as fast without them).  Relaxed: a
 * block is sampled before the malloc that returns it, and reaches its
 * free, realloc or malloc_usable_size after, through the program's
 * hand-off, which orders the count's update before them; another block's
 * count read stale costs a lookup. */
#define FILTER_BITS 16
static uint32_t recorded[1u << FILTER_BITS];

static uint32_t *recorded_at(uintptr_t p) { return &recorded[hk_hash_index(p >> 4, FILTER_BITS)]; }
static bool maybe_recorded(const void *p) { return __atomic_load_n(recorded_at((uintptr_t)p), __ATOMIC_RELAXED); }
static void count_record(uintptr_t p, int delta) {
  __atomic_fetch_add(recorded_at(p), (uint32_t)delta, __ATOMIC_RELAXED);
}

/* Empties slot r, moving up the records behind it that probing would no longer reach. */
static void record_remove(shard_t *sh, record_t *r) {
  record_t *records = sh->records;
  size_t hole = (size_t)(r - records);
  records[hole].p = 0;
  sh->count--;
  for (size_t i = (hole + 1) & record_mask(sh); records[i].p; i = (i + 1) & record_mask(sh)) {
    size_t home = slot_of(records[i].p, sh->bits);
    /* i stays if its home lies cyclically in (hole, i] */
    if ((i > hole) ? (home > hole && home <= i) : (home > hole || home <= i)) continue;
    records[hole] = records[i];
    records[i].p = 0;
    hole = i;
  }
}

/* Adds (sign 1) or takes away (-1) r's estimate to its stack's tally of
 * shard sh, whose lock is held. */
static void weigh(stack_t *s, const shard_t *sh, const record_t *r, double sign) {
  double bytes = (double)r->crossings * period, objs = bytes / (double)hk_max(r->size, 1);
  tally_t *t = &s->tally[sh - shards];
  t->live_objs += sign * objs, t->live_bytes += sign * bytes;
  if (sign > 0) t->all_objs += objs, t->all_bytes += bytes;
  if (intervals) __atomic_fetch_add(&live_total, (int64_t)(sign * bytes), __ATOMIC_RELAXED);
}

static void dump_numbered(void);

/* hakmem's code, where it is a library of its own: frames there are
 * trimmed from a stack's top (calloc, realloc, the aligned calls and the
 * C++ operators reach the router through frames of their own).  Linked
 * into the program, it cannot be told from the program's code, and the
 * SKIP frames alone go. */
static uintptr_t own_lo, own_hi;

static int find_own(struct dl_phdr_info *info, size_t size, void *first) {
  uintptr_t self = (uintptr_t)hk_prof_init, lo = UINTPTR_MAX, hi = 0;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
    lo = hk_min(lo, info->dlpi_addr + ph->p_vaddr);
    hi = hk_max(hi, info->dlpi_addr + ph->p_vaddr + ph->p_memsz);
  }
  bool is_first = *(bool *)first;
  *(bool *)first = false;
  if (self < lo || self >= hi) return 0;
  if (!is_first) own_lo = lo, own_hi = hi;  /* the first object is the program */
  return 1;
}

/* The C library's walk of the stack, for the samples hk_unwind cannot take
 * (and to check it, under HAK_CHECKS); inlined, so that its frames line up
 * with hk_unwind's: pc[0] is a return into hk_prof_sample. */
static inline __attribute__((always_inline)) int libc_backtrace(void **pc, int max) {
  in_prof = true;
  int n = backtrace(pc, max);
  in_prof = false;
  return n;
}

static bool kept_any(unsigned cls) {
  for (unsigned i = 0; i < SHARDS; i++)
    if (__atomic_load_n(&kept[cls][i], __ATOMIC_RELAXED)) return true;
  return false;
}

/* The shard of a stand-in of class cls kept, locked, the stand-in taken
 * into *p; NULL if none is. */
static shard_t *kept_take(unsigned cls, void **p) {
  for (unsigned i = 0; i < SHARDS; i++) {
    if (!__atomic_load_n(&kept[cls][i], __ATOMIC_RELAXED)) continue;
    shard_lock(&shards[i]);
    if ((*p = kept[cls][i])) {
      __atomic_store_n(&kept[cls][i], NULL, __ATOMIC_RELAXED);
      return &shards[i];
    }
    shard_unlock(&shards[i]);
  }
  return NULL;
}

/* The stack is taken before any lock; a stand-in reused is taken once it
 * is known, so that it needs no putting back (its record, kept, is found). */
void *hk_prof_sample(void *p, size_t size, size_t stand_in, uint64_t crossings, bool flagged) {
  void *pc[DEPTH + SKIP];
  unsigned cls = stand_in ? hk_size_to_class(stand_in + HK_CANARY) : 0;
  bool reused = !p;
  if (reused && !kept_any(cls)) return NULL;
  if (!reused) __builtin_prefetch(record_hint(shard_of(p), p), 1);  /* a miss while the stack is walked */
  int n = (int)hk_unwind(pc, DEPTH + SKIP);
  if (!n) {  /* a frame whose rule the walker does not keep */
    n = libc_backtrace(pc, DEPTH + SKIP);
  } else if (HAK_CHECKS) {
    void *check[DEPTH + SKIP];
    int m = libc_backtrace(check, DEPTH + SKIP);
    for (int i = 1; i < n && i < m; i++) hk_assert(pc[i] == check[i], "heap profile: a stack differs from backtrace()'s");
  }
  int top = n > SKIP ? SKIP : n;
  while (top < n && (uintptr_t)pc[top] >= own_lo && (uintptr_t)pc[top] < own_hi) top++;
  stack_t *s = stack_of(pc + top, (unsigned)(n - top));
  shard_t *sh = !s ? NULL : reused ? kept_take(cls, &p) : shard_of(p);
  if (!sh) return NULL;
  if (!reused) shard_lock(sh);
  record_t *r = record_add(sh, (uintptr_t)p);  /* a kept stand-in's own */
  if (r) {
    if (!reused && !flagged) count_record((uintptr_t)p, 1);
    *r = (record_t){(uintptr_t)p, crossings, size, (uint32_t)(s - stacks), (uint32_t)stand_in, false};
    weigh(s, sh, r, 1);
  }
  shard_unlock(sh);
  if (r && intervals &&
      __atomic_load_n(&live_total, __ATOMIC_RELAXED) >= __atomic_load_n(&next_dump, __ATOMIC_RELAXED))
    dump_numbered();
  return r ? p : NULL;
}

size_t hk_prof_stand_in(const void *p, bool *freed) {
  *freed = false;
  if (!maybe_recorded(p)) return 0;
  shard_t *sh = shard_of(p);
  shard_lock(sh);
  record_t *r = record_at(sh, (uintptr_t)p);
  size_t usable = r->p ? r->stand_in : 0;
  *freed = usable && r->kept;
  shard_unlock(sh);
  return usable;
}

/* A huge block's record, out of the records while realloc moves the block:
 * the kernel may map another block at its old address as soon as mremap
 * returns, whose sample would find the old record there. */
_Static_assert(sizeof(record_t) <= sizeof(hk_prof_lifted_t), "hk_prof_lifted_t holds a record");
bool hk_prof_lift(const void *p, hk_prof_lifted_t *lifted) {
  if (!maybe_recorded(p)) return false;
  shard_t *sh = shard_of(p);
  shard_lock(sh);
  record_t *r = record_at(sh, (uintptr_t)p);
  bool found = r->p;
  if (found) {
    memcpy(lifted, r, sizeof *r);
    record_remove(sh, r);
    count_record((uintptr_t)p, -1);
  }
  shard_unlock(sh);
  return found;
}

void hk_prof_land(void *p, const hk_prof_lifted_t *lifted) {
  record_t moved;
  memcpy(&moved, lifted, sizeof moved);
  if (p) moved.p = (uintptr_t)p;
  shard_t *sh = shard_of((const void *)moved.p);
  shard_lock(sh);
  record_t *r = p ? record_add(sh, moved.p) : NULL;
  if (r) *r = moved, count_record(moved.p, 1);
  else weigh(&stacks[moved.stack], sh, &moved, -1);  /* none wanted, or no room: the sample is forgotten */
  shard_unlock(sh);
}

hk_prof_freed_t hk_prof_forget(void *p, bool flagged) {
  if (!flagged && !maybe_recorded(p)) return HK_PROF_UNSAMPLED;
  shard_t *sh = shard_of(p);
  __builtin_prefetch(record_hint(sh, p), 1);
  shard_lock(sh);
  record_t *r = record_at(sh, (uintptr_t)p);
  hk_prof_freed_t what = HK_PROF_UNSAMPLED;
  unsigned cls = r->p && r->stand_in ? hk_size_to_class(r->stand_in + HK_CANARY) : 0;
  if (r->p && r->kept) {
    what = HK_PROF_FREED_TWICE;
  } else if (r->p) {
    weigh(&stacks[r->stack], sh, r, -1);
    void **slot = &kept[cls][sh - shards];
    what = cls && !*slot ? HK_PROF_KEPT : HK_PROF_FORGOTTEN;
    if (what == HK_PROF_KEPT) {
      r->kept = true;
      __atomic_store_n(slot, p, __ATOMIC_RELAXED);
    } else {
      record_remove(sh, r);
      if (!flagged) count_record((uintptr_t)p, -1);
    }
  }
  shard_unlock(sh);
  return what;
}

/* ---- the profile's text ------------------------------------------------------- */
typedef struct out {
  int fd, error;  /* the first write's that failed, or 0 */
  size_t n;
  char buf[4096];
} out_t;

static void out_flush(out_t *o) {
  for (size_t done = 0; done < o->n && !o->error;) {
    ssize_t w = write(o->fd, o->buf + done, o->n - done);
    if (w > 0) done += (size_t)w;
    else if (w == 0 || errno != EINTR) o->error = w ? errno : EIO;
  }
  o->n = 0;
}

static void out_printf(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(out_t *o, const char *fmt, ...) {
  if (o->n > sizeof o->buf - 256) out_flush(o);
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(o->buf + o->n, sizeof o->buf - o->n, fmt, ap);
  va_end(ap);
  if (w > 0) o->n += hk_min((size_t)w, sizeof o->buf - o->n - 1);
}

/* The counts to write for estimated objs and bytes: pprof multiplies them
 * by 1 / (1 - exp(-average size / period)), which brings them back. */
static void counts(double objs, double bytes, uint64_t *c, uint64_t *b) {
  if (bytes < 0.5 || objs < 1e-9) {
    *c = *b = 0;
    return;
  }
  double avg = bytes / objs, x = objs * (1 - exp_neg(avg / period));
  *c = x < 1 ? 1 : (uint64_t)(x + 0.5);
  *b = (uint64_t)((double)*c * avg + 0.5);
}

/* A stack's estimates: its tallies' sum (the shards' locks held). */
static tally_t stack_sum(const stack_t *s) {
  tally_t sum = {0};
  for (unsigned i = 0; i < SHARDS; i++) {
    sum.live_objs += s->tally[i].live_objs, sum.live_bytes += s->tally[i].live_bytes;
    sum.all_objs += s->tally[i].all_objs, sum.all_bytes += s->tally[i].all_bytes;
  }
  return sum;
}

/* A stack's line: its live and all-time counts as pprof reads them. */
static void stack_counts(const stack_t *s, uint64_t c[4]) {
  tally_t sum = stack_sum(s);
  counts(sum.live_objs, sum.live_bytes, &c[0], &c[1]);
  counts(sum.all_objs, sum.all_bytes, &c[2], &c[3]);
}

/* Every shard's lock, which the counters' writers hold, in the one order. */
static void lock_shards(void) {
  for (unsigned i = 0; i < SHARDS; i++) shard_lock(&shards[i]);
}
static void unlock_shards(void) {
  for (unsigned i = SHARDS; i-- > 0;) shard_unlock(&shards[i]);
}

/* Writes the profile; the shards' locks are held.  The header's totals are
 * the sums of the lines, each unsampled at its own average size. */
static void write_profile(out_t *o) {
  uint64_t total[4] = {0, 0, 0, 0}, c[4];
  unsigned n = stacks_made();
  for (unsigned i = 0; i < n; i++) {
    stack_counts(&stacks[made[i]], c);
    for (int k = 0; k < 4; k++) total[k] += c[k];
  }
  out_printf(o, "heap profile: %lu: %lu [%lu: %lu] @ heap_v2/%lu\n", total[0], total[1], total[2], total[3],
             (unsigned long)period);
  for (unsigned i = 0; i < n; i++) {
    const stack_t *s = &stacks[made[i]];
    stack_counts(s, c);
    out_printf(o, "%lu: %lu [%lu: %lu] @", c[0], c[1], c[2], c[3]);
    for (unsigned f = 0; f < s->depth; f++) out_printf(o, " %p", s->pc[f]);
    out_printf(o, "\n");
  }
  out_printf(o, "\nMAPPED_LIBRARIES:\n");
  out_flush(o);
  int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (maps < 0) return;
  ssize_t r;
  while ((r = read(maps, o->buf, sizeof o->buf)) > 0 || (r < 0 && errno == EINTR)) {
    o->n = r > 0 ? (size_t)r : 0;
    out_flush(o);
  }
  close(maps);
}

HK_EXPORT int hak_prof_dump(const char *path) {
  if (!hk_prof_on) {
    errno = ENOENT;  /* no samples to write: profiling is off */
    return -1;
  }
  /* not cancelled at a write with every shard's lock held */
  int cancel;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
  out_t o = {.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)};
  int done = -1;
  if (o.fd >= 0) {
    lock_shards();
    write_profile(&o);
    unlock_shards();
    done = close(o.fd);
    if (o.error) errno = o.error, done = -1;  /* the profile is cut short */
  }
  pthread_setcancelstate(cancel, NULL);
  return done;
}

static pid_t prof_pid;  /* the process that read HAKMEM_PROF */

/* HAKMEM_PROF's file, FILE.N.heap for the Nth numbered one (n > 0); a
 * forked child's have its pid after FILE, so that its exit does not write
 * over its parent's profile. */
static void dump_to(unsigned n) {
  char path[4096], pid[24] = "";
  if (getpid() != prof_pid) snprintf(pid, sizeof pid, ".%d", (int)getpid());
  int len = n ? snprintf(path, sizeof path, "%s%s.%u.heap", (const char *)hk_opt.prof, pid, n)
              : snprintf(path, sizeof path, "%s%s", (const char *)hk_opt.prof, pid);
  bool fits = len >= 0 && (size_t)len < sizeof path;
  if (!fits || hak_prof_dump(path) != 0)
    hk_message("hakmem: heap profile not written to %.200s%s: %s\n", (const char *)hk_opt.prof, pid,
               fits ? strerror(errno) : "path too long");
}

/* HAKMEM_PROF_INTERVAL_MB: the live heap grew by the interval since the
 * last one (to be seen again under the lock: threads may cross it at once).
 * Written under the lock, so that profile N+1 never holds an earlier state
 * than profile N. */
static void dump_numbered(void) {
  int cancel;
  pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);  /* not at a write with the lock held */
  hk_lock(&dump_lock);
  int64_t live = __atomic_load_n(&live_total, __ATOMIC_RELAXED);
  unsigned n = live >= next_dump ? ++dumps : 0;
  if (n) __atomic_store_n(&next_dump, live + (int64_t)hk_opt.prof_interval_mb * 1048576, __ATOMIC_RELAXED);
  if (n) dump_to(n);
  hk_unlock(&dump_lock);
  pthread_setcancelstate(cancel, NULL);
}

/* ---- set-up, exit, fork --------------------------------------------------------- */
void hk_prof_init(void) {
  bool wanted = hk_opt.prof || hk_opt.prof_leaks || hk_option_from_env(&hk_opt.prof_sample);
  if (!wanted) return;
  if (!hk_opt.prof_sample) {
    hk_message("hakmem: heap profile off: HAKMEM_PROF_SAMPLE=0 samples nothing\n");
    return;
  }
  stacks = hk_os_map(STACKS * sizeof *stacks);
  bool mapped = stacks;
  for (unsigned i = 0; i < SHARDS; i++) {
    shards[i].bits = RECORD_BITS_FIRST;
    mapped = mapped && (shards[i].records = hk_os_map(sizeof *shards[i].records << RECORD_BITS_FIRST));
  }
  if (!mapped) {
    hk_message("hakmem: heap profile off: no memory for its tables\n");
    return;
  }
  period = (double)hk_opt.prof_sample;
  ln_table();
  prof_pid = getpid();
  bool first = true;
  dl_iterate_phdr(find_own, &first);
  intervals = hk_opt.prof && hk_opt.prof_interval_mb;
  next_dump = (int64_t)hk_opt.prof_interval_mb * 1048576;
  hk_prof_on = true;
}

/* The leak report: the stacks of the sampled blocks still live, most bytes
 * first, copied under the shards' locks and named after them (dladdr takes
 * the loader's lock, which a thread in dlopen may hold while it waits for a
 * shard's). */
static void report_leaks(void) {
  static stack_t top[LEAKS_SHOWN];
  tally_t sum[LEAKS_SHOWN];
  unsigned n = 0, last = 0;
  double shown = 1e300;
  lock_shards();
  /* in falling bytes, then in the order made: stacks of one sample each tie */
  for (unsigned all = stacks_made(); n < LEAKS_SHOWN; n++) {
    unsigned best = STACKS;
    for (unsigned i = 0; i < all; i++) {
      tally_t t = stack_sum(&stacks[made[i]]);
      double b = t.live_bytes;
      if (b >= 0.5 && (b < shown || (b == shown && i > last)) && (best == STACKS || b > sum[n].live_bytes))
        best = i, sum[n] = t;
    }
    if (best == STACKS) break;
    shown = sum[n].live_bytes, last = best;
    top[n] = stacks[made[best]];
  }
  unlock_shards();
  for (unsigned k = 0; k < n; k++) {
    const stack_t *best = &top[k];
    hk_message("hakmem: leak: about %.0f bytes in %.0f blocks not freed, allocated at:\n", sum[k].live_bytes,
               sum[k].live_objs < 1 ? 1 : sum[k].live_objs);
    for (unsigned f = 0; f < best->depth; f++) {
      Dl_info d;
      void *pc = (char *)best->pc[f] - 1;  /* in the call, not after it */
      if (dladdr(pc, &d) && d.dli_sname)
        hk_message("hakmem:   %p %s+%#lx (%s)\n", best->pc[f], d.dli_sname,
                   (unsigned long)((char *)pc - (char *)d.dli_saddr) + 1, d.dli_fname);
      else if (dladdr(pc, &d) && d.dli_fname)
        hk_message("hakmem:   %p %s+%#lx\n", best->pc[f], d.dli_fname,
                   (unsigned long)((char *)best->pc[f] - (char *)d.dli_fbase));
      else
        hk_message("hakmem:   %p\n", best->pc[f]);
    }
  }
  if (n)
    hk_message("hakmem: leak: frames without a name: write the profile (HAKMEM_PROF=FILE) and read it with "
               "google-pprof --text PROGRAM FILE\n");
}

void hk_prof_at_exit(void) {
  if (!hk_prof_on) return;
  if (hk_opt.prof) dump_to(0);
  if (hk_opt.prof_leaks) report_leaks();
}

/* Every lock of the profile's: none is taken within another.  The
 * unwinder's rules are made under a flag of its own, never waited for. */
void hk_prof_fork_lock(void) {
  hk_lock(&dump_lock);
  hk_lock(&stacks_lock);
  lock_shards();
}
void hk_prof_fork_unlock(bool child) {
  if (child) {
    pthread_mutex_init(&dump_lock, NULL);
    pthread_mutex_init(&stacks_lock, NULL);
    for (unsigned i = 0; i < SHARDS; i++) shards[i].busy = 0;
    hk_unwind_forked();
  } else {
    unlock_shards();
    hk_unlock(&stacks_lock);
    hk_unlock(&dump_lock);
  }
}
