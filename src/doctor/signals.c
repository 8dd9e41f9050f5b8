/* doctor/signals: derives the numbers the rules reason with (struct dr_run) from one loaded run view
 * (runview.h), within one analysis window: the client's training steps when it sent them (start-up
 * and the first, warm-up step left out), else the whole run — or a window the caller names, such as
 * the last minute of a live run. The view holds the run's series, events, params and joined steps;
 * this file picks the window and hands each signal family to its own file: the training loop
 * (signals_loop.c), the host (signals_host.c), the job's processes (signals_procs.c) and the GPUs
 * (signals_gpu.c).
 *
 * The store is untrusted input here: values may be non-finite, series may be missing or empty,
 * labels odd. Non-finite samples are skipped, and anything absent stays NAN (missing is not zero). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_int.h"

/* The steps of the view whose whole step lies in [from, to] (all of them for the usual window), as a
 * borrowed stretch of the view's array. */
static void window_steps(struct dr_run *d, int64_t from, int64_t to) {
  size_t first, n;
  runview_steps_in(d->v, from, to, &first, &n);
  d->steps = d->v->steps + first;
  d->nsteps = n;
}

/* The analysis window: within [from, to] (clipped to the run), the stretch of the training steps when
 * there are enough of them, else all of it. */
static void pick_window(struct dr_run *d, int64_t from, int64_t to) {
  int64_t dur = d->v->duration_ns;
  window_steps(d, from, to);
  d->from = from > 0 ? from : 0;
  d->to = dur > 0 && to > dur ? dur : to;
  if (d->to == INT64_MAX && dur > 0)
    d->to = dur;
  if (d->nsteps >= DR_MIN_STEPS) {
    const struct runview_step *a = &d->steps[0], *b = &d->steps[d->nsteps - 1];
    int64_t start = a->t - (int64_t)(a->total * GS_NS_PER_S);
    if (b->t > start && start >= d->from) {
      d->from = start;
      d->to = b->t;
    }
  }
  if (d->to < d->from)
    d->to = d->from;
  d->window_s = d->to != INT64_MAX ? (double)(d->to - d->from) / GS_NS_PER_S : NAN;
}

int dr_run_load(const struct runview *v, int64_t from, int64_t to, struct dr_run *d) {
  memset(d, 0, sizeof *d);
  d->v = v;
  d->main_idx = -1;
  d->used_util = NAN;
  d->strag_lost = NAN;
  d->stall_data_share = NAN;
  d->strag_gpu = -1;
  d->duration_s = v->duration_s;
  pick_window(d, from, to);
  dr_load_loop(d);
  int rc = dr_load_ranks(d);
  if (rc)
    return rc;
  if (v->group)
    dr_pick_node(d);
  dr_load_host(d);
  if ((rc = dr_load_procs(d)) || (rc = dr_load_gpus(d)))
    return rc;
  if (d->read_rc)
    return gs_fail(d->read_rc, "cannot read the run's data: %s", d->read_err);
  return GS_OK;
}

void dr_run_done(struct dr_run *d) {
  free(d->procs);
  free(d->gpus);
  free(d->ranks);
  *d = (struct dr_run){0};
}
