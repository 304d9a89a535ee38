/* SPDX-License-Identifier: MIT */
/* Messages and fatal errors (a block freed twice, corrupted lists), formatted
 * on the stack and written with write(2): nothing here allocates. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/base.h"

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

void hk_misuse_freed(const void *p, unsigned cls) {
  hk_message("hakmem: double free of %p, or a write to it after its free (block size %zu)\n", p,
             (size_t)(hk_classes[cls].size - HK_CANARY));
  abort();
}

void hk_corrupted(const void *b) {
  hk_message("hakmem: corrupted free list at %p (a write to a freed block, or an overrun into it)\n", b);
  abort();
}
