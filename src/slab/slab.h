/* SPDX-License-Identifier: MIT */
/* Size classes (size_class.c) and the central cache (central.c): blocks
 * carved from slabs, batches parked between thread caches, large blocks. */
#ifndef HK_SLAB_H
#define HK_SLAB_H

#include "region/region.h"

#define HK_TRANSFER_SLOTS 64                    /* batches parked per class and CPU (see central.c), */
#define HK_TRANSFER_SLOTS_LEAN 2                /* ... in lean mode, */
#define HK_TRANSFER_LISTS 64                    /* holding at most this many full thread cache lists */
#define HK_CPU_SETS 64                          /* sets of transfer slots: one per CPU, up to this */

extern uint8_t hk_class_table[HK_TABLE_MAX + 1] HK_HIDDEN;  /* by size: one load, no arithmetic */
HK_HIDDEN void hk_size_classes_init(void);
/* The 256 entries of hk_class_magic and of hk_class_magic_first. */
HK_HIDDEN void hk_class_magic_fill(uint32_t *magic, uint64_t *first);

/* ---- central cache (central.c): per class, behind one lock ------------------ */
/* Takes up to `want` blocks (a parked batch may be more) onto *chain;
 * *parker is the thread cache that parked them, NULL if they come from slabs.
 * `producer`: the caller never gave blocks of the class back (central.c). */
HK_HIDDEN void hk_central_init(unsigned cpus);  /* sets of transfer slots: one per CPU */
HK_HIDDEN unsigned hk_central_cpu_sets(void);
HK_HIDDEN unsigned hk_central_take(unsigned cls, unsigned arena, unsigned want, void **chain, const void **parker,
                                   bool producer);
/* A block of a large class for `size` bytes, not on a chain and not
 * touched (but as hk_large_take writes in): *zero if its memory reads as
 * zero, else it may hold anything, the free key included. */
HK_HIDDEN void *hk_central_take_large(unsigned cls, unsigned arena, size_t size, bool *zero);
/* Gives back a chain of `count` blocks; `owner` is the giving thread cache. */
HK_HIDDEN bool hk_central_put(unsigned cls, void *chain, unsigned count, const void *owner);
typedef struct hk_class_counts {  /* a class's figures in the central cache */
  size_t out;                     /* blocks handed out of slabs: in use, or in thread caches, or parked */
  size_t parked;                  /* blocks in parked batches */
  size_t slab_free;               /* blocks back on their slabs' free lists */
  size_t slabs, slabs_made;       /* slabs now, and ever made */
} hk_class_counts_t;
HK_HIDDEN void hk_central_counts(unsigned cls, hk_class_counts_t *out);
HK_HIDDEN size_t hk_central_check(void);  /* walks slabs and slots; hk_fatal on a mismatch */
HK_HIDDEN unsigned hk_chain_length(const void *chain, unsigned limit);
HK_HIDDEN void hk_central_purge(int mode);  /* parked batches and empty slabs back to the SuperSlabs */
HK_HIDDEN void hk_central_fork_lock(void);
HK_HIDDEN void hk_central_fork_unlock(bool child);

#endif
