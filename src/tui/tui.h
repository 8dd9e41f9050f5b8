/* tui: `gpuscope top`, the live view of a run in the terminal (ncurses). It only ever reads what the
 * agent committed to the store, through the run view (runview.h) — re-loaded every refresh — and
 * never talks to the agent, so watching a run cannot slow the agent or the job. A run that ends
 * stays on screen, marked "finished".
 *
 * The screen is built in two steps so the second can be tested without a terminal: tui_snap_load()
 * turns the store into a snapshot of plain numbers (NAN where a figure was not measured: shown as
 * "—", never as 0), and the drawing code lays a snapshot out for the terminal's size. */
#ifndef GS_TUI_H
#define GS_TUI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "doctor/doctor.h"
#include "store/store.h"

struct tui_opts {
  const char *store_url; /* NULL: the default store */
  const char *run_ref;   /* a run reference; NULL: the newest running run */
  char *const *argv;     /* non-NULL: `top -- CMD`: run CMD under `gpuscope run` and watch that run */
  const char *self_exe;  /* the gpuscope binary to start for argv (COLLECT_SELF_EXE) */
  int64_t refresh_ns;    /* how often the store is read again (default 1 s) */
};

/* Runs the live view until the user quits. Returns 0, or a negative GS_E code with a message:
 * GS_ENOENT (no such run / nothing running), GS_EINVAL (not a terminal), GS_EIO. With argv, the
 * job's output goes to a log file named on exit, and quitting while it runs stops it (SIGTERM to its
 * agent, which passes it on); *job_status then holds the job's status as `gpuscope run` gives it
 * (else 0). */
int tui_top(const struct tui_opts *o, int *job_status);

/* ---- the snapshot (top_model.c) ---- */

#define TOP_MAX_GPUS 64
#define TOP_MAX_CORES 1024
#define TOP_HIST 512 /* history points kept per GPU (one per second) */
#define TOP_MAX_ROLES 256

struct tui_gpu {
  int index;
  char name[64];                                                  /* escaped for the terminal */
  double util, sm, mem_used, mem_total, power, power_limit, temp; /* NAN: not measured */
  double hist[TOP_HIST]; /* util per second, oldest first, ending at the snapshot's time; NAN gaps */
  size_t nhist;
  unsigned xid[TOP_HIST]; /* the Xid code the driver reported in that second, 0 none */
  unsigned last_xid;      /* the newest in the history, 0 none */
};

struct tui_proc {
  int pid;
  char comm[48];            /* escaped */
  double cpu, rss, gpu_mem; /* cpu in % of one core; NAN unknown */
};

struct tui_snap {
  int utf8;             /* text escaped for a UTF-8 terminal */
  struct store_run run; /* name, command escaped */
  int running;          /* the run is still being recorded */
  int64_t t_ns;         /* the newest data's time, ns since the run started */
  int attached_pid;     /* > 0 when the run was recorded by `gpuscope attach` */
  struct tui_gpu *gpus; /* ngpus of them */
  int ngpus;
  double cpu_total; /* host CPU busy %, NAN unknown */
  double cores[TOP_MAX_CORES];
  int ncores;
  struct tui_proc *procs; /* the job's live processes, in the order they appeared */
  size_t nprocs;
  /* steps over the last TOP_STEP_WINDOW_S seconds of data */
  size_t steps_total;
  double step_s, data_share, h2d_share, compute_share, steps_per_s, samples_per_s; /* NAN unknown */
  /* the doctor's current top finding, over doctor_diagnose_live's window (the last
   * RUNVIEW_LIVE_WINDOW_S seconds while the run goes on, the usual window once it finished), and what each process is
   * to the training over that window */
  int have_finding; /* 1 a finding, 0 none yet, -1 the doctor failed: title is why */
  char rule[32], title[256], fix[256];
  double speedup, share;
  struct doctor_proc_role roles[TOP_MAX_ROLES];
  size_t nroles;
};

#define TOP_STEP_WINDOW_S 10

/* Loads a snapshot of run_id from st — the run read once, as one run view — with hist_s seconds of
 * GPU history (<= TOP_HIST); text is escaped by gs_term_escape(.., utf8, ..). With diagnose set, also
 * the doctor's current top finding on that same view (have_finding 0 when none, -1 with the cause in
 * title when the diagnosis failed) and the roles of its processes (trainer, loader worker,
 * launcher); without, have_finding is 0 and the caller keeps its last one. This is the one place the
 * live view asks the doctor, through the one live diagnosis (doctor_diagnose_live): the last
 * RUNVIEW_LIVE_WINDOW_S seconds of a running run, the doctor's usual window once it finished.
 * Returns 0 or a GS_E code; free with tui_snap_done() either way. */
int tui_snap_load(struct store *st, const char *run_id, size_t hist_s, int utf8, int diagnose, struct tui_snap *s);
void tui_snap_done(struct tui_snap *s);

#endif
