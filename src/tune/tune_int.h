/* tune_int: what the tune's files share and nothing else reads — running and measuring one trial
 * (trial.c) for the strategies (tune.c). */
#ifndef GS_TUNE_INT_H
#define GS_TUNE_INT_H

#include <signal.h>

#include "tune/tune.h"

/* Set by tune's handler of SIGINT, SIGTERM and SIGHUP (a signal handler can only reach globals): how
 * many arrived and the last one's number. A trial runs in its own session, so a terminal's ^C reaches
 * only tune, which passes every one on to the trial's agent. */
extern volatile sig_atomic_t tune_sigint, tune_sigint_signo;

/* Makes s safe for a terminal in place: each control character (C0, DEL, C1 in UTF-8) and each
 * bidirectional control (U+202A-U+202E, U+2066-U+2069) becomes one '?'. */
void tune_clean(char *s);

/* "Ctrl-C (SIGINT)", "SIGTERM", "SIGHUP": how a stop by signal sig is named to the user. */
const char *tune_signal_name(int sig);

/* Runs trial t (t->config, t->target_steps set; k its number for the run name) and measures it,
 * alone. Fills every other field. Returns 0, or a GS_E code when the store cannot be read (t->status
 * is then failed with the reason). */
int tune_trial_run(const struct tune_opts *o, struct tune_trial *t, int k, int64_t deadline_ns);

/* A trial's running agent, for trials side by side (tune.c's pool). */
struct tune_proc {
  int k; /* the trial's index */
  pid_t pid;
  int log_fd, res_fd;
  int64_t t0, stop_at;
  int stop_sig, resent, termed, interrupted, agent_killed;
  sig_atomic_t seen; /* tune_sigint when last looked at */
  long kills0;       /* the cgroup's OOM kills when it started */
};

/* Starts trial t as slot `slot` of `nslots` side by side: its GPU is o->gpus[slot] (with --gpus) and,
 * when nslots > 1, its cores a share of tune's (t->cpus says which). Returns 0 (then poll it with
 * tune_trial_poll until it says 1, and end it with tune_trial_finish), or a GS_E code when it could
 * not start (t is failed with the reason; nothing to finish). */
int tune_trial_start(const struct tune_opts *o, struct tune_trial *t, int k, int slot, int nslots, struct tune_proc *p);
int tune_trial_poll(const struct tune_opts *o, struct tune_proc *p, int64_t deadline_ns);
/* Kills what the trial left running (others: other trials still run, so only the processes marked
 * with its number are its own), measures its run and sets its status. Returns 0 or a GS_E code when
 * the store cannot be used. */
int tune_trial_finish(const struct tune_opts *o, struct tune_trial *t, struct tune_proc *p, int others);

/* --resume: fills trial t (t->config set) from the newest complete run NAME/KK of the group when that
 * run is of the same configuration, was recorded by a tune of the same arguments and gpuscope version
 * (tune.argv.N, tune.version) and measures as ok. Returns 1 (t->resumed set) or 0 (t unchanged: run
 * it), with why (whylen bytes, not cleaned for the terminal) saying why a stored run of that
 * configuration was not reused, "" when none was found or it was. */
struct store;
int tune_trial_resume(const struct tune_opts *o, struct store *st, struct tune_trial *t, int k, char *why,
                      size_t whylen);

/* The change finding f[k] (of the nf of one diagnosis, ranked) makes to configuration cur, in next:
 * the loader's findings set the worker parameter to the recommended count (the finding's
 * recommended_workers, else loader_workers' or input_latency's; the smallest listed value reaching
 * it), batch_too_small the batch to recommended_batch, mixed_precision and pageable_copies a listed
 * bf16/fp16 or on value. *estimate is the finding's own estimate of that change (its per-count
 * figure when the evidence lists one for the value applied, else its speed-up); *target the count or
 * batch it asked for (NAN none). Returns 1, or 0 when it names no listed change. */
struct store_finding;
int tune_doctor_move(const struct tune_opts *o, const struct store_finding *f, size_t nf, size_t k, const int *cur,
                     int *next, double *estimate, double *target);

/* A label for the configuration: "batch_size=32 workers=2". */
void tune_config_label(const struct tune_opts *o, const int *config, char *buf, size_t n);

#endif
