/* SPDX-License-Identifier: MIT */
/* hakmem only.  A malloc that returns NULL for want of memory has tried
 * everything first: what malloc_trim would free, the blocks parked in the
 * central cache sent home, and one more try, even where nothing goes back to
 * the OS (HAKMEM_SS_MEM_LEAN_DECOMMIT=OFF).  So the same malloc right after
 * fails too.  Runs under RLIMIT_AS. */
#include "hakmem.h"
#include "testutil.h"

#define LIMIT ((rlim_t)256 << 20)

static int under_limit(void) {
  /* blocks of 1000 B parked in the central cache: their slabs empty once sent home */
  static void *parked[300];
  for (int i = 0; i < 300; i++) CHECK((parked[i] = malloc(1000)) != NULL);
  for (int i = 0; i < 300; i++) free(parked[i]);
  hak_thread_flush();
  size_t n = 0;
  while (malloc(60000)) n++;  /* kept: the address space runs out */
  CHECK_EQ(errno, ENOMEM);
  void *again = malloc(60000);
  printf("  %zu blocks of 60000 B, then NULL; the same malloc again: %p\n", n, again);
  CHECK_MSG(again == NULL, "malloc(60000) failed, then succeeded at once");
  return 0;
}

static void nothing_left_after_a_null(void) {
  CHECK(setenv("HAKMEM_SS_MEM_LEAN_DECOMMIT", "OFF", 1) == 0);
  run_self_under_as_limit(LIMIT, 60);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], UNDER_AS_LIMIT) == 0) return under_limit();
  test_init();
  RUN(nothing_left_after_a_null);
  return 0;
}
