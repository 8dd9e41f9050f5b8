/* doctor/signals_read: the reads every signal family makes of the run view, within the analysis
 * window dr_run_load picked: a series' statistics (dr_stats_of) and samples (dr_samples), and the
 * labels of the focus node's own series in a group of runs (dr_own_labels, dr_node_labels). A read
 * that fails is kept once in the dr_run (its code and message) and the figure stays missing. The
 * family files (signals_*.c) call these and signals.c calls the families, so the helpers live in a
 * file of their own: no call runs back from a family to signals.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_int.h"

const char *dr_node_labels(const struct dr_run *d, const char *labels, int job, char *buf, size_t n) {
  if (!d->host[0] || !labels)
    return labels;
  if (job && d->node[0])
    dr_printf(buf, n, "%s%s%s", labels, *labels ? "," : "", d->node);
  else
    dr_printf(buf, n, "%s%shost=%s", labels, *labels ? "," : "", d->host);
  return buf;
}

/* Is labels "<base>,<suffix>" or "<suffix>"? Then base into out. */
static int cut_suffix(const char *labels, const char *suffix, char *out, size_t n) {
  size_t len = strlen(labels), sl = strlen(suffix);
  if (!sl || len < sl || strcmp(labels + len - sl, suffix))
    return 0;
  size_t cut = len - sl;
  if (cut && labels[cut - 1] != ',')
    return 0;
  dr_printf(out, n, "%.*s", (int)(cut ? cut - 1 : 0), labels);
  return 1;
}

int dr_own_labels(const struct dr_run *d, const char *labels, char *base, size_t n) {
  if (!d->host[0]) {
    dr_printf(base, n, "%s", labels);
    return 1;
  }
  /* store_group_open appends host=H (and run=ID on a shared host) last */
  char host[160];
  dr_printf(host, sizeof host, "host=%s", d->host);
  return cut_suffix(labels, d->node, base, n) || cut_suffix(labels, host, base, n);
}

/* Keeps the first failed read (its code and this thread's message) for dr_run_load. */
static void dr_read_failed(struct dr_run *d, int rc) {
  if (!d->read_rc) {
    d->read_rc = rc;
    dr_printf(d->read_err, sizeof d->read_err, "%s", gs_last_error());
  }
}

void dr_stats_of(struct dr_run *d, const char *source, const char *name, const char *labels, struct dr_stats *out) {
  struct runview_stats s;
  out->n = 0;
  out->mean = out->min = out->max = NAN;
  char buf[320];
  /* the host's and the job's own series are the focus node's; GPUs and steps are the group's */
  if (source && (!strcmp(source, "host") || !strcmp(source, "proctree")))
    labels = dr_node_labels(d, labels, !strcmp(source, "proctree"), buf, sizeof buf);
  int rc = runview_stats(d->v, source, name, labels, d->from, d->to, &s);
  if (rc)
    dr_read_failed(d, rc);
  if (rc || !s.n)
    return;
  out->n = s.n;
  out->mean = s.mean;
  out->min = s.min;
  out->max = s.max;
}

int dr_samples(struct dr_run *d, int64_t series_id, int64_t **t, double **v, size_t *n) {
  int rc = runview_samples(d->v, series_id, d->from, d->to, t, v, n);
  if (rc)
    dr_read_failed(d, rc);
  return rc;
}
