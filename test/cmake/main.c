/* SPDX-License-Identifier: MIT */
/* hakmem's own functions are found, and malloc is hakmem's: a huge block
 * shows in hakmem's count of mapped bytes and hakmem knows its size (a use
 * of the block, so the compiler cannot drop it); a block the C library
 * allocates (strdup) goes to hakmem's free without an abort. */
#include <hakmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  hak_os_stats_t before, after;
  hak_os_stats(&before);
  void *p = malloc(8 << 20);
  hak_os_stats(&after);
  if (hak_version() != HAKMEM_VERSION) {
    fprintf(stderr, "hak_version() = %d, the header says %d\n", hak_version(), HAKMEM_VERSION);
    return 1;
  }
  if (hak_malloc_usable_size(p) < (8 << 20) || after.mapped_bytes < before.mapped_bytes + (8 << 20)) {
    fprintf(stderr, "malloc is not hakmem's\n");
    return 1;
  }
  free(strdup("from the C library"));
  free(p);
  puts(hak_version_string());
  return 0;
}
