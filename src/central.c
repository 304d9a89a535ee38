/* SPDX-License-Identifier: MIT */
/* The central cache: per size class, behind one lock, the blocks that no
 * thread cache holds.  Thread caches trade batches with it: a flush parks its
 * chain in a transfer slot in O(1) and a refill takes one back, so blocks move
 * between threads without being walked; only when the slots are full (or
 * empty) are blocks returned to (or carved from) their slabs.  Large classes
 * (one block per slab) have nothing to share: their slabs come from and go
 * back to the SuperSlabs directly, without the class lock. */
#include "internal.h"

typedef struct hk_batch {
  void *head;
  unsigned count;
  const void *owner;       /* the thread cache that parked it */
} hk_batch_t;

typedef struct hk_central {
  pthread_mutex_t lock;
  hk_slab_t *partial;      /* slabs with free or never-used blocks */
  unsigned nempty;         /* slabs on `partial` with every block home */
  bool active;             /* taken from or given to since the last purge tick */
  unsigned ntransfer;
  hk_batch_t transfer[HK_TRANSFER_SLOTS];
  hk_class_counts_t counts;  /* statistics (large classes: in large_counts) */
} __attribute__((aligned(HK_CACHELINE))) hk_central_t;

static hk_central_t central[HK_NCLASS + 1] = {[0 ... HK_NCLASS] = {.lock = PTHREAD_MUTEX_INITIALIZER}};
/* Large classes have no lock of their own: their slab counts are atomic. */
static struct {
  atomic_size_t slabs, slabs_made;
} large_counts[HK_NCLASS + 1];

static bool slab_is_full(const hk_slab_t *s) { return s->free == NULL && s->carved == s->capacity; }
static bool slab_is_empty(const hk_slab_t *s) { return s->nfree == s->carved; }

/* Links n fresh blocks of `size` bytes from `first` in front of `head`: in
 * address order, or, in the hardened build, in a random order, so that
 * where the next block will be cannot be foretold.  Returns the new head. */
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
    hk_set_next(b, head);
    head = b;
  }
  return head;
#else
  uint8_t *b = first;
  for (unsigned i = 1; i < n; i++, b += size) hk_set_next(b, b + size);
  hk_set_next(b, head);
  return first;
#endif
}

/* Takes up to `want` blocks from one slab onto *chain: returned blocks first,
 * then fresh ones, linked in address order. */
static unsigned slab_take(hk_slab_t *s, unsigned want, void **chain) {
  unsigned n = 0;
  void *head = *chain;
  while (n < want && s->free) {
    void *b = s->free;
    s->free = hk_next(b);
    hk_set_next(b, head);
    head = b;
    n++;
  }
  s->nfree = (uint16_t)(s->nfree - n);
  central[s->cls].counts.slab_free -= n;
  /* Fresh blocks: at most a page's worth per refill, so memory is touched only
   * as a class really uses it. */
  unsigned page_blocks = hk_max(4096u / s->block_size, 1u);
  unsigned fresh = hk_min(hk_min(want - n, page_blocks), (unsigned)(s->capacity - s->carved));
  if (fresh) {
    uint8_t *first = s->start + (size_t)s->carved * s->block_size;
    head = link_fresh(first, s->block_size, fresh, head);
    s->carved = (uint16_t)(s->carved + fresh);
    n += fresh;
  }
  *chain = head;
  return n;
}

unsigned hk_central_take(unsigned cls, unsigned want, void **chain, const void **parker) {
  *parker = NULL;
  if (hk_class_is_large(cls)) {
    *chain = hk_large_take(cls);
    if (!*chain) return 0;
    atomic_fetch_add_explicit(&large_counts[cls].slabs, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&large_counts[cls].slabs_made, 1, memory_order_relaxed);
    return 1;
  }
  hk_central_t *c = &central[cls];
  pthread_mutex_lock(&c->lock);
  c->active = true;
  if (c->ntransfer) {
    hk_batch_t b = c->transfer[--c->ntransfer];
    c->counts.parked -= b.count;
    pthread_mutex_unlock(&c->lock);
    *chain = b.head;
    *parker = b.owner;
    return b.count;
  }
  void *head = NULL;
  unsigned n = 0;
  while (n < want) {
    hk_slab_t *s = c->partial;
    if (!s) {
      s = hk_slab_new(cls);
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
  pthread_mutex_unlock(&c->lock);
  *chain = head;
  return n;
}

/* Gives an empty slab back to its SuperSlab. */
static void release(hk_central_t *c, hk_slab_t *s) {
  c->counts.slab_free -= s->nfree;
  c->counts.slabs--;
  hk_slab_release(s);
}

/* Returns one block to its slab; a slab whose blocks are all home is given
 * back to its SuperSlab unless it is the class's only empty slab and `keep`. */
static void slab_put(hk_central_t *c, unsigned cls, void *b, bool keep) {
  hk_slab_t *s = hk_slab_of(b);
  if (hk_unlikely(s->cls != cls || s->nfree >= s->carved)) hk_fatal("free(): double free or corrupted block", b);
#if HAK_CHECKS
  if ((size_t)((uint8_t *)b - s->start) % s->block_size != 0) hk_fatal("free(): pointer inside a block", b);
#endif
  if (slab_is_full(s)) hk_list_push(&c->partial, s);
  hk_set_next(b, s->free);
  s->free = b;
  s->nfree++;
  c->counts.out--;
  c->counts.slab_free++;
  if (slab_is_empty(s)) {
    if (c->nempty == 0 && keep) {
      c->nempty = 1;
    } else {
      hk_list_remove(&c->partial, s);
      release(c, s);
    }
  }
}

static void put_chain(hk_central_t *c, unsigned cls, void *chain, bool keep) {
  while (chain) {
    void *b = chain;
    chain = hk_next(b);
    slab_put(c, cls, b, keep);
  }
}

void hk_central_put(unsigned cls, void *chain, unsigned count, const void *owner) {
  if (hk_class_is_large(cls)) {
    hk_large_release(cls, chain);
    atomic_fetch_sub_explicit(&large_counts[cls].slabs, count, memory_order_relaxed);
    return;
  }
  hk_central_t *c = &central[cls];
  pthread_mutex_lock(&c->lock);
  c->active = true;
  /* Each parked block keeps its slab resident: lean mode parks fewer. */
  if (c->ntransfer < (hk_opt.mem_lean ? HK_TRANSFER_SLOTS_LEAN : HK_TRANSFER_SLOTS)) {
    c->transfer[c->ntransfer++] = (hk_batch_t){chain, count, owner};
    c->counts.parked += count;
    pthread_mutex_unlock(&c->lock);
    hk_purge_note();  /* parked blocks go home if the class goes idle */
    return;
  }
  put_chain(c, cls, chain, true);
  pthread_mutex_unlock(&c->lock);
}

/* Sends the parked batches of a class idle for a whole purge epoch (of every
 * class, unless HK_PURGE_DUE) back to their slabs, and gives back its empty
 * slabs, the kept one too; the SuperSlabs then purge their pages. */
void hk_central_purge(int mode) {
  bool pending = false;
  for (unsigned cls = 1; cls < HK_FIRST_LARGE_CLASS; cls++) {
    hk_central_t *c = &central[cls];
    pthread_mutex_lock(&c->lock);
    if (mode == HK_PURGE_DUE && c->active) {
      c->active = false;
      pending |= c->ntransfer || c->nempty;
    } else if (c->ntransfer || c->nempty) {
      while (c->ntransfer) put_chain(c, cls, c->transfer[--c->ntransfer].head, false);
      c->counts.parked = 0;
      for (hk_slab_t *s = c->partial, *next; s && c->nempty; s = next) {
        next = s->next;
        if (!slab_is_empty(s)) continue;
        hk_list_remove(&c->partial, s);
        release(c, s);
        c->nempty--;
      }
    }
    pthread_mutex_unlock(&c->lock);
  }
  if (pending) hk_purge_note();
}

void hk_central_counts(unsigned cls, hk_class_counts_t *out) {
  if (hk_class_is_large(cls)) {
    size_t slabs = atomic_load_explicit(&large_counts[cls].slabs, memory_order_relaxed);
    *out = (hk_class_counts_t){.out = slabs, .slabs = slabs,
                               .slabs_made = atomic_load_explicit(&large_counts[cls].slabs_made, memory_order_relaxed)};
    return;
  }
  pthread_mutex_lock(&central[cls].lock);
  *out = central[cls].counts;
  pthread_mutex_unlock(&central[cls].lock);
}

void hk_central_fork_lock(void) {
  for (unsigned c = 1; c <= HK_NCLASS; c++) pthread_mutex_lock(&central[c].lock);
}

void hk_central_fork_unlock(bool child) {
  for (unsigned c = 1; c <= HK_NCLASS; c++) {
    if (child) pthread_mutex_init(&central[c].lock, NULL);
    else pthread_mutex_unlock(&central[c].lock);
  }
}
