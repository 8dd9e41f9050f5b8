/* doctor: rules that turn a stored run's signals into ranked findings — each with a stable rule id,
 * the share of run time it costs, an estimated speed-up, the evidence numbers and a concrete fix.
 * Thresholds and reasoning live in docs/diagnosis.md.
 *
 * Rule ids (stable; reports, compare and tests key on them): input_bound, loader_workers,
 * input_latency, io_bound, host_code_bound, batch_too_small, mixed_precision, pageable_copies,
 * throttled, periodic_stall, straggler, underused_gpus; healthy when nothing is worth fixing, and
 * insufficient_data when nothing was measured to judge on (no GPU, no steps, no CPU figures). Every
 * estimate is a change to one model of the step (step_model.c; doctor_combine below). */
#ifndef GS_DOCTOR_H
#define GS_DOCTOR_H

#include <stddef.h>
#include <stdint.h>

#include "runview/runview.h"
#include "store/store.h"

/* The i-th rule id the doctor can emit (from 0, in the order the rules run; the verdicts healthy and
 * insufficient_data last), or NULL past the last. Can't fail. */
const char *doctor_rule_id(size_t i);

/* Diagnoses run_id (an id or any reference st->run_get resolves) without writing anything: the
 * findings, ranked (most time lost first), in *out (malloc'd, caller frees). A run with nothing worth
 * fixing gets exactly one finding, rule "healthy" (or "insufficient_data" when nothing was measured).
 * Returns 0 or a GS_E code (*out NULL, *n 0). */
int doctor_diagnose(struct store *st, const char *run_id, struct store_finding **out, size_t *n);

/* Diagnoses the run loaded in v over the window [from, to] (ns since run start; INT64_MIN /
 * INT64_MAX: the usual window — the training steps when the client sent them, else the whole run),
 * without writing anything: for a finished run (as doctor_diagnose does) and for the live findings
 * of `serve` and `top` (e.g. the last 60 s of a run still going; steps are those wholly inside the
 * window). Findings ranked in *out (malloc'd, caller frees), exactly one "healthy" when nothing is
 * worth fixing. Returns 0 or a GS_E code (*out NULL, *n 0). v is only read. */
int doctor_diagnose_view(const struct runview *v, int64_t from, int64_t to, struct store_finding **out, size_t *n);

/* The one live diagnosis (serve's live findings, `top`, the node agent's /metrics and alerts): v
 * judged over runview_live_window(v, window_ns) — for a running run the last window_ns (<= 0:
 * RUNVIEW_LIVE_WINDOW_S) up to its newest sample, for a finished run (or one with no sample yet) the
 * usual window, as doctor_diagnose_view(v, INT64_MIN, INT64_MAX) does. The window judged goes to *w
 * (may be NULL), also on error. Findings ranked in *out (malloc'd, caller frees), exactly one
 * "healthy" (or "insufficient_data") when nothing is worth fixing. Returns 0 or a GS_E code with a
 * message (*out NULL, *n 0). v is only read; nothing is written to the store. */
int doctor_diagnose_live(const struct runview *v, int64_t window_ns, struct store_finding **out, size_t *n,
                         struct runview_window *w);
/* doctor_diagnose_live on run_id (any reference st->run_get resolves), loaded for the call: for the
 * readers that hold no view (serve's run list and event stream, the node agent). Same returns. */
int doctor_diagnose_live_run(struct store *st, const char *run_id, int64_t window_ns, struct store_finding **out,
                             size_t *n, struct runview_window *w);

/* Why rules could not judge the run loaded in v (the usual window), into buf (n bytes), "; " between
 * them, each "rule: why": mixed_precision on a GPU without GPM when the job did not say its precision,
 * batch_too_small's GPU-side fill on a GPU without SM activity readings (with the tune command that
 * measures it), host_code_bound on a host whose CPUs were contended; "" when every rule could. For a
 * report's notes (healthy's evidence says it as "not_judged"). Returns buf. */
const char *doctor_not_judged(const struct runview *v, char *buf, size_t n);

/* Diagnoses run_id, replaces its findings in the store, and returns them ranked in *out (malloc'd,
 * caller frees; out may be NULL). When the diagnosis succeeds but the store refuses the write, the
 * findings are still returned and the write's GS_E code is returned. Returns 0 or a GS_E code. */
int doctor_run(struct store *st, const char *run_id, struct store_finding **out, size_t *n);
/* doctor_run on a loaded view (the usual window), writing through v->st. */
int doctor_run_view(const struct runview *v, struct store_finding **out, size_t *n);

/* What a process of the job is to the training, as the doctor tells them apart: a launcher (sh -c,
 * env, srun, ...), the training process (the earliest long-lived process that is not a launcher),
 * or a loader worker (a long-lived process started after the training one); anything else is
 * other (short-lived helpers, processes seen too briefly to say). */
enum doctor_role { DOCTOR_ROLE_OTHER = 0, DOCTOR_ROLE_LAUNCHER, DOCTOR_ROLE_TRAINER, DOCTOR_ROLE_WORKER };
struct doctor_proc_role {
  int pid;
  enum doctor_role role;
};
/* The roles of the job's processes over the window [from, to] (as doctor_diagnose_view reads it), in
 * *out (malloc'd, caller frees; NULL and 0 when the run has no process series). Returns 0 or a GS_E
 * code. */
int doctor_proc_roles(const struct runview *v, int64_t from, int64_t to, struct doctor_proc_role **out, size_t *n);
/* "launcher", "trainer", "loader worker" or "" for other. */
const char *doctor_role_name(enum doctor_role role);

/* The unit of an evidence value, from its key (klen bytes; the doctor's naming): "share" (0-1),
 * "pct" (0-100), "bytes", "bytes_s", "s", "cores", "mhz", "w", "c" (degrees), "j", "h" (hours), "x"
 * (a speed-up or ratio), or "" (a count, a plain number, text). The one table of evidence units:
 * report's text formats by it, and the API sends it beside each finding's evidence
 * ("evidence_units") for the web page. Can't fail; never NULL. */
const char *doctor_evidence_unit(const char *key, size_t klen);
/* Is evidence member key (klen bytes) of a finding of rule one a person reads — the three to six
 * figures that carry it — rather than how it was estimated (the step model, its change, the model's
 * sentence and intermediate figures)? 1 or 0; 1 for every member of a rule the doctor's table does not
 * list. The text report shows only those (the rest is in --json); the API sends the others' keys
 * ("evidence_estimate") for the web page to fold. Can't fail. */
int doctor_evidence_shown(const char *rule, const char *key, size_t klen);

/* Is a gap of gap_s between two steps, where the typical gap is typical_s, a stall? The doctor's
 * test (DR_STALL_MIN_S longer and DR_STALL_FACTOR times as long), exported so a chart of the gaps
 * marks exactly the stalls a periodic_stall finding counts. */
int doctor_is_stall(double gap_s, double typical_s);

/* Is rule a verdict on the whole run rather than a problem — "healthy", or "insufficient_data" (not
 * enough was measured to judge)? A verdict has no cost or speed-up, is never "the top finding" when
 * a problem was found, and fails no budget. */
int doctor_is_verdict(const char *rule);

/* Several findings of one run usually share the same step time (an input-bound run's data wait is
 * both input_bound's and loader_workers' cost), so their speed-ups neither add nor multiply. Every
 * finding of the step model states its change to one model of the step (its evidence's "change" and
 * "step_model"): T = stalls + step, the step = data wait + host-to-device + straggler wait + GPU work
 * + host idle, loading in workers overlapping the rest (docs/diagnosis.md, "The step model").
 * "Fixing all" applies every change to the same T: T / T'. Findings without a change (underused_gpus:
 * more GPUs, not a shorter step; healthy; runs diagnosed before the model) are left out. */
struct doctor_combined {
  int findings;    /* findings the estimate combines */
  int overlapping; /* 1 when two or more of them change the same term of the step */
  double share;    /* share of the window the fixes together would win back: 1 - 1 / speedup */
  double speedup;  /* T / T' with every change applied: at least the largest of the findings' own estimates,
                      and winning back at most their shares added up (no idle second counted twice) */
};
/* Combines f[0..n) as above. Can't fail; findings == 0 (speedup 1) when none counts. */
void doctor_combine(const struct store_finding *f, size_t n, struct doctor_combined *out);

#endif
