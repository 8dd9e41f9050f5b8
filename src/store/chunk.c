/* store/chunk: the Gorilla codec for one chunk of a series (as in Facebook's Gorilla paper and
 * Prometheus' TSDB). Timestamps are delta-of-delta coded, so a regular tick costs one bit; values are
 * XORed with the previous one, so an unchanged value costs one bit and a slowly moving one a few.
 * The encoder's buffer is a valid chunk after every put, which lets the writer persist an open
 * chunk each second without closing it. */
#include <stdlib.h>
#include <string.h>

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
}

void chunk_enc_done(struct chunk_enc *e) {
  free(e->buf);
  chunk_enc_init(e);
}

size_t chunk_enc_bytes(const struct chunk_enc *e) { return (e->bits + 7) / 8; }

static int fits(int64_t v, unsigned bits) {
  int64_t lim = (int64_t)1 << (bits - 1);
  return v >= -lim && v < lim;
}

static uint64_t dbl_bits(double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  return u;
}

int chunk_enc_put(struct chunk_enc *e, int64_t t, double v) {
  uint64_t u = dbl_bits(v);
  int rc = GS_OK;
  if (e->n == 0) {
    rc = put_bits(e, (uint64_t)t, 64);
    if (!rc)
      rc = put_bits(e, u, 64);
    e->t0 = t;
  } else {
    int64_t d = (int64_t)((uint64_t)t - (uint64_t)e->t_prev), dod = (int64_t)((uint64_t)d - (uint64_t)e->d_prev);
    if (dod == 0)
      rc = put_bits(e, 0, 1);
    else if (fits(dod, 16))
      rc = put_bits(e, 2, 2) ?: put_bits(e, (uint64_t)dod & 0xffff, 16);
    else if (fits(dod, 24))
      rc = put_bits(e, 6, 3) ?: put_bits(e, (uint64_t)dod & 0xffffff, 24);
    else if (fits(dod, 32))
      rc = put_bits(e, 14, 4) ?: put_bits(e, (uint64_t)dod & 0xffffffff, 32);
    else
      rc = put_bits(e, 15, 4) ?: put_bits(e, (uint64_t)dod, 64);
    e->d_prev = d;
    uint64_t x = u ^ e->v_prev;
    if (!rc && x == 0) {
      rc = put_bits(e, 0, 1);
    } else if (!rc) {
      int lead = __builtin_clzll(x), trail = __builtin_ctzll(x);
      if (lead > 31)
        lead = 31;
      if (e->lead >= 0 && lead >= e->lead && trail >= e->trail) {
        int len = 64 - e->lead - e->trail;
        rc = put_bits(e, 2, 2) ?: put_bits(e, x >> e->trail, (unsigned)len);
      } else {
        int len = 64 - lead - trail;
        rc = put_bits(e, 3, 2) ?: put_bits(e, (uint64_t)lead, 5) ?: put_bits(e, (uint64_t)(len - 1), 6)
                                     ?: put_bits(e, x >> trail, (unsigned)len);
        e->lead = lead;
        e->trail = trail;
      }
    }
  }
  if (rc)
    return rc;
  e->t_prev = t;
  e->v_prev = u;
  e->n++;
  return GS_OK;
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

int chunk_decode(const uint8_t *buf, size_t len, uint32_t n, store_sample_fn fn, void *user) {
  struct bit_reader r = {.buf = buf, .len_bits = len * 8};
  uint64_t a, b;
  int64_t t = 0, d = 0;
  uint64_t u = 0;
  int lead = -1, trail = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (i == 0) {
      if (get_bits(&r, 64, &a) || get_bits(&r, 64, &b))
        return GS_ECORRUPT;
      t = (int64_t)a;
      u = b;
    } else {
      unsigned width = 0, ones = 0;
      while (ones < 4) {
        if (get_bits(&r, 1, &a))
          return GS_ECORRUPT;
        if (!a)
          break;
        ones++;
      }
      static const unsigned widths[] = {0, 16, 24, 32, 64};
      width = widths[ones];
      int64_t dod = 0;
      if (width) {
        if (get_bits(&r, width, &a))
          return GS_ECORRUPT;
        dod = width == 64 ? (int64_t)a : sign_extend(a, width);
      }
      /* wrapping arithmetic: a damaged chunk gives wrong times, never undefined behaviour */
      d = (int64_t)((uint64_t)d + (uint64_t)dod);
      t = (int64_t)((uint64_t)t + (uint64_t)d);
      if (get_bits(&r, 1, &a))
        return GS_ECORRUPT;
      if (a) {
        if (get_bits(&r, 1, &a))
          return GS_ECORRUPT;
        if (!a) {
          if (lead < 0 || get_bits(&r, (unsigned)(64 - lead - trail), &b))
            return GS_ECORRUPT;
          u ^= b << trail;
        } else {
          uint64_t l, m;
          if (get_bits(&r, 5, &l) || get_bits(&r, 6, &m))
            return GS_ECORRUPT;
          int len_bits = (int)m + 1;
          if ((int)l + len_bits > 64)
            return GS_ECORRUPT;
          lead = (int)l;
          trail = 64 - lead - len_bits;
          if (get_bits(&r, (unsigned)len_bits, &b))
            return GS_ECORRUPT;
          u ^= b << trail;
        }
      }
    }
    double v;
    memcpy(&v, &u, sizeof v);
    if (fn(user, t, v))
      return 1;
  }
  return GS_OK;
}
