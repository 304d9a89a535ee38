/* SPDX-License-Identifier: MIT */
/* The central cache: per size class, behind one lock, the slabs with blocks
 * no thread cache holds; in front, per CPU, transfer slots where thread
 * caches park and take whole batches in O(1), unwalked: a batch goes to a
 * thread on the CPU that freed it, its blocks still in that CPU's cache, and
 * threads on different CPUs share no lock.  A refill takes another CPU's
 * batch when its own has none, but a producer (never gave back blocks of
 * 1 KiB or less) takes only spare ones: borrowed batches mix both cores'
 * blocks in the same pages (half the speed: docs/DESIGN.md, Producers).
 * A CPU whose batches go to others walks them once, to note their lanes.
 * Large classes bypass it, but 32-256 KiB blocks sent back over a thread's
 * budget wait as spares under the class lock, sparing the SuperSlab's header
 * and arena lock (docs/DESIGN.md, Spare large blocks). */
#define _GNU_SOURCE
#include <sched.h>
#include "slab/slab.h"

/* A parked batch.  Its chain was written by the CPU that freed it: a walk
 * from another CPU waits for each link in turn, so the parking thread, which
 * has the blocks in its cache, notes where each of HK_LANES lanes starts
 * (every count / HK_LANES blocks) and the taking one fetches the lanes side
 * by side (docs/DESIGN.md, Lanes). */
#define HK_IN_ORDER_MIN 32  /* blocks pushed at a slab list's head that have a refill read the slab in address order */
#define HK_LANES 32
#define HK_LANE_MIN 4  /* blocks a lane must have to be worth noting */
#define HK_UNTAKEN_MAX 8  /* batches parked untaken past which scattered ones go home (hk_central_put) */
typedef struct hk_batch {
  void *head;
  unsigned count;
  const void *owner;            /* the thread cache that parked it */
  int32_t lane[HK_LANES - 1];   /* lane j + 1's first block, (block - head) / 16; 0: not noted */
} hk_batch_t;

/* A CPU's class slots: up to HK_TRANSFER_SLOTS batches, at most
 * HK_TRANSFER_LISTS full lists (room for 8 sent half a consumer's blocks via
 * the class lock: `prodcons 2000000 1024 1 1024 1024 2`, 13 M ops/s with 8,
 * 46 M with 16).  More slots than lists: many consumers per CPU park smaller
 * batches (freer_cap); with 16, 16 pairs on 2 CPUs ran 0.65 times as fast. */
typedef struct hk_transfer {
  pthread_mutex_t lock;
  unsigned n;              /* written under the lock, read without it as a hint (set_count) */
  bool active;             /* taken from or given to since the last purge tick */
  int8_t balance;          /* batches parked here against those threads on this CPU took (as n: a hint unlocked) */
  uint8_t untaken;         /* batches parked since one was last taken, up to HK_UNTAKEN_MAX (as n) */
  size_t parked;           /* blocks in the slots */
} __attribute__((aligned(HK_CACHELINE))) hk_transfer_t;

typedef struct hk_central {
  pthread_mutex_t lock;
  hk_slab_t *partial;      /* slabs with free or never-used blocks */
  unsigned nempty;         /* slabs on `partial` with every block home */
  bool active;             /* slabs taken from or given to since the last purge tick */
  hk_class_counts_t counts;  /* statistics (large classes: in large_counts; parked: in the slots) */
  void *spares;            /* large classes: blocks marked spare, linked, ending at HK_END */
  size_t nspares;          /* written under the lock, read without it as a hint */
} __attribute__((aligned(HK_CACHELINE))) hk_central_t;

#define HK_SMALL_CLASSES (HK_LARGE_MIN / 1024 + 48)  /* bounds HK_FIRST_LARGE_CLASS; checked at start */
static hk_central_t central[HK_NCLASS + 1] = {[0 ... HK_NCLASS] = {.lock = PTHREAD_MUTEX_INITIALIZER}};
static hk_transfer_t transfer[HK_CPU_SETS][HK_SMALL_CLASSES] = {
    [0 ... HK_CPU_SETS - 1] = {[0 ... HK_SMALL_CLASSES - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}}};
/* The slots, every class's at one depth together: touched only as filled.
 * One CPU's set is here; more are mapped at start, as many as CPUs. */
typedef hk_batch_t hk_slot_set_t[HK_TRANSFER_SLOTS][HK_SMALL_CLASSES];
static hk_slot_set_t first_set;
static hk_slot_set_t *batches = &first_set;
static unsigned ncpu_slots = 1;  /* sets of slots in use: one per CPU, up to HK_CPU_SETS */
/* Large classes' slab counts, kept without the class lock: statistics (relaxed). */
static struct {
  atomic_size_t slabs, slabs_made;
} large_counts[HK_NCLASS + 1];
static atomic_size_t spare_bytes;  /* in the spares of every large class; written under a class lock, read as a hint (relaxed) */
/* The classes that keep spares run from HK_FIRST_LARGE_CLASS to the last
 * below huge regions' (whose units are no SuperSlab's, behind no arena lock). */
#define for_spare_classes(c) for (unsigned c = HK_FIRST_LARGE_CLASS; c <= HK_NCLASS && !hk_class_in_regions(c); c++)

void hk_central_init(unsigned cpus) {
  if (HK_FIRST_LARGE_CLASS > HK_SMALL_CLASSES) hk_fatal("class table larger than the transfer slots", NULL);
  unsigned sets = hk_max(hk_min(cpus, HK_CPU_SETS), 1u);
  hk_slot_set_t *mapped = sets > 1 ? hk_os_map(sets * sizeof *batches) : NULL;
  if (mapped) {  /* else one set for all CPUs */
    batches = mapped;
    ncpu_slots = sets;
  }
}

unsigned hk_central_cpu_sets(void) { return ncpu_slots; }

/* Slot i of CPU set `set`'s slots of class cls. */
static hk_batch_t *slot_of(unsigned set, unsigned cls, unsigned i) { return &batches[set][i][cls]; }

/* Notes where b's lanes start: the chain's own links, walked by the thread
 * that parks it, whose cache has them, up to a block not marked free (the
 * pops say which).  Blocks lie 16-byte aligned (every class a multiple of
 * 16); a lane too far from the head for 32 bits is left to the pops.  A
 * chain in address order has lanes too: the taking CPU's prefetcher did not
 * run ahead of its pops (prodcons_batch, CPUs far: 1.095x with them). */
static void note_lanes(hk_batch_t *b) {
  unsigned stride = b->count / HK_LANES;
  if (stride < HK_LANE_MIN) return;
  const uint8_t *p = b->head;
  for (unsigned j = 0; j < HK_LANES - 1; j++) {
    for (unsigned i = 0; i < stride; i++) {
      if (!hk_is_free(p)) return;
      p = hk_next(p);
    }
    ptrdiff_t units = (p - (const uint8_t *)b->head) / 16;
    if (units == (int32_t)units) b->lane[j] = (int32_t)units;
  }
}

/* Whether a chain of blocks of `size` bytes marked free is scattered: of
 * its first HK_SCATTER_LINKS links, more than half lead further than a page
 * and four blocks, whichever is more (a random order's: 85-90 %).  A chain
 * in the order its blocks were carved, or freed in turn, steps a block at a
 * time, and a page of fresh blocks at a time where two threads take turns
 * at a slab (a quarter of the links, for blocks of 1 KiB). */
#define HK_SCATTER_LINKS 16
static bool scattered(const void *chain, size_t size) {
  const uintptr_t near = hk_max((uintptr_t)4096, 4 * size);
  unsigned far = 0;
  const void *p = chain;
  for (unsigned i = 0; i < HK_SCATTER_LINKS && p != HK_END && hk_is_free(p); i++) {
    const void *n = hk_next(p);
    far += n != HK_END && (uintptr_t)n - (uintptr_t)p + near > 2 * near;  /* |n - p| > near */
    p = n;
  }
  return far > HK_SCATTER_LINKS / 2;
}

/* Brings a batch just taken into this CPU's cache, its lanes side by side,
 * each stopping at the next one's start or at a block not marked free (the
 * pops then say which). */
static void fetch_lanes(const hk_batch_t *b) {
  if (!b->lane[0]) return;  /* none noted */
  unsigned stride = b->count / HK_LANES;
  const void *at[HK_LANES] = {b->head};
  for (unsigned j = 1; j < HK_LANES; j++) at[j] = b->lane[j - 1] ? (const uint8_t *)b->head + (ptrdiff_t)b->lane[j - 1] * 16 : NULL;
  for (unsigned i = 0; i < stride; i++)
    for (unsigned j = 0; j < HK_LANES; j++) {
      const void *p = at[j];
      if (!p) continue;
      __builtin_prefetch(p, 1, 3);
      at[j] = hk_is_free(p) ? hk_next(p) : NULL;
    }
  __asm__ volatile("" : : "r"(at) : "memory");  /* the loads are the point: kept */
}

/* The most blocks a CPU parks of a class: HK_TRANSFER_LISTS full thread
 * cache lists (lean mode: HK_TRANSFER_SLOTS_LEAN batches of any size). */
static size_t parked_max(unsigned cls) {
  return (size_t)HK_TRANSFER_LISTS * (size_t)(hk_classes[cls].cap + 1);
}

/* The slots of this CPU: sched_getcpu reads the kernel's rseq area, a load. */
static unsigned my_slots(void) {
  int cpu = sched_getcpu();
  return cpu < 0 ? 0 : (unsigned)cpu % ncpu_slots;
}

static bool slab_is_full(const hk_slab_t *s) { return s->free == NULL && s->carved == s->capacity; }
static bool slab_is_empty(const hk_slab_t *s) { return s->nfree == s->carved; }

/* Links n fresh blocks of `size` bytes from `first` before `head`, in address
 * order (hardened: an order not to be foretold); returns the new head. */
static void *link_fresh(uint8_t *first, uint32_t size, unsigned n, void *head) {
#if HAK_HARDENED
  static __thread uint64_t rng;
  uint16_t order[HK_PAGE_SIZE / 16];
  if (!rng) rng = hk_fast.link_key ^ (uintptr_t)&rng;
  for (unsigned i = 0; i < n; i++) {  /* inside-out Fisher-Yates, xorshift64 */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    unsigned j = (unsigned)(rng % (i + 1));
    order[i] = order[j];
    order[j] = (uint16_t)i;
  }
  for (unsigned i = 0; i < n; i++) {
    void *b = first + (size_t)order[i] * size;
    hk_mark_free(b);
    hk_set_next(b, head);
    head = b;
  }
  return head;
#else
  uint8_t *b = first;
  const uint64_t mark = hk_marks().free;  /* the stores might alias the key */
  for (unsigned i = 1; i < n; i++, b += size) {
    hk_set_mark(b, mark);
    hk_set_next(b, b + size);
  }
  hk_set_mark(b, mark);
  hk_set_next(b, head);
  return first;
#endif
}

/* A slab whose marks disagree with its list: names the block to blame.  A
 * walk of the list marks each block seen (neither home nor free), so that
 * one on it twice (pushed home twice: the list then runs in a circle) is
 * found at its second visit, and one not marked home (freed again while
 * there) at its first; else the list's count is wrong, or `odd`, a carved
 * block not marked home while the list holds all that should be. */
static __attribute__((noreturn, cold)) void slab_list_broken(const hk_slab_t *s, const void *odd) {
  const uint64_t seen = ~hk_fast.free_key ^ 1;
  unsigned n = 0;
  for (void *b = s->free; b; b = hk_next(b), n++) {
    if (n == s->nfree || !hk_is_home(b)) hk_misuse_freed(b, s->cls);
    ((uint64_t *)b)[1] = seen;
  }
  if (n == s->nfree && odd) hk_misuse_freed(odd, s->cls);
  hk_fatal("free(): double free or corrupted block in a slab", s->start);
}

/* Takes up to `want` of a slab's returned blocks onto *chain, reading its
 * carved blocks in address order, and lays the rest of its list in address
 * order too.  For a list that starts with many blocks pushed in the order
 * they were freed: a structure freed in a random order leaves each slab's
 * list a random walk of its 64 KiB, which waits for a miss at every link
 * once the blocks have left the caches, where the prefetcher follows reads
 * in address order (docs/DESIGN.md, Going home).  Blocks are told by their
 * marks, first counted: a mark the program forged in a live block, or a
 * home block freed again, shows as a count other than the list's.  The live
 * blocks' words are the program's, read as it may write them (unseen by
 * ThreadSanitizer: the helpers are inlined): no value of theirs but the
 * home mark is taken. */
__attribute__((no_sanitize("thread"))) static unsigned slab_take_in_order(hk_slab_t *s, unsigned want, void **chain) {
  const size_t size = s->block_size;
  uint8_t *const end = s->start + (size_t)s->carved * size;
  const hk_marks_t mark = hk_marks();  /* the stores into blocks might alias the key */
  unsigned home = 0;
  for (const uint8_t *b = s->start; b < end; b += size) home += hk_mark_of(b) == mark.home;
  if (hk_unlikely(home != s->nfree)) slab_list_broken(s, NULL);
  void *head = *chain, *list = NULL, *last = NULL;
  unsigned n = 0, kept = 0;
  for (uint8_t *b = s->start; b < end; b += size) {
    if (hk_mark_of(b) != mark.home) continue;
    if (n < want) {
      hk_set_mark(b, mark.free);
      hk_set_next(b, head);
      head = b;
      n++;
    } else {
      if (last) hk_set_next(last, b);
      else list = b;
      last = b;
      kept++;
    }
  }
  if (last) hk_set_next(last, NULL);
  /* a block freed again meanwhile (another thread's misuse); the list,
   * relinked already, cannot name it */
  if (hk_unlikely(n + kept != home)) hk_fatal("free(): double free or corrupted block in a slab", s->start);
  s->free = list;
  s->pushed = 0;
  s->nfree = (uint16_t)(s->nfree - n);
  central[s->cls].counts.slab_free -= n;
  *chain = head;
  return n;
}

/* Takes up to `want` blocks from one slab onto *chain: returned blocks first,
 * then fresh ones, linked in address order. */
static unsigned slab_take(hk_slab_t *s, unsigned want, void **chain) {
  unsigned n = 0;
  if (!HAK_HARDENED && s->pushed >= hk_max(want / 2, HK_IN_ORDER_MIN))
    n = slab_take_in_order(s, want, chain);  /* hardened: the carve's order stays unforetold */
  /* the list's head in a local: the stores into blocks might alias it */
  void *head = *chain, *b = s->free;
  const hk_marks_t mark = hk_marks();
  const unsigned before = n;
  for (; n < want && b; n++) {
    if (hk_unlikely(hk_mark_of(b) != mark.home)) hk_misuse_freed(b, s->cls);  /* freed again while home */
    hk_set_mark(b, mark.free);
    void *next = hk_next(b);
    hk_set_next(b, head);
    head = b;
    b = next;
  }
  s->free = b;
  const unsigned popped = n - before;
  hk_assert(popped <= s->nfree, "slab's free count below its free list");
  s->nfree = (uint16_t)(s->nfree - popped);
  s->pushed = (uint16_t)(s->pushed - hk_min((unsigned)s->pushed, popped));  /* the pops took the pushed head */
  central[s->cls].counts.slab_free -= popped;
  /* Fresh blocks: at most a page's worth per refill, so memory is touched only
   * as a class really uses it. */
  unsigned page_blocks = hk_max(4096u / s->block_size, 1u);
  unsigned fresh = hk_min(hk_min(want - n, page_blocks), (unsigned)(s->capacity - s->carved));
  if (fresh) {
    uint8_t *first = s->start + (size_t)s->carved * s->block_size;
    if (s->fresh) hk_slab_populate(s, first, (size_t)fresh * s->block_size);
    head = link_fresh(first, s->block_size, fresh, head);
    __atomic_store_n(&s->carved, (uint16_t)(s->carved + fresh), __ATOMIC_RELAXED);  /* realloc reads it unlocked */
    n += fresh;
  }
  hk_assert(s->nfree <= s->carved && s->carved <= s->capacity, "slab counts out of range");
  *chain = head;
  return n;
}

/* The length of a chain, counted up to `limit` (a corrupted chain may be a
 * cycle) or to a NULL link (a write of zeros into a freed block). */
unsigned hk_chain_length(const void *chain, unsigned limit) {
  unsigned n = 0;
  for (; chain && chain != HK_END && n < limit; chain = hk_next(chain)) n++;
  return n;
}

static void set_count(hk_transfer_t *t, unsigned n) { __atomic_store_n(&t->n, n, __ATOMIC_RELAXED); }

/* A set of slots' balance, within ±HK_BALANCE_LIMIT: above 0 while the CPU
 * parks more than half again as many batches as its threads take (spare). */
#define HK_BALANCE_PARK 2
#define HK_BALANCE_TAKE 3
#define HK_BALANCE_LIMIT 8
#define HK_PRODUCER_MAX 1024  /* block sizes whose producers keep to their CPU */

/* Moves a set of slots' balance by `by`, within ±HK_BALANCE_LIMIT (under its
 * lock; read without it as a hint, hk_central_put). */
static void move_balance(hk_transfer_t *t, int by) {
  int b = hk_max(hk_min(t->balance + by, HK_BALANCE_LIMIT), -HK_BALANCE_LIMIT);
  __atomic_store_n(&t->balance, (int8_t)b, __ATOMIC_RELAXED);
}

/* Pops the newest batch parked in CPU set `set`'s slots of class cls, if
 * any; `apart`: another CPU's, to a producer of small blocks, which takes
 * only spares (balance above 0, or more than half the blocks it may). */
static bool transfer_pop(unsigned set, unsigned cls, hk_batch_t *b, bool local, bool apart) {
  hk_transfer_t *t = &transfer[set][cls];
  if (__atomic_load_n(&t->n, __ATOMIC_RELAXED) == 0) return false;  /* a hint: checked again under the lock */
  hk_lock(&t->lock);
  bool got = t->n != 0 && (!apart || t->balance > 0 || t->parked > parked_max(cls) / 2);
  if (got && local) move_balance(t, -HK_BALANCE_TAKE);
  if (got) {  /* a producer refused another CPU's batches leaves them idle: purged at the tick */
    __atomic_store_n(&t->untaken, 0, __ATOMIC_RELAXED);
    *b = *slot_of(set, cls, t->n - 1);
    set_count(t, t->n - 1);
    hk_assert(t->parked >= b->count, "parked count below a batch");
    t->parked -= b->count;
    t->active = true;
  }
  hk_unlock(&t->lock);
  return got;
}

/* A spare of large class cls, or NULL; its mark checked and cleared under the
 * lock: a block twice among the spares goes out once, then found unmarked. */
static void *take_spare(unsigned cls) {
  hk_central_t *c = &central[cls];
  if (!__atomic_load_n(&c->nspares, __ATOMIC_RELAXED)) return NULL;  /* a hint: checked again under the lock */
  hk_lock(&c->lock);
  void *b = c->nspares ? c->spares : NULL;
  if (b) {
    if (hk_unlikely(!hk_is_spare(b))) hk_misuse_freed(b, cls);
    c->spares = hk_next(b);
    hk_block_out(b, cls);
    __atomic_store_n(&c->nspares, c->nspares - 1, __ATOMIC_RELAXED);
    atomic_fetch_sub_explicit(&spare_bytes, hk_classes[cls].size, memory_order_relaxed);
    c->active = true;
  }
  hk_unlock(&c->lock);
  return b;
}

static bool purge_spares(unsigned cls, int mode);

/* Spares never make the process take memory it lacked: while any are kept, a
 * large block goes on free units still resident only, a small class's slab
 * (a page of it written at a time) on free units of the SuperSlabs mapped,
 * and if it finds none, the spares go back first, all, and it goes where
 * they were (docs/DESIGN.md, Spare large blocks).  Called with at most a
 * small class's lock held (service/init.c: the lock order). */
static unsigned spares_reach(unsigned reach) {
  return atomic_load_explicit(&spare_bytes, memory_order_relaxed) ? reach : HK_NEW_ANY;
}
static void spares_return(void) { for_spare_classes(c) purge_spares(c, HK_PURGE_ALL); }

/* A spare, else a new block. */
void *hk_central_take_large(unsigned cls, unsigned arena, size_t size, bool *zero) {
  void *p;
  if ((p = take_spare(cls))) {
    *zero = false;
    return p;
  }
  unsigned reach = spares_reach(HK_NEW_WARM);
  if (!(p = hk_large_take(cls, arena, reach, size, zero)) && reach != HK_NEW_ANY) {
    spares_return();
    p = hk_large_take(cls, arena, HK_NEW_ANY, size, zero);
  }
  if (p) {
    atomic_fetch_add_explicit(&large_counts[cls].slabs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&large_counts[cls].slabs_made, 1, memory_order_relaxed);
  }
  return p;
}

unsigned hk_central_take(unsigned cls, unsigned arena, unsigned want, void **chain, const void **parker, bool producer) {
  hk_assert(!hk_class_is_large(cls), "a large class in the central cache");
  *parker = NULL;
  /* This CPU's batches first, then any other's, before the slabs. */
  unsigned mine = my_slots();
  bool keep_apart = producer && hk_classes[cls].size <= HK_PRODUCER_MAX;
  for (unsigned i = 0; i < ncpu_slots; i++) {
    hk_batch_t b;
    if (transfer_pop((mine + i) % ncpu_slots, cls, &b, i == 0, i != 0 && keep_apart)) {
      fetch_lanes(&b);  /* lanes noted: the parker meant it for another CPU */
      *chain = b.head;
      *parker = b.owner;
      return b.count;
    }
  }
  hk_central_t *c = &central[cls];
  hk_lock(&c->lock);
  c->active = true;
  void *head = HK_END;
  unsigned n = 0;
  while (n < want) {
    hk_slab_t *s = c->partial;
    if (!s) {
      bool zero;  /* blocks are marked as they are carved */
      unsigned kind = c->counts.slabs ? HK_SS_DENSE : HK_SS_SPARSE, reach = spares_reach(HK_NEW_MAPPED);
      if (!(s = hk_slab_new(cls, arena, kind, reach, &zero)) && reach != HK_NEW_ANY) {
        spares_return();
        s = hk_slab_new(cls, arena, kind, HK_NEW_ANY, &zero);
      }
      if (!s) break;
      hk_list_push(&c->partial, s);
      c->nempty++;
      c->counts.slabs++;
      c->counts.slabs_made++;
    }
    if (slab_is_empty(s)) c->nempty--;
    unsigned got = slab_take(s, want - n, &head);
    c->counts.out += got;
    n += got;
    if (slab_is_full(s)) hk_list_remove(&c->partial, s);
    else if (!s->free) break;  /* stopped at its page of fresh blocks: enough for now */
  }
  hk_unlock(&c->lock);
  *chain = head;
  return n;
}

/* The block of an emptied slab not home: named, or the one home twice. */
static __attribute__((noreturn, cold)) void not_all_home(const hk_slab_t *s) {
  const uint8_t *b = s->start;
  for (unsigned i = 0; i < s->carved; i++, b += s->block_size)
    if (!hk_is_home(b)) {
      if (hk_is_free(b)) hk_misuse_freed(b, s->cls);  /* freed again, and on a thread's list */
      slab_list_broken(s, b);                         /* a live block: find the one home twice */
    }
  hk_fatal("free(): double free or corrupted block in a slab", s->start);
}

/* Before an empty slab goes back to its SuperSlab, every block it carved
 * must be home: one freed again after it went home is marked free (on a
 * thread's list), and one pushed home twice made the count reach `carved`
 * with another still out (marked 0 or written by the program); giving the
 * slab back would hand a live block out again.  Read in address order, which
 * the prefetcher follows: the list's order is the frees', and a walk of it
 * waits for each link in turn (a structure freed in a random order: a miss
 * a block).  The list goes with the slab; the hardened build walks it too,
 * checking each link as it follows it. */
static void expect_all_home(const hk_slab_t *s) {
  const size_t size = s->block_size;
  const uint8_t *b = s->start, *const end = b + (size_t)s->carved * size;
  const uint64_t home = hk_marks().home;
  /* the bits where some mark differs, four blocks a step: one test for
   * all (a test and a reload of the size a block took 7 instructions) */
  uint64_t odd = 0;
  for (; b + 3 * size < end; b += 4 * size)
    odd |= (hk_mark_of(b) ^ home) | (hk_mark_of(b + size) ^ home) | (hk_mark_of(b + 2 * size) ^ home) |
           (hk_mark_of(b + 3 * size) ^ home);
  for (; b < end; b += size) odd |= hk_mark_of(b) ^ home;
  if (hk_unlikely(odd)) not_all_home(s);
  if (HAK_HARDENED && hk_chain_length(s->free, s->nfree + 1u) != s->nfree) slab_list_broken(s, NULL);
}

/* Gives an empty slab back to its SuperSlab. */
static void release(hk_central_t *c, hk_slab_t *s) {
  expect_all_home(s);
  c->counts.slab_free -= s->nfree;
  c->counts.slabs--;
  hk_slab_release(s);
}

/* A chain's block p in slab s's units but not one of its carved blocks. */
static __attribute__((noreturn, cold)) void not_carved(const hk_slab_t *s, const void *p) {
  size_t at = (size_t)((const uint8_t *)p - s->start);
  /* a block boundary the slab has not carved yet: never handed out */
  if (at < (size_t)s->capacity * s->block_size) hk_fatal("free(): invalid pointer", p);
  hk_corrupted(p);  /* a link into the slab's units outside its blocks (written over after its free) */
}

/* Returns a chain's blocks to their slabs, a run of one slab's at a time
 * (a thread's blocks are freed much as they were carved: a whole structure
 * freed sends runs of tens).  A slab whose blocks are all home is given back
 * to its SuperSlab unless it is the class's only empty slab and `keep`. */
static void put_chain(hk_central_t *c, unsigned cls, void *chain, bool keep) {
  size_t home = 0;
  const hk_marks_t mark = hk_marks();
  while (chain != HK_END) {
    hk_slab_t *s = hk_slab_of(chain);
    hk_opaque(s);  /* else rebuilt from its SuperSlab and index at each use: 5 % more instructions */
    if (hk_unlikely(s->cls != cls)) hk_fatal("free(): double free or corrupted block", chain);
    /* read once, and written once after: the loop's stores into blocks
     * might alias the slab's (slab_is_full and slab_is_empty, asked after
     * them, read the fields again: 4.8 % more instructions where every
     * block is a run of its own) */
    const uint8_t *start = s->start;
    const size_t carved = (size_t)s->carved * s->block_size;
    const unsigned had = s->nfree;  /* 0: the list is empty */
    void *head = s->free;
    unsigned got = 0;
    /* A run goes on while the blocks are carved ones of this slab: one
     * past them is another slab's, or is the next run's first, checked. */
    size_t at = (size_t)((uint8_t *)chain - start);
    if (hk_unlikely(at >= carved)) not_carved(s, chain);
    do {
      void *b = chain;
      /* on a list twice, one copy handed out; a cycle too, whose second
       * visit finds the block marked home */
      if (hk_unlikely(hk_mark_of(b) != mark.free)) hk_misuse_freed(b, cls);
#if HAK_CHECKS
      if (at % s->block_size != 0) hk_fatal("free(): pointer inside a block", b);
#endif
      chain = hk_next(b);
      hk_set_mark(b, mark.home);
      hk_set_next(b, head);
      head = b;
      got++;
    } while (chain != HK_END && (at = (size_t)((uint8_t *)chain - start)) < carved);
    const unsigned n = had + got, most = s->carved;
    /* a home block freed again: more blocks home than carved */
    if (hk_unlikely(n > most)) hk_fatal("free(): double free or corrupted block", head);
    if (!had && most == s->capacity) hk_list_push(&c->partial, s);  /* it was full */
    s->free = head;
    s->nfree = (uint16_t)n;
    s->pushed = (uint16_t)(s->pushed + got);  /* at most nfree, as it was before */
    home += got;
    if (n == most) {  /* every block home */
      if (c->nempty == 0 && keep) {
        c->nempty = 1;
        hk_purge_note();  /* kept resident: gone if the class goes idle */
      } else {
        hk_list_remove(&c->partial, s);
        release(c, s);
      }
    }
  }
  c->counts.out -= home;
  c->counts.slab_free += home;
}

/* Gives count large blocks marked free back to their SuperSlabs or huge
 * regions, all marked home first: one on it twice is found before reuse. */
static void release_large(unsigned cls, void *chain, size_t count) {
  for (void *b = chain; b != HK_END; b = hk_next(b)) {
    hk_expect_free(b, cls);
    hk_mark_home(b);
  }
  hk_large_release(cls, chain);
  atomic_fetch_sub_explicit(&large_counts[cls].slabs, count, memory_order_relaxed);
}

/* Keeps a chain of count blocks marked free as spares if within the bound,
 * each marked spare, so one on it twice shows the second time.  spare_bytes
 * changes only under a class lock: fork (holding all) keeps it true; the
 * bytes are taken from the bound by compare-and-swap, as two classes' locks
 * may let two chains in at once. */
static bool keep_spares(unsigned cls, void *chain, unsigned count) {
  if (hk_class_in_regions(cls)) return false;
  size_t bound = hk_opt.mem_lean ? 0 : hk_opt.large_cache / 4;
  size_t bytes = (size_t)count * hk_classes[cls].size;
  if (atomic_load_explicit(&spare_bytes, memory_order_relaxed) + bytes > bound) return false;  /* no lock to learn it */
  hk_central_t *c = &central[cls];
  hk_lock(&c->lock);
  size_t kept = atomic_load_explicit(&spare_bytes, memory_order_relaxed);
  bool fits;
  while ((fits = kept + bytes <= bound) && !atomic_compare_exchange_weak_explicit(&spare_bytes, &kept, kept + bytes,
                                                                                  memory_order_relaxed,
                                                                                  memory_order_relaxed)) {
  }
  if (fits) {
    void *last = chain;
    for (void *b = chain; b != HK_END; last = b, b = hk_next(b)) {
      hk_expect_free(b, cls);
      hk_mark_spare(b);
    }
    hk_set_next(last, c->nspares ? c->spares : HK_END);
    c->spares = chain;
    __atomic_store_n(&c->nspares, c->nspares + count, __ATOMIC_RELAXED);
    c->active = true;
  }
  hk_unlock(&c->lock);
  if (fits) hk_purge_note();  /* spares go back if the class goes idle */
  return fits;
}

bool hk_central_put(unsigned cls, void *chain, unsigned count, const void *owner) {
  if (hk_class_is_large(cls)) {
    if (!keep_spares(cls, chain, count)) release_large(cls, chain, count);
    return false;
  }
  hk_assert(hk_chain_length(chain, count + 1) == count, "batch count differs from its chain");
  /* Each parked block keeps its slab resident: lean mode parks fewer. */
  unsigned set = my_slots();
  hk_transfer_t *t = &transfer[set][cls];
  /* Full slots (a hint, read unlocked) send the blocks home unlocked: a
   * program freeing a structure of more blocks than they hold would take
   * the lock for nothing at every batch past them.  Refused so, they are
   * not marked active: a purge tick sends home what nobody took. */
  unsigned slots = hk_opt.mem_lean ? HK_TRANSFER_SLOTS_LEAN : HK_TRANSFER_SLOTS;
  bool parked = __atomic_load_n(&t->n, __ATOMIC_RELAXED) < slots;
  hk_batch_t batch = {.head = chain, .count = count, .owner = owner};
  if (parked) {
    /* Lanes serve threads on other CPUs, which take this CPU's spare batches
     * (balance above 0), and batches that wait behind others (two parked
     * already), whose blocks have left the L1 when a thread here takes them;
     * both counts hints read unlocked.  A batch taken soon by a thread here is
     * in its cache, and a walk would cost (up to 23 cycles a block).  A
     * scattered batch behind HK_UNTAKEN_MAX that nobody took goes home: a
     * structure freed in a random order and built again came back from the
     * slots cold, a miss a block, where its slabs give it in address order
     * (docs/DESIGN.md, Going home); not in the hardened build, whose slabs
     * keep their lists' order. */
    parked = HAK_HARDENED || __atomic_load_n(&t->untaken, __ATOMIC_RELAXED) < HK_UNTAKEN_MAX ||
             !scattered(chain, hk_classes[cls].size);
    if (parked && (__atomic_load_n(&t->balance, __ATOMIC_RELAXED) > 0 || __atomic_load_n(&t->n, __ATOMIC_RELAXED) >= 2))
      note_lanes(&batch);
  }
  if (parked) {
    hk_lock(&t->lock);
    t->active = true;
    parked = t->n < slots && (hk_opt.mem_lean || t->parked + count <= parked_max(cls));
    if (parked) {
      *slot_of(set, cls, t->n) = batch;
      move_balance(t, HK_BALANCE_PARK);
      set_count(t, t->n + 1);
      t->parked += count;
      __atomic_store_n(&t->untaken, (uint8_t)hk_min(t->untaken + 1, HK_UNTAKEN_MAX), __ATOMIC_RELAXED);
    }
    hk_unlock(&t->lock);
  }
  if (parked) {
    hk_purge_note();  /* parked blocks go home if the class goes idle */
    return true;
  }
  hk_central_t *c = &central[cls];
  hk_lock(&c->lock);
  c->active = true;
  put_chain(c, cls, chain, true);
  hk_unlock(&c->lock);
  return false;
}

/* Sends each idle set of slots' batches (idle a purge epoch; any, unless
 * HK_PURGE_DUE) back to their slabs, then the class's empty slabs, the kept
 * one too, if its slabs were idle too.  True if some wait for a later tick. */
static bool purge_class(unsigned cls, int mode) {
  hk_central_t *c = &central[cls];
  bool pending = false;
  for (unsigned i = 0; i < ncpu_slots; i++) {
    hk_transfer_t *t = &transfer[i][cls];
    void *out[HK_TRANSFER_SLOTS];  /* the batches' chains */
    unsigned n = 0;
    hk_lock(&t->lock);
    if (mode == HK_PURGE_DUE && t->active) {
      t->active = false;
      pending |= t->n != 0;
    } else {
      n = t->n;
      for (unsigned k = 0; k < n; k++) out[k] = slot_of(i, cls, k)->head;
      set_count(t, 0);
      t->parked = 0;
      __atomic_store_n(&t->untaken, 0, __ATOMIC_RELAXED);
    }
    hk_unlock(&t->lock);
    if (n == 0) continue;
    hk_lock(&c->lock);
    while (n) put_chain(c, cls, out[--n], mode == HK_PURGE_DUE);  /* the kept slab: below */
    hk_unlock(&c->lock);
  }
  hk_lock(&c->lock);
  if (mode == HK_PURGE_DUE && c->active) {
    c->active = false;
    pending |= c->nempty != 0;
  } else {
    for (hk_slab_t *s = c->partial, *next; s && c->nempty; s = next) {
      next = s->next;
      if (!slab_is_empty(s)) continue;
      hk_list_remove(&c->partial, s);
      release(c, s);
      c->nempty--;
    }
  }
  hk_unlock(&c->lock);
  return pending;
}

/* Returns a large class's spares if idle a purge epoch (always, unless
 * HK_PURGE_DUE); true if some wait.  The walk checks and frees each, ending
 * at the count: a spare freed again (its link a thread list's) shows first. */
static bool purge_spares(unsigned cls, int mode) {
  hk_central_t *c = &central[cls];
  /* Under the lock, never skipped on an unlocked count: the tick's clear of
   * hk_purge_pending and a parker's note after its unlock would each miss
   * the other's store on arm64, leaving spares resident until a later note. */
  hk_lock(&c->lock);
  size_t n = c->nspares;
  void *chain = c->spares;
  bool keep = mode == HK_PURGE_DUE && c->active;
  c->active = false;
  if (!keep && n) {
    void *b = chain;
    for (size_t i = 0; i < n; i++, b = hk_next(b)) {
      if (hk_unlikely(!hk_is_spare(b))) hk_misuse_freed(b, cls);
      hk_mark_free(b);
    }
    if (b != HK_END) hk_fatal("spare blocks: the list runs on past its count", b);
    __atomic_store_n(&c->nspares, 0, __ATOMIC_RELAXED);
    atomic_fetch_sub_explicit(&spare_bytes, n * hk_classes[cls].size, memory_order_relaxed);
  }
  hk_unlock(&c->lock);
  if (keep || n == 0) return keep && n;
  release_large(cls, chain, n);
  return false;
}

void hk_central_purge(int mode) {
  bool pending = false;
  for (unsigned cls = 1; cls < HK_FIRST_LARGE_CLASS; cls++) pending |= purge_class(cls, mode);
  for_spare_classes(cls) pending |= purge_spares(cls, mode);
  if (pending) hk_purge_note();
}

void hk_central_counts(unsigned cls, hk_class_counts_t *out) {
  if (hk_class_is_large(cls)) {
    size_t slabs = atomic_load_explicit(&large_counts[cls].slabs, memory_order_relaxed);
    *out = (hk_class_counts_t){.out = slabs, .slabs = slabs, .parked = __atomic_load_n(&central[cls].nspares, __ATOMIC_RELAXED),
                               .slabs_made = atomic_load_explicit(&large_counts[cls].slabs_made, memory_order_relaxed)};
    return;
  }
  hk_lock(&central[cls].lock);
  *out = central[cls].counts;
  hk_unlock(&central[cls].lock);
  for (unsigned i = 0; i < ncpu_slots; i++) {
    hk_lock(&transfer[i][cls].lock);
    out->parked += transfer[i][cls].parked;
    hk_unlock(&transfer[i][cls].lock);
  }
}

/* One slab of class cls on the class's list: its free blocks are its own,
 * at block boundaries, as many as it counts.  Returns them. */
static unsigned check_slab(const hk_slab_t *s, unsigned cls) {
  if (s->cls != cls || s->nfree > s->carved || s->carved > s->capacity || s->pushed > s->nfree)
    hk_fatal("heap check: slab counts", s->start);
  unsigned n = 0;
  for (const void *b = s->free; b; b = hk_next(b), n++) {
    uintptr_t off = (uintptr_t)b - (uintptr_t)s->start;  /* wraps above the slab if b is below it */
    if (off >= (uintptr_t)s->carved * s->block_size || off % s->block_size)
      hk_fatal("heap check: a slab's free list leaves it", b);
    if (!hk_is_home(b)) hk_fatal("heap check: a slab's free block not marked home", b);
  }
  if (n != s->nfree) hk_fatal("heap check: a slab's free count differs from its list", s->start);
  return n;
}

/* Walks every small class's slabs, every CPU's parked batches and the large
 * classes' spares and checks their counts; returns the blocks walked. */
size_t hk_central_check(void) {
  size_t walked = 0;
  for (unsigned cls = 1; cls < HK_FIRST_LARGE_CLASS; cls++) {
    hk_central_t *c = &central[cls];
    hk_lock(&c->lock);
    size_t slab_free = 0;
    unsigned nempty = 0;
    for (const hk_slab_t *s = c->partial; s; s = s->next) {
      slab_free += check_slab(s, cls);
      nempty += slab_is_empty(s);
    }
    if (slab_free != c->counts.slab_free || nempty != c->nempty) hk_fatal("heap check: class counts", NULL);
    hk_unlock(&c->lock);
    walked += slab_free;
    for (unsigned i = 0; i < ncpu_slots; i++) {
      hk_transfer_t *t = &transfer[i][cls];
      hk_lock(&t->lock);
      if (t->n > HK_TRANSFER_SLOTS) hk_fatal("heap check: parked batches beyond the slots", NULL);
      size_t parked = 0;
      for (unsigned k = 0; k < t->n; k++) {
        const hk_batch_t *batch = slot_of(i, cls, k);
        if (hk_chain_length(batch->head, batch->count + 1) != batch->count)
          hk_fatal("heap check: parked batch", batch->head);
        for (const void *b = batch->head; b != HK_END; b = hk_next(b)) {
          if (hk_map_get(b) != cls) hk_fatal("heap check: a parked block of another class", b);
          if (!hk_is_free(b)) hk_fatal("heap check: a parked block not marked free", b);
        }
        parked += batch->count;
      }
      if (parked != t->parked) hk_fatal("heap check: parked counts", NULL);
      hk_unlock(&t->lock);
      walked += parked;
    }
  }
  for_spare_classes(cls) {
    hk_central_t *c = &central[cls];
    hk_lock(&c->lock);
    size_t n = 0;
    for (const void *b = c->nspares ? c->spares : HK_END; b != HK_END && n <= c->nspares; b = hk_next(b), n++) {
      if (hk_map_get(b) != cls) hk_fatal("heap check: a spare block of another class", b);
      if (!hk_is_spare(b)) hk_fatal("heap check: a spare block not marked spare", b);
    }
    if (n != c->nspares) hk_fatal("heap check: spare counts", c->spares);
    hk_unlock(&c->lock);
    walked += n;
  }
  return walked;
}

void hk_central_fork_lock(void) {
  for (unsigned c = 1; c <= HK_NCLASS; c++) hk_lock(&central[c].lock);
  for (unsigned i = 0; i < ncpu_slots; i++)
    for (unsigned c = 0; c < HK_SMALL_CLASSES; c++) hk_lock(&transfer[i][c].lock);
}

void hk_central_fork_unlock(bool child) {
  for (unsigned c = 1; c <= HK_NCLASS; c++) {
    if (child) pthread_mutex_init(&central[c].lock, NULL);
    else hk_unlock(&central[c].lock);
  }
  for (unsigned i = 0; i < ncpu_slots; i++)
    for (unsigned c = 0; c < HK_SMALL_CLASSES; c++) {
      if (child) pthread_mutex_init(&transfer[i][c].lock, NULL);
      else hk_unlock(&transfer[i][c].lock);
    }
}
