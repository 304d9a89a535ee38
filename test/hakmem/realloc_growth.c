/* SPDX-License-Identifier: MIT */
/* hakmem only.  A block of a size class that realloc must move to grow
 * takes a quarter more than it had, at least, so a string or an array grown
 * a few bytes at a time is copied once per quarter of its size rather than
 * at every class; what fits stays in place, and the contents move whole. */
#include <malloc.h>
#include "testutil.h"

/* One byte past the usable size: the new block holds a quarter more. */
static void one_byte_more(void) {
  for (size_t n = 16; n <= 600000; n = n * 5 / 4 + 16) {
    unsigned char *p = malloc(n);
    CHECK(p != NULL);
    size_t u = malloc_usable_size(p);
    for (size_t i = 0; i < u; i++) p[i] = (unsigned char)(i * 7 + n);
    unsigned char *q = realloc(p, u + 1);
    CHECK(q != NULL);
    size_t v = malloc_usable_size(q);
    CHECK_MSG(v >= u + u / 4, "realloc(%zu-byte block, %zu): usable size %zu", u, u + 1, v);
    for (size_t i = 0; i < u; i++) CHECK_MSG(q[i] == (unsigned char)(i * 7 + n), "byte %zu of %zu lost", i, u);
    CHECK(realloc(q, v) == q);
    free(q);
  }
}

/* A string built a byte at a time to 100 000 bytes moves 32 times; at
 * every class it moved 89 times. */
static void string_moves(void) {
  char *s = NULL;
  unsigned moves = 0;
  for (size_t len = 1; len <= 100000; len++) {
    char *t = realloc(s, len);
    CHECK(t != NULL);
    if (t != s) moves++;
    s = t;
    s[len - 1] = (char)('a' + len % 26);
  }
  for (size_t len = 1; len <= 100000; len++) CHECK(s[len - 1] == (char)('a' + len % 26));
  free(s);
  CHECK_MSG(moves <= 40, "%u moves", moves);
}

int main(void) {
  test_init();
  RUN(one_byte_more);
  RUN(string_moves);
  return 0;
}
