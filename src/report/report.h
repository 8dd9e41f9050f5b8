/* report: turning a stored run into words and numbers — the end-of-run summary, the terminal, JSON
 * and self-contained HTML reports, and `compare`. Everything here reads through the store interface,
 * so a report looks the same whichever back end holds the run. The store is untrusted input: odd
 * strings are escaped or replaced, invalid evidence is shown as text, absent numbers stay absent. */
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
 * Non-finite samples are skipped. A series of more than 200,000 points (a long run) is summarised from
 * its stored 10 s rollups (1 min past 2,000,000 points), so a week-long run reports in a moment: min and max stay
 * exact, the mean and percentiles are those of the bucket means, first and last are the first bucket's minimum and the
 * last one's maximum (exact for a counter), and n counts buckets. Returns 0 (st->n may be 0) or a GS_E code. */
int report_stats(struct store *st, const char *run_id, const struct store_series *series, size_t nseries,
                 const char *source, const char *name, const char *labels, struct series_stats *out);

/* The training-loop view from the client's step series (all NAN/0 when the job sent none). */
struct step_stats {
  size_t steps;
  double samples, samples_per_s, median_step_s, data_share, h2d_share, compute_share;
};
int report_step_stats(struct store *st, const char *run_id, const struct store_series *series, size_t nseries,
                      struct step_stats *out);

/* Prints the short end-of-run summary of run_id (what `gpuscope run` shows at the end), ending with
 * the top findings. */
void report_summary(FILE *out, struct store *st, const char *run_id);

/* One GPU's figures over the whole run (NAN when absent). */
struct report_gpu {
  int index;
  char name[128];
  double util, util_min, sm_active, tensor, mem_peak, mem_total, power, power_limit, temp_max, energy_j;
};

/* Everything a report or a comparison shows about one run, loaded once. Numbers are NAN when the run
 * lacks their source. */
struct report_run {
  struct store_run run;
  struct store_series *series;
  size_t nseries;
  struct store_event *events;
  size_t nevents;
  struct gs_kv *params;
  size_t nparams;
  char **notes;
  size_t nnotes;
  struct store_finding *findings;
  size_t nfindings;
  int diagnosed; /* the doctor ran for this report because the run had no findings yet */
  struct step_stats steps;
  double duration_s;
  struct report_gpu *gpus;
  int ngpus;
  double gpu_util, sm_active, gpu_mem_peak, energy_j, energy_per_sample, gpu_hours, gpu_idle_hours;
  double host_cpu, job_cpu, job_rss_peak;
};

/* Loads run ref (id, prefix, name or "last") with its findings; when it has none yet, or when
 * rediagnose is set, runs the doctor first (storing the findings when the store allows). Returns 0,
 * GS_ENOENT / GS_EAMBIG for a bad reference, or another GS_E code. report_run_free() releases it
 * (also after a failure). */
int report_run_load(struct store *st, const char *ref, int rediagnose, struct report_run *r);
void report_run_free(struct report_run *r);

/* The reports of one run. color: use ANSI colours (the CLI decides: a TTY and no NO_COLOR). Each
 * returns 0 or GS_EIO when writing failed. */
int report_text(FILE *out, const struct report_run *r, int color);
int report_json(FILE *out, const struct report_run *r);
/* One self-contained HTML file (inline CSS and SVG, no script, no network). Reads samples and rollups
 * through st for the charts. */
int report_html(FILE *out, struct store *st, const struct report_run *r);

/* Side by side: throughput, step, data wait, GPU use, energy, speed-up vs the first run, differing
 * params, findings that appeared or disappeared. */
int report_compare_text(FILE *out, const struct report_run *runs, size_t n, int color);
int report_compare_json(FILE *out, const struct report_run *runs, size_t n);
int report_compare_html(FILE *out, const struct report_run *runs, size_t n);

#endif
