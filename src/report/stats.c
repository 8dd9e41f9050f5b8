/* report/stats: the numbers every report needs, read from the run view (runview.h) — mean, extremes,
 * percentiles of a series with the view's one rollup policy (the training loop's figures are the
 * view's own, runview_step_figures). Samples that are not finite numbers
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
