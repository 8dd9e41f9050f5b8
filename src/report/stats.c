/* report/stats: the numbers every report needs, read from the run view (runview.h) — mean, extremes,
 * percentiles of a series with the view's one rollup policy, and the training-loop view (steps,
 * throughput, each phase's share) from the view's joined steps. Samples that are not finite numbers
 * (a damaged store) are skipped, never counted as zero. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

static void from_view(const struct runview_stats *s, struct series_stats *out) {
  out->n = s->n;
  out->mean = s->mean, out->min = s->min, out->max = s->max, out->sum = s->n ? s->sum : 0;
  out->p50 = s->p50, out->p95 = s->p95;
  out->first = s->first, out->last = s->last;
  out->t_first = s->t_first, out->t_last = s->t_last;
}

int report_view_stats(const struct runview *v, const char *source, const char *name, const char *labels,
                      struct series_stats *out) {
  struct runview_stats s;
  int rc = runview_stats(v, source, name, labels, INT64_MIN, INT64_MAX, &s);
  from_view(&s, out);
  return rc;
}

static double median_sorted(const double *sorted, size_t n) {
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/* A view that holds a sample of the steps: the median stays the held steps' (each stretch's steps are
 * consecutive), and everything else comes from the sums over every step of the run, with the same
 * formulas as below. */
static void whole_run(const struct runview *v, struct step_stats *out) {
  const struct runview_loop *l = &v->loop;
  out->steps_held = v->nsteps, out->stretches = v->nstretches;
  if (!(l->total > 0)) {
    out->steps = 0;
    return;
  }
  out->steps = v->nsteps_total;
  out->data_share = l->ndata && l->data_total > 0 ? fmin(1, l->data / l->data_total) : NAN;
  out->h2d_share = l->nh2d && l->h2d_total > 0 ? fmin(1, l->h2d / l->h2d_total) : NAN;
  out->compute_share = l->ndata ? 1 - out->data_share - (l->nh2d ? out->h2d_share : 0) : NAN;
  out->samples = l->samples;
  double wall = ((double)l->t_last - (double)l->t_first) / GS_NS_PER_S + l->first_total;
  out->samples_per_s = l->nsamples && wall > 0 ? l->samples / wall : NAN;
}

int report_view_step_stats(const struct runview *v, struct step_stats *out) {
  memset(out, 0, sizeof *out);
  out->samples_per_s = out->median_step_s = out->data_share = out->h2d_share = out->compute_share = NAN;
  size_t n = v->nsteps;
  if (!n)
    return GS_OK;
  double *sorted = malloc(n * sizeof *sorted);
  if (!sorted)
    return gs_fail(GS_ENOMEM, "out of memory");
  /* Each phase over the steps that reported it (a step without a data= field is not a step without
   * data wait): its sum, and the total of those same steps. */
  double total = 0, data = 0, h2d = 0, samples = 0, tot_d = 0, tot_h = 0;
  size_t nd = 0, nh = 0, ns = 0;
  for (size_t i = 0; i < n; i++) {
    const struct runview_step *s = &v->steps[i];
    sorted[i] = s->total, total += s->total;
    if (isfinite(s->data))
      data += s->data, tot_d += s->total, nd++;
    if (isfinite(s->h2d))
      h2d += s->h2d, tot_h += s->total, nh++;
    if (isfinite(s->samples))
      samples += s->samples, ns++;
  }
  if (total > 0) {
    qsort(sorted, n, sizeof *sorted, rp_cmp_double);
    out->steps = n;
    out->median_step_s = median_sorted(sorted, n);
    out->data_share = nd && tot_d > 0 ? fmin(1, data / tot_d) : NAN;
    out->h2d_share = nh && tot_h > 0 ? fmin(1, h2d / tot_h) : NAN;
    out->compute_share = nd ? 1 - out->data_share - (nh ? out->h2d_share : 0) : NAN;
    out->samples = samples;
    /* Throughput over wall time from the first kept step's start to the last step: time the loop
     * spent outside its steps (evaluation, checkpoints) counts against it. */
    double wall = ((double)v->steps[n - 1].t - (double)v->steps[0].t) / GS_NS_PER_S + v->steps[0].total;
    if (ns && wall > 0)
      out->samples_per_s = samples / wall;
  }
  free(sorted);
  out->steps_held = out->steps;
  out->stretches = out->steps ? 1 : 0;
  if (runview_steps_sampled(v))
    whole_run(v, out);
  return GS_OK;
}
