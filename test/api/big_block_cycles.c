/* SPDX-License-Identifier: MIT */
/* test-builds: static hardened */
/* test-env: HAKMEM_PURGE_DELAY_MS=0 */
/* test-run: lean HAKMEM_PROFILE=lean */
/* test-not-emulated: VmRSS counts qemu-user's memory too, which grows with each range mapped */
/* Memory given back to the OS leaves nothing behind: thousands of cycles of
 * malloc and free of a 200 MB block, of aligned_alloc(1 GiB) and free, and
 * of 3 MiB blocks with malloc_trim after each free, each block's memory
 * given back at its free (no purge delay) or at the trim, keep the resident
 * memory and the count of mappings flat: the bookkeeping of an address
 * range given back goes with it, wherever the next range is mapped. */
#include "testutil.h"

#include <malloc.h>

static size_t mappings(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  CHECK(f != NULL);
  size_t n = 0;
  for (int c; (c = fgetc(f)) != EOF;) n += c == '\n';
  fclose(f);
  return n;
}

typedef void *(*alloc_fn)(void);
static void *big(void) { return malloc((size_t)200 << 20); }
static void *aligned_1g(void) { return aligned_alloc((size_t)1 << 30, 100); }
static void *mid(void) { return malloc((size_t)3 << 20); }

static void run(alloc_fn fn, int n, bool trim) {
  for (int i = 0; i < n; i++) {
    void *p = fn();
    CHECK(p != NULL);
    ((volatile char *)p)[0] = 1;
    free(p);
    if (trim) malloc_trim(0);
  }
}

static void cycles(const char *what, alloc_fn fn, int n, bool trim) {
  run(fn, 50, trim);  /* warm-up: whatever is made once */
  size_t rss0 = proc_status_kib("VmRSS"), maps0 = mappings();
  run(fn, n, trim);
  size_t rss1 = proc_status_kib("VmRSS"), maps1 = mappings();
  printf("  %d cycles of %s: RSS %zu -> %zu KiB, mappings %zu -> %zu\n", n, what, rss0, rss1, maps0, maps1);
  CHECK_MSG(rss1 < rss0 + 2048, "RSS grew by %zu KiB", rss1 - rss0);
  CHECK_MSG(maps1 < maps0 + 16, "%zu mappings more", maps1 - maps0);
}

int main(void) {
  test_init();
  cycles("200 MB blocks", big, 5000, false);
  cycles("aligned_alloc(1 GiB, 100)", aligned_1g, 5000, false);
  cycles("3 MiB blocks and malloc_trim", mid, 3000, true);
  return 0;
}
