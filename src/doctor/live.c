/* The live diagnosis: the doctor over the end of a run still going. Every live reader — serve's
 * findings API and its event stream, `top`, the node agent's /metrics — asks this one function, so
 * they judge the same window (runview_live_window) and show the same findings. */
#include "doctor/doctor.h"

#include <math.h>

int doctor_diagnose_live(const struct runview *v, int64_t window_ns, struct store_finding **out, size_t *n,
                         struct runview_window *w) {
  struct runview_window lw = runview_live_window(v, window_ns);
  if (w)
    *w = lw;
  return doctor_diagnose_view(v, lw.from, lw.to, out, n);
}

int doctor_diagnose_live_run(struct store *st, const char *run_id, int64_t window_ns, struct store_finding **out,
                             size_t *n, struct runview_window *w) {
  struct runview v;
  *out = NULL;
  *n = 0;
  if (w)
    *w = (struct runview_window){.from = INT64_MIN, .to = INT64_MAX, .span_s = NAN};
  int rc = runview_load(st, run_id, &v);
  if (!rc)
    rc = doctor_diagnose_live(&v, window_ns, out, n, w);
  runview_done(&v);
  return rc;
}
