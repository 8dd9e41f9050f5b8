/* report/report_int: what the report's files share — formatting numbers that may be absent and
 * evidence values in their units (fmt.c), a run's data gaps (gaps.c), compare's pieces (compare.c).
 * Untrusted text goes out through core's writers (core.h, core/text.c). */
#ifndef GS_REPORT_INT_H
#define GS_REPORT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "report/report.h"

/* Copies an identifier (a rule id) keeping only A-Z a-z 0-9 _ . - ("?" when nothing is left). */
const char *rp_ident(char *dst, size_t n, const char *s);

/* "12.3" style with a unit, or "—" when v is not finite. */
const char *rp_num(char *buf, size_t n, double v, int decimals, const char *unit);
/* A share 0..1 as a percentage ("42%"), or "—". */
const char *rp_pct(char *buf, size_t n, double share);
/* Bytes ("3.4 GiB") or "—". */
const char *rp_bytes(char *buf, size_t n, double v);

/* Why the run ended, when the agent knew more than the status: ", OOM-killed at 700 MiB (peak 700.0
 * MiB)" from the exit.oom_* params; "" otherwise. Returns buf. */
const char *rp_exit_why(char *buf, size_t n, const struct runview *v);
/* A duration in seconds ("1m 30s" style), or "—" when not finite or not positive. */
const char *rp_duration(char *buf, size_t n, double seconds);
/* One evidence value (raw JSON text val[0..vlen)) for people, in the unit doctor_evidence_unit gives
 * its key (the one table, which the web page reads through the API): shares and percentages as %,
 * seconds as ms or s, bytes as GiB, byte rates as GB/s or MB/s, cores, MHz, W, °C, J, hours, speed-ups
 * as 1.23x; null as "—"; a string without its quotes. Other numbers as they are. The raw numbers stay
 * in --json. Returns buf. */
const char *rp_ev_value(char *buf, size_t n, const char *key, size_t klen, const char *val, size_t vlen);
/* The combined estimate line for a run's findings ("" when fewer than two count), e.g. "these 3
 * findings share the same step time, so their gains do not add: fixing all: ~2.4x". */
const char *rp_combined_line(char *buf, size_t n, const struct store_finding *f, size_t nf);

/* "; the job's (REASON)" or "; not tied to the job (REASON)" after GPU g's line, where a run in a
 * container had to infer whose the GPU's use is (params gpu.N.owner, gpu.N.owner_how); else nothing. */
void rp_gpu_owner(FILE *out, const struct runview *v, int g);
/* A run's param, or NULL. */
const char *rp_param(const struct report_run *r, const char *key);
/* "8 x NVIDIA H200" (or "2 GPUs: A, B"; "none"). */
const char *rp_gpus(const struct report_run *r, char *buf, size_t n);
/* The run's wall-clock start as "YYYY-MM-DD HH:MM:SS" (local time). */
const char *rp_when(int64_t wall_ns, char *buf, size_t n);

/* ---- gaps in a run's data (gaps.c) ---- */

/* 1 when the agent saw GPU data stop (and not resume) in these run params. */
int rp_gpu_data_stopped(const struct gs_kv *kv, size_t n);
/* Writes one line (after indent) per gap in the run's data the params record: GPU data that
 * stopped, messages the client dropped, steps over the agent's cap. Returns the lines written. */
int rp_data_gaps(FILE *out, const char *indent, const struct gs_kv *kv, size_t n);

/* ---- compare (compare.c) ---- */

/* Does r have a finding with this rule? */
int rp_has_rule(const struct report_run *r, const char *rule);
/* Calls fn once for each param key whose value differs between the runs (absent counts as a value),
 * in first-seen order. */
void rp_differing_params(const struct report_run *runs, size_t n, void (*fn)(void *user, const char *key), void *user);
/* One job metric of a run (the client's gpuscope.log series of that name, the main loop's): its last
 * value and its best — the lowest for a name that measures an error (loss, err, mse, perplexity,
 * ...), else the highest. Returns 1 with out filled, 0 when the run has no such series (out NAN). */
struct rp_metric {
  size_t n;
  double last, best;
  int lower_better;
};
int rp_job_metric(const struct report_run *r, const char *name, struct rp_metric *out);
/* Calls fn once per job metric name any of the runs logged (at most RP_MAX_METRICS), in first-seen
 * order. */
#define RP_MAX_METRICS 32
void rp_job_metrics(const struct report_run *runs, size_t n, void (*fn)(void *user, const char *name), void *user);

/* ---- where a run came from (origin.c) ---- */

/* 1 for a param that says where a run came from (git, Python, torch, the driver, the container;
 * git.diff and git.diff_bytes too): the report shows them on lines of their own. */
int rp_param_is_origin(const char *key);
/* The report's lines on where r came from (git:, python:, driver:), each only when r has it. */
void rp_origin_text(FILE *out, const struct report_run *r);
/* Calls fn once per origin param whose value differs between the runs (absent counts as a value),
 * in the table's order: git, Python, torch, CUDA, cuDNN, the driver, the container. */
void rp_origin_differ(const struct report_run *runs, size_t n, void (*fn)(void *user, const char *key), void *user);

#endif
