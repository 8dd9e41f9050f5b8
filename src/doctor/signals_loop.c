/* doctor/signals_loop: the training loop's figures over the analysis window — step time (mean and
 * median), each phase's mean and share over the steps that reported it, throughput, the params the
 * rules read (batch size, loader workers, pinned memory, precision), and each rank of a distributed
 * job. The steps themselves are the run view's (runview.h): joined by timestamp, warm-up dropped; for
 * a long run, evenly spread stretches of them, with the whole run's sums beside. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_int.h"

/* The window's steps' figures, from the run view's one definition (runview_step_figures): over the
 * usual window of a view holding a sample of a long run, the whole run's sums. */
static void step_figures(struct dr_run *d) {
  d->step_mean = d->step_median = d->data_mean = d->h2d_mean = d->compute_mean = NAN;
  d->data_share = d->h2d_share = d->samples_per_step = d->samples_per_s = NAN;
  if (d->nsteps < DR_MIN_STEPS)
    return;
  struct runview_step_figures f;
  runview_step_figures(d->v, (size_t)(d->steps - d->v->steps), d->nsteps, &f);
  d->step_mean = f.mean_step_s, d->step_median = f.median_step_s;
  d->data_mean = f.data_mean_s, d->data_share = f.data_share;
  d->h2d_mean = f.h2d_mean_s, d->h2d_share = f.h2d_share;
  d->compute_mean = f.compute_mean_s;
  d->samples_per_step = f.samples_per_step, d->samples_per_s = f.samples_per_s;
}

static void params_signals(struct dr_run *d) {
  d->batch_size = runview_param_num(d->v, "batch_size");
  d->num_workers = runview_param_num(d->v, "num_workers");
  d->collate_s = runview_param_num(d->v, "loader_collate_s");
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
