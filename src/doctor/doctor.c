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

/* How the findings a rule emits are read in a group of runs. */
enum rule_family {
  FAMILY_HOST,    /* one host's CPU, storage or memory and its job's processes: the node is named */
  FAMILY_LOOP,    /* the training loop as a whole */
  FAMILY_GPU,     /* what needs NVIDIA GPUs */
  FAMILY_VERDICT, /* said when no rule found anything (added by doctor_diagnose_view itself) */
};

/* Both halves of host_code_bound: with GPUs (idle between kernels) and CPU-only. */
static void rule_host_code(struct dr_run *d, struct dr_findings *fs) {
  dr_rule_host_code_gpu(d, fs);
  dr_rule_host_code_cpu(d, fs);
}

/* Every finding the doctor can emit, in the order the rules run: periodic_stall first, so
 * host_code_bound does not count the same idle time twice. rule is the function that emits the id;
 * NULL where the entry above's function emits it too (dr_rule_input says which of four ways the
 * input pipeline holds the step back) or for a verdict. Every rule states its change to the step
 * model (step_model.c); the estimates come from it at the end. */
static const struct rule_def {
  const char *id;
  enum rule_family family;
  void (*rule)(struct dr_run *, struct dr_findings *);
} RULES[] = {
    {"periodic_stall", FAMILY_LOOP, dr_rule_periodic_stall},
    {"input_bound", FAMILY_HOST, dr_rule_input},
    {"loader_workers", FAMILY_HOST, NULL},
    {"input_latency", FAMILY_HOST, NULL},
    {"io_bound", FAMILY_HOST, NULL},
    {"host_code_bound", FAMILY_HOST, rule_host_code},
    {"batch_too_small", FAMILY_GPU, dr_rule_batch},
    {"mixed_precision", FAMILY_GPU, dr_rule_mixed_precision},
    {"pageable_copies", FAMILY_GPU, dr_rule_pageable},
    {"throttled", FAMILY_GPU, dr_rule_throttled},
    {"straggler", FAMILY_GPU, dr_rule_straggler},
    {"underused_gpus", FAMILY_GPU, dr_rule_underused},
    {"gpu_xid", FAMILY_GPU, dr_rule_xid},
    {"gpu_ecc", FAMILY_GPU, dr_rule_ecc},
    {"gpu_health", FAMILY_GPU, dr_rule_sick},
    {"healthy", FAMILY_VERDICT, NULL},
    {"insufficient_data", FAMILY_VERDICT, NULL},
};
enum { NRULES = sizeof RULES / sizeof *RULES };

const char *doctor_rule_id(size_t i) {
  return i < NRULES ? RULES[i].id : NULL;
}

static int by_share(const void *a, const void *b) {
  const struct store_finding *x = a, *y = b;
  if (x->share != y->share)
    return x->share < y->share ? 1 : -1;
  if (x->speedup != y->speedup)
    return x->speedup < y->speedup ? 1 : -1;
  return strcmp(x->rule, y->rule);
}

/* What the verdict rests on, for healthy's title: the GPUs' busy time (or that their util was not
 * read, as on MIG instances), the data wait, the job's CPU. */
static void verdict_basis(const struct dr_run *d, char *what, size_t cap) {
  double util = d->used_util;
  char gpu[96];
  if (isfinite(util))
    dr_printf(gpu, sizeof gpu, "GPU busy %.0f%%", util);
  else if (d->ngpus)
    dr_printf(gpu, sizeof gpu, "%d GPU%s without util readings (MIG instances report none)", d->ngpus,
              d->ngpus == 1 ? "" : "s");
  else
    dr_printf(gpu, sizeof gpu, "no GPU");
  if (isfinite(d->data_share) && (isfinite(util) || d->ngpus))
    dr_printf(what, cap, "%s, data wait %.0f%% of the step", gpu, d->data_share * 100);
  else if (d->ngpus)
    dr_printf(what, cap, "%s; no step timings (the job did not use the gpuscope client)", gpu);
  else if (isfinite(d->data_share))
    dr_printf(what, cap, "no GPU; data wait %.0f%% of the step, %s", d->data_share * 100,
              isfinite(d->job_cores) ? dr_fmt((char[48]){0}, 48, d->job_cores, 2, "cores busy")
                                     : "the job's CPU not measured");
  else
    dr_printf(what, cap, "no GPU and no step timings: judged on the job's CPU (%s) and I/O",
              dr_fmt((char[48]){0}, 48, d->job_cores, 2, "cores busy"));
}

/* Judged on evidence: a GPU (with util or not), step timings, or the job's or the host's CPU. */
static int measured_enough(const struct dr_run *d) {
  return d->ngpus || d->nsteps >= DR_MIN_STEPS || isfinite(d->job_cores) || d->host_busy.n;
}

static void add_healthy(struct dr_run *d, struct dr_findings *fs) {
  struct store_finding *f = dr_add(fs, d, "healthy", 0, 1);
  if (!f)
    return;
  char what[240];
  verdict_basis(d, what, sizeof what);
  dr_printf(f->title, sizeof f->title, "Healthy: nothing worth fixing (%s)", what);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_num(&j, "gpu_util_pct", d->used_util);
  dr_json_int(&j, "gpus", d->ngpus);
  dr_json_int(&j, "gpus_with_util", d->nutil);
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
  if (d->not_judged[0])
    dr_json_str(&j, "not_judged", d->not_judged);
  dr_printf(f->fix, sizeof f->fix,
            "Nothing to change: no rule found time worth winning back (each needs at least %.0f%% of the run "
            "or a %.0f%% speed-up).%s%s To go faster from here, profile the model itself (torch.profiler) or "
            "scale out.",
            DR_MIN_SHARE * 100, (DR_MIN_SPEEDUP - 1) * 100, d->not_judged[0] ? " Not judged: " : "", d->not_judged);
}

/* Nothing to judge on: no GPU, no step timings, no CPU figures of the job or the host. Not healthy —
 * a verdict needs evidence — but its own finding, listing what was missing. */
static void add_insufficient(struct dr_run *d, struct dr_findings *fs) {
  struct store_finding *f = dr_add(fs, d, "insufficient_data", 0, 1);
  if (!f)
    return;
  dr_printf(f->title, sizeof f->title,
            "Not enough measured to judge: no GPU readings, no step timings and no CPU figures");
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_str(&j, "missing", "gpu, steps, job_cpu, host_cpu");
  dr_json_int(&j, "gpus", d->ngpus);
  dr_json_int(&j, "steps", (long long)d->nsteps);
  dr_json_num(&j, "job_cpu_cores", d->job_cores);
  dr_json_num(&j, "host_cpu_pct", d->host_busy.mean);
  dr_json_num(&j, "window_s", d->window_s);
  dr_printf(f->fix, sizeof f->fix,
            "gpuscope saw neither a GPU nor the job's steps nor its CPU, so it cannot say whether this run is "
            "fine. Check that the job ran long enough to be sampled (at least a few seconds), that the host "
            "collectors could read /proc (gpuscope doctor), and wrap the loader with gpuscope.watch(loader) "
            "to send step timings.");
}

/* The findings about one host (FAMILY_HOST): in a group, the node they were read on is named. */
static int host_side(const char *rule) {
  for (size_t i = 0; i < NRULES; i++)
    if (!strcmp(rule, RULES[i].id))
      return RULES[i].family == FAMILY_HOST;
  return 0;
}

int doctor_diagnose_view(const struct runview *v, int64_t from, int64_t to, struct store_finding **out, size_t *n) {
  struct dr_run d;
  struct dr_findings fs = {0};
  *out = NULL;
  *n = 0;
  int rc = dr_run_load(v, from, to, &d);
  if (rc)
    goto fail;
  for (size_t r = 0; r < NRULES && !fs.oom; r++)
    if (RULES[r].rule)
      RULES[r].rule(&d, &fs);
  if (!fs.oom)
    dr_evaluate_changes(&d, &fs);
  dr_health_overrules(&d, &fs);
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
    (measured_enough(&d) ? add_healthy : add_insufficient)(&d, &fs);
  if (fs.oom) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto fail;
  }
  qsort(fs.v, fs.n, sizeof *fs.v, by_share);
  *out = fs.v;
  *n = fs.n;
  fs.v = NULL;
fail:
  free(fs.v);
  free(fs.ch);
  dr_run_done(&d);
  return rc;
}

const char *doctor_not_judged(const struct runview *v, char *buf, size_t n) {
  struct dr_run d;
  struct dr_findings fs = {0};
  if (n)
    buf[0] = 0;
  if (!dr_run_load(v, INT64_MIN, INT64_MAX, &d)) {
    /* the rules that can say they could not judge, on a scratch list */
    rule_host_code(&d, &fs);
    dr_rule_batch(&d, &fs);
    dr_rule_mixed_precision(&d, &fs);
  }
  if (n)
    dr_printf(buf, n, "%s", d.not_judged);
  free(fs.v);
  free(fs.ch);
  dr_run_done(&d);
  return buf;
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
