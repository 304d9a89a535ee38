/* SPDX-License-Identifier: MIT */
/* The harness of the unit tests: each test/unit/X.c is one program that
 * includes this header, which brings in the library's internal header and
 * testutil.h's checks, and defines its cases with
 *
 *     UNIT_TEST(name) { ... CHECK(...); ... }
 *
 * The harness's main() runs the cases in the order of the source, or only
 * those named on the command line (build/test/unit/X name...), printing each
 * name first; a failed CHECK prints its file, line and expression and aborts.
 * The program is linked with every object file of the library, so hakmem is
 * its malloc and its internal functions and tables are in reach. */
#ifndef HAKMEM_TEST_UNIT_H
#define HAKMEM_TEST_UNIT_H

#include "api/api.h"
#include "testutil.h"

typedef struct unit_case {
  const char *name;
  void (*fn)(void);
  int line;
} unit_case_t;

enum { UNIT_MAX_CASES = 256 };
static unit_case_t unit_cases[UNIT_MAX_CASES];
static int unit_ncases;

static void unit_register(const char *name, void (*fn)(void), int line) {
  CHECK_MSG(unit_ncases < UNIT_MAX_CASES, "more than %d cases", UNIT_MAX_CASES);
  unit_cases[unit_ncases++] = (unit_case_t){name, fn, line};
}

/* Constructors register the cases before main() (in no promised order). */
#define UNIT_TEST(name)                                                                  \
  static void name(void);                                                                \
  __attribute__((constructor)) static void unit_register_##name(void) {                  \
    unit_register(#name, name, __LINE__);                                                \
  }                                                                                      \
  static void name(void)

static int unit_by_line(const void *a, const void *b) {
  return ((const unit_case_t *)a)->line - ((const unit_case_t *)b)->line;
}

static int unit_selected(const unit_case_t *c, int argc, char **argv) {
  int i;
  if (argc < 2) return 1;
  for (i = 1; i < argc; i++)
    if (strcmp(argv[i], c->name) == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  int i, ran = 0;
  test_init();
  qsort(unit_cases, (size_t)unit_ncases, sizeof unit_cases[0], unit_by_line);
  for (i = 0; i < unit_ncases; i++) {
    if (!unit_selected(&unit_cases[i], argc, argv)) continue;
    printf("  %s\n", unit_cases[i].name);
    unit_cases[i].fn();
    ran++;
  }
  CHECK_MSG(ran > 0, "no case ran (%d defined)", unit_ncases);
  printf("%d of %d cases passed\n", ran, unit_ncases);
  return 0;
}

#endif
