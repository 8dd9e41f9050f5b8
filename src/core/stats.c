/* core/stats: the noise model of measured rates — a throughput from per-step samples and durations
 * with its 95 % confidence half-width (batch means, Student's t), and the tie rule on two such
 * figures. tune ranks its trials with it; `gpuscope check` takes a speed-up's interval from it, and
 * holds or breaks a budget only when that interval lies wholly on one side. */
#include <math.h>
#include <stdlib.h>

#include "core/core.h"

/* Student's t, two-sided 95 %, for dof degrees of freedom. */
double gs_t975(int dof) {
  static const double t[] = {NAN,   12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                             2.201, 2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086};
  if (dof < 1)
    return NAN;
  if (dof <= 20)
    return t[dof];
  return dof <= 30 ? 2.042 : dof <= 60 ? 2.000 : 1.960;
}

/* The ratio estimator R = sum x / sum t over k pairs and its standard error by the delta method:
 * sqrt(sum (x - R t)^2 / (k (k - 1))) / mean t. */
static void ratio(const double *x, const double *t, size_t k, double *r, double *se) {
  double sx = 0, st = 0, ss = 0;
  for (size_t i = 0; i < k; i++)
    sx += x[i], st += t[i];
  *r = sx / st;
  for (size_t i = 0; i < k; i++)
    ss += (x[i] - *r * t[i]) * (x[i] - *r * t[i]);
  *se = sqrt(ss / ((double)k * (double)(k - 1))) / (st / (double)k);
}

int gs_rate_ci(const double *samples, const double *secs, size_t n, double *rate, double *ci, int *dof) {
  *rate = *ci = NAN;
  *dof = 0;
  double *x = malloc((n + 1) * sizeof *x), *t = malloc((n + 1) * sizeof *t);
  size_t k = 0;
  for (size_t i = 0; x && t && i < n; i++) {
    double v = samples ? samples[i] : 1;
    if (isfinite(v) && isfinite(secs[i]) && secs[i] > 0)
      x[k] = v, t[k] = secs[i], k++;
  }
  if (!x || !t || k < 2) {
    free(x), free(t);
    return GS_EINVAL;
  }
  /* Batch means: steps come in bursts (a loader with W workers hands over W batches at once, then
   * the loop waits), so single steps are not independent. Blocks of floor(sqrt(k)) consecutive steps
   * absorb such cycles; the spread of the blocks' ratios gives the standard error. */
  size_t b = (size_t)floor(sqrt((double)k)), nb = k / b;
  double se, r;
  ratio(x, t, k, rate, &se); /* the figure itself: every measured step */
  for (size_t j = 0; j < nb; j++) {
    double sx = 0, st = 0;
    for (size_t i = j * b; i < (j + 1) * b; i++)
      sx += x[i], st += t[i];
    x[j] = sx, t[j] = st;
  }
  ratio(x, t, nb, &r, &se);
  *dof = (int)nb - 1;
  *ci = gs_t975(*dof) * se;
  free(x), free(t);
  return 0;
}

int gs_tie(double a, double ci_a, double b, double ci_b) {
  if (!isfinite(a) || !isfinite(b))
    return 0;
  double s = sqrt((isfinite(ci_a) ? ci_a * ci_a : 0) + (isfinite(ci_b) ? ci_b * ci_b : 0));
  return fabs(a - b) <= s;
}
