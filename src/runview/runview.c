/* runview: loads a stored run once and answers the questions every reader asks of it (runview.h).
 * The steps are joined here, by timestamp, from the client's step.* series; windowed statistics use
 * one rollup policy for everyone. */
#include "runview/runview.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int pts_read(const struct runview *v, int64_t id, int64_t from, int64_t to, struct store_points *p) {
  int rc = v->st->samples_read(v->st, id, from, to, store_points_put, p);
  if (p->oom)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  return rc < 0 ? rc : GS_OK;
}

int runview_samples(const struct runview *v, int64_t series_id, int64_t from, int64_t to, int64_t **t, double **vals,
                    size_t *n) {
  struct store_points p = {0};
  int rc = pts_read(v, series_id, from, to, &p);
  if (rc)
    store_points_done(&p);
  *t = p.t, *vals = p.v, *n = p.n;
  return rc;
}

long runview_find(const struct runview *v, const char *source, const char *name, const char *labels) {
  if (!v->group)
    return store_series_find(v->series, v->nseries, source, name, labels);
  for (size_t i = 0; i < v->nseries; i++) {
    const struct store_series *s = &v->series[i];
    if ((!source || !strcmp(s->source, source)) && !strcmp(s->name, name) &&
        (!labels || runview_labels_match(v, s->labels, labels)))
      return (long)i;
  }
  return -1;
}

/* Does labels have a member key=...? (key with its '=', e.g. "host=") */
static int has_member(const char *labels, const char *key) {
  size_t kl = strlen(key);
  for (const char *p = labels; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
    if (!strncmp(p, key, kl))
      return 1;
  return 0;
}

int runview_labels_match(const struct runview *v, const char *have, const char *want) {
  if (!strcmp(have, want))
    return 1;
  if (!v->group)
    return 0;
  /* have without the node members (host=, run=) that want does not name */
  int drop_host = !has_member(want, "host="), drop_run = !has_member(want, "run=");
  if (!drop_host && !drop_run)
    return 0;
  char rest[512];
  size_t n = 0;
  for (const char *p = have; *p;) {
    size_t len = strcspn(p, ",");
    int drop = (drop_host && !strncmp(p, "host=", 5)) || (drop_run && !strncmp(p, "run=", 4));
    if (!drop && n + len + 2 < sizeof rest)
      n += (size_t)snprintf(rest + n, sizeof rest - n, "%s%.*s", n ? "," : "", (int)len, p);
    p += len;
    p += *p == ',';
  }
  rest[n] = 0;
  return !strcmp(rest, want);
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

int runview_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double runview_quantile(const double *sorted, size_t n, double q) {
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
    if ((source && strcmp(s->source, source)) || strcmp(s->name, name) ||
        (labels && !runview_labels_match(v, s->labels, labels)))
      continue;
    if (s->count > RUNVIEW_QUICK_POINTS && !gather_rollups(v, s, from, to, &g))
      continue;
    rc = v->st->samples_read(v->st, s->id, from, to, gather_raw, &g);
    rc = rc < 0 ? rc : GS_OK;
  }
  if (g.oom)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  if (!rc && g.nall) {
    qsort(g.all, g.nall, sizeof *g.all, runview_cmp_double);
    out->mean = out->sum / (double)g.nall;
    out->p50 = runview_quantile(g.all, g.nall, 0.5);
    out->p95 = runview_quantile(g.all, g.nall, 0.95);
  } else if (!out->n) {
    out->sum = NAN;
  }
  free(g.all);
  return rc;
}

/* ---- the training loop ---- */

/* Sets the phase at offset off of each step from p, matched by timestamp (both in time order). */
static void join_phase(struct runview_step *steps, size_t n, const struct store_points *p, size_t off) {
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    while (j < p->n && p->t[j] < steps[i].t)
      j++;
    double *field = (double *)((char *)&steps[i] + off);
    *field = j < p->n && p->t[j] == steps[i].t ? p->v[j] : NAN;
  }
}

/* Samples of the step series read in chunks of about STEP_CHUNK, so that no stage of the load holds
 * more than one chunk besides the view's own steps. A chunk ends between two timestamps, never inside
 * a run of equal ones, so the next chunk starts exactly where this one stopped. */
#define STEP_CHUNK 65536

struct chunk {
  struct store_points p;
  int stopped;
  int64_t stop_t;
};

static int chunk_put(void *user, int64_t t, double v) {
  struct chunk *c = user;
  if (c->stopped)
    return 1; /* a back end that reads on after a stop: the next chunk starts at stop_t */
  if (!isfinite(v))
    return 0;
  if (c->p.n >= STEP_CHUNK && t != c->p.t[c->p.n - 1]) {
    c->stopped = 1, c->stop_t = t;
    return 1;
  }
  return store_points_put(&c->p, t, v);
}

/* What load_steps carries from chunk to chunk. */
struct step_load {
  struct runview *v;
  size_t seen;               /* finite samples of step.total_s so far, the warm-up one included */
  size_t cap;                /* v->steps' room */
  size_t len;                /* stretch length when sampling, 0 when every step is held */
  size_t count;              /* the series' stored sample count, which spreads the stretches */
  size_t next;               /* the stretch the next held step may fall in */
  struct runview_step first; /* the first step, kept out until we know there are at least five */
  int first_sane;
};

static int sane(const struct runview_step *s) {
  return s->total >= 0 && s->total < 1e6 && s->t >= 0;
}

void runview_loop_add(struct runview_loop *l, const struct runview_step *s, int first) {
  l->total += s->total;
  if (isfinite(s->data))
    l->data += s->data, l->data_total += s->total, l->ndata++;
  if (isfinite(s->h2d))
    l->h2d += s->h2d, l->h2d_total += s->total, l->nh2d++;
  if (isfinite(s->compute))
    l->compute += s->compute, l->ncompute++;
  if (isfinite(s->samples))
    l->samples += s->samples, l->nsamples++;
  if (first)
    l->t_first = s->t, l->first_total = s->total;
  if (first || s->t > l->t_last)
    l->t_last = s->t;
}

/* Start of stretch b (in finite samples of the series): the first at 0, the last ending at count. */
static size_t stretch_start(const struct step_load *L, size_t b) {
  return (size_t)((double)b * (double)(L->count - L->len) / (RUNVIEW_STRETCHES - 1));
}

static int hold(struct step_load *L, const struct runview_step *s, size_t index) {
  struct runview *v = L->v;
  uint32_t stretch = 0;
  if (L->len) {
    while (L->next < RUNVIEW_STRETCHES && index >= stretch_start(L, L->next) + L->len)
      L->next++;
    if (L->next >= RUNVIEW_STRETCHES || index < stretch_start(L, L->next))
      return GS_OK;
    stretch = (uint32_t)L->next;
  }
  if (v->nsteps == L->cap) {
    if (L->cap >= RUNVIEW_MAX_STEPS)
      return GS_OK; /* the stored count was wrong: the steps past the cap are only summed */
    size_t cap = L->cap ? L->cap * 2 : 1024;
    cap = cap > RUNVIEW_MAX_STEPS ? RUNVIEW_MAX_STEPS : cap;
    struct runview_step *grown = realloc(v->steps, cap * sizeof *grown);
    if (!grown)
      return gs_fail(GS_ENOMEM, "out of memory");
    v->steps = grown, L->cap = cap;
  }
  if (!v->nsteps || v->steps[v->nsteps - 1].stretch != stretch)
    v->nstretches++;
  v->steps[v->nsteps] = *s;
  v->steps[v->nsteps++].stretch = stretch;
  return GS_OK;
}

/* One chunk of step.total_s: its phases joined by timestamp, each step summed and held or not. */
static int load_chunk(struct step_load *L, const struct store_points *total, const long *phase_idx) {
  static const size_t off[] = {offsetof(struct runview_step, data), offsetof(struct runview_step, h2d),
                               offsetof(struct runview_step, compute), offsetof(struct runview_step, samples)};
  struct runview *v = L->v;
  struct runview_step *steps = malloc(total->n * sizeof *steps);
  if (!steps)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < total->n; i++)
    steps[i] = (struct runview_step){.t = total->t[i], .total = total->v[i]};
  int rc = GS_OK;
  for (size_t k = 0; k < sizeof off / sizeof *off && !rc; k++) {
    struct store_points p = {0};
    if (phase_idx[k] >= 0)
      rc = pts_read(v, v->series[phase_idx[k]].id, total->t[0], total->t[total->n - 1], &p);
    if (!rc)
      join_phase(steps, total->n, &p, off[k]);
    store_points_done(&p);
  }
  for (size_t i = 0; i < total->n && !rc; i++) {
    size_t index = L->seen++;
    if (!index) {
      L->first = steps[i], L->first_sane = sane(&steps[i]);
      continue;
    }
    if (!sane(&steps[i]))
      continue;
    runview_loop_add(&v->loop, &steps[i], !v->nsteps_total);
    v->nsteps_total++;
    rc = hold(L, &steps[i], index);
  }
  free(steps);
  return rc;
}

/* The warm-up step stays out when there are at least five; else it is the first kept step. */
static int settle_first(struct step_load *L) {
  struct runview *v = L->v;
  if (L->seen >= 5 || !L->seen || !L->first_sane)
    return GS_OK;
  struct runview_step *grown = realloc(v->steps, (v->nsteps + 1) * sizeof *grown);
  if (!grown)
    return gs_fail(GS_ENOMEM, "out of memory");
  v->steps = grown;
  memmove(v->steps + 1, v->steps, v->nsteps * sizeof *v->steps);
  v->steps[0] = L->first;
  v->nsteps++, v->nsteps_total++;
  v->nstretches = 1;
  struct runview_loop l = {0};
  for (size_t i = 0; i < v->nsteps; i++)
    runview_loop_add(&l, &v->steps[i], !i);
  v->loop = l;
  return GS_OK;
}

/* Streams the main loop's step.total_s in chunks, joining each chunk's phases by timestamp; sums every
 * kept step and holds all of them, or RUNVIEW_STRETCHES evenly spread stretches of them when the
 * series has more than RUNVIEW_MAX_STEPS samples. */
static int load_steps(struct runview *v) {
  static const char *const phases[] = {"step.data_s", "step.h2d_s", "step.compute_s", "step.samples"};
  long ti = runview_find(v, "client", "step.total_s", "");
  if (ti < 0)
    return GS_OK;
  long phase_idx[4];
  for (size_t k = 0; k < 4; k++)
    phase_idx[k] = runview_find(v, "client", phases[k], "");
  struct step_load L = {.v = v};
  int64_t count = v->series[ti].count;
  if (count > RUNVIEW_MAX_STEPS)
    L.count = (size_t)count, L.len = RUNVIEW_MAX_STEPS / RUNVIEW_STRETCHES;
  /* Each read asks for a time window of about two chunks at the series' mean rate, so that a back end
   * that fetches a whole answer at once (PostgreSQL) never fetches the rest of the run; the chunk's
   * stop bounds memory whatever the rate inside the window. The last window is open-ended, so samples
   * past a wrong stored t_last are still read. */
  const struct store_series *ts = &v->series[ti];
  double dt = ts->count > 0 && ts->t_last > ts->t_first
                  ? 2.0 * STEP_CHUNK * ((double)ts->t_last - (double)ts->t_first) / (double)ts->count
                  : 0;
  int64_t span = dt >= 1 && dt < 1e17 ? (int64_t)dt : INT64_MAX;
  struct chunk c = {0};
  int rc = GS_OK;
  for (int64_t from = INT64_MIN;;) {
    int64_t base = from > ts->t_first ? from : ts->t_first;
    int64_t to = span == INT64_MAX || base >= ts->t_last - span ? INT64_MAX : base + span;
    c.p.n = 0, c.stopped = 0;
    rc = v->st->samples_read(v->st, ts->id, from, to, chunk_put, &c);
    if (c.p.oom)
      rc = gs_fail(GS_ENOMEM, "out of memory");
    if (rc < 0)
      break;
    if (c.p.n && (rc = load_chunk(&L, &c.p, phase_idx)))
      break;
    if (c.stopped && c.stop_t <= from) {
      /* Only samples out of time order stop a chunk where it started: reading on would never end. */
      rc = gs_fail(GS_ECORRUPT, "the store's steps of run %s are not in time order", v->run.id);
      break;
    }
    if (c.stopped)
      from = c.stop_t;
    else if (to == INT64_MAX)
      break;
    else
      from = to + 1;
  }
  rc = rc < 0 ? rc : GS_OK;
  if (!rc)
    rc = settle_first(&L);
  store_points_done(&c.p);
  return rc;
}

int runview_steps_sampled(const struct runview *v) {
  return v->nsteps < v->nsteps_total;
}

const char *runview_steps_sampling(const struct runview *v, char *buf, size_t n) {
  if (!runview_steps_sampled(v))
    snprintf(buf, n, "%s", "");
  else
    snprintf(buf, n, "%zu of %zu steps in %zu stretches", v->nsteps, v->nsteps_total, v->nstretches);
  return buf;
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
  /* store_group_open's run: its id is its group's name (a run's own id is never its group's). */
  v->group = v->run.group[0] && !strcmp(v->run.id, v->run.group);
  int64_t last = 0;
  for (size_t i = 0; i < v->nseries; i++)
    if (v->series[i].count > 0 && v->series[i].t_last > last)
      last = v->series[i].t_last;
  v->t_newest_ns = last;
  /* In double: the store's times are untrusted and their difference may not fit an int64. */
  double span = (double)v->run.end_wall_ns - (double)v->run.start_wall_ns;
  v->duration_ns = span > 0 && span < 9e18 ? (int64_t)span : last;
  if (v->duration_ns > 0)
    v->duration_s = (double)v->duration_ns / GS_NS_PER_S;
  return load_steps(v);
}

struct runview_window runview_live_window(const struct runview *v, int64_t window_ns) {
  struct runview_window w = {.from = INT64_MIN, .to = INT64_MAX, .span_s = NAN};
  if (window_ns <= 0)
    window_ns = (int64_t)RUNVIEW_LIVE_WINDOW_S * GS_NS_PER_S;
  if (strcmp(v->run.status, "running") || v->t_newest_ns <= 0)
    return w;
  w.to = v->t_newest_ns;
  w.from = w.to > window_ns ? w.to - window_ns : 0;
  w.span_s = (double)(w.to - w.from) / GS_NS_PER_S;
  return w;
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
