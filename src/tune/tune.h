/* tune: `gpuscope tune` — tries configurations of a training job for real and keeps the fastest.
 *
 * Flow: the CLI fills a struct tune_opts (parameters and their values, the command with {name}
 * placeholders); tune_validate() refuses an unknown placeholder or an unused parameter before
 * anything runs; tune_run() plans trials by strategy (grid, successive halving, or the doctor's
 * findings), runs each as a normal gpuscope run (agent_run() in a forked child, in the run group
 * named after the tune, tagged tune=NAME), stops it after warm-up + N client steps or S seconds,
 * classifies it (ok, oom, failed, skipped, interrupted, not_run), and measures its throughput from
 * the client's step series after warm-up, with the standard error of that figure over the measured
 * steps. tune_rank() sorts the trials, finds ties within noise and the winner; tune_print_table()
 * and tune_print_json() print the result. Nothing here exits the program: errors come back as GS_E
 * codes with a message in gs_last_error(). docs/tune.md is the user's guide. */
#ifndef GS_TUNE_H
#define GS_TUNE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TUNE_MAX_PARAMS 16
#define TUNE_MAX_VALUES 64
#define TUNE_MAX_NAME 48       /* bytes in a parameter name */
#define TUNE_MAX_CONFIGS 10000 /* configurations in one tune (the product of the value counts) */
#define TUNE_MARGIN 0.90       /* the winner's peak memory must stay at or below 90 % of the limit */
/* The default grace between a trial's SIGTERM and SIGKILL. */
#define TUNE_GRACE_NS (10 * 1000000000LL)

struct tune_param {
  char name[TUNE_MAX_NAME];
  int nvalues;
  char *values[TUNE_MAX_VALUES]; /* owned (tune_opts_done frees them) */
};

enum tune_strategy { TUNE_GRID, TUNE_HALVING, TUNE_DOCTOR };
enum tune_metric { TUNE_SAMPLES_PER_S, TUNE_STEPS_PER_S };
/* Where each trial's quality is read: at the samples every trial saw, or at the time every trial ran. */
enum tune_quality_at { TUNE_AT_SAMPLES, TUNE_AT_TIME };
/* How {lr} follows the batch: b / b0 times the base rate, sqrt(b / b0) times, or the base rate. */
enum tune_lr_rule { TUNE_LR_NONE, TUNE_LR_LINEAR, TUNE_LR_SQRT };
/* A trial's quality against the baseline's (tune_rank): none without --quality. */
enum tune_verdict { TUNE_Q_NONE = 0, TUNE_Q_BASELINE, TUNE_Q_SAME, TUNE_Q_BETTER, TUNE_Q_WORSE, TUNE_Q_UNKNOWN };
#define TUNE_MAX_GPUS 64
#define TUNE_SPEC_MAX 512     /* the tune's own arguments kept in each trial's run (--resume) */
#define TUNE_QUALITY_TAIL 0.2 /* quality is the mean of the points of the last 20 % before the common point */

enum tune_status {
  TUNE_PENDING = 0,
  TUNE_OK,          /* measured */
  TUNE_OOM,         /* ran out of memory */
  TUNE_FAILED,      /* crashed, or too few steps to measure */
  TUNE_SKIPPED,     /* a smaller batch with the same other values ran out of memory */
  TUNE_INTERRUPTED, /* stopped by a signal to tune: Ctrl-C (SIGINT), SIGTERM or SIGHUP */
  TUNE_NOT_RUN,     /* the budget ended or the sweep was interrupted first */
};

struct tune_opts {
  struct tune_param params[TUNE_MAX_PARAMS];
  int nparams;
  char *const *argv;  /* the job, with {name} placeholders (not owned) */
  long steps, warmup; /* measured steps per trial; steps discarded first */
  double seconds;     /* > 0: each trial runs this long instead of warm-up + steps */
  enum tune_strategy strategy;
  enum tune_metric metric;
  int64_t budget_ns;     /* 0: none; no trial starts after it */
  char name[96];         /* the tune's name: run group, tag tune=NAME, trial runs NAME/KK */
  const char *store_url; /* never NULL when tune_run is called */
  int64_t mem_limit;     /* bytes of address space per process of the job (RLIMIT_AS); 0 none */
  int64_t log_max;       /* each trial's agent_opts.log_max (0: the default; < 0: none kept) */
  int64_t interval_ns;   /* the trials' sampling interval */
  int64_t grace_ns;      /* how long a job asked to stop has before SIGKILL (0: TUNE_GRACE_NS) */
  FILE *progress;        /* one line per trial as it ends (NULL: silent) */
  /* --quality METRIC[:min|:max]: the metric the job logs ("" none), higher is better when quality_max */
  char quality[129];
  int quality_max;
  enum tune_quality_at quality_at;
  double quality_tol; /* the least difference that is worse, NAN none; a share of the baseline's when _rel */
  int quality_tol_rel;
  /* --lr-base RATE@BATCH, --lr-rule, --lr-warmup SAMPLES: {lr} and {warmup} (lr_base 0: none) */
  double lr_base, lr_batch, lr_warmup;
  enum tune_lr_rule lr_rule;
  double samples;               /* > 0: each trial runs until its steps x samples per step reach this (--samples) */
  int ngpus;                    /* --gpus: trials side by side, one per GPU (0: one at a time, no GPU chosen) */
  char gpus[TUNE_MAX_GPUS][96]; /* CUDA_VISIBLE_DEVICES of each: an index or a MIG instance's UUID */
  char hip[TUNE_MAX_GPUS][16];  /* an AMD GPU's HIP index (from 0 among the AMD GPUs), "" for others */
  int resume;                   /* --resume: trials whose runs in the group are complete are not rerun */
  char *const *spec;            /* the tune's own arguments, kept in each trial's run for --resume */
  int nspec;
  const char *version; /* the gpuscope running the sweep (tune.version of each trial; NULL: none kept):
                          --resume reuses a trial only when this, its command and every argument match */
};

struct tune_trial {
  int config[TUNE_MAX_PARAMS]; /* value index of each parameter */
  int rung;                    /* halving: the rung (0 first); else 0 */
  long target_steps;           /* measured steps asked for (0 in --seconds mode) */
  enum tune_status status;
  char reason[256];  /* why not ok: the OOM message, the exit status, what was skipped */
  char tail[1024];   /* failed/oom: the job's last output lines */
  char cleanup[384]; /* what tune had to kill: a job that ignored its stop, processes left running ("" none) */
  char run_id[32], run_name[160];
  int exit_status; /* as a shell shows it; -1 unknown */
  long steps_run, steps_measured;
  double rate, ci; /* the metric over the measured steps and its 95 % half-width (NAN unknown) */
  int dof;         /* the half-width's degrees of freedom (blocks of steps - 1) */
  double step_s, data_share, gpu_util, peak_mem, mem_limit, energy_per_sample; /* NAN unknown */
  int margin_ok;       /* peak <= 90 % of limit: 1, 0, or -1 unknown */
  double estimate;     /* doctor: the finding's own estimate of the change applied (NAN none) */
  double est_target;   /* doctor: the worker count or batch the finding asked for (NAN none) */
  char est_rule[32];   /* doctor: the finding that led here ("" none) */
  int prev;            /* doctor: the trial it was compared with (-1 none) */
  int tied;            /* set by tune_rank: within noise of the best */
  double lr;           /* the {lr} it used (NAN without --lr-base) */
  long lr_warmup;      /* the {warmup} it used, in steps (-1 without --lr-base) */
  char gpu[96];        /* its GPU: gpuscope's index (CUDA_VISIBLE_DEVICES) or a MIG UUID ("" none) */
  char hip[16];        /* an AMD GPU's HIP index, its HIP_VISIBLE_DEVICES ("" not AMD) */
  char cpus[64];       /* the cores it was pinned to, "0-3" ("" not pinned) */
  int resumed;         /* read from the store by --resume, not run again */
  double samples_seen; /* the client's samples up to the measured window's end (NAN unknown) */
  double window_s;     /* seconds from the first step's start to the window's end (NAN unknown) */
  /* The quality metric's points up to the window's end: samples seen and seconds at each, and the
   * value (malloc'd; tune_result_done frees them). */
  double *q_samples, *q_time, *q_value;
  size_t qn;
  double quality, quality_ci; /* set by tune_rank: the tail's mean and its 95 % half-width (NAN unknown) */
  int quality_points;         /* points in the tail */
  int quality_dof;
  enum tune_verdict verdict;
};

struct tune_result {
  struct tune_trial *trials;
  size_t n, cap;
  int interrupted;               /* a signal to tune stopped the sweep */
  int signo;                     /* that signal (SIGINT, SIGTERM, SIGHUP; 0 none) */
  int budget_out;                /* the budget ended before every trial ran */
  long trial_steps;              /* steps the trials used: warm-up + measured, at most what each asked for */
  long steps_run;                /* steps the jobs ran in all (a stopped job may run a step or two past its stop) */
  int best, winner, recommended; /* trial indices or -1; winner -1 when the best ties another */
  char stop_reason[160];         /* doctor: why it stopped */
  double quality_point;          /* tune_rank: the samples (or seconds) every trial's quality is read at (NAN) */
  char quality_note[200];        /* tune_rank: why quality was not judged ("" when it was, or not asked) */
};

/* Parses "name=v1,v2,..." into o->params. Returns 0 or GS_EINVAL with a message (gs_last_error). */
int tune_param_add(struct tune_opts *o, const char *spec);

/* Checks the command against the parameters: every {name} must be a parameter and every parameter
 * must appear at least once ({{ and }} are literal braces), and there may be at most TUNE_MAX_CONFIGS
 * configurations. Returns 0 or GS_EINVAL with a message. */
int tune_validate(const struct tune_opts *o);

/* The command of one configuration with its placeholders filled: a malloc'd NULL-terminated argv
 * (free with tune_argv_free), or NULL on allocation failure. */
char **tune_substitute(const struct tune_opts *o, const int *config);
void tune_argv_free(char **argv);

/* Runs the sweep. SIGINT (Ctrl-C), SIGTERM or SIGHUP stops the current trial cleanly and ends the
 * sweep; the result keeps what was measured and names the signal (r->signo). Each trial runs in its
 * own session with tune as the subreaper of everything it starts: a job still running o->grace_ns
 * after it was asked to stop is killed with its tree, and processes a trial leaves behind (a daemon
 * that double-forked and called setsid) are killed when it ends and named in its cleanup. Returns 0 (r filled, then
 * ranked with tune_rank; free it with tune_result_done) or a GS_E code when the store cannot be used. */
int tune_run(const struct tune_opts *o, struct tune_result *r);

/* Sets r->best, r->winner, r->recommended and each trial's tied flag (halving: among the last rung).
 * With o->quality, first judges each trial's quality against the baseline's (tune_judge_quality):
 * a trial whose quality is worse, or unknown while the baseline's is known, is never best nor tied. */
void tune_rank(const struct tune_opts *o, struct tune_result *r);

/* Reads every measured trial's quality at the common point — the fewest samples (or seconds) any
 * measured trial saw by its window's end — as the mean of its points in the last TUNE_QUALITY_TAIL of
 * that point, with a 95 % half-width over blocks of points (gs_rate_ci), and sets each trial's verdict
 * against trial 0's: worse when the difference the wrong way is beyond both the noise
 * (sqrt(ci^2 + ci0^2)) and o->quality_tol. Sets r->quality_point and r->quality_note. No-op without
 * o->quality. This function can't fail. */
void tune_judge_quality(const struct tune_opts *o, struct tune_result *r);

/* The {lr} and {warmup} of a configuration: the base rate scaled by the rule for its batch (the base
 * rate itself without a batch parameter or with rule none), and the warm-up in steps: the
 * o->lr_warmup samples at its batch, when the rate was raised above the base, else 0. *lr is NAN and
 * *warmup -1 without --lr-base. */
void tune_lr_for(const struct tune_opts *o, const int *config, double *lr, long *warmup);

/* The parameter (index, or -1) that holds the batch size: named batch_size, batch, bs, or ending
 * in "batch_size". */
int tune_batch_param(const struct tune_opts *o);

/* Human table / JSON document of the result, with the winner's findings from st (may be NULL). */
struct store;
void tune_print_table(FILE *out, const struct tune_opts *o, const struct tune_result *r, struct store *st);
void tune_print_json(FILE *out, const struct tune_opts *o, const struct tune_result *r, struct store *st);

const char *tune_status_name(enum tune_status s);
const char *tune_verdict_name(enum tune_verdict v);
void tune_opts_done(struct tune_opts *o);
void tune_result_done(struct tune_result *r);

#endif
