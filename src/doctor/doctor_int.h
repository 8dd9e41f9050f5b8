/* doctor/doctor_int: what the doctor's files share and nobody else sees — the signals of one run
 * as the rules read them (signals*.c derive them from one loaded run view, runview.h), the thresholds
 * every rule states in docs/diagnosis.md, and the helpers that build a finding (finding.c).
 *
 * Missing is not zero: every number here is NAN when its source was absent from the run, and a rule
 * that needs a missing number does not fire. */
#ifndef GS_DOCTOR_INT_H
#define GS_DOCTOR_INT_H

#include <stddef.h>
#include <stdint.h>

#include "runview/runview.h"
#include "store/store.h"

/* ---- thresholds and model constants (docs/diagnosis.md states each; the rules use no others) ---- */
#define DR_INPUT_SHARE 0.20           /* data wait, share of step time, that makes a run input-bound */
#define DR_LOADER_CPU_IDLE 0.35       /* loader below this (cores per loading process, at most): latency */
#define DR_LOADER_STARVED 0.25        /* loading that waited for a CPU this share of its time: starved */
#define DR_WORKER_MEM_SAFETY 0.80     /* share of free memory new workers may take */
#define DR_MAX_WORKERS 32             /* never advise more loader processes than this */
#define DR_WORKER_HEADROOM 1.25       /* advise workers enough for loading this much slower */
#define DR_WORKERS_NEAR_BEST 1.05     /* ... the fewest within this factor of the best step time */
#define DR_WORKERS_MIN_SPEEDUP 1.05   /* loader_workers fires only when its model promises this */
#define DR_GIL_THREADS 4              /* a training process with this many threads ... */
#define DR_GIL_CORES_LO 0.70          /* ... keeping between this ... */
#define DR_GIL_CORES_HI 1.30          /* ... and this many cores busy: Python threads under one GIL */
#define DR_IO_DSTATE 0.25             /* share of the loading processes' time in D state */
#define DR_IO_PSI 20.0                /* PSI io some, % of wall time (halves the D-state threshold) */
#define DR_INFER_GPU_UTIL 50.0        /* no step timings: a used GPU below this util next to a saturated CPU */
#define DR_HOSTCODE_GPU_UTIL 60.0     /* GPU util below which an un-starved GPU is waiting on the host */
#define DR_HOSTCODE_MIN_SHARE 0.10    /* ... when the idle share left over is at least this */
#define DR_HOSTCODE_TARGET_UTIL 90.0  /* util a GPU reaches with host overhead removed */
#define DR_LAUNCH_CORES 0.85          /* a training process busier than this: launch overhead */
#define DR_HOSTCODE_CPU_CORES 0.50    /* CPU-only run: the job using less than this many cores is waiting */
#define DR_CPU_CONTENDED 80.0         /* host PSI cpu some, %: the CPUs are full (no host code, no more workers) */
#define DR_SATURATED 0.85             /* share of the job's usable cores that counts as saturated */
#define DR_MIN_USABLE_CORES 0.5       /* usable cores are never taken as fewer than this */
#define DR_CONTENDED_RUNQ 0.05        /* job waiting for a CPU this share of the time: others' CPU is its loss */
#define DR_UNCONTENDED_RUNQ 0.02      /* ... at most this share: none is (others only fill what it leaves) */
#define DR_BATCH_MEM_FREE 0.50        /* GPU memory peak below this share of total: a larger batch fits */
#define DR_BATCH_MEM_FIT 0.90         /* ... a k-times batch fits when k x peak stays below this share */
#define DR_BATCH_MAX_SCALE 8          /* never advise more than this multiple of the batch */
#define DR_BATCH_MIN_SPEEDUP 1.05     /* batch_too_small fires only when its model promises this */
#define DR_MP_CC 7.0                  /* compute capability with tensor cores */
#define DR_MP_TENSOR_IDLE 5.0         /* tensor pipes active below this % while the GPU is busy */
#define DR_MP_SM_BUSY 20.0            /* ... busy: SM activity at least this % (GPM) */
#define DR_MP_UTIL_BUSY 50.0          /* ... or, without GPM, util at least this % */
#define DR_MP_GAIN 0.40               /* share of GPU-busy time AMP removes (model in diagnosis.md) */
#define DR_PCIE_RX_HEAVY 1.0e9        /* host-to-device bytes/s that count as heavy copying */
#define DR_H2D_SHARE_HEAVY 0.10       /* ... or the client's h2d phase at least this share of the step */
#define DR_PAGEABLE_BW 6.0e9          /* pageable host-to-device bandwidth assumed, bytes/s */
#define DR_PAGEABLE_COPY_MAX 0.90     /* a copy share from PCIe RX is capped here */
#define DR_PINNED_GAIN 0.50           /* share of the copy time pinned, non-blocking copies remove */
#define DR_THROTTLE_SHARE 0.05        /* share of the run with clocks cut by heat or power */
#define DR_STALL_MIN_S 0.20           /* a step gap at least this much longer than usual is a stall */
#define DR_STALL_FACTOR 3.0           /* ... and at least this many typical steps long */
#define DR_STALL_MIN_COUNT 3          /* stalls needed to call them periodic */
#define DR_STALL_MIN_STEPS 10         /* steps needed to look for stalls between them */
#define DR_STALL_REGULARITY 0.35      /* coefficient of variation of the stall spacing */
#define DR_STALL_MIN_SHARE 0.05       /* periodic stalls must cost this share of the window */
#define DR_STALL_MARK_S 1.0           /* a mark this close before or after a stall names it */
#define DR_STALL_LOADER 0.50          /* stalls at least this much data wait are loader restarts */
#define DR_STRAGGLER_POINTS 15.0      /* util/SM activity points below the other GPUs' median */
#define DR_STRAGGLER_CLOCK 0.10       /* SM clock this much below the other GPUs' median */
#define DR_RANK_DATA_SHARE 0.10       /* a rank's extra data wait, share of the step, that makes it a straggler */
#define DR_RANK_DATA_MIN_S 0.005      /* ... and at least this many seconds a step */
#define DR_IDLE_GPU_UTIL 10.0         /* a GPU below this mean util is idle */
#define DR_BUSY_GPU_UTIL 30.0         /* ... while another is above this */
#define DR_SCALING_EFFICIENCY 0.90    /* data parallel scaling assumed when idle GPUs join */
#define DR_MIN_STEPS 3                /* steps (or a rank's steps) needed for any step figure */
#define DR_LATENCY_MIN_EXTRA 2        /* input_latency advises at least this many workers more */
#define DR_MAX_LOST 0.95              /* a speed-up 1 / (1 - lost) is never taken from more lost than this */
#define DR_MIN_SHARE 0.03             /* a finding must cost at least this share of the run */
#define DR_MIN_SPEEDUP 1.03           /* ... or promise at least this speed-up */
#define DR_SEVERITY_HIGH 0.30         /* a finding costing this share of the window is high */
#define DR_SEVERITY_MEDIUM 0.10       /* ... this share medium, less low */
#define DR_HOSTCODE_MIN_SPEEDUP 1.0   /* host_code_bound: any gain the model gives (its share decides) */
#define DR_LATENCY_MIN_COMPUTE_S 1e-3 /* input_latency: a compute phase below this is taken as this */
#define DR_LATENCY_SPARE 1            /* ... and advises this many workers more than keep up exactly */
#define DR_IO_DSTATE_PSI 0.125        /* D-state share that is storage when PSI io is high as well */
#define DR_TRAINER_COVERAGE 0.5       /* the training process lives at least this share of the window */
#define DR_WORKER_COVERAGE 0.3        /* a loader worker lives at least this share of the window */
#define DR_MAX_WORKERS_PARAM 4096     /* a num_workers param above this is not believed (the tree's count is) */
#define DR_WORKERS_LISTED 8           /* loader_workers' evidence lists the estimate of this many counts */
#define DR_STALL_MARK_STEPS 2         /* ... or within this many typical steps after a stall ends */
#define DR_STALL_MAX_SHARE 0.95       /* the step model takes periodic stalls as at most this share */
#define DR_XID_DEATH_S 60.0           /* an Xid this close before the job died is its cause */
#define DR_PCIE_REPLAYS 100.0         /* PCIe replays during the window that make a GPU's link suspect */
#define DR_NVLINK_ERRORS 1.0          /* NVLink errors (replay, recovery, CRC) during the window: suspect */

enum { DR_MAX_GPUS = 64, DR_MAX_RANKS = 256 };

/* Windowed statistics of one series (or several pooled); n == 0 and every number NAN when absent. */
struct dr_stats {
  size_t n; /* samples, or 10 s buckets for a long series */
  double mean, min, max;
};

struct dr_gpu {
  int index;
  int used; /* the job had a process on it, or it was busy */
  char name[128];
  double cc; /* compute capability, NAN unknown */
  int amd;   /* param gpu.N.vendor=amd (docs/amd.md) */
  int cdna;  /* an AMD GPU's matrix-core generation from gpu.N.gfx: 1 gfx908, 2 gfx90a, 3 gfx942; 0 none */
  char gfx[16];
  struct dr_stats util, mem_util, sm_active, tensor, mem_used, mem_total, power, power_limit, temp, sm_clock,
      sm_clock_max, pcie_rx;
  double throttle_share;    /* share of the window with thermal/power clock reasons (NAN: no data) */
  unsigned throttle_mask;   /* union of those reasons seen */
  double throttle_clock;    /* mean SM clock while throttled (NAN unknown) */
  double clock_unthrottled; /* mean SM clock while busy, unthrottled (NAN unknown) */
  double throttle_util;     /* mean util while throttled (NAN unknown) */
  int64_t util_series;      /* store series id of gpu.util_pct, -1 none */
};

struct dr_proc {
  int pid;
  char comm[64];
  double cpu;      /* mean cores (1.0 = one core) while alive in the window */
  double rss;      /* mean bytes */
  double coverage; /* share of the window it was seen */
  double dstate;   /* NAN: unknown (per-process state is not collected) */
  double threads;  /* mean threads, NAN unknown */
  double runq;     /* mean share of the time its main thread waited for a CPU while runnable, NAN unknown */
  int role;        /* enum doctor_role */
};

/* One rank of a distributed job as its own step series tell it (step.* labelled rank=R; rank 0 is
 * the unlabelled main loop), over the analysis window. */
struct dr_rank {
  int rank;
  size_t nsteps;
  double data_mean, total_mean; /* seconds per step, NAN absent */
};

struct dr_run {
  const struct runview *v; /* borrowed: the run's series, events, params and steps, loaded once */
  double duration_s;
  /* A group of runs (v->group): the node the host and process signals are read from — the one whose
   * rank waits longest for data — and that rank (whose step figures the loop's then are); "" and 0
   * for a single run (dr_pick_node). */
  char host[128];
  char node[200]; /* the labels of that rank's run's own series (job, client): host=H, or host=H,run=ID */
  int host_rank;
  int64_t from, to; /* the analysis window: the training steps when the client sent them, else the run */
  double window_s;
  /* The first store read that failed while the signals loaded (0: none) and its message: data the
   * store holds but could not give is not missing data, so dr_run_load fails with it. */
  int read_rc;
  char read_err[256];

  /* host */
  int ncpu;      /* cpu=N series seen; 0 unknown */
  double quota;  /* cgroup CPU limit in cores, NAN none */
  double cpuset; /* CPUs the job may run on (affinity and cgroup cpuset), NAN unknown */
  double cores;  /* what the job may use: the least of quota, cpuset and ncpu (NAN unknown) */
  struct dr_stats host_busy, iowait, psi_io, psi_cpu, mem_avail, mem_total, cg_mem_limit, cg_mem_used;
  double others_cores; /* cores busy with other work than the job (NAN unknown) */

  /* the job */
  struct dr_stats tree_cpu, tree_rss, tree_dstate, tree_procs, tree_read;
  struct dr_proc *procs;
  size_t nprocs;
  int main_idx;       /* index in procs of the training process, -1 unknown */
  int nworkers;       /* loader-like processes seen (long-lived children of the main one) */
  double worker_cpu;  /* mean cores per worker, NAN none */
  double workers_cpu; /* cores of all workers together, NAN none */
  double worker_rss;  /* mean bytes per worker, NAN none */
  double job_cores;   /* tree CPU in cores, NAN unknown */

  /* the training loop */
  const struct runview_step *steps; /* the view's steps in the window (warm-up step dropped), borrowed */
  size_t nsteps;
  double step_mean, step_median, data_mean, h2d_mean, compute_mean, data_share, h2d_share;
  double samples_per_step, samples_per_s;
  double batch_size, num_workers, pin_memory; /* params: NAN unknown; pin_memory 1/0 */
  double collate_s;      /* the loader_collate_s param: the collate_fn's seconds per batch in the training process, NAN
                            unknown */
  char precision[32];    /* "" unknown */
  struct dr_rank *ranks; /* ranks of a distributed job that reported steps, by rank; none: 0 or 1 */
  size_t nranks;
  int persistent_workers; /* -1 unknown */

  /* GPUs */
  struct dr_gpu *gpus;
  int ngpus, nused;
  double used_util; /* mean util of the used GPUs with util data, NAN none */
  int nutil;        /* GPUs with util readings */

  /* set by the rules for the step model: the straggler term, a straggling rank's or GPU's lost share
   * of the step that the others wait (NAN none; a focus rank's own data wait and a GPU's slower
   * clocks change other terms), and the GPU whose pace sets the step (-1: none) */
  double strag_lost;
  double stall_data_share; /* periodic_stall: the data wait inside the stalls, share of the window (NAN unknown) */
  int strag_gpu;
  char not_judged[1024]; /* why rules could not judge ("" none), "; " between them (dr_not_judged) */
};

/* Derives every signal of the run in v over [from, to] (ns since run start; INT64_MIN / INT64_MAX:
 * the usual window, the training steps or else the whole run). v must outlive d. Returns 0 or a GS_E
 * code; dr_run_done frees (also after a failure). (signals.c) */
int dr_run_load(const struct runview *v, int64_t from, int64_t to, struct dr_run *d);
void dr_run_done(struct dr_run *d);

/* Windowed stats of a series by source/name/labels (labels NULL: pool every labels), through
 * runview_stats over the analysis window. A read error leaves the stats empty (n == 0) and is kept in
 * d (dr_read_failed), so the diagnosis fails with its cause rather than judge without the data. */
void dr_stats_of(struct dr_run *d, const char *source, const char *name, const char *labels, struct dr_stats *out);

/* In a group, labels of the focus node's series: labels with ",host=H" appended for the host's own
 * series, with ",<d->node>" (host=H, or host=H,run=ID where several runs share H) for the focus run's
 * job series (job != 0), written into buf; else labels itself. */
const char *dr_node_labels(const struct dr_run *d, const char *labels, int job, char *buf, size_t n);
/* Is a series (or event) labelled `labels` the focus node's (its host's, or its run's own)? 1 with its
 * labels without those members in base (n bytes), else 0. A single run: always 1, base = labels. */
int dr_own_labels(const struct dr_run *d, const char *labels, char *base, size_t n);

/* Loads a series' samples within the window into malloc'd arrays (NULL, 0 when absent). Returns 0
 * or the read's GS_E code, which is also kept in d (dr_read_failed). */
int dr_samples(struct dr_run *d, int64_t series_id, int64_t **t, double **v, size_t *n);

/* The signals by family, each filling its part of d from d->v within the window (called in this
 * order by dr_run_load): the loop's figures and params (signals_loop.c), the host and the job's
 * totals (signals_host.c), the job's processes (signals_procs.c), the GPUs (signals_gpu.c), and the
 * ranks of a distributed job (signals_loop.c). Those that allocate return 0 or a GS_E code. */
void dr_load_loop(struct dr_run *d);
/* In a group, picks the node the host signals come from (d->host) after the ranks are loaded: the host
 * of the rank that waits longest for data, its step figures then standing for the loop's; without
 * ranks rank 0's host, else the node whose job kept the most CPU busy (signals_host.c). */
void dr_pick_node(struct dr_run *d);
void dr_load_host(struct dr_run *d);
int dr_load_procs(struct dr_run *d);
int dr_load_gpus(struct dr_run *d);
int dr_load_ranks(struct dr_run *d);

/* ---- building findings (finding.c) ---- */

/* The list the rules append to. */
struct dr_change_req;
struct dr_findings {
  struct store_finding *v;
  struct dr_change_req *ch; /* beside v: each finding's change to the step model */
  size_t n, cap;
  int oom;
};

/* A JSON object written into a fixed buffer: it is closed after every member, and members that no
 * longer fit are left out, so the text is always a valid object. */
struct dr_json {
  char *buf;
  size_t cap, len;
  int members;
};
void dr_json_begin(struct dr_json *j, char *buf, size_t cap);
void dr_json_num(struct dr_json *j, const char *key, double v); /* NAN -> null */
void dr_json_int(struct dr_json *j, const char *key, long long v);
void dr_json_str(struct dr_json *j, const char *key, const char *s);
void dr_json_raw(struct dr_json *j, const char *key, const char *json); /* json must be valid */

/* Appends a finding with rule, share (of the window) and speed-up; severity follows the share.
 * Returns it for title, evidence and fix to be filled, or NULL when out of memory. */
struct store_finding *dr_add(struct dr_findings *fs, const struct dr_run *d, const char *rule, double share,
                             double speedup);
/* Sets f's share (of the window), speed-up, lost time and the severity that follows the share. */
void dr_set_estimate(struct store_finding *f, const struct dr_run *d, double share, double speedup);
/* Adds a reason a rule could not judge to d->not_judged (printf-style; "; " between reasons). */
void dr_not_judged(struct dr_run *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* v, or dflt when v is not finite. */
double dr_fin(double v, double dflt);
/* Median of v[0..n) (sorts v in place); NAN when n == 0. */
double dr_median(double *v, size_t n);
/* A number that may be unknown, for a title or a fix: "12 MHz" (decimals, unit; "" none), or "—"
 * when v is not finite. Returns dst. */
const char *dr_fmt(char *dst, size_t cap, double v, int decimals, const char *unit);
/* printf into a fixed field (truncated safely). */
void dr_printf(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* In a group, names the focus node in a host-side finding: " (host H)" after its title, and "host"
 * first in its evidence (left out when the evidence has no room). */
void dr_name_node(const struct dr_run *d, struct store_finding *f);
/* Is there already a finding with this rule? */
int dr_has(const struct dr_findings *fs, const char *rule);

/* ---- the rules: each reads d and appends what it finds ---- */
void dr_rule_input(struct dr_run *d, struct dr_findings *fs);         /* input_bound, loader_workers,
                                                                         input_latency, io_bound */
void dr_rule_host_code_gpu(struct dr_run *d, struct dr_findings *fs); /* host_code_bound, with GPUs */
void dr_rule_host_code_cpu(struct dr_run *d, struct dr_findings *fs); /* host_code_bound, CPU-only */
void dr_rule_batch(struct dr_run *d, struct dr_findings *fs);
void dr_rule_mixed_precision(struct dr_run *d, struct dr_findings *fs);
void dr_rule_pageable(struct dr_run *d, struct dr_findings *fs);
void dr_rule_throttled(struct dr_run *d, struct dr_findings *fs);
void dr_rule_periodic_stall(struct dr_run *d, struct dr_findings *fs);
void dr_rule_straggler(struct dr_run *d, struct dr_findings *fs);
void dr_rule_underused(struct dr_run *d, struct dr_findings *fs);
/* GPU health (rules_health.c): gpu_xid (an Xid during the run; first, with the whole run lost, when
 * the job died within DR_XID_DEATH_S of it) and gpu_ecc (uncorrected ECC errors during the run). */
void dr_rule_xid(struct dr_run *d, struct dr_findings *fs);
void dr_rule_ecc(struct dr_run *d, struct dr_findings *fs);
/* gpu_health: a used GPU that looks sick (dr_gpu_sick_why) and is not the straggler (whose finding
 * names it). */
void dr_rule_sick(struct dr_run *d, struct dr_findings *fs);
/* Whether GPU gpu looks sick over the window — a row remap failed or pending, PCIe replays at least
 * DR_PCIE_REPLAYS, NVLink errors — with the reason in why ("its PCIe link replayed 480 times during
 * the run"). 0 when none of that was seen (or not read). */
int dr_gpu_sick_why(struct dr_run *d, int gpu, char *why, size_t n);
/* A run a GPU's Xid ended (gpu_xid with the whole run lost) keeps only the health findings: the
 * other rules' advice about its batch or loader is not what went wrong. A run with a sick GPU
 * (dr_gpu_sick_why) keeps no batch_too_small or host_code_bound: a slow step on a GPU that replays
 * is not a batch or host problem. */
void dr_health_overrules(struct dr_run *d, struct dr_findings *fs);

/* Cores the job could use: its cores less what other work took (at least DR_MIN_USABLE_CORES); NAN
 * when the CPUs, or (with host CPU readings expected) other work, are unknown (rules_loop.c). */
double dr_usable_cores(const struct dr_run *d);
/* The share of the time the job's training and loader processes waited for a CPU while runnable,
 * their mean (NAN when not measured: no schedstat, or no such process seen) (step_model.c). */
double dr_job_runq(const struct dr_run *d);
/* Processes loading now: the num_workers param when sent, else the worker processes seen. */
int dr_current_workers(const struct dr_run *d);

/* The loader_workers model (rules_loop.c), exposed for its unit test: the step time with w loader
 * processes. */
double dr_workers_step_s(const struct dr_run *d, double load_s, int w);

/* ---- the step model (step_model.c; docs/diagnosis.md, "The step model") ----
 *
 * One model of the loop every estimate is a change to. Time per unit of work T = stalls + step; the
 * step's terms are shares of the measured step (the step = 1): the data wait, host-to-device copies,
 * the wait for a straggler, GPU work and host idle / launch (the rest). Loading overlaps compute when
 * it runs in workers: step = max(h2d + straggler + gpu + host, load / workers, cpu); in the training
 * process (workers 0) it adds to the step. A finding's speed-up is T / T' for its change alone;
 * "fixing all" applies every finding's change to the same T. */
enum dr_term { DR_TERM_STALL, DR_TERM_DATA, DR_TERM_H2D, DR_TERM_STRAGGLER, DR_TERM_GPU, DR_TERM_HOST, DR_NTERMS };

struct dr_step {
  double term[DR_NTERMS]; /* stall: seconds of stalls per second of steps; the others: shares of the step */
  double fill;            /* share of the gpu term that is filled work (a bigger batch shrinks the rest); 1 unknown */
  double load;            /* one batch's loading on one process, share of the step; NAN: loading bounds nothing */
  double workers;         /* processes loading now (0: the training process itself) */
  double cpu;             /* the job's CPU per step / its usable cores, share of the step; NAN unknown */
  int valid;              /* 0: no model (nothing measured to build it from) */
};

/* What one finding changes: each term scaled (1 unchanged; 0 gone), the loader's processes (NAN
 * unchanged) and the batch multiplied (1 unchanged). */
struct dr_change {
  double factor[DR_NTERMS];
  double workers, batch;
};

/* A change that changes nothing. */
void dr_change_none(struct dr_change *c);
/* T for model m under change c (NULL: as measured), in steps. NAN when m is not valid. */
double dr_step_time(const struct dr_step *m, const struct dr_change *c);
/* T / T' for c alone, at least 1; 1 when m is not valid. */
double dr_step_speedup(const struct dr_step *m, const struct dr_change *c);
/* Composes b into a: factors multiply, the most workers and the largest batch win. */
void dr_change_add(struct dr_change *a, const struct dr_change *b);
/* The term's name in evidence ("stall", "data", "h2d", "straggler", "gpu", "host"). */
const char *dr_term_name(int term);
/* Builds the run's model from its signals and the findings so far (the stall share of
 * periodic_stall, the straggler's lost share). Can't fail: m->valid 0 when nothing was measured. */
void dr_step_build(const struct dr_run *d, const struct dr_findings *fs, struct dr_step *m);

/* How a rule states its change (kept beside its finding until the model is built): scale a term by
 * value (DR_CH_FACTOR), take value (a share of the window) off a term (DR_CH_REMOVE), load in value
 * processes (DR_CH_WORKERS), a value-times batch (DR_CH_BATCH), or shrink host idle until the GPU is
 * busy value (a share) of the compute path (DR_CH_HOST_TO_UTIL). min_speedup: the rule's own
 * threshold — under it the finding is dropped. */
enum { DR_CH_NONE, DR_CH_FACTOR, DR_CH_REMOVE, DR_CH_WORKERS, DR_CH_BATCH, DR_CH_HOST_TO_UTIL };
struct dr_change_req {
  int kind, term;
  double value, min_speedup;
  int measured; /* the finding's share is a measured cost, kept (dr_keep_share); 0: 1 - T'/T */
};
/* States the change of finding f (the last one dr_add returned). */
void dr_set_change(struct dr_findings *fs, const struct store_finding *f, int kind, int term, double value,
                   double min_speedup);
/* After dr_set_change: f's share (the one dr_add set) is the measured cost of its symptom — the data
 * wait's share of the step, the run view's figure the report shows beside it — and stays; the step
 * model gives only its speed-up. Without it the share is what the change wins back, 1 - T'/T. */
void dr_keep_share(struct dr_findings *fs, const struct store_finding *f);
/* Resolves every finding's change against the run's step model (built here from d and the findings
 * so far): its speed-up is T / T' for that change alone, its share 1 - T' / T unless dr_keep_share
 * kept the measured one; a finding whose change gains less than its rule asks is dropped. The model
 * and the change go into the evidence for doctor_combine. Can't fail. */
void dr_evaluate_changes(struct dr_run *d, struct dr_findings *fs);
/* Resolves a request against m into a change. Returns 0 when it is outside the model (DR_CH_NONE). */
int dr_change_resolve(const struct dr_step *m, const struct dr_change_req *r, struct dr_change *c);
/* Appends the model and the change to evidence (a JSON object of cap bytes) as "change" and
 * "step_model" members; left out when they do not fit. */
void dr_step_evidence(char *evidence, size_t cap, const struct dr_step *m, const struct dr_change *c);

#endif
