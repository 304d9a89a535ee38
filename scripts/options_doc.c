/* SPDX-License-Identifier: MIT */
/* Prints hakmem's options, from the table the library reads them with
 * (src/options.c), as the markdown table of the README's "Options" section.
 * Built and run by `make readme-options`, which puts the table between the
 * README's `<!-- options:begin -->` and `<!-- options:end -->` lines. */
#include <stdio.h>
#include "base/base.h"

/* What the option accepts: the names, or the range a value must be in. */
static void print_values(const hk_option_t *o) {
  if (o->type == HK_OPT_BOOL) {
    printf(" boolean |");  /* its forms are listed above the table */
  } else if (o->type == HK_OPT_ENUM) {
    for (size_t i = 0; o->names[i]; i++) printf("%s%s", i ? ", " : " ", o->names[i]);
    printf(" |");
  } else if (o->type == HK_OPT_PATH) {
    printf(" a file's path |");
  } else {
    char max[32];
    hk_option_format(o, o->max, max, sizeof max);
    printf(" 0 – %s |", max);
  }
}

int main(void) {
  puts("| variable | speed | balanced | lean | values | meaning |");
  puts("|---|---|---|---|---|---|");
  for (unsigned i = 0; i < hk_option_count; i++) {
    const hk_option_t *o = &hk_option_table[i];
    printf("| `%s` |", o->name);
    for (unsigned p = 0; p < HK_NPROFILES; p++) {
      char value[32];
      hk_option_format(o, o->def[p], value, sizeof value);
      printf(" %s |", value);
    }
    print_values(o);
    printf(" %s |\n", o->meaning);
  }
  return 0;
}
