/* hakmem only.  Invalid frees are detected: in a child process, free() of a
 * pointer hakmem does not own (a stack address, a pointer into the middle of
 * a static array, memory mapped by someone else, the middle of a huge block)
 * must end the child with SIGABRT and a message on stderr that names hakmem;
 * a double free of a 32-byte block, and of a huge block, must abort with a
 * message containing "double free" or naming hakmem. */
#include "testutil.h"

#include <sys/mman.h>

static char static_array[4096];

/* Keeps the compiler from seeing (and warning about) what is freed. */
static void free_opaque(void *p) { free(opaque_ptr(p)); }

static void free_stack_address(void *arg) {
  char local[64];
  (void)arg;
  memset(local, 0, sizeof local);
  free_opaque(local + 16);
}

static void free_into_static_array(void *arg) {
  (void)arg;
  free_opaque(static_array + 1024);
}

static void free_twice(void *arg) {
  void *p = malloc(32);
  (void)arg;
  CHECK(p != NULL);
  memset(p, 0, 32);
  free_opaque(p);
  free_opaque(p);
}

static void free_foreign_mapping(void *arg) {
  char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  (void)arg;
  CHECK(m != MAP_FAILED);
  free_opaque(m + 4096);
}

static void free_inside_huge_block(void *arg) {
  char *p = malloc(16 << 20);
  (void)arg;
  CHECK(p != NULL);
  free_opaque(p + (8 << 20));
}

static void free_huge_twice(void *arg) {
  char *p = malloc(16 << 20);
  (void)arg;
  CHECK(p != NULL);
  free_opaque(p);
  free_opaque(p);
}

/* Runs fn in a child; it must die of SIGABRT with `needle` on its stderr. */
static void expect_abort(void (*fn)(void *), const char *what, const char *needle) {
  child_result_t res;
  run_in_child(fn, NULL, 20, &res);
  printf("  %s: child %s, stderr: %s%s", what, describe_status(res.status),
         res.err[0] ? res.err : "(empty)\n",
         res.err[0] && res.err[strlen(res.err) - 1] != '\n' ? "\n" : "");
  CHECK_MSG(WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGABRT,
            "%s: child %s, expected SIGABRT", what, describe_status(res.status));
  CHECK_MSG(strstr(res.err, needle) != NULL, "%s: \"%s\" not in the child's stderr", what, needle);
}

static void stack_address(void) { expect_abort(free_stack_address, "free(stack address)", "hakmem"); }

static void static_array_interior(void) {
  expect_abort(free_into_static_array, "free(static array + 1024)", "hakmem");
}

static void double_free(void) {
  expect_abort(free_twice, "free(p); free(p)", "double free");
}

static void foreign_mapping(void) {
  expect_abort(free_foreign_mapping, "free(mmap'd page)", "hakmem");
}

static void huge_block_interior(void) {
  expect_abort(free_inside_huge_block, "free(huge block + 8 MiB)", "hakmem");
}

static void huge_double_free(void) {
  expect_abort(free_huge_twice, "free(huge); free(huge)", "hakmem");
}

int main(void) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  RUN(stack_address);
  RUN(static_array_interior);
  RUN(double_free);
  RUN(foreign_mapping);
  RUN(huge_block_interior);
  RUN(huge_double_free);
  return 0;
}
