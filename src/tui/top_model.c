/* tui/top_model: the live view's snapshot of a run (tui.h) — the newest figures of every GPU with a
 * second-by-second utilisation history, the host's cores, the job's live processes, the recent
 * steps and the doctor's top finding — read through the run view, never from the agent. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "runview/runview.h"
#include "tui/tui.h"

/* A figure older than this (data time) is not "now": shown as unknown. */
#define FRESH_NS (5 * GS_NS_PER_S)

/* The last finite value of series idx within FRESH_NS of now, else NAN. */
static double last_value(const struct runview *v, long idx, int64_t now) {
  if (idx < 0 || v->series[idx].t_last < now - FRESH_NS)
    return NAN;
  int64_t *t = NULL;
  double *x = NULL, r = NAN;
  size_t n = 0;
  if (!runview_samples(v, v->series[idx].id, now - FRESH_NS, INT64_MAX, &t, &x, &n) && n)
    r = x[n - 1];
  free(t), free(x);
  return r;
}

static double last_of(const struct runview *v, const char *source, const char *name, const char *labels, int64_t now) {
  return last_value(v, runview_find(v, source, name, labels), now);
}

/* The series' mean per second over the hist_s seconds ending at now, oldest first; NAN gaps. */
static void history(const struct runview *v, long idx, int64_t now, size_t hist_s, struct tui_gpu *g) {
  double sum[TOP_HIST] = {0};
  int cnt[TOP_HIST] = {0};
  g->nhist = hist_s;
  for (size_t i = 0; i < hist_s; i++)
    g->hist[i] = NAN;
  if (idx < 0)
    return;
  int64_t from = now - (int64_t)hist_s * GS_NS_PER_S, *t = NULL;
  double *x = NULL;
  size_t n = 0;
  if (!runview_samples(v, v->series[idx].id, from + 1, now, &t, &x, &n))
    for (size_t i = 0; i < n; i++) {
      int64_t b = (t[i] - from - 1) / GS_NS_PER_S;
      if (b >= 0 && (size_t)b < hist_s)
        sum[b] += x[i], cnt[b]++;
    }
  free(t), free(x);
  for (size_t i = 0; i < hist_s; i++)
    if (cnt[i])
      g->hist[i] = sum[i] / cnt[i];
}

/* The Xids GPU g's driver reported within its history (events xid), each in its second. */
static void history_xids(const struct runview *v, int64_t now, struct tui_gpu *g) {
  int64_t from = now - (int64_t)g->nhist * GS_NS_PER_S;
  memset(g->xid, 0, sizeof g->xid);
  g->last_xid = 0;
  for (size_t i = 0; i < v->nevents; i++) {
    const struct store_event *e = &v->events[i];
    if (strcmp(e->kind, "xid") || runview_gpu_label(e->labels) != g->index || e->t <= from || e->t > now)
      continue;
    int64_t b = (e->t - from - 1) / GS_NS_PER_S;
    if (b >= 0 && (size_t)b < g->nhist)
      g->xid[b] = g->last_xid = (unsigned)atoi(e->name);
  }
}

static int load_gpus(const struct runview *v, int64_t now, size_t hist_s, int utf8, struct tui_snap *s) {
  int max = -1;
  for (size_t i = 0; i < v->nseries; i++)
    if (!strcmp(v->series[i].source, "nvml")) {
      int g = runview_gpu_label(v->series[i].labels);
      if (g > max && g < TOP_MAX_GPUS)
        max = g;
    }
  /* A GPU that gave no figure at all (lost from the start) is still one of the run's: "—" on its line. */
  double count = runview_param_num(v, "gpu.count");
  if (count >= 1 && count <= TOP_MAX_GPUS && count - 1 > max)
    max = (int)count - 1;
  if (max < 0)
    return GS_OK;
  if (!(s->gpus = calloc((size_t)max + 1, sizeof *s->gpus)))
    return gs_fail(GS_ENOMEM, "out of memory");
  s->ngpus = max + 1;
  for (int i = 0; i < s->ngpus; i++) {
    struct tui_gpu *g = &s->gpus[i];
    char lab[16], key[32];
    snprintf(lab, sizeof lab, "gpu=%d", i);
    snprintf(key, sizeof key, "gpu.%d.name", i);
    g->index = i;
    gs_term_escape(runview_param(v, key), utf8, g->name, sizeof g->name);
    g->util = last_of(v, "nvml", "gpu.util_pct", lab, now);
    g->sm = last_of(v, "nvml", "gpu.sm_active_pct", lab, now);
    g->mem_used = last_of(v, "nvml", "gpu.mem_used_bytes", lab, now);
    g->mem_total = last_of(v, "nvml", "gpu.mem_total_bytes", lab, now);
    g->power = last_of(v, "nvml", "gpu.power_w", lab, now);
    g->power_limit = last_of(v, "nvml", "gpu.power_limit_w", lab, now);
    g->temp = last_of(v, "nvml", "gpu.temp_c", lab, now);
    history(v, runview_find(v, "nvml", "gpu.util_pct", lab), now, hist_s, g);
    history_xids(v, now, g);
  }
  return GS_OK;
}

static void load_cores(const struct runview *v, int64_t now, struct tui_snap *s) {
  s->cpu_total = last_of(v, "host", "host.cpu.busy_pct", "cpu=total", now);
  for (size_t i = 0; i < v->nseries; i++) {
    const struct store_series *x = &v->series[i];
    if (strcmp(x->source, "host") || strcmp(x->name, "host.cpu.busy_pct") || strncmp(x->labels, "cpu=", 4))
      continue;
    char *end;
    long c = strtol(x->labels + 4, &end, 10);
    if (*end || end == x->labels + 4 || c < 0 || c >= TOP_MAX_CORES)
      continue;
    if (c >= s->ncores) {
      for (int k = s->ncores; k <= c; k++)
        s->cores[k] = NAN;
      s->ncores = (int)c + 1;
    }
    s->cores[c] = last_value(v, (long)i, now);
  }
}

/* The job's processes seen in the last few seconds, in the order they appeared, with their comm
 * from the proc_start / proc_exec events and their device memory summed over the GPUs. */
static int load_procs(const struct runview *v, int64_t now, int utf8, struct tui_snap *s) {
  size_t cap = 0;
  for (size_t i = 0; i < v->nseries; i++)
    cap += !strcmp(v->series[i].source, "proctree") && !strcmp(v->series[i].name, "proc.cpu_pct");
  if (!cap)
    return GS_OK;
  if (!(s->procs = calloc(cap, sizeof *s->procs)))
    return gs_fail(GS_ENOMEM, "out of memory");
  int64_t *first = calloc(cap, sizeof *first); /* each listed process's order of appearance */
  if (!first)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < v->nseries; i++) {
    const struct store_series *x = &v->series[i];
    if (strcmp(x->source, "proctree") || strcmp(x->name, "proc.cpu_pct") || strncmp(x->labels, "pid=", 4) ||
        x->t_last < now - FRESH_NS)
      continue;
    char *end;
    long pid = strtol(x->labels + 4, &end, 10);
    if (*end || pid <= 0 || pid > 1 << 30)
      continue;
    struct tui_proc *p = &s->procs[s->nprocs];
    p->pid = (int)pid;
    p->cpu = last_value(v, (long)i, now);
    p->rss = last_of(v, "proctree", "proc.rss_bytes", x->labels, now);
    p->gpu_mem = NAN;
    for (int g = 0; g < s->ngpus; g++) {
      char lab[64];
      snprintf(lab, sizeof lab, "gpu=%d,pid=%ld", g, pid);
      double m = last_of(v, "nvml", "gpu.proc_mem_bytes", lab, now);
      if (isfinite(m))
        p->gpu_mem = (isfinite(p->gpu_mem) ? p->gpu_mem : 0) + m;
    }
    const char *comm = "";
    /* The order the processes appeared in: their proc_start events (in time order, and within a
     * tick in the order the collector walked the tree, root first); one without comes last. */
    int64_t order = (int64_t)v->nevents + (int64_t)s->nprocs;
    for (size_t e = 0; e < v->nevents; e++)
      if ((!strcmp(v->events[e].kind, "proc_start") || !strcmp(v->events[e].kind, "proc_exec")) &&
          v->events[e].value == (double)pid) {
        comm = v->events[e].name; /* the newest wins */
        if (order >= (int64_t)v->nevents)
          order = (int64_t)e;
      }
    gs_term_escape(comm, utf8, p->comm, sizeof p->comm);
    size_t k = s->nprocs++;
    struct tui_proc tmp = *p;
    while (k > 0 && first[k - 1] > order) {
      s->procs[k] = s->procs[k - 1];
      first[k] = first[k - 1];
      k--;
    }
    s->procs[k] = tmp;
    first[k] = order;
  }
  free(first);
  return GS_OK;
}

/* The steps of the last TOP_STEP_WINDOW_S of data, as the run view defines their figures. */
static void load_steps(const struct runview *v, int64_t now, struct tui_snap *s) {
  s->steps_total = v->nsteps_total; /* the run's, also when the view holds a sample of a long run */
  size_t first, n;
  runview_steps_in(v, now - TOP_STEP_WINDOW_S * GS_NS_PER_S, INT64_MAX, &first, &n);
  struct runview_step_figures f;
  runview_step_figures(v, first, n, &f);
  s->step_s = f.mean_step_s;
  s->data_share = f.data_share, s->h2d_share = f.h2d_share, s->compute_share = f.compute_share;
  s->steps_per_s = f.steps_per_s;
  s->samples_per_s = f.samples_per_s;
}

/* The roles of the window's processes into s (what fits). */
static void keep_roles(const struct runview *v, int64_t from, int64_t to, struct tui_snap *s) {
  struct doctor_proc_role *r = NULL;
  size_t n = 0;
  s->nroles = 0;
  if (!doctor_proc_roles(v, from, to, &r, &n))
    for (size_t i = 0; i < n && s->nroles < TOP_MAX_ROLES; i++)
      s->roles[s->nroles++] = r[i];
  free(r);
}

/* The doctor's current top finding on v into s, and the roles of the window's processes. */
static void snap_finding(const struct runview *v, struct tui_snap *s) {
  struct store_finding *f = NULL;
  size_t n = 0;
  s->have_finding = 0;
  struct runview_window w;
  int rc = doctor_diagnose_live(v, 0, &f, &n, &w);
  keep_roles(v, w.from, w.to, s); /* w is set also when the diagnosis failed */
  if (rc) {
    s->have_finding = -1;
    gs_term_escape(gs_last_error(), s->utf8, s->title, sizeof s->title);
  }
  if (rc || !n) {
    free(f);
    return;
  }
  s->have_finding = 1;
  char buf[sizeof f->title];
  snprintf(s->rule, sizeof s->rule, "%s", gs_term_escape(f[0].rule, 0, buf, sizeof s->rule));
  gs_term_escape(f[0].title, s->utf8, s->title, sizeof s->title);
  /* the fix's first line is what fits */
  char fix[sizeof s->fix];
  size_t len = strcspn(f[0].fix, "\n");
  len = len < sizeof fix - 1 ? len : sizeof fix - 1;
  memcpy(fix, f[0].fix, len);
  fix[len] = 0;
  gs_term_escape(fix, s->utf8, s->fix, sizeof s->fix);
  s->speedup = f[0].speedup;
  s->share = f[0].share;
  free(f);
}

int tui_snap_load(struct store *st, const char *run_id, size_t hist_s, int utf8, int diagnose, struct tui_snap *s) {
  memset(s, 0, sizeof *s);
  s->cpu_total = s->step_s = s->data_share = s->h2d_share = s->compute_share = NAN;
  s->steps_per_s = s->samples_per_s = s->speedup = s->share = NAN;
  if (hist_s > TOP_HIST)
    hist_s = TOP_HIST;
  s->utf8 = utf8;
  struct runview v;
  int rc = runview_load(st, run_id, &v);
  if (rc) {
    runview_done(&v);
    return rc;
  }
  s->run = v.run;
  char buf[sizeof s->run.command];
  snprintf(s->run.name, sizeof s->run.name, "%s", gs_term_escape(v.run.name, utf8, buf, sizeof s->run.name));
  snprintf(s->run.command, sizeof s->run.command, "%s", gs_term_escape(v.run.command, utf8, buf, sizeof buf));
  s->running = !strcmp(v.run.status, "running");
  s->t_ns = v.t_newest_ns;
  double ap = runview_param_num(&v, "attached.pid");
  s->attached_pid = runview_param_bool(&v, "attached") == 1 && ap > 0 && ap < 1 << 30 ? (int)ap : 0;
  if (!(rc = load_gpus(&v, s->t_ns, hist_s, utf8, s))) {
    load_cores(&v, s->t_ns, s);
    rc = load_procs(&v, s->t_ns, utf8, s);
  }
  load_steps(&v, s->t_ns, s);
  if (!rc && diagnose)
    snap_finding(&v, s);
  runview_done(&v);
  return rc;
}

void tui_snap_done(struct tui_snap *s) {
  free(s->gpus);
  free(s->procs);
  s->gpus = NULL, s->procs = NULL;
  s->ngpus = 0, s->nprocs = 0;
}
