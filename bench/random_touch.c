/* SPDX-License-Identifier: MIT */
/* random_touch: random_mixed with blocks used as programs use them.  The
 * same WS slots and sizes MIN..MAX; TOUCH says what is done with a block:
 *   ends   its first and last bytes are written after malloc and read
 *          before free (a header and a trailer, a string's terminator);
 *   whole  it is written whole after malloc and its first and last bytes
 *          read before free (a buffer filled, then consumed).
 * random_mixed writes only the first byte, so an allocator that hands out
 * blocks whose far end is cold, or reads freed memory, pays for it here and
 * not there.  Every iteration is one op. */
#include <string.h>

#include "bench.h"

int main(int argc, char **argv) {
  args_init(argc, "random_touch [ITERS [WS [SEED [MIN MAX [ends|whole]]]]]", 6);
  if (argc == 5) usage();
  uint64_t iters = arg_u64(argc, argv, 1, 20000000, 1, UINT64_MAX);
  uint64_t ws = arg_u64(argc, argv, 2, 400, 1, 1u << 30);
  uint64_t seed = arg_u64(argc, argv, 3, 1, 0, UINT64_MAX);
  uint64_t min = arg_u64(argc, argv, 4, 16, 1, 1u << 30);
  uint64_t max = arg_u64(argc, argv, 5, 1040, min, 1u << 30);
  int whole = argc > 6 && strcmp(argv[6], "whole") == 0;
  if (argc > 6 && !whole && strcmp(argv[6], "ends") != 0) usage();

  struct slot {
    char *p;
    size_t size;
  } *slots = calloc(ws, sizeof *slots);
  if (!slots) out_of_memory(ws * sizeof *slots);
  uint64_t rng = rng_init(seed), span = max - min + 1;
  unsigned sink = 0;

  double t0 = now_sec();
  for (uint64_t n = iters; n; n--) {
    uint64_t r = rng_next(&rng);
    struct slot *s = &slots[below((uint32_t)r, ws)];
    if (s->p) {
      sink += (unsigned char)s->p[0] + (unsigned char)s->p[s->size - 1];
      free(s->p);
      s->p = NULL;
    } else {
      size_t size = min + below((uint32_t)(r >> 32), span);
      char *p = malloc(size);
      if (whole) {
        memset(p, (int)n, size);
      } else {
        p[0] = (char)n;
        p[size - 1] = (char)size;
      }
      s->p = p;
      s->size = size;
    }
  }
  double seconds = now_sec() - t0;

  for (uint64_t i = 0; i < ws; i++) free(slots[i].p);
  free(slots);
  printf("RESULT bench=random_touch iters=%llu ws=%llu seed=%llu min=%llu max=%llu touch=%s sink=%u",
         (unsigned long long)iters, (unsigned long long)ws, (unsigned long long)seed, (unsigned long long)min,
         (unsigned long long)max, whole ? "whole" : "ends", sink);
  result_end((double)iters, seconds);
  return 0;
}
