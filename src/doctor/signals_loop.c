/* doctor/signals_loop: the training loop's figures over the analysis window — step time (mean and
 * median), each phase's mean and share over the steps that reported it, throughput, the params the
 * rules read (batch size, loader workers, pinned memory, precision), and each rank of a distributed
 * job. The steps themselves are the run view's (runview.h): joined by timestamp, warm-up dropped; for
 * a long run, evenly spread stretches of them, with the whole run's sums beside. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_int.h"

static double quantile_sorted(const double *v, size_t n, double q) {
  if (!n)
    return NAN;
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  double frac = pos - (double)i;
  return i + 1 < n ? v[i] * (1 - frac) + v[i + 1] * frac : v[i];
}

/* The time the held steps in the window cover: each stretch from its first step's start to its last
 * step's end. */
static double held_span(const struct dr_run *d) {
  double span = 0;
  for (size_t i = 0, j; i < d->nsteps; i = j) {
    for (j = i + 1; j < d->nsteps && d->steps[j].stretch == d->steps[i].stretch;)
      j++;
    span += (double)(d->steps[j - 1].t - d->steps[i].t) / GS_NS_PER_S + d->steps[i].total;
  }
  return span;
}

/* A view holding a sample of a long run's steps (runview.h): over the usual window (every held step),
 * the means and shares are the whole run's sums; over a narrower one, throughput is the held steps'
 * samples over the time they cover, not over the whole window. The median stays the sample's. */
static void sampled_figures(struct dr_run *d, double samples, size_t ns) {
  const struct runview_loop *l = &d->v->loop;
  if (d->nsteps < d->v->nsteps) {
    double span = held_span(d);
    d->samples_per_s = ns && span > 0 ? samples / span : NAN;
    return;
  }
  if (!(l->total > 0))
    return;
  d->step_mean = l->total / (double)d->v->nsteps_total;
  d->data_mean = d->data_share = d->h2d_mean = d->h2d_share = d->compute_mean = NAN;
  d->samples_per_step = d->samples_per_s = NAN;
  if (l->ndata && l->data_total > 0)
    d->data_mean = l->data / (double)l->ndata, d->data_share = fmin(1, l->data / l->data_total);
  if (l->nh2d && l->h2d_total > 0)
    d->h2d_mean = l->h2d / (double)l->nh2d, d->h2d_share = fmin(1, l->h2d / l->h2d_total);
  if (l->ncompute)
    d->compute_mean = l->compute / (double)l->ncompute;
  if (l->nsamples) {
    d->samples_per_step = l->samples / (double)l->nsamples;
    if (d->window_s > 0)
      d->samples_per_s = l->samples / d->window_s;
  }
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
    const struct runview_step *s = &d->steps[i];
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
  if (runview_steps_sampled(d->v))
    sampled_figures(d, samples, ns);
}

static void params_signals(struct dr_run *d) {
  d->batch_size = runview_param_num(d->v, "batch_size");
  d->num_workers = runview_param_num(d->v, "num_workers");
  int pin = runview_param_bool(d->v, "pin_memory");
  d->pin_memory = pin < 0 ? NAN : pin;
  d->persistent_workers = runview_param_bool(d->v, "persistent_workers");
  const char *p = runview_param(d->v, "precision");
  dr_printf(d->precision, sizeof d->precision, "%s", p ? p : "");
}

void dr_load_loop(struct dr_run *d) {
  step_figures(d);
  params_signals(d);
}

/* Every rank with a step.total_s series, its mean data wait and step time in the window. */
int dr_load_ranks(struct dr_run *d) {
  size_t n = 0;
  for (size_t i = 0; i < d->v->nseries; i++)
    n += !strcmp(d->v->series[i].source, "client") && !strcmp(d->v->series[i].name, "step.total_s") &&
         runview_rank_label(d->v->series[i].labels) >= 0;
  if (n < 2)
    return GS_OK;
  if (n > DR_MAX_RANKS)
    n = DR_MAX_RANKS;
  if (!(d->ranks = calloc(n, sizeof *d->ranks)))
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < d->v->nseries && d->nranks < n; i++) {
    const struct store_series *s = &d->v->series[i];
    int r = runview_rank_label(s->labels);
    if (strcmp(s->source, "client") || strcmp(s->name, "step.total_s") || r < 0)
      continue;
    struct dr_stats total, data;
    dr_stats_of(d, "client", "step.total_s", s->labels, &total);
    dr_stats_of(d, "client", "step.data_s", s->labels, &data);
    d->ranks[d->nranks++] =
        (struct dr_rank){.rank = r, .nsteps = total.n, .data_mean = data.mean, .total_mean = total.mean};
  }
  return GS_OK;
}
