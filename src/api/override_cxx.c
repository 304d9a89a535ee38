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

/* A program may replace operator new and delete, C++98's pair or C++17's
 * aligned one, and leave the other forms to the C++ runtime, whose forms
 * call the pair's: libstdc++'s new[] calls operator new, its sized, array
 * and nothrow deletes call operator delete (or delete[]), so that the
 * program's see every block.  hakmem's forms do the same where the program
 * replaced one (a leak checker counting calls, a header before each block):
 * their fast paths are shut until hakmem knows it did not (`gate`: a bound
 * of 0 sends every call to its slow path, which forwards; then malloc's and
 * free's own bounds, the same instructions).  What replaces what is learnt
 * at load (dlsym), while the process has one thread; a thread that finds it
 * not yet learnt looks it up itself, waiting for no other: dlsym takes the
 * loader's lock, which a thread running a dlopen's constructors holds. */
typedef struct pair {
  void *new_, *delete_, *array_delete;  /* the program's, NULL where hakmem's are in force */
} pair_t;
static pair_t published[2];  /* plain, then aligned: written once, before `learnt` */
static struct {
  size_t units, new_below, aligned_units;  /* written once (release), read plainly as malloc's bounds are */
} gate;
static atomic_int learnt;  /* 0: not yet, 1: being published (by the first to learn), 2: published */

/* hakmem's own, by hidden aliases (defined below): their addresses here,
 * not those of the ones in force (the GOT's) */
extern void *own_new(size_t n), *own_aligned_new(size_t n, size_t a);
extern void own_delete(void *p), own_array_delete(void *p), own_aligned_delete(void *p, size_t a),
    own_aligned_array_delete(void *p, size_t a);
static void *replaced(const char *name, const void *own) {
  void *f = dlsym(RTLD_DEFAULT, name);
  return f == own ? NULL : f;
}

/* The pairs in force (plain, then aligned): the published ones, else
 * looked up into `mine` (and published, by the first); NULL before the
 * process is set up, where hakmem's own serve. */
static const pair_t *pairs(pair_t mine[2]) {
  if (atomic_load_explicit(&learnt, memory_order_acquire) == 2) return published;
  if (!atomic_load_explicit(&hk_ready, memory_order_acquire)) return NULL;
  mine[0] = (pair_t){replaced("_Znwm", (void *)own_new), replaced("_ZdlPv", (void *)own_delete),
                     replaced("_ZdaPv", (void *)own_array_delete)};
  mine[1] = (pair_t){replaced("_ZnwmSt11align_val_t", (void *)own_aligned_new),
                     replaced("_ZdlPvSt11align_val_t", (void *)own_aligned_delete),
                     replaced("_ZdaPvSt11align_val_t", (void *)own_aligned_array_delete)};
  int was = 0;
  if (!atomic_compare_exchange_strong_explicit(&learnt, &was, 1, memory_order_relaxed, memory_order_relaxed))
    return mine;  /* another publishes the same */
  published[0] = mine[0], published[1] = mine[1];
  size_t units = hk_fast.map_units;
  __atomic_store_n(&gate.units, mine[0].delete_ || mine[0].array_delete ? 0 : units, __ATOMIC_RELEASE);
  __atomic_store_n(&gate.new_below, mine[0].new_ ? 0 : HK_MALLOC_BELOW, __ATOMIC_RELEASE);
  __atomic_store_n(&gate.aligned_units, mine[1].delete_ || mine[1].array_delete ? 0 : units, __ATOMIC_RELEASE);
  atomic_store_explicit(&learnt, 2, memory_order_release);
  return published;
}

__attribute__((constructor)) static void learn_at_load(void) {
  hk_process_init();  /* the set-up first: a library's constructors run in no set order */
  pairs((pair_t[2]){{0}});
}

/* new[]: the program's operator new, where it replaced it (whatever it
 * returns), else hakmem's, with its retries. */
static __attribute__((noinline, cold)) void *array_new_slow(size_t size) {
  pair_t mine[2];
  const pair_t *r = pairs(mine);
  if (r && r[0].new_) return ((void *(*)(size_t))r[0].new_)(size);
  return new_plain(size);
}

/* A derived delete's slow path: `how` is the alignment (0: none) times 2,
 * plus 1 for the forms that libstdc++ writes as calls to delete[] (which,
 * where it is hakmem's, calls delete).  The program's, where it replaced
 * the one called; else free's own (p failed its fast path, or the gate was
 * shut).  A NULL p reaches neither: libstdc++'s would hand it on. */
static __attribute__((noinline, cold)) void derived_delete_slow(void *p, size_t how) {
  size_t alignment = how >> 1;
  pair_t mine[2];
  const pair_t *r = pairs(mine);
  if (r) r += alignment != 0;
  void *f = !r ? NULL : (how & 1) && r->array_delete ? r->array_delete : r->delete_;
  if (!f) hk_free_fast(p);
  else if (alignment) ((void (*)(void *, size_t))f)(p, alignment);
  else ((void (*)(void *))f)(p);
}
#define DERIVED_DELETE(p, units, how) hk_free_with(p, units, derived_delete_slow, how)

HK_EXPORT void *_Znwm(size_t n) { return new_plain(n); } /* new(size_t) */
HK_EXPORT void *_Znam(size_t n) { return hk_malloc_below(n, gate.new_below, array_new_slow); } /* new[](size_t) */
HK_EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t a) { return new_aligned(n, a); }
HK_EXPORT void *_ZnamSt11align_val_t(size_t n, size_t a) {
  pair_t mine[2];
  const pair_t *r = pairs(mine);
  if (hk_unlikely(r && r[1].new_)) return ((void *(*)(size_t, size_t))r[1].new_)(n, a);
  return new_aligned(n, a);
}

HK_EXPORT void _ZdlPv(void *p) { hk_free_fast(p); }  /* delete(void*) */
HK_EXPORT void _ZdaPv(void *p) { DERIVED_DELETE(p, gate.units, 0); }
/* sized */
HK_EXPORT void _ZdlPvm(void *p, size_t n) { DERIVED_DELETE(p, gate.units, 0); }
HK_EXPORT void _ZdaPvm(void *p, size_t n) { DERIVED_DELETE(p, gate.units, 1); }
/* aligned (an alignment is a power of 2, never 0) */
HK_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t a) { hk_free_fast(p); }
HK_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t a) { DERIVED_DELETE(p, gate.aligned_units, a << 1); }
HK_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t a) { DERIVED_DELETE(p, gate.aligned_units, a << 1); }
HK_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t a) {
  DERIVED_DELETE(p, gate.aligned_units, a << 1 | 1);
}
/* nothrow */
HK_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *nt) { DERIVED_DELETE(p, gate.units, 0); }
HK_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *nt) { DERIVED_DELETE(p, gate.units, 1); }
HK_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) {
  DERIVED_DELETE(p, gate.aligned_units, a << 1);
}
HK_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t a, const void *nt) {
  DERIVED_DELETE(p, gate.aligned_units, a << 1 | 1);
}
#define OWN(name, real) extern __typeof__(name) name __attribute__((alias(#real), visibility("hidden")))
OWN(own_new, _Znwm);
OWN(own_aligned_new, _ZnwmSt11align_val_t);
OWN(own_delete, _ZdlPv);
OWN(own_array_delete, _ZdaPv);
OWN(own_aligned_delete, _ZdlPvSt11align_val_t);
OWN(own_aligned_array_delete, _ZdaPvSt11align_val_t);
#endif
