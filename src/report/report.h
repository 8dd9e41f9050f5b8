/* report: turning a stored run into words and numbers — the end-of-run summary, and (as they land)
 * the terminal, JSON and HTML reports and `compare`. Everything here reads through the store
 * interface, so a report looks the same whichever back end holds the run. */
#ifndef GS_REPORT_H
#define GS_REPORT_H

#include <stdio.h>

#include "store/store.h"

/* Statistics of one series (or of several matching series, pooled). n == 0 when absent. */
struct series_stats {
  size_t n;
  double mean, min, max, sum, p50, p95;
  double first, last; /* first and last values in time order */
  int64_t t_first, t_last;
};

/* Computes stats over every series of run matching source (NULL any), name, labels (NULL any).
 * Returns 0 (st->n may be 0) or a GS_E code. */
int report_stats(struct store *st, const char *run_id, const struct store_series *series, size_t nseries,
                 const char *source, const char *name, const char *labels, struct series_stats *out);

/* The training-loop view from the client's step series (all NAN/0 when the job sent none). */
struct step_stats {
  size_t steps;
  double samples, samples_per_s, median_step_s, data_share, h2d_share, compute_share;
};
int report_step_stats(struct store *st, const char *run_id, const struct store_series *series, size_t nseries,
                      struct step_stats *out);

/* Prints the short end-of-run summary of run_id (what `gpuscope run` shows at the end). */
void report_summary(FILE *out, struct store *st, const char *run_id);

#endif
