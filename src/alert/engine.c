/* alert/engine: the rules of a run evaluated on its recent window, and each one's state. After a
 * flush the writer's thread calls alert_engine_eval, which loads the run's view from that thread's
 * store handle and asks every rule what it sees now: true (the condition held for its whole window),
 * false (a reading says it does not), or unknown (no reading: missing is not zero, so a GPU that
 * reports no util is not idle, and an alert that is firing stays so). A key that becomes true fires
 * once; one that becomes false after firing is resolved once. The live findings come through
 * alert_live_findings, the one place that names the live diagnosis. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert/alert.h"
#include "alert/alert_int.h"
#include "core/core.h"
#include "doctor/doctor.h"
#include "runview/runview.h"
#include "store/store.h"

#define ALERT_MAX_ACTIVE 128
#define JOB_MAX_SEEN 1024 /* the job's own alerts a run sends at most; past it, an event says so */

struct alert_active {
  char key[160];
  char labels[256]; /* the key's, for its resolution at the run's end */
  int rule;         /* index in c.rules */
  int firing;       /* 1 fired and not resolved */
  int seen;         /* observed in this evaluation */
  int misses;       /* evaluations in a row that said false while firing */
  int hits;         /* evaluations in a row that said true while not firing */
};

/* A live finding is resolved only after this many evaluations in a row without it: the doctor's
 * figures over a sliding window wander around a gain threshold, and one alert per episode is the
 * promise. */
#define FINDING_RESOLVE_MISSES 3
/* ... and fires only once it is there in this many evaluations in a row: the first windows of a run
 * judge on little (the host's CPU not read twice yet: "input_bound, cause open"), and a verdict that
 * the next window takes back is not worth waking anyone for. */
#define FINDING_FIRE_HITS 2

struct alert_engine {
  struct alert_config c;
  struct alert_run_info info;
  char run_id[32], run_name[128], host[256];
  struct gs_sink *sink;
  struct alert_queue q;
  struct alert_active act[ALERT_MAX_ACTIVE];
  size_t nact;
  int64_t last_eval;
  long fired, resolved;
  int finished;
  int full_said;                 /* the event that the key table is full was recorded */
  double job_seen[JOB_MAX_SEEN]; /* the job alerts looked at (their numbers), for every job rule at once */
  size_t njob_seen;
  long job_raised; /* job alerts raised (marks "alert") */
  int job_unheard_said;
};

/* What one rule sees for one key in this evaluation. */
struct alert_obs {
  int cond; /* 1 true, 0 false, -1 unknown */
  char key[160], labels[256], title[256], text[1024], fix[4096];
  double value, cost_s, speedup;
};

/* The live diagnosis of the window the web app re-diagnoses (doctor.h's one live diagnosis, its
 * default window); nothing else here names the diagnosis. */
static int alert_live_findings(const struct runview *v, struct store_finding **f, size_t *n) {
  return doctor_diagnose_live(v, 0, f, n, NULL);
}

/* A slot for a new key when the table is full: a key neither firing nor on its way to fire (its state
 * is nothing a new observation would not rebuild), else NULL — then, once per run, an event says that
 * new keys go untracked, rather than leaving them silently unfired. */
static struct alert_active *active_reuse(struct alert_engine *e, const char *key) {
  for (size_t i = 0; i < e->nact; i++)
    if (!e->act[i].firing && !e->act[i].hits)
      return &e->act[i];
  if (!e->full_said) {
    char text[400];
    snprintf(text, sizeof text,
             "more than %d alert keys fire at once: '%.160s' and any other new one are not alerted on until one "
             "resolves",
             ALERT_MAX_ACTIVE, key);
    gs_sink_event(e->sink, gs_mono_ns(), "alert", "keys_full", ALERT_MAX_ACTIVE, "", text);
    e->full_said = 1;
  }
  return NULL;
}

static struct alert_active *active_find(struct alert_engine *e, int rule, const char *key, int create) {
  for (size_t i = 0; i < e->nact; i++)
    if (e->act[i].rule == rule && !strcmp(e->act[i].key, key))
      return &e->act[i];
  if (!create)
    return NULL;
  struct alert_active *a = e->nact < ALERT_MAX_ACTIVE ? &e->act[e->nact++] : active_reuse(e, key);
  if (!a)
    return NULL;
  memset(a, 0, sizeof *a);
  a->rule = rule;
  snprintf(a->key, sizeof a->key, "%s", key);
  return a;
}

static const char *const KIND_NAMES[] = {"gpu_idle",  "finding", "hang", "exit",      "throttle", "gpu_mem",
                                         "straggler", "xid",     "ecc",  "row_remap", "nvlink",   "job"};

/* Queues one change of a key's state and records it as an event of the run. */
static void alert_emit(struct alert_engine *e, int rule, const struct alert_obs *o, const char *state) {
  struct alert_msg *m = calloc(1, sizeof *m);
  if (!m)
    return;
  const struct alert_rule *r = &e->c.rules[rule];
  int64_t now = gs_mono_ns();
  snprintf(m->rule, sizeof m->rule, "%s", KIND_NAMES[r->kind]);
  snprintf(m->key, sizeof m->key, "%s", o->key);
  snprintf(m->state, sizeof m->state, "%s", state);
  snprintf(m->labels, sizeof m->labels, "%s", o->labels);
  snprintf(m->spec, sizeof m->spec, "%s", r->spec);
  snprintf(m->title, sizeof m->title, "%s", o->title);
  snprintf(m->text, sizeof m->text, "%s", o->text);
  snprintf(m->fix, sizeof m->fix, "%s", o->fix);
  m->value = o->value, m->cost_s = o->cost_s, m->speedup = o->speedup;
  m->t_s = (double)(now - e->info.mono_start_ns) / GS_NS_PER_S;
  m->wall_ns = gs_wall_ns();
  snprintf(m->run_id, sizeof m->run_id, "%s", e->run_id);
  snprintf(m->run_name, sizeof m->run_name, "%s", e->run_name);
  snprintf(m->host, sizeof m->host, "%s", e->host);
  char text[512];
  snprintf(text, sizeof text, "%s: %.200s — %.280s", state, o->title, o->text);
  gs_sink_event(e->sink, now, "alert", m->rule, o->value, o->labels, text);
  if (!strcmp(state, "firing"))
    e->fired++;
  else
    e->resolved++;
  alert_queue_push(&e->q, m);
  free(m);
}

/* One observation of rule for o->key: fires on the first true (a finding: on the FINDING_FIRE_HITS-th
 * in a row), resolves on a false after that (a finding, a straggler: the FINDING_RESOLVE_MISSES-th). */
static void alert_observe(struct alert_engine *e, int rule, const struct alert_obs *o) {
  struct alert_active *a = active_find(e, rule, o->key, o->cond == 1);
  if (!a)
    return;
  a->seen = 1;
  if (o->labels[0])
    snprintf(a->labels, sizeof a->labels, "%s", o->labels);
  enum alert_kind k = e->c.rules[rule].kind;
  int need = k == ALERT_FINDING || k == ALERT_STRAGGLER ? FINDING_RESOLVE_MISSES : 1;
  int hits = k == ALERT_FINDING ? FINDING_FIRE_HITS : 1;
  if (o->cond == 1)
    a->misses = 0;
  if (o->cond != 1)
    a->hits = 0;
  if (o->cond == 1 && !a->firing && ++a->hits >= hits) {
    a->hits = 0;
    a->firing = 1;
    alert_emit(e, rule, o, "firing");
  } else if (o->cond == 0 && a->firing && (++a->misses >= need || e->finished)) {
    a->firing = 0;
    a->misses = 0;
    alert_emit(e, rule, o, "resolved");
  }
}

static struct alert_obs *obs_new(const char *key, const char *labels) {
  struct alert_obs *o = calloc(1, sizeof *o);
  if (o) {
    o->cond = -1;
    o->value = o->cost_s = o->speedup = NAN;
    snprintf(o->key, sizeof o->key, "%s", key);
    snprintf(o->labels, sizeof o->labels, "%s", labels);
  }
  return o;
}

/* How recent the newest reading must be, and how close to the window's start the oldest, for a
 * window to count as covered: three ticks, at least 2 s. */
static int64_t slack_ns(const struct alert_engine *e) {
  int64_t s = 3 * e->info.interval_ns;
  return s < 2 * GS_NS_PER_S ? 2 * GS_NS_PER_S : s;
}

static int covered(const struct alert_engine *e, const struct runview_stats *st, int64_t from, int64_t end) {
  return st->n > 0 && st->t_last >= end - slack_ns(e) && st->t_first <= from + slack_ns(e);
}

static const char *secs(int64_t ns, char *buf, size_t n) {
  snprintf(buf, n, "%.0f s", (double)ns / GS_NS_PER_S);
  return buf;
}

static void eval_idle(const struct alert_engine *e, const struct alert_rule *r, const struct runview_stats *st, int cov,
                      int g, int64_t win, struct alert_obs *o) {
  char d[32];
  (void)e;
  if (st->n && st->max >= r->threshold)
    o->cond = 0; /* a reading at or above the threshold: not idle for the whole window */
  else if (cov)
    o->cond = 1;
  o->value = st->n ? st->max : NAN;
  snprintf(o->title, sizeof o->title, "GPU %d idle: util below %g %% for %s", g, r->threshold, secs(win, d, sizeof d));
  if (st->n)
    snprintf(o->text, sizeof o->text, "GPU %d's util was %.0f %% on average and at most %.0f %% over the last %s", g,
             st->mean, st->max, d);
}

static void eval_mem(const struct alert_engine *e, const struct alert_rule *r, const struct runview *v,
                     const char *labels, const struct runview_stats *used, int cov, int g, int64_t win,
                     struct alert_obs *o) {
  struct runview_stats tot;
  char d[32], ub[32], tb[32];
  (void)e;
  if (runview_stats(v, "nvml", "gpu.mem_total_bytes", labels, INT64_MIN, INT64_MAX, &tot) || !tot.n ||
      !(tot.last > 0) || !used->n)
    return;
  double lo = used->min / tot.last * 100, hi = used->max / tot.last * 100;
  o->cond = cov && lo >= r->threshold ? 1 : hi < r->threshold ? 0 : -1;
  o->value = hi;
  snprintf(o->title, sizeof o->title, "GPU %d memory nearly full: %g %% or more used for %s", g, r->threshold,
           secs(win, d, sizeof d));
  snprintf(o->text, sizeof o->text, "GPU %d holds %s of %s (%.1f %%): an allocation may fail (CUDA out of memory)", g,
           gs_fmt_bytes(used->max, ub, sizeof ub), gs_fmt_bytes(tot.last, tb, sizeof tb), hi);
}

static void eval_throttle(const struct alert_engine *e, const struct alert_rule *r, const struct runview *v, int64_t id,
                          int64_t from, int64_t end, int g, int64_t win, struct alert_obs *o) {
  int64_t *t = NULL;
  double *x = NULL;
  size_t n = 0, cut = 0;
  char d[32];
  if (runview_samples(v, id, from, end, &t, &x, &n) || !n)
    return;
  unsigned long long mask = gs_clock_reasons_mask(GS_REASON_THROTTLE);
  for (size_t i = 0; i < n; i++)
    cut += ((unsigned long long)x[i] & mask) != 0;
  struct runview_stats st = {.n = n, .t_first = t[0], .t_last = t[n - 1]};
  double share = 100.0 * (double)cut / (double)n;
  o->cond = share > r->threshold ? (covered(e, &st, from, end) ? 1 : -1) : 0;
  o->value = share;
  snprintf(o->title, sizeof o->title, "GPU %d throttled: clocks cut for heat or power over %g %% of %s", g,
           r->threshold, secs(win, d, sizeof d));
  snprintf(o->text, sizeof o->text, "GPU %d's clocks were cut for heat or power %.0f %% of the last %s", g, share, d);
  free(t);
  free(x);
}

/* gpu_idle, gpu_mem, throttle: one key per GPU, over [end - for, end]. */
static void eval_gpu_rule(struct alert_engine *e, int rule, const struct runview *v, int64_t end) {
  const struct alert_rule *r = &e->c.rules[rule];
  int64_t win = r->for_ns > slack_ns(e) ? r->for_ns : slack_ns(e), from = end - win;
  const char *name = r->kind == ALERT_GPU_IDLE  ? "gpu.util_pct"
                     : r->kind == ALERT_GPU_MEM ? "gpu.mem_used_bytes"
                                                : "gpu.throttle_reasons";
  for (size_t i = 0; i < v->nseries; i++) {
    const struct store_series *s = &v->series[i];
    int g = runview_gpu_label(s->labels);
    if (g < 0 || strcmp(s->source, "nvml") || strcmp(s->name, name))
      continue;
    char key[160];
    snprintf(key, sizeof key, "%s %.40s", KIND_NAMES[r->kind], s->labels);
    struct alert_obs *o = obs_new(key, s->labels);
    if (!o)
      return;
    struct runview_stats st;
    if (from >= 0 && !runview_stats(v, "nvml", name, s->labels, from, end, &st)) {
      if (r->kind == ALERT_GPU_IDLE)
        eval_idle(e, r, &st, covered(e, &st, from, end), g, win, o);
      else if (r->kind == ALERT_GPU_MEM)
        eval_mem(e, r, v, s->labels, &st, covered(e, &st, from, end), g, win, o);
      else
        eval_throttle(e, r, v, s->id, from, end, g, win, o);
    }
    alert_observe(e, rule, o);
    free(o);
  }
}

/* hang: the job stepped before and has not for r->for_ns, whatever its GPUs do. */
static void eval_hang(struct alert_engine *e, int rule, const struct runview *v, int64_t end) {
  const struct alert_rule *r = &e->c.rules[rule];
  if (!v->nsteps_total)
    return; /* no client steps: nothing says the job hangs */
  struct alert_obs *o = obs_new("hang", "");
  if (!o)
    return;
  int64_t last = v->loop.t_last, quiet = end - last;
  char d[32], q[32];
  o->cond = quiet >= r->for_ns ? 1 : 0;
  o->value = (double)quiet / GS_NS_PER_S;
  struct runview_stats u;
  int have = !runview_stats(v, "nvml", "gpu.util_pct", NULL, last, end, &u) && u.n;
  snprintf(o->title, sizeof o->title, "the job made no step for %s", secs(r->for_ns, d, sizeof d));
  char gpus[96] = "no GPU reading";
  if (have)
    snprintf(gpus, sizeof gpus, "GPUs %s (util %.0f %% on average)", u.mean >= 50 ? "busy" : "idle", u.mean);
  snprintf(o->text, sizeof o->text,
           "no step for %s since step %zu at %.1f s of the run, while the %s: a deadlock (NCCL), a stuck loader or "
           "a hung I/O call",
           secs(quiet, q, sizeof q), v->nsteps_total, (double)last / GS_NS_PER_S, gpus);
  alert_observe(e, rule, o);
  free(o);
}

static int severity_rank(const char *s) {
  return !strcmp(s, "high") ? 3 : !strcmp(s, "medium") ? 2 : !strcmp(s, "low") ? 1 : 0;
}

/* finding, straggler: one key per rule of the doctor's live findings that reach the gain and severity. */
static void eval_findings(struct alert_engine *e, int rule, const struct store_finding *f, size_t n) {
  const struct alert_rule *r = &e->c.rules[rule];
  for (size_t i = 0; i < n; i++) {
    if (r->kind == ALERT_STRAGGLER && strcmp(f[i].rule, "straggler"))
      continue;
    char key[160];
    if (r->kind == ALERT_STRAGGLER)
      snprintf(key, sizeof key, "straggler"); /* the doctor names one straggler at a time */
    else
      snprintf(key, sizeof key, "finding %s", f[i].rule);
    struct alert_obs *o = obs_new(key, "");
    if (!o)
      return;
    int reach = isfinite(f[i].speedup) && f[i].speedup >= r->gain && severity_rank(f[i].severity) >= r->severity;
    o->cond = reach ? 1 : 0;
    o->value = o->speedup = f[i].speedup;
    o->cost_s = f[i].lost_s;
    snprintf(o->title, sizeof o->title, "%s", f[i].title);
    char lost[32];
    gs_fmt_duration(isfinite(f[i].lost_s) ? (int64_t)(f[i].lost_s * GS_NS_PER_S) : 0, lost, sizeof lost);
    snprintf(o->text, sizeof o->text, "%s (%s): %s lost (%.0f %% of the window), %.2fx faster if fixed", f[i].rule,
             f[i].severity, lost, f[i].share * 100, f[i].speedup);
    snprintf(o->fix, sizeof o->fix, "%s", f[i].fix);
    alert_observe(e, rule, o);
    free(o);
  }
}

/* A finding no longer in the live diagnosis is resolved. */
static void resolve_unseen(struct alert_engine *e, int rule) {
  for (size_t i = 0; i < e->nact; i++) {
    struct alert_active *a = &e->act[i];
    if (a->rule != rule || a->seen)
      continue;
    if (!a->firing) { /* seen before, not this time: its count of evaluations in a row starts again */
      a->hits = 0;
      continue;
    }
    struct alert_obs *o = obs_new(a->key, "");
    if (!o)
      return;
    o->cond = 0;
    snprintf(o->title, sizeof o->title, "%s", a->key);
    if (e->c.rules[rule].kind == ALERT_XID)
      snprintf(o->text, sizeof o->text, "no Xid in the last %.0f s", (double)e->c.rules[rule].for_ns / GS_NS_PER_S);
    else
      snprintf(o->text, sizeof o->text, "no longer among the live findings");
    alert_observe(e, rule, o);
    free(o);
  }
}

/* ---- GPU health: xid, ecc, row_remap, nvlink (one key per GPU) ---- */

/* xid: the GPUs with an Xid event in [end - for, end] fire (the last one's code, NVIDIA's meaning
 * and action); a GPU whose Xids are older than that resolves (resolve_unseen). */
static void eval_xid(struct alert_engine *e, int rule, const struct runview *v, int64_t end) {
  const struct alert_rule *r = &e->c.rules[rule];
  for (size_t i = v->nevents; i-- > 0;) {
    const struct store_event *ev = &v->events[i];
    int g = runview_gpu_label(ev->labels);
    if (strcmp(ev->kind, "xid") || g < 0 || ev->t < end - r->for_ns)
      continue;
    char key[160];
    snprintf(key, sizeof key, "xid %.40s", ev->labels);
    struct alert_active *a = active_find(e, rule, key, 0);
    if (a && a->seen)
      continue; /* a later Xid of this GPU spoke already */
    struct alert_obs *o = obs_new(key, ev->labels);
    if (!o)
      return;
    unsigned code = (unsigned)atoi(ev->name);
    const struct gs_xid *x = gs_xid_of(code);
    o->cond = 1;
    o->value = code;
    snprintf(o->title, sizeof o->title, "GPU %d reported Xid %u%s%s%s", g, code, x ? " (" : "", x ? x->meaning : "",
             x ? ")" : "");
    snprintf(o->text, sizeof o->text, "at %.1f s of the run: %s", (double)ev->t / GS_NS_PER_S, ev->text);
    snprintf(o->fix, sizeof o->fix, "%s", x ? x->action : "see NVIDIA's Xid catalogue");
    alert_observe(e, rule, o);
    free(o);
  }
}

/* The rise of a counter of one GPU over [from, end] (max - min), NAN without readings. */
static double counter_rise(const struct runview *v, const char *name, const char *labels, int64_t from, int64_t end) {
  struct runview_stats st;
  if (runview_stats(v, "nvml", name, labels, from, end, &st) || !st.n)
    return NAN;
  return st.max - st.min;
}

static void health_text(const struct alert_rule *r, const struct runview *v, const char *labels, int g, int64_t from,
                        int64_t end, struct alert_obs *o) {
  char d[32];
  secs(r->for_ns, d, sizeof d);
  if (r->kind == ALERT_ECC) {
    double dbe = counter_rise(v, "gpu.ecc_dbe_volatile", labels, from, end);
    double sbe = counter_rise(v, "gpu.ecc_sbe_volatile", labels, from, end);
    double per_min = sbe / ((double)(end - from) / (60.0 * GS_NS_PER_S));
    o->cond = isnan(dbe) && isnan(sbe) ? -1 : dbe > 0 || (r->rate > 0 && per_min > r->rate) ? 1 : 0;
    o->value = dbe > 0 ? dbe : sbe;
    snprintf(o->title, sizeof o->title, "GPU %d: ECC errors", g);
    snprintf(o->text, sizeof o->text, "GPU %d had %.0f uncorrected and %.0f corrected ECC errors in the last %s", g,
             dbe, sbe, d);
    snprintf(o->fix, sizeof o->fix, "drain the node and reset the GPU; RMA it if uncorrected errors come back");
  } else if (r->kind == ALERT_ROW_REMAP) {
    struct runview_stats p, f;
    int hp = !runview_stats(v, "nvml", "gpu.remap_pending", labels, from, end, &p) && p.n;
    int hf = !runview_stats(v, "nvml", "gpu.remap_failure", labels, from, end, &f) && f.n;
    o->cond = !hp && !hf ? -1 : (hp && p.last >= 1) || (hf && f.last >= 1) ? 1 : 0;
    o->value = hf && f.last >= 1 ? 2 : hp ? p.last : 0;
    snprintf(o->title, sizeof o->title, "GPU %d: row remap %s", g, hf && f.last >= 1 ? "failed" : "pending");
    snprintf(o->text, sizeof o->text, "GPU %d %s", g,
             hf && f.last >= 1 ? "could not remap a row of its memory: it needs service"
                               : "has a row remap that waits for a GPU reset");
    snprintf(o->fix, sizeof o->fix, "%s",
             hf && f.last >= 1 ? "drain the node; run field diagnostics, RMA the GPU"
                               : "drain the node and reset the GPU when idle");
  } else {
    static const char *const names[] = {"gpu.nvlink_replay_errors", "gpu.nvlink_recovery_errors",
                                        "gpu.nvlink_crc_flit_errors", "gpu.nvlink_crc_data_errors"};
    double sum = NAN;
    for (int k = 0; k < 4; k++) {
      double x = counter_rise(v, names[k], labels, from, end);
      if (!isnan(x))
        sum = (isnan(sum) ? 0 : sum) + x;
    }
    o->cond = isnan(sum) ? -1 : sum > 0;
    o->value = sum;
    snprintf(o->title, sizeof o->title, "GPU %d: NVLink errors", g);
    snprintf(o->text, sizeof o->text, "GPU %d's NVLinks counted %.0f errors (replay, recovery, CRC) in the last %s", g,
             sum, d);
    snprintf(o->fix, sizeof o->fix, "drain the node, reset the GPU and check its NVLinks (field diagnostics)");
  }
}

/* ecc, row_remap, nvlink: one key per GPU that reports the counters, over [end - for, end]. */
static void eval_health(struct alert_engine *e, int rule, const struct runview *v, int64_t end) {
  const struct alert_rule *r = &e->c.rules[rule];
  const char *name = r->kind == ALERT_ECC         ? "gpu.ecc_dbe_volatile"
                     : r->kind == ALERT_ROW_REMAP ? "gpu.remap_pending"
                                                  : "gpu.nvlink_replay_errors";
  int64_t win = r->for_ns > slack_ns(e) ? r->for_ns : slack_ns(e), from = end - win > 0 ? end - win : 0;
  for (size_t i = 0; i < v->nseries; i++) {
    const struct store_series *s = &v->series[i];
    int g = runview_gpu_label(s->labels);
    if (g < 0 || strcmp(s->source, "nvml") || strcmp(s->name, name))
      continue;
    char key[160];
    snprintf(key, sizeof key, "%s %.40s", KIND_NAMES[r->kind], s->labels);
    struct alert_obs *o = obs_new(key, s->labels);
    if (!o)
      return;
    health_text(r, v, s->labels, g, from, end, o);
    alert_observe(e, rule, o);
    free(o);
  }
}

/* ---- job: the job's own alerts (docs/alerts.md, "The job's own alerts") ---- */

static const char *const JOB_LEVELS[] = {"INFO", "WARN", "ERROR"};

/* The job's alert number n's params (job.alert.N.level, .title, .text) into o; its level 0..2. */
static int job_alert_of(const struct runview *v, double n, struct alert_obs *o) {
  char key[80];
  snprintf(key, sizeof key, "job.alert.%.0f.level", n);
  const char *lv = runview_param(v, key);
  int level = 0;
  for (int i = 0; lv && i < 3; i++)
    if (!strcmp(lv, JOB_LEVELS[i]))
      level = i;
  snprintf(key, sizeof key, "job.alert.%.0f.title", n);
  const char *title = runview_param(v, key);
  snprintf(key, sizeof key, "job.alert.%.0f.text", n);
  const char *text = runview_param(v, key);
  snprintf(o->title, sizeof o->title, "%s", title && *title ? title : "the job raised an alert");
  snprintf(o->text, sizeof o->text, "%s", text ? text : "");
  snprintf(o->labels, sizeof o->labels, "level=%s", JOB_LEVELS[level]);
  o->value = level;
  return level;
}

/* Sends each alert the job raised (a mark "alert", its number the value) not looked at before, to
 * every job rule whose level it reaches; each once, never resolved. */
static void eval_job(struct alert_engine *e, const struct runview *v) {
  for (size_t i = 0; i < v->nevents; i++) {
    const struct store_event *ev = &v->events[i];
    if (strcmp(ev->kind, "mark") || strcmp(ev->name, "alert") || !isfinite(ev->value))
      continue;
    size_t k = 0;
    while (k < e->njob_seen && e->job_seen[k] != ev->value)
      k++;
    if (k < e->njob_seen)
      continue;
    e->job_raised++;
    if (e->njob_seen == JOB_MAX_SEEN) {
      if (!e->job_unheard_said++)
        gs_sink_event(e->sink, gs_mono_ns(), "alert", "job_full", JOB_MAX_SEEN, "",
                      "over 1024 alerts of the job: the rest are not sent");
      continue;
    }
    e->job_seen[e->njob_seen++] = ev->value;
    char key[48];
    snprintf(key, sizeof key, "job %.0f", ev->value);
    struct alert_obs *o = obs_new(key, "");
    if (!o)
      return;
    int level = job_alert_of(v, ev->value, o);
    o->cond = 1;
    for (size_t r = 0; r < e->c.nrules; r++)
      if (e->c.rules[r].kind == ALERT_JOB && level >= e->c.rules[r].severity)
        alert_emit(e, (int)r, o, "firing");
    free(o);
  }
}

static void eval_rules(struct alert_engine *e, const struct runview *v) {
  int64_t end = v->duration_ns;
  struct store_finding *f = NULL;
  size_t nf = 0;
  int diagnosed = 0, have_f = 0, job = 0;
  for (size_t i = 0; i < e->nact; i++)
    e->act[i].seen = 0;
  for (size_t i = 0; i < e->c.nrules; i++) {
    enum alert_kind k = e->c.rules[i].kind;
    if (k == ALERT_GPU_IDLE || k == ALERT_GPU_MEM || k == ALERT_THROTTLE)
      eval_gpu_rule(e, (int)i, v, end);
    else if (k == ALERT_HANG)
      eval_hang(e, (int)i, v, end);
    else if (k == ALERT_XID) {
      eval_xid(e, (int)i, v, end);
      resolve_unseen(e, (int)i);
    } else if (k == ALERT_ECC || k == ALERT_ROW_REMAP || k == ALERT_NVLINK)
      eval_health(e, (int)i, v, end);
    else if (k == ALERT_JOB)
      job = 1;
    else if (k == ALERT_FINDING || k == ALERT_STRAGGLER) {
      if (!diagnosed)
        diagnosed = 1, have_f = !alert_live_findings(v, &f, &nf);
      if (have_f) {
        eval_findings(e, (int)i, f, nf);
        resolve_unseen(e, (int)i);
      }
    }
  }
  if (job)
    eval_job(e, v);
  free(f);
}

int alert_engine_eval(struct alert_engine *e, struct store *st) {
  int64_t now = gs_mono_ns();
  if (e->finished || (e->last_eval && now - e->last_eval < e->c.every_ns))
    return GS_OK;
  if (st->stats.points_pending > 0)
    return GS_OK; /* the store is not taking writes (an outage, a full disk): its window is stale, and
                   * a read would wait on it too; the rules wait for it to catch up */
  e->last_eval = now;
  struct runview *v = calloc(1, sizeof *v);
  if (!v)
    return gs_fail(GS_ENOMEM, "out of memory");
  int rc = runview_load(st, e->run_id, v);
  if (!rc && v->duration_ns > 0)
    eval_rules(e, v);
  runview_done(v);
  free(v);
  return rc;
}

int alert_engine_last_eval(struct alert_engine *e, struct store *st) {
  if (!e || e->finished)
    return GS_OK;
  int job = 0;
  for (size_t i = 0; i < e->c.nrules; i++)
    job |= e->c.rules[i].kind == ALERT_JOB;
  struct runview *v = calloc(1, sizeof *v);
  if (!v)
    return gs_fail(GS_ENOMEM, "out of memory");
  int rc = runview_load(st, e->run_id, v);
  if (!rc && job)
    eval_job(e, v);
  long raised = 0;
  for (size_t i = 0; !rc && !job && i < v->nevents; i++)
    raised += !strcmp(v->events[i].kind, "mark") && !strcmp(v->events[i].name, "alert");
  if (raised)
    gs_sink_note(e->sink,
                 "alerts: the job raised %ld alert%s (gpuscope.alert, wandb.alert); none was sent: add the "
                 "rule `job` (--alert job) to send them",
                 raised, raised == 1 ? "" : "s");
  runview_done(v);
  free(v);
  return rc;
}

struct alert_engine *alert_engine_new(const struct alert_config *c, const struct alert_run_info *info,
                                      struct gs_sink *sink) {
  struct alert_engine *e = calloc(1, sizeof *e);
  if (!e) {
    gs_fail(GS_ENOMEM, "out of memory");
    return NULL;
  }
  e->c = *c;
  e->info = *info;
  snprintf(e->run_id, sizeof e->run_id, "%s", info->run_id ? info->run_id : "");
  snprintf(e->run_name, sizeof e->run_name, "%s", info->run_name ? info->run_name : "");
  snprintf(e->host, sizeof e->host, "%s", info->host ? info->host : "");
  e->sink = sink;
  if (alert_queue_start(&e->q, &e->c)) {
    free(e);
    return NULL;
  }
  return e;
}

/* exit: a run that did not finish fires once. */
static void fire_exit(struct alert_engine *e, int rule, const char *status, int exit_code, double oom_limit) {
  struct alert_obs *o = obs_new("exit", "");
  if (!o)
    return;
  char why[160] = "", lim[32];
  if (!isnan(oom_limit)) /* killed by the OOM killer at 700 MiB */
    snprintf(why, sizeof why, "; killed by the OOM killer%s%s (its cgroup's memory limit)", oom_limit > 0 ? " at " : "",
             oom_limit > 0 ? gs_fmt_limit(oom_limit, lim, sizeof lim) : "");
  o->cond = 1;
  o->value = exit_code;
  if (exit_code > 128 && !strcmp(status, "killed")) {
    int sig = exit_code - 128;
    snprintf(o->title, sizeof o->title, "the run was %s", why[0] ? "OOM-killed" : "killed");
    snprintf(o->text, sizeof o->text, "the job died of signal %d (%s)%s", sig, strsignal(sig), why);
  } else {
    snprintf(o->title, sizeof o->title, "the run failed");
    snprintf(o->text, sizeof o->text, "the job exited with status %d%s", exit_code, why);
  }
  alert_observe(e, rule, o);
  free(o);
}

static void put_counts(struct alert_engine *e) {
  char b[32];
  const struct alert_queue *q = &e->q;
  long dropped = q->dropped_full + q->dropped_rate + q->dropped_end;
  snprintf(b, sizeof b, "%ld", e->fired), gs_sink_param(e->sink, "alert.fired", b);
  snprintf(b, sizeof b, "%ld", e->resolved), gs_sink_param(e->sink, "alert.resolved", b);
  snprintf(b, sizeof b, "%ld", q->sent), gs_sink_param(e->sink, "alert.sent", b);
  snprintf(b, sizeof b, "%ld", q->failed), gs_sink_param(e->sink, "alert.failed", b);
  snprintf(b, sizeof b, "%ld", dropped), gs_sink_param(e->sink, "alert.dropped", b);
  if (dropped)
    gs_sink_note(e->sink, "alerts: %ld dropped (%ld queue full, %ld over the rate, %ld unsent at the run's end)",
                 dropped, q->dropped_full, q->dropped_rate, q->dropped_end);
  if (q->failed)
    gs_sink_note(e->sink, "alerts: %ld could not be delivered (last: %s)", q->failed, q->last_error);
}

void alert_engine_finish(struct alert_engine *e, const char *status, int exit_code, double oom_limit) {
  if (!e || e->finished)
    return;
  e->finished = 1;
  for (size_t i = 0; i < e->c.nrules; i++)
    if (e->c.rules[i].kind == ALERT_EXIT && strcmp(status, "finished"))
      fire_exit(e, (int)i, status, exit_code, oom_limit);
  for (size_t i = 0; i < e->nact; i++) {
    struct alert_active *a = &e->act[i];
    if (!a->firing || e->c.rules[a->rule].kind == ALERT_EXIT)
      continue;
    struct alert_obs *o = obs_new(a->key, a->labels);
    if (!o)
      break;
    o->cond = 0;
    snprintf(o->title, sizeof o->title, "%s", a->key);
    snprintf(o->text, sizeof o->text, "the run ended");
    alert_observe(e, a->rule, o);
    free(o);
  }
  alert_queue_stop(&e->q, e->c.timeout_ns);
  put_counts(e);
}

void alert_engine_summary(const struct alert_engine *e, FILE *out) {
  if (!e)
    return;
  const struct alert_queue *q = &e->q;
  long dropped = q->dropped_full + q->dropped_rate + q->dropped_end;
  if (!e->fired && !e->resolved && !dropped)
    return;
  fprintf(out, "  alerts: %ld fired, %ld resolved; %ld sent, %ld failed, %ld dropped", e->fired, e->resolved, q->sent,
          q->failed, dropped);
  if (dropped)
    fprintf(out, " (%ld queue full, %ld over the rate, %ld unsent at the end)", q->dropped_full, q->dropped_rate,
            q->dropped_end);
  fputc('\n', out);
  if (q->failed)
    fprintf(out, "  alerts: last delivery error: %s\n", q->last_error);
}

void alert_engine_free(struct alert_engine *e) {
  if (!e)
    return;
  alert_queue_stop(&e->q, 0);
  free(e);
}
