/* doctor/doctor: runs every rule over one run's signals, keeps the findings worth acting on, ranks
 * them by the share of run time they cost, and — when none is left — says so with one "healthy"
 * finding rather than inventing work. The rules live in rules_loop.c (the host side of the training
 * loop) and rules_gpu.c (what needs NVIDIA GPUs); signals*.c derive what they read from one run view
 * (runview.h), over the run's usual window or one the caller names. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "doctor/doctor_int.h"

const char *const doctor_rule_ids[] = {
    "input_bound",     "loader_workers",  "input_latency",   "io_bound",  "host_code_bound",
    "batch_too_small", "mixed_precision", "pageable_copies", "throttled", "periodic_stall",
    "straggler",       "underused_gpus",  "healthy",         NULL};

/* In order: periodic_stall first, so host_code_bound does not count the same idle time twice. */
static void (*const RULES[])(struct dr_run *, struct dr_findings *) = {
    dr_rule_periodic_stall,  dr_rule_input,    dr_rule_host_code_gpu, dr_rule_host_code_cpu, dr_rule_batch,
    dr_rule_mixed_precision, dr_rule_pageable, dr_rule_throttled,     dr_rule_straggler,     dr_rule_underused,
};

static int by_share(const void *a, const void *b) {
  const struct store_finding *x = a, *y = b;
  if (x->share != y->share)
    return x->share < y->share ? 1 : -1;
  if (x->speedup != y->speedup)
    return x->speedup < y->speedup ? 1 : -1;
  return strcmp(x->rule, y->rule);
}

static void add_healthy(struct dr_run *d, struct dr_findings *fs) {
  struct store_finding *f = dr_add(fs, d, "healthy", 0, 1);
  if (!f)
    return;
  double util = d->used_util;
  int n = isfinite(util);
  char what[200];
  if (n && isfinite(d->data_share))
    dr_printf(what, sizeof what, "GPU busy %.0f%%, data wait %.0f%% of the step", util, d->data_share * 100);
  else if (n)
    dr_printf(what, sizeof what, "GPU busy %.0f%%; no step timings (the job did not use the gpuscope client)", util);
  else if (isfinite(d->data_share))
    dr_printf(what, sizeof what, "no GPU; data wait %.0f%% of the step, %s", d->data_share * 100,
              isfinite(d->job_cores) ? dr_fmt((char[48]){0}, 48, d->job_cores, 2, "cores busy")
                                     : "the job's CPU not measured");
  else
    dr_printf(what, sizeof what, "no GPU and no step timings: judged on CPU and I/O alone");
  dr_printf(f->title, sizeof f->title, "Healthy: nothing worth fixing (%s)", what);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_num(&j, "gpu_util_pct", util);
  dr_json_int(&j, "gpus", d->ngpus);
  dr_json_num(&j, "data_wait_share", d->data_share);
  dr_json_num(&j, "step_s", d->step_mean);
  /* Over the usual window of a view holding a sample of a long run's steps: the run's count, and how
   * many of them the step figures that are not sums come from. */
  int whole = d->nsteps == d->v->nsteps && runview_steps_sampled(d->v);
  dr_json_int(&j, "steps", (long long)(whole ? d->v->nsteps_total : d->nsteps));
  char sampled[96];
  if (whole)
    dr_json_str(&j, "steps_sampled", runview_steps_sampling(d->v, sampled, sizeof sampled));
  dr_json_num(&j, "job_cpu_cores", d->job_cores);
  dr_json_num(&j, "host_cpu_pct", d->host_busy.mean);
  dr_json_num(&j, "window_s", d->window_s);
  dr_printf(f->fix, sizeof f->fix,
            "Nothing to change: no rule found time worth winning back (each needs at least %.0f%% of the run "
            "or a %.0f%% speed-up). To go faster from here, profile the model itself (torch.profiler) or "
            "scale out.",
            DR_MIN_SHARE * 100, (DR_MIN_SPEEDUP - 1) * 100);
}

/* The findings about one host's CPU, storage or memory and its job's processes: in a group, the node
 * they were read on is named. */
static int host_side(const char *rule) {
  static const char *const rules[] = {"input_bound", "loader_workers", "input_latency", "io_bound", "host_code_bound"};
  for (size_t i = 0; i < sizeof rules / sizeof *rules; i++)
    if (!strcmp(rule, rules[i]))
      return 1;
  return 0;
}

int doctor_diagnose_view(const struct runview *v, int64_t from, int64_t to, struct store_finding **out, size_t *n) {
  struct dr_run d;
  struct dr_findings fs = {0};
  *out = NULL;
  *n = 0;
  int rc = dr_run_load(v, from, to, &d);
  if (rc)
    goto done;
  for (size_t r = 0; r < sizeof RULES / sizeof *RULES && !fs.oom; r++)
    RULES[r](&d, &fs);
  for (size_t i = 0; i < fs.n; i++)
    if (host_side(fs.v[i].rule))
      dr_name_node(&d, &fs.v[i]);
  /* Keep what is worth acting on. */
  size_t k = 0;
  for (size_t i = 0; i < fs.n; i++)
    if (fs.v[i].share >= DR_MIN_SHARE || fs.v[i].speedup >= DR_MIN_SPEEDUP)
      fs.v[k++] = fs.v[i];
  fs.n = k;
  if (!fs.n && !fs.oom)
    add_healthy(&d, &fs);
  if (fs.oom) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto done;
  }
  qsort(fs.v, fs.n, sizeof *fs.v, by_share);
  *out = fs.v;
  *n = fs.n;
  fs.v = NULL;
done:
  free(fs.v);
  dr_run_done(&d);
  return rc;
}

int doctor_diagnose(struct store *st, const char *run_id, struct store_finding **out, size_t *n) {
  struct runview v;
  *out = NULL;
  *n = 0;
  int rc = runview_load(st, run_id, &v);
  if (!rc)
    rc = doctor_diagnose_view(&v, INT64_MIN, INT64_MAX, out, n);
  runview_done(&v);
  return rc;
}

int doctor_proc_roles(const struct runview *v, int64_t from, int64_t to, struct doctor_proc_role **out, size_t *n) {
  struct dr_run d;
  *out = NULL;
  *n = 0;
  int rc = dr_run_load(v, from, to, &d);
  if (!rc && d.nprocs && !(*out = calloc(d.nprocs, sizeof **out)))
    rc = gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; !rc && i < d.nprocs; i++)
    (*out)[(*n)++] = (struct doctor_proc_role){.pid = d.procs[i].pid, .role = d.procs[i].role};
  dr_run_done(&d);
  return rc;
}

const char *doctor_role_name(enum doctor_role role) {
  switch (role) {
  case DOCTOR_ROLE_LAUNCHER:
    return "launcher";
  case DOCTOR_ROLE_TRAINER:
    return "trainer";
  case DOCTOR_ROLE_WORKER:
    return "loader worker";
  default:
    return "";
  }
}

int doctor_is_stall(double gap_s, double typical_s) {
  return gap_s - typical_s >= DR_STALL_MIN_S && gap_s >= DR_STALL_FACTOR * typical_s;
}

/* The part of the step (or window) a rule's fix shrinks; -1: not part of the model. */
enum { PART_STALL, PART_DATA, PART_HOST, PART_GPU, PART_STRAGGLER, NPARTS };
static int part_of(const char *rule) {
  static const struct {
    const char *rule;
    int part;
  } map[] = {{"periodic_stall", PART_STALL}, {"input_bound", PART_DATA},    {"loader_workers", PART_DATA},
             {"input_latency", PART_DATA},   {"io_bound", PART_DATA},       {"host_code_bound", PART_HOST},
             {"batch_too_small", PART_GPU},  {"mixed_precision", PART_GPU}, {"pageable_copies", PART_GPU},
             {"throttled", PART_GPU},        {"straggler", PART_STRAGGLER}};
  for (size_t i = 0; i < sizeof map / sizeof *map; i++)
    if (!strcmp(rule, map[i].rule))
      return map[i].part;
  return -1;
}

void doctor_combine(const struct store_finding *f, size_t n, struct doctor_combined *out) {
  double best[NPARTS] = {0};
  int count[NPARTS] = {0};
  memset(out, 0, sizeof *out);
  out->speedup = 1;
  for (size_t i = 0; i < n; i++) {
    int p = part_of(f[i].rule);
    if (p < 0 || !isfinite(f[i].share) || f[i].share <= 0)
      continue;
    out->findings++;
    out->overlapping |= count[p]++ > 0;
    best[p] = fmax(best[p], fmin(f[i].share, 1));
  }
  if (!out->findings)
    return;
  /* Stalls are a share of the window; the other parts, of the steps that remain. */
  double steps = 0;
  for (int p = PART_DATA; p < NPARTS; p++)
    steps += best[p];
  double left = (1 - best[PART_STALL]) * (1 - fmin(steps, DR_MAX_LOST));
  left = fmax(left, 1 - DR_MAX_LOST);
  out->share = 1 - left;
  out->speedup = 1 / left;
}

int doctor_run_view(const struct runview *v, struct store_finding **out, size_t *n) {
  struct store_finding *f = NULL;
  size_t nf = 0;
  int rc = doctor_diagnose_view(v, INT64_MIN, INT64_MAX, &f, &nf);
  if (!rc)
    rc = v->st->findings_write(v->st, v->run.id, f, nf);
  if (out)
    *out = f;
  else
    free(f);
  *n = nf;
  return rc;
}

int doctor_run(struct store *st, const char *run_id, struct store_finding **out, size_t *n) {
  struct runview v;
  struct store_finding *f = NULL;
  size_t nf = 0;
  int rc = runview_load(st, run_id, &v);
  if (!rc)
    rc = doctor_run_view(&v, &f, &nf);
  runview_done(&v);
  if (out)
    *out = f;
  else
    free(f);
  *n = nf;
  return rc;
}
