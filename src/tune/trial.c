/* tune/trial: one trial of a tune. The trial is a normal gpuscope run: a forked child calls
 * agent_run() (so the run is in the store like any other, in the tune's group and tagged with its
 * values), with the job's output in a temporary log and, with --mem-limit, RLIMIT_AS set for the
 * job. The agent stops the job after warm-up + N client steps (agent_opts.stop_after_steps); in
 * --seconds mode and at the budget's end this file sends SIGTERM. A job that ignores its stop gets
 * SIGKILL with its whole tree after the grace (the agent does it, agent_opts.stop_grace_ns; an
 * agent that does not end either is killed with its session here). The trial's child starts its own
 * session and tune is the subreaper of everything below it, so whatever the trial leaves running —
 * a daemon that double-forked and called setsid included — ends up tune's child when the agent
 * exits, and is killed and named then. Then the run's step series are read back from the store:
 * throughput after warm-up with its standard error, the data-wait share, GPU use, peak memory
 * against the limit, and the trial's status (ok, oom, failed, interrupted). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "collect/collect.h"
#include "core/core.h"
#include "runview/runview.h"
#include "store/store.h"
#include "tune/tune_int.h"

#define TAIL_LINES 6

volatile sig_atomic_t tune_sigint, tune_sigint_signo;

/* An agent that has not ended this long after its job's last SIGKILL is killed too: its run is then
 * left open (`crashed` later), which only a hung store or a hung driver call explains. */
#define AGENT_GRACE_NS (15 * GS_NS_PER_S)
#define LEFT_NAMED 4 /* processes named in a trial's cleanup; the rest are counted */

const char *tune_signal_name(int sig) {
  return sig == SIGINT ? "Ctrl-C (SIGINT)" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

static int64_t grace_ns(const struct tune_opts *o) {
  return o->grace_ns > 0 ? o->grace_ns : TUNE_GRACE_NS;
}

void tune_config_label(const struct tune_opts *o, const int *config, char *buf, size_t n) {
  size_t off = 0;
  buf[0] = 0;
  for (int i = 0; i < o->nparams && off < n; i++) {
    int w = snprintf(buf + off, n - off, "%s%s=%s", i ? " " : "", o->params[i].name, o->params[i].values[config[i]]);
    if (w < 0)
      break;
    off += (size_t)w;
  }
}

/* The end of the log (at most n - 1 bytes, control characters but newlines replaced) into buf. */
static void log_end(int fd, char *buf, size_t n) {
  buf[0] = 0;
  off_t end = lseek(fd, 0, SEEK_END);
  if (end <= 0)
    return;
  off_t from = end > (off_t)n - 1 ? end - (off_t)n + 1 : 0;
  ssize_t got = pread(fd, buf, (size_t)(end - from), from);
  if (got <= 0)
    return;
  buf[got] = 0;
  for (ssize_t i = 0; i < got; i++)
    if (buf[i] == '\r' || buf[i] == '\t')
      buf[i] = ' ';
    else if ((unsigned char)buf[i] < 32 && buf[i] != '\n')
      buf[i] = '?';
}

/* The last TAIL_LINES non-empty lines of text into buf (n bytes, keeping the end). */
static void tail_lines(const char *text, char *buf, size_t n) {
  const char *start = text + strlen(text);
  int lines = 0;
  while (start > text && lines < TAIL_LINES) {
    start--;
    if (*start == '\n' && start[1] && start[1] != '\n')
      lines++;
  }
  while (*start == '\n')
    start++;
  size_t len = strlen(start);
  while (len && start[len - 1] == '\n')
    len--;
  if (len >= n) /* keep the end: the error is on the last line */
    start += len - (n - 1), len = n - 1;
  snprintf(buf, n, "%.*s", (int)len, start);
}

/* The last line of the log's end that says the job ran out of memory, or NULL. */
static const char *oom_line(const char *text, char *buf, size_t n) {
  static const char *pat[] = {"out of memory",  "MemoryError",      "can't allocate memory", "Cannot allocate memory",
                              "std::bad_alloc", "OutOfMemoryError", "RESOURCE_EXHAUSTED"};
  const char *found = NULL;
  for (const char *l = text; *l;) {
    size_t len = strcspn(l, "\n");
    for (size_t i = 0; i < sizeof pat / sizeof *pat; i++) {
      const char *hit = strstr(l, pat[i]);
      if (hit && hit < l + len) {
        snprintf(buf, n, "%.*s", (int)(len > 200 ? 200 : len), l);
        found = buf;
      }
    }
    l += len;
    if (*l)
      l++;
  }
  return found;
}

/* The job under util-linux's prlimit: RLIMIT_AS for the job's processes only, not for the agent (a
 * limit on the agent could fail the agent first, and ASan's shadow memory cannot live under one).
 * Takes argv (freed); returns the new argv or NULL. */
static char **with_limit(char **argv, int64_t bytes) {
  size_t n = 0;
  while (argv[n])
    n++;
  char **out = calloc(n + 4, sizeof *out);
  char lim[64];
  snprintf(lim, sizeof lim, "--as=%lld", (long long)bytes);
  if (out && (out[0] = strdup("prlimit")) && (out[1] = strdup(lim)) && (out[2] = strdup("--"))) {
    memcpy(out + 3, argv, n * sizeof *argv);
    free(argv);
    return out;
  }
  tune_argv_free(out);
  tune_argv_free(argv);
  return NULL;
}

/* The cores of slot `slot` of `nslots` trials side by side: an even share of the cores tune may use
 * (each trial at least one; with fewer cores than trials, trials share theirs), into *set and as a
 * list ("0-3", "4,5") into label. Returns 0, or -1 when tune's affinity cannot be read (not pinned). */
static int cpu_share(int slot, int nslots, cpu_set_t *set, char *label, size_t n) {
  cpu_set_t all;
  int cpus[CPU_SETSIZE], ncpu = 0;
  label[0] = 0;
  if (sched_getaffinity(0, sizeof all, &all))
    return -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &all))
      cpus[ncpu++] = c;
  if (!ncpu)
    return -1;
  int lo = ncpu >= nslots ? slot * ncpu / nslots : slot % ncpu;
  int hi = ncpu >= nslots ? (slot + 1) * ncpu / nslots : lo + 1;
  CPU_ZERO(set);
  size_t off = 0;
  for (int i = lo; i < hi; i++) {
    CPU_SET(cpus[i], set);
    int run = i; /* a run of consecutive cores is written a-b */
    while (run + 1 < hi && cpus[run + 1] == cpus[run] + 1)
      run++;
    if (off < n)
      off += (size_t)snprintf(label + off, n - off, "%s%d", off ? "," : "", cpus[i]);
    if (run > i && off < n)
      off += (size_t)snprintf(label + off, n - off, "-%d", cpus[run]);
    i = run;
  }
  return 0;
}

static void env_param(const char *name, const char *value) {
  char key[TUNE_MAX_NAME + 32];
  int k = snprintf(key, sizeof key, "GPUSCOPE_PARAM_");
  for (const char *c = name; *c && k < (int)sizeof key - 1; c++)
    key[k++] = (char)toupper((unsigned char)*c);
  key[k] = 0;
  setenv(key, value, 1);
}

/* The trial's own run params (tune.trial, tune.gpu, tune.cpus, tune.lr, tune.warmup) and the tune's
 * version and arguments (tune.version, tune.argc, tune.argv.N, which --resume reads back and matches) into kv (cap
 * entries), their text in buf. Returns how many. */
static size_t trial_params(const struct tune_opts *o, const struct tune_trial *t, int k, struct gs_kv *kv, size_t cap,
                           char (*buf)[48]) {
  size_t n = 0;
#define PUT(k_, v_) (kv[n].key = (char *)(k_), kv[n].value = (char *)(v_), n++)
  snprintf(buf[0], sizeof *buf, "%d", k + 1);
  PUT("tune.trial", buf[0]);
  if (t->gpu[0])
    PUT("tune.gpu", t->gpu);
  if (t->cpus[0])
    PUT("tune.cpus", t->cpus);
  if (isfinite(t->lr)) {
    snprintf(buf[1], sizeof *buf, "%.6g", t->lr);
    snprintf(buf[2], sizeof *buf, "%ld", t->lr_warmup);
    PUT("tune.lr", buf[1]);
    PUT("tune.warmup", buf[2]);
  }
  if (o->version)
    PUT("tune.version", o->version);
  snprintf(buf[3], sizeof *buf, "%d", o->nspec);
  PUT("tune.argc", buf[3]);
  for (int i = 0; i < o->nspec && n < cap && 4 + i < (int)cap; i++) {
    snprintf(buf[4 + i], sizeof *buf, "tune.argv.%d", i);
    PUT(buf[4 + i], o->spec[i]);
  }
#undef PUT
  return n;
}

/* The child's side of a trial: its own session (a terminal's ^C reaches tune alone, which passes it
 * on, and the session's process group can be killed whole), stdin /dev/null, output in the log, the
 * trial's environment (each value as GPUSCOPE_PARAM_<NAME>, CUDA_VISIBLE_DEVICES, the trial number
 * that marks what it leaves behind) and cores, SIGTERM when tune dies (the agent then closes the run
 * as interrupted, and --resume runs the trial again). */
static void child_setup(const struct tune_opts *o, const struct tune_trial *t, int k, int log_fd, pid_t parent,
                        const cpu_set_t *cores) {
  setsid();
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent)
    _exit(1);
  int null = open("/dev/null", O_RDONLY);
  if (null >= 0)
    dup2(null, 0), close(null);
  dup2(log_fd, 1);
  dup2(log_fd, 2);
  for (int i = 0; i < o->nparams; i++)
    env_param(o->params[i].name, o->params[i].values[t->config[i]]);
  char num[48];
  if (isfinite(t->lr)) {
    snprintf(num, sizeof num, "%.6g", t->lr);
    env_param("lr", num);
    snprintf(num, sizeof num, "%ld", t->lr_warmup);
    env_param("warmup", num);
  }
  if (t->gpu[0]) {
    /* An AMD GPU by its HIP index (gpuscope numbers AMD GPUs after NVIDIA's, HIP from 0 among its
     * own), in both variables, as HIP honours CUDA_VISIBLE_DEVICES too; any other by gpuscope's
     * index or UUID. ROCR_VISIBLE_DEVICES is left alone: it filters beneath HIP's, and both at once
     * would count the second from the first's survivors (docs/amd.md). */
    const char *v = t->hip[0] ? t->hip : t->gpu;
    setenv("CUDA_VISIBLE_DEVICES", v, 1);
    setenv("HIP_VISIBLE_DEVICES", v, 1);
  }
  snprintf(num, sizeof num, "%d", k + 1);
  setenv("GPUSCOPE_TUNE_TRIAL", num, 1);
  if (cores)
    sched_setaffinity(0, sizeof *cores, cores);
}

/* Runs the trial's job under the agent in a child; returns the child pid (or -1). The child writes
 * "rc job_status\n" into res_fd and its own error, if any, into the log. */
static pid_t spawn(const struct tune_opts *o, struct tune_trial *t, int k, char **argv, const char *tags, int log_fd,
                   int res_fd, const cpu_set_t *cores) {
  pid_t parent = getpid(), pid = fork();
  if (pid)
    return pid;
  child_setup(o, t, k, log_fd, parent, cores);
  struct gs_kv kv[TUNE_SPEC_MAX + 8];
  static char buf[TUNE_SPEC_MAX + 8][48];
  size_t nkv = trial_params(o, t, k, kv, sizeof kv / sizeof *kv, buf);
  struct agent_opts ao = {.argv = argv,
                          .name = t->run_name,
                          .tags = tags,
                          .group = o->name,
                          .interval_ns = o->interval_ns,
                          .store_url = o->store_url,
                          .root = "/",
                          .quiet = 1,
                          .log_max = o->log_max,
                          .stop_after_steps = o->seconds > 0 || o->samples > 0 ? 0 : o->warmup + t->target_steps,
                          .stop_after_samples = o->samples,
                          .stop_grace_ns = grace_ns(o),
                          .params = kv,
                          .nparams = nkv};
  int status = 1;
  int rc = agent_run(&ao, &status);
  if (rc)
    fprintf(stderr, "gpuscope: %s\n", gs_last_error());
  char msg[96];
  const char *id = getenv("GPUSCOPE_RUN_ID"); /* agent_run sets it for the job, in this process */
  int len = snprintf(msg, sizeof msg, "%d %d %.31s\n", rc, status, rc == 0 && id && id[0] ? id : "-");
  ssize_t w = write(res_fd, msg, (size_t)len);
  (void)w;
  fflush(NULL);
  _exit(0);
}

static void sleep_ms(int ms) {
  struct timespec ts = {0, ms * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- measuring from the store, through the run view ---- */

/* The GPU columns over [from, to] (ns since run start): mean utilisation of the trial's GPUs, their
 * energy per sample (each counter's slope over the window, widened by a tick on each side so a
 * window shorter than a tick still has two samples), and the peak memory of the fullest GPU against
 * its total. want: "gpu=N" for a trial given GPU N (NULL: every GPU the agent saw). */
static void measure_gpus(const struct runview *v, int64_t from, int64_t to, int64_t tick, const char *want,
                         struct tune_trial *t, double samples_per_s) {
  double util = 0, watts = 0, worst = -1;
  int nutil = 0, nenergy = 0;
  for (size_t i = 0; i < v->nseries; i++) {
    const struct store_series *s = &v->series[i];
    if (strcmp(s->source, "nvml") || (want && strcmp(s->labels, want)))
      continue;
    struct runview_stats w;
    if (!strcmp(s->name, "gpu.util_pct")) {
      if (!runview_stats(v, "nvml", s->name, s->labels, from, to, &w) && w.n)
        util += w.mean, nutil++;
    } else if (!strcmp(s->name, "gpu.energy_j")) {
      if (!runview_stats(v, "nvml", s->name, s->labels, from - tick, to + tick, &w) && w.n >= 2 &&
          w.t_last > w.t_first && w.last >= w.first)
        watts += (w.last - w.first) / ((double)(w.t_last - w.t_first) / GS_NS_PER_S), nenergy++;
    } else if (!strcmp(s->name, "gpu.mem_used_bytes")) {
      struct runview_stats tot;
      if (runview_stats(v, "nvml", s->name, s->labels, INT64_MIN, INT64_MAX, &w) || !w.n)
        continue;
      double total = !runview_stats(v, "nvml", "gpu.mem_total_bytes", s->labels, INT64_MIN, INT64_MAX, &tot) && tot.n
                         ? tot.last
                         : NAN;
      double share = isfinite(total) && total > 0 ? w.max / total : NAN;
      if (isnan(t->peak_mem) || (isfinite(share) && share > worst)) {
        t->peak_mem = w.max, t->mem_limit = total;
        if (isfinite(share))
          worst = share;
      }
    }
  }
  if (nutil)
    t->gpu_util = util / nutil;
  if (nenergy && isfinite(samples_per_s) && samples_per_s > 0)
    t->energy_per_sample = watts / samples_per_s;
}

static double view_last(const struct runview *v, const char *src, const char *name) {
  struct runview_stats s;
  return !runview_stats(v, src, name, "", INT64_MIN, INT64_MAX, &s) && s.n ? s.last : NAN;
}

/* No GPU memory: host memory. --mem-limit is RLIMIT_AS, a limit per process, so its peak is the
 * largest process's resident memory; otherwise the whole job's against the cgroup or the host. */
static void measure_host_memory(const struct tune_opts *o, const struct runview *v, struct tune_trial *t) {
  struct runview_stats s;
  if (!runview_stats(v, "proctree", o->mem_limit > 0 ? "proc.rss_bytes" : "tree.rss_bytes", NULL, INT64_MIN, INT64_MAX,
                     &s) &&
      s.n)
    t->peak_mem = s.max;
  t->mem_limit = o->mem_limit > 0 ? (double)o->mem_limit : view_last(v, "host", "host.cgroup.mem_limit_bytes");
  if (!isfinite(t->mem_limit))
    t->mem_limit = view_last(v, "host", "host.mem.total_bytes");
}

/* The measured window: the view's steps [first, last) — after the first o->warmup steps of the run
 * (the view may have left its own warm-up step out: `before` counts the run's steps ahead of the
 * view's first), at most target_steps of them, and with --samples up to the step whose samples
 * reached the count. cum[i] is the samples seen by the end of view step i (NAN once a step has none). */
struct window {
  size_t first, last;
  double *cum;
  int64_t t0; /* the first step's start, ns since run start */
};

static int window_find(const struct tune_opts *o, const struct runview *v, const struct tune_trial *t,
                       struct window *w) {
  memset(w, 0, sizeof *w);
  if (!v->nsteps)
    return 0;
  struct runview_stats tot, smp;
  runview_stats(v, "client", "step.total_s", "", INT64_MIN, v->steps[0].t - 1, &tot);
  runview_stats(v, "client", "step.samples", "", INT64_MIN, v->steps[0].t - 1, &smp);
  size_t before = tot.n;
  w->t0 = tot.n ? tot.t_first - (int64_t)(tot.first * GS_NS_PER_S)
                : v->steps[0].t - (int64_t)(v->steps[0].total * GS_NS_PER_S);
  if (!(w->cum = malloc(v->nsteps * sizeof *w->cum)))
    return gs_fail(GS_ENOMEM, "out of memory");
  double cum = before && smp.n == before ? smp.sum : before ? NAN : 0;
  w->first = (size_t)o->warmup > before ? (size_t)o->warmup - before : 0;
  w->last = v->nsteps;
  for (size_t i = 0; i < v->nsteps; i++) {
    cum += v->steps[i].samples; /* NAN stays NAN: missing is not zero */
    w->cum[i] = cum;
    if (o->samples > 0 && cum >= o->samples && i + 1 < w->last)
      w->last = i + 1;
  }
  if (t->target_steps > 0 && w->first + (size_t)t->target_steps < w->last)
    w->last = w->first + (size_t)t->target_steps;
  if (w->first > w->last)
    w->first = w->last;
  return 0;
}

/* The quality metric's points up to the window's end, each with the samples seen by then (those of
 * the last step that ended before it) and the seconds since the first step began. */
static int quality_points(const struct tune_opts *o, const struct runview *v, const struct window *w,
                          struct tune_trial *t) {
  long id = o->quality[0] && w->last ? runview_find(v, "client", o->quality, "") : -1;
  if (id < 0)
    return 0;
  int64_t *qt = NULL;
  double *qv = NULL;
  size_t n = 0;
  int rc = runview_samples(v, v->series[id].id, INT64_MIN, v->steps[w->last - 1].t, &qt, &qv, &n);
  if (!rc && n && (!(t->q_samples = malloc(n * sizeof(double))) || !(t->q_time = malloc(n * sizeof(double)))))
    rc = gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0, j = 0; !rc && i < n; i++) {
    while (j < w->last && v->steps[j].t <= qt[i])
      j++;
    t->q_samples[i] = j ? w->cum[j - 1] : 0;
    t->q_time[i] = (double)(qt[i] - w->t0) / GS_NS_PER_S;
  }
  free(qt);
  if (rc) {
    free(qv), free(t->q_samples), free(t->q_time);
    t->q_samples = t->q_time = NULL;
    return rc;
  }
  t->q_value = qv, t->qn = n;
  return 0;
}

/* The throughput over the window with its confidence, the step time and data share. */
static void measure_rate(const struct tune_opts *o, const struct runview *v, const struct window *w,
                         struct tune_trial *t, double *samples_per_s) {
  size_t m = w->last - w->first;
  double *x = calloc(m + 1, sizeof *x), *sec = calloc(m + 1, sizeof *sec);
  double sx = 0, st_sum = 0, sd = 0, sd_t = 0;
  int have_samples = 1;
  for (size_t i = 0; x && sec && i < m; i++) {
    const struct runview_step *s = &v->steps[w->first + i];
    sec[i] = s->total, x[i] = s->samples;
    if (!isfinite(x[i]))
      have_samples = 0;
    else
      sx += x[i];
    st_sum += sec[i];
    if (isfinite(s->data))
      sd += s->data, sd_t += sec[i];
  }
  *samples_per_s = NAN;
  if (x && sec && m >= 2) {
    if (o->metric == TUNE_STEPS_PER_S || have_samples)
      gs_rate_ci(o->metric == TUNE_STEPS_PER_S ? NULL : x, sec, m, &t->rate, &t->ci, &t->dof);
    t->step_s = st_sum / (double)m;
    if (sd_t > 0)
      t->data_share = sd / sd_t;
    if (have_samples && st_sum > 0)
      *samples_per_s = sx / st_sum;
  }
  free(x), free(sec);
}

static int measure(const struct tune_opts *o, struct store *st, struct tune_trial *t) {
  struct runview v;
  struct window w = {0};
  int rc = runview_load(st, t->run_id[0] ? t->run_id : t->run_name, &v);
  if (rc) {
    rc = gs_fail(rc == GS_ENOENT ? GS_ENOENT : GS_EIO, "the trial's run %s: %s", t->run_name, gs_last_error());
    goto fail;
  }
  snprintf(t->run_id, sizeof t->run_id, "%s", v.run.id);
  struct runview_stats n;
  runview_stats(&v, "client", "step.n", "", INT64_MIN, INT64_MAX, &n);
  t->steps_run = (long)n.n;
  if ((rc = window_find(o, &v, t, &w)))
    goto fail;
  t->steps_measured = (long)(w.last - w.first);
  if (w.last) {
    t->samples_seen = w.cum[w.last - 1];
    t->window_s = (double)(v.steps[w.last - 1].t - w.t0) / GS_NS_PER_S;
  }
  double sps;
  measure_rate(o, &v, &w, t, &sps);
  if (t->steps_measured >= 2) {
    const struct runview_step *a = &v.steps[w.first];
    char want[112];
    int index = t->gpu[0] && strspn(t->gpu, "0123456789") == strlen(t->gpu);
    snprintf(want, sizeof want, "gpu=%s", t->gpu);
    measure_gpus(&v, a->t - (int64_t)(a->total * GS_NS_PER_S), v.steps[w.last - 1].t, o->interval_ns,
                 index ? want : NULL, t, sps);
  }
  if (isnan(t->peak_mem))
    measure_host_memory(o, &v, t);
  t->margin_ok = isfinite(t->peak_mem) && isfinite(t->mem_limit) && t->mem_limit > 0
                     ? t->peak_mem <= TUNE_MARGIN * t->mem_limit
                     : -1;
  rc = quality_points(o, &v, &w, t);
fail:
  free(w.cum);
  runview_done(&v);
  return rc;
}

/* Marks the trial failed with every figure unknown, names its run and writes its tags
 * ("tune=NAME,trial=K", each parameter whose value a tag can hold, and gpu=G) into tags. */
static void trial_reset(const struct tune_opts *o, struct tune_trial *t, int k, char *tags, size_t n) {
  t->status = TUNE_FAILED;
  t->exit_status = -1;
  t->rate = t->ci = t->step_s = t->data_share = t->gpu_util = t->peak_mem = t->mem_limit = NAN;
  t->energy_per_sample = t->samples_seen = t->window_s = NAN;
  t->margin_ok = -1;
  tune_lr_for(o, t->config, &t->lr, &t->lr_warmup);
  snprintf(t->run_name, sizeof t->run_name, "%s/%02d", o->name, k + 1);
  int off = snprintf(tags, n, "tune=%s,trial=%d", o->name, k + 1);
  for (int i = 0; i < o->nparams && off > 0 && off < (int)n; i++) {
    const char *v = o->params[i].values[t->config[i]];
    if (!strchr(v, ',') && v[0] != '=')
      off += snprintf(tags + off, n - (size_t)off, ",%s=%s", o->params[i].name, v);
  }
  if (t->gpu[0] && !strchr(t->gpu, ',') && off > 0 && off < (int)n)
    snprintf(tags + off, n - (size_t)off, ",gpu=%s", t->gpu);
}

/* One poll of a running trial's agent: passes a signal to tune on (the trial is in its own session,
 * so only tune gets the terminal's ^C) and stops it with SIGTERM at --seconds or at the budget's
 * deadline (p->termed, p->interrupted). The agent kills a job that ignores the stop after the grace.
 * The stop is sent once more a second after that, for an agent that had not yet taken over its
 * signals when the first came (the child runs tune's handler until the agent's setup); an agent still
 * there AGENT_GRACE_NS after that second grace is killed with its session and every process below it
 * (p->agent_killed). Returns 1 once the agent has exited, else 0. */
int tune_trial_poll(const struct tune_opts *o, struct tune_proc *p, int64_t deadline_ns) {
  int ws = 0;
  pid_t got = waitpid(p->pid, &ws, WNOHANG);
  if (got == p->pid || (got < 0 && errno != EINTR)) /* ECHILD: reaped with another trial's leftovers */
    return 1;
  int64_t now = gs_mono_ns(), g = grace_ns(o);
  if (tune_sigint != p->seen) {
    p->seen = tune_sigint;
    p->interrupted = 1;
    kill(p->pid, tune_sigint_signo ? tune_sigint_signo : SIGINT); /* the agent passes it on */
    if (!p->stop_at)
      p->stop_at = now, p->stop_sig = tune_sigint_signo ? tune_sigint_signo : SIGINT;
  }
  if (!p->termed &&
      ((o->seconds > 0 && now - p->t0 >= (int64_t)(o->seconds * GS_NS_PER_S)) || (deadline_ns && now >= deadline_ns))) {
    kill(p->pid, SIGTERM); /* the agent passes it to the job and closes the run */
    p->termed = 1;
    if (!p->stop_at)
      p->stop_at = now, p->stop_sig = SIGTERM;
  }
  if (p->stop_at && !p->resent && now - p->stop_at >= g + GS_NS_PER_S) {
    kill(p->pid, p->stop_sig);
    p->resent = 1;
  }
  if (p->stop_at && !p->agent_killed && now - p->stop_at >= 2 * g + GS_NS_PER_S + AGENT_GRACE_NS) {
    pid_t *tree = NULL;
    int n = collect_list_descendants(p->pid, &tree);
    kill(-p->pid, SIGKILL); /* the session's process group: the agent and what did not leave it */
    for (int i = 0; i < n; i++)
      kill(tree[i], SIGKILL);
    free(tree);
    p->agent_killed = 1;
  }
  return 0;
}

/* The command name of pid into buf ("?" when gone), control characters replaced. */
static void proc_comm(pid_t pid, char *buf, size_t n) {
  if (collect_proc_read(NULL, pid, "comm", buf, n) <= 0)
    snprintf(buf, n, "?");
  buf[strcspn(buf, "\n")] = 0;
  for (char *c = buf; *c; c++)
    if ((unsigned char)*c < 32 || *c == 127)
      *c = '?';
}

/* Whether pid's environment says it belongs to trial `mark` (GPUSCOPE_TUNE_TRIAL=mark, which every
 * process of a trial's job inherits however it detached). */
static int proc_of_trial(pid_t pid, int mark) {
  char want[48], buf[65536];
  int n = snprintf(want, sizeof want, "GPUSCOPE_TUNE_TRIAL=%d", mark);
  ssize_t got = collect_proc_read(NULL, pid, "environ", buf, sizeof buf);
  for (ssize_t i = 0; i < got;) { /* NUL-separated NAME=VALUE entries */
    size_t len = strnlen(buf + i, (size_t)(got - i));
    if (len == (size_t)n && !memcmp(buf + i, want, (size_t)n))
      return 1;
    i += (ssize_t)len + 1;
  }
  return 0;
}

/* The kernel's OOM kills so far in tune's cgroup (every layout's count, collect/); -1 unknown. */
static long trial_oom_kills(void) {
  struct collect_oom m;
  return collect_cgroup_oom(NULL, 0, &m) ? -1 : (long)m.kills;
}

/* Reaps tune's children that have ended (left-behind processes reparented to tune, the subreaper) —
 * only while no other trial runs: waitpid(-1) would take a running trial's agent's status too. */
static void reap_children(int others) {
  int ws;
  while (!others && waitpid(-1, &ws, WNOHANG) > 0)
    ;
}

/* The processes below tune that trial `mark` left (mark 0: every one), into *out (caller frees). */
static int left_list(int mark, pid_t **out) {
  int n = collect_list_descendants(getpid(), out), m = 0;
  for (int i = 0; i < n; i++)
    if (!mark || proc_of_trial((*out)[i], mark))
      (*out)[m++] = (*out)[i];
  return m;
}

/* Waits until trial mark left no process below tune or until ns passed; returns how many are left. */
static int wait_no_left(int mark, int others, int64_t ns) {
  int64_t until = gs_mono_ns() + ns;
  for (;;) {
    reap_children(others);
    pid_t *tree = NULL;
    int n = left_list(mark, &tree);
    free(tree);
    if (n == 0 || gs_mono_ns() >= until)
      return n;
    sleep_ms(20);
  }
}

/* After the agent exited, what the trial left below tune (tune is the subreaper of everything a trial
 * starts): SIGTERM, the grace, then SIGKILL, said in t->cleanup. Alone, every process below tune is
 * the trial's; beside other running trials (others), only those marked with its number. */
static void kill_leftovers(const struct tune_opts *o, struct tune_trial *t, int mark) {
  reap_children(mark);
  pid_t *tree = NULL;
  int n = left_list(mark, &tree);
  if (n <= 0) {
    free(tree);
    return;
  }
  char names[256] = "";
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    if (i < LEFT_NAMED) {
      char comm[32];
      proc_comm(tree[i], comm, sizeof comm);
      int w = snprintf(names + off, sizeof names - off, "%s%s (pid %d)", i ? ", " : "", comm, (int)tree[i]);
      if (w > 0 && (size_t)w < sizeof names - off)
        off += (size_t)w;
    }
    kill(tree[i], SIGTERM);
  }
  free(tree);
  int left = wait_no_left(mark, mark, grace_ns(o));
  for (int round = 0; left > 0 && round < 50; round++) { /* SIGKILL until none: a forking one converges */
    tree = NULL;
    int m = left_list(mark, &tree);
    for (int i = 0; i < m; i++)
      kill(tree[i], SIGKILL);
    free(tree);
    left = wait_no_left(mark, mark, GS_NS_PER_S / 10);
  }
  size_t len = strlen(t->cleanup);
  snprintf(t->cleanup + len, sizeof t->cleanup - len, "%s%s %d process%s the trial left running: %s%s%s",
           len ? "; " : "", left ? "could not kill all of" : "killed", n, n == 1 ? "" : "es", names,
           n > LEFT_NAMED ? ", ..." : "", left ? " (some are still there)" : "");
}

/* Whether the job was stopped by the agent at its steps or samples (a clean end of the trial). */
static int reached_end(const struct tune_opts *o, const struct tune_trial *t) {
  if (o->samples > 0)
    return isfinite(t->samples_seen) && t->samples_seen >= o->samples;
  return o->seconds <= 0 && t->steps_run >= o->warmup + t->target_steps;
}

/* Sets the measured trial's status and reason from how the job ended: status is its exit status, end
 * the end of its log (NULL when unread), kills0 the cgroup's OOM kills before it started. */
static void trial_classify(const struct tune_opts *o, struct tune_trial *t, int status, int termed, int interrupted,
                           const char *end, long kills0) {
  long kills1 = kills0 >= 0 ? trial_oom_kills() : -1;
  int asked = termed || ((status == 128 + SIGTERM || status == 128 + SIGKILL) && reached_end(o, t));
  int by_us = asked || interrupted;
  char line[256];
  if (by_us && status == 128 + SIGKILL) {
    size_t len = strlen(t->cleanup);
    snprintf(t->cleanup + len, sizeof t->cleanup - len, "%sthe job ignored SIGTERM: killed after the %.1f s grace",
             len ? "; " : "", (double)grace_ns(o) / GS_NS_PER_S);
  }
  if (interrupted) {
    t->status = TUNE_INTERRUPTED;
    snprintf(t->reason, sizeof t->reason, "stopped by %s to tune", tune_signal_name((int)tune_sigint_signo));
  } else if (status == 0 || asked) {
    t->status = TUNE_OK;
    if (!isfinite(t->rate)) {
      t->status = TUNE_FAILED;
      if (t->steps_measured < 2)
        snprintf(t->reason, sizeof t->reason, "%s%ld steps after a warm-up of %ld (need 2 to measure)",
                 termed && o->seconds <= 0 ? "the budget ran out during the trial: " : "", t->steps_measured,
                 o->warmup);
      else
        snprintf(t->reason, sizeof t->reason, "the client's steps carry no samples= (try --metric steps_per_s)");
    }
  } else if (end && oom_line(end, line, sizeof line)) {
    t->status = TUNE_OOM;
    snprintf(t->reason, sizeof t->reason, "%s", line);
  } else if (kills0 >= 0 && kills1 > kills0) { /* the job or one of its workers */
    t->status = TUNE_OOM;
    snprintf(t->reason, sizeof t->reason,
             "the kernel's OOM killer ran during the trial (cgroup oom_kill %ld -> %ld), exit %d", kills0, kills1,
             status);
  } else {
    t->status = TUNE_FAILED;
    if (status > 128)
      snprintf(t->reason, sizeof t->reason, "the job died of signal %d (%s)", status - 128, strsignal(status - 128));
    else
      snprintf(t->reason, sizeof t->reason, "the job exited with status %d", status);
  }
}

int tune_trial_start(const struct tune_opts *o, struct tune_trial *t, int k, int slot, int nslots,
                     struct tune_proc *p) {
  char **argv = NULL, tags[1024];
  memset(p, 0, sizeof *p);
  p->log_fd = p->res_fd = -1;
  p->k = k;
  p->seen = tune_sigint;
  if (o->ngpus > 0) {
    snprintf(t->gpu, sizeof t->gpu, "%s", o->gpus[slot % o->ngpus]);
    snprintf(t->hip, sizeof t->hip, "%s", o->hip[slot % o->ngpus]);
  }
  cpu_set_t cores;
  int pinned = nslots > 1 && !cpu_share(slot, nslots, &cores, t->cpus, sizeof t->cpus);
  trial_reset(o, t, k, tags, sizeof tags);
  if (!(argv = tune_substitute(o, t->config)) || (o->mem_limit > 0 && !(argv = with_limit(argv, o->mem_limit)))) {
    snprintf(t->reason, sizeof t->reason, "out of memory");
    return GS_ENOMEM;
  }
  const char *tmp = getenv("TMPDIR");
  char tpath[600];
  int res[2] = {-1, -1};
  snprintf(tpath, sizeof tpath, "%s/gpuscope-tune-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if ((p->log_fd = mkostemp(tpath, O_CLOEXEC)) < 0) {
    snprintf(t->reason, sizeof t->reason, "cannot create the trial's log in %s: %s", tmp && tmp[0] ? tmp : "/tmp",
             strerror(errno));
    goto fail;
  }
  unlink(tpath); /* the open descriptor is all we need */
  if (pipe2(res, O_CLOEXEC)) {
    snprintf(t->reason, sizeof t->reason, "pipe: %s", strerror(errno));
    goto fail;
  }
  p->kills0 = trial_oom_kills();
  p->t0 = gs_mono_ns();
  fflush(NULL);
  if ((p->pid = spawn(o, t, k, argv, tags, p->log_fd, res[1], pinned ? &cores : NULL)) < 0) {
    snprintf(t->reason, sizeof t->reason, "fork: %s", strerror(errno));
    goto fail;
  }
  close(res[1]);
  p->res_fd = res[0];
  tune_argv_free(argv);
  return 0;
fail:
  if (p->log_fd >= 0)
    close(p->log_fd);
  if (res[0] >= 0)
    close(res[0]), close(res[1]);
  p->log_fd = -1;
  tune_argv_free(argv);
  return GS_EIO;
}

/* Reads the agent's answer, the end of the log, and measures the run. Returns 0 or a GS_E code when
 * the store cannot be used. */
static int trial_read(const struct tune_opts *o, struct tune_trial *t, struct tune_proc *p) {
  char msg[96] = "", id[32] = "";
  ssize_t got = read(p->res_fd, msg, sizeof msg - 1);
  int arc = 1, status = -1, rc = 0;
  if (got <= 0 || sscanf(msg, "%d %d %31s", &arc, &status, id) != 3)
    arc = 1;
  char *end = malloc(8192);
  if (end)
    log_end(p->log_fd, end, 8192);
  tail_lines(end ? end : "", t->tail, sizeof t->tail);
  if (arc) {
    snprintf(t->reason, sizeof t->reason, "the agent could not run the trial (see its output)");
    goto fail;
  }
  t->exit_status = status;
  snprintf(t->run_id, sizeof t->run_id, "%s", id);
  struct store *st = store_open(o->store_url);
  if (!st) {
    rc = GS_ESTORE;
    snprintf(t->reason, sizeof t->reason, "%s", gs_last_error());
    goto fail;
  }
  int mrc = measure(o, st, t);
  st->close(st);
  if (mrc) {
    snprintf(t->reason, sizeof t->reason, "%s", gs_last_error());
    goto fail;
  }
  trial_classify(o, t, status, p->termed, p->interrupted, end, p->kills0);
fail:
  free(end);
  return rc;
}

int tune_trial_finish(const struct tune_opts *o, struct tune_trial *t, struct tune_proc *p, int others) {
  if (p->agent_killed)
    snprintf(t->cleanup, sizeof t->cleanup,
             "the agent did not end %.0f s after the job's SIGKILL: killed with its session",
             (double)AGENT_GRACE_NS / GS_NS_PER_S);
  kill_leftovers(o, t, others ? p->k + 1 : 0);
  int rc = trial_read(o, t, p);
  if (t->status == TUNE_OK)
    t->tail[0] = 0;
  close(p->log_fd);
  close(p->res_fd);
  p->log_fd = p->res_fd = -1;
  return rc;
}

int tune_trial_run(const struct tune_opts *o, struct tune_trial *t, int k, int64_t deadline_ns) {
  struct tune_proc p;
  int rc = tune_trial_start(o, t, k, 0, 1, &p);
  if (rc)
    return rc == GS_ENOMEM ? rc : 0;
  while (!tune_trial_poll(o, &p, deadline_ns))
    sleep_ms(20);
  return tune_trial_finish(o, t, &p, 0);
}

/* The newest run of the group named NAME/KK, complete (not running), or -1 in *found. */
static int stored_run(struct store *st, const struct tune_opts *o, const char *name, struct store_run *out) {
  struct store_run *runs = NULL;
  size_t n = 0;
  int found = 0;
  if (st->runs_list(st, &runs, &n))
    return GS_EIO;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(runs[i].group, o->name) && !strcmp(runs[i].name, name) && strcmp(runs[i].status, "running") &&
        runs[i].end_wall_ns > 0 && (!found || runs[i].start_wall_ns > out->start_wall_ns))
      *out = runs[i], found = 1;
  free(runs);
  return found ? 0 : GS_ENOENT;
}

/* The value of key among kv[0..n), or NULL. */
static const char *kv_value(const struct gs_kv *kv, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(kv[i].key, key))
      return kv[i].value ? kv[i].value : "";
  return NULL;
}

/* Whether run id's recorded spec — the gpuscope version and every argument of the tune that ran it
 * (tune.version, tune.argc, tune.argv.N) — is this sweep's. 1 when it is; 0 with why (n bytes) when
 * not, or when it cannot be read. */
static int spec_matches(const struct tune_opts *o, struct store *st, const char *id, char *why, size_t n) {
  struct gs_kv *kv = NULL;
  size_t nkv = 0;
  if (st->params_read(st, id, &kv, &nkv))
    return snprintf(why, n, "its params cannot be read"), 0;
  const char *version = kv_value(kv, nkv, "tune.version"), *argc = kv_value(kv, nkv, "tune.argc");
  char key[32], num[16];
  snprintf(num, sizeof num, "%d", o->nspec);
  snprintf(why, n, "%s", "");
  if (o->version && (!version || strcmp(version, o->version)))
    snprintf(why, n, "gpuscope %.40s ran it, this is %.40s", version ? version : "of unknown version", o->version);
  else if (!argc || strcmp(argc, num))
    snprintf(why, n, "its tune had %.12s arguments, this one %d", argc ? argc : "no recorded", o->nspec);
  for (int i = 0; i < o->nspec && !why[0]; i++) {
    snprintf(key, sizeof key, "tune.argv.%d", i);
    const char *v = kv_value(kv, nkv, key);
    if (!v || strcmp(v, o->spec[i]))
      snprintf(why, n, "argument %d of its tune was '%.60s', now '%.60s'", i + 1, v ? v : "(none)", o->spec[i]);
  }
  store_kv_free(kv, nkv);
  return !why[0];
}

int tune_trial_resume(const struct tune_opts *o, struct store *st, struct tune_trial *t, int k, char *why,
                      size_t whylen) {
  char tags[1024], label[512], want[600];
  why[0] = 0;
  struct tune_trial saved = *t;
  trial_reset(o, t, k, tags, sizeof tags);
  struct store_run run;
  if (stored_run(st, o, t->run_name, &run))
    goto again;
  /* The stored trial must be this configuration: its tags name its values. */
  tune_config_label(o, t->config, label, sizeof label);
  for (int i = 0; i < o->nparams; i++) {
    snprintf(want, sizeof want, ",%s=%s,", o->params[i].name, o->params[i].values[t->config[i]]);
    char have[sizeof run.tags + 2];
    snprintf(have, sizeof have, ",%s,", run.tags);
    if (!strchr(o->params[i].values[t->config[i]], ',') && !strstr(have, want))
      goto again;
  }
  char spec_why[256];
  if (!spec_matches(o, st, run.id, spec_why, sizeof spec_why)) {
    snprintf(why, whylen, "run %s in the store is not reused, it runs again: %s", run.id, spec_why);
    goto again;
  }
  snprintf(t->run_id, sizeof t->run_id, "%s", run.id);
  snprintf(t->gpu, sizeof t->gpu, "%s", saved.gpu);
  if (measure(o, st, t))
    goto again;
  t->exit_status = run.exit_code;
  trial_classify(o, t, run.exit_code, 0, 0, NULL, -1);
  if (t->status != TUNE_OK)
    goto again;
  t->resumed = 1;
  return 1;
again: /* not complete in the store: the trial runs again */
  free(t->q_samples), free(t->q_time), free(t->q_value);
  *t = saved;
  return 0;
}
