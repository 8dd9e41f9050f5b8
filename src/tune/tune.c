/* tune/tune: the strategies that choose which trials to run — the full grid, successive halving,
 * and the doctor's findings applied one at a time — plus skipping bigger batches after an OOM, the
 * budget and Ctrl-C, and the ranking (ties within noise, the memory margin, the winner). Running one
 * trial is trial.c; printing is report.c. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "core/core.h"
#include "doctor/doctor.h"
#include "store/store.h"
#include "tune/tune_int.h"

static void on_sigint(int sig) {
  tune_sigint_signo = sig;
  tune_sigint++;
}

static struct tune_trial *trial_new(struct tune_result *r, const int *config, int rung, long steps) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    struct tune_trial *t = realloc(r->trials, cap * sizeof *t);
    if (!t)
      return NULL;
    r->trials = t, r->cap = cap;
  }
  struct tune_trial *t = &r->trials[r->n++];
  memset(t, 0, sizeof *t);
  memcpy(t->config, config, sizeof t->config);
  t->rung = rung;
  t->target_steps = steps;
  t->exit_status = -1;
  t->rate = t->ci = t->step_s = t->data_share = t->gpu_util = t->peak_mem = t->mem_limit = NAN;
  t->energy_per_sample = t->estimate = t->est_target = NAN;
  t->samples_seen = t->window_s = t->quality = t->quality_ci = t->lr = NAN;
  t->lr_warmup = -1;
  t->margin_ok = -1;
  t->prev = -1;
  return t;
}

static int same_config(const struct tune_opts *o, const int *a, const int *b) {
  for (int i = 0; i < o->nparams; i++)
    if (a[i] != b[i])
      return 0;
  return 1;
}

static double num(const char *s) {
  char *end;
  double v = strtod(s, &end);
  return end != s && !*end ? v : NAN;
}

/* An OOM trial with the same other values and a smaller batch, or -1. */
static int oom_sibling(const struct tune_opts *o, const struct tune_result *r, const int *config) {
  int b = tune_batch_param(o);
  if (b < 0)
    return -1;
  double mine = num(o->params[b].values[config[b]]);
  for (size_t i = 0; i < r->n; i++) {
    const struct tune_trial *u = &r->trials[i];
    if (u->status != TUNE_OOM)
      continue;
    int same = 1;
    for (int p = 0; p < o->nparams; p++)
      if (p != b && u->config[p] != config[p])
        same = 0;
    if (same && num(o->params[b].values[u->config[b]]) <= mine)
      return (int)i;
  }
  return -1;
}

struct ctx {
  const struct tune_opts *o;
  struct tune_result *r;
  int64_t deadline;
  struct store *st; /* --resume: the store the finished trials are read from (NULL otherwise) */
};

static int stopped(struct ctx *c) {
  if (tune_sigint)
    c->r->interrupted = 1, c->r->signo = (int)tune_sigint_signo;
  else if (c->deadline && gs_mono_ns() >= c->deadline)
    c->r->budget_out = 1;
  return c->r->interrupted || c->r->budget_out;
}

static void progress(struct ctx *c, const struct tune_trial *t, size_t k) {
  if (!c->o->progress)
    return;
  char label[512], reason[sizeof t->reason], cleanup[sizeof t->cleanup];
  tune_config_label(c->o, t->config, label, sizeof label);
  snprintf(reason, sizeof reason, "%s", t->reason);
  snprintf(cleanup, sizeof cleanup, "%s", t->cleanup);
  tune_clean(label), tune_clean(reason), tune_clean(cleanup);
  fprintf(c->o->progress, "[tune] %02zu %s: %s", k + 1, label, tune_status_name(t->status));
  if (t->gpu[0] || t->cpus[0]) {
    char gpu[sizeof t->gpu];
    snprintf(gpu, sizeof gpu, "%s", t->gpu);
    tune_clean(gpu);
    fprintf(c->o->progress, " [%s%s%s%s%s]", gpu[0] ? "GPU " : "", gpu, gpu[0] && t->cpus[0] ? ", " : "",
            t->cpus[0] ? "cores " : "", t->cpus);
  }
  if (t->resumed)
    fprintf(c->o->progress, " (from the store: run %s)", t->run_id);
  if (t->status == TUNE_OK)
    fprintf(c->o->progress, " %.1f ± %.1f %s over %ld steps", t->rate, t->ci,
            c->o->metric == TUNE_STEPS_PER_S ? "steps/s" : "samples/s", t->steps_measured);
  else if (reason[0])
    fprintf(c->o->progress, " (%s)", reason);
  if (cleanup[0])
    fprintf(c->o->progress, "; %s", cleanup);
  fputc('\n', c->o->progress);
  fflush(c->o->progress);
}

/* --resume: trial k read from the store (1), or to run (0); a stored run of its configuration that is
 * not reused is said on the progress line, with why. */
static int resume(struct ctx *c, struct tune_trial *t, int k) {
  char why[400];
  if (tune_trial_resume(c->o, c->st, t, k, why, sizeof why))
    return 1;
  if (why[0] && c->o->progress) {
    char label[512];
    tune_config_label(c->o, t->config, label, sizeof label);
    tune_clean(label), tune_clean(why);
    fprintf(c->o->progress, "[tune] %02d %s: %s\n", k + 1, label, why);
  }
  return 0;
}

/* A new trial of config: skipped (a smaller batch ran out of memory), not run (stopped, or the
 * budget out), or read from the store (--resume), each said on the progress line; or pending, to run.
 * Returns its index (in *k) and 1 when it is to run, 0 when it is decided, -1 when out of memory. */
static int trial_prepare(struct ctx *c, const int *config, int rung, long steps, int *k) {
  struct tune_trial *t = trial_new(c->r, config, rung, steps);
  if (!t)
    return gs_fail(GS_ENOMEM, "out of memory"), -1;
  *k = (int)(c->r->n - 1);
  int sib = oom_sibling(c->o, c->r, config);
  if (sib >= 0) {
    int b = tune_batch_param(c->o);
    t->status = TUNE_SKIPPED;
    snprintf(t->reason, sizeof t->reason, "%s=%s is not smaller than %s, which ran out of memory (trial %02d)",
             c->o->params[b].name, c->o->params[b].values[config[b]],
             c->o->params[b].values[c->r->trials[sib].config[b]], sib + 1);
  } else if (stopped(c)) {
    t->status = TUNE_NOT_RUN;
    if (c->r->interrupted)
      snprintf(t->reason, sizeof t->reason, "the sweep was stopped by %s", tune_signal_name(c->r->signo));
    else
      snprintf(t->reason, sizeof t->reason, "the budget ran out");
  } else if (c->st && resume(c, t, *k)) {
    long used = t->steps_run, asked = c->o->warmup + t->target_steps;
    c->r->trial_steps += c->o->seconds > 0 || c->o->samples > 0 || used < asked ? used : asked;
    c->r->steps_run += t->steps_run;
  } else {
    return 1;
  }
  progress(c, t, (size_t)*k);
  return 0;
}

/* Counts trial k's steps once it ran and says it on the progress line; -1 when the store failed. */
static int trial_account(struct ctx *c, int k, int rc) {
  struct tune_trial *t = &c->r->trials[k];
  long used = t->steps_run, asked = c->o->warmup + t->target_steps;
  c->r->trial_steps += c->o->seconds > 0 || c->o->samples > 0 || used < asked ? used : asked;
  c->r->steps_run += t->steps_run;
  if (t->status == TUNE_INTERRUPTED)
    c->r->interrupted = 1;
  progress(c, t, (size_t)k);
  if (rc == GS_EIO)
    return gs_fail(rc, "%s", t->reason), -1;
  return 0;
}

/* Runs (or skips, or marks not run, or reads back) one configuration, alone; returns the trial's
 * index, or -1 on a store error (message set) or allocation failure. */
static int run_one(struct ctx *c, const int *config, int rung, long steps) {
  int k, todo = trial_prepare(c, config, rung, steps, &k);
  if (todo <= 0)
    return todo < 0 ? -1 : k;
  int rc = tune_trial_run(c->o, &c->r->trials[k], k, c->deadline);
  return trial_account(c, k, rc) < 0 ? -1 : k;
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* Ends the trials of the pool whose agents exited; returns -1 when the store failed. */
static int pool_reap(struct ctx *c, struct tune_proc *procs, int *busy, int nslots, int *running) {
  int rc = 0;
  for (int s = 0; s < nslots; s++) {
    if (!busy[s] || !tune_trial_poll(c->o, &procs[s], c->deadline))
      continue;
    busy[s] = 0, (*running)--;
    int k = procs[s].k;
    int frc = tune_trial_finish(c->o, &c->r->trials[k], &procs[s], *running > 0);
    if (trial_account(c, k, frc) < 0)
      rc = -1;
  }
  return rc;
}

/* Runs the n configurations of cfgs (TUNE_MAX_PARAMS ints each) side by side, one per GPU of --gpus
 * (alone without it), each trial's index into idx. Returns 0 or GS_EIO (a store error, message set). */
static int run_pool(struct ctx *c, const int *cfgs, size_t n, int rung, long steps, int *idx) {
  int nslots = c->o->ngpus > 1 ? c->o->ngpus : 1;
  if (nslots == 1) {
    for (size_t i = 0; i < n; i++)
      if ((idx[i] = run_one(c, cfgs + i * TUNE_MAX_PARAMS, rung, steps)) < 0)
        return GS_EIO;
    return 0;
  }
  struct tune_proc procs[TUNE_MAX_GPUS];
  int busy[TUNE_MAX_GPUS] = {0}, running = 0, failed = 0;
  size_t next = 0;
  while ((next < n && !failed) || running) {
    for (int s = 0; s < nslots && next < n && !failed; s++) {
      if (busy[s])
        continue;
      int k, todo = trial_prepare(c, cfgs + next * TUNE_MAX_PARAMS, rung, steps, &k);
      if (todo < 0) {
        failed = 1;
        break;
      }
      idx[next++] = k;
      if (todo && tune_trial_start(c->o, &c->r->trials[k], k, s, nslots, &procs[s]) == 0)
        busy[s] = 1, running++;
      else if (todo && trial_account(c, k, 0) < 0)
        failed = 1;
    }
    if (pool_reap(c, procs, busy, nslots, &running) < 0)
      failed = 1;
    if (running)
      sleep_ms(20);
  }
  return failed ? GS_EIO : 0;
}

/* ---- grid: every configuration, the batch varying fastest so bigger batches can be skipped ---- */

static int order(const struct tune_opts *o, int *ord) {
  int b = tune_batch_param(o), n = 0;
  for (int i = 0; i < o->nparams; i++)
    if (i != b)
      ord[n++] = i;
  if (b >= 0)
    ord[n++] = b;
  return n;
}

/* The configurations in plan order, malloc'd (count in *n). */
static int *all_configs(const struct tune_opts *o, size_t *n) {
  int ord[TUNE_MAX_PARAMS], np = order(o, ord);
  size_t total = 1;
  for (int i = 0; i < o->nparams; i++)
    total *= (size_t)o->params[i].nvalues;
  int *out = calloc(total, sizeof(int) * TUNE_MAX_PARAMS);
  if (!out)
    return NULL;
  int cur[TUNE_MAX_PARAMS] = {0};
  for (size_t k = 0; k < total; k++) {
    memcpy(out + k * TUNE_MAX_PARAMS, cur, sizeof cur);
    for (int j = np - 1; j >= 0; j--) { /* odometer: the last in ord moves fastest */
      if (++cur[ord[j]] < o->params[ord[j]].nvalues)
        break;
      cur[ord[j]] = 0;
    }
  }
  *n = total;
  return out;
}

static int grid(struct ctx *c) {
  size_t n;
  int *cfg = all_configs(c->o, &n);
  if (!cfg)
    return gs_fail(GS_ENOMEM, "out of memory");
  int *idx = malloc((n + 1) * sizeof *idx);
  int rc = idx ? run_pool(c, cfg, n, 0, c->o->steps, idx) : gs_fail(GS_ENOMEM, "out of memory");
  free(idx);
  free(cfg);
  return rc;
}

/* ---- successive halving ---- */

static int by_rate_desc(const void *a, const void *b, void *user) {
  const struct tune_result *r = user;
  double x = r->trials[*(const int *)a].rate, y = r->trials[*(const int *)b].rate;
  return (y > x) - (y < x);
}

static void sort_idx(int *idx, size_t n, const struct tune_result *r) {
  for (size_t i = 1; i < n; i++) /* insertion sort: a few dozen trials, stable */
    for (size_t j = i; j > 0 && by_rate_desc(&idx[j - 1], &idx[j], (void *)r) > 0; j--) {
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
}

static int halving(struct ctx *c) {
  size_t n;
  int *cfg = all_configs(c->o, &n);
  if (!cfg)
    return gs_fail(GS_ENOMEM, "out of memory");
  int rungs = 1;
  for (size_t m = n; m > 2; m = (m + 1) / 2)
    rungs++;
  int *live = malloc(n * sizeof *live), *idx = malloc(n * sizeof *idx), *ran = malloc(n * sizeof *ran);
  int *rung_cfg = malloc(n * sizeof(int) * TUNE_MAX_PARAMS);
  int rc = 0;
  if (!live || !idx || !ran || !rung_cfg) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto fail;
  }
  size_t nlive = n;
  for (size_t i = 0; i < n; i++)
    live[i] = (int)i;
  for (int rung = 0; rung < rungs && nlive && !rc; rung++) {
    long steps = c->o->steps >> (rungs - 1 - rung);
    if (steps < 4) /* two blocks of two steps: the least that has a spread of blocks */
      steps = c->o->steps < 4 ? c->o->steps : 4;
    size_t nok = 0;
    for (size_t i = 0; i < nlive; i++) /* this rung's configurations, in a row for the pool */
      memcpy(rung_cfg + i * TUNE_MAX_PARAMS, cfg + (size_t)live[i] * TUNE_MAX_PARAMS, sizeof(int) * TUNE_MAX_PARAMS);
    if ((rc = run_pool(c, rung_cfg, nlive, rung, steps, ran)))
      break;
    for (size_t i = 0; i < nlive; i++)
      if (c->r->trials[ran[i]].status == TUNE_OK)
        idx[nok++] = ran[i];
    if (stopped(c))
      break;
    sort_idx(idx, nok, c->r);
    size_t keep = (nlive + 1) / 2;
    if (keep > nok)
      keep = nok;
    for (size_t i = 0; i < keep; i++)
      for (size_t j = 0; j < n; j++)
        if (same_config(c->o, cfg + j * TUNE_MAX_PARAMS, c->r->trials[idx[i]].config))
          live[i] = (int)j;
    nlive = keep;
  }
fail:
  free(live), free(idx), free(ran), free(rung_cfg), free(cfg);
  return rc;
}

/* ---- doctor: apply the top finding's fix, measure, repeat ---- */

static int param_like(const struct tune_opts *o, const char *const *names) {
  for (int i = 0; i < o->nparams; i++)
    for (int k = 0; names[k]; k++)
      if (strstr(o->params[i].name, names[k]))
        return i;
  return -1;
}

static double evidence_num(const char *json, const char *key) {
  char pat[80];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(json, pat);
  return p ? strtod(p + strlen(pat), NULL) : NAN;
}

/* The number under key inside the evidence's object obj ("speedup_by_workers":{"4":1.8}), NAN when
 * either is absent. The object holds numbers only, so its end is the first '}'. */
static double evidence_member(const char *json, const char *obj, const char *key) {
  char pat[80];
  snprintf(pat, sizeof pat, "\"%s\":{", obj);
  const char *p = strstr(json, pat), *end = p ? strchr(p, '}') : NULL;
  if (!p || !end)
    return NAN;
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *q = strstr(p, pat);
  return q && q < end ? strtod(q + strlen(pat), NULL) : NAN;
}

/* The listed value of numeric parameter p to move to from cur toward want (NAN: the next bigger):
 * want itself when listed, else the smallest value above cur that reaches want, else the largest
 * above cur; -1 when none is. */
static int bigger(const struct tune_opts *o, int p, int cur, double want) {
  double now = num(o->params[p].values[cur]);
  int best = -1, largest = -1;
  for (int v = 0; v < o->params[p].nvalues; v++) {
    double x = num(o->params[p].values[v]);
    if (!(x > now))
      continue;
    if (largest < 0 || x > num(o->params[p].values[largest]))
      largest = v;
    double goal = isfinite(want) ? want : now;
    if ((isfinite(want) ? x >= goal : 1) && (best < 0 || x < num(o->params[p].values[best])))
      best = v;
  }
  return best >= 0 ? best : largest;
}

static int value_in(const struct tune_opts *o, int p, const char *const *vals) {
  for (int k = 0; vals[k]; k++)
    for (int v = 0; v < o->params[p].nvalues; v++)
      if (!strcmp(o->params[p].values[v], vals[k]))
        return v;
  return -1;
}

static int loader_rule(const char *rule) {
  return !strcmp(rule, "loader_workers") || !strcmp(rule, "input_latency") || !strcmp(rule, "input_bound") ||
         !strcmp(rule, "io_bound");
}

int tune_doctor_move(const struct tune_opts *o, const struct store_finding *f, size_t nf, size_t k, const int *cur,
                     int *next, double *estimate, double *target) {
  static const char *const workers[] = {"worker", NULL}, *const batch_n[] = {"batch", NULL},
                           *const prec[] = {"precision", "dtype", "amp", NULL}, *const pin[] = {"pin", NULL};
  static const char *const low[] = {"bf16", "fp16", "amp", "mixed", "16", "true", NULL};
  static const char *const on[] = {"1", "true", "True", "yes", "on", NULL};
  const struct store_finding *x = &f[k];
  memcpy(next, cur, sizeof(int) * TUNE_MAX_PARAMS);
  *estimate = x->speedup, *target = NAN;
  int p = -1, v = -1;
  if (loader_rule(x->rule)) {
    /* The loader's change is a worker count: the finding's own recommended_workers, else that of
     * the diagnosis' loader_workers or input_latency (input_bound and io_bound say the loader is
     * short, those two how many it needs), else the next larger listed value. */
    double want = evidence_num(x->evidence, "recommended_workers");
    for (size_t i = 0; i < nf && !isfinite(want); i++)
      if (!strcmp(f[i].rule, "loader_workers") || !strcmp(f[i].rule, "input_latency"))
        want = evidence_num(f[i].evidence, "recommended_workers");
    if ((p = param_like(o, workers)) >= 0 && (v = bigger(o, p, cur[p], want)) >= 0) {
      *target = want;
      /* The finding's estimate for the count applied, when it lists one per count. */
      double e = evidence_member(x->evidence, "speedup_by_workers", o->params[p].values[v]);
      if (isfinite(e))
        *estimate = e;
    }
  } else if (!strcmp(x->rule, "batch_too_small")) {
    if ((p = tune_batch_param(o)) >= 0 || (p = param_like(o, batch_n)) >= 0) {
      *target = evidence_num(x->evidence, "recommended_batch");
      v = bigger(o, p, cur[p], *target);
    }
  } else if (!strcmp(x->rule, "mixed_precision")) {
    if ((p = param_like(o, prec)) >= 0)
      v = value_in(o, p, low);
  } else if (!strcmp(x->rule, "pageable_copies")) {
    if ((p = param_like(o, pin)) >= 0)
      v = value_in(o, p, on);
  }
  if (p < 0 || v < 0 || v == cur[p])
    return 0;
  next[p] = v;
  return 1;
}

static int tried(const struct tune_opts *o, const struct tune_result *r, const int *config) {
  for (size_t i = 0; i < r->n; i++)
    if (same_config(o, r->trials[i].config, config))
      return 1;
  return 0;
}

static int doctor(struct ctx *c) {
  int base[TUNE_MAX_PARAMS] = {0}, next[TUNE_MAX_PARAMS];
  int cur = run_one(c, base, 0, c->o->steps);
  if (cur < 0)
    return GS_EIO;
  if (c->r->trials[cur].status != TUNE_OK) {
    snprintf(c->r->stop_reason, sizeof c->r->stop_reason, "the first configuration did not run (%s)",
             tune_status_name(c->r->trials[cur].status));
    return 0;
  }
  for (;;) {
    if (stopped(c)) {
      if (c->r->interrupted)
        snprintf(c->r->stop_reason, sizeof c->r->stop_reason, "stopped by %s", tune_signal_name(c->r->signo));
      else
        snprintf(c->r->stop_reason, sizeof c->r->stop_reason, "the budget ran out");
      return 0;
    }
    struct store *st = store_open(c->o->store_url);
    if (!st)
      return GS_ESTORE;
    struct store_finding *f = NULL;
    size_t nf = 0;
    int rc = doctor_diagnose(st, c->r->trials[cur].run_id, &f, &nf);
    st->close(st);
    if (rc) {
      free(f);
      snprintf(c->r->stop_reason, sizeof c->r->stop_reason, "the diagnosis failed: %.100s", gs_last_error());
      return 0;
    }
    const struct store_finding *pick = NULL;
    double est = NAN, want = NAN;
    for (size_t i = 0; i < nf && !pick; i++) /* ranked: the first whose change is listed and untried */
      if (f[i].speedup >= 1.05 && tune_doctor_move(c->o, f, nf, i, c->r->trials[cur].config, next, &est, &want) &&
          !tried(c->o, c->r, next))
        pick = &f[i];
    if (!pick) {
      snprintf(c->r->stop_reason, sizeof c->r->stop_reason,
               "no finding that promises >= 1.05x names an untried listed value (top: %s %.2fx)",
               nf ? f[0].rule : "none", nf ? f[0].speedup : 1.0);
      free(f);
      return 0;
    }
    char rule[32];
    snprintf(rule, sizeof rule, "%s", pick->rule);
    free(f);
    int k = run_one(c, next, 0, c->o->steps);
    if (k < 0)
      return GS_EIO;
    struct tune_trial *t = &c->r->trials[k], *p = &c->r->trials[cur];
    t->estimate = est;
    t->est_target = want;
    snprintf(t->est_rule, sizeof t->est_rule, "%s", rule);
    t->prev = cur;
    if (c->o->progress) {
      char label[512];
      tune_config_label(c->o, t->config, label, sizeof label);
      tune_clean(label);
      fprintf(c->o->progress, "[tune] doctor: %s estimated %.2fx for %s from trial %02d; measured ", rule, est, label,
              cur + 1);
      if (t->status == TUNE_OK)
        fprintf(c->o->progress, "%.2fx (%.1f -> %.1f)%s\n", t->rate / p->rate, p->rate, t->rate,
                gs_tie(t->rate, t->ci, p->rate, p->ci) ? ", within noise" : "");
      else
        fprintf(c->o->progress, "nothing (%s)\n", tune_status_name(t->status));
    }
    if (t->status == TUNE_OK && t->rate > p->rate) /* measured faster: go on from there */
      cur = k;
  }
}

int tune_run(const struct tune_opts *o, struct tune_result *r) {
  memset(r, 0, sizeof *r);
  r->best = r->winner = r->recommended = -1;
  struct store *st = store_open(o->store_url); /* fail early, before any trial */
  if (!st)
    return GS_ESTORE; /* the message says why */
  st->close(st);
  struct sigaction sa = {.sa_handler = on_sigint}, old[3];
  static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
  sigemptyset(&sa.sa_mask);
  tune_sigint = tune_sigint_signo = 0;
  for (int i = 0; i < 3; i++)
    sigaction(sigs[i], &sa, &old[i]);
  /* Whatever a trial leaves running, however it detached (double fork, setsid), comes back to tune
   * when the trial's agent exits, to be killed (trial.c). */
  int subreaper = 0;
  prctl(PR_GET_CHILD_SUBREAPER, &subreaper);
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  struct ctx c = {.o = o, .r = r, .deadline = o->budget_ns > 0 ? gs_mono_ns() + o->budget_ns : 0};
  if (o->resume && !(c.st = store_open(o->store_url)))
    return GS_ESTORE;
  int rc = o->strategy == TUNE_HALVING ? halving(&c) : o->strategy == TUNE_DOCTOR ? doctor(&c) : grid(&c);
  if (c.st)
    c.st->close(c.st);
  prctl(PR_SET_CHILD_SUBREAPER, subreaper);
  for (int i = 0; i < 3; i++)
    sigaction(sigs[i], &old[i], NULL);
  if (tune_sigint)
    r->interrupted = 1, r->signo = (int)tune_sigint_signo;
  tune_rank(o, r);
  return rc;
}

/* The point trial t is read at: the samples (or seconds) it had seen by its window's end. */
static double trial_point(const struct tune_opts *o, const struct tune_trial *t) {
  return o->quality_at == TUNE_AT_TIME ? t->window_s : t->samples_seen;
}

/* Trial t's quality: the mean of its points in the tail (lo, hi] of the common point, with the 95 %
 * half-width of that mean over blocks of consecutive points (gs_rate_ci with unit weights). */
static void tail_quality(const struct tune_opts *o, struct tune_trial *t, double lo, double hi) {
  double *v = malloc((t->qn + 1) * sizeof *v), *one = malloc((t->qn + 1) * sizeof *one);
  size_t n = 0;
  for (size_t i = 0; v && one && i < t->qn; i++) {
    double x = o->quality_at == TUNE_AT_TIME ? t->q_time[i] : t->q_samples[i];
    if (x > lo && x <= hi && isfinite(t->q_value[i]))
      v[n] = t->q_value[i], one[n++] = 1;
  }
  t->quality_points = (int)n;
  if (n == 1)
    t->quality = v[0];
  else if (n >= 2 && gs_rate_ci(v, one, n, &t->quality, &t->quality_ci, &t->quality_dof))
    t->quality = t->quality_ci = NAN;
  free(v), free(one);
}

/* Whether trial i is read for quality: measured, in the last rung (halving), or the baseline. */
static int judged(const struct tune_result *r, size_t i, int last_rung) {
  const struct tune_trial *t = &r->trials[i];
  return t->status == TUNE_OK && (t->rung == last_rung || i == 0);
}

static enum tune_verdict verdict_of(const struct tune_opts *o, const struct tune_trial *t,
                                    const struct tune_trial *base) {
  if (!isfinite(t->quality))
    return TUNE_Q_UNKNOWN;
  double worse = o->quality_max ? base->quality - t->quality : t->quality - base->quality;
  double noise = isfinite(t->quality_ci) && isfinite(base->quality_ci) ? hypot(t->quality_ci, base->quality_ci) : 0;
  double tol = !isfinite(o->quality_tol) ? 0
               : o->quality_tol_rel      ? o->quality_tol * fabs(base->quality)
                                         : o->quality_tol;
  double margin = noise > tol ? noise : tol;
  if (margin < 1e-9 * fabs(base->quality)) /* rounding, not a difference */
    margin = 1e-9 * fabs(base->quality);
  return worse > margin ? TUNE_Q_WORSE : -worse > margin ? TUNE_Q_BETTER : TUNE_Q_SAME;
}

static int last_rung_of(const struct tune_result *r) {
  int last = 0;
  for (size_t i = 0; i < r->n; i++)
    if (r->trials[i].status == TUNE_OK && r->trials[i].rung > last)
      last = r->trials[i].rung;
  return last;
}

void tune_judge_quality(const struct tune_opts *o, struct tune_result *r) {
  r->quality_point = NAN;
  r->quality_note[0] = 0;
  if (!o->quality[0])
    return;
  int last = last_rung_of(r);
  for (size_t i = 0; i < r->n; i++) {
    struct tune_trial *t = &r->trials[i];
    t->quality = t->quality_ci = NAN, t->quality_points = 0, t->quality_dof = 0;
    t->verdict = judged(r, i, last) ? TUNE_Q_UNKNOWN : TUNE_Q_NONE;
    double x = trial_point(o, t);
    if (judged(r, i, last) && isfinite(x) && !(x >= r->quality_point))
      r->quality_point = x;
  }
  if (!isfinite(r->quality_point)) {
    snprintf(r->quality_note, sizeof r->quality_note, "no measured trial counted its %s: quality not judged",
             o->quality_at == TUNE_AT_TIME ? "time" : "samples (samples= on its steps)");
    return;
  }
  for (size_t i = 0; i < r->n; i++)
    if (judged(r, i, last))
      tail_quality(o, &r->trials[i], r->quality_point * (1 - TUNE_QUALITY_TAIL), r->quality_point);
  struct tune_trial *base = &r->trials[0];
  if (!r->n || base->status != TUNE_OK || !isfinite(base->quality)) {
    snprintf(r->quality_note, sizeof r->quality_note,
             "the baseline (01) has no %.100s at the common point: quality not judged", o->quality);
    return;
  }
  base->verdict = TUNE_Q_BASELINE;
  for (size_t i = 1; i < r->n; i++)
    if (judged(r, i, last))
      r->trials[i].verdict = verdict_of(o, &r->trials[i], base);
}

/* Whether a measured trial may be the best or tie with it: within the memory margin, and with
 * --quality (when it was judged) not worse than the baseline nor of unknown quality. */
static int may_win(const struct tune_result *r, const struct tune_trial *t, int last_rung) {
  if (t->status != TUNE_OK || t->rung != last_rung || t->margin_ok == 0)
    return 0;
  return r->quality_note[0] || (t->verdict != TUNE_Q_WORSE && t->verdict != TUNE_Q_UNKNOWN);
}

void tune_rank(const struct tune_opts *o, struct tune_result *r) {
  tune_judge_quality(o, r);
  int last_rung = last_rung_of(r);
  r->best = r->winner = r->recommended = -1;
  for (size_t i = 0; i < r->n; i++)
    r->trials[i].tied = 0;
  /* The best is the trial surely fastest: the highest lower 95 % bound (rate - ci), the rate breaking
   * a tie. By its rate alone, one trial of wide spread (a burst of prefetched batches on a loaded
   * machine: 2068 ± 2056 samples/s) would be best and tie every other trial with it, the baseline's
   * 4x slower one too, and the first of them in plan order would be recommended. */
  for (size_t i = 0; i < r->n; i++) {
    const struct tune_trial *t = &r->trials[i];
    if (!may_win(r, t, last_rung) || !isfinite(t->rate))
      continue;
    const struct tune_trial *b = r->best >= 0 ? &r->trials[r->best] : NULL;
    double lo = t->rate - (isfinite(t->ci) ? t->ci : 0), blo = b ? b->rate - (isfinite(b->ci) ? b->ci : 0) : 0;
    if (!b || lo > blo || (lo == blo && t->rate > b->rate))
      r->best = (int)i;
  }
  if (r->best < 0)
    return;
  const struct tune_trial *b = &r->trials[r->best];
  int ties = 0;
  for (size_t i = 0; i < r->n; i++) {
    struct tune_trial *t = &r->trials[i];
    if (may_win(r, t, last_rung) && gs_tie(t->rate, t->ci, b->rate, b->ci)) {
      t->tied = 1;
      if ((int)i != r->best)
        ties++;
      if (r->recommended < 0)
        r->recommended = (int)i; /* among the tied, the first in plan order */
    }
  }
  r->trials[r->best].tied = 1;
  r->winner = ties ? -1 : r->best;
  if (r->recommended < 0)
    r->recommended = r->best;
}

void tune_result_done(struct tune_result *r) {
  for (size_t i = 0; i < r->n; i++)
    free(r->trials[i].q_samples), free(r->trials[i].q_time), free(r->trials[i].q_value);
  free(r->trials);
  memset(r, 0, sizeof *r);
}
