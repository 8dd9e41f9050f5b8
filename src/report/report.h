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

/* Writes the short end-of-run summary of the run loaded in v (what `gpuscope run` shows at the end),
 * ending with the top findings of v->findings (the caller puts a fresh diagnosis there). v is only
 * read. Returns 0, or GS_EIO when writing to out failed; loading the run is the caller's, and so is
 * saying why it could not be loaded (nothing is printed into the summary for it). */
int report_summary(FILE *out, const struct runview *v);

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

/* One GPU's figures over the whole run (NAN when absent). */
struct report_gpu {
  int index;
  char name[128];
  double util, util_min, sm_active, tensor, mem_peak, mem_total, power, power_limit, temp_max, energy_j;
};

/* Everything a report or a comparison shows about one run, loaded once. Numbers are NAN when the run
 * lacks their source. */
struct report_run {
  struct runview view; /* the run, loaded once (its record, series, params, findings: view.run, ...);
                          the doctor ran on this same view when it ran */
  int diagnosed;       /* the doctor ran for this report because the run had no findings yet */
  /* The doctor failed (diag_rc a GS_E code, 0 when it did not): why, and the run then has no
   * findings (never an empty list passed off as a diagnosis). save_error: the diagnosis ran but the
   * store refused its findings (a read-only store, a full disk), "" when they were kept or not new. */
  int diag_rc;
  char diag_error[320];
  char save_error[320];
  struct runview_step_figures steps; /* runview_step_figures over every held step */
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
/* Calls fn once for each param of where a run came from (git, Python, torch, CUDA, cuDNN, the
 * NVIDIA driver and its CUDA, the container: origin.c) whose value differs between the n views
 * (absent counts as a value), in that order. report_origin_label names such a key as people know it
 * ("torch" for torch.version; any other key as it is). */
void report_origin_differ(const struct runview *const *views, size_t n, void (*fn)(void *user, const char *key),
                          void *user);
const char *report_origin_label(const char *key);

/* The values of param key in each of the n views, as one JSON array (a string, or null where absent):
 * a differing param's row, in compare's JSON and serve's. */
void report_param_values_json(FILE *out, const struct runview *const *views, size_t n, const char *key);
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
/* OK: the budget holds; FAIL: its figure missed it; UNKNOWN: the figure was not measured;
 * CANNOT_TELL: measured, but its 95 % interval spans the budget (the speed-up), so the run can neither
 * hold nor break it. All but OK break the gate. */
enum { REPORT_CHECK_OK = 0, REPORT_CHECK_FAIL = 1, REPORT_CHECK_UNKNOWN = 2, REPORT_CHECK_CANNOT_TELL = 3 };
struct report_check_item {
  char name[80];              /* min_speedup, max_data_wait, min_gpu_util, forbid:RULE */
  int status;                 /* REPORT_CHECK_*: a figure the run did not measure is UNKNOWN, which breaks the budget */
  double measured, ci, limit; /* NAN when unknown; ci: the speed-up's 95 % half-width */
  char why[256];              /* how it was measured, or why it could not be */
  char rule[64], title[256];  /* the finding that explains a broken budget, "" when none */
  double finding_speedup;
  double steps_needed; /* CANNOT_TELL: about how many of the run's steps would tell at its spread, NAN when
                          none would (the baseline's own spread is wider than the gap) */
};
struct report_check {
  struct report_check_item items[64];
  size_t n, broken; /* broken: not OK */
};
/* Judges r against the budgets (base: the baseline run, needed by min_speedup, else may be NULL).
 * Returns 0 with out filled, or GS_EINVAL (message) when no budget is given, min_speedup lacks a
 * baseline or forbid names a rule the doctor does not have (doctor_rule_ids). */
int report_check_run(const struct report_run *r, const struct report_run *base, const struct report_budgets *b,
                     struct report_check *out);
/* The verdict as text (a line per budget, each broken one with its measured figure, its budget and
 * the finding that explains it), as one JSON object, or as JUnit XML (one testcase per budget: a
 * <failure> when its figure missed it, an <error> when the figure was not measured or cannot tell; the suite's
 * timestamp, hostname and time are the run's start, host and duration). Each returns 0 or GS_EIO. */
int report_check_text(FILE *out, const struct report_run *r, const struct report_run *base,
                      const struct report_check *c);
int report_check_json(FILE *out, const struct report_run *r, const struct report_run *base,
                      const struct report_check *c);
int report_check_junit(FILE *out, const struct report_run *r, const struct report_run *base,
                       const struct report_check *c);

struct nvml_devices; /* collect.h */
/* `gpuscope devices`: the driver and each GPU of d (collect_devices_list) with its memory, compute
 * capability, MIG mode and metric families, as a table, or as one JSON object when json != 0.
 * Returns 0 or GS_EIO when writing failed. */
int report_devices(FILE *out, const struct nvml_devices *d, int json);
/* How many GPUs of d are unhealthy now (lost, a row remap pending or failed, a page retirement
 * pending, uncorrected ECC errors): `gpuscope devices --health` fails when any is. Can't fail. */
int report_devices_unhealthy(const struct nvml_devices *d);

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
