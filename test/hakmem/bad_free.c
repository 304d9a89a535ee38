/* SPDX-License-Identifier: MIT */
/* test-builds: hardened */
/* hakmem only.  Misuse is caught: each case runs in a child process, which
 * must die of SIGABRT with hakmem's one-line message on stderr, naming the
 * pointer: double frees (at once, after other frees, of blocks of every size
 * range, of a block given back to its slab or region) before the block is
 * handed out twice, writes into a freed block's second word before it is
 * handed out again, frees of pointers hakmem never handed out (stack, static
 * data, another mapping, a block boundary its slab has not handed out) and
 * of pointers inside blocks (small, large, huge),
 * and realloc of any of these (to 0 too), and of a block freed before its
 * slab was given back and made anew.  A double free of a block still in a cache is
 * caught when malloc would hand it out a second time: the cases go on
 * allocating blocks of its size, and must not get that far. */
#include "testutil.h"

#include <malloc.h>
#include <sys/mman.h>

static char static_array[4096];

/* Keeps the compiler from seeing (and warning about) what is freed. */
static void free_opaque(void *p) { free(opaque_ptr(p)); }
static void *realloc_opaque(void *p, size_t n) { return realloc(opaque_ptr(p), n); }

static char *xmalloc(size_t n) {
  char *p = malloc(n);
  CHECK(p != NULL);
  memset(p, 0x5a, n);
  return p;
}

static void stack_address(void) {
  char local[64];
  memset(local, 0, sizeof local);
  free_opaque(local + 16);
}

static void static_array_interior(void) { free_opaque(static_array + 1024); }

static void foreign_mapping(void) {
  char *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(m != MAP_FAILED);
  free_opaque(m + 4096);
}

/* Allocates n blocks of `size` bytes, as a program goes on after a double
 * free; the block freed twice must not come out of them twice. */
static void allocate_on(size_t size, int n) {
  void **v = calloc((size_t)n, sizeof *v);
  CHECK(v != NULL);
  for (int i = 0; i < n; i++) {
    v[i] = xmalloc(size);
    for (int j = 0; j < i; j++) CHECK_MSG(v[j] != v[i], "%p handed out twice", v[i]);
  }
}

static void small_twice(void) {
  char *p = xmalloc(32);
  free_opaque(p);
  free_opaque(p);
  allocate_on(32, 4);
}

/* glibc's tcache example: another free of the same size comes between */
static void small_twice_apart(void) {
  char *p = xmalloc(48), *q = xmalloc(48);
  free_opaque(p);
  free_opaque(q);
  free_opaque(p);
  allocate_on(48, 6);
}

/* ... and the thread's cache is handed to the central cache in between */
static void small_twice_flushed(void) {
  char *p = xmalloc(80), *q = xmalloc(80);
  free_opaque(p);
  free_opaque(q);
  free_opaque(p);
  hak_thread_flush();
  allocate_on(80, 6);
}

/* ... and malloc_trim sends the batches home to their slabs */
static void small_twice_trimmed(void) {
  char *p = xmalloc(96), *q = xmalloc(96);
  free_opaque(p);
  free_opaque(q);
  free_opaque(p);
  hak_thread_flush();
  malloc_trim(0);
  allocate_on(96, 6);
}

/* the block has gone back to its slab (and the slab to its SuperSlab) by then */
static void small_twice_after_flush(void) {
  char *p = xmalloc(100), *v[5000];
  free_opaque(p);
  for (int i = 0; i < 5000; i++) v[i] = xmalloc(100);
  for (int i = 0; i < 5000; i++) free_opaque(v[i]);
  hak_thread_flush();
  free_opaque(p);
  allocate_on(100, 12000);
}

/* 64 blocks of 64 bytes; the first freed, sent home to its slab (a flush
 * parks it, malloc_trim sends it home), and freed again. */
static void free_home_block_again(char **a) {
  for (int i = 0; i < 64; i++) a[i] = xmalloc(64);
  free_opaque(a[0]);
  hak_thread_flush();
  malloc_trim(0);
  free_opaque(a[0]);
}

/* ... the second free sends it home once more; when the rest of its slab
 * comes home too, the slab counts as empty while another of its blocks is in
 * the program's hands, and giving the slab back would hand that block out
 * again */
static void small_twice_home_slab_empties(void) {
  char *a[64];
  free_home_block_again(a);
  hak_thread_flush();
  malloc_trim(0);
  for (int i = 2; i < 64; i++) free_opaque(a[i]);
  hak_thread_flush();
  malloc_trim(0);
  allocate_on(64, 4000);
}

/* ... or a malloc hands it out from the thread's list while it is on its
 * slab's list too */
static void small_twice_home_handed_out(void) {
  char *a[64];
  free_home_block_again(a);
  char *again = xmalloc(64);
  CHECK(again == a[0]);
  for (int i = 1; i < 64; i++) free_opaque(a[i]);
  hak_thread_flush();
  malloc_trim(0);
  allocate_on(64, 4000);
}

/* ... or, with many blocks back in the slab in the order they were freed,
 * a refill that reads the slab in address order rather than walk its list
 * counts one block fewer marked home than the list holds */
static void small_twice_home_read_in_order(void) {
  enum { N = 900 };
  static char *a[N];
  for (int i = 0; i < N; i++) a[i] = xmalloc(64);
  for (int i = 0; i < N; i++) {  /* every other block, in a scattered order */
    int k = (i * 7919) % N;
    if (k % 2 == 0) free_opaque(a[k]);
  }
  hak_thread_flush();
  malloc_trim(0);
  free_opaque(a[0]);
  allocate_on(64, 1000);
}

/* A freed block's link written over to point into its slab's unit before
 * the first block (176 B blocks start 64 B into their unit): caught when
 * the chain goes home, where it was looked up again for ever. */
static void small_link_before_first_block(void) {
  char *p = xmalloc(176);
  uintptr_t unit = (uintptr_t)p & ~(uintptr_t)0xffff;
  free_opaque(p);
  ((volatile uintptr_t *)opaque_ptr(p))[0] = unit + 16;
  hak_thread_flush();
  malloc_trim(0);
}

/* A block boundary of a slab that has not handed that block out yet (its
 * slab carves blocks a page at a time): caught when it goes back to the
 * slab (a flush parks the thread's list, malloc_trim sends it home). */
static void small_never_handed_out(void) {
  uintptr_t unit = (uintptr_t)xmalloc(64) & ~(uintptr_t)0xffff;
  free_opaque((void *)(unit + 60000 / 64 * 64));
  hak_thread_flush();
  malloc_trim(0);
}

/* A write into a freed block's second word, where it is marked free. */
static void small_written_after_free(void) {
  uint64_t *p = (uint64_t *)xmalloc(64);
  free_opaque(p);
  ((volatile uint64_t *)opaque_ptr(p))[1] = 7;
  allocate_on(64, 2);
}

static void small_interior(void) {
  char *p = xmalloc(48);
  free_opaque(p + 16);
}

/* 48-byte blocks (40 asked, with the hardened build's canary 48) do not
 * fill a 64 KiB unit: where another would start after the last one, and the
 * unit's first bytes, are not blocks. */
static void small_past_the_last_block(void) {
  uintptr_t unit = (uintptr_t)xmalloc(40) & ~(uintptr_t)0xffff;
  free_opaque((void *)(unit + 65536 / 48 * 48));
}

static void small_unit_start(void) {
  uintptr_t unit = (uintptr_t)xmalloc(40) & ~(uintptr_t)0xffff;
  free_opaque((void *)unit);
}

static void large_twice(void) {
  char *p = xmalloc(40000);
  free_opaque(p);
  free_opaque(p);
  allocate_on(40000, 4);
}

/* given back to its huge region in between (the thread cache is flushed) */
static void large_twice_after_release(void) {
  char *p = xmalloc(300000);
  free_opaque(p);
  hak_thread_flush();
  free_opaque(p);
}

/* a spare of its class in between (the thread cache is flushed): freed
 * again, it is on the thread's list and among the spares, and the second
 * malloc of its size finds it handed out already */
static void large_twice_spare(void) {
  char *p = xmalloc(40000);
  free_opaque(p);
  hak_thread_flush();
  free_opaque(p);
  allocate_on(40000, 2);
}

/* ... and sent back again with the thread's list: the spares' list then
 * holds it twice (its link made a loop), and the second malloc of its size
 * finds it handed out already */
static void large_twice_spare_sent_back(void) {
  char *p = xmalloc(40000);
  free_opaque(p);
  hak_thread_flush();
  free_opaque(p);
  hak_thread_flush();
  allocate_on(40000, 2);
}

/* ... or a purge gives the spares back: the walk finds it before it leaves
 * them */
static void large_twice_spare_trimmed(void) {
  char *p = xmalloc(40000);
  free_opaque(p);
  hak_thread_flush();
  free_opaque(p);
  hak_thread_flush();
  malloc_trim(0);
}

static void large_interior(void) {
  char *p = xmalloc(40000);
  free_opaque(p + 4096);
}

static void large_interior_far(void) {
  char *p = xmalloc(300000);
  free_opaque(p + 200000);
}

static void huge_twice(void) {
  char *p = xmalloc(16 << 20);
  free_opaque(p);
  free_opaque(p);
}

/* A block too big for a region has a mapping of its own, unmapped by the
 * trim: the second free is still told for what it is. */
static void jumbo_twice_unmapped(void) {
  char *p = xmalloc((size_t)200 << 20);
  free_opaque(p);
  malloc_trim(0);
  free_opaque(p);
}

static void huge_interior(void) {
  char *p = xmalloc(16 << 20);
  free_opaque(p + (8 << 20));
}

/* A block larger than a region has its header more than a region below
 * most of its bytes. */
static void jumbo_interior_far(void) {
  char *p = xmalloc((size_t)300 << 20);
  free_opaque(p + ((size_t)200 << 20));
}

static void huge_interior_near(void) {
  char *p = xmalloc(16 << 20);
  free_opaque(p + 64);
}

static void realloc_freed(void) {
  char *p = xmalloc(64), *q = xmalloc(64);
  free_opaque(p);
  free_opaque(q);
  realloc_opaque(p, 200);
}

/* realloc(p, 0) frees p: the same checks first */
static void realloc_freed_to_0(void) {
  char *p = xmalloc(64), *q = xmalloc(64);
  free_opaque(p);
  free_opaque(q);
  realloc_opaque(p, 0);
}

static void realloc_foreign_to_0(void) { realloc_opaque(static_array + 64, 0); }

/* back in its slab (a flush, then malloc_trim sends parked blocks home),
 * which another block keeps in use */
static void realloc_freed_home(void) {
  char *p = xmalloc(64), *q = xmalloc(64);
  free_opaque(p);
  hak_thread_flush();
  malloc_trim(0);
  realloc_opaque(p, 200);
  free_opaque(q);
}

/* a block freed, its slab given back (malloc_trim), and a new slab in its
 * place that has carved only its first page: the marks went with the pages */
static void realloc_freed_slab_gone(void) {
  char *v[300];
  for (int i = 0; i < 300; i++) v[i] = xmalloc(48);
  for (int i = 0; i < 300; i++) free_opaque(v[i]);
  hak_thread_flush();
  malloc_trim(0);
  char *keep = xmalloc(48);
  realloc_opaque(v[299], 40);
  free_opaque(keep);
}

static void realloc_huge_interior_to_0(void) {
  char *p = xmalloc(16 << 20);
  realloc_opaque(p + 64, 0);
}

static void realloc_interior(void) {
  char *p = xmalloc(256);
  realloc_opaque(p + 32, 100);
}

static void realloc_foreign(void) { realloc_opaque(static_array + 64, 100); }

static void realloc_huge_freed(void) {
  char *p = xmalloc(8 << 20);
  free_opaque(p);
  realloc_opaque(p, 16 << 20);
}

/* A write into a freed block (its link, the first word) cuts the thread's
 * list short: the heap check finds the list's length differs from its
 * count.  Where links are encoded, the link no longer decodes to a block of
 * the list, which the check finds as it follows it. */
static void heap_check_after_write_to_freed(void) {
  size_t (*heap_check)(void) = (size_t (*)(void))hakmem_sym("hak_heap_check");
  char *p = xmalloc(64), *q = xmalloc(64);
  free_opaque(p);
  free_opaque(q);
  memset(opaque_ptr(q), 0, sizeof(void *));
  heap_check();
}

/* The same for a large class's block in the thread's list: of eight freed
 * in a row, the last stays there (the others go on as spares). */
static void heap_check_after_write_to_freed_large(void) {
  size_t (*heap_check)(void) = (size_t (*)(void))hakmem_sym("hak_heap_check");
  char *v[8];
  for (int i = 0; i < 8; i++) v[i] = xmalloc(40000);
  for (int i = 0; i < 8; i++) free_opaque(v[i]);
  memset((char *)opaque_ptr(v[7]) + sizeof(void *), 0, sizeof(void *));
  heap_check();
}

typedef struct misuse {
  const char *name;
  void (*fn)(void);
  const char *message;  /* what stderr must say: "…" stands for the pointer */
  const char *encoded;  /* if not NULL, what it says instead where links are encoded */
} misuse_t;

static const misuse_t cases[] = {
    {"free(stack address)", stack_address, "hakmem: free of invalid pointer 0x", NULL},
    {"free(static array + 1024)", static_array_interior, "hakmem: free of invalid pointer 0x", NULL},
    {"free(another mapping)", foreign_mapping, "hakmem: free of invalid pointer 0x", NULL},
    {"free(p); free(p), 32 B", small_twice, "hakmem: double free of 0x", NULL},
    {"free(p); free(q); free(p), 48 B", small_twice_apart, "hakmem: double free of 0x", NULL},
    {"free(p); free(q); free(p), 80 B, then a flush", small_twice_flushed, "hakmem: double free of 0x", NULL},
    {"free(p); free(q); free(p), 96 B, then a flush and malloc_trim", small_twice_trimmed, "hakmem: double free of 0x", NULL},
    {"double free after 5000 frees and a flush", small_twice_after_flush, "hakmem: double free of 0x", NULL},
    {"double free of a block back in its slab, whose slab then empties", small_twice_home_slab_empties,
     "hakmem: double free of 0x", NULL},
    {"double free of a block back in its slab, handed out again from the thread's list",
     small_twice_home_handed_out, "hakmem: double free of 0x", NULL},
    {"double free of a block back in its slab, read in address order", small_twice_home_read_in_order,
     "hakmem: double free of 0x", NULL},
    {"a freed 176-byte block's link written to point before its slab's first block",
     small_link_before_first_block, "hakmem: corrupted free list at 0x", NULL},
    {"free(a 64-byte block its slab has not handed out), then a flush", small_never_handed_out,
     "hakmem: free(): invalid pointer: 0x", "hakmem: free of 0x…, inside a block"},
    {"a write into a freed 64-byte block", small_written_after_free, "hakmem: double free of 0x", NULL},
    {"free(48-byte block + 16)", small_interior, "hakmem: free of 0x…, inside a block", NULL},
    {"free(where a 48-byte block would follow a slab's last)", small_past_the_last_block,
     "hakmem: free of 0x…, inside a block", NULL},
    {"free(the first byte of a slab of 48-byte blocks)", small_unit_start, "hakmem: free of invalid pointer 0x", NULL},
    {"free(p); free(p), 40000 B", large_twice, "hakmem: double free of 0x", NULL},
    {"double free of 300000 B after a flush", large_twice_after_release, "hakmem: double free of 0x", NULL},
    {"double free of a spare 40000 B block", large_twice_spare, "hakmem: double free of 0x", NULL},
    {"double free of a spare 40000 B block, sent back", large_twice_spare_sent_back, "hakmem: double free of 0x", NULL},
    {"double free of a spare 40000 B block, sent back and trimmed", large_twice_spare_trimmed,
     "hakmem: double free of 0x", NULL},
    {"free(40000-byte block + 4096)", large_interior, "hakmem: free of 0x", NULL},
    {"free(300000-byte block + 200000)", large_interior_far, "hakmem: free of 0x", NULL},
    {"free(p); free(p), 16 MiB", huge_twice, "hakmem: double free of 0x", NULL},
    {"free(p); malloc_trim(0); free(p), 200 MiB", jumbo_twice_unmapped, "hakmem: double free of 0x", NULL},
    {"free(16 MiB block + 8 MiB)", huge_interior, "hakmem: free of 0x", NULL},
    {"free(16 MiB block + 64)", huge_interior_near, "hakmem: free of 0x", NULL},
    {"free(300 MiB block + 200 MiB)", jumbo_interior_far, "hakmem: free of 0x…, inside a block (block size", NULL},
    {"realloc of a freed block", realloc_freed, "hakmem: realloc of 0x…, a block already freed", NULL},
    {"realloc of a freed block back in its slab", realloc_freed_home, "hakmem: realloc of 0x…, a block already freed", NULL},
    {"realloc of a freed block whose slab was given back and made anew", realloc_freed_slab_gone,
     "hakmem: realloc of 0x…, a block already freed", NULL},
    {"realloc(256-byte block + 32)", realloc_interior, "hakmem: realloc of 0x", NULL},
    {"realloc(16 MiB block + 64, 0)", realloc_huge_interior_to_0, "hakmem: realloc of 0x…, inside a block", NULL},
    {"realloc(static array)", realloc_foreign, "hakmem: realloc of invalid pointer 0x", NULL},
    {"realloc(p, 0) of a freed block", realloc_freed_to_0, "hakmem: realloc of 0x…, a block already freed", NULL},
    {"realloc(static array, 0)", realloc_foreign_to_0, "hakmem: realloc of invalid pointer 0x", NULL},
    {"realloc of a freed 8 MiB block", realloc_huge_freed, "hakmem: realloc of 0x…, a block already freed", NULL},
    {"hak_heap_check after a write to a freed block", heap_check_after_write_to_freed, "hakmem: heap check: ",
     "hakmem: corrupted free list at 0x"},
    {"hak_heap_check after a write to a freed 40000-byte block", heap_check_after_write_to_freed_large,
     "hakmem: heap check: ", "hakmem: "},
};

static void run_case(void *arg) { ((const misuse_t *)arg)->fn(); }

int main(void) {
  test_init();
  CHECK_MSG(hakmem_active(), "this test needs hakmem");
  const char *(*version)(void) = (const char *(*)(void))hakmem_sym("hak_version_string");
  bool encoded = version && strstr(version(), "(hardened)");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const misuse_t *c = &cases[i];
    child_result_t res;
    run_in_child(run_case, (void *)c, 20, &res);
    printf("  %s: %s, stderr: %s%s", c->name, describe_status(res.status), res.err[0] ? res.err : "(empty)\n",
           res.err[0] && res.err[strlen(res.err) - 1] != '\n' ? "\n" : "");
    CHECK_MSG(WIFSIGNALED(res.status) && WTERMSIG(res.status) == SIGABRT, "%s: child %s, expected SIGABRT", c->name,
              describe_status(res.status));
    const char *message = encoded && c->encoded ? c->encoded : c->message;
    const char *rest = strstr(message, "…");
    size_t head = rest ? (size_t)(rest - message) : strlen(message);
    CHECK_MSG(strncmp(res.err, message, head) == 0 && (!rest || strstr(res.err, rest + strlen("…"))),
              "%s: stderr does not say \"%s\"", c->name, message);
    CHECK_MSG(strchr(res.err, '\n') == res.err + strlen(res.err) - 1, "%s: more than one line", c->name);
  }
  return 0;
}
