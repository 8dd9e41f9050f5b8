/* store/rollup: the rollup maths every back end shares — min, max and mean per time bucket of a
 * series, at the resolutions a run keeps (1 s, 10 s, 60 s). A back end streams a series' raw
 * samples through rollup_point() (or all resolutions at once through rollup_all_point()) and stores
 * or returns the buckets; no SQL here. */
#include <stdlib.h>

#include "store/store_backend.h"

const int64_t STORE_ROLLUP_RES[STORE_N_ROLLUP_RES] = {GS_NS_PER_S, 10 * GS_NS_PER_S, 60 * GS_NS_PER_S};

static int grow(struct rollup_acc *a) {
  size_t c = a->cap ? a->cap * 2 : 64;
  int64_t *t = realloc(a->t, c * sizeof *t);
  if (t)
    a->t = t;
  double *mn = realloc(a->mn, c * sizeof *mn);
  if (mn)
    a->mn = mn;
  double *mx = realloc(a->mx, c * sizeof *mx);
  if (mx)
    a->mx = mx;
  double *me = realloc(a->mean, c * sizeof *me);
  if (me)
    a->mean = me;
  if (!t || !mn || !mx || !me) {
    a->oom = 1;
    return -1;
  }
  a->cap = c;
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
