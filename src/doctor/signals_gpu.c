/* doctor/signals_gpu: each GPU over the analysis window — utilisation, SM and tensor activity,
 * memory, power, temperature, clocks, PCIe — and the share of the window its clocks were cut for heat
 * or power (NVML's clock-event reasons, from core's one table gs_clock_reasons), with the SM clock and
 * util while throttled against while busy and unthrottled. A long run's throttling comes from the
 * collector's throttle_start/stop events and the rollups rather than millions of samples. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_int.h"

enum { TH_BUSY, TH_HOT, TH_IDLE };

/* The reasons that cut clocks for heat or power (docs/diagnosis.md), and the one that only says the
 * GPU is idle. */
static unsigned throttle_bits(void) {
  return (unsigned)gs_clock_reasons_mask(GS_REASON_THROTTLE);
}
static unsigned idle_bits(void) {
  return (unsigned)gs_clock_reasons_mask(GS_REASON_IDLE);
}

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
  long i = runview_find(d->v, "nvml", name, lab);
  *t = NULL, *v = NULL, *n = 0;
  if (i >= 0 && dr_samples(d, d->v->series[i].id, t, v, n))
    *n = 0;
}

/* The clock-event reason named in a throttle event as its bit (0 when not a heat/power one). */
static unsigned reason_bit(const char *name) {
  const struct gs_clock_reason *r = gs_clock_reason_named(name);
  return r && r->flags & GS_REASON_THROTTLE ? (unsigned)r->bit : 0;
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
  long i = runview_find(d->v, "nvml", name, lab);
  int64_t *t;
  double *mn, *mx, *mean;
  size_t n;
  if (i < 0 || d->v->st->rollups_read(d->v->st, d->v->series[i].id, RUNVIEW_QUICK_RES_NS, &t, &mn, &mx, &mean, &n))
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
  for (size_t e = 0; e <= d->v->nevents; e++) {
    const struct store_event *ev = e < d->v->nevents ? &d->v->events[e] : NULL;
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
    g->throttle_share = fmin(1, hot / (d->window_s * GS_NS_PER_S));
  rollup_means(d, "gpu.sm_clock_mhz", lab, ivs, niv, &g->throttle_clock, &g->clock_unthrottled);
  double cool;
  rollup_means(d, "gpu.util_pct", lab, ivs, niv, &g->throttle_util, &cool);
  free(ivs);
}

/* Time share of heat/power clock reasons, and the SM clock and util while throttled vs while busy
 * and unthrottled (idle stretches, GpuIdle in the mask, are neither). */
static void gpu_throttle(struct dr_run *d, struct dr_gpu *g, const char *lab) {
  g->throttle_share = g->throttle_clock = g->clock_unthrottled = g->throttle_util = NAN;
  long ti = runview_find(d->v, "nvml", "gpu.throttle_reasons", lab);
  if (ti >= 0 && d->v->series[ti].count > RUNVIEW_QUICK_POINTS) {
    gpu_throttle_long(d, g, lab);
    return;
  }
  int64_t *t, *ct = NULL, *ut = NULL;
  double *v, *cv = NULL, *uv = NULL;
  size_t n, cn, un;
  int *state = NULL;
  gpu_series(d, "gpu.throttle_reasons", lab, &t, &v, &n);
  /* The clocks and util only with throttle readings to split them by: a long run without them would
   * load millions of samples for nothing. */
  if (n < 2)
    goto fail;
  gpu_series(d, "gpu.sm_clock_mhz", lab, &ct, &cv, &cn);
  gpu_series(d, "gpu.util_pct", lab, &ut, &uv, &un);
  if (!(state = malloc(n * sizeof *state)))
    goto fail;
  /* The last sample holds for one typical interval. */
  int64_t typical = (t[n - 1] - t[0]) / (int64_t)(n - 1); /* both within the window: no overflow */
  int64_t last_end = t[n - 1] > INT64_MAX - typical ? INT64_MAX : t[n - 1] + typical;
  double hot = 0, all = 0;
  unsigned throttling = throttle_bits(), idle = idle_bits();
  for (size_t i = 0; i < n; i++) {
    unsigned mask = v[i] >= 0 && v[i] < 4294967296.0 ? (unsigned)(unsigned long long)v[i] : 0;
    state[i] = mask & throttling ? TH_HOT : mask & idle ? TH_IDLE : TH_BUSY;
    double dt = (double)((i + 1 < n ? t[i + 1] : last_end) - t[i]);
    if (dt > 0) {
      all += dt;
      if (state[i] == TH_HOT)
        hot += dt, g->throttle_mask |= mask & throttling;
    }
  }
  if (all > 0)
    g->throttle_share = hot / all;
  double m[3];
  means_by_state(t, state, n, last_end, ct, cv, cn, m);
  g->throttle_clock = m[TH_HOT], g->clock_unthrottled = m[TH_BUSY];
  means_by_state(t, state, n, last_end, ut, uv, un, m);
  g->throttle_util = m[TH_HOT];
fail:
  free(state);
  free(t), free(v), free(ct), free(cv), free(ut), free(uv);
}

/* An AMD GPU's vendor and gfx target (params gpu.N.vendor, gpu.N.gfx): its matrix cores (CDNA 1-3)
 * take the place of NVIDIA's compute capability 7 and newer for mixed precision. */
static void gpu_vendor(struct dr_run *d, struct dr_gpu *g) {
  static const struct {
    const char *gfx;
    int gen;
  } cdna[] = {{"gfx908", 1}, {"gfx90a", 2}, {"gfx940", 3}, {"gfx941", 3}, {"gfx942", 3}};
  char key[48];
  snprintf(key, sizeof key, "gpu.%d.vendor", g->index);
  const char *v = runview_param(d->v, key);
  g->amd = v && !strcmp(v, "amd");
  snprintf(key, sizeof key, "gpu.%d.gfx", g->index);
  v = runview_param(d->v, key);
  dr_printf(g->gfx, sizeof g->gfx, "%s", v && g->amd ? v : "");
  for (size_t i = 0; i < sizeof cdna / sizeof *cdna; i++)
    if (!strcmp(g->gfx, cdna[i].gfx))
      g->cdna = cdna[i].gen;
}

int dr_load_gpus(struct dr_run *d) {
  int seen[DR_MAX_GPUS] = {0}, max = -1;
  for (size_t i = 0; i < d->v->nseries; i++) {
    if (strcmp(d->v->series[i].source, "nvml"))
      continue;
    int g = runview_gpu_label(d->v->series[i].labels);
    g = g < DR_MAX_GPUS ? g : -1;
    if (g >= 0 && d->v->series[i].count > 0)
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
    const char *name = runview_param(d->v, key);
    dr_printf(g->name, sizeof g->name, "%s", name ? name : "");
    snprintf(key, sizeof key, "gpu.%d.cc", gi);
    g->cc = runview_param_num(d->v, key);
    gpu_vendor(d, g);
    struct {
      const char *name;
      struct dr_stats *out;
    } m[] = {{"gpu.util_pct", &g->util},
             {"gpu.mem_util_pct", &g->mem_util},
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
    long ui = runview_find(d->v, "nvml", "gpu.util_pct", lab);
    g->util_series = ui >= 0 ? d->v->series[ui].id : -1;
    int has_proc = 0;
    size_t ll = strlen(lab);
    for (size_t i = 0; i < d->v->nseries && !has_proc; i++)
      has_proc = !strcmp(d->v->series[i].name, "gpu.proc_mem_bytes") && !strncmp(d->v->series[i].labels, lab, ll) &&
                 d->v->series[i].labels[ll] == ',';
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
  for (int i = 0; i < d->ngpus; i++)
    d->nutil += d->gpus[i].util.n > 0;
  return GS_OK;
}
