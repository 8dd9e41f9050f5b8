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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "collect/collect.h"
#include "core/core.h"
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

/* The kernel's OOM kills so far in our cgroup (v2 memory.events oom_kill), or -1 when unknown. */
static long cgroup_oom_kills(void) {
  char line[1024], path[1200];
  FILE *f = fopen("/proc/self/cgroup", "r");
  long n = -1;
  if (!f)
    return -1;
  path[0] = 0;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "0::", 3)) {
      line[strcspn(line, "\n")] = 0;
      snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.events", line + 3);
    }
  fclose(f);
  if (!path[0] || !(f = fopen(path, "r")))
    return -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "oom_kill %ld", &n) == 1)
      break;
  fclose(f);
  return n;
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

/* Runs the trial's job under the agent in a child; returns the child pid (or -1). The child writes
 * "rc job_status\n" into res_fd and its own error, if any, into the log. */
static pid_t spawn(const struct tune_opts *o, struct tune_trial *t, char **argv, const char *tags, int log_fd,
                   int res_fd) {
  pid_t pid = fork();
  if (pid)
    return pid;
  /* Its own session: a terminal's ^C reaches tune alone (which passes it on), and the session's
   * process group can be killed whole. The job reads nothing from the terminal tune runs in. */
  setsid();
  int null = open("/dev/null", O_RDONLY);
  if (null >= 0)
    dup2(null, 0), close(null);
  dup2(log_fd, 1);
  dup2(log_fd, 2);
  for (int i = 0; i < o->nparams; i++) {
    char key[TUNE_MAX_NAME + 32];
    int k = snprintf(key, sizeof key, "GPUSCOPE_PARAM_");
    for (const char *c = o->params[i].name; *c && k < (int)sizeof key - 1; c++)
      key[k++] = (char)toupper((unsigned char)*c);
    key[k] = 0;
    setenv(key, o->params[i].values[t->config[i]], 1);
  }
  struct agent_opts ao = {.argv = argv,
                          .name = t->run_name,
                          .tags = tags,
                          .group = o->name,
                          .interval_ns = o->interval_ns,
                          .store_url = o->store_url,
                          .root = "/",
                          .quiet = 1,
                          .log_max = o->log_max,
                          .stop_after_steps = o->seconds > 0 ? 0 : o->warmup + t->target_steps,
                          .stop_grace_ns = grace_ns(o)};
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

/* ---- measuring from the store ---- */

struct arr {
  int64_t *t;
  double *v;
  size_t n;
};

static void arr_load(struct store *st, const struct store_series *s, size_t ns, const char *src, const char *name,
                     const char *labels, struct arr *a) {
  memset(a, 0, sizeof *a);
  long i = store_series_find(s, ns, src, name, labels);
  if (i >= 0 && store_samples_load(st, s[i].id, &a->t, &a->v, &a->n)) {
    free(a->t), free(a->v);
    memset(a, 0, sizeof *a);
  }
}

static void arr_free(struct arr *a) {
  free(a->t);
  free(a->v);
}

/* The value of a at time t (the step series share their timestamps), NAN when absent. */
static double at(const struct arr *a, size_t *pos, int64_t t) {
  while (*pos < a->n && a->t[*pos] < t)
    (*pos)++;
  return *pos < a->n && a->t[*pos] == t ? a->v[*pos] : NAN;
}

static void measure_gpus(struct store *st, const struct store_series *s, size_t ns, int64_t from, int64_t to,
                         struct tune_trial *t, double samples_per_s) {
  double util = 0, watts = 0, worst = -1;
  int nutil = 0, nenergy = 0;
  for (size_t i = 0; i < ns; i++) {
    if (strcmp(s[i].source, "nvml"))
      continue;
    struct arr a = {0};
    if (!strcmp(s[i].name, "gpu.util_pct") || !strcmp(s[i].name, "gpu.energy_j") ||
        !strcmp(s[i].name, "gpu.mem_used_bytes")) {
      if (store_samples_load(st, s[i].id, &a.t, &a.v, &a.n))
        continue;
    } else {
      continue;
    }
    double sum = 0, peak = NAN;
    size_t k = 0;
    for (size_t j = 0; j < a.n; j++) {
      if (!isfinite(a.v[j]))
        continue;
      if (!(a.v[j] <= peak))
        peak = a.v[j];
      if (a.t[j] < from || a.t[j] > to)
        continue;
      sum += a.v[j], k++;
    }
    if (!strcmp(s[i].name, "gpu.util_pct") && k)
      util += sum / (double)k, nutil++;
    else if (!strcmp(s[i].name, "gpu.energy_j") && a.n >= 2) {
      /* The counter's slope over the samples that bracket the window (it may be shorter than a tick). */
      size_t i0 = 0, i1 = a.n - 1;
      for (size_t j = 0; j < a.n; j++) {
        if (a.t[j] <= from)
          i0 = j;
        if (a.t[j] >= to) {
          i1 = j;
          break;
        }
      }
      if (i1 > i0 && isfinite(a.v[i0]) && isfinite(a.v[i1]) && a.v[i1] >= a.v[i0])
        watts += (a.v[i1] - a.v[i0]) / ((double)(a.t[i1] - a.t[i0]) / GS_NS_PER_S), nenergy++;
    } else if (!strcmp(s[i].name, "gpu.mem_used_bytes") && isfinite(peak)) {
      long ti = store_series_find(s, ns, "nvml", "gpu.mem_total_bytes", s[i].labels);
      struct arr tot = {0};
      double total = NAN;
      if (ti >= 0 && !store_samples_load(st, s[ti].id, &tot.t, &tot.v, &tot.n) && tot.n)
        total = tot.v[tot.n - 1];
      arr_free(&tot);
      double share = isfinite(total) && total > 0 ? peak / total : NAN;
      if (isnan(t->peak_mem) || (isfinite(share) && share > worst)) {
        t->peak_mem = peak, t->mem_limit = total;
        if (isfinite(share))
          worst = share;
      }
    }
    arr_free(&a);
  }
  if (nutil)
    t->gpu_util = util / nutil;
  if (nenergy && isfinite(samples_per_s) && samples_per_s > 0)
    t->energy_per_sample = watts / samples_per_s;
}

static double series_last(struct store *st, const struct store_series *s, size_t ns, const char *src,
                          const char *name) {
  struct arr a;
  arr_load(st, s, ns, src, name, "", &a);
  double v = a.n ? a.v[a.n - 1] : NAN;
  arr_free(&a);
  return v;
}

static int measure(const struct tune_opts *o, struct store *st, struct tune_trial *t) {
  struct store_run run;
  if (st->run_get(st, t->run_id[0] ? t->run_id : t->run_name, &run))
    return gs_fail(GS_ENOENT, "the trial's run %s is not in the store", t->run_name);
  snprintf(t->run_id, sizeof t->run_id, "%s", run.id);
  struct store_series *s = NULL;
  size_t ns = 0;
  if (st->series_list(st, run.id, &s, &ns))
    return GS_EIO;
  struct arr n, tot, smp, data;
  arr_load(st, s, ns, "client", "step.n", "", &n);
  arr_load(st, s, ns, "client", "step.total_s", "", &tot);
  arr_load(st, s, ns, "client", "step.samples", "", &smp);
  arr_load(st, s, ns, "client", "step.data_s", "", &data);
  t->steps_run = (long)n.n;
  size_t first = (size_t)o->warmup, last = tot.n;
  if (t->target_steps > 0 && first + (size_t)t->target_steps < last)
    last = first + (size_t)t->target_steps;
  size_t m = last > first ? last - first : 0;
  double *x = calloc(m + 1, sizeof *x), *sec = calloc(m + 1, sizeof *sec);
  double sx = 0, st_sum = 0, sd = 0, sd_t = 0;
  size_t ps = 0, pd = 0;
  int have_samples = 1;
  for (size_t i = 0; x && sec && i < m; i++) {
    int64_t ti = tot.t[first + i];
    sec[i] = tot.v[first + i];
    x[i] = at(&smp, &ps, ti);
    double d = at(&data, &pd, ti);
    if (!isfinite(x[i]))
      have_samples = 0;
    else
      sx += x[i];
    st_sum += sec[i];
    if (isfinite(d))
      sd += d, sd_t += sec[i];
  }
  t->steps_measured = (long)m;
  if (x && sec && m >= 2) {
    if (o->metric == TUNE_STEPS_PER_S || have_samples)
      gs_rate_ci(o->metric == TUNE_STEPS_PER_S ? NULL : x, sec, m, &t->rate, &t->ci, &t->dof);
    t->step_s = st_sum / (double)m;
    if (sd_t > 0)
      t->data_share = sd / sd_t;
    int64_t from = tot.t[first] - (int64_t)(sec[0] * GS_NS_PER_S), to = tot.t[last - 1];
    measure_gpus(st, s, ns, from, to, t, have_samples && st_sum > 0 ? sx / st_sum : NAN);
  }
  if (isnan(t->peak_mem)) {
    /* No GPU memory: host memory. --mem-limit is RLIMIT_AS, a limit per process, so its peak is the
     * largest process's resident memory; otherwise the whole job's against the cgroup or the host. */
    for (size_t i = 0; i < ns; i++) {
      int per_proc = o->mem_limit > 0;
      if (strcmp(s[i].source, "proctree") || strcmp(s[i].name, per_proc ? "proc.rss_bytes" : "tree.rss_bytes"))
        continue;
      struct arr rss = {0};
      if (store_samples_load(st, s[i].id, &rss.t, &rss.v, &rss.n) == 0)
        for (size_t j = 0; j < rss.n; j++)
          if (isfinite(rss.v[j]) && !(rss.v[j] <= t->peak_mem))
            t->peak_mem = rss.v[j];
      arr_free(&rss);
    }
    t->mem_limit =
        o->mem_limit > 0 ? (double)o->mem_limit : series_last(st, s, ns, "host", "host.cgroup.mem_limit_bytes");
    if (!isfinite(t->mem_limit))
      t->mem_limit = series_last(st, s, ns, "host", "host.mem.total_bytes");
  }
  t->margin_ok = isfinite(t->peak_mem) && isfinite(t->mem_limit) && t->mem_limit > 0
                     ? t->peak_mem <= TUNE_MARGIN * t->mem_limit
                     : -1;
  free(x), free(sec);
  arr_free(&n), arr_free(&tot), arr_free(&smp), arr_free(&data);
  free(s);
  return 0;
}

/* Marks the trial failed with every figure unknown, names its run and writes its tags
 * ("tune=NAME,trial=K" and each parameter whose value a tag can hold) into tags. */
static void trial_reset(const struct tune_opts *o, struct tune_trial *t, int k, char *tags, size_t n) {
  t->status = TUNE_FAILED;
  t->exit_status = -1;
  t->rate = t->ci = t->step_s = t->data_share = t->gpu_util = t->peak_mem = t->mem_limit = NAN;
  t->energy_per_sample = NAN;
  t->margin_ok = -1;
  snprintf(t->run_name, sizeof t->run_name, "%s/%02d", o->name, k + 1);
  int off = snprintf(tags, n, "tune=%s,trial=%d", o->name, k + 1);
  for (int i = 0; i < o->nparams && off > 0 && off < (int)n; i++) {
    const char *v = o->params[i].values[t->config[i]];
    if (!strchr(v, ',') && v[0] != '=')
      off += snprintf(tags + off, n - (size_t)off, ",%s=%s", o->params[i].name, v);
  }
}

/* Waits for the agent to exit, passing a signal to tune on (the trial is in its own session, so only
 * tune gets the terminal's ^C) and stopping it with SIGTERM at --seconds or at the budget's deadline;
 * sets *termed and *interrupted when it did either. The agent kills a job that ignores the stop after
 * the grace. The stop is sent once more a second after that, for an agent that had not yet taken
 * over its signals when the first came (the child runs tune's handler until the agent's setup); an
 * agent still there AGENT_GRACE_NS after that second grace is killed with its session and every
 * process below it (*agent_killed). */
static void wait_agent(const struct tune_opts *o, pid_t pid, int64_t t0, int64_t deadline_ns, int *termed,
                       int *interrupted, int *agent_killed) {
  int ws = 0, stop_sig = 0, resent = 0;
  sig_atomic_t seen = tune_sigint;
  int64_t stop_at = 0, g = grace_ns(o);
  for (;;) {
    pid_t p = waitpid(pid, &ws, WNOHANG);
    if (p == pid || (p < 0 && errno != EINTR))
      break;
    int64_t now = gs_mono_ns();
    if (tune_sigint != seen) {
      seen = tune_sigint;
      *interrupted = 1;
      kill(pid, tune_sigint_signo ? tune_sigint_signo : SIGINT); /* the agent passes it on */
      if (!stop_at)
        stop_at = now, stop_sig = tune_sigint_signo ? tune_sigint_signo : SIGINT;
    }
    if (!*termed &&
        ((o->seconds > 0 && now - t0 >= (int64_t)(o->seconds * GS_NS_PER_S)) || (deadline_ns && now >= deadline_ns))) {
      kill(pid, SIGTERM); /* the agent passes it to the job and closes the run */
      *termed = 1;
      if (!stop_at)
        stop_at = now, stop_sig = SIGTERM;
    }
    if (stop_at && !resent && now - stop_at >= g + GS_NS_PER_S) {
      kill(pid, stop_sig);
      resent = 1;
    }
    if (stop_at && !*agent_killed && now - stop_at >= 2 * g + GS_NS_PER_S + AGENT_GRACE_NS) {
      pid_t *tree = NULL;
      int n = collect_list_descendants(pid, &tree);
      kill(-pid, SIGKILL); /* the session's process group: the agent and what did not leave it */
      for (int i = 0; i < n; i++)
        kill(tree[i], SIGKILL);
      free(tree);
      *agent_killed = 1;
    }
    sleep_ms(20);
  }
}

/* The command name of pid into buf ("?" when gone), control characters replaced. */
static void proc_comm(pid_t pid, char *buf, size_t n) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  FILE *f = fopen(path, "r");
  snprintf(buf, n, "?");
  if (f) {
    if (fgets(buf, (int)n, f))
      buf[strcspn(buf, "\n")] = 0;
    fclose(f);
  }
  for (char *c = buf; *c; c++)
    if ((unsigned char)*c < 32 || *c == 127)
      *c = '?';
}

/* Reaps tune's children that have ended (left-behind processes reparented to tune, the subreaper). */
static void reap_children(void) {
  int ws;
  while (waitpid(-1, &ws, WNOHANG) > 0)
    ;
}

/* Waits until no process is left below tune or until ns passed; returns how many are left. */
static int wait_no_descendants(int64_t ns) {
  int64_t until = gs_mono_ns() + ns;
  int n;
  for (;;) {
    reap_children();
    if ((n = collect_count_descendants(getpid())) == 0 || gs_mono_ns() >= until)
      return n;
    sleep_ms(20);
  }
}

/* After the agent exited, every process still below tune was left behind by the trial (tune runs one
 * trial at a time and is their subreaper): SIGTERM, the grace, then SIGKILL, and what was killed is
 * said in t->cleanup. */
static void kill_leftovers(const struct tune_opts *o, struct tune_trial *t) {
  reap_children();
  pid_t *tree = NULL;
  int n = collect_list_descendants(getpid(), &tree);
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
  int left = wait_no_descendants(grace_ns(o));
  for (int round = 0; left > 0 && round < 50; round++) { /* SIGKILL until none: a forking one converges */
    tree = NULL;
    int m = collect_list_descendants(getpid(), &tree);
    for (int i = 0; i < m; i++)
      kill(tree[i], SIGKILL);
    free(tree);
    left = wait_no_descendants(GS_NS_PER_S / 10);
  }
  size_t len = strlen(t->cleanup);
  snprintf(t->cleanup + len, sizeof t->cleanup - len, "%s%s %d process%s the trial left running: %s%s%s",
           len ? "; " : "", left ? "could not kill all of" : "killed", n, n == 1 ? "" : "es", names,
           n > LEFT_NAMED ? ", ..." : "", left ? " (some are still there)" : "");
}

/* Sets the measured trial's status and reason from how the job ended: status is its exit status, end
 * the end of its log (NULL when unread), kills0 the cgroup's OOM kills before it started. */
static void trial_classify(const struct tune_opts *o, struct tune_trial *t, int status, int termed, int interrupted,
                           const char *end, long kills0) {
  long kills1 = cgroup_oom_kills();
  int asked = termed || ((status == 128 + SIGTERM || status == 128 + SIGKILL) &&
                         t->steps_run >= o->warmup + t->target_steps); /* the agent's stop after the steps */
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
             "the kernel's OOM killer ran during the trial (cgroup memory.events oom_kill %ld -> %ld), exit %d", kills0,
             kills1, status);
  } else {
    t->status = TUNE_FAILED;
    if (status > 128)
      snprintf(t->reason, sizeof t->reason, "the job died of signal %d (%s)", status - 128, strsignal(status - 128));
    else
      snprintf(t->reason, sizeof t->reason, "the job exited with status %d", status);
  }
}

int tune_trial_run(const struct tune_opts *o, struct tune_trial *t, int k, int64_t deadline_ns) {
  int rc = 0, log_fd = -1, res[2] = {-1, -1};
  char **argv = NULL, tags[1024], *end = NULL;
  trial_reset(o, t, k, tags, sizeof tags);
  if (!(argv = tune_substitute(o, t->config)) || (o->mem_limit > 0 && !(argv = with_limit(argv, o->mem_limit)))) {
    snprintf(t->reason, sizeof t->reason, "out of memory");
    return GS_ENOMEM;
  }
  const char *tmp = getenv("TMPDIR");
  char tpath[600];
  snprintf(tpath, sizeof tpath, "%s/gpuscope-tune-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if ((log_fd = mkostemp(tpath, O_CLOEXEC)) < 0) {
    snprintf(t->reason, sizeof t->reason, "cannot create the trial's log in %s: %s", tmp && tmp[0] ? tmp : "/tmp",
             strerror(errno));
    goto out;
  }
  unlink(tpath); /* the open descriptor is all we need */
  if (pipe2(res, O_CLOEXEC)) {
    snprintf(t->reason, sizeof t->reason, "pipe: %s", strerror(errno));
    goto out;
  }
  long kills0 = cgroup_oom_kills();
  int64_t t0 = gs_mono_ns();
  fflush(NULL);
  pid_t pid = spawn(o, t, argv, tags, log_fd, res[1]);
  if (pid < 0) {
    snprintf(t->reason, sizeof t->reason, "fork: %s", strerror(errno));
    goto out;
  }
  close(res[1]);
  res[1] = -1;
  int termed = 0, interrupted = 0, agent_killed = 0;
  wait_agent(o, pid, t0, deadline_ns, &termed, &interrupted, &agent_killed);
  if (agent_killed)
    snprintf(t->cleanup, sizeof t->cleanup,
             "the agent did not end %.0f s after the job's SIGKILL: killed with its session",
             (double)AGENT_GRACE_NS / GS_NS_PER_S);
  kill_leftovers(o, t);
  char msg[96] = "", id[32] = "";
  ssize_t got = read(res[0], msg, sizeof msg - 1);
  int arc = 1, status = -1;
  if (got <= 0 || sscanf(msg, "%d %d %31s", &arc, &status, id) != 3)
    arc = 1;
  end = malloc(8192);
  if (end)
    log_end(log_fd, end, 8192);
  tail_lines(end ? end : "", t->tail, sizeof t->tail);
  if (arc) {
    snprintf(t->reason, sizeof t->reason, "the agent could not run the trial (see its output)");
    goto out;
  }
  t->exit_status = status;
  snprintf(t->run_id, sizeof t->run_id, "%s", id);
  struct store *st = store_open(o->store_url);
  if (!st) {
    rc = GS_ESTORE;
    snprintf(t->reason, sizeof t->reason, "%s", gs_last_error());
    goto out;
  }
  int mrc = measure(o, st, t);
  st->close(st);
  if (mrc) {
    snprintf(t->reason, sizeof t->reason, "%s", gs_last_error());
    goto out;
  }
  trial_classify(o, t, status, termed, interrupted, end, kills0);
out:
  free(end);
  if (t->status == TUNE_OK)
    t->tail[0] = 0;
  if (log_fd >= 0)
    close(log_fd);
  if (res[0] >= 0)
    close(res[0]);
  if (res[1] >= 0)
    close(res[1]);
  tune_argv_free(argv);
  return rc;
}
