/* serve/series: one series over a window in at most N points, for a chart. Raw samples when they fit;
 * else min, max and mean per bucket, from the raw samples of a window short enough to read, or from
 * the store's rollups (rollups_read) for a long one — so the answer's cost follows the number of
 * points asked for, not the run's length, and a dip shorter than a bucket still shows as the
 * bucket's minimum. Empty buckets and gaps in the samples are null (missing is not zero). A series
 * request's answer is streamed (serve_series_stream): one series built at a time, under the store
 * lock only while it is built, so a big answer neither waits whole in memory nor holds the lock. */
#include <math.h>
#include "serve/mhd_api.h"
#include <stdlib.h>
#include <string.h>

#include "serve/serve_int.h"

/* A window of at most this many raw samples is read raw; a longer one from rollups. */
enum { RAW_READ_MAX = 200000 };
/* A rollup resolution is used when the whole series holds at most this many of its buckets
 * (rollups_read returns the whole series). */
enum { ROLLUP_READ_MAX = 200000 };

struct buckets {
  size_t n;
  int64_t from, width;
  double *mn, *mx, *sum;
  int64_t *cnt; /* samples (or rollup buckets) in each; a bucket's time is its centre */
};

static void bucket_add(struct buckets *b, int64_t t, double mn, double mx, double mean) {
  if (t < b->from)
    return;
  int64_t i = (t - b->from) / b->width;
  if (i < 0 || (size_t)i >= b->n)
    return;
  if (!b->cnt[i] || mn < b->mn[i])
    b->mn[i] = mn;
  if (!b->cnt[i] || mx > b->mx[i])
    b->mx[i] = mx;
  b->sum[i] += mean;
  b->cnt[i]++;
}

static void arr(FILE *out, const char *key, const double *v, size_t n, const int64_t *cnt, size_t a, size_t b) {
  serve_json_key(out, key);
  fputc('[', out);
  for (size_t i = a; i < b; i++) {
    if (i > a)
      fputc(',', out);
    if (cnt && !cnt[i])
      fputs("null", out);
    else
      gs_json_num(out, v[i]);
  }
  (void)n;
  fputc(']', out);
}

static void header(FILE *out, const struct store_series *s, const char *res, int64_t from, int64_t to) {
  fputc('{', out);
  fprintf(out, "\"id\":%lld,", (long long)s->id);
  serve_json_key(out, "source");
  gs_json_str(out, s->source);
  fputc(',', out);
  serve_json_key(out, "name");
  gs_json_str(out, s->name);
  fputc(',', out);
  serve_json_key(out, "labels");
  gs_json_str(out, s->labels);
  fputc(',', out);
  serve_json_key(out, "unit");
  gs_json_str(out, s->unit);
  fprintf(out, ",\"res\":\"%s\",\"from\":", res);
  gs_json_num(out, serve_sec(from));
  fputs(",\"to\":", out);
  gs_json_num(out, serve_sec(to));
  fputc(',', out);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

/* Raw samples, with a null where consecutive samples lie further apart than 2.5 typical spacings;
 * with steps (a client metric's that came with its values, else NULL), "step": each point's step
 * (null: none), in the order of "t". */
static void write_raw(FILE *out, const struct store_points *r, struct store_steps *steps) {
  int64_t gap = INT64_MAX;
  if (r->n >= 3) {
    int64_t *d = malloc((r->n - 1) * sizeof *d);
    if (d) {
      for (size_t i = 1; i < r->n; i++)
        d[i - 1] = r->t[i] - r->t[i - 1];
      qsort(d, r->n - 1, sizeof *d, cmp_i64);
      int64_t med = d[(r->n - 1) / 2];
      gap = med > 0 ? med * 5 / 2 : INT64_MAX;
      free(d);
    }
  }
  fputs("\"t\":[", out);
  for (size_t i = 0; i < r->n; i++) {
    if (i)
      fputc(',', out);
    if (i && r->t[i] - r->t[i - 1] > gap) {
      gs_json_num(out, serve_sec(r->t[i - 1] + (r->t[i] - r->t[i - 1]) / 2));
      fputc(',', out);
    }
    gs_json_num(out, serve_sec(r->t[i]));
  }
  fputs("],\"mean\":[", out);
  for (size_t i = 0; i < r->n; i++) {
    if (i)
      fputc(',', out);
    if (i && r->t[i] - r->t[i - 1] > gap)
      fputs("null,", out);
    gs_json_num(out, r->v[i]);
  }
  if (steps && steps->p.n) {
    fputs("],\"step\":[", out);
    for (size_t i = 0; i < r->n; i++) {
      if (i)
        fputc(',', out);
      if (i && r->t[i] - r->t[i - 1] > gap)
        fputs("null,", out);
      int64_t k = store_steps_at(steps, r->t[i]);
      if (k >= 0)
        fprintf(out, "%lld", (long long)k);
      else
        fputs("null", out);
    }
  }
  fputs("]}", out);
}

/* Rollup resolutions, finest first, and their names in the answer's "res". */
static const int64_t rollup_res[] = {GS_NS_PER_S, 10 * GS_NS_PER_S, 60 * GS_NS_PER_S};
static const char *const rollup_names[] = {"1s", "10s", "60s"};

/* The coarsest rollup that still gives each point a few buckets, among those whose whole series
 * (rollups_read returns it all) stays small enough to read; else the finest such. */
static int rollup_pick(int64_t width, double span_all) {
  int k = -1;
  for (int i = 2; i >= 0 && k < 0; i--)
    if ((double)rollup_res[i] <= (double)width / 2 && span_all / (double)rollup_res[i] <= ROLLUP_READ_MAX)
      k = i;
  for (int i = 0; i < 3 && k < 0; i++)
    if (span_all / (double)rollup_res[i] <= ROLLUP_READ_MAX)
      k = i;
  if (k < 0)
    k = 2;
  return k;
}

/* Buckets as the answer: means (and min/max with band), empty buckets at either end left out. */
static void write_buckets(FILE *out, const struct store_series *s, const char *res, int64_t from, int64_t to,
                          struct buckets *b, int band) {
  size_t points = b->n, a = 0, e = points;
  while (a < e && !b->cnt[a])
    a++;
  while (e > a && !b->cnt[e - 1])
    e--;
  for (size_t i = a; i < e; i++)
    if (b->cnt[i])
      b->sum[i] /= (double)b->cnt[i];
  header(out, s, res, from, to);
  fprintf(out, "\"bucket_s\":");
  gs_json_num(out, serve_sec(b->width));
  fputs(",\"t\":[", out);
  for (size_t i = a; i < e; i++) {
    if (i > a)
      fputc(',', out);
    gs_json_num(out, serve_sec(b->from + b->width * (int64_t)i + b->width / 2));
  }
  fputs("],", out);
  arr(out, "mean", b->sum, points, b->cnt, a, e);
  if (band) {
    fputc(',', out);
    arr(out, "min", b->mn, points, b->cnt, a, e);
    fputc(',', out);
    arr(out, "max", b->mx, points, b->cnt, a, e);
  }
  fputc('}', out);
}

int serve_series_json(FILE *out, const struct runview *v, const struct store_series *s, int64_t from, int64_t to,
                      size_t points, int band) {
  int rc = GS_OK;
  if (s->count <= 0 || from > s->t_last || to < s->t_first) {
    header(out, s, "raw", from < s->t_first ? s->t_first : from, to > s->t_last ? s->t_last : to);
    fputs("\"t\":[],\"mean\":[]}", out);
    return GS_OK;
  }
  if (from < s->t_first)
    from = s->t_first;
  if (to > s->t_last)
    to = s->t_last;
  double span_all = (double)s->t_last - (double)s->t_first + 1, span = (double)to - (double)from + 1;
  double est = (double)s->count * span / span_all;
  struct store_points raw = {0};
  if (est <= (double)points * 1.05 || est <= RAW_READ_MAX) {
    rc = v->st->samples_read(v->st, s->id, from, to, store_points_put, &raw);
    if (raw.oom)
      rc = gs_fail(GS_ENOMEM, "out of memory");
    if (rc < 0)
      goto fail;
    rc = GS_OK;
    if (raw.n <= points) {
      struct store_steps steps;
      rc = store_steps_load(v->st, v->series, v->nseries, s, from, to, &steps);
      if (rc)
        goto fail;
      header(out, s, "raw", from, to);
      write_raw(out, &raw, &steps);
      store_steps_done(&steps);
      goto fail;
    }
  }
  struct buckets b = {.n = points, .from = from};
  b.width = (int64_t)ceil(span / (double)points);
  if (b.width < 1)
    b.width = 1;
  b.mn = calloc(points, sizeof *b.mn);
  b.mx = calloc(points, sizeof *b.mx);
  b.sum = calloc(points, sizeof *b.sum);
  b.cnt = calloc(points, sizeof *b.cnt);
  const char *res = "raw";
  int64_t *rt = NULL;
  double *rmn = NULL, *rmx = NULL, *rmean = NULL;
  size_t rn = 0;
  if (!b.mn || !b.mx || !b.sum || !b.cnt) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto free_buckets;
  }
  if (raw.n || est <= RAW_READ_MAX) {
    for (size_t i = 0; i < raw.n; i++)
      bucket_add(&b, raw.t[i], raw.v[i], raw.v[i], raw.v[i]);
  } else {
    int k = rollup_pick(b.width, span_all);
    res = rollup_names[k];
    rc = v->st->rollups_read(v->st, s->id, rollup_res[k], &rt, &rmn, &rmx, &rmean, &rn);
    if (rc)
      goto free_buckets;
    for (size_t i = 0; i < rn; i++)
      if (rt[i] + rollup_res[k] > from && rt[i] <= to && isfinite(rmn[i]) && isfinite(rmx[i]) && isfinite(rmean[i]))
        bucket_add(&b, rt[i] < from ? from : rt[i], rmn[i], rmx[i], rmean[i]);
  }
  write_buckets(out, s, res, from, to, &b, band);
free_buckets:
  free(b.mn);
  free(b.mx);
  free(b.sum);
  free(b.cnt);
  free(rt);
  free(rmn);
  free(rmx);
  free(rmean);
fail:
  store_points_done(&raw);
  return rc;
}

/* ---- a series answer, streamed ---- */

struct serve_series_stream {
  struct serve *s;
  struct serve_cached_view *entry; /* pinned, or NULL */
  struct serve_cached_view own;    /* the view, when not a cached one */
  struct runview v;                /* what serve_series_json reads of the view: its store and series */
  struct store_series *series;
  size_t n, next;
  int64_t from, to;
  size_t points;
  int band, done;
  char *buf;
  size_t len, off;
};

struct serve_series_stream *serve_series_stream_new(struct serve *s, struct serve_cached_view *entry,
                                                    struct serve_cached_view *fresh, const struct runview *v,
                                                    const struct store_series *series, size_t n, int64_t from,
                                                    int64_t to, size_t points, int band) {
  struct serve_series_stream *x = calloc(1, sizeof *x);
  if (!x)
    return NULL;
  x->series = malloc((n ? n : 1) * sizeof *x->series);
  FILE *out = open_memstream(&x->buf, &x->len);
  if (!x->series || !out) {
    if (out)
      fclose(out);
    free(x->buf);
    free(x->series);
    free(x);
    return NULL;
  }
  memcpy(x->series, series, n * sizeof *series);
  fputs("{\"run\":", out);
  gs_json_str(out, v->run.id);
  fputs(",\"series\":[", out);
  fclose(out);
  x->s = s;
  x->n = n;
  x->from = from;
  x->to = to;
  x->points = points;
  x->band = band;
  x->v.st = v->st;
  x->v.series = v->series;   /* the run's series, where a client metric's steps are found: the view */
  x->v.nseries = v->nseries; /* (pinned, or moved into the stream below) keeps them */
  if (entry) {
    x->entry = entry;
    entry->pins++;
  } else {
    x->own = *fresh; /* the stream owns the fresh view and its group store */
    memset(fresh, 0, sizeof *fresh);
  }
  return x;
}

ssize_t serve_series_stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  struct serve_series_stream *x = cls;
  (void)pos;
  while (x->off >= x->len) {
    if (x->done)
      return MHD_CONTENT_READER_END_OF_STREAM;
    free(x->buf);
    x->buf = NULL;
    x->len = x->off = 0;
    FILE *out = open_memstream(&x->buf, &x->len);
    if (!out)
      return MHD_CONTENT_READER_END_WITH_ERROR;
    int rc = GS_OK;
    if (x->next < x->n) {
      /* One series at a time under the lock: between them other requests have the store. */
      pthread_mutex_lock(&x->s->mu);
      if (x->next)
        fputc(',', out);
      rc = serve_series_json(out, &x->v, &x->series[x->next], x->from, x->to, x->points, x->band);
      pthread_mutex_unlock(&x->s->mu);
      x->next++;
    } else {
      fputs("]}\n", out);
      x->done = 1;
    }
    fclose(out);
    if (rc) /* the answer was already under way: cut it, so the client sees it incomplete */
      return MHD_CONTENT_READER_END_WITH_ERROR;
  }
  size_t n = x->len - x->off < max ? x->len - x->off : max;
  memcpy(buf, x->buf + x->off, n);
  x->off += n;
  return (ssize_t)n;
}

void serve_series_stream_free(void *cls) {
  struct serve_series_stream *x = cls;
  if (!x)
    return;
  pthread_mutex_lock(&x->s->mu);
  if (x->entry)
    x->entry->pins--;
  serve_cached_view_done(&x->own);
  pthread_mutex_unlock(&x->s->mu);
  free(x->series);
  free(x->buf);
  free(x);
}
