/* SPDX-License-Identifier: MIT */
/* Options: read from the environment once, at start-up, into hk_opt. */
#include <stdlib.h>
#include "internal.h"

hk_options_t hk_opt = {
    .warm_pool_size = 4,
    .purge_delay_ms = 100,
    .os_stats = false,
    .verbose = false,
};

/* A decimal number, or `fallback` when the variable is unset or malformed. */
static unsigned long env_number(const char *name, unsigned long fallback, unsigned long max) {
  const char *s = getenv(name);
  if (!s || !*s) return fallback;
  unsigned long v = 0;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > (max - (unsigned long)(*s - '0')) / 10) {
      hk_message("hakmem: ignoring %s (expected a number up to %lu)\n", name, max);
      return fallback;
    }
    v = v * 10 + (unsigned long)(*s - '0');
  }
  return v;
}

static bool env_flag(const char *name, bool fallback) {
  return env_number(name, fallback ? 1 : 0, 1) != 0;
}

void hk_options_init(void) {
  hk_opt.warm_pool_size = (unsigned)env_number("HAKMEM_WARM_POOL_SIZE", hk_opt.warm_pool_size, 1024);
  hk_opt.purge_delay_ms = (unsigned)env_number("HAKMEM_PURGE_DELAY_MS", hk_opt.purge_delay_ms, 3600000);
  hk_opt.os_stats = env_flag("HAKMEM_SS_OS_STATS", hk_opt.os_stats);
  hk_opt.verbose = env_flag("HAKMEM_VERBOSE", hk_opt.verbose);
}
