/* SPDX-License-Identifier: MIT */
/* hakmem only, run with LD_PRELOAD=libhakmem.so: the preload is in effect.
 * hak_version is found and matches the header; every C and C++ allocation
 * function hakmem defines resolves to libhakmem.so, not to libc or libstdc++;
 * and a block from plain malloc shows in hak_os_stats, so the allocations
 * of the program really go to hakmem. */
#include "testutil.h"

#include <malloc.h>

static void hakmem_is_preloaded(void) {
  int (*version)(void) = (int (*)(void))hakmem_sym("hak_version");
  const char *(*version_string)(void) = (const char *(*)(void))hakmem_sym("hak_version_string");
  const char *file = "";
  CHECK_MSG(version != NULL, "hak_version not found: LD_PRELOAD=%s not in effect",
            getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : "(unset)");
  CHECK_EQ(version(), HAKMEM_VERSION);
  CHECK(version_string != NULL);
  CHECK_MSG(strncmp(version_string(), "hakmem ", 7) == 0, "hak_version_string() = \"%s\"",
            version_string());
  symbol_object("hak_version", &file);
  CHECK_MSG(strstr(file, "libhakmem") != NULL, "hak_version comes from %s", file);
  printf("  %s from %s\n", version_string(), file);
}

static void all_entry_points_are_hakmem(void) {
  static const char *const names[] = {
      "malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign",
      "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size",
      "free_sized", "free_aligned_sized", "cfree",
      /* glibc's internal names, which some programs and libraries call */
      "__libc_malloc", "__libc_free", "__libc_calloc", "__libc_realloc", "__libc_memalign",
      "__libc_valloc", "__libc_pvalloc", "__posix_memalign",
      /* operator new / delete: plain, array, sized, aligned, nothrow delete.
       * (The nothrow forms of new are libstdc++'s, by design: they call the
       * operator new above; cxx_new checks how they behave.) */
      "_Znwm", "_Znam", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
      "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
      "_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t",
      "_ZdaPvmSt11align_val_t", "_ZdlPvSt11align_val_tRKSt9nothrow_t",
      "_ZdaPvSt11align_val_tRKSt9nothrow_t",
      /* the prefixed API */
      "hak_malloc", "hak_calloc", "hak_realloc", "hak_reallocarray", "hak_free",
      "hak_free_sized", "hak_free_aligned_sized", "hak_posix_memalign", "hak_aligned_alloc",
      "hak_memalign", "hak_valloc", "hak_pvalloc", "hak_malloc_usable_size",
      "hak_thread_flush", "hak_os_stats", "hak_stats_print", "hak_version_string", NULL};
  check_symbols_from_hakmem(names);
}

static void malloc_shows_in_os_stats(void) {
  hak_os_stats_t during;
  size_t (*usable)(const void *) = (size_t (*)(const void *))hakmem_sym("hak_malloc_usable_size");
  unsigned char *p;
  p = malloc(64 * MiB);
  CHECK(p != NULL);
  p[0] = p[64 * MiB - 1] = 1;
  CHECK(get_os_stats(&during));
  CHECK_MSG(during.mapped_bytes >= 64 * MiB, "malloc(64 MiB) held, but hakmem maps %llu bytes",
            during.mapped_bytes);
  CHECK(during.peak_mapped_bytes >= during.mapped_bytes);
  CHECK(during.mmap_calls >= 1);
  CHECK(usable(p) >= 64 * MiB);
  free(p);
}

int main(void) {
  test_init();
  RUN(hakmem_is_preloaded);
  RUN(all_entry_points_are_hakmem);
  RUN(malloc_shows_in_os_stats);
  return 0;
}
