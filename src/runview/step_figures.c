/* runview/step_figures: the training loop's figures — step time, each phase's mean and share, the
 * throughput — over a stretch of a view's joined steps (runview.h). This is the one place they are
 * computed: the report, the doctor (over its analysis window), serve's run pages and `top` (over its
 * last seconds) read them from here, so a data-wait share is the same number on every screen. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runview/runview.h"

void runview_steps_in(const struct runview *v, int64_t from, int64_t to, size_t *first, size_t *n) {
  size_t a = 0, b = v->nsteps;
  while (a < b && (v->steps[a].t < from || v->steps[a].t - (int64_t)(v->steps[a].total * GS_NS_PER_S) < from))
    a++;
  while (b > a && v->steps[b - 1].t > to)
    b--;
  *first = a;
  *n = b - a;
}

/* The time the steps s[0..n) cover: each stretch from its first step's start to its last step's end. */
static double held_span(const struct runview_step *s, size_t n) {
  double span = 0;
  for (size_t i = 0, j; i < n; i = j) {
    for (j = i + 1; j < n && s[j].stretch == s[i].stretch;)
      j++;
    span += ((double)s[j - 1].t - (double)s[i].t) / GS_NS_PER_S + s[i].total;
  }
  return span;
}

/* Sums of the steps s[0..n), as struct runview_loop keeps them for the whole run. */
static void sum_steps(const struct runview_step *s, size_t n, struct runview_loop *l) {
  memset(l, 0, sizeof *l);
  for (size_t i = 0; i < n; i++)
    runview_loop_add(l, &s[i], !i);
}

/* Means, shares and throughput from sums over steps steps covering span seconds. */
static void from_sums(const struct runview_loop *l, size_t steps, double span, struct runview_step_figures *f) {
  f->steps = steps;
  f->mean_step_s = l->total / (double)steps;
  f->samples = l->samples;
  f->span_s = span > 0 ? span : NAN;
  f->steps_per_s = span > 0 ? (double)steps / span : NAN;
  if (l->nsamples) {
    f->samples_per_step = l->samples / (double)l->nsamples;
    f->samples_per_s = span > 0 ? l->samples / span : NAN;
  }
  if (l->ncompute)
    f->compute_mean_s = l->compute / (double)l->ncompute;
  if (!(l->total > 0))
    return;
  if (l->ndata && l->data_total > 0)
    f->data_mean_s = l->data / (double)l->ndata, f->data_share = fmin(1, l->data / l->data_total);
  if (l->nh2d && l->h2d_total > 0)
    f->h2d_mean_s = l->h2d / (double)l->nh2d, f->h2d_share = fmin(1, l->h2d / l->h2d_total);
  if (isfinite(f->data_share))
    f->compute_share = 1 - f->data_share - (isfinite(f->h2d_share) ? f->h2d_share : 0);
}

void runview_step_figures(const struct runview *v, size_t first, size_t n, struct runview_step_figures *out) {
  memset(out, 0, sizeof *out);
  out->mean_step_s = out->median_step_s = out->data_mean_s = out->data_share = NAN;
  out->h2d_mean_s = out->h2d_share = out->compute_mean_s = out->compute_share = NAN;
  out->samples_per_step = out->samples_per_s = out->steps_per_s = out->span_s = NAN;
  if (first > v->nsteps)
    first = v->nsteps;
  if (n > v->nsteps - first)
    n = v->nsteps - first;
  if (!n)
    return;
  const struct runview_step *s = v->steps + first;
  out->steps_held = n;
  out->stretches = 1;
  for (size_t i = 1; i < n; i++)
    out->stretches += s[i].stretch != s[i - 1].stretch;
  double *sorted = malloc(n * sizeof *sorted);
  if (sorted) { /* without memory the median stays unknown; the rest needs none */
    for (size_t i = 0; i < n; i++)
      sorted[i] = s[i].total;
    qsort(sorted, n, sizeof *sorted, runview_cmp_double);
    out->median_step_s = runview_quantile(sorted, n, 0.5);
    free(sorted);
  }
  const struct runview_loop *l = &v->loop;
  if (runview_steps_sampled(v) && n == v->nsteps && l->total > 0) {
    /* the first held step is the run's first kept one, the last its last */
    double span = ((double)l->t_last - (double)l->t_first) / GS_NS_PER_S + l->first_total;
    from_sums(l, v->nsteps_total, span, out);
    return;
  }
  struct runview_loop sums;
  sum_steps(s, n, &sums);
  from_sums(&sums, n, held_span(s, n), out);
}

double runview_step_speedup(const struct runview_step_figures *base, const struct runview_step_figures *x) {
  double a = base->samples_per_s, b = x->samples_per_s;
  if (a > 0 && b > 0)
    return b / a;
  a = base->steps_per_s, b = x->steps_per_s;
  return a > 0 && b > 0 ? b / a : NAN;
}

int runview_throughput(const struct runview *v, size_t first, size_t n, int with_samples, double *rate, double *ci,
                       int *dof) {
  *rate = *ci = NAN;
  *dof = 0;
  if (first > v->nsteps)
    first = v->nsteps;
  if (n > v->nsteps - first)
    n = v->nsteps - first;
  if (n < 2)
    return GS_EINVAL;
  const struct runview_step *s = v->steps + first;
  double *x = malloc(n * sizeof *x), *t = malloc(n * sizeof *t);
  int rc = GS_ENOMEM;
  if (x && t) {
    for (size_t i = 0; i < n; i++) {
      x[i] = with_samples ? s[i].samples : 1;
      t[i] = i && s[i].stretch == s[i - 1].stretch ? ((double)s[i].t - (double)s[i - 1].t) / GS_NS_PER_S : s[i].total;
    }
    double r;
    rc = gs_rate_ci(x, t, n, &r, ci, dof);
  }
  free(x), free(t);
  if (rc)
    return rc;
  struct runview_step_figures f;
  runview_step_figures(v, first, n, &f);
  *rate = with_samples ? f.samples_per_s : f.steps_per_s;
  if (!isfinite(*rate)) {
    *ci = NAN;
    return GS_EINVAL;
  }
  return 0;
}
