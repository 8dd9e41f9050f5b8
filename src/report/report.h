/* report: turning a stored run into words and numbers — the end-of-run summary, the terminal and
 * JSON reports, and `compare` (the HTML report is the web app's page, written by serve/page.c). Every
 * format reads one run view (runview.h), the same object the doctor diagnoses, through the store
 * interface, so a report looks the same whichever back end holds the run and a figure agrees with the
 * finding it illustrates. The store is untrusted input: odd strings are escaped or replaced, invalid
 * evidence is shown as text, absent numbers stay absent. */
#ifndef GS_REPORT_H
#define GS_REPORT_H

#include <stdio.h>

#include "runview/runview.h"
#include "store/store.h"

/* Statistics of one series (or of several matching series, pooled). n == 0 when absent. */
struct series_stats {
  size_t n;
  double mean, min, max, sum, p50, p95;
  double first, last; /* first and last values in time order */
  int64_t t_first, t_last;
};

/* Computes stats over the whole run of every series matching source (NULL any), name, labels (NULL
 * any), with the run view's one rollup policy (runview_stats: raw samples, or a long series' 10 s /
 * 1 min rollups past RUNVIEW_QUICK_POINTS / RUNVIEW_SLOW_POINTS, n then counting buckets).
 * Non-finite samples are skipped. Returns 0 (out->n may be 0) or a GS_E code. */
int report_view_stats(const struct runview *v, const char *source, const char *name, const char *labels,
                      struct series_stats *out);

/* The training-loop view from the client's step series (all NAN/0 when the job sent none). */
struct step_stats {
  size_t steps;      /* every kept step of the run */
  size_t steps_held; /* those the median is taken over: steps, unless the view holds a sample */
  size_t stretches;  /* how many stretches of consecutive steps those come in (1 when all are held) */
  double samples, samples_per_s, median_step_s, data_share, h2d_share, compute_share;
};
/* From the view's joined steps (warm-up dropped); each phase's share over the steps that reported that
 * phase, not over all of them. When the view holds a sample of a long run's steps, the median is the
 * sample's and the rest the whole run's (runview.h). Returns 0 or a GS_E code. */
int report_view_step_stats(const struct runview *v, struct step_stats *out);

/* ---- writing untrusted store text (export.c): every command's output goes through these ---- */

/* s as a JSON string literal: escaped, invalid UTF-8 replaced. NULL writes "". */
void report_json_str(FILE *out, const char *s);
/* A number as JSON, or null when not finite. */
void report_json_num(FILE *out, double v);
/* s for a terminal: escape sequences and control characters dropped, tabs and newlines as spaces,
 * invalid UTF-8 replaced. */
void report_term(FILE *out, const char *s);
/* The same into dst (n bytes with the NUL), cut at a character boundary: for padded table columns.
 * Returns dst. */
const char *report_term_copy(char *dst, size_t n, const char *s);
/* s as one RFC 4180 CSV field: always quoted, '"' doubled, newlines kept inside the quotes, other
 * control characters dropped, invalid UTF-8 replaced. */
void report_csv_field(FILE *out, const char *s);

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
  struct runview view; /* the run, loaded once; the doctor ran on this same view when it ran */
  /* Borrowed from view (the names every format reads): */
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
  /* The doctor failed (diag_rc a GS_E code, 0 when it did not): why, and the run then has no
   * findings (never an empty list passed off as a diagnosis). save_error: the diagnosis ran but the
   * store refused its findings (a read-only store, a full disk), "" when they were kept or not new. */
  int diag_rc;
  char diag_error[320];
  char save_error[320];
  struct step_stats steps;
  double duration_s;
  struct report_gpu *gpus;
  int ngpus;
  double gpu_util, sm_active, gpu_mem_peak, energy_j, energy_per_sample, gpu_hours, gpu_idle_hours;
  double host_cpu, job_cpu, job_rss_peak;
};

/* Loads run ref (id, prefix, name or "last") into r, a struct the caller owns, with its findings;
 * when it has none yet, or when rediagnose is set, runs the doctor on the same view first (storing the
 * findings when the store allows). st must stay open while r lives. Returns 0, GS_ENOENT / GS_EAMBIG
 * for a bad reference, or another GS_E code. A doctor that fails is not a failed load: r is loaded,
 * without findings, and r->diag_rc / diag_error say why (save_error when only the storing failed),
 * for the caller to report. report_run_done() releases what r holds (also after a failure), not r
 * itself. */
int report_run_load(struct store *st, const char *ref, int rediagnose, struct report_run *r);
/* Is param key gpuscope's own bookkeeping (gpu.N.*, nvml.*, ingest.*, group.*) rather than the job's
 * configuration? Such params are left out of the params a report lists and a comparison diffs. */
int report_param_is_internal(const char *key);
/* Calls fn once for each param key of the job's configuration whose value differs between the n
 * views (absent counts as a value), in first-seen order. */
void report_params_differ(const struct runview *const *views, size_t n, void (*fn)(void *user, const char *key),
                          void *user);
void report_run_done(struct report_run *r);

/* The reports of one run. color: use ANSI colours (the CLI decides: a TTY and no NO_COLOR). Each
 * returns 0 or GS_EIO when writing failed. */
int report_text(FILE *out, const struct report_run *r, int color);
int report_json(FILE *out, const struct report_run *r);

/* Side by side: throughput, step, data wait, GPU use, energy, speed-up vs the first run, differing
 * params, findings that appeared or disappeared. */
int report_compare_text(FILE *out, const struct report_run *runs, size_t n, int color);
int report_compare_json(FILE *out, const struct report_run *runs, size_t n);

/* ---- `gpuscope check`: budgets a CI job puts on a run (check.c) ---- */

/* The budgets; NAN (or "" for forbid) when not asked for. Shares are 0-1. */
struct report_budgets {
  double min_speedup;   /* throughput against the baseline's, within the runs' own noise */
  double max_data_wait; /* the steps' data-wait share */
  double min_gpu_util;  /* mean GPU utilisation over the run's GPUs */
  char forbid[512];     /* rule ids, comma-separated: none may be found */
};
enum { REPORT_CHECK_OK = 0, REPORT_CHECK_FAIL = 1, REPORT_CHECK_UNKNOWN = 2 };
struct report_check_item {
  char name[80];              /* min_speedup, max_data_wait, min_gpu_util, forbid:RULE */
  int status;                 /* REPORT_CHECK_*: a figure the run did not measure is UNKNOWN, which breaks the budget */
  double measured, ci, limit; /* NAN when unknown; ci: the speed-up's 95 % half-width */
  char why[256];              /* how it was measured, or why it could not be */
  char rule[64], title[256];  /* the finding that explains a broken budget, "" when none */
  double finding_speedup;
};
struct report_check {
  struct report_check_item items[64];
  size_t n, broken; /* broken: FAIL or UNKNOWN */
};
/* Judges r against the budgets (base: the baseline run, needed by min_speedup, else may be NULL).
 * Returns 0 with out filled, or GS_EINVAL (message) when no budget is given or min_speedup lacks a
 * baseline. */
int report_check_run(const struct report_run *r, const struct report_run *base, const struct report_budgets *b,
                     struct report_check *out);
/* The verdict as text (a line per budget, each broken one with its measured figure, its budget and
 * the finding that explains it), as one JSON object, or as JUnit XML. Each returns 0 or GS_EIO. */
int report_check_text(FILE *out, const struct report_run *r, const struct report_run *base,
                      const struct report_check *c);
int report_check_json(FILE *out, const struct report_run *r, const struct report_run *base,
                      const struct report_check *c);
int report_check_junit(FILE *out, const struct report_run *r, const struct report_run *base,
                       const struct report_check *c);

struct nvml_devices; /* collect.h */
/* `gpuscope devices`: the driver and each GPU of d (nvml_devices_list) with its memory, compute
 * capability, MIG mode and metric families, as a table, or as one JSON object when json != 0.
 * Returns 0 or GS_EIO when writing failed. */
int report_devices(FILE *out, const struct nvml_devices *d, int json);

/* ---- the runs a search finds (rows.c): `runs --where/--sort/--columns`, serve's /api/runs ---- */

/* One run found, and the columns read for it so far (each read once, when first asked). */
struct report_row {
  struct store_run run;
  struct store *st; /* borrowed */
  int loaded;       /* STORE_NEEDS_* read */
  int failed;       /* a read failed (the columns it gives are then missing) */
  struct gs_kv *params;
  size_t nparams;
  char top_finding[32]; /* the first stored finding that is not a verdict, else the first ("" none) */
  double samples_per_s, steps, median_step_s, data_share, gpu_util; /* NAN unknown */
  char buf[64];
};
/* A search: the filter (NULL: every run), the earliest start (0: any), the sort column (NULL: the
 * store's order, newest first) and its direction. */
struct report_search {
  const struct store_where *where;
  int64_t since_wall_ns;
  const struct store_field *sort;
  int sort_desc;
};
/* The runs of st that match q, sorted, in *rows (free with report_rows_free). Returns 0, or a GS_E
 * code with the message (a store that cannot search, a read that failed) and nothing to free. */
int report_rows_find(struct store *st, const struct report_search *q, struct report_row **rows, size_t *n);
/* A store_value_fn over a struct report_row: column f's values for that run (reads what it needs;
 * a failed read sets row->failed and gives none). */
size_t report_row_value(void *row, const struct store_field *f, const char **vals, size_t max);
void report_rows_free(struct report_row *rows, size_t n);
/* Writes the columns f[0..nf) of r as one JSON object: {"name": "a", "samples_per_s": 512.5, ...},
 * numbers as numbers, missing values null. */
void report_row_json(FILE *out, struct report_row *r, const struct store_field *f, size_t nf);
/* Parses "name,param.batch_size,samples_per_s" into *out (malloc'd, *n columns). Returns 0, or
 * GS_EINVAL with a message naming the unknown column. */
int report_columns_parse(const char *list, struct store_field **out, size_t *n);

#endif
