/* doctor/signals: reads one stored run into the numbers the rules reason with (struct dr_run) — the
 * training loop's steps and params from the client, the host's CPU, memory and I/O pressure, the
 * job's processes (which one trains, which ones load data), and each GPU. Everything is read once,
 * through the store interface, within one analysis window: the client's training steps when it sent
 * them (start-up and the first, warm-up step left out), else the whole run.
 *
 * The store is untrusted input here: values may be non-finite, series may be missing or empty,
 * labels odd. Non-finite samples are skipped, and anything absent stays NAN (missing is not zero). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_int.h"

#define NS 1e9

static double quantile_sorted(const double *v, size_t n, double q) {
  if (!n)
    return NAN;
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  double frac = pos - (double)i;
  return i + 1 < n ? v[i] * (1 - frac) + v[i + 1] * frac : v[i];
}

static void stats_empty(struct dr_stats *s) {
  s->n = 0;
  s->mean = s->min = s->max = NAN;
}

struct collect {
  double *v;
  size_t n, cap;
  int64_t *t; /* kept only when want_t */
  int want_t, oom;
};

static int collect_one(void *user, int64_t t, double v) {
  struct collect *c = user;
  if (!isfinite(v))
    return 0;
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 256;
    double *nv = realloc(c->v, cap * sizeof *nv);
    if (!nv)
      return c->oom = 1;
    c->v = nv;
    if (c->want_t) {
      int64_t *nt = realloc(c->t, cap * sizeof *nt);
      if (!nt)
        return c->oom = 1;
      c->t = nt;
    }
    c->cap = cap;
  }
  if (c->want_t)
    c->t[c->n] = t;
  c->v[c->n++] = v;
  return 0;
}

int dr_samples(struct dr_run *d, int64_t series_id, int64_t **t, double **v, size_t *n) {
  struct collect c = {.want_t = 1};
  int rc = d->st->samples_read(d->st, series_id, d->from, d->to, collect_one, &c);
  if (c.oom)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  if (rc < 0) {
    free(c.t), free(c.v);
    *t = NULL, *v = NULL, *n = 0;
    return rc;
  }
  *t = c.t, *v = c.v, *n = c.n;
  return GS_OK;
}

struct acc {
  size_t n;
  double sum, min, max;
};

static void acc_put(struct acc *a, double v) {
  if (!isfinite(v))
    return;
  a->min = a->n && a->min < v ? a->min : v;
  a->max = a->n && a->max > v ? a->max : v;
  a->sum += v;
  a->n++;
}

static int acc_one(void *user, int64_t t, double v) {
  (void)t;
  acc_put(user, v);
  return 0;
}

/* A long series from its stored 10 s (or 1 min) rollups (bucket means for the mean, bucket extremes for min and
 * max), within the window. Returns 0, or a GS_E code to fall back on the raw samples. */
static int acc_rollups(struct dr_run *d, const struct store_series *s, struct acc *a) {
  int64_t *t;
  double *mn, *mx, *mean;
  size_t n;
  int64_t res = s->count > DR_SLOW_POINTS ? DR_SLOW_RES_NS : DR_QUICK_RES_NS;
  int rc = d->st->rollups_read(d->st, s->id, res, &t, &mn, &mx, &mean, &n);
  if (rc)
    return rc;
  for (size_t i = 0; i < n; i++) {
    if (t[i] < d->from || t[i] > d->to || !isfinite(mean[i]) || !isfinite(mn[i]) || !isfinite(mx[i]))
      continue;
    a->min = a->n && a->min < mn[i] ? a->min : mn[i];
    a->max = a->n && a->max > mx[i] ? a->max : mx[i];
    a->sum += mean[i];
    a->n++;
  }
  free(t), free(mn), free(mx), free(mean);
  return GS_OK;
}

void dr_stats_of(struct dr_run *d, const char *source, const char *name, const char *labels, struct dr_stats *out) {
  stats_empty(out);
  struct acc a = {0};
  for (size_t i = 0; i < d->nseries; i++) {
    const struct store_series *s = &d->series[i];
    if ((source && strcmp(s->source, source)) || strcmp(s->name, name) || (labels && strcmp(s->labels, labels)))
      continue;
    if (s->count > DR_QUICK_POINTS && !acc_rollups(d, s, &a))
      continue;
    d->st->samples_read(d->st, s->id, d->from, d->to, acc_one, &a); /* a read error: what was read */
  }
  if (a.n) {
    out->n = a.n;
    out->mean = a.sum / (double)a.n;
    out->min = a.min;
    out->max = a.max;
  }
}

const char *dr_param(const struct dr_run *d, const char *key) {
  for (size_t i = 0; i < d->nparams; i++)
    if (d->params[i].key && !strcmp(d->params[i].key, key))
      return d->params[i].value ? d->params[i].value : "";
  return NULL;
}

static double param_num(const struct dr_run *d, const char *key) {
  const char *v = dr_param(d, key);
  if (!v || !*v)
    return NAN;
  char *end;
  double x = strtod(v, &end);
  return end != v && !*end && isfinite(x) ? x : NAN;
}

/* 1 for true/yes/1, 0 for false/no/0, -1 unknown. */
static int param_bool(const struct dr_run *d, const char *key) {
  const char *v = dr_param(d, key);
  if (!v)
    return -1;
  if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcmp(v, "1") || !strcasecmp(v, "on"))
    return 1;
  if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcmp(v, "0") || !strcasecmp(v, "off"))
    return 0;
  return -1;
}

/* "gpu=N" exactly (no other label): N, else -1. */
static int gpu_label(const char *labels) {
  if (strncmp(labels, "gpu=", 4))
    return -1;
  char *end;
  long g = strtol(labels + 4, &end, 10);
  return end != labels + 4 && !*end && g >= 0 && g < DR_MAX_GPUS ? (int)g : -1;
}

/* ---- the training loop ---- */

/* Loads one client step series as (t, v) pairs over the whole run. */
static int load_all(struct dr_run *d, const char *name, struct collect *c) {
  long i = store_series_find(d->series, d->nseries, "client", name, "");
  c->want_t = 1;
  if (i < 0)
    return GS_OK;
  int rc = d->st->samples_read(d->st, d->series[i].id, INT64_MIN, INT64_MAX, collect_one, c);
  return c->oom ? gs_fail(GS_ENOMEM, "out of memory") : rc < 0 ? rc : GS_OK;
}

/* Fills field (offset into dr_step) from c by matching timestamps (both in time order). */
static void match_phase(struct dr_step *steps, size_t n, const struct collect *c, size_t off) {
  size_t j = 0;
  for (size_t i = 0; i < n; i++) {
    while (j < c->n && c->t[j] < steps[i].t)
      j++;
    double *field = (double *)((char *)&steps[i] + off);
    *field = j < c->n && c->t[j] == steps[i].t ? c->v[j] : NAN;
  }
}

static int load_steps(struct dr_run *d) {
  struct collect c[5] = {{0}};
  static const char *names[5] = {"step.total_s", "step.data_s", "step.h2d_s", "step.compute_s", "step.samples"};
  static const size_t offs[5] = {offsetof(struct dr_step, total), offsetof(struct dr_step, data),
                                 offsetof(struct dr_step, h2d), offsetof(struct dr_step, compute),
                                 offsetof(struct dr_step, samples)};
  int rc = GS_OK;
  for (int k = 0; k < 5 && !rc; k++)
    rc = load_all(d, names[k], &c[k]);
  if (rc || !c[0].n)
    goto out;
  /* A step's total must be a sane duration; the first one is warm-up (workers starting, lazy init)
   * and is left out when there are enough others. */
  size_t skip = c[0].n >= 5 ? 1 : 0, n = 0;
  d->steps = calloc(c[0].n, sizeof *d->steps);
  if (!d->steps) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto out;
  }
  for (size_t i = skip; i < c[0].n; i++)
    if (c[0].v[i] >= 0 && c[0].v[i] < 1e6 && c[0].t[i] >= 0)
      d->steps[n++] = (struct dr_step){.t = c[0].t[i], .total = c[0].v[i]};
  d->nsteps = n;
  for (int k = 1; k < 5; k++)
    match_phase(d->steps, n, &c[k], offs[k]);
out:
  for (int k = 0; k < 5; k++)
    free(c[k].t), free(c[k].v);
  return rc;
}

/* "rank=N" exactly: N, "" (the main loop): 0, else -1. */
static int rank_label(const char *labels) {
  if (!*labels)
    return 0;
  if (strncmp(labels, "rank=", 5))
    return -1;
  char *end;
  long r = strtol(labels + 5, &end, 10);
  return end != labels + 5 && !*end && r > 0 && r <= 65535 ? (int)r : -1;
}

/* Every rank with a step.total_s series, its mean data wait and step time in the window. */
static int load_ranks(struct dr_run *d) {
  size_t n = 0;
  for (size_t i = 0; i < d->nseries; i++)
    n += !strcmp(d->series[i].source, "client") && !strcmp(d->series[i].name, "step.total_s") &&
         rank_label(d->series[i].labels) >= 0;
  if (n < 2)
    return GS_OK;
  if (n > DR_MAX_RANKS)
    n = DR_MAX_RANKS;
  if (!(d->ranks = calloc(n, sizeof *d->ranks)))
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < d->nseries && d->nranks < n; i++) {
    const struct store_series *s = &d->series[i];
    int r = rank_label(s->labels);
    if (strcmp(s->source, "client") || strcmp(s->name, "step.total_s") || r < 0)
      continue;
    struct dr_stats total, data;
    dr_stats_of(d, "client", "step.total_s", s->labels, &total);
    dr_stats_of(d, "client", "step.data_s", s->labels, &data);
    d->ranks[d->nranks++] = (struct dr_rank){.rank = r, .nsteps = total.n, .data_mean = data.mean,
                                             .total_mean = total.mean};
  }
  return GS_OK;
}

static void step_figures(struct dr_run *d) {
  d->step_mean = d->step_median = d->data_mean = d->h2d_mean = d->compute_mean = NAN;
  d->data_share = d->h2d_share = d->samples_per_step = d->samples_per_s = NAN;
  if (d->nsteps < DR_MIN_STEPS)
    return;
  double *tot = malloc(d->nsteps * sizeof *tot);
  if (!tot)
    return;
  /* Each phase's mean and share over the steps that reported that phase (a step without a data=
   * field is not a step without data wait): its own count, and the total of those same steps. */
  double sum = 0, data = 0, h2d = 0, comp = 0, samples = 0, tot_d = 0, tot_h = 0;
  size_t nd = 0, nh = 0, nc = 0, ns = 0;
  for (size_t i = 0; i < d->nsteps; i++) {
    const struct dr_step *s = &d->steps[i];
    tot[i] = s->total;
    sum += s->total;
    if (isfinite(s->data))
      data += s->data, tot_d += s->total, nd++;
    if (isfinite(s->h2d))
      h2d += s->h2d, tot_h += s->total, nh++;
    if (isfinite(s->compute))
      comp += s->compute, nc++;
    if (isfinite(s->samples))
      samples += s->samples, ns++;
  }
  qsort(tot, d->nsteps, sizeof *tot, dr_cmp_double);
  double n = (double)d->nsteps;
  d->step_median = quantile_sorted(tot, d->nsteps, 0.5);
  free(tot);
  d->step_mean = sum / n;
  if (sum <= 0)
    return;
  if (nd && tot_d > 0)
    d->data_mean = data / (double)nd, d->data_share = fmin(1, data / tot_d);
  if (nh && tot_h > 0)
    d->h2d_mean = h2d / (double)nh, d->h2d_share = fmin(1, h2d / tot_h);
  if (nc)
    d->compute_mean = comp / (double)nc;
  if (ns) {
    d->samples_per_step = samples / (double)ns;
    if (d->window_s > 0)
      d->samples_per_s = samples / d->window_s;
  }
}

/* ---- the job's processes ---- */

static int is_launcher(const char *comm) {
  static const char *names[] = {"sh",      "bash", "dash",   "zsh",     "env",  "timeout", "nice",    "taskset",
                                "numactl", "srun", "mpirun", "mpiexec", "time", "stdbuf",  "gpuscope"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcmp(comm, names[i]))
      return 1;
  return 0;
}

static double mean_in_window(struct dr_run *d, const char *name, const char *labels, size_t *count) {
  struct dr_stats s;
  dr_stats_of(d, "proctree", name, labels, &s);
  if (count)
    *count = s.n;
  return s.mean;
}

static int load_procs(struct dr_run *d) {
  size_t cap = 0;
  for (size_t i = 0; i < d->nseries; i++)
    if (!strcmp(d->series[i].source, "proctree") && !strcmp(d->series[i].name, "proc.cpu_pct"))
      cap++;
  d->main_idx = -1;
  d->worker_cpu = d->workers_cpu = d->worker_rss = NAN;
  if (!cap)
    return GS_OK;
  d->procs = calloc(cap, sizeof *d->procs);
  if (!d->procs)
    return gs_fail(GS_ENOMEM, "out of memory");
  double interval = d->run.interval_ns > 0 ? (double)d->run.interval_ns : 1e9;
  int64_t *start = calloc(cap, sizeof *start);
  if (!start)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < d->nseries; i++) {
    const struct store_series *s = &d->series[i];
    if (strcmp(s->source, "proctree") || strcmp(s->name, "proc.cpu_pct") || strncmp(s->labels, "pid=", 4))
      continue;
    char *end;
    long pid = strtol(s->labels + 4, &end, 10);
    if (*end || pid <= 0 || pid > 1 << 30)
      continue;
    size_t count = 0;
    struct dr_proc *p = &d->procs[d->nprocs];
    p->pid = (int)pid;
    p->cpu = mean_in_window(d, "proc.cpu_pct", s->labels, &count) / 100;
    if (!count)
      continue;
    p->rss = mean_in_window(d, "proc.rss_bytes", s->labels, NULL);
    p->threads = mean_in_window(d, "proc.threads", s->labels, NULL);
    /* The share of the window the process was seen in: its first to last sample, plus one interval. */
    double seen = fmin((double)s->t_last + interval, (double)d->to) - fmax((double)s->t_first, (double)d->from);
    p->coverage = d->window_s > 0 ? fmax(0, seen) / (d->window_s * NS) : NAN;
    p->dstate = NAN;
    start[d->nprocs] = s->t_first;
    for (size_t e = 0; e < d->nevents; e++)
      if (!strcmp(d->events[e].kind, "proc_start") && d->events[e].value == (double)pid) {
        dr_printf(p->comm, sizeof p->comm, "%s", d->events[e].name);
        start[d->nprocs] = d->events[e].t;
        break;
      }
    d->nprocs++;
  }
  /* The training process: the earliest long-lived one that is not a launcher (sh -c, env, ...). */
  for (size_t i = 0; i < d->nprocs; i++) {
    const struct dr_proc *p = &d->procs[i];
    if (is_launcher(p->comm) || !(p->coverage >= 0.5))
      continue;
    if (d->main_idx < 0 || start[i] < start[d->main_idx])
      d->main_idx = (int)i;
  }
  if (d->main_idx >= 0) {
    double cpu = 0, rss = 0;
    int nrss = 0;
    for (size_t i = 0; i < d->nprocs; i++) {
      const struct dr_proc *p = &d->procs[i];
      if ((int)i == d->main_idx || start[i] < start[d->main_idx] || !(p->coverage >= 0.3) || is_launcher(p->comm))
        continue;
      d->nworkers++;
      cpu += isfinite(p->cpu) ? p->cpu * fmin(p->coverage, 1) : 0;
      if (isfinite(p->rss))
        rss += p->rss, nrss++;
    }
    if (d->nworkers) {
      d->workers_cpu = cpu;
      d->worker_cpu = cpu / d->nworkers;
      d->worker_rss = nrss ? rss / nrss : NAN;
    }
  }
  free(start);
  return GS_OK;
}

/* ---- GPUs ---- */

/* NVML clock-event reasons that cut clocks for heat or power (see docs/diagnosis.md), and the one
 * that only says the GPU is idle. */
#define THROTTLE_BITS (0x4u | 0x8u | 0x20u | 0x40u | 0x80u)
#define GPU_IDLE_BIT 0x1u

enum { TH_BUSY, TH_HOT, TH_IDLE };

/* Means of a series' samples (st, sv) falling in each state's stretches, where throttle sample i
 * (times t, states state) holds from t[i] until t[i + 1]. */
static void means_by_state(const int64_t *t, const int *state, size_t n, int64_t last_end, const int64_t *st,
                           const double *sv, size_t sn, double mean[3]) {
  double sum[3] = {0};
  size_t cnt[3] = {0}, j = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t end = i + 1 < n ? t[i + 1] : last_end;
    for (; j < sn && st[j] < end; j++)
      if (st[j] >= t[i])
        sum[state[i]] += sv[j], cnt[state[i]]++;
  }
  for (int k = 0; k < 3; k++)
    mean[k] = cnt[k] ? sum[k] / (double)cnt[k] : NAN;
}

/* Loads a series of this GPU within the window (NULL, 0 when absent). */
static void gpu_series(struct dr_run *d, const char *name, const char *lab, int64_t **t, double **v, size_t *n) {
  long i = store_series_find(d->series, d->nseries, "nvml", name, lab);
  *t = NULL, *v = NULL, *n = 0;
  if (i >= 0 && dr_samples(d, d->series[i].id, t, v, n))
    *n = 0;
}

/* The clock-event reason named in a throttle event as its bit (0 when not a heat/power one). */
static unsigned reason_bit(const char *name) {
  static const struct {
    const char *name;
    unsigned bit;
  } r[] = {{"SwPowerCap", 0x4},
           {"HwSlowdown", 0x8},
           {"SwThermalSlowdown", 0x20},
           {"HwThermalSlowdown", 0x40},
           {"HwPowerBrakeSlowdown", 0x80}};
  for (size_t i = 0; i < sizeof r / sizeof *r; i++)
    if (!strcmp(name, r[i].name))
      return r[i].bit;
  return 0;
}

/* Is time t inside a stretch of the events' throttling (from a throttle_start to the stop that
 * clears the last reason)? Intervals are [start, stop) pairs in ivs. */
static int in_intervals(const int64_t *ivs, size_t n, int64_t t) {
  for (size_t i = 0; i + 1 < n * 2; i += 2)
    if (t >= ivs[i] && t < ivs[i + 1])
      return 1;
  return 0;
}

/* Bucket means of a long series in and out of throttling (NAN when none), from its rollups. */
static void rollup_means(struct dr_run *d, const char *name, const char *lab, const int64_t *ivs, size_t niv,
                         double *hot, double *cool) {
  *hot = *cool = NAN;
  long i = store_series_find(d->series, d->nseries, "nvml", name, lab);
  int64_t *t;
  double *mn, *mx, *mean;
  size_t n;
  if (i < 0 || d->st->rollups_read(d->st, d->series[i].id, DR_QUICK_RES_NS, &t, &mn, &mx, &mean, &n))
    return;
  double sum[2] = {0};
  size_t cnt[2] = {0};
  for (size_t k = 0; k < n; k++)
    if (t[k] >= d->from && t[k] <= d->to && isfinite(mean[k])) {
      int h = in_intervals(ivs, niv, t[k]);
      sum[h] += mean[k], cnt[h]++;
    }
  if (cnt[1])
    *hot = sum[1] / (double)cnt[1];
  if (cnt[0])
    *cool = sum[0] / (double)cnt[0];
  free(t), free(mn), free(mx), free(mean);
}

/* gpu_throttle for a long run: the stretches come from the collector's throttle_start/stop events
 * (transitions, so a handful) rather than millions of samples, the clocks and util from rollups. */
static void gpu_throttle_long(struct dr_run *d, struct dr_gpu *g, const char *lab) {
  size_t niv = 0, cap = 0;
  int64_t *ivs = NULL;
  unsigned active = 0;
  int64_t since = 0;
  double hot = 0;
  for (size_t e = 0; e <= d->nevents; e++) {
    const struct store_event *ev = e < d->nevents ? &d->events[e] : NULL;
    unsigned bit = ev && !strcmp(ev->labels, lab) ? reason_bit(ev->name) : 0;
    unsigned before = active;
    if (ev && bit && !strcmp(ev->kind, "throttle_start"))
      active |= bit, g->throttle_mask |= bit;
    else if (ev && bit && !strcmp(ev->kind, "throttle_stop"))
      active &= ~bit;
    else if (ev)
      continue;
    int64_t t = ev ? ev->t : d->to; /* past the last event: a stretch still open ends with the window */
    if (!before && active)
      since = t;
    if (before && (!active || !ev)) {
      int64_t a = since > d->from ? since : d->from, b = t < d->to ? t : d->to;
      if (b > a)
        hot += (double)(b - a);
      if (niv == cap) {
        cap = cap ? cap * 2 : 16;
        int64_t *grown = realloc(ivs, cap * 2 * sizeof *ivs);
        if (!grown)
          break;
        ivs = grown;
      }
      ivs[niv * 2] = since, ivs[niv * 2 + 1] = t, niv++;
    }
  }
  if (d->window_s > 0)
    g->throttle_share = fmin(1, hot / (d->window_s * NS));
  rollup_means(d, "gpu.sm_clock_mhz", lab, ivs, niv, &g->throttle_clock, &g->clock_unthrottled);
  double cool;
  rollup_means(d, "gpu.util_pct", lab, ivs, niv, &g->throttle_util, &cool);
  free(ivs);
}

/* Time share of heat/power clock reasons, and the SM clock and util while throttled vs while busy
 * and unthrottled (idle stretches, GpuIdle in the mask, are neither). */
static void gpu_throttle(struct dr_run *d, struct dr_gpu *g, const char *lab) {
  g->throttle_share = g->throttle_clock = g->clock_unthrottled = g->throttle_util = NAN;
  long ti = store_series_find(d->series, d->nseries, "nvml", "gpu.throttle_reasons", lab);
  if (ti >= 0 && d->series[ti].count > DR_QUICK_POINTS) {
    gpu_throttle_long(d, g, lab);
    return;
  }
  int64_t *t, *ct, *ut;
  double *v, *cv, *uv;
  size_t n, cn, un;
  int *state = NULL;
  gpu_series(d, "gpu.throttle_reasons", lab, &t, &v, &n);
  gpu_series(d, "gpu.sm_clock_mhz", lab, &ct, &cv, &cn);
  gpu_series(d, "gpu.util_pct", lab, &ut, &uv, &un);
  if (n < 2 || !(state = malloc(n * sizeof *state)))
    goto out;
  /* The last sample holds for one typical interval. */
  int64_t typical = (t[n - 1] - t[0]) / (int64_t)(n - 1); /* both within the window: no overflow */
  int64_t last_end = t[n - 1] > INT64_MAX - typical ? INT64_MAX : t[n - 1] + typical;
  double hot = 0, all = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned mask = v[i] >= 0 && v[i] < 4294967296.0 ? (unsigned)(unsigned long long)v[i] : 0;
    state[i] = mask & THROTTLE_BITS ? TH_HOT : mask & GPU_IDLE_BIT ? TH_IDLE : TH_BUSY;
    double dt = (double)((i + 1 < n ? t[i + 1] : last_end) - t[i]);
    if (dt > 0) {
      all += dt;
      if (state[i] == TH_HOT)
        hot += dt, g->throttle_mask |= mask & THROTTLE_BITS;
    }
  }
  if (all > 0)
    g->throttle_share = hot / all;
  double m[3];
  means_by_state(t, state, n, last_end, ct, cv, cn, m);
  g->throttle_clock = m[TH_HOT], g->clock_unthrottled = m[TH_BUSY];
  means_by_state(t, state, n, last_end, ut, uv, un, m);
  g->throttle_util = m[TH_HOT];
out:
  free(state);
  free(t), free(v), free(ct), free(cv), free(ut), free(uv);
}

static int load_gpus(struct dr_run *d) {
  int seen[DR_MAX_GPUS] = {0}, max = -1;
  for (size_t i = 0; i < d->nseries; i++) {
    if (strcmp(d->series[i].source, "nvml"))
      continue;
    int g = gpu_label(d->series[i].labels);
    if (g >= 0 && d->series[i].count > 0)
      seen[g] = 1, max = g > max ? g : max;
  }
  if (max < 0)
    return GS_OK;
  d->gpus = calloc((size_t)max + 1, sizeof *d->gpus);
  if (!d->gpus)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (int gi = 0; gi <= max; gi++) {
    if (!seen[gi])
      continue;
    struct dr_gpu *g = &d->gpus[d->ngpus++];
    char lab[16], key[48];
    snprintf(lab, sizeof lab, "gpu=%d", gi);
    g->index = gi;
    snprintf(key, sizeof key, "gpu.%d.name", gi);
    const char *name = dr_param(d, key);
    dr_printf(g->name, sizeof g->name, "%s", name ? name : "");
    snprintf(key, sizeof key, "gpu.%d.cc", gi);
    g->cc = param_num(d, key);
    struct {
      const char *name;
      struct dr_stats *out;
    } m[] = {{"gpu.util_pct", &g->util},
             {"gpu.sm_active_pct", &g->sm_active},
             {"gpu.tensor_active_pct", &g->tensor},
             {"gpu.mem_used_bytes", &g->mem_used},
             {"gpu.mem_total_bytes", &g->mem_total},
             {"gpu.power_w", &g->power},
             {"gpu.power_limit_w", &g->power_limit},
             {"gpu.temp_c", &g->temp},
             {"gpu.sm_clock_mhz", &g->sm_clock},
             {"gpu.sm_clock_max_mhz", &g->sm_clock_max},
             {"gpu.pcie_rx_bytes_s", &g->pcie_rx}};
    for (size_t k = 0; k < sizeof m / sizeof *m; k++)
      dr_stats_of(d, "nvml", m[k].name, lab, m[k].out);
    long ui = store_series_find(d->series, d->nseries, "nvml", "gpu.util_pct", lab);
    g->util_series = ui >= 0 ? d->series[ui].id : -1;
    int has_proc = 0;
    size_t ll = strlen(lab);
    for (size_t i = 0; i < d->nseries && !has_proc; i++)
      has_proc = !strcmp(d->series[i].name, "gpu.proc_mem_bytes") && !strncmp(d->series[i].labels, lab, ll) &&
                 d->series[i].labels[ll] == ',';
    g->used = g->util.n ? g->util.mean >= DR_IDLE_GPU_UTIL : has_proc;
    gpu_throttle(d, g, lab);
    if (g->used)
      d->nused++;
  }
  double util = 0;
  int n = 0;
  for (int i = 0; i < d->ngpus; i++)
    if (d->gpus[i].used && d->gpus[i].util.n)
      util += d->gpus[i].util.mean, n++;
  d->used_util = n ? util / n : NAN;
  return GS_OK;
}

/* ---- the whole run ---- */

static void host_signals(struct dr_run *d) {
  for (size_t i = 0; i < d->nseries; i++) {
    const struct store_series *s = &d->series[i];
    if (!strcmp(s->source, "host") && !strcmp(s->name, "host.cpu.busy_pct") && !strncmp(s->labels, "cpu=", 4) &&
        s->labels[4] >= '0' && s->labels[4] <= '9')
      d->ncpu++;
  }
  struct dr_stats q, cs;
  dr_stats_of(d, "host", "host.cgroup.cpu_limit_cores", "", &q);
  d->quota = q.n && q.mean > 0 ? q.mean : NAN;
  /* The CPUs the job may run on (its affinity and cgroup cpuset): the fewest seen, since a limit
   * tightened during the run binds from then on. */
  dr_stats_of(d, "host", "host.cpuset_cores", "", &cs);
  d->cpuset = cs.n && cs.min >= 1 ? cs.min : NAN;
  d->cores = NAN;
  double lim[3] = {d->quota, d->cpuset, d->ncpu ? (double)d->ncpu : NAN};
  for (int k = 0; k < 3; k++)
    if (isfinite(lim[k]))
      d->cores = isfinite(d->cores) ? fmin(d->cores, lim[k]) : lim[k];
  dr_stats_of(d, "host", "host.cpu.busy_pct", "cpu=total", &d->host_busy);
  dr_stats_of(d, "host", "host.cpu.iowait_pct", "cpu=total", &d->iowait);
  dr_stats_of(d, "host", "host.psi.io_some_pct", "", &d->psi_io);
  dr_stats_of(d, "host", "host.psi.cpu_some_pct", "", &d->psi_cpu);
  dr_stats_of(d, "host", "host.mem.available_bytes", "", &d->mem_avail);
  dr_stats_of(d, "host", "host.mem.total_bytes", "", &d->mem_total);
  dr_stats_of(d, "host", "host.cgroup.mem_limit_bytes", "", &d->cg_mem_limit);
  dr_stats_of(d, "host", "host.cgroup.mem_used_bytes", "", &d->cg_mem_used);
  dr_stats_of(d, "proctree", "tree.cpu_pct", "", &d->tree_cpu);
  dr_stats_of(d, "proctree", "tree.rss_bytes", "", &d->tree_rss);
  dr_stats_of(d, "proctree", "tree.dstate", "", &d->tree_dstate);
  dr_stats_of(d, "proctree", "tree.procs", "", &d->tree_procs);
  dr_stats_of(d, "proctree", "tree.read_bytes_s", "", &d->tree_read);
  d->job_cores = d->tree_cpu.n ? d->tree_cpu.mean / 100 : NAN;
  d->others_cores = NAN;
  if (d->host_busy.n && d->ncpu && isfinite(d->job_cores))
    d->others_cores = fmax(0, d->host_busy.mean / 100 * d->ncpu - d->job_cores);
}

static void params_signals(struct dr_run *d) {
  d->batch_size = param_num(d, "batch_size");
  d->num_workers = param_num(d, "num_workers");
  int pin = param_bool(d, "pin_memory");
  d->pin_memory = pin < 0 ? NAN : pin;
  d->persistent_workers = param_bool(d, "persistent_workers");
  const char *p = dr_param(d, "precision");
  dr_printf(d->precision, sizeof d->precision, "%s", p ? p : "");
}

int dr_run_load(struct store *st, const char *run_id, struct dr_run *d) {
  memset(d, 0, sizeof *d);
  d->st = st;
  d->main_idx = -1;
  d->used_util = NAN;
  int rc;
  if ((rc = st->run_get(st, run_id, &d->run)) || (rc = st->series_list(st, d->run.id, &d->series, &d->nseries)) ||
      (rc = st->events_read(st, d->run.id, &d->events, &d->nevents)) ||
      (rc = st->params_read(st, d->run.id, &d->params, &d->nparams)))
    return rc;
  int64_t last = 0;
  for (size_t i = 0; i < d->nseries; i++)
    if (d->series[i].count > 0 && d->series[i].t_last > last)
      last = d->series[i].t_last;
  /* In double: the store's times are untrusted and their difference may not fit an int64. */
  double span = (double)d->run.end_wall_ns - (double)d->run.start_wall_ns;
  int64_t dur = span > 0 && span < 9e18 ? (int64_t)span : last;
  d->duration_s = dur > 0 ? (double)dur / NS : NAN;
  if ((rc = load_steps(d)))
    return rc;
  d->from = 0;
  d->to = dur > 0 ? dur : INT64_MAX;
  if (d->nsteps >= DR_MIN_STEPS) {
    const struct dr_step *a = &d->steps[0], *b = &d->steps[d->nsteps - 1];
    int64_t from = a->t - (int64_t)(a->total * NS);
    if (b->t > from && from >= 0) {
      d->from = from;
      d->to = b->t;
    }
  }
  d->window_s = d->to != INT64_MAX ? (double)(d->to - d->from) / NS : NAN;
  step_figures(d);
  params_signals(d);
  host_signals(d);
  if ((rc = load_procs(d)) || (rc = load_gpus(d)) || (rc = load_ranks(d)))
    return rc;
  return GS_OK;
}

void dr_run_done(struct dr_run *d) {
  free(d->series);
  free(d->events);
  store_kv_free(d->params, d->nparams);
  free(d->procs);
  free(d->steps);
  free(d->gpus);
  free(d->ranks);
  memset(d, 0, sizeof *d);
}
