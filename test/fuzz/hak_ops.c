/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the input is a program of operations on hakmem's own API
 * (hak_malloc, hak_calloc, hak_realloc, hak_reallocarray, hak_free and its
 * sized forms, hak_posix_memalign, hak_aligned_alloc, hak_memalign,
 * hak_valloc, hak_pvalloc, hak_malloc_usable_size, hak_thread_flush,
 * hak_malloc_trim) on 64 slots, some filling several slots with blocks of
 * one size, checked against a shadow model of the live
 * blocks:
 *
 *   - an allocation returns a block whose usable size covers the request,
 *     aligned as asked (16 bytes at least) and overlapping no live block;
 *     calloc's is zero; an impossible request returns NULL with ENOMEM (an
 *     invalid alignment EINVAL);
 *   - every block is filled over its whole usable size with a pattern of its
 *     own (unique first and last words, one byte value between), checked
 *     intact before it is freed or reallocated, on demand, and at the end of
 *     the input;
 *   - realloc keeps the first min(old, new) requested bytes, and a failed one
 *     leaves the block as it was; malloc_usable_size does not change while a
 *     block lives.
 *
 * Input: a sequence of operations, each an opcode byte followed by its
 * operands (a slot byte, sizes as four bytes, alignments as one byte); a
 * missing byte reads as 0.  At the end every block is checked
 * and freed.  The library is built with HAK_NO_OVERRIDE (malloc stays the
 * sanitizer's), with AddressSanitizer when the compiler has it, so its own
 * memory accesses are checked too; see test/test.mk. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "testutil.h"

enum { SLOTS = 64 };

typedef struct shadow {
  unsigned char *p;  /* NULL: the slot is empty */
  size_t size;       /* requested */
  size_t usable;     /* hak_malloc_usable_size when it was allocated */
  size_t align;      /* asked for, 16 at least */
  uint64_t seed;     /* its pattern, over the usable size */
} shadow_t;

static shadow_t slots[SLOTS];
static uint64_t next_seed;

typedef struct input {
  const uint8_t *p;
  size_t n;
} input_t;

static unsigned byte(input_t *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}

static size_t two_bytes(input_t *in) {
  size_t hi = byte(in);
  return hi << 8 | byte(in);
}

/* What a size operand asks for, and whether no allocator could give it. */
typedef struct request {
  size_t size;
  bool impossible;
} request_t;

/* A range byte, then an octave byte and two bytes for the place in it:
 * every octave as likely as any other, so that each size class gets its
 * share and blocks of one class often live side by side. */
static request_t read_size(input_t *in) {
  unsigned range = byte(in) % 32, octave = byte(in);
  size_t x = two_bytes(in), lo;
  request_t r = {0, false};
  if (range < 20) {
    lo = (size_t)8 << octave % 12; /* 9 B .. 32 KiB */
    r.size = lo + 1 + x % lo;
  } else if (range < 23) {
    r.size = x % 257; /* 0 .. 256 B, one class every 16 B */
  } else if (range < 27) {
    lo = (size_t)32768 << octave % 5; /* 32 KiB .. 1 MiB, the large classes */
    r.size = lo + 1 + (x << 4) % lo;
  } else if (range < 29) {
    r.size = ((size_t)1 << (4 + octave % 17)) + x % 3 - 1; /* an octave's edge, 15 B .. 1 MiB + 1 */
  } else if (range == 29) {
    r.size = MiB + 1 + (x << 4); /* huge, up to 2 MiB */
  } else {
    r.size = SIZE_MAX - (x % 4) * 4095, r.impossible = true;
  }
  return r;
}

/* Powers of two from 1 B to 4 MiB; now and then one that is not. */
static size_t read_alignment(input_t *in) {
  unsigned b = byte(in);
  size_t a = (size_t)1 << (b % 23);
  return b & 0x80 ? a + 8 * (b % 3 + 1) : a;
}

static bool overlaps(const unsigned char *p, size_t n, const shadow_t *s) {
  return s->p && p < s->p + s->usable && s->p < p + n;
}

/* A block's pattern: its first and last 8 bytes hold words unique to it,
 * the bytes between one value of its own.  Filled with memset and checked
 * with memcmp, which are fast (the loops of this file are instrumented for
 * coverage and by the sanitizer). */
static unsigned char body_byte(uint64_t seed) { return (unsigned char)(1 + seed % 255); }
static uint64_t end_word(uint64_t seed, int tail) {
  uint64_t w = seed * 0x9e3779b97f4a7c15ull;
  return tail ? ~w : w;
}
static size_t body_start(size_t usable) { return usable >= 16 ? 8 : 0; }
static size_t body_end(size_t usable) { return usable >= 16 ? usable - 8 : usable; }

static void fill(unsigned char *p, size_t usable, uint64_t seed) {
  uint64_t head = end_word(seed, 0), tail = end_word(seed, 1);
  memset(p, body_byte(seed), usable);
  if (usable >= 16) {
    memcpy(p, &head, 8);
    memcpy(p + usable - 8, &tail, 8);
  }
}

/* The expected byte at offset i of a block of `usable` bytes filled with seed. */
static unsigned char expected_byte(size_t i, size_t usable, uint64_t seed) {
  uint64_t w;
  if (i >= body_start(usable) && i < body_end(usable)) return body_byte(seed);
  w = end_word(seed, i >= body_end(usable));
  return ((const unsigned char *)&w)[i >= body_end(usable) ? i - body_end(usable) : i];
}

/* Offset of the first of p[0..n) that differs from the pattern of a block of
 * `usable` bytes filled with seed, or SIZE_MAX. */
static size_t first_difference(const unsigned char *p, size_t n, size_t usable, uint64_t seed) {
  static unsigned char body[64 * 1024];
  size_t i, end = body_end(usable) < n ? body_end(usable) : n;
  for (i = 0; i < n && i < body_start(usable); i++)
    if (p[i] != expected_byte(i, usable, seed)) return i;
  memset(body, body_byte(seed), sizeof body);
  while (i < end) {
    size_t chunk = end - i < sizeof body ? end - i : sizeof body, j;
    if (memcmp(p + i, body, chunk) != 0)
      for (j = 0; j < chunk; j++)
        if (p[i + j] != body[j]) return i + j;
    i += chunk;
  }
  for (; i < n; i++)
    if (p[i] != expected_byte(i, usable, seed)) return i;
  return SIZE_MAX;
}

static void check_contents(const shadow_t *s) {
  size_t off = first_difference(s->p, s->usable, s->usable, s->seed);
  CHECK_MSG(off == SIZE_MAX, "block %p (%zu bytes asked, %zu usable) corrupted at offset %zu",
            (void *)s->p, s->size, s->usable, off);
}

static bool all_zero(const unsigned char *p, size_t n) {
  static const unsigned char zero[64 * 1024];
  for (; n; ) {
    size_t chunk = n < sizeof zero ? n : sizeof zero;
    if (memcmp(p, zero, chunk) != 0) return false;
    p += chunk;
    n -= chunk;
  }
  return true;
}

/* Takes p (of size bytes, `align` asked) into slot s: checks it against the
 * model and fills it. */
static void take(shadow_t *s, void *p, size_t size, size_t align) {
  int i;
  CHECK_MSG(p != NULL, "allocation of %zu bytes failed", size);
  s->align = align < 16 ? 16 : align;
  CHECK_ALIGNED(p, s->align);
  s->p = p;
  s->size = size;
  s->usable = hak_malloc_usable_size(p);
  CHECK_MSG(s->usable >= size, "usable size %zu < %zu", s->usable, size);
  for (i = 0; i < SLOTS; i++)
    CHECK_MSG(&slots[i] == s || !overlaps(s->p, s->usable, &slots[i]),
              "block %p (%zu usable) overlaps live block %p (%zu usable)", p, s->usable,
              (void *)slots[i].p, slots[i].usable);
  s->seed = ++next_seed;
  fill(s->p, s->usable, s->seed);
}

static void release(shadow_t *s, input_t *in) {
  check_contents(s);
  switch (byte(in) % 3) {
    case 0: hak_free(s->p); break;
    case 1: hak_free_sized(s->p, s->size); break;
    default: hak_free_aligned_sized(s->p, s->align, s->size); break;
  }
  s->p = NULL;
}

/* An impossible request: NULL and ENOMEM. */
static void expect_enomem(void *p, const char *what, size_t size) {
  int err = errno;
  CHECK_MSG(p == NULL, "%s(%zu) succeeded", what, size);
  CHECK_MSG(err == ENOMEM, "%s(%zu): errno %d, not ENOMEM", what, size, err);
}

static void op_malloc(shadow_t *s, input_t *in) {
  request_t r = read_size(in);
  void *p;
  errno = 0;
  p = hak_malloc(r.size);
  if (r.impossible) return expect_enomem(p, "hak_malloc", r.size);
  take(s, p, r.size, 16);
}

static void op_calloc(shadow_t *s, input_t *in) {
  size_t count = byte(in) + 1;
  request_t r = read_size(in);
  size_t each = r.impossible ? r.size : r.size / count + 1, total;
  bool overflow = __builtin_mul_overflow(count, each, &total);
  void *p;
  errno = 0;
  p = hak_calloc(count, each);
  if (overflow || total >= (size_t)PTRDIFF_MAX) return expect_enomem(p, "hak_calloc", each);
  CHECK_MSG(p != NULL, "hak_calloc(%zu, %zu) failed", count, each);
  CHECK_MSG(all_zero(p, total), "hak_calloc(%zu, %zu) not zeroed", count, each);
  take(s, p, total, 16);
}

static void op_realloc(shadow_t *s, input_t *in, bool array) {
  size_t count = array ? byte(in) % 4 + 1 : 1, keep, off;
  request_t r = read_size(in);
  size_t size = r.impossible ? r.size : r.size / count * count;
  shadow_t old = *s;
  unsigned char *q;
  if (old.p) check_contents(&old);
  errno = 0;
  q = array ? hak_reallocarray(old.p, count, size / count) : hak_realloc(old.p, size);
  if (r.impossible) {
    expect_enomem(q, array ? "hak_reallocarray" : "hak_realloc", size);
    if (old.p) check_contents(&old); /* a failed realloc leaves the block alone */
    return;
  }
  if (size == 0 && old.p) { /* frees, as glibc's does */
    CHECK_MSG(q == NULL, "hak_realloc(%p, 0) returned %p", (void *)old.p, (void *)q);
    s->p = NULL;
    return;
  }
  CHECK_MSG(q != NULL, "hak_realloc(%p, %zu) failed", (void *)old.p, size);
  keep = old.p ? (size < old.size ? size : old.size) : 0;
  off = first_difference(q, keep, old.usable, old.seed);
  CHECK_MSG(off == SIZE_MAX, "hak_realloc(%p, %zu -> %zu) = %p: byte %zu changed", (void *)old.p,
            old.size, size, (void *)q, off);
  s->p = NULL;
  take(s, q, size, 16);
}

static void op_aligned(shadow_t *s, input_t *in) {
  unsigned how = byte(in) % 5;
  size_t align = read_alignment(in), page = (size_t)sysconf(_SC_PAGESIZE);
  bool pow2 = (align & (align - 1)) == 0;
  request_t r = read_size(in);
  void *p = NULL;
  int rc;
  errno = 0;
  switch (how) {
    case 0:
      rc = hak_posix_memalign(&p, align, r.size);
      if (!pow2 || align < sizeof(void *)) {
        CHECK_MSG(rc == EINVAL && p == NULL, "hak_posix_memalign(%zu, %zu) = %d", align, r.size, rc);
        return;
      }
      if (r.impossible) {
        CHECK_MSG(rc == ENOMEM && p == NULL, "hak_posix_memalign(%zu, %zu) = %d", align, r.size, rc);
        return;
      }
      CHECK_MSG(rc == 0, "hak_posix_memalign(%zu, %zu) = %d", align, r.size, rc);
      break;
    case 1:
      p = hak_aligned_alloc(align, r.size);
      if (!pow2) {
        CHECK_MSG(p == NULL && errno == EINVAL, "hak_aligned_alloc(%zu, %zu): %p, errno %d", align,
                  r.size, p, errno);
        return;
      }
      break;
    case 2:
      p = hak_memalign(align, r.size);
      while (align & (align - 1)) align += align & -align; /* rounded up to a power of two */
      break;
    case 3:
      p = hak_valloc(r.size);
      align = page;
      break;
    default:
      p = hak_pvalloc(r.size);
      align = page;
      if (!r.impossible) r.size = r.size ? (r.size + page - 1) / page * page : page;
      break;
  }
  if (r.impossible) return expect_enomem(p, "aligned allocation", r.size);
  take(s, p, r.size, align);
}

/* Blocks of one size into consecutive slots, from s on: neighbours of one
 * class, where a block that outgrows its bounds meets another. */
static void op_batch(shadow_t *s, input_t *in) {
  unsigned count = 2 + byte(in) % 7, i;
  request_t r = read_size(in);
  size_t first = (size_t)(s - slots);
  if (r.impossible) return;
  for (i = 0; i < count; i++) {
    shadow_t *t = &slots[(first + i) % SLOTS];
    if (t->p) release(t, in);
    take(t, hak_malloc(r.size), r.size, 16);
  }
}

static void op_usable(const shadow_t *s) {
  size_t usable = hak_malloc_usable_size(s->p);
  CHECK_MSG(usable == s->usable, "usable size of %p changed: %zu, then %zu", (void *)s->p,
            s->usable, usable);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size};
  int i;
  while (in.n) {
    unsigned op = byte(&in) % 13;
    shadow_t *s = &slots[byte(&in) % SLOTS];
    switch (op) {
      case 0:
      case 1:
        if (s->p) release(s, &in);
        op_malloc(s, &in);
        break;
      case 2:
        if (s->p) release(s, &in);
        op_calloc(s, &in);
        break;
      case 3:
      case 4:
        op_realloc(s, &in, op == 4);
        break;
      case 5:
      case 6:
        if (s->p) release(s, &in);
        break;
      case 7:
        if (s->p) release(s, &in);
        op_aligned(s, &in);
        break;
      case 8:
        if (s->p) op_usable(s);
        break;
      case 9:
        if (s->p) check_contents(s);
        break;
      case 10:
        hak_thread_flush();
        break;
      case 11:
        if (byte(&in) % 8 == 0) {
          int r = hak_malloc_trim(0);  /* 1 if it gave memory back: a second call has none left */
          CHECK(r == 0 || r == 1);
          CHECK(r == 0 || hak_malloc_trim(0) == 0);
        }
        break;
      default:
        op_batch(s, &in);
        break;
    }
  }
  for (i = 0; i < SLOTS; i++)
    if (slots[i].p) release(&slots[i], &in);
  return 0;
}
