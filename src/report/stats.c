/* report/stats: the numbers every report needs from raw samples — mean, extremes, percentiles of a
 * series, and the training-loop view (steps, throughput, data-wait share) from the client's steps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double quantile(double *sorted, size_t n, double q) {
  if (!n)
    return NAN;
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  double frac = pos - (double)i;
  return i + 1 < n ? sorted[i] * (1 - frac) + sorted[i + 1] * frac : sorted[i];
}

int report_stats(struct store *st, const char *run_id, const struct store_series *series, size_t nseries,
                 const char *source, const char *name, const char *labels, struct series_stats *out) {
  (void)run_id;
  memset(out, 0, sizeof *out);
  out->mean = out->min = out->max = out->p50 = out->p95 = out->first = out->last = NAN;
  double *all = NULL;
  size_t nall = 0;
  int rc = GS_OK;
  for (size_t i = 0; i < nseries; i++) {
    const struct store_series *s = &series[i];
    if ((source && strcmp(s->source, source)) || strcmp(s->name, name) || (labels && strcmp(s->labels, labels)))
      continue;
    int64_t *t;
    double *v;
    size_t n;
    if ((rc = store_samples_load(st, s->id, &t, &v, &n)))
      break;
    double *grown = n ? realloc(all, (nall + n) * sizeof *all) : all;
    if (n && !grown) {
      free(t), free(v);
      rc = gs_fail(GS_ENOMEM, "out of memory");
      break;
    }
    all = grown;
    for (size_t k = 0; k < n; k++) {
      all[nall + k] = v[k];
      out->sum += v[k];
      if (!out->n || t[k] < out->t_first)
        out->t_first = t[k], out->first = v[k];
      if (!out->n || t[k] >= out->t_last)
        out->t_last = t[k], out->last = v[k];
      out->min = out->n && out->min < v[k] ? out->min : v[k];
      out->max = out->n && out->max > v[k] ? out->max : v[k];
      out->n++;
    }
    nall += n;
    free(t), free(v);
  }
  if (!rc && nall) {
    qsort(all, nall, sizeof *all, cmp_double);
    out->mean = out->sum / (double)nall;
    out->p50 = quantile(all, nall, 0.5);
    out->p95 = quantile(all, nall, 0.95);
  }
  free(all);
  return rc;
}

int report_step_stats(struct store *st, const char *run_id, const struct store_series *series, size_t nseries,
                      struct step_stats *out) {
  struct series_stats total, data, h2d, samples;
  memset(out, 0, sizeof *out);
  out->samples_per_s = out->median_step_s = out->data_share = out->h2d_share = out->compute_share = NAN;
  int rc = report_stats(st, run_id, series, nseries, "client", "step.total_s", "", &total);
  if (rc || !total.n || total.sum <= 0)
    return rc;
  if ((rc = report_stats(st, run_id, series, nseries, "client", "step.data_s", "", &data)) ||
      (rc = report_stats(st, run_id, series, nseries, "client", "step.h2d_s", "", &h2d)) ||
      (rc = report_stats(st, run_id, series, nseries, "client", "step.samples", "", &samples)))
    return rc;
  out->steps = total.n;
  out->median_step_s = total.p50;
  out->data_share = data.n ? data.sum / total.sum : NAN;
  out->h2d_share = h2d.n ? h2d.sum / total.sum : 0;
  out->compute_share = isfinite(out->data_share) ? 1 - out->data_share - out->h2d_share : NAN;
  out->samples = samples.sum;
  out->samples_per_s = samples.n ? samples.sum / total.sum : NAN;
  return GS_OK;
}
