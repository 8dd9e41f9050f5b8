/* doctor/step_model: the one model of the training loop every estimate is a change to. The time per
 * unit of work is T = stalls + step, and the measured step splits into the data wait, host-to-device
 * copies, the wait for a straggler, GPU work and host idle / launch (the rest), each as a share of the
 * step, so the parts add up to the step and no idle second is counted twice. Loading in worker
 * processes overlaps compute (step = max(compute, load / workers, CPU per step / usable cores), the
 * loader_workers model); loading in the training process adds to it. Each rule states the one term
 * its fix changes (doctor.c resolves and evaluates it here); "fixing all" applies every change to the
 * same T (doctor_combine), reading the model and the changes back from the findings' evidence, so a
 * stored run's report combines exactly what the diagnosis stated. docs/diagnosis.md, "The step
 * model", gives the terms' order and each rule's change. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "doctor/doctor_int.h"

static const char *const TERM_NAMES[DR_NTERMS] = {"stall", "data", "h2d", "straggler", "gpu", "host"};

const char *dr_term_name(int term) {
  return term >= 0 && term < DR_NTERMS ? TERM_NAMES[term] : "";
}

void dr_change_none(struct dr_change *c) {
  for (int t = 0; t < DR_NTERMS; t++)
    c->factor[t] = 1;
  c->workers = NAN;
  c->batch = 1;
}

void dr_change_add(struct dr_change *a, const struct dr_change *b) {
  for (int t = 0; t < DR_NTERMS; t++)
    a->factor[t] *= b->factor[t];
  if (isfinite(b->workers) && !(a->workers >= b->workers))
    a->workers = b->workers;
  if (b->batch > a->batch)
    a->batch = b->batch;
}

static double clamp01(double v) {
  return v < 0 ? 0 : v > 1 ? 1 : v;
}

double dr_step_time(const struct dr_step *m, const struct dr_change *c) {
  if (!m->valid)
    return NAN;
  double f[DR_NTERMS], t[DR_NTERMS];
  for (int k = 0; k < DR_NTERMS; k++) {
    f[k] = c ? fmax(0, c->factor[k]) : 1;
    t[k] = m->term[k] * f[k];
  }
  /* A k-times batch: the same samples in 1/k of the steps, so per-step overhead (host idle, the
   * unfilled share of GPU work) is paid 1/k as often; per-sample work stays. */
  double k = c && c->batch > 1 ? c->batch : 1;
  double gpu = t[DR_TERM_GPU] * (m->fill + (1 - m->fill) / k), host = t[DR_TERM_HOST] / k;
  double compute = t[DR_TERM_H2D] + t[DR_TERM_STRAGGLER] + gpu + host, step;
  if (isfinite(m->load)) {
    double load = m->load * f[DR_TERM_DATA];
    double w = c && isfinite(c->workers) ? c->workers : m->workers;
    step = w > 0 ? fmax(compute, load / w) : compute + load;
    /* The job's CPU per step must still fit on its cores; loading that costs nothing frees it.
     * Loading in the training process that shrinks (to the collate a cached batch still costs)
     * frees its part: the job's CPU spread evenly over the serial step, the loading's part of it
     * shrinks with the load. */
    if (isfinite(m->cpu) && f[DR_TERM_DATA] > 0) {
      double cpu = m->cpu,
             c0 = m->term[DR_TERM_H2D] + m->term[DR_TERM_STRAGGLER] + m->term[DR_TERM_GPU] + m->term[DR_TERM_HOST];
      if (!(w > 0) && f[DR_TERM_DATA] < 1 && c0 + m->load > 0)
        cpu *= (c0 + load) / (c0 + m->load);
      step = fmax(step, cpu);
    }
  } else {
    step = compute + t[DR_TERM_DATA];
  }
  return t[DR_TERM_STALL] + step;
}

double dr_step_speedup(const struct dr_step *m, const struct dr_change *c) {
  double t0 = dr_step_time(m, NULL), t1 = dr_step_time(m, c);
  if (!isfinite(t0) || !isfinite(t1) || !(t0 > 0))
    return 1;
  return fmax(1, t0 / fmax(t1, (1 - DR_MAX_LOST) * t0));
}

/* The used GPUs' filled share of their busy time: SM activity (GPM, DCGM) over util; 1 (all filled:
 * a batch amortises nothing on the GPU, only the measured host overhead) when no GPU measures it.
 * Memory-controller utilisation is no stand-in: a compute-bound GEMM keeps it low because its SMs
 * are busy (docs/diagnosis.md, batch_too_small). */
static double gpu_fill(const struct dr_run *d) {
  double sum = 0;
  int n = 0;
  for (int i = 0; i < d->ngpus; i++) {
    const struct dr_gpu *g = &d->gpus[i];
    double a = g->sm_active.n ? g->sm_active.mean : NAN;
    if (!g->used || !g->util.n || !(g->util.mean > 0) || !isfinite(a))
      continue;
    sum += clamp01(a / g->util.mean), n++;
  }
  return n ? sum / n : 1;
}

/* Copy time inferred from the PCIe rate, as a share of the step, for pageable copies the client did
 * not time (NAN when not inferred). */
static double pcie_copy_share(const struct dr_run *d) {
  if (!(d->pin_memory == 0))
    return NAN;
  double rx = 0;
  int n = 0;
  for (int i = 0; i < d->ngpus; i++)
    if (d->gpus[i].used && d->gpus[i].pcie_rx.n)
      rx += d->gpus[i].pcie_rx.mean, n++;
  return n ? fmin(rx / n / DR_PAGEABLE_BW, DR_PAGEABLE_COPY_MAX) : NAN;
}

static double used_sm_active(const struct dr_run *d) {
  double sum = 0;
  int n = 0;
  for (int i = 0; i < d->ngpus; i++)
    if (d->gpus[i].used && d->gpus[i].sm_active.n)
      sum += d->gpus[i].sm_active.mean, n++;
  return n ? sum / n : NAN;
}

/* How much of the stalls lies inside the steps' own times, 0..1: the steps' summed time against the
 * span they cover (each stretch of held steps from its first step's start to its last one's end) —
 * all of the stalls when the steps tile the span, none when they cover all but the stalls. */
static double stalls_inside(const struct dr_run *d, double s) {
  double sum = 0, span = 0;
  for (size_t i = 0, j; i < d->nsteps; i = j) {
    for (j = i + 1; j < d->nsteps && d->steps[j].stretch == d->steps[i].stretch;)
      j++;
    span += (double)(d->steps[j - 1].t - d->steps[i].t) / GS_NS_PER_S + dr_fin(d->steps[i].total, 0);
    for (size_t k = i; k < j; k++)
      sum += dr_fin(d->steps[k].total, 0);
  }
  if (!(span > 0))
    return 0;
  return clamp01((sum / span - (1 - s)) / s);
}

static double stall_share_of(const struct dr_findings *fs) {
  for (size_t i = 0; fs && i < fs->n; i++)
    if (!strcmp(fs->v[i].rule, "periodic_stall"))
      return fs->v[i].share;
  return 0;
}

void dr_step_build(const struct dr_run *d, const struct dr_findings *fs, struct dr_step *m) {
  memset(m, 0, sizeof *m);
  m->fill = 1, m->load = NAN, m->cpu = NAN;
  double s = fmin(clamp01(stall_share_of(fs)), DR_STALL_MAX_SHARE);
  double stall = s / (1 - s);
  int steps = d->nsteps >= DR_MIN_STEPS && d->step_mean > 0;
  /* Measured phases first (the client timed them), each of what is left of the step. */
  double ds = steps && isfinite(d->data_share) ? clamp01(d->data_share) : 0;
  double hs = steps && isfinite(d->h2d_share) ? fmin(clamp01(d->h2d_share), 1 - ds) : 0;
  /* Stalls inside the steps (the client's steps tile the time, as gpuscope.watch's do: an evaluation
   * in the loop body is its step's compute) are part of the measured shares: taken out of them, the
   * data wait in the stalls from the data, the rest from compute, so no stalled second counts twice. */
  double inside = steps && s > 0 ? stalls_inside(d, s) : 0;
  if (inside > 0) {
    double sd = isfinite(d->stall_data_share) ? fmin(d->stall_data_share, ds) : 0;
    ds = clamp01((ds - inside * sd) / (1 - inside * s));
    hs = fmin(clamp01(hs / (1 - inside * s)), 1 - ds);
  }
  double left = 1 - ds - hs;
  /* GPU work on the critical path: the busy share of the GPU whose pace sets the step (a straggler's,
   * since the others' util counts their waiting), else the used GPUs' mean; util is a share of the
   * window, the step's share of which is 1 / (1 + stall). */
  double busy = d->strag_gpu >= 0 && d->strag_gpu < d->ngpus && d->gpus[d->strag_gpu].util.n
                    ? d->gpus[d->strag_gpu].util.mean
                    : d->used_util;
  if (!isfinite(busy))
    busy = used_sm_active(d); /* GPUs without util (MIG instances): their SM activity */
  double gpu = isfinite(busy) ? fmin(clamp01(busy / 100) * (1 + stall), left) : 0;
  left -= gpu;
  /* Then what is inferred from rates: pageable copies from PCIe RX, when the client did not time them. */
  double hp = hs > 0 ? NAN : pcie_copy_share(d);
  hp = isfinite(hp) ? fmin(hp, left) : 0;
  left -= hp;
  /* Then a straggler's wait (the others' time spent waiting for it), and the rest is host idle. */
  double x = isfinite(d->strag_lost) ? fmin(clamp01(d->strag_lost), left) : 0;
  left -= x;
  m->term[DR_TERM_STALL] = stall;
  m->term[DR_TERM_DATA] = ds;
  m->term[DR_TERM_H2D] = hs + hp;
  m->term[DR_TERM_GPU] = gpu;
  m->term[DR_TERM_STRAGGLER] = x;
  m->term[DR_TERM_HOST] = fmax(0, left);
  m->fill = gpu_fill(d);
  /* Loading bounds the step only when the loop is input-bound: below that, a data wait is jitter
   * the loader catches up on, and it stays as it is when the rest of the step shrinks. */
  if (steps && ds >= DR_INPUT_SHARE) {
    int w0 = dr_current_workers(d);
    m->workers = w0;
    m->load = w0 > 0 ? w0 : ds; /* workers that keep the step waiting take w0 steps per batch */
    double u = dr_usable_cores(d);
    if (isfinite(u) && u > 0 && isfinite(d->job_cores))
      m->cpu = d->job_cores / u;
  }
  m->valid = steps || isfinite(busy) || s > 0;
}

void dr_set_change(struct dr_findings *fs, const struct store_finding *f, int kind, int term, double value,
                   double min_speedup) {
  if (!f || !fs->ch || f < fs->v || f >= fs->v + fs->n)
    return;
  fs->ch[f - fs->v] = (struct dr_change_req){kind, term, value, min_speedup, 0};
}

void dr_keep_share(struct dr_findings *fs, const struct store_finding *f) {
  if (f && fs->ch && f >= fs->v && f < fs->v + fs->n)
    fs->ch[f - fs->v].measured = 1;
}

int dr_change_resolve(const struct dr_step *m, const struct dr_change_req *r, struct dr_change *c) {
  dr_change_none(c);
  if (!m->valid || r->kind == DR_CH_NONE)
    return 0;
  int t = r->term >= 0 && r->term < DR_NTERMS ? r->term : DR_TERM_HOST;
  switch (r->kind) {
  case DR_CH_FACTOR:
    c->factor[t] = isfinite(r->value) ? fmax(0, r->value) : 1;
    break;
  case DR_CH_REMOVE: {
    /* value is a share of the window: in steps, value x T */
    double amount = r->value * dr_step_time(m, NULL);
    c->factor[t] = m->term[t] > 0 && isfinite(amount) ? clamp01(1 - amount / m->term[t]) : 1;
    break;
  }
  case DR_CH_WORKERS:
    c->workers = r->value;
    break;
  case DR_CH_HOST_TO_UTIL: {
    /* host idle left: what keeps the GPU busy `value` of gpu + host */
    double gpu = m->term[DR_TERM_GPU], host = m->term[DR_TERM_HOST];
    double keep = r->value > 0 && r->value <= 1 ? gpu * (1 / r->value - 1) : host;
    c->factor[DR_TERM_HOST] = host > 0 ? clamp01(keep / host) : 1;
    break;
  }
  case DR_CH_BATCH:
    c->batch = r->value >= 1 ? r->value : 1;
    break;
  default:
    return 0;
  }
  return 1;
}

void dr_evaluate_changes(struct dr_run *d, struct dr_findings *fs) {
  struct dr_step m;
  dr_step_build(d, fs, &m);
  size_t k = 0;
  for (size_t i = 0; i < fs->n; i++) {
    struct store_finding *f = &fs->v[i];
    struct dr_change c;
    if (dr_change_resolve(&m, &fs->ch[i], &c)) {
      double sp = dr_step_speedup(&m, &c);
      if (sp < fs->ch[i].min_speedup || !(sp > 1))
        continue;
      /* A measured cost (the data wait: the run view's share) stays what was measured. */
      dr_set_estimate(f, d, fs->ch[i].measured ? f->share : 1 - 1 / sp, sp);
      dr_step_evidence(f->evidence, sizeof f->evidence, &m, &c);
    }
    fs->ch[k] = fs->ch[i];
    fs->v[k++] = *f;
  }
  fs->n = k;
}

/* Appends ,"key":{...} (text) to the object in ev when it fits. */
static void append_member(char *ev, size_t cap, const char *key, const char *text) {
  size_t len = strlen(ev);
  if (len < 2 || ev[len - 1] != '}')
    return;
  int empty = len == 2;
  size_t need = strlen(key) + strlen(text) + 4 + (empty ? 0 : 1);
  if (len + need > cap)
    return;
  snprintf(ev + len - 1, cap - (len - 1), "%s\"%s\":%s}", empty ? "" : ",", key, text);
}

static size_t put_num(char *buf, size_t cap, size_t o, const char *key, double v) {
  if (o >= cap)
    return o;
  int n = isfinite(v) ? snprintf(buf + o, cap - o, "%s\"%s\":%.6g", o > 1 ? "," : "", key, v)
                      : snprintf(buf + o, cap - o, "%s\"%s\":null", o > 1 ? "," : "", key);
  return n > 0 ? o + (size_t)n : o;
}

void dr_step_evidence(char *evidence, size_t cap, const struct dr_step *m, const struct dr_change *c) {
  char ch[256] = "{", model[400] = "{";
  size_t o = 1;
  for (int t = 0; t < DR_NTERMS; t++)
    if (c->factor[t] != 1)
      o = put_num(ch, sizeof ch - 1, o, TERM_NAMES[t], c->factor[t]);
  if (isfinite(c->workers))
    o = put_num(ch, sizeof ch - 1, o, "workers", c->workers);
  if (c->batch != 1)
    o = put_num(ch, sizeof ch - 1, o, "batch", c->batch);
  if (o < sizeof ch - 1)
    ch[o++] = '}', ch[o] = 0;
  o = 1;
  for (int t = 0; t < DR_NTERMS; t++)
    o = put_num(model, sizeof model - 1, o, TERM_NAMES[t], m->term[t]);
  o = put_num(model, sizeof model - 1, o, "fill", m->fill);
  o = put_num(model, sizeof model - 1, o, "load", m->load);
  o = put_num(model, sizeof model - 1, o, "workers", m->workers);
  o = put_num(model, sizeof model - 1, o, "cpu", m->cpu);
  if (o < sizeof model - 1)
    model[o++] = '}', model[o] = 0;
  if (ch[strlen(ch) - 1] != '}' || model[strlen(model) - 1] != '}')
    return;
  /* both or neither: a change without its model cannot be combined */
  size_t before = strlen(evidence);
  append_member(evidence, cap, "change", ch);
  if (strlen(evidence) == before)
    return;
  size_t with_change = strlen(evidence);
  append_member(evidence, cap, "step_model", model);
  if (strlen(evidence) == with_change) {
    /* take the change back out */
    char *cut = evidence + before - 1;
    cut[0] = '}', cut[1] = 0;
  }
}

/* ---- reading them back (doctor_combine) ---- */

/* The flat object "name":{...} of evidence ev: its body between the braces, or NULL. */
static const char *find_object(const char *ev, const char *name, const char **end) {
  char pat[48];
  snprintf(pat, sizeof pat, "\"%s\":{", name);
  const char *p = strstr(ev, pat);
  if (!p)
    return NULL;
  p += strlen(pat);
  *end = strchr(p, '}');
  return *end ? p : NULL;
}

/* The number of "key" in the object body [p, end): 1 with *v (NAN for null), else 0. */
static int object_num(const char *p, const char *end, const char *key, double *v) {
  char pat[48];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  size_t pl = strlen(pat);
  for (const char *q = p; q && q < end; q = strchr(q + 1, '"')) {
    if ((size_t)(end - q) > pl && !strncmp(q, pat, pl) && (q == p || q[-1] == ',' || q[-1] == '{')) {
      const char *num = q + pl;
      if (!strncmp(num, "null", 4)) {
        *v = NAN;
        return 1;
      }
      char *stop;
      double x = strtod(num, &stop);
      if (stop == num || stop > end)
        return 0;
      *v = x;
      return 1;
    }
  }
  return 0;
}

static int read_model(const char *ev, struct dr_step *m) {
  const char *end, *p = find_object(ev, "step_model", &end);
  if (!p)
    return 0;
  memset(m, 0, sizeof *m);
  for (int t = 0; t < DR_NTERMS; t++)
    if (!object_num(p, end, TERM_NAMES[t], &m->term[t]) || !isfinite(m->term[t]) || m->term[t] < 0)
      return 0;
  if (!object_num(p, end, "fill", &m->fill) || !object_num(p, end, "load", &m->load) ||
      !object_num(p, end, "workers", &m->workers) || !object_num(p, end, "cpu", &m->cpu))
    return 0;
  if (!isfinite(m->fill))
    m->fill = 1;
  if (!isfinite(m->workers))
    m->workers = 0;
  m->valid = 1;
  return 1;
}

static int read_change(const char *ev, struct dr_change *c, unsigned *terms) {
  const char *end, *p = find_object(ev, "change", &end);
  dr_change_none(c);
  *terms = 0;
  if (!p)
    return 0;
  for (int t = 0; t < DR_NTERMS; t++)
    if (object_num(p, end, TERM_NAMES[t], &c->factor[t]) && isfinite(c->factor[t]))
      *terms |= 1u << t;
    else
      c->factor[t] = 1;
  double v;
  if (object_num(p, end, "workers", &v) && isfinite(v))
    c->workers = v, *terms |= 1u << DR_TERM_DATA; /* the loader's processes: the data term's */
  if (object_num(p, end, "batch", &v) && v > 1)
    c->batch = v, *terms |= 1u << DR_TERM_HOST | 1u << DR_TERM_GPU;
  return *terms != 0;
}

void doctor_combine(const struct store_finding *f, size_t n, struct doctor_combined *out) {
  memset(out, 0, sizeof *out);
  out->speedup = 1;
  struct dr_step m = {0};
  struct dr_change all;
  dr_change_none(&all);
  unsigned seen = 0;
  for (size_t i = 0; i < n; i++) {
    struct dr_step mi;
    struct dr_change ci;
    unsigned terms;
    if (!read_model(f[i].evidence, &mi) || !read_change(f[i].evidence, &ci, &terms))
      continue;
    if (!m.valid)
      m = mi;
    out->findings++;
    out->overlapping |= (seen & terms) != 0;
    seen |= terms;
    dr_change_add(&all, &ci);
  }
  if (!out->findings)
    return;
  double t0 = dr_step_time(&m, NULL), t1 = dr_step_time(&m, &all);
  double s = t0 > 0 && isfinite(t1) ? t0 / fmax(t1, 1e-9 * t0) : 1;
  out->speedup = fmax(1, s);
  out->share = 1 - 1 / out->speedup;
}

/* ---- the loop's capacity and its stalls, which the rules read too ---- */

double dr_job_runq(const struct dr_run *d) {
  double sum = 0;
  int n = 0;
  for (size_t i = 0; i < d->nprocs; i++) {
    const struct dr_proc *p = &d->procs[i];
    if (isfinite(p->runq) && (p->role == DOCTOR_ROLE_TRAINER || p->role == DOCTOR_ROLE_WORKER))
      sum += p->runq, n++;
  }
  return n ? sum / n : NAN;
}

/* Cores the job could use: the CPUs less what other work on the host took from it, and never more
 * than its cgroup quota or its cpuset (other work outside the job's cgroup does not spend the quota).
 * Other work takes the job's cores only as far as the job waits for them: all of it when the job's
 * processes waited for a CPU DR_CONTENDED_RUNQ of the time or more (CPU-bound neighbours at the same
 * priority), none when they waited at most DR_UNCONTENDED_RUNQ (work that only fills what the job
 * leaves: light daemons, or neighbours below the job's cgroup weight), in proportion between;
 * unknown waits count it all.
 * NAN when the CPUs are unknown, or when the host's CPUs are known but what other work took is not. */
double dr_usable_cores(const struct dr_run *d) {
  if (!isfinite(d->cores))
    return NAN;
  if (d->ncpu && !isfinite(d->others_cores))
    return NAN;
  double q = dr_job_runq(d);
  double taken = isfinite(q) ? clamp01((q - DR_UNCONTENDED_RUNQ) / (DR_CONTENDED_RUNQ - DR_UNCONTENDED_RUNQ)) : 1;
  double free_cpus = d->ncpu ? d->ncpu - d->others_cores * taken : d->cores;
  return fmax(DR_MIN_USABLE_CORES, fmin(d->cores, free_cpus));
}

/* Worker processes loading now: the param when the client sent it, else what the process tree shows. */
int dr_current_workers(const struct dr_run *d) {
  if (isfinite(d->num_workers) && d->num_workers >= 0 && d->num_workers <= DR_MAX_WORKERS_PARAM)
    return (int)d->num_workers;
  return d->nworkers;
}

int doctor_is_verdict(const char *rule) {
  return rule && (!strcmp(rule, "healthy") || !strcmp(rule, "insufficient_data"));
}

int doctor_is_stall(double gap_s, double typical_s) {
  return gap_s - typical_s >= DR_STALL_MIN_S && gap_s >= DR_STALL_FACTOR * typical_s;
}
