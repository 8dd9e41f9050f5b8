/* runview: one stored run, loaded once, as every reader sees it — the doctor, each report format,
 * `compare`, and later the web API and `top`. It holds the run's record, series, events, params,
 * notes and findings, and the client's training steps with their phases joined; it answers windowed
 * statistics of any series with one rollup policy (raw samples for a short series, the stored 10 s
 * rollups past RUNVIEW_QUICK_POINTS, 1 min past RUNVIEW_SLOW_POINTS), so a chart, a report line and a
 * finding computed over the same window agree.
 *
 * The store is untrusted input: non-finite samples are skipped, never counted as zero; anything
 * absent stays NAN or n == 0 (missing is not zero). Everything reads through the store interface, so
 * a view looks the same whichever back end holds the run. */
#ifndef GS_RUNVIEW_H
#define GS_RUNVIEW_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* The rollup policy: a series of more points than this is summarised from its 10 s rollups ... */
#define RUNVIEW_QUICK_POINTS 200000
#define RUNVIEW_QUICK_RES_NS (10 * GS_NS_PER_S)
/* ... and from its 1 min rollups past this many (two days at 10 Hz). */
#define RUNVIEW_SLOW_POINTS 2000000
#define RUNVIEW_SLOW_RES_NS (60 * GS_NS_PER_S)

/* Statistics of one series, or of several pooled, over a window. n counts samples (buckets for a
 * long series); every number is NAN when n == 0. For a long series min and max stay exact (bucket
 * extremes), mean and percentiles are those of the bucket means, and first / last are the first
 * bucket's minimum and the last one's maximum (exact for a counter, the only kind whose ends matter). */
struct runview_stats {
  size_t n;
  double mean, min, max, sum, p50, p95;
  double first, last;
  int64_t t_first, t_last; /* ns since run start */
};

/* A view holds at most this many steps. A run with more holds RUNVIEW_STRETCHES stretches of
 * consecutive steps spread evenly over it (the first starts at the run's first step, the last ends at
 * its last), so gaps between consecutive steps, the median and phase shares stay right inside each
 * stretch; the figures that need every step (count, samples, throughput, phase sums) come from sums
 * streamed over the whole series (struct runview_loop). Peak memory stays O(RUNVIEW_MAX_STEPS). */
#define RUNVIEW_MAX_STEPS 262144
#define RUNVIEW_STRETCHES 64

/* One training step as the client reported it: t is the step's end (ns since run start), phases in
 * seconds, NAN where the client did not measure that phase. Two held steps are consecutive in the run
 * only when their stretch is the same (always, when the view holds every step). */
struct runview_step {
  int64_t t;
  double total, data, h2d, compute, samples;
  uint32_t stretch;
};

/* Sums over every kept step of the run, held or not, streamed while loading: each phase over the steps
 * that reported it, with the total time of those same steps. All 0 when the run has no steps. */
struct runview_loop {
  double total, data, data_total, h2d, h2d_total, compute, samples;
  size_t ndata, nh2d, ncompute, nsamples;
  int64_t t_first, t_last; /* the first kept step's end and the last one's */
  double first_total;      /* the first kept step's length, s */
};

/* Adds step s to the sums l (first: s is the first step summed, which sets t_first and first_total).
 * The one accumulation of step phases: the view's whole-run sums and runview_step_figures use it. */
void runview_loop_add(struct runview_loop *l, const struct runview_step *s, int first);

struct runview {
  struct store *st; /* borrowed: the caller keeps it open while the view lives */
  struct store_run run;
  int group; /* a group of runs (store_group_open): the nodes' series carry host=HOST */
  struct store_series *series;
  size_t nseries;
  struct store_event *events;
  size_t nevents;
  struct gs_kv *params;
  size_t nparams;
  char **notes;
  size_t nnotes;
  struct store_finding *findings; /* as stored (the doctor's last word), may be none */
  size_t nfindings;
  int64_t duration_ns; /* wall-clock span of a finished run, else its last sample; 0 unknown */
  int64_t t_newest_ns; /* the newest sample of any series, ns since run start; 0 when none */
  double duration_s;   /* NAN unknown */
  /* The main loop's (rank 0's) steps in time order, with sane totals (0 <= total < 1e6 s), the first
   * (warm-up: workers starting, lazy init) left out when there are at least five. */
  struct runview_step *steps;
  size_t nsteps;       /* steps held, at most RUNVIEW_MAX_STEPS */
  size_t nsteps_total; /* kept steps in the whole run: nsteps unless the view holds a sample */
  size_t nstretches;   /* stretches the held steps come in (1 when all are held, 0 when none) */
  struct runview_loop loop;
};

/* The training loop's figures over a stretch of the held steps — the one definition the report, the
 * doctor, serve and `top` read. Each phase's mean and share are over the steps that reported that
 * phase (a step without a data= field is not a step without data wait): its sum over the total of
 * those same steps, at most 1. Throughput is over the time the steps cover (each stretch from its
 * first step's start to its last step's end: time the loop spent outside its steps, evaluation or
 * checkpoints, counts against it). Over every held step of a view that holds a sample of a long run,
 * everything but the median comes from the sums over the whole run (struct runview_loop). NAN where
 * the steps did not measure it (no steps: steps 0 and all NAN). */
struct runview_step_figures {
  size_t steps;      /* the steps counted: the whole run's for a sampled view's every held step */
  size_t steps_held; /* those held, the median is taken over */
  size_t stretches;  /* how many stretches of consecutive steps those come in */
  double mean_step_s, median_step_s;
  double data_mean_s, data_share, h2d_mean_s, h2d_share, compute_mean_s;
  double compute_share;       /* 1 - data - h2d: the rest of the step (NAN without data shares) */
  double samples;             /* summed over the steps that reported them (0 when none did) */
  double samples_per_step;    /* over the steps that reported samples */
  double samples_per_s;       /* NAN unless some step reported samples */
  double steps_per_s, span_s; /* steps over the time they cover, and that time */
};
/* Figures of the held steps v->steps[first .. first + n) (n clipped to the view). Can't fail. */
void runview_step_figures(const struct runview *v, size_t first, size_t n, struct runview_step_figures *out);
/* Throughput of x relative to base: the ratio of their samples per second, else of their steps per
 * second (both over the time the steps cover: the figures runview_throughput and `check` use); NAN
 * when neither pair is known. compare's speed-up, in the report and serve. */
double runview_step_speedup(const struct runview_step_figures *base, const struct runview_step_figures *x);
/* The throughput of the held steps v->steps[first .. first + n) (n clipped to the view) with its 95 %
 * half-width: *rate is runview_step_figures' samples_per_s when with_samples (every step should have
 * counted samples), else its steps_per_s — the one figure report, compare and check print — and *ci
 * gs_rate_ci's batch-means half-width over each step's share of the time the steps cover (a
 * stretch's first step its own length, each later one the time since the step before: gaps between
 * steps count against the rate, as in the figure). *dof: the blocks' degrees of freedom. 0, or
 * GS_EINVAL (fewer than two timed steps) or GS_ENOMEM, then *rate and *ci NAN. */
int runview_throughput(const struct runview *v, size_t first, size_t n, int with_samples, double *rate, double *ci,
                       int *dof);
/* The held steps wholly inside [from, to] (the step from its start, its end minus its total, to its
 * end), as v->steps[*first .. *first + *n): all of them for INT64_MIN, INT64_MAX. Can't fail. */
void runview_steps_in(const struct runview *v, int64_t from, int64_t to, size_t *first, size_t *n);

/* The q-quantile (0..1, linear between order statistics) of sorted[0..n), NAN when n == 0. */
double runview_quantile(const double *sorted, size_t n, double q);
/* qsort comparator for doubles, ascending. */
int runview_cmp_double(const void *a, const void *b);

/* 1 when the view holds only a sample of the run's steps (nsteps < nsteps_total), else 0. */
int runview_steps_sampled(const struct runview *v);
/* "262,144 of 12,581,575 steps in 64 stretches" into buf (n bytes), or "" when every step is held.
 * Returns buf. */
const char *runview_steps_sampling(const struct runview *v, char *buf, size_t n);

/* Loads run ref (an id, a unique prefix, a name or "last") from st into v. Returns 0, GS_ENOENT or
 * GS_EAMBIG for a bad reference, or another GS_E code with a message; v is valid for runview_done()
 * either way. */
int runview_load(struct store *st, const char *ref, struct runview *v);
/* Frees what the view holds (not the store). Safe on a zeroed or failed view. */
void runview_done(struct runview *v);

/* The live diagnosis looks at this much of the end of a running run (serve, top, the node agent). */
#define RUNVIEW_LIVE_WINDOW_S 60

/* A window of the run the live readers judge: [from, to] in ns since run start. */
struct runview_window {
  int64_t from, to; /* INT64_MIN / INT64_MAX: the usual window (doctor_diagnose_view's) */
  double span_s;    /* to - from in seconds for a live window, NAN for the usual one */
};

/* The live window of v: for a running run with samples, the window_ns (<= 0: RUNVIEW_LIVE_WINDOW_S)
 * that end at its newest sample (t_newest_ns; from never before 0), so a run whose agent went quiet
 * is still judged on its last data rather than on an empty stretch; for a finished run, or one with
 * no sample yet, the usual window (span_s NAN). Can't fail. */
struct runview_window runview_live_window(const struct runview *v, int64_t window_ns);

/* Does a series labelled `have` answer a query for labels `want`? Exactly equal; and in a group, also
 * `have` without its node members (host=HOST, and run=ID where several runs share a host) that `want`
 * does not name: "cpu=total" matches every node's "cpu=total,host=H", "" every run's job series
 * "host=H" and "host=H,run=ID", "host=H" every run's on H; so a reader that does not name a node
 * reads all of them (pooled by runview_stats), and one that does reads that node's (or run's). */
int runview_labels_match(const struct runview *v, const char *have, const char *want);

/* Index of the first series matching source (NULL: any), name and labels (NULL: any; matched by
 * runview_labels_match), or -1. */
long runview_find(const struct runview *v, const char *source, const char *name, const char *labels);

/* Statistics of every series matching source / name / labels (NULL: any; runview_labels_match), pooled, over
 * [from, to] (ns since run start; INT64_MIN / INT64_MAX for the whole run). Returns 0 (out->n may be
 * 0) or a GS_E code; out is filled (empty) either way. */
int runview_stats(const struct runview *v, const char *source, const char *name, const char *labels, int64_t from,
                  int64_t to, struct runview_stats *out);

/* The finite raw samples of a series within [from, to], in malloc'd arrays (NULL, 0 when none;
 * caller frees both). Returns 0 or a GS_E code (then *t, *vals NULL and *n 0). */
int runview_samples(const struct runview *v, int64_t series_id, int64_t from, int64_t to, int64_t **t, double **vals,
                    size_t *n);

/* A param's value ("" for an empty one), or NULL when absent. */
const char *runview_param(const struct runview *v, const char *key);
/* A param as a finite number, else NAN. */
double runview_param_num(const struct runview *v, const char *key);
/* A param as a truth value: 1 (true/yes/on/1), 0 (false/no/off/0), -1 absent or anything else. */
int runview_param_bool(const struct runview *v, const char *key);

/* N for labels exactly "gpu=N" (0 <= N < 1024), else -1. */
int runview_gpu_label(const char *labels);
/* N for labels exactly "rank=N" (1 <= N <= 65535), 0 for "" (the main loop), else -1. */
int runview_rank_label(const char *labels);

#endif
