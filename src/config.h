/* SPDX-License-Identifier: MIT */
/* Build variants: the one place where compile-time switches live.
 *
 *   HAK_VARIANT 1  fast      the default; nothing but the allocator on the fast paths
 *   HAK_VARIANT 2  standard  fast + consistency checks in the slow paths
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
#elif HAK_VARIANT == 2
#define HAK_VARIANT_NAME "standard"
#define HAK_CHECKS 1
#else
#error "HAK_VARIANT must be 1 or 2"
#endif

#endif
