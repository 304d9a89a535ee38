/* SPDX-License-Identifier: MIT */
/* The C++ allocation operators, defined in C under their Itanium-ABI names so
 * that the library needs no C++ runtime (docs/DESIGN.md, The C++ operators).
 * Failure follows the standard: the new-handler is called until it gives up,
 * then std::bad_alloc is thrown, both through libstdc++'s functions: weak
 * references, or looked up when needed (a C program may dlopen a C++ library
 * later).  The nothrow forms of new are libstdc++'s: they call operator new
 * below in a try block and turn std::bad_alloc into nullptr.  Names are for
 * LP64 (size_t mangles as 'm'). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include "api/api.h"

#ifndef HAK_NO_OVERRIDE
typedef void (*hk_new_handler_t)(void);
extern hk_new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));   /* std::get_new_handler() */
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn)); /* std::__throw_bad_alloc() */

/* A C++ runtime function: its weak reference, else from a runtime loaded
 * since, global or not (RTLD_LOCAL keeps a library's runtime in its scope). */
static void *cxx_function(void *weak, const char *name) {
  static const char *const runtimes[] = {"libstdc++.so.6", "libc++.so.1"};
  void *f = weak ? weak : dlsym(RTLD_DEFAULT, name);
  for (size_t i = 0; !f && i < sizeof runtimes / sizeof runtimes[0]; i++) {
    void *h = dlopen(runtimes[i], RTLD_LAZY | RTLD_NOLOAD);  /* only if loaded already */
    if (!h) continue;
    f = dlsym(h, name);
    dlclose(h);  /* what loaded it keeps it */
  }
  return f;
}

static __attribute__((noreturn, noinline)) void throw_bad_alloc(void) {
  void (*throw_it)(void) = cxx_function((void *)_ZSt17__throw_bad_allocv, "_ZSt17__throw_bad_allocv");
  if (throw_it) throw_it();
  hk_fatal("operator new: out of memory and no C++ runtime to throw std::bad_alloc", NULL);
}

static __attribute__((noinline)) void *new_retry(size_t size, size_t alignment) {
  for (;;) {
    hk_new_handler_t (*get_handler)(void) =
        cxx_function((void *)_ZSt15get_new_handlerv, "_ZSt15get_new_handlerv");
    hk_new_handler_t handler = get_handler ? get_handler() : NULL;
    if (!handler) throw_bad_alloc();
    handler();
    void *p = alignment ? hk_aligned(alignment, size) : hk_malloc_fast(size);
    if (p) return p;
  }
}

static inline void *new_plain(size_t size) {
  void *p = hk_malloc_fast(size);
  return hk_likely(p != NULL) ? p : new_retry(size, 0);
}

static inline void *new_aligned(size_t size, size_t alignment) {
  if (!hk_is_pow2(alignment)) throw_bad_alloc();
  void *p = hk_aligned(alignment, size);
  return hk_likely(p != NULL) ? p : new_retry(size, alignment);
}

/* The operator delete called `name` in force, looked up once into *cached
 * (1 until then); NULL if it is hakmem's own (`own`): nothing replaced. */
static void *replaced(void *_Atomic *cached, const char *name, void *own) {
  void *f = atomic_load_explicit(cached, memory_order_relaxed);
  if (f == (void *)1) {
    f = dlsym(RTLD_DEFAULT, name);
    if (f == own) f = NULL;
    atomic_store_explicit(cached, f, memory_order_relaxed);
  }
  return f;
}

/* A pointer the fast path did not take, given to a form of delete that
 * libstdc++ writes as a call to operator delete(void *) (sized, array,
 * nothrow), or, with its alignment, to operator delete(void *,
 * std::align_val_t) (the other aligned ones): where the program replaced
 * that one, a pointer that is none of hakmem's (its own operator new's)
 * goes to it, as without hakmem; the rest to free's slow path. */
extern void own_delete(void *p);  /* _ZdlPv's address here, not the one in force (the GOT's) */
extern void own_aligned_delete(void *p, size_t alignment);
static __attribute__((noinline, cold)) void derived_delete_slow(void *p, size_t alignment) {
  static void *_Atomic plain = (void *)1, *_Atomic aligned = (void *)1;
  void *f = alignment ? replaced(&aligned, "_ZdlPvSt11align_val_t", (void *)own_aligned_delete)
                      : replaced(&plain, "_ZdlPv", (void *)own_delete);
  if (!f || hk_class_map_lookup(p) != 0) hk_free_slow(p);
  else if (alignment) ((void (*)(void *, size_t))f)(p, alignment);
  else ((void (*)(void *))f)(p);
}

HK_EXPORT void *_Znwm(size_t n) { return new_plain(n); }                           /* new(size_t) */
HK_EXPORT void *_Znam(size_t n) { return new_plain(n); }                           /* new[](size_t) */
HK_EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a); }
HK_EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a); }

HK_EXPORT void _ZdlPv(void *p) { hk_free_fast(p); }  /* delete(void*) */
extern __typeof__(_ZdlPv) own_delete __attribute__((alias("_ZdlPv"), visibility("hidden")));
HK_EXPORT void _ZdaPv(void *p) { hk_free_with(p, derived_delete_slow, 0); }
/* sized */
HK_EXPORT void _ZdlPvm(void *p, size_t n) { hk_free_with(p, derived_delete_slow, 0); }
HK_EXPORT void _ZdaPvm(void *p, size_t n) { hk_free_with(p, derived_delete_slow, 0); }
/* aligned (an alignment is a power of 2, never 0) */
HK_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a) { hk_free_fast(p); }
extern __typeof__(_ZdlPvSt11align_val_t) own_aligned_delete
    __attribute__((alias("_ZdlPvSt11align_val_t"), visibility("hidden")));
HK_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a) { hk_free_with(p, derived_delete_slow, a); }
HK_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { hk_free_with(p, derived_delete_slow, a); }
HK_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) { hk_free_with(p, derived_delete_slow, a); }
/* nothrow */
HK_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) { hk_free_with(p, derived_delete_slow, 0); }
HK_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) { hk_free_with(p, derived_delete_slow, 0); }
HK_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) {
  hk_free_with(p, derived_delete_slow, a);
}
HK_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) {
  hk_free_with(p, derived_delete_slow, a);
}
#endif
