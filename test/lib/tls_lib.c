/* SPDX-License-Identifier: MIT */
/* Part of the "dlopen_tls" test: a library with thread-local variables too
 * large for the static TLS space, so that, once it is loaded with dlopen,
 * glibc allocates each thread's copy with malloc on first use and frees it
 * with free when the thread exits or the library is unloaded. */
#include <stddef.h>

#define TLS_BUF 200000

static __thread unsigned char buf[TLS_BUF] = {42, 43, 44};
static __thread __attribute__((aligned(4096))) unsigned long aligned_word = 7;
static __thread unsigned long counter;

/* Adds v to this thread's counter and returns it; fails (returns 0) if the
 * thread's copy of the variables does not hold their initial image. */
unsigned long tls_add(unsigned long v) {
  if (counter == 0 && (buf[0] != 42 || buf[1] != 43 || buf[2] != 44 || buf[TLS_BUF - 1] != 0 ||
                       aligned_word != 7 || ((size_t)&aligned_word & 4095) != 0))
    return 0;
  buf[v % TLS_BUF] = (unsigned char)v;
  counter += v;
  return counter;
}
