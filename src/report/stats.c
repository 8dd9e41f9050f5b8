/* report/stats: the numbers every report needs — mean, extremes, percentiles of a series (from its
 * raw samples, or from its rollups when it is long), and the training-loop view (steps, throughput,
 * data-wait share) from the client's steps. Samples that are not finite numbers (a damaged store) are
 * skipped, never counted as zero. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

#define QUICK_POINTS 200000 /* a longer series is summarised from its 10 s rollups ... */
#define QUICK_RES_NS 10000000000LL
#define SLOW_POINTS 2000000 /* ... or its 1 min ones past two days at 10 Hz */
#define SLOW_RES_NS 60000000000LL

static double quantile(double *sorted, size_t n, double q) {
  if (!n)
    return NAN;
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  double frac = pos - (double)i;
  return i + 1 < n ? sorted[i] * (1 - frac) + sorted[i + 1] * frac : sorted[i];
}

/* Appends a series' values to *all (raw samples, or the 10 s rollups' bucket means for a long series)
 * and folds them into out's sum, min, max and count. */
static int gather(struct store *st, const struct store_series *s, double **all, size_t *nall,
                  struct series_stats *out) {
  int64_t *t = NULL;
  double *v = NULL, *mn = NULL, *mx = NULL;
  size_t n;
  int quick = s->count > QUICK_POINTS;
  int64_t res = s->count > SLOW_POINTS ? SLOW_RES_NS : QUICK_RES_NS;
  int rc = quick ? st->rollups_read(st, s->id, res, &t, &mn, &mx, &v, &n) : store_samples_load(st, s->id, &t, &v, &n);
  if (rc)
    return rc;
  double *grown = n ? realloc(*all, (*nall + n) * sizeof **all) : *all;
  if (n && !grown) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto out;
  }
  *all = grown;
  for (size_t k = 0; k < n; k++) {
    double lo = quick ? mn[k] : v[k], hi = quick ? mx[k] : v[k];
    if (!isfinite(v[k]) || !isfinite(lo) || !isfinite(hi))
      continue;
    (*all)[(*nall)++] = v[k];
    out->sum += v[k];
    out->min = out->n && out->min < lo ? out->min : lo;
    out->max = out->n && out->max > hi ? out->max : hi;
    if (!out->n || t[k] < out->t_first)
      out->t_first = t[k], out->first = v[k];
    if (!out->n || t[k] >= out->t_last)
      out->t_last = t[k], out->last = v[k];
    out->n++;
  }
  /* A bucket's mean is not the series' first or last value: the first bucket's minimum and the last
   * one's maximum are (for a counter, the only series whose ends reports use). */
  if (quick && n && out->t_first == t[0] && isfinite(mn[0]))
    out->first = mn[0];
  if (quick && n && out->t_last == t[n - 1] && isfinite(mx[n - 1]))
    out->last = mx[n - 1];
out:
  free(t), free(v), free(mn), free(mx);
  return rc;
}

int report_stats(struct store *st, const char *run_id, const struct store_series *series, size_t nseries,
                 const char *source, const char *name, const char *labels, struct series_stats *out) {
  (void)run_id;
  memset(out, 0, sizeof *out);
  out->mean = out->min = out->max = out->p50 = out->p95 = out->first = out->last = NAN;
  double *all = NULL;
  size_t nall = 0;
  int rc = GS_OK;
  for (size_t i = 0; i < nseries && !rc; i++) {
    const struct store_series *s = &series[i];
    if ((source && strcmp(s->source, source)) || strcmp(s->name, name) || (labels && strcmp(s->labels, labels)))
      continue;
    rc = gather(st, s, &all, &nall, out);
  }
  if (!rc && nall) {
    qsort(all, nall, sizeof *all, rp_cmp_double);
    out->mean = out->sum / (double)nall;
    out->p50 = quantile(all, nall, 0.5);
    out->p95 = quantile(all, nall, 0.95);
  }
  free(all);
  return rc;
}

/* Sum of a client step series over the steps at times t[from..n) (matched by timestamp), and in
 * *total the sum of those same steps' totals (v), so a share is taken over the steps that reported
 * the phase, not over all of them. */
static int sum_matching(struct store *st, const struct store_series *series, size_t nseries, const char *name,
                        const int64_t *t, const double *v, size_t from, size_t n, double *sum, size_t *count,
                        double *total) {
  *sum = 0, *count = 0, *total = 0;
  long i = store_series_find(series, nseries, "client", name, "");
  if (i < 0)
    return GS_OK;
  int64_t *pt;
  double *pv;
  size_t pn, j = 0;
  int rc = store_samples_load(st, series[i].id, &pt, &pv, &pn);
  if (rc)
    return rc;
  for (size_t k = from; k < n; k++) {
    while (j < pn && pt[j] < t[k])
      j++;
    if (j < pn && pt[j] == t[k] && isfinite(pv[j]) && isfinite(v[k]) && v[k] >= 0)
      *sum += pv[j], *total += v[k], (*count)++;
  }
  free(pt), free(pv);
  return GS_OK;
}

int report_step_stats(struct store *st, const char *run_id, const struct store_series *series, size_t nseries,
                      struct step_stats *out) {
  (void)run_id;
  memset(out, 0, sizeof *out);
  out->samples_per_s = out->median_step_s = out->data_share = out->h2d_share = out->compute_share = NAN;
  long ti = store_series_find(series, nseries, "client", "step.total_s", "");
  if (ti < 0)
    return GS_OK;
  int64_t *t;
  double *v;
  size_t n;
  int rc = store_samples_load(st, series[ti].id, &t, &v, &n);
  if (rc)
    return rc;
  /* Steady state: the first step (workers starting, lazy init) is left out when there are others. */
  size_t from = n >= 5 ? 1 : 0, k = 0;
  double total = 0;
  double *sorted = n ? malloc(n * sizeof *sorted) : NULL;
  if (n && !sorted) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto out;
  }
  for (size_t i = from; i < n; i++)
    if (isfinite(v[i]) && v[i] >= 0)
      sorted[k++] = v[i], total += v[i];
  if (!k || total <= 0)
    goto out;
  qsort(sorted, k, sizeof *sorted, rp_cmp_double);
  out->steps = k;
  out->median_step_s = quantile(sorted, k, 0.5);
  double data, h2d, samples, tot_d, tot_h, tot_s;
  size_t nd, nh, ns;
  if ((rc = sum_matching(st, series, nseries, "step.data_s", t, v, from, n, &data, &nd, &tot_d)) ||
      (rc = sum_matching(st, series, nseries, "step.h2d_s", t, v, from, n, &h2d, &nh, &tot_h)) ||
      (rc = sum_matching(st, series, nseries, "step.samples", t, v, from, n, &samples, &ns, &tot_s)))
    goto out;
  out->data_share = nd && tot_d > 0 ? fmin(1, data / tot_d) : NAN;
  out->h2d_share = nh && tot_h > 0 ? fmin(1, h2d / tot_h) : NAN;
  out->compute_share = nd ? 1 - out->data_share - (nh ? out->h2d_share : 0) : NAN;
  out->samples = samples;
  /* Throughput over wall time from the first kept step's start to the last step: time the loop spent
   * outside its steps (evaluation, checkpoints) counts against it. */
  double wall = ((double)t[n - 1] - (double)t[from]) / 1e9 + (isfinite(v[from]) ? v[from] : 0);
  if (ns && wall > 0)
    out->samples_per_s = samples / wall;
out:
  free(sorted);
  free(t), free(v);
  return rc;
}
