/* runview: loads a stored run once and answers the questions every reader asks of it (runview.h).
 * The steps are joined here, by timestamp, from the client's step.* series; windowed statistics use
 * one rollup policy for everyone. */
#include "runview/runview.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A growing (t, v) pair of arrays; non-finite values are not kept. */
struct pts {
  int64_t *t;
  double *v;
  size_t n, cap;
  int oom;
};

static int pts_put(void *user, int64_t t, double v) {
  struct pts *p = user;
  if (!isfinite(v))
    return 0;
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 256;
    int64_t *nt = realloc(p->t, cap * sizeof *nt);
    if (nt)
      p->t = nt;
    double *nv = realloc(p->v, cap * sizeof *nv);
    if (nv)
      p->v = nv;
    if (!nt || !nv)
      return p->oom = 1;
    p->cap = cap;
  }
  p->t[p->n] = t;
  p->v[p->n++] = v;
  return 0;
}

static void pts_done(struct pts *p) {
  free(p->t), free(p->v);
  memset(p, 0, sizeof *p);
}

static int pts_read(const struct runview *v, int64_t id, int64_t from, int64_t to, struct pts *p) {
  int rc = v->st->samples_read(v->st, id, from, to, pts_put, p);
  if (p->oom)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  return rc < 0 ? rc : GS_OK;
}

int runview_samples(const struct runview *v, int64_t series_id, int64_t from, int64_t to, int64_t **t, double **vals,
                    size_t *n) {
  struct pts p = {0};
  int rc = pts_read(v, series_id, from, to, &p);
  if (rc)
    pts_done(&p);
  *t = p.t, *vals = p.v, *n = p.n;
  return rc;
}

long runview_find(const struct runview *v, const char *source, const char *name, const char *labels) {
  return store_series_find(v->series, v->nseries, source, name, labels);
}

/* ---- params and labels ---- */

const char *runview_param(const struct runview *v, const char *key) {
  for (size_t i = 0; i < v->nparams; i++)
    if (v->params[i].key && !strcmp(v->params[i].key, key))
      return v->params[i].value ? v->params[i].value : "";
  return NULL;
}

double runview_param_num(const struct runview *v, const char *key) {
  const char *s = runview_param(v, key);
  if (!s || !*s)
    return NAN;
  char *end;
  double x = strtod(s, &end);
  return end != s && !*end && isfinite(x) ? x : NAN;
}

int runview_param_bool(const struct runview *v, const char *key) {
  const char *s = runview_param(v, key);
  if (!s)
    return -1;
  if (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcmp(s, "1") || !strcasecmp(s, "on"))
    return 1;
  if (!strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcmp(s, "0") || !strcasecmp(s, "off"))
    return 0;
  return -1;
}

/* N for labels exactly "<key>N" with lo <= N <= hi, else -1. */
static int label_int(const char *labels, const char *key, long lo, long hi) {
  size_t k = strlen(key);
  if (strncmp(labels, key, k) || labels[k] < '0' || labels[k] > '9')
    return -1;
  char *end;
  long x = strtol(labels + k, &end, 10);
  return !*end && x >= lo && x <= hi ? (int)x : -1;
}

int runview_gpu_label(const char *labels) {
  return label_int(labels, "gpu=", 0, 1023);
}

int runview_rank_label(const char *labels) {
  return *labels ? label_int(labels, "rank=", 1, 65535) : 0;
}

/* ---- windowed statistics ---- */

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double quantile(const double *sorted, size_t n, double q) {
  if (!n)
    return NAN;
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  double frac = pos - (double)i;
  return i + 1 < n ? sorted[i] * (1 - frac) + sorted[i + 1] * frac : sorted[i];
}

/* Running statistics plus every value, for the percentiles. */
struct gather {
  struct runview_stats *out;
  double *all;
  size_t nall, cap;
  int oom;
};

static void gather_put(struct gather *g, int64_t t, double v, double lo, double hi) {
  struct runview_stats *o = g->out;
  if (g->nall == g->cap) {
    size_t cap = g->cap ? g->cap * 2 : 256;
    double *grown = realloc(g->all, cap * sizeof *grown);
    if (!grown) {
      g->oom = 1;
      return;
    }
    g->all = grown, g->cap = cap;
  }
  g->all[g->nall++] = v;
  o->sum += v;
  o->min = o->n && o->min < lo ? o->min : lo;
  o->max = o->n && o->max > hi ? o->max : hi;
  if (!o->n || t < o->t_first)
    o->t_first = t, o->first = v;
  if (!o->n || t >= o->t_last)
    o->t_last = t, o->last = v;
  o->n++;
}

static int gather_raw(void *user, int64_t t, double v) {
  if (isfinite(v))
    gather_put(user, t, v, v, v);
  return ((struct gather *)user)->oom;
}

/* A long series from its rollups within the window. Returns 0, or a GS_E code to fall back on the
 * raw samples. */
static int gather_rollups(const struct runview *v, const struct store_series *s, int64_t from, int64_t to,
                          struct gather *g) {
  int64_t *t;
  double *mn, *mx, *mean;
  size_t n;
  int64_t res = s->count > RUNVIEW_SLOW_POINTS ? RUNVIEW_SLOW_RES_NS : RUNVIEW_QUICK_RES_NS;
  int rc = v->st->rollups_read(v->st, s->id, res, &t, &mn, &mx, &mean, &n);
  if (rc)
    return rc;
  struct runview_stats *o = g->out;
  for (size_t k = 0; k < n; k++) {
    if (t[k] < from || t[k] > to || !isfinite(mean[k]) || !isfinite(mn[k]) || !isfinite(mx[k]))
      continue;
    size_t n0 = o->n;
    int64_t tf = o->t_first, tl = o->t_last;
    gather_put(g, t[k], mean[k], mn[k], mx[k]);
    /* A bucket's mean is not the series' first or last value; its extremes are, for a counter. */
    if (!n0 || t[k] < tf)
      o->first = mn[k];
    if (!n0 || t[k] >= tl)
      o->last = mx[k];
  }
  free(t), free(mn), free(mx), free(mean);
  return GS_OK;
}

int runview_stats(const struct runview *v, const char *source, const char *name, const char *labels, int64_t from,
                  int64_t to, struct runview_stats *out) {
  memset(out, 0, sizeof *out);
  out->mean = out->min = out->max = out->p50 = out->p95 = out->first = out->last = NAN;
  struct gather g = {.out = out};
  int rc = GS_OK;
  for (size_t i = 0; i < v->nseries && !rc && !g.oom; i++) {
    const struct store_series *s = &v->series[i];
    if ((source && strcmp(s->source, source)) || strcmp(s->name, name) || (labels && strcmp(s->labels, labels)))
      continue;
    if (s->count > RUNVIEW_QUICK_POINTS && !gather_rollups(v, s, from, to, &g))
      continue;
    rc = v->st->samples_read(v->st, s->id, from, to, gather_raw, &g);
    rc = rc < 0 ? rc : GS_OK;
  }
  if (g.oom)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  if (!rc && g.nall) {
    qsort(g.all, g.nall, sizeof *g.all, cmp_double);
    out->mean = out->sum / (double)g.nall;
    out->p50 = quantile(g.all, g.nall, 0.5);
    out->p95 = quantile(g.all, g.nall, 0.95);
  } else if (!out->n) {
    out->sum = NAN;
  }
  free(g.all);
  return rc;
}

/* ---- the training loop ---- */

/* Sets the phase at offset off of each step from p, matched by timestamp (both in time order). */
static void join_phase(struct runview_step *steps, size_t n, const struct pts *p, size_t off) {
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    while (j < p->n && p->t[j] < steps[i].t)
      j++;
    double *field = (double *)((char *)&steps[i] + off);
    *field = j < p->n && p->t[j] == steps[i].t ? p->v[j] : NAN;
  }
}

static int load_steps(struct runview *v) {
  static const struct {
    const char *name;
    size_t off;
  } phases[] = {{"step.data_s", offsetof(struct runview_step, data)},
                {"step.h2d_s", offsetof(struct runview_step, h2d)},
                {"step.compute_s", offsetof(struct runview_step, compute)},
                {"step.samples", offsetof(struct runview_step, samples)}};
  long ti = runview_find(v, "client", "step.total_s", "");
  if (ti < 0)
    return GS_OK;
  struct pts total = {0};
  int rc = pts_read(v, v->series[ti].id, INT64_MIN, INT64_MAX, &total);
  if (rc || !total.n)
    goto out;
  if (!(v->steps = calloc(total.n, sizeof *v->steps))) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto out;
  }
  for (size_t i = total.n >= 5 ? 1 : 0; i < total.n; i++)
    if (total.v[i] >= 0 && total.v[i] < 1e6 && total.t[i] >= 0)
      v->steps[v->nsteps++] = (struct runview_step){.t = total.t[i], .total = total.v[i]};
  for (size_t k = 0; k < sizeof phases / sizeof *phases && !rc; k++) {
    struct pts p = {0};
    long pi = runview_find(v, "client", phases[k].name, "");
    if (pi >= 0)
      rc = pts_read(v, v->series[pi].id, INT64_MIN, INT64_MAX, &p);
    if (!rc)
      join_phase(v->steps, v->nsteps, &p, phases[k].off);
    pts_done(&p);
  }
out:
  pts_done(&total);
  return rc;
}

int runview_load(struct store *st, const char *ref, struct runview *v) {
  memset(v, 0, sizeof *v);
  v->st = st;
  v->duration_s = NAN;
  int rc;
  if ((rc = st->run_get(st, ref, &v->run)) || (rc = st->series_list(st, v->run.id, &v->series, &v->nseries)) ||
      (rc = st->events_read(st, v->run.id, &v->events, &v->nevents)) ||
      (rc = st->params_read(st, v->run.id, &v->params, &v->nparams)) ||
      (rc = st->notes_read(st, v->run.id, &v->notes, &v->nnotes)) ||
      (rc = st->findings_read(st, v->run.id, &v->findings, &v->nfindings)))
    return rc;
  int64_t last = 0;
  for (size_t i = 0; i < v->nseries; i++)
    if (v->series[i].count > 0 && v->series[i].t_last > last)
      last = v->series[i].t_last;
  /* In double: the store's times are untrusted and their difference may not fit an int64. */
  double span = (double)v->run.end_wall_ns - (double)v->run.start_wall_ns;
  v->duration_ns = span > 0 && span < 9e18 ? (int64_t)span : last;
  if (v->duration_ns > 0)
    v->duration_s = (double)v->duration_ns / 1e9;
  return load_steps(v);
}

void runview_done(struct runview *v) {
  free(v->series);
  free(v->events);
  store_kv_free(v->params, v->nparams);
  store_notes_free(v->notes, v->nnotes);
  free(v->findings);
  free(v->steps);
  memset(v, 0, sizeof *v);
}
