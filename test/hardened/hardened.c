/* SPDX-License-Identifier: MIT */
/* The hardened library (libhakmem-hardened.so, preloaded) catches what the
 * default one cannot: each case runs in a child, which must die with the
 * message (SIGABRT) or the fault (SIGSEGV) the case expects:
 * - a write past the end of a block, onto its canary, found at free;
 * - a write into a freed block that changes its free-list link, found when
 *   the link is followed;
 * - an overrun off the end of a huge block, stopped by its guard page;
 * and fresh blocks come in an order that cannot be foretold, and their
 * links and canaries hold a key drawn for the process, which a program
 * that knows the heap's addresses still cannot forge. */
#include "testutil.h"

#include <malloc.h>

static void free_opaque(void *p) { free(opaque_ptr(p)); }

static void overrun_small(void) {
  char *p = malloc(40);
  size_t n = malloc_usable_size(p);
  char past = (char)~p[n];  /* unlike the canary's byte there, whatever the key */
  memset(p, 1, n);
  p[n] = past;  /* one byte too many */
  free_opaque(p);
}

static void overrun_large(void) {
  char *p = malloc(100000);
  size_t n = malloc_usable_size(p);
  p[n] = (char)~p[n];
  free_opaque(p);
}

static void write_after_free(void) {
  void *a = malloc(64), *b = malloc(64);
  free_opaque(b);
  free_opaque(a);                      /* a's link now points at b */
  memset(opaque_ptr(a), 0x41, 8);      /* use after free: the link is overwritten */
  void *x = malloc(64), *y = malloc(64);  /* the second malloc follows the link */
  printf("%p %p\n", x, y);
}

static void overrun_huge(void) {
  char *p = malloc(3 << 20);
  size_t n = malloc_usable_size(p);
  for (size_t i = n; i < n + 4096; i++) p[i] = 1;
}

static void double_free(void) {
  char *p = malloc(48), *q = malloc(48);
  free_opaque(p);
  free_opaque(q);
  free_opaque(p);
}

typedef struct hardened_case {
  const char *name;
  void (*fn)(void);
  int signal;
  const char *message;
} hardened_case_t;

static const hardened_case_t cases[] = {
    {"a byte past a 40-byte block", overrun_small, SIGABRT, "hakmem: free of 0x"},
    {"a byte past a 100000-byte block", overrun_large, SIGABRT, "hakmem: free of 0x"},
    {"a freed block's link overwritten", write_after_free, SIGABRT, "hakmem: corrupted free list at 0x"},
    {"past the end of a 3 MiB block", overrun_huge, SIGSEGV, ""},
    {"free(p); free(q); free(p)", double_free, SIGABRT, "hakmem: double free of 0x"},
};

static void run_case(void *arg) { ((const hardened_case_t *)arg)->fn(); }

/* Consecutive fresh blocks of one size are not at consecutive addresses. */
static void fresh_blocks_in_random_order(void) {
  enum { N = 64 };
  char *p[N];
  int ascending = 0;
  for (int i = 0; i < N; i++) p[i] = malloc(32);
  for (int i = 1; i < N; i++) ascending += p[i] == p[i - 1] + 32;
  printf("  %d of %d fresh 32-byte blocks follow the one before\n", ascending, N - 1);
  CHECK(ascending < N / 4);
  for (int i = 0; i < N; i++) free(p[i]);
}

/* Blocks given back to their slabs (every other one of a slab, by a flush
 * and malloc_trim) are handed out again: their slab's list, which ends at
 * NULL, is followed to its end. */
static void blocks_from_their_slabs_again(void) {
  enum { N = 20000 };
  static char *v[N];
  void (*flush)(void) = (void (*)(void))hakmem_sym("hak_thread_flush");
  CHECK(flush != NULL);
  for (int i = 0; i < N; i++) v[i] = malloc(48);
  for (int i = 0; i < N; i += 2) free(v[i]);
  flush();
  malloc_trim(0);
  for (int i = 0; i < N; i += 2) {
    v[i] = malloc(48);
    memset(v[i], i & 0xff, 48);
  }
  for (int i = 0; i < N; i++) free(v[i]);
}

/* Key 0 would leave a freed block's link the next block's address XORed with
 * its own, and a canary a function of the block's address alone. */
static void links_and_canaries_keyed(void) {
  char *a = malloc(64), *b = malloc(64), *c = malloc(40);
  uint64_t canary;
  memcpy(&canary, c + malloc_usable_size(c), sizeof canary);
  CHECK(canary != (uint64_t)(uintptr_t)c * 0x9e3779b97f4a7c15ull);
  free_opaque(a);
  free_opaque(b);  /* b's link now leads to a */
  uint64_t link;
  memcpy(&link, opaque_ptr(b), sizeof link);  /* read while b is free: hakmem wrote it last */
  CHECK(link != (uintptr_t)a);
  CHECK(link != ((uintptr_t)a ^ (uintptr_t)b));
  free(c);
}

int main(void) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  const char *(*version)(void) = (const char *(*)(void))hakmem_sym("hak_version_string");
  CHECK_MSG(version && strstr(version(), "(hardened)"), "not the hardened library: %s", version ? version() : "?");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const hardened_case_t *c = &cases[i];
    child_result_t res;
    run_in_child(run_case, (void *)c, 20, &res);
    printf("  %s: %s, stderr: %s%s", c->name, describe_status(res.status), res.err[0] ? res.err : "(empty)\n",
           res.err[0] && res.err[strlen(res.err) - 1] != '\n' ? "\n" : "");
    CHECK_MSG(WIFSIGNALED(res.status) && WTERMSIG(res.status) == c->signal, "%s: child %s", c->name,
              describe_status(res.status));
    CHECK_MSG(strncmp(res.err, c->message, strlen(c->message)) == 0, "%s: stderr does not start with \"%s\"",
              c->name, c->message);
  }
  RUN(fresh_blocks_in_random_order);
  RUN(links_and_canaries_keyed);
  RUN(blocks_from_their_slabs_again);
  return 0;
}
