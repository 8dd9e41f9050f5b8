/* store/chunk: the Gorilla codec for one chunk of a series (as in Facebook's Gorilla paper and
 * Prometheus' TSDB). Timestamps are delta-of-delta coded, so a regular tick costs one bit; values are
 * XORed with the previous one, so an unchanged value costs one bit and a slowly moving one a few.
 * The encoder's buffer is a valid chunk after every put, which lets the writer persist an open
 * chunk at each flush without closing it.
 *
 * Decimal chunks. Most of what gpuscope stores are decimals of few digits: integer percentages,
 * degrees, bytes, MHz, and power that NVML reads in milliwatts (312.457 W). XOR of two such doubles
 * keeps ~45 significant bits whenever the value moves, so power cost 7 bytes a point. A chunk whose
 * every value v is exactly i / 10^k (i an integer, k <= 3, checked bit for bit) stores the integers
 * instead, delta coded: an unchanged value costs one bit, a change of a few watts at mW resolution
 * two bytes. The encoder picks the smallest k for the first value; a later value that needs a larger
 * k, or is not such a decimal, re-encodes the open chunk once with the larger k or as XOR floats
 * (k only grows, so at most four re-encodings per chunk).
 *
 * Layout. XOR chunk (the original format): t0 (64 bits), v0 (64 bits), then per point a time code
 * and an XOR code. Decimal chunk: one tag byte 0xD0 | k, t0 (64), i0 (64 bits, two's complement),
 * then per point a time code and a value code: '0' same value, '10' + 6-bit, '110' + 13-bit,
 * '1110' + 20-bit, '11110' + 32-bit or '11111' + 64-bit signed delta. An XOR chunk's first byte is
 * the top byte of t0 (ns since the run's start): 0x00, or 0xFF just before the start, never 0xD0-D3. */
#include <stdlib.h>
#include <string.h>

#include "store/chunk.h"
#include "store/store.h"

static int put_bits(struct chunk_enc *e, uint64_t v, unsigned nbits) {
  size_t need = (e->bits + nbits + 7) / 8 + 8;
  if (need > e->cap) {
    size_t c = e->cap ? e->cap * 2 : 64;
    while (c < need)
      c *= 2;
    uint8_t *b = realloc(e->buf, c);
    if (!b)
      return GS_ENOMEM;
    memset(b + e->cap, 0, c - e->cap);
    e->buf = b;
    e->cap = c;
  }
  for (unsigned i = nbits; i-- > 0;) {
    if ((v >> i) & 1)
      e->buf[e->bits >> 3] |= (uint8_t)(0x80u >> (e->bits & 7));
    e->bits++;
  }
  return GS_OK;
}

void chunk_enc_init(struct chunk_enc *e) {
  memset(e, 0, sizeof *e);
  e->lead = -1;
  e->mode = CHUNK_MODE_NONE;
}

void chunk_enc_done(struct chunk_enc *e) {
  free(e->buf);
  chunk_enc_init(e);
}

size_t chunk_enc_bytes(const struct chunk_enc *e) {
  return (e->bits + 7) / 8;
}

static int fits(int64_t v, unsigned bits) {
  int64_t lim = (int64_t)1 << (bits - 1);
  return v >= -lim && v < lim;
}

static uint64_t dbl_bits(double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

/* Prefix codes: k leading one bits and a zero select widths[k] bits of two's complement value (k = 0:
 * the value 0, no bits); max ones (no zero after them) select widths[max], which is 64. */
static const unsigned TIME_BITS[] = {0, 16, 24, 32, 64};     /* delta-of-delta of timestamps */
static const unsigned DELTA_BITS[] = {0, 6, 13, 20, 32, 64}; /* decimal chunks' value deltas */
#define TIME_MAX_ONES 4
#define DELTA_MAX_ONES 5

static int put_prefixed(struct chunk_enc *e, int64_t v, const unsigned *widths, unsigned max_ones) {
  for (unsigned ones = 0; ones < max_ones; ones++)
    if (ones == 0 ? v == 0 : fits(v, widths[ones]))
      return put_bits(e, ((1u << ones) - 1) << 1, ones + 1)
                 ?: (ones ? put_bits(e, (uint64_t)v & ((1ULL << widths[ones]) - 1), widths[ones]) : 0);
  return put_bits(e, (1u << max_ones) - 1, max_ones) ?: put_bits(e, (uint64_t)v, 64);
}

static int put_time(struct chunk_enc *e, int64_t t) {
  int64_t d = (int64_t)((uint64_t)t - (uint64_t)e->t_prev), dod = (int64_t)((uint64_t)d - (uint64_t)e->d_prev);
  e->d_prev = d;
  return put_prefixed(e, dod, TIME_BITS, TIME_MAX_ONES);
}

static int put_xor(struct chunk_enc *e, uint64_t u) {
  uint64_t x = u ^ e->v_prev;
  if (x == 0)
    return put_bits(e, 0, 1);
  int lead = __builtin_clzll(x), trail = __builtin_ctzll(x);
  if (lead > 31)
    lead = 31;
  if (e->lead >= 0 && lead >= e->lead && trail >= e->trail) {
    int len = 64 - e->lead - e->trail;
    return put_bits(e, 2, 2) ?: put_bits(e, x >> e->trail, (unsigned)len);
  }
  int len = 64 - lead - trail;
  e->lead = lead;
  e->trail = trail;
  return put_bits(e, 3, 2) ?: put_bits(e, (uint64_t)lead, 5) ?: put_bits(e, (uint64_t)(len - 1), 6)
                               ?: put_bits(e, x >> trail, (unsigned)len);
}

static int put_delta(struct chunk_enc *e, int64_t i) {
  return put_prefixed(e, (int64_t)((uint64_t)i - (uint64_t)e->i_prev), DELTA_BITS, DELTA_MAX_ONES);
}

static const double POW10[] = {1, 10, 100, 1000};

/* The smallest k >= from (k <= 3) with v == i / 10^k exactly, bit for bit; -1 when none. */
static int decimal_scale(double v, int from, int64_t *i) {
  for (int k = from; k <= CHUNK_MODE_DEC_MAX; k++) {
    double s = v * POW10[k];
    if (!(s > -9007199254740992.0 && s < 9007199254740992.0)) /* 2^53; also false for NaN */
      return -1;
    int64_t r = (int64_t)(s + (s < 0 ? -0.5 : 0.5));
    double back = (double)r / POW10[k];
    if (!memcmp(&back, &v, sizeof v)) {
      *i = r;
      return k;
    }
  }
  return -1;
}

/* Appends one point in the encoder's current mode (the value already fits it). */
static int put_point(struct chunk_enc *e, int64_t t, double v, int64_t i) {
  uint64_t u = dbl_bits(v);
  int rc;
  if (e->n == 0) {
    rc = e->mode == CHUNK_MODE_XOR ? put_bits(e, (uint64_t)t, 64) ?: put_bits(e, u, 64)
                                   : put_bits(e, 0xD0u | (unsigned)e->mode, 8) ?: put_bits(e, (uint64_t)t, 64)
                                                                                    ?: put_bits(e, (uint64_t)i, 64);
    e->t0 = t;
  } else {
    rc = put_time(e, t) ?: e->mode == CHUNK_MODE_XOR ? put_xor(e, u) : put_delta(e, i);
  }
  if (rc)
    return rc;
  e->t_prev = t;
  e->v_prev = u;
  e->i_prev = i;
  e->n++;
  return GS_OK;
}

struct reencode {
  struct chunk_enc *e;
  int rc, misfit;
};

static int reput(void *u, int64_t t, double v) {
  struct reencode *r = u;
  int64_t i = 0;
  if (r->e->mode != CHUNK_MODE_XOR && decimal_scale(v, r->e->mode, &i) != r->e->mode)
    return r->misfit = 1; /* an old value too large for the finer scale (beyond 2^53 / 10^k) */
  return (r->rc = put_point(r->e, t, v, i)) != 0;
}

/* Rewrites the chunk's points in a wider mode (a larger k, falling back to XOR floats when an old
 * value does not fit that k). */
static int reencode(struct chunk_enc *e, int mode) {
  struct chunk_enc old = *e;
  for (;;) {
    chunk_enc_init(e);
    e->mode = mode;
    struct reencode r = {.e = e};
    int rc = chunk_decode(old.buf, chunk_enc_bytes(&old), old.n, reput, &r);
    if (!rc && !r.rc && !r.misfit) {
      free(old.buf);
      return GS_OK;
    }
    chunk_enc_done(e);
    if (!r.misfit || mode == CHUNK_MODE_XOR) {
      *e = old;
      return r.rc ? r.rc : rc ? rc : GS_ECORRUPT;
    }
    mode = CHUNK_MODE_XOR;
  }
}

int chunk_enc_put(struct chunk_enc *e, int64_t t, double v) {
  int64_t i = 0;
  if (e->mode == CHUNK_MODE_XOR)
    return put_point(e, t, v, 0);
  int k = decimal_scale(v, e->n ? e->mode : 0, &i);
  if (e->n == 0) {
    e->mode = k < 0 ? CHUNK_MODE_XOR : k;
    return put_point(e, t, v, i);
  }
  if (k != e->mode) {
    int rc = reencode(e, k < 0 ? CHUNK_MODE_XOR : k);
    if (rc)
      return rc;
    if (e->mode == CHUNK_MODE_XOR) /* the old values forced floats */
      i = 0;
  }
  return put_point(e, t, v, i);
}

struct bit_reader {
  const uint8_t *buf;
  size_t len_bits, pos;
};

static int get_bits(struct bit_reader *r, unsigned nbits, uint64_t *out) {
  if (r->pos + nbits > r->len_bits)
    return GS_ECORRUPT;
  uint64_t v = 0;
  for (unsigned i = 0; i < nbits; i++, r->pos++)
    v = (v << 1) | ((r->buf[r->pos >> 3] >> (7 - (r->pos & 7))) & 1);
  *out = v;
  return GS_OK;
}

static int64_t sign_extend(uint64_t v, unsigned bits) {
  uint64_t m = (uint64_t)1 << (bits - 1);
  return (int64_t)((v ^ m) - m);
}

static int get_prefixed(struct bit_reader *r, const unsigned *widths, unsigned max_ones, int64_t *v) {
  uint64_t a;
  unsigned ones = 0;
  while (ones < max_ones) {
    if (get_bits(r, 1, &a))
      return GS_ECORRUPT;
    if (!a)
      break;
    ones++;
  }
  unsigned width = widths[ones];
  *v = 0;
  if (width) {
    if (get_bits(r, width, &a))
      return GS_ECORRUPT;
    *v = width == 64 ? (int64_t)a : sign_extend(a, width);
  }
  return GS_OK;
}

static int get_time(struct bit_reader *r, int64_t *t, int64_t *d) {
  int64_t dod;
  if (get_prefixed(r, TIME_BITS, TIME_MAX_ONES, &dod))
    return GS_ECORRUPT;
  /* wrapping arithmetic: a damaged chunk gives wrong times, never undefined behaviour */
  *d = (int64_t)((uint64_t)*d + (uint64_t)dod);
  *t = (int64_t)((uint64_t)*t + (uint64_t)*d);
  return GS_OK;
}

static int get_xor(struct bit_reader *r, uint64_t *u, int *lead, int *trail) {
  uint64_t a, b;
  if (get_bits(r, 1, &a))
    return GS_ECORRUPT;
  if (!a)
    return GS_OK;
  if (get_bits(r, 1, &a))
    return GS_ECORRUPT;
  if (!a) {
    if (*lead < 0 || get_bits(r, (unsigned)(64 - *lead - *trail), &b))
      return GS_ECORRUPT;
    *u ^= b << *trail;
    return GS_OK;
  }
  uint64_t l, m;
  if (get_bits(r, 5, &l) || get_bits(r, 6, &m))
    return GS_ECORRUPT;
  int len_bits = (int)m + 1;
  if ((int)l + len_bits > 64)
    return GS_ECORRUPT;
  *lead = (int)l;
  *trail = 64 - *lead - len_bits;
  if (get_bits(r, (unsigned)len_bits, &b))
    return GS_ECORRUPT;
  *u ^= b << *trail;
  return GS_OK;
}

static int get_delta(struct bit_reader *r, int64_t *i) {
  int64_t d;
  if (get_prefixed(r, DELTA_BITS, DELTA_MAX_ONES, &d))
    return GS_ECORRUPT;
  *i = (int64_t)((uint64_t)*i + (uint64_t)d);
  return GS_OK;
}

int chunk_decode(const uint8_t *buf, size_t len, uint32_t n, store_sample_fn fn, void *user) {
  struct bit_reader r = {.buf = buf, .len_bits = len * 8};
  uint64_t a, b, tag = 0;
  int64_t t = 0, d = 0, i = 0;
  uint64_t u = 0;
  int lead = -1, trail = 0;
  int mode = n && len && (buf[0] & 0xFC) == 0xD0 ? buf[0] & 3 : CHUNK_MODE_XOR;
  if (mode != CHUNK_MODE_XOR && get_bits(&r, 8, &tag))
    return GS_ECORRUPT;
  for (uint32_t j = 0; j < n; j++) {
    if (j == 0) {
      if (get_bits(&r, 64, &a) || get_bits(&r, 64, &b))
        return GS_ECORRUPT;
      t = (int64_t)a;
      u = b, i = (int64_t)b;
    } else if (get_time(&r, &t, &d) || (mode == CHUNK_MODE_XOR ? get_xor(&r, &u, &lead, &trail) : get_delta(&r, &i))) {
      return GS_ECORRUPT;
    }
    double v;
    if (mode == CHUNK_MODE_XOR)
      memcpy(&v, &u, sizeof v);
    else
      v = (double)i / POW10[mode];
    if (fn(user, t, v))
      return 1;
  }
  return GS_OK;
}
