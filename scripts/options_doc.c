/* SPDX-License-Identifier: MIT */
/* Prints hakmem's options, from the table the library reads them with
 * (src/options.c), as the markdown table of the README's "Options" section.
 * Built and run by `make readme-options`, which puts the table between the
 * README's `<!-- options:begin -->` and `<!-- options:end -->` lines. */
#include <stdio.h>
#include "internal.h"

int main(void) {
  puts("| variable | speed | balanced | lean | meaning |");
  puts("|---|---|---|---|---|");
  for (unsigned i = 0; i < hk_option_count; i++) {
    const hk_option_t *o = &hk_option_table[i];
    printf("| `%s` |", o->name);
    for (unsigned p = 0; p < HK_NPROFILES; p++) {
      char value[32];
      hk_option_format(o, o->def[p], value, sizeof value);
      printf(" %s |", value);
    }
    printf(" %s |\n", o->meaning);
  }
  return 0;
}
