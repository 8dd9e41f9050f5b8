/* store/rollup: the rollup maths every back end shares — min, max and mean per time bucket of a
 * series, at the resolutions a run keeps (1 s, 10 s, 60 s). A back end streams a series' raw
 * samples through rollup_point() (or all resolutions at once through rollup_all_point()) and stores
 * or returns the buckets; no SQL here. A back end may keep the buckets of a resolution packed several
 * to a row (rollup_block_encode: the chunk codec over the minimums, the maximums and the means), as
 * PostgreSQL's does, where a row per bucket cost more than the buckets. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_backend.h"

/* What one bucket may add to a column of a block (a chunk point's worst case). */
enum { ROLLUP_BUCKET_MAX_BYTES = 19 };

const int64_t STORE_ROLLUP_RES[STORE_N_ROLLUP_RES] = {GS_NS_PER_S, 10 * GS_NS_PER_S, 60 * GS_NS_PER_S};

static int grow(struct rollup_acc *a) {
  void *const cols[] = {&a->t, &a->mn, &a->mx, &a->mean};
  const size_t size[] = {sizeof *a->t, sizeof *a->mn, sizeof *a->mx, sizeof *a->mean};
  if (gs_grow_columns(&a->cap, 64, 4, cols, size))
    return -(a->oom = 1);
  return 0;
}

void rollup_add_bucket(struct rollup_acc *a, int64_t t, double min, double max, double mean) {
  if (a->len == a->cap && grow(a))
    return;
  a->t[a->len] = t;
  a->mn[a->len] = min;
  a->mx[a->len] = max;
  a->mean[a->len++] = mean;
}

void rollup_emit(struct rollup_acc *a) {
  if (!a->n)
    return;
  rollup_add_bucket(a, a->bucket, a->min, a->max, a->sum / (double)a->n);
  a->n = 0;
}

int rollup_point(void *u, int64_t t, double v) {
  struct rollup_acc *a = u;
  /* floor division: a bucket starts at a multiple of res, also before the run's start */
  int64_t b = t >= 0 ? t / a->res * a->res : -((-t + a->res - 1) / a->res) * a->res;
  if (a->n && b != a->bucket)
    rollup_emit(a);
  if (!a->n) {
    a->bucket = b;
    a->min = a->max = v;
    a->sum = 0;
  }
  a->min = v < a->min ? v : a->min;
  a->max = v > a->max ? v : a->max;
  a->sum += v;
  a->n++;
  return a->oom;
}

void rollup_done(struct rollup_acc *a) {
  free(a->t), free(a->mn), free(a->mx), free(a->mean);
  a->t = NULL, a->mn = a->mx = a->mean = NULL;
  a->len = a->cap = 0;
}

void rollup_all_init(struct rollup_all *all) {
  *all = (struct rollup_all){.points = 0};
  for (int r = 0; r < STORE_N_ROLLUP_RES; r++)
    all->a[r].res = STORE_ROLLUP_RES[r];
}

int rollup_all_point(void *u, int64_t t, double v) {
  struct rollup_all *all = u;
  int stop = 0;
  for (int r = 0; r < STORE_N_ROLLUP_RES; r++)
    stop |= rollup_point(&all->a[r], t, v);
  all->points++;
  return stop;
}

int rollup_worth_storing(const struct rollup_all *all, const struct rollup_acc *a) {
  return all->points >= (int64_t)a->len * STORE_ROLLUP_MIN_POINTS;
}

int rollup_read_finish(struct store *st, int64_t series_id, struct rollup_acc *a, int rc, int64_t **t, double **mn,
                       double **mx, double **mean, size_t *n) {
  if (!rc && a->oom)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  if (!rc && a->len == 0) {
    rc = st->samples_read(st, series_id, INT64_MIN, INT64_MAX, rollup_point, a);
    rollup_emit(a);
    if (a->oom)
      rc = gs_fail(GS_ENOMEM, "out of memory");
  }
  if (rc) {
    rollup_done(a);
    return rc;
  }
  *t = a->t, *mn = a->mn, *mx = a->mx, *mean = a->mean, *n = a->len;
  return GS_OK;
}

/* ---- packed blocks ---- */

static void put_u32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static uint32_t get_u32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

int rollup_block_encode(const struct rollup_acc *a, size_t from, size_t *to, uint8_t **buf, size_t *len) {
  struct chunk_enc e[3];
  for (int k = 0; k < 3; k++)
    chunk_enc_init(&e[k]);
  int rc = GS_OK;
  size_t i = from;
  for (; i < a->len && i - from < STORE_ROLLUP_BLOCK_BUCKETS && !rc; i++) {
    size_t bytes = chunk_enc_bytes(&e[0]) + chunk_enc_bytes(&e[1]) + chunk_enc_bytes(&e[2]);
    if (i > from && bytes + 3 * ROLLUP_BUCKET_MAX_BYTES > STORE_ROLLUP_BLOCK_BYTES)
      break;
    if (chunk_enc_put(&e[0], a->t[i], a->mn[i]) || chunk_enc_put(&e[1], a->t[i], a->mx[i]) ||
        chunk_enc_put(&e[2], a->t[i], a->mean[i]))
      rc = gs_fail(GS_ENOMEM, "out of memory");
  }
  size_t l0 = chunk_enc_bytes(&e[0]), l1 = chunk_enc_bytes(&e[1]), l2 = chunk_enc_bytes(&e[2]);
  uint8_t *out = rc ? NULL : malloc(8 + l0 + l1 + l2);
  if (!rc && !out)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  if (!rc) {
    put_u32(out, (uint32_t)l0);
    memcpy(out + 4, e[0].buf, l0);
    put_u32(out + 4 + l0, (uint32_t)l1);
    memcpy(out + 8 + l0, e[1].buf, l1);
    memcpy(out + 8 + l0 + l1, e[2].buf, l2);
    *buf = out, *len = 8 + l0 + l1 + l2, *to = i;
  }
  for (int k = 0; k < 3; k++)
    chunk_enc_done(&e[k]);
  return rc;
}

struct block_fill { /* one more column of buckets already added by their minimum */
  struct rollup_acc *a;
  double *col;
  size_t base, i, n;
};

static int block_min(void *u, int64_t t, double v) {
  struct block_fill *f = u;
  rollup_add_bucket(f->a, t, v, NAN, NAN);
  f->i++;
  return f->a->oom;
}

static int block_col(void *u, int64_t t, double v) {
  struct block_fill *f = u;
  if (f->i >= f->n || f->a->t[f->base + f->i] != t)
    return -1; /* the columns of a block disagree: corrupt */
  f->col[f->base + f->i++] = v;
  return 0;
}

int rollup_block_decode(const uint8_t *buf, size_t len, uint32_t n, struct rollup_acc *a) {
  if (len < 8)
    return GS_ECORRUPT;
  size_t l0 = get_u32(buf);
  if (l0 > len - 8)
    return GS_ECORRUPT;
  size_t l1 = get_u32(buf + 4 + l0);
  if (l1 > len - 8 - l0)
    return GS_ECORRUPT;
  const uint8_t *c[3] = {buf + 4, buf + 8 + l0, buf + 8 + l0 + l1};
  size_t cl[3] = {l0, l1, len - 8 - l0 - l1};
  struct block_fill f = {.a = a, .base = a->len, .n = n};
  int rc = chunk_decode(c[0], cl[0], n, block_min, &f);
  if (a->oom)
    return GS_ENOMEM;
  if (rc || f.i != n)
    return GS_ECORRUPT;
  for (int k = 1; k < 3; k++) {
    f.col = k == 1 ? a->mx : a->mean;
    f.i = 0;
    if (chunk_decode(c[k], cl[k], n, block_col, &f) || f.i != n)
      return GS_ECORRUPT;
  }
  return GS_OK;
}
