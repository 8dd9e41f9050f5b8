/* agent/agent: the run loop (see agent.h). One thread samples — a single absolute-time wakeup per
 * tick for all collectors, plus the signal and client descriptors in the same ppoll — and one writer
 * thread moves batches from the sink to the store, so a slow disk never delays a sample. */
#include "agent/agent.h"
#include "agent/agent_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alert/alert.h"
#include "collect/collect.h"
#include "core/core.h"
#include "doctor/doctor.h"
#include "ingest/ingest.h"
#include "report/report.h"
#include "expose/expose.h"
#include "store/store.h"

/* The writer commits early when this many points wait, whatever --flush says (bounds memory). */
#define FLUSH_EARLY_POINTS 65536

struct writer {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop, kicked;
  int64_t flush_ns;
  struct store *st;
  struct store_run *run;
  struct gs_sink *sink;
  struct alert_engine *alerts; /* evaluated after a flush, on this thread's store handle (NULL: none) */
  struct joblog *log;          /* the job's output (NULL: not kept) */
  int failed;                  /* reported once */
};

/* One commit cycle: the job's output first, so that at the last one (final) what it says of the
 * output (joblog_end's params) goes with the samples. */
static void writer_flush(struct writer *w, int final) {
  joblog_flush(w->log, w->st, w->run);
  if (final)
    joblog_end(w->log);
  struct gs_batch *b = gs_sink_take(w->sink);
  if (!b)
    return;
  if (w->st->run_append(w->st, w->run, b) && !w->failed) {
    w->failed = 1;
    fprintf(stderr, "gpuscope: cannot write to the store (%s); samples are kept and written when it can\n",
            gs_last_error());
  }
  gs_batch_free(b);
}

static void *writer_main(void *arg) {
  struct writer *w = arg;
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += w->flush_ns / GS_NS_PER_S;
    until.tv_nsec += w->flush_ns % GS_NS_PER_S;
    if (until.tv_nsec >= GS_NS_PER_S)
      until.tv_sec++, until.tv_nsec -= GS_NS_PER_S;
    while (!w->stop && !w->kicked && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
      ; /* woken without cause: wait on */
    if (w->stop)
      break;
    w->kicked = 0;
    pthread_mutex_unlock(&w->mu);
    writer_flush(w, 0);
    if (w->alerts)
      alert_engine_eval(w->alerts, w->st);
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  writer_flush(w, 1); /* whatever is left */
  return NULL;
}

static int writer_start(struct writer *w) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&w->mu, NULL);
  return pthread_create(&w->thread, NULL, writer_main, w) ? gs_fail(GS_EIO, "cannot start the writer thread") : 0;
}

/* Called by the sampling loop each tick: asks for an early commit when the sink holds many points. */
static void writer_kick(struct writer *w) {
  if (gs_sink_pending(w->sink) < FLUSH_EARLY_POINTS)
    return;
  pthread_mutex_lock(&w->mu);
  w->kicked = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void writer_stop(struct writer *w) {
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
}

/* ---- signals ---- */

/* Signals gpuscope passes on to the job when they are sent to gpuscope itself. Every one of them
 * would otherwise kill gpuscope and orphan the job. */
static const int FORWARDED[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
#define N_FORWARDED (sizeof FORWARDED / sizeof *FORWARDED)

/* The dispositions gpuscope was started with, so the job gets them back: a signal inherited as
 * ignored (nohup, `trap '' HUP`, a shell's background job) stays ignored for the job, and gpuscope
 * ignores it too instead of forwarding it. */
struct sigstate {
  int ignored[N_FORWARDED];
  struct sigaction pipe_old, chld_old;
  sigset_t mask, orig; /* what the signalfd reads; the mask before */
  int fd;
};

static int sig_was_ignored(int sig) {
  struct sigaction sa;
  return sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

/* Blocks the forwarded signals (those not inherited as ignored) and SIGCHLD, reads them through a
 * signalfd, and ignores SIGPIPE (a closed stderr must not kill gpuscope). Returns 0, or GS_EIO with a
 * message (the dispositions and mask are then as they were). */
static int sig_setup(struct sigstate *ss, int winch) {
  sigemptyset(&ss->mask);
  sigaddset(&ss->mask, SIGCHLD);
  if (winch) /* the job's pseudo-terminal follows the agent's terminal's size */
    sigaddset(&ss->mask, SIGWINCH);
  for (size_t i = 0; i < N_FORWARDED; i++)
    if (!(ss->ignored[i] = sig_was_ignored(FORWARDED[i])))
      sigaddset(&ss->mask, FORWARDED[i]);
  struct sigaction ign = {.sa_handler = SIG_IGN}, dfl = {.sa_handler = SIG_DFL};
  sigaction(SIGPIPE, &ign, &ss->pipe_old);
  sigaction(SIGCHLD, &dfl, &ss->chld_old); /* an inherited SIG_IGN would reap the job behind our back */
  sigprocmask(SIG_BLOCK, &ss->mask, &ss->orig);
  ss->fd = signalfd(-1, &ss->mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (ss->fd < 0) {
    int e = errno;
    sigprocmask(SIG_SETMASK, &ss->orig, NULL);
    sigaction(SIGPIPE, &ss->pipe_old, NULL);
    sigaction(SIGCHLD, &ss->chld_old, NULL);
    return gs_fail(GS_EIO, "cannot watch signals (signalfd: %s)", strerror(e));
  }
  return GS_OK;
}

static void sig_done(struct sigstate *ss) {
  if (ss->fd < 0)
    return;
  close(ss->fd);
  ss->fd = -1;
  sigprocmask(SIG_SETMASK, &ss->orig, NULL);
  sigaction(SIGPIPE, &ss->pipe_old, NULL);
  sigaction(SIGCHLD, &ss->chld_old, NULL);
}

/* In the job, before exec: the dispositions and mask gpuscope was started with. */
static void sig_restore_for_job(const struct sigstate *ss) {
  struct sigaction dfl = {.sa_handler = SIG_DFL}, ign = {.sa_handler = SIG_IGN};
  for (size_t i = 0; i < N_FORWARDED; i++)
    sigaction(FORWARDED[i], ss->ignored[i] ? &ign : &dfl, NULL);
  sigaction(SIGPIPE, ss->pipe_old.sa_handler == SIG_IGN ? &ign : &dfl, NULL);
  sigaction(SIGCHLD, ss->chld_old.sa_handler == SIG_IGN ? &ign : &dfl, NULL);
  sigprocmask(SIG_SETMASK, &ss->orig, NULL);
}

/* Sends sig to the job and every process of its tree (gpuscope is their subreaper, so orphans are
 * ours too): a job behind `sh -c` or a launcher script must not leave its real work running. */
static void sig_forward(pid_t job, int sig) {
  pid_t *tree = NULL;
  int n = collect_list_descendants(getpid(), &tree);
  if (job > 0)
    kill(job, sig);
  for (int i = 0; i < n; i++)
    if (tree[i] != job)
      kill(tree[i], sig);
  free(tree);
}

/* ---- launching the job ---- */

static void join_argv(char *const *argv, char *buf, size_t n) {
  size_t off = 0;
  buf[0] = 0;
  for (int i = 0; argv[i] && off + 1 < n; i++) {
    int quote = strpbrk(argv[i], " \t'\"") != NULL || !*argv[i];
    int w = snprintf(buf + off, n - off, "%s%s%s%s", i ? " " : "", quote ? "'" : "", argv[i], quote ? "'" : "");
    if (w < 0)
      break;
    off += (size_t)w;
  }
}

/* Forks and execs the job with the signal dispositions and mask gpuscope started with. An exec
 * failure comes back through a close-on-exec pipe as errno, so "not found" (127) and "not
 * executable" (126) are told apart. */
static pid_t launch(char *const *argv, const struct sigstate *ss, const struct joblog *log, int *exec_errno) {
  int pfd[2];
  *exec_errno = 0;
  if (pipe2(pfd, O_CLOEXEC))
    return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(pfd[0]), close(pfd[1]);
    return -1;
  }
  if (pid == 0) {
    close(pfd[0]);
    sig_restore_for_job(ss);
    if (log)
      joblog_child(log);
    execvp(argv[0], argv);
    int e = errno;
    ssize_t wr = write(pfd[1], &e, sizeof e);
    (void)wr;
    _exit(e == ENOENT ? 127 : 126);
  }
  close(pfd[1]);
  ssize_t r;
  do
    r = read(pfd[0], exec_errno, sizeof *exec_errno);
  while (r < 0 && errno == EINTR);
  if (r != (ssize_t)sizeof *exec_errno)
    *exec_errno = 0;
  close(pfd[0]);
  return pid;
}

static int shell_status(int wstatus) {
  if (WIFEXITED(wstatus))
    return WEXITSTATUS(wstatus);
  if (WIFSIGNALED(wstatus))
    return 128 + WTERMSIG(wstatus);
  return 1;
}

/* ---- live status line ---- */

struct live {
  int on;
  int64_t start;
};

/* The latest value of a series, NAN while it has none. Looked up at each print: a collector may
 * declare its series only once it has a first value (host CPU needs two reads). */
static double live_last(struct gs_sink *s, const char *source, const char *name, const char *labels) {
  return gs_sink_last(s, gs_sink_find(s, source, name, labels));
}

/* A percentage for the live line, "—" when the collector has no value (yet, or ever). */
static const char *live_pct(char *buf, size_t n, double v) {
  if (isfinite(v))
    snprintf(buf, n, "%.0f%%", v);
  else
    snprintf(buf, n, "—");
  return buf;
}

/* The GPUs' util for the live line: one figure per GPU ("GPU — 70%"), "—" for a GPU without util (a
 * MIG GPU, one not read yet, one lost), up to LIVE_GPUS of them; past that the mean of those known
 * and how many are not. The count is the agent's gpu.count param, else the GPUs with a util series. */
#define LIVE_GPUS 8
static int live_gpus(struct gs_sink *s, char *line, size_t n) {
  char cnt[16];
  int ngpus = gs_sink_param_get(s, "gpu.count", cnt, sizeof cnt) ? atoi(cnt) : 0;
  if (ngpus <= 0 || ngpus > 1024) {
    ngpus = 0;
    for (char lab[16]; ngpus < 64; ngpus++) {
      snprintf(lab, sizeof lab, "gpu=%d", ngpus);
      if (gs_sink_find(s, "nvml", "gpu.util_pct", lab) < 0)
        break;
    }
  }
  if (!ngpus)
    return 0;
  double sum = 0;
  int known = 0, off = snprintf(line, n, "  GPU");
  for (int g = 0; g < ngpus && off >= 0 && (size_t)off < n; g++) {
    char lab[16], v[16];
    snprintf(lab, sizeof lab, "gpu=%d", g);
    int id = gs_sink_find(s, "nvml", "gpu.util_pct", lab);
    double u = id >= 0 ? gs_sink_last(s, id) : NAN;
    if (isfinite(u))
      sum += u, known++;
    if (ngpus <= LIVE_GPUS)
      off += snprintf(line + off, n - (size_t)off, " %s", live_pct(v, sizeof v, u));
  }
  if (ngpus > LIVE_GPUS && off >= 0 && (size_t)off < n) {
    char v[16];
    off += snprintf(line + off, n - (size_t)off, " %s mean of %d", live_pct(v, sizeof v, known ? sum / known : NAN),
                    ngpus);
    if (known < ngpus)
      off += snprintf(line + off, n - (size_t)off, " (%d —)", ngpus - known);
  }
  return off;
}

static void live_print(struct live *l, struct gs_sink *s, int64_t now) {
  char el[32], mem[32], rss[32], pct[16], line[512], gpus[256];
  double cpu = live_last(s, "host", "host.cpu.busy_pct", "cpu=total");
  double cg = live_last(s, "host", "host.cgroup.cpu_used_pct_of_limit", "");
  double m = live_last(s, "host", "host.mem.used_bytes", "");
  double tc = live_last(s, "proctree", "tree.cpu_pct", ""), tr = live_last(s, "proctree", "tree.rss_bytes", "");
  int off = snprintf(line, sizeof line, "\r[gpuscope] %s  CPU %s", gs_fmt_duration(now - l->start, el, sizeof el),
                     live_pct(pct, sizeof pct, cpu));
  if (isfinite(cg))
    off += snprintf(line + off, sizeof line - (size_t)off, " (%.0f%% of quota)", cg);
  if (isfinite(tc))
    off += snprintf(line + off, sizeof line - (size_t)off, "  job %.0f%% CPU %s", tc,
                    isfinite(tr) ? gs_fmt_bytes(tr, rss, sizeof rss) : "—");
  if (isfinite(m))
    off += snprintf(line + off, sizeof line - (size_t)off, "  mem %s", gs_fmt_bytes(m, mem, sizeof mem));
  if (live_gpus(s, gpus, sizeof gpus) > 0)
    snprintf(line + off, sizeof line - (size_t)off, "%s", gpus);
  fprintf(stderr, "%s\033[K", line);
  fflush(stderr);
}

/* ---- the run ---- */

struct opened {
  const struct collector *c;
  void *ctx;
};

static void run_fill(struct store_run *r, const struct agent_opts *o) {
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", o->name ? o->name : "");
  snprintf(r->tags, sizeof r->tags, "%s", o->tags ? o->tags : "");
  snprintf(r->group, sizeof r->group, "%s", o->group ? o->group : "");
  if (o->attach_pid > 0)
    agent_attach_command(o->attach_pid, r->command, sizeof r->command);
  else
    join_argv(o->argv, r->command, sizeof r->command);
  agent_run_fill_here(r, o->interval_ns);
}

static void tags_to_params(struct gs_sink *s, const char *tags) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", tags ? tags : "");
  char *save = NULL;
  for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq)
      continue;
    *eq = 0;
    char key[1100];
    snprintf(key, sizeof key, "tag.%s", kv);
    gs_sink_param(s, key, eq + 1);
  }
}

/* ---- attach mode: see agent.h and attach.c ---- */

static void attach_params(struct gs_sink *s, pid_t pid, const struct ingest *in, const char *err) {
  char v[32];
  snprintf(v, sizeof v, "%d", (int)pid);
  gs_sink_param(s, "attached", "1");
  gs_sink_param(s, "attached.pid", v);
  if (in)
    gs_sink_param(s, "attached.socket", ingest_socket_path(in));
  else
    gs_sink_note(s, "attach: no client channel: %s", err);
}

/* The watched process is gone (how = "exited") or gpuscope was told to stop ("interrupted"). */
static int attach_end(struct gs_sink *s, int *job_status, const char *how) {
  gs_sink_param(s, "attached.end", how);
  *job_status = 0;
  return 1;
}

/* Everything one run holds, so setup, loop and finish can be read apart. */
struct agent {
  const struct agent_opts *o;
  struct collect_oom oom0; /* the cgroup's memory figures at the start (oom.c) */
  struct store *st;
  struct gs_sink *sink;
  struct ingest *in;
  struct opened cols[8];
  size_t ncols;
  struct store_run run;
  struct writer w;
  int writer_on;
  struct sigstate sig;
  pid_t job;
  int exec_errno, job_done, waiting_tree, stop_sent;
  int64_t stop_at;                   /* when the job was first asked to stop (0: never), for o->stop_grace_ns */
  int stop_killed;                   /* the stop was escalated to SIGKILL */
  int attach;                        /* o->attach_pid > 0: watch a running process, launch nothing */
  struct agent_attach_target target; /* the attached process (pidfd -1 without pidfd_open) */
  int *job_status;
  char no_gpu[256];
  int nvml_open;          /* the GPU collector is on: watch that its data keeps coming */
  int64_t gpu_stalled_at; /* when GPU data stopped (0: it flows) */
  int64_t last_watch;
  struct expose *metrics; /* run --listen: the /metrics endpoint over the sink */
  struct alert_engine *alerts;
  struct joblog *log; /* the job's output, passed on and kept (NULL: not kept) */
};

/* GPU data that stops while the NVML collector is on means a driver call has not returned (the
 * collector samples from its own thread, so nothing else stalls). Say so on the run — a note and
 * the param nvml.data_stopped_at_s that the report reads — rather than let a report judge a run
 * on GPU data that ended early without a word. */
#define GPU_STALL_MIN_NS (5 * GS_NS_PER_S)
#define GPU_STALL_TICKS 10

static void watch_gpu(struct agent *a, int64_t now) {
  if (!a->nvml_open || now - a->last_watch < GS_NS_PER_S)
    return;
  a->last_watch = now;
  int64_t last = gs_sink_source_last_t(a->sink, "nvml");
  if (!last)
    last = a->run.mono_start_ns;
  int64_t limit = GPU_STALL_TICKS * a->o->interval_ns;
  if (limit < GPU_STALL_MIN_NS)
    limit = GPU_STALL_MIN_NS;
  char at[32];
  if (!a->gpu_stalled_at && now - last > limit) {
    a->gpu_stalled_at = last;
    snprintf(at, sizeof at, "%.1f", (double)(last - a->run.mono_start_ns) / GS_NS_PER_S);
    gs_sink_note(a->sink,
                 "nvml: no GPU data after %s s of the run: a driver call has not returned (or no GPU answers); "
                 "GPU figures after that are missing",
                 at);
    gs_sink_param(a->sink, "nvml.data_stopped_at_s", at);
    gs_sink_param(a->sink, "nvml.data_resumed_at_s", ""); /* a stall after a resumption */
    if (!a->o->quiet)
      fprintf(stderr, "%sgpuscope: no GPU data since %s s into the run (a driver call has not returned)\n",
              isatty(2) ? "\r\033[K" : "", at);
  } else if (a->gpu_stalled_at && last > a->gpu_stalled_at) {
    snprintf(at, sizeof at, "%.1f", (double)(last - a->run.mono_start_ns) / GS_NS_PER_S);
    gs_sink_note(a->sink, "nvml: GPU data back at %s s of the run", at);
    gs_sink_param(a->sink, "nvml.data_resumed_at_s", at);
    a->gpu_stalled_at = 0;
  }
}

/* The job's output: kept unless --log-max 0; an attached process's cannot be (why: a note, a param
 * and a line). Returns 0 or GS_EIO with a message (the pipes or the thread cannot be made). */
static int agent_log_setup(struct agent *a) {
  static const char WHY[] = "its stdout and stderr are descriptors of another process, which gpuscope cannot read "
                            "(gpuscope run -- CMD keeps a job's output)";
  if (a->attach) {
    gs_sink_param(a->sink, "log.capture", "off");
    gs_sink_note(a->sink, "attach: the process's output is not kept: %s", WHY);
    if (!a->o->quiet)
      fprintf(stderr, "gpuscope: attach: the process's output is not kept: %s\n", WHY);
    return GS_OK;
  }
  if (a->o->log_max < 0) {
    gs_sink_param(a->sink, "log.capture", "off");
    return GS_OK;
  }
  char err[256] = "";
  int rc = joblog_open(&a->log, a->o->log_max ? a->o->log_max : AGENT_LOG_MAX_DEFAULT, a->sink, err, sizeof err);
  return rc ? gs_fail(rc, "%s", err[0] ? err : gs_last_error()) : GS_OK;
}

/* Opens the store, records the run, the client channel, the signals and the writer. Returns 0 or a
 * GS_E code with a message; GS_ESTORE when the store cannot be opened or written. */
static int agent_setup(struct agent *a) {
  const struct agent_opts *o = a->o;
  int rc;
  char err[256] = "";
  if (a->attach && (rc = agent_attach_open(o->attach_pid, &a->target)))
    return rc;
  if (!(a->st = store_open(o->store_url)))
    return GS_ESTORE;
  if (a->attach && agent_attach_ingest_open(o->attach_pid, &a->in, err, sizeof err) == GS_EBUSY)
    return gs_fail(GS_EBUSY, "attach: %s", err);
  if (!(a->sink = gs_sink_new()))
    return gs_fail(GS_ENOMEM, "out of memory");
  run_fill(&a->run, o);
  if (a->st->run_begin(a->st, &a->run))
    return GS_ESTORE;
  if (a->st->stats.notice[0]) /* the store unreachable from the start: said now, not at the end */
    fprintf(stderr, "gpuscope: %s\n", a->st->stats.notice);
  tags_to_params(a->sink, o->tags);
  for (size_t i = 0; i < o->nparams; i++)
    gs_sink_param(a->sink, o->params[i].key, o->params[i].value);
  agent_provenance(a->sink, a->run.cwd, o->save_diff);
  if (a->attach) {
    attach_params(a->sink, o->attach_pid, a->in, err);
  } else if ((a->in = ingest_open(err, sizeof err))) {
    setenv("GPUSCOPE_SOCKET", ingest_socket_path(a->in), 1);
  } else {
    unsetenv("GPUSCOPE_SOCKET");
    gs_sink_note(a->sink, "client channel off: %s (the job's steps, metrics and params are not recorded)", err);
    fprintf(stderr, "gpuscope: client channel off: %s\n", err);
  }
  setenv("GPUSCOPE_RUN_ID", a->run.id, 1);
  if (!a->attach)
    prctl(PR_SET_CHILD_SUBREAPER, 1);
  if ((rc = agent_log_setup(a)))
    return rc;
  if ((rc = sig_setup(&a->sig, joblog_has_tty(a->log))))
    return rc;
  agent_oom_start(&a->oom0);
  if (o->alerts && alert_config_active(o->alerts)) {
    struct alert_run_info ai = {.run_id = a->run.id,
                                .run_name = a->run.name,
                                .host = a->run.host,
                                .mono_start_ns = a->run.mono_start_ns,
                                .interval_ns = o->interval_ns};
    if (!(a->alerts = alert_engine_new(o->alerts, &ai, a->sink)))
      return GS_EIO;
  }
  a->w = (struct writer){.st = a->st,
                         .run = &a->run,
                         .sink = a->sink,
                         .alerts = a->alerts,
                         .log = a->log,
                         .flush_ns = o->flush_ns ? o->flush_ns : agent_flush_default(o->interval_ns)};
  if ((rc = writer_start(&a->w)))
    return rc;
  a->writer_on = 1;
  if (o->listen &&
      (rc = agent_metrics_start(a->sink, o->listen, o->token, o->host_label, o->interval_ns, o->quiet, &a->metrics)))
    return rc;
  return GS_OK;
}

/* Starts the job and opens the collectors on it. Returns 0 or a GS_E code (the job not started). */
static int agent_start_job(struct agent *a) {
  const struct agent_opts *o = a->o;
  a->job = a->attach ? o->attach_pid : launch(o->argv, &a->sig, a->log, &a->exec_errno);
  if (a->job < 0)
    return gs_fail(GS_EIO, "cannot start %s: %s", o->argv[0], strerror(errno));
  int rc = a->log ? joblog_start(a->log) : GS_OK;
  if (rc)
    return rc;
  if (a->exec_errno) {
    fprintf(stderr, "gpuscope: %s: %s\n", o->argv[0],
            a->exec_errno == ENOENT ? "command not found" : strerror(a->exec_errno));
    int ws;
    waitpid(a->job, &ws, 0);
    *a->job_status = a->exec_errno == ENOENT ? 127 : 126;
    a->job_done = 1;
    return GS_OK;
  }
  struct collector_opts copts = {
      .root = o->root ? o->root : "/", .pid = a->job, .interval_ns = o->interval_ns, .subreaper = !a->attach};
  char err[256];
  for (size_t i = 0; collect_registry[i] && a->ncols < sizeof a->cols / sizeof *a->cols; i++) {
    err[0] = 0;
    void *ctx = collect_registry[i]->open(&copts, a->sink, err, sizeof err);
    if (ctx) {
      a->cols[a->ncols++] = (struct opened){collect_registry[i], ctx};
      a->nvml_open |= collect_registry[i] == &collector_nvml;
      if (collect_registry[i] == &collector_rocm)
        a->no_gpu[0] = 0; /* AMD GPUs only: not "GPUs: none" */
    } else if (err[0]) {
      gs_sink_note(a->sink, "%s collector off: %s", collect_registry[i]->name, err);
      if (collect_registry[i] == &collector_nvml)
        snprintf(a->no_gpu, sizeof a->no_gpu, "%s", err);
    }
  }
  return GS_OK;
}

/* Reads what the signalfd holds: reaps children (the job's end), passes other signals on. */
static void agent_signals(struct agent *a) {
  struct signalfd_siginfo si;
  while (read(a->sig.fd, &si, sizeof si) == (ssize_t)sizeof si) {
    if (a->attach && si.ssi_signo != SIGCHLD) {
      /* Attached: the process is not ours, so a signal is never passed on; it ends the run. */
      if (!a->job_done)
        a->job_done = attach_end(a->sink, a->job_status, "interrupted");
    } else if (si.ssi_signo == SIGWINCH) {
      /* The terminal's new size to the job's pseudo-terminal, then the signal to the job (which had
       * it from the terminal too, perhaps before its size changed). */
      joblog_winch(a->log);
      if (!a->job_done)
        sig_forward(a->job, SIGWINCH);
    } else if (si.ssi_signo == SIGCHLD) {
      int ws;
      pid_t p;
      while ((p = waitpid(-1, &ws, WNOHANG)) > 0)
        if (p == a->job && !a->job_done) {
          *a->job_status = shell_status(ws);
          a->job_done = 1;
          a->waiting_tree = a->o->wait_tree && collect_count_descendants(getpid()) > 0;
        }
    } else if (si.ssi_code != SI_KERNEL && (pid_t)si.ssi_pid != getpid()) {
      /* Sent to gpuscope itself (kill, a scheduler): pass it on to the job's whole tree. A
       * terminal's ^C already reached the job through the process group, so it is not sent twice. */
      if (!a->job_done || a->waiting_tree)
        sig_forward(a->job_done ? 0 : a->job, (int)si.ssi_signo);
      if (!a->stop_at && (si.ssi_signo == SIGINT || si.ssi_signo == SIGTERM || si.ssi_signo == SIGHUP))
        a->stop_at = gs_mono_ns();
    }
  }
}

/* tune's trials: SIGTERM the job once the client numbered o->stop_after_steps steps (the client
 * numbers them from 0, so step N-1 is the N-th), or once those steps times the last step's samples=
 * (the batch) reach o->stop_after_samples. */
static void stop_after_steps(struct agent *a) {
  const struct agent_opts *o = a->o;
  if ((o->stop_after_steps <= 0 && !(o->stop_after_samples > 0)) || a->attach || a->job_done || a->stop_sent)
    return;
  double steps = gs_sink_last(a->sink, gs_sink_find(a->sink, "client", "step.n", "")) + 1;
  double batch =
      o->stop_after_samples > 0 ? gs_sink_last(a->sink, gs_sink_find(a->sink, "client", "step.samples", "")) : NAN;
  int reached = o->stop_after_steps > 0 ? steps >= (double)o->stop_after_steps : steps * batch >= o->stop_after_samples;
  if (reached && (a->stop_sent = !kill(a->job, SIGTERM)) && !a->stop_at)
    a->stop_at = gs_mono_ns();
}

/* tune's trials: a job that ignores its stop (SIGTERM handled and dropped, a hung loader) would hold the
 * tune for ever; after o->stop_grace_ns the job and every process of its tree get SIGKILL, once. */
static void stop_escalate(struct agent *a, int64_t now) {
  if (a->o->stop_grace_ns <= 0 || !a->stop_at || a->stop_killed || a->job_done || a->attach ||
      now - a->stop_at < a->o->stop_grace_ns)
    return;
  a->stop_killed = 1;
  sig_forward(a->job, SIGKILL);
  gs_sink_note(a->sink, "the job was still running %.1f s after it was asked to stop: SIGKILL to it and its tree",
               (double)(now - a->stop_at) / GS_NS_PER_S);
}

/* Samples every tick, drains the client socket, handles signals, until the job (and with
 * --wait-tree its tree) is gone. */
static void agent_loop(struct agent *a) {
  const struct agent_opts *o = a->o;
  struct gs_sink *sink = a->sink;
  struct live live = {.on = !o->quiet && isatty(2), .start = a->run.mono_start_ns};
  int64_t next = gs_mono_ns(), last_live = 0;
  for (;;) {
    int64_t now = gs_mono_ns();
    if (now >= next) {
      for (size_t i = 0; i < a->ncols; i++)
        if (a->cols[i].ctx && a->cols[i].c->sample(a->cols[i].ctx, sink, next) == GS_COLLECT_DISABLE) {
          gs_sink_note(sink, "%s collector switched off during the run", a->cols[i].c->name);
          a->cols[i].c->close(a->cols[i].ctx);
          a->cols[i].ctx = NULL;
          a->nvml_open &= a->cols[i].c != &collector_nvml;
        }
      writer_kick(&a->w);
      watch_gpu(a, now);
      stop_escalate(a, now);
      if (live.on && now - last_live >= GS_NS_PER_S) {
        live_print(&live, sink, now);
        last_live = now;
      }
      next = gs_tick_after(next, now, o->interval_ns); /* fell behind: the missed ticks skipped, on the grid */
      if (a->waiting_tree && collect_count_descendants(getpid()) == 0)
        break;
      if (a->attach && !a->job_done && a->target.pidfd < 0 && agent_attach_gone(&a->target))
        a->job_done = attach_end(sink, a->job_status, "exited");
    }
    if (a->job_done && !a->waiting_tree)
      break;
    int64_t wait_ns = next - gs_mono_ns();
    if (wait_ns < 0)
      wait_ns = 0;
    struct timespec ts = {.tv_sec = wait_ns / GS_NS_PER_S, .tv_nsec = wait_ns % GS_NS_PER_S};
    struct pollfd pf[3] = {{.fd = a->sig.fd, .events = POLLIN},
                           {.fd = a->in ? ingest_fd(a->in) : -1, .events = POLLIN},
                           {.fd = a->job_done ? -1 : a->target.pidfd, .events = POLLIN}};
    int n = ppoll(pf, 3, &ts, NULL);
    if (n <= 0)
      continue;
    if (pf[1].revents & POLLIN) {
      ingest_poll(a->in, sink, gs_mono_ns());
      stop_after_steps(a);
    }
    if (pf[2].revents & (POLLIN | POLLHUP | POLLERR))
      a->job_done = attach_end(sink, a->job_status, "exited");
    if (pf[0].revents & POLLIN)
      agent_signals(a);
  }
  if (live.on)
    fprintf(stderr, "\r\033[K");
}

/* Loads the closed run once into v and stores its diagnosis, with the fresh findings in v->findings
 * for the summary. Returns 0, or the load's GS_E code with its message in why (n bytes); v is valid
 * for runview_done either way. */
static int agent_diagnose(struct agent *a, struct runview *v, char *why, size_t n) {
  int rc = runview_load(a->st, a->run.id, v);
  if (rc) {
    snprintf(why, n, "%s", gs_last_error());
    fprintf(stderr, "gpuscope: diagnosis failed: %s\n", why);
    return rc;
  }
  struct store_finding *f = NULL;
  size_t nf = 0;
  if (doctor_run_view(v, &f, &nf))
    fprintf(stderr, "gpuscope: diagnosis failed: %s\n", gs_last_error());
  if (f || nf) {
    free(v->findings);
    v->findings = f, v->nfindings = nf;
  }
  return GS_OK;
}

/* The end: last samples, collectors closed, the final flush, the run closed with the job's status,
 * the diagnosis and the summary. */
static void agent_finish(struct agent *a) {
  const struct agent_opts *o = a->o;
  int64_t end = gs_mono_ns();
  if (a->in) {
    ingest_poll(a->in, a->sink, end);
    ingest_finish(a->in, a->sink, end);
  }
  for (size_t i = 0; i < a->ncols; i++)
    if (a->cols[i].ctx)
      a->cols[i].c->sample(a->cols[i].ctx, a->sink, end);
  int left = a->attach ? 0 : collect_count_descendants(getpid());
  /* Collector summaries are taken now, then the collectors closed, so a collector with its own
   * thread (NVML) gets its last values into the sink before the writer's final flush. */
  char *col_summary = NULL;
  size_t col_summary_len = 0;
  FILE *mem = open_memstream(&col_summary, &col_summary_len);
  for (size_t i = 0; i < a->ncols; i++) {
    if (mem && a->cols[i].ctx && a->cols[i].c->summary) {
      fprintf(mem, "  ");
      a->cols[i].c->summary(a->cols[i].ctx, mem);
    }
    if (a->cols[i].ctx)
      a->cols[i].c->close(a->cols[i].ctx);
    a->cols[i].ctx = NULL;
  }
  if (mem && a->no_gpu[0])
    fprintf(mem, "  GPUs: none (%s)\n", a->no_gpu);
  if (mem)
    fclose(mem);
  joblog_stop(a->log); /* what the job wrote last, before the last flush */
  writer_stop(&a->w);
  a->writer_on = 0;
  a->run.end_wall_ns = a->run.start_wall_ns + (end - a->run.mono_start_ns);
  a->run.exit_code = a->attach ? -1 : *a->job_status; /* a non-child's exit status is unknowable */
  snprintf(a->run.status, sizeof a->run.status, "%s",
           *a->job_status == 0                      ? "finished"
           : *a->job_status > 128 && !a->exec_errno ? "killed"
                                                    : "failed");
  double oom = agent_oom_end(&a->oom0, a->run.exit_code, a->sink); /* NAN: not OOM-killed */
  if (a->alerts) { /* the job's last alerts; the exit alert, what is still firing resolved, the drain */
    if (alert_engine_last_eval(a->alerts, a->st))
      fprintf(stderr, "gpuscope: alerts: cannot read the run for its last alerts: %s\n", gs_last_error());
    alert_engine_finish(a->alerts, a->run.status, a->run.exit_code, oom);
  }
  if (a->alerts || !isnan(oom))
    writer_flush(&a->w, 0); /* after the writer stopped: the job's output was ended by its last cycle */
  if (a->st->run_end(a->st, &a->run))
    fprintf(stderr, "gpuscope: cannot close the run: %s\n", gs_last_error());
  char unkept[2304];
  if (store_write_summary(a->st, unkept, sizeof unkept))
    fprintf(stderr, "gpuscope: %s\n", unkept);
  struct runview v;
  char why[320];
  int loaded = !agent_diagnose(a, &v, why, sizeof why);
  if (!o->quiet) {
    /* Collector and client lines first, so the summary ends with the diagnosis. */
    if (col_summary)
      fputs(col_summary, stderr);
    if (a->in)
      ingest_summary(a->in, stderr);
    alert_engine_summary(a->alerts, stderr);
    if (left > 0)
      fprintf(stderr, "  %d process%s of the job still running after it exited (use --wait-tree to wait)\n", left,
              left == 1 ? "" : "es");
    if (!loaded)
      fprintf(stderr, "gpuscope: cannot summarise run %s: %s\n", a->run.id, why);
    else
      report_summary(stderr, &v);
  }
  runview_done(&v);
  free(col_summary);
}

int agent_run(const struct agent_opts *o, int *job_status) {
  struct agent a = {
      .o = o, .job_status = job_status, .sig = {.fd = -1}, .attach = o->attach_pid > 0, .target = {.pidfd = -1}};
  *job_status = 1;
  int rc = agent_setup(&a);
  if (!rc)
    rc = agent_start_job(&a);
  if (!rc) {
    agent_loop(&a);
    agent_finish(&a);
  } else if (a.run.id[0] && rc != GS_ESTORE) { /* recorded, but the job never ran: close the run */
    char why[512];
    snprintf(why, sizeof why, "%s", gs_last_error());
    if (a.writer_on)
      writer_stop(&a.w), a.writer_on = 0;
    a.run.end_wall_ns = gs_wall_ns();
    snprintf(a.run.status, sizeof a.run.status, "failed");
    a.st->run_end(a.st, &a.run);
    gs_fail(rc, "%s", why);
  }
  expose_free(a.metrics); /* no scrape reads the sink after this */
  joblog_stop(a.log);
  if (a.writer_on)
    writer_stop(&a.w);
  alert_engine_free(a.alerts); /* after the writer: it evaluates the rules */
  joblog_free(a.log);
  for (size_t i = 0; i < a.ncols; i++)
    if (a.cols[i].ctx)
      a.cols[i].c->close(a.cols[i].ctx);
  ingest_close(a.in);
  sig_done(&a.sig);
  agent_attach_done(&a.target);
  gs_sink_free(a.sink);
  if (a.st)
    a.st->close(a.st);
  return rc;
}
