/* doctor/signals_procs: the job's processes over the analysis window — each one's CPU, memory,
 * threads and the share of the window it lived; which one trains (the earliest long-lived process
 * that is not a launcher such as sh -c or env), and which ones load data for it (long-lived
 * processes started after it): their count, CPU and memory, and how long each waited for a CPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "doctor/doctor_int.h"

static int is_launcher(const char *comm) {
  static const char *names[] = {"sh",      "bash", "dash",   "zsh",     "env",  "timeout", "nice",    "taskset",
                                "numactl", "srun", "mpirun", "mpiexec", "time", "stdbuf",  "gpuscope"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcmp(comm, names[i]))
      return 1;
  return 0;
}

static double mean_in_window(struct dr_run *d, const char *name, const char *labels, size_t *count) {
  struct dr_stats s;
  dr_stats_of(d, "proctree", name, labels, &s);
  if (count)
    *count = s.n;
  return s.mean;
}

/* Reads process series s (proc.cpu_pct of one pid) into the next dr_proc: its means over the
 * window, the share of the window it was seen in, its name and start from its proc_start event.
 * Returns 1 when it counts (a pid of the focus node with samples in the window). */
static int proc_read(struct dr_run *d, const struct store_series *s, double interval, int64_t *start) {
  char lab[320], ev[320];
  if (strcmp(s->source, "proctree") || strcmp(s->name, "proc.cpu_pct") ||
      !dr_own_labels(d, s->labels, lab, sizeof lab) || strncmp(lab, "pid=", 4))
    return 0;
  char *end;
  long pid = strtol(lab + 4, &end, 10);
  if (*end || pid <= 0 || pid > 1 << 30)
    return 0;
  size_t count = 0;
  struct dr_proc *p = &d->procs[d->nprocs];
  p->pid = (int)pid;
  p->cpu = mean_in_window(d, "proc.cpu_pct", lab, &count) / 100;
  if (!count)
    return 0;
  p->rss = mean_in_window(d, "proc.rss_bytes", lab, NULL);
  p->threads = mean_in_window(d, "proc.threads", lab, NULL);
  p->runq = mean_in_window(d, "proc.runq_wait_pct", lab, NULL) / 100;
  /* The share of the window the process was seen in: its first to last sample, plus one interval. */
  double seen = fmin((double)s->t_last + interval, (double)d->to) - fmax((double)s->t_first, (double)d->from);
  p->coverage = d->window_s > 0 ? fmax(0, seen) / (d->window_s * GS_NS_PER_S) : NAN;
  p->dstate = NAN;
  *start = s->t_first;
  for (size_t e = 0; e < d->v->nevents; e++)
    if (!strcmp(d->v->events[e].kind, "proc_start") && d->v->events[e].value == (double)pid &&
        dr_own_labels(d, d->v->events[e].labels, ev, sizeof ev)) {
      dr_printf(p->comm, sizeof p->comm, "%s", d->v->events[e].name);
      *start = d->v->events[e].t;
      break;
    }
  return 1;
}

/* The processes' roles: the training process is the earliest long-lived one that is not a
 * launcher (sh -c, env, ...); its workers are the long-lived ones started after it, whose CPU
 * (weighted by how much of the window each was seen) and memory are summed. start[i]: when
 * process i started. */
static void procs_roles(struct dr_run *d, const int64_t *start) {
  for (size_t i = 0; i < d->nprocs; i++) {
    const struct dr_proc *p = &d->procs[i];
    if (is_launcher(p->comm) || !(p->coverage >= DR_TRAINER_COVERAGE))
      continue;
    if (d->main_idx < 0 || start[i] < start[d->main_idx])
      d->main_idx = (int)i;
  }
  for (size_t i = 0; i < d->nprocs; i++)
    d->procs[i].role = is_launcher(d->procs[i].comm) ? DOCTOR_ROLE_LAUNCHER : DOCTOR_ROLE_OTHER;
  if (d->main_idx < 0)
    return;
  double cpu = 0, rss = 0;
  int nrss = 0;
  d->procs[d->main_idx].role = DOCTOR_ROLE_TRAINER;
  for (size_t i = 0; i < d->nprocs; i++) {
    struct dr_proc *p = &d->procs[i];
    if ((int)i == d->main_idx || start[i] < start[d->main_idx] || !(p->coverage >= DR_WORKER_COVERAGE) ||
        is_launcher(p->comm))
      continue;
    p->role = DOCTOR_ROLE_WORKER;
    d->nworkers++;
    cpu += isfinite(p->cpu) ? p->cpu * fmin(p->coverage, 1) : 0;
    if (isfinite(p->rss))
      rss += p->rss, nrss++;
  }
  if (d->nworkers) {
    d->workers_cpu = cpu;
    d->worker_cpu = cpu / d->nworkers;
    d->worker_rss = nrss ? rss / nrss : NAN;
  }
}

int dr_load_procs(struct dr_run *d) {
  size_t cap = 0;
  for (size_t i = 0; i < d->v->nseries; i++)
    if (!strcmp(d->v->series[i].source, "proctree") && !strcmp(d->v->series[i].name, "proc.cpu_pct"))
      cap++;
  d->main_idx = -1;
  d->worker_cpu = d->workers_cpu = d->worker_rss = NAN;
  if (!cap)
    return GS_OK;
  d->procs = calloc(cap, sizeof *d->procs);
  if (!d->procs)
    return gs_fail(GS_ENOMEM, "out of memory");
  double interval = d->v->run.interval_ns > 0 ? (double)d->v->run.interval_ns : (double)GS_NS_PER_S;
  int64_t *start = calloc(cap, sizeof *start);
  if (!start)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < d->v->nseries; i++)
    d->nprocs += proc_read(d, &d->v->series[i], interval, &start[d->nprocs]);
  procs_roles(d, start);
  free(start);
  return GS_OK;
}
