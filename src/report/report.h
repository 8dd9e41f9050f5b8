/* report: turning a stored run into words and numbers — the end-of-run summary, the terminal and
 * JSON reports, and `compare` (the HTML report is the web app's page, written by serve/page.c). Every
 * format reads one run view (runview.h), the same object the doctor diagnoses, through the store
 * interface, so a report looks the same whichever back end holds the run and a figure agrees with the
 * finding it illustrates. The store is untrusted input: odd strings are escaped or replaced, invalid
 * evidence is shown as text, absent numbers stay absent. */
#ifndef GS_REPORT_H
#define GS_REPORT_H

#include <regex.h>
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

/* ---- the job's output read back (log.c) ---- */

struct report_log_part { /* a stream's open line */
  char *buf;
  size_t len, cap;
  int64_t t;
};
/* What `gpuscope log` asks for, and where it has read to (a follower calls report_log_read again). */
struct report_log {
  const char *stream; /* "out", "err" or "tty" (NULL: every stream) */
  const regex_t *re;  /* only the lines it matches (NULL: all) */
  int raw;            /* bytes as stored (no escaping; without re and times not even cut into lines) */
  int times;          /* each line after its time since the run's start: "[   12.345s] " */
  /* each line to emit instead of being written (report_log_tail): its text as a terminal showed it */
  void (*emit)(void *user, const char *line, int64_t t);
  void *emit_user;
  int64_t next_seq;               /* the next chunk to read */
  int64_t chunks, bytes;          /* chunks read; bytes of the chosen streams */
  size_t lines_out;               /* lines written */
  struct report_log_part part[3]; /* out, err, tty */
};
/* Writes what the store holds of run_id's output from l->next_seq on to out (see struct
 * report_log); a line not yet ended waits for the next call or report_log_finish. A store without
 * the job's output (a group, an older schema) has none. Returns 0, or the store's GS_E code,
 * GS_EIO when writing failed, GS_ENOMEM. */
int report_log_read(FILE *out, struct store *st, const char *run_id, struct report_log *l);
/* Writes the lines that did not end (the run is over). */
void report_log_finish(FILE *out, struct report_log *l);
/* Frees what l holds (not l). */
void report_log_done(struct report_log *l);
/* The last max lines of run_id's output, every stream, each as a terminal last showed it (not yet
 * escaped), oldest first: *lines malloc'd (free each, then it), *n of them (0 when none). Returns 0
 * or a GS_E code (*lines NULL). */
int report_log_tail(struct store *st, const char *run_id, size_t max, char ***lines, size_t *n);

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
  /* A failed, killed or crashed run: the last REPORT_LOG_TAIL_LINES lines of its output, oldest first,
   * as a terminal last showed each (not escaped: every writer escapes them); NULL / 0 otherwise. */
  char **log_tail;
  size_t nlog_tail;
};
#define REPORT_LOG_TAIL_LINES 20

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

#endif
