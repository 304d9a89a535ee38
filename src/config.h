/* SPDX-License-Identifier: MIT */
/* Build variants: the one place where compile-time switches live.
 *
 *   HAK_VARIANT 1  fast      the default; nothing but the allocator on the fast paths
 *   HAK_VARIANT 2  standard  fast + consistency checks in the slow paths
 *   HAK_VARIANT 3  observe   standard + counters on the fast paths (the hits
 *                            of HAKMEM_TINY_FRONT_METRICS)
 *   HAK_VARIANT 4  hardened  standard + free lists encoded with a per-process
 *                            key and checked on use, a canary after every block
 *                            checked on free, guard pages after SuperSlabs and
 *                            huge blocks, fresh blocks handed out in a random
 *                            order (libhakmem-hardened.so)
 *
 * HAK_NO_OVERRIDE builds a library that defines only the hak_* names (for
 * running the allocator under ASan/TSan next to the sanitizer's own malloc). */
#ifndef HAK_CONFIG_H
#define HAK_CONFIG_H

#ifndef HAK_VARIANT
#define HAK_VARIANT 1
#endif

#if HAK_VARIANT == 1
#define HAK_VARIANT_NAME "fast"
#define HAK_CHECKS 0
#define HAK_OBSERVE 0
#define HAK_HARDENED 0
#elif HAK_VARIANT == 2
#define HAK_VARIANT_NAME "standard"
#define HAK_CHECKS 1
#define HAK_OBSERVE 0
#define HAK_HARDENED 0
#elif HAK_VARIANT == 3
#define HAK_VARIANT_NAME "observe"
#define HAK_CHECKS 1
#define HAK_OBSERVE 1
#define HAK_HARDENED 0
#elif HAK_VARIANT == 4
#define HAK_VARIANT_NAME "hardened"
#define HAK_CHECKS 1
#define HAK_OBSERVE 0
#define HAK_HARDENED 1
#else
#error "HAK_VARIANT must be 1, 2, 3 or 4"
#endif

/* Bytes at the end of every block of a size class that hold its canary. */
#define HK_CANARY (HAK_HARDENED ? 8 : 0)

#endif
