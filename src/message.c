/* SPDX-License-Identifier: MIT */
/* Messages and fatal errors: misuse of the API, corrupted lists.  Everything
 * is formatted on the stack and written with write(2): nothing here
 * allocates. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

void hk_message(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = hk_min((size_t)n, sizeof buf - 1);
  if ((size_t)n > len && fmt[strlen(fmt) - 1] == '\n') buf[len - 1] = '\n';  /* cut short: still a line */
  for (size_t off = 0; off < len;) {
    ssize_t w = write(STDERR_FILENO, buf + off, len - off);
    if (w <= 0) break;
    off += (size_t)w;
  }
}

void hk_fatal(const char *what, const void *p) {
  hk_message("hakmem: %s: %p\n", what, p);
  abort();
}

/* A call given a pointer it cannot take: says which kind of misuse in one
 * line and aborts.  cls is p's class map entry.  Slabs and huge regions keep
 * their descriptors after their blocks are freed, so a block given back to
 * its SuperSlab or region is still recognised as freed. */
void hk_misuse(const char *call, const void *p, uintptr_t cls) {
  size_t size = 0;
  bool live = false;
  if (cls - 1 < HK_NCLASS) {
    /* before a slab's first block: no block at all */
    size = (uint16_t)(uintptr_t)p < hk_classes[cls].first ? 0 : hk_classes[cls].size - HK_CANARY;
    live = !hk_on_boundary(p, cls);
    if (HAK_HARDENED && !live && !hk_is_free(p) && !hk_is_home(p) && !hk_is_spare(p)) {
      hk_message("hakmem: %s of %p: the block was overrun, its canary is overwritten (block size %zu)\n", call, p,
                 size);
      abort();
    }
  } else if ((size = hk_superslab_block_of(p, &live))) {
    size -= HK_CANARY;
  } else {
    size = hk_huge_block_of(p, &live);
  }
  if (!size) hk_message("hakmem: %s of invalid pointer %p (not a block hakmem handed out)\n", call, p);
  else if (live) hk_message("hakmem: %s of %p, inside a block (block size %zu)\n", call, p, size);
  else if (!strcmp(call, "free")) hk_message("hakmem: double free of %p (block size %zu)\n", p, size);
  else hk_message("hakmem: %s of %p, a block already freed (block size %zu)\n", call, p, size);
  abort();
}

void hk_misuse_freed(const void *p, unsigned cls) {
  hk_message("hakmem: double free of %p, or a write to it after its free (block size %zu)\n", p,
             (size_t)(hk_classes[cls].size - HK_CANARY));
  abort();
}

void hk_corrupted(const void *b) {
  hk_message("hakmem: corrupted free list at %p (a write to a freed block, or an overrun into it)\n", b);
  abort();
}
