/* SPDX-License-Identifier: MIT */
/* The heap profile's stack walker (x86-64): the call frame information
 * (.eh_frame, which gcc emits for every function there) read once per return
 * address and kept, so that a sampled stack costs a table lookup per frame,
 * not the C library's unwinder's CIE and FDE search and interpretation
 * (about 1 us a stack of 7 frames).  Only the rules that compiled C and C++
 * use are kept: the CFA at rsp or rbp plus an offset, the return address and
 * rbp saved at offsets from it.  Anything else (an expression, a signal
 * frame, a register saved in a register) ends the walk with "unknown", and
 * the caller takes the C library's backtrace() for that sample. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>
#include "service/service.h"

#if defined(__x86_64__) && defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)

enum { RBP = 6, RSP = 7, RA = 16 };
enum { RULE_BITS = 12, RULES = 1 << RULE_BITS, STATES = 4 };

/* How a frame at one pc finds its caller's: cfa = (rbp or rsp) + its
 * offset; the return address at cfa + ra_off, rbp at cfa + rbp_off.  One
 * word, so that a kept rule is read and written whole. */
typedef struct rule {
  int32_t cfa;                /* the offset times 2, plus 1 if from rbp */
  int16_t ra_off;             /* 0: the outermost frame (return address undefined) */
  int16_t rbp_off;            /* 0: rbp kept */
} rule_t;
_Static_assert(sizeof(rule_t) == sizeof(uint64_t), "a rule is a word");

typedef struct slot {
  uintptr_t pc;               /* 0: a free slot */
  uint64_t rule;
} slot_t;

/* Read without a lock, as a sequence lock's readers read: a rule is kept
 * in the first free slot of the RULE_PROBES from its pc's, by the one
 * thread that holds `making`, with `epoch` odd while it writes; one whose
 * slots are all taken is read from its FDE at each sample.  A dlclose
 * empties the slots the same way before the object goes: another object
 * mapped at its addresses would have its return addresses walked by the
 * rules of the code that was there (a wrong stack, or a read past the
 * stack's top).  Each word is written with release and read with acquire,
 * so that a reader that reads a word written after its first look at
 * `epoch` sees `epoch` changed at its second. */
#define RULE_PROBES 4
static slot_t rules[RULES + RULE_PROBES];
static bool making, any_kept;
static unsigned epoch;

static unsigned write_begin(void) {
  unsigned odd = epoch + 1;
  __atomic_store_n(&epoch, odd, __ATOMIC_RELAXED);
  return odd;
}
static void write_end(unsigned odd) { __atomic_store_n(&epoch, odd + 1, __ATOMIC_RELEASE); }

/* ---- reading .eh_frame -------------------------------------------------------- */
static uint64_t uleb(const uint8_t **p) {
  uint64_t v = 0;
  for (unsigned shift = 0;; shift += 7) {
    uint8_t b = *(*p)++;
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
}

static int64_t sleb(const uint8_t **p) {
  int64_t v = 0;
  unsigned shift = 0;
  uint8_t b;
  do {
    b = *(*p)++;
    if (shift < 64) v |= (int64_t)(b & 0x7f) << shift;
    shift += 7;
  } while (b & 0x80);
  return shift < 64 && (b & 0x40) ? v | -((int64_t)1 << shift) : v;
}

/* A pointer in DWARF encoding enc at *p; base: the section's start (datarel).
 * False for encodings compiled code does not use here. */
static bool encoded(const uint8_t **p, uint8_t enc, uintptr_t base, uintptr_t *out) {
  const uint8_t *at = *p;
  uintptr_t v;
  switch (enc & 0x0f) {
    case 0x00: case 0x04: case 0x0c: memcpy(&v, at, 8), *p += 8; break;
    case 0x01: v = (uintptr_t)uleb(p); break;
    case 0x09: v = (uintptr_t)sleb(p); break;
    case 0x02: { uint16_t x; memcpy(&x, at, 2), *p += 2, v = x; break; }
    case 0x0a: { int16_t x; memcpy(&x, at, 2), *p += 2, v = (uintptr_t)(intptr_t)x; break; }
    case 0x03: { uint32_t x; memcpy(&x, at, 4), *p += 4, v = x; break; }
    case 0x0b: { int32_t x; memcpy(&x, at, 4), *p += 4, v = (uintptr_t)(intptr_t)x; break; }
    default: return false;
  }
  switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += (uintptr_t)at; break;  /* pcrel */
    case 0x30: v += base; break;           /* datarel */
    default: return false;
  }
  if (enc & 0x80) return false;            /* indirect: only personalities, never read */
  *out = v;
  return true;
}

/* The FDE covering pc, from the object's sorted table (.eh_frame_hdr); NULL
 * if none, and *unread if the table is in a form this walker does not read. */
static const uint8_t *fde_of(uintptr_t pc, bool *unread) {
  struct dl_find_object o;
  *unread = false;
  if (_dl_find_object((void *)pc, &o) != 0 || !o.dlfo_eh_frame) return NULL;
  const uint8_t *h = o.dlfo_eh_frame, *p = h + 4;
  uintptr_t frame, count;
  *unread = h[0] != 1 || h[3] != 0x3b || !encoded(&p, h[1], (uintptr_t)h, &frame) ||
            !encoded(&p, h[2], (uintptr_t)h, &count);
  if (*unread || !count) return NULL;
  const int32_t *table = (const int32_t *)p;  /* pairs: start, FDE; datarel sdata4 */
  size_t lo = 0, hi = count;
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if ((uintptr_t)h + (intptr_t)table[2 * mid] <= pc) lo = mid; else hi = mid;
  }
  if ((uintptr_t)h + (intptr_t)table[2 * lo] > pc) return NULL;
  return h + (intptr_t)table[2 * lo + 1];
}

typedef struct state {
  int64_t cfa_off, ra_off, rbp_off;
  uint8_t cfa_reg;
  bool ra_undefined;
} state_t;

/* Runs CFA instructions from p to end while the location stays at or below
 * pc; false on one whose rule is not kept. */
static bool run(const uint8_t *p, const uint8_t *end, uintptr_t loc, uintptr_t pc, uint64_t code_align,
                int64_t data_align, const state_t *initial, state_t *s) {
  state_t stack[STATES];
  unsigned depth = 0;
  while (p < end) {
    uint8_t op = *p++, low = op & 0x3f;
    uint64_t reg = low, delta = 0;
    int64_t off = 0;
    switch (op >> 6) {
      case 1: delta = low; goto advance;
      case 2: off = (int64_t)uleb(&p) * data_align; goto saved;
      case 3: goto restore;
    }
    switch (op) {
      case 0x00: break;                                            /* nop */
      case 0x02: delta = *p++; goto advance;                        /* advance_loc1 */
      case 0x03: { uint16_t d; memcpy(&d, p, 2), p += 2, delta = d; goto advance; }
      case 0x04: { uint32_t d; memcpy(&d, p, 4), p += 4, delta = d; goto advance; }
      case 0x05: reg = uleb(&p), off = (int64_t)uleb(&p) * data_align; goto saved;  /* offset_extended */
      case 0x11: reg = uleb(&p), off = sleb(&p) * data_align; goto saved;           /* offset_extended_sf */
      case 0x06: reg = uleb(&p); goto restore;                      /* restore_extended */
      case 0x07: case 0x08:                                         /* undefined, same_value */
        reg = uleb(&p);
        if (reg == RA) s->ra_undefined = op == 0x07;
        if (reg == RBP) s->rbp_off = 0;
        if (reg == RA && op == 0x08) return false;
        break;
      case 0x0a: if (depth == STATES) return false; stack[depth++] = *s; break;  /* remember_state */
      case 0x0b: if (!depth) return false; *s = stack[--depth]; break;           /* restore_state */
      case 0x0c: s->cfa_reg = (uint8_t)uleb(&p), s->cfa_off = (int64_t)uleb(&p); break;   /* def_cfa */
      case 0x12: s->cfa_reg = (uint8_t)uleb(&p), s->cfa_off = sleb(&p) * data_align; break;  /* def_cfa_sf */
      case 0x0d: s->cfa_reg = (uint8_t)uleb(&p); break;             /* def_cfa_register */
      case 0x0e: s->cfa_off = (int64_t)uleb(&p); break;             /* def_cfa_offset */
      case 0x13: s->cfa_off = sleb(&p) * data_align; break;         /* def_cfa_offset_sf */
      case 0x2e: uleb(&p); break;                                   /* GNU_args_size */
      case 0x10: case 0x16:                                         /* expression, val_expression */
        reg = uleb(&p);
        if (reg == RA || reg == RBP) return false;
        p += uleb(&p);
        break;
      case 0x09: case 0x14: case 0x15:                              /* register, val_offset(_sf) */
        reg = uleb(&p);
        if (reg == RA || reg == RBP) return false;
        if (op == 0x15) sleb(&p); else uleb(&p);
        break;
      default: return false;  /* set_loc, def_cfa_expression and the rest */
    }
    continue;
  advance:
    loc += delta * code_align;
    if (loc > pc) return true;
    continue;
  saved:
    if (reg == RA) s->ra_off = off;
    if (reg == RBP) s->rbp_off = off;
    continue;
  restore:
    if (reg == RA) s->ra_off = initial->ra_off, s->ra_undefined = initial->ra_undefined;
    if (reg == RBP) s->rbp_off = initial->rbp_off;
  }
  return true;
}

enum { NONE, UNKNOWN, KEPT };

/* pc's rule from its FDE and CIE: KEPT, NONE if pc has no FDE, UNKNOWN if
 * its rule is not one this walker keeps. */
static int rule_of(uintptr_t pc, rule_t *r) {
  bool unread;
  const uint8_t *fde = fde_of(pc, &unread);
  uint32_t len;
  if (!fde) return unread ? UNKNOWN : NONE;
  if (memcpy(&len, fde, 4), len == 0 || len == 0xffffffffu) return UNKNOWN;
  const uint8_t *fde_end = fde + 4 + len, *p = fde + 4;
  int32_t back;
  memcpy(&back, p, 4);
  const uint8_t *cie = p - back;
  uint32_t cie_len;
  memcpy(&cie_len, cie, 4);
  if (cie_len == 0 || cie_len == 0xffffffffu) return UNKNOWN;
  const uint8_t *cie_end = cie + 4 + cie_len, *q = cie + 8;
  uint8_t version = *q++;
  const char *aug = (const char *)q;
  q += strlen(aug) + 1;
  uint64_t code_align = uleb(&q);
  int64_t data_align = sleb(&q);
  uint64_t ra_reg = version == 1 ? *q++ : uleb(&q);
  uint8_t fde_enc = 0;
  bool z = aug[0] == 'z';
  if (ra_reg != RA || (aug[0] && !z)) return UNKNOWN;
  if (z) {
    uint64_t n = uleb(&q);
    const uint8_t *data = q, *after = q + n;
    for (const char *a = aug + 1; *a; a++) {
      if (*a == 'R') fde_enc = *data++;
      else if (*a == 'L') data++;
      else if (*a == 'P') {
        uintptr_t ignored;
        uint8_t enc = *data++;
        if (!encoded(&data, enc & 0x7f, 0, &ignored)) return UNKNOWN;
      } else return UNKNOWN;  /* 'S', a signal frame, and the rest */
    }
    q = after;
  }
  p += 4;
  uintptr_t start, range;
  if (!encoded(&p, fde_enc, 0, &start) || !encoded(&p, fde_enc & 0x0f, 0, &range)) return UNKNOWN;
  if (pc < start || pc >= start + range) return NONE;
  if (z) p += uleb(&p);
  state_t initial = {.cfa_reg = RSP, .cfa_off = 8, .ra_off = -8}, s;
  if (!run(q, cie_end, start, UINTPTR_MAX, code_align, data_align, &initial, &initial)) return UNKNOWN;
  s = initial;
  if (!run(p, fde_end, start, pc, code_align, data_align, &initial, &s)) return UNKNOWN;
  if ((s.cfa_reg != RSP && s.cfa_reg != RBP) || s.cfa_off >= 1 << 30 || s.cfa_off < -(1 << 30) ||
      s.ra_off != (int16_t)s.ra_off || (!s.ra_off && !s.ra_undefined) || s.rbp_off != (int16_t)s.rbp_off)
    return UNKNOWN;
  *r = (rule_t){(int32_t)(s.cfa_off * 2 + (s.cfa_reg == RBP)), s.ra_undefined ? 0 : (int16_t)s.ra_off,
                (int16_t)s.rbp_off};
  return KEPT;
}

/* pc's rule (rule_of) in *r when KEPT, kept if there is room; the others
 * are looked for again at the next sample through pc. */
static int rule_at(uintptr_t pc, rule_t *r, unsigned seen) {
  slot_t *slot = &rules[hk_hash_index(pc, RULE_BITS)];
  for (unsigned i = 0; i < RULE_PROBES && !(seen & 1); i++) {
    uintptr_t at = __atomic_load_n(&slot[i].pc, __ATOMIC_ACQUIRE);
    if (at == pc) {
      uint64_t kept = __atomic_load_n(&slot[i].rule, __ATOMIC_ACQUIRE);
      if (__atomic_load_n(&epoch, __ATOMIC_RELAXED) != seen) break;
      return memcpy(r, &kept, sizeof kept), KEPT;
    }
    if (!at) break;
  }
  int found = rule_of(pc, r);
  if (found != KEPT || __atomic_exchange_n(&making, true, __ATOMIC_ACQUIRE)) return found;
  for (unsigned i = 0; i < RULE_PROBES; i++) {
    if (slot[i].pc == pc) break;
    if (slot[i].pc) continue;
    uint64_t word;
    memcpy(&word, r, sizeof word);
    unsigned odd = write_begin();
    __atomic_store_n(&slot[i].rule, word, __ATOMIC_RELEASE);
    __atomic_store_n(&slot[i].pc, pc, __ATOMIC_RELEASE);
    write_end(odd);
    __atomic_store_n(&any_kept, true, __ATOMIC_RELAXED);
    break;
  }
  __atomic_store_n(&making, false, __ATOMIC_RELEASE);
  return found;
}

/* Every slot emptied, by the holder of `making`. */
static void forget_rules(void) {
  unsigned odd = write_begin();
  for (size_t i = 0; i < RULES + RULE_PROBES; i++) __atomic_store_n(&rules[i].pc, 0, __ATOMIC_RELEASE);
  write_end(odd);
}

/* A thread that was writing a slot is not in the child: the slots are
 * emptied rather than trusted. */
void hk_unwind_forked(void) {
  making = false;
  if (epoch & 1) epoch++, forget_rules();
}

/* Every kept rule emptied, once no rule is being made. */
static void forget_kept_rules(void) {
  if (!__atomic_load_n(&any_kept, __ATOMIC_RELAXED)) return;
  while (__atomic_exchange_n(&making, true, __ATOMIC_ACQUIRE)) hk_pause();
  forget_rules();
  __atomic_store_n(&making, false, __ATOMIC_RELEASE);
}

/* The rules go before the object does (an object still in use stays, and
 * its rules are read again), and again after: its destructors' samples
 * walked its frames meanwhile.  A dlclose from the C library's own code
 * (iconv's modules) is not seen. */
HK_EXPORT int dlclose(void *handle) {
  static int (*next)(void *);
  int (*call)(void *) = __atomic_load_n(&next, __ATOMIC_RELAXED);
  if (!call) __atomic_store_n(&next, call = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose"), __ATOMIC_RELAXED);
  forget_kept_rules();
  int done = call ? call(handle) : 0;  /* none in a static program: the object stays */
  forget_kept_rules();
  return done;
}

/* The return addresses of the calling function's frame and those above it
 * (as backtrace() gives them), up to max; 0 if a frame has a rule not kept.
 * A stack that ends without an outermost frame (code without frame
 * information) ends there, as the C library's unwinder's does. */
__attribute__((noinline)) unsigned hk_unwind(void **pc, unsigned max) {
  uintptr_t ip, sp, bp;
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
  unsigned n = 0, seen = __atomic_load_n(&epoch, __ATOMIC_ACQUIRE);
  for (bool first = true; n < max; first = false) {
    rule_t r;
    int found = rule_at(first ? ip : ip - 1, &r, seen);  /* a return address may end its function */
    if (found == UNKNOWN || (found == NONE && first)) return 0;
    if (found == NONE || !r.ra_off) break;
    uintptr_t cfa = (r.cfa & 1 ? bp : sp) + (uintptr_t)(intptr_t)(r.cfa >> 1);
    if (cfa <= sp || cfa - sp > ((uintptr_t)1 << 26)) break;  /* a stack runs up, within reason */
    uintptr_t ra;
    memcpy(&ra, (const void *)(cfa + (uintptr_t)(intptr_t)r.ra_off), sizeof ra);
    if (r.rbp_off) memcpy(&bp, (const void *)(cfa + (uintptr_t)(intptr_t)r.rbp_off), sizeof bp);
    sp = cfa, ip = ra;
    if (!ip) break;
    pc[n++] = (void *)ip;
  }
  return n;
}

#else
unsigned hk_unwind(void **pc, unsigned max) { return (void)pc, (void)max, 0; }
void hk_unwind_forked(void) {}
#endif
