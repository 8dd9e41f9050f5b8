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

#include "collect/collect.h"
#include "core/core.h"
#include "doctor/doctor.h"
#include "ingest/ingest.h"
#include "report/report.h"
#include "store/store.h"

#define LIVE_NS 1000000000LL
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
  int failed; /* reported once */
};

static void writer_flush(struct writer *w) {
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
    until.tv_sec += w->flush_ns / 1000000000LL;
    until.tv_nsec += w->flush_ns % 1000000000LL;
    if (until.tv_nsec >= 1000000000L)
      until.tv_sec++, until.tv_nsec -= 1000000000L;
    while (!w->stop && !w->kicked && pthread_cond_timedwait(&w->cv, &w->mu, &until) == 0)
      ; /* woken without cause: wait on */
    if (w->stop)
      break;
    w->kicked = 0;
    pthread_mutex_unlock(&w->mu);
    writer_flush(w);
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  writer_flush(w); /* whatever is left */
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

/* Forks and execs the job with the signal mask cleared. An exec failure comes back through a
 * close-on-exec pipe as errno, so "not found" (127) and "not executable" (126) are told apart. */
static pid_t launch(char *const *argv, const sigset_t *orig, int *exec_errno) {
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
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
      sigaction(sigs[i], &dfl, NULL);
    sigprocmask(SIG_SETMASK, orig, NULL);
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
  int cpu, cg_cpu, mem, tree_cpu, tree_rss;
  int64_t start;
};

static void live_print(struct live *l, struct gs_sink *s, int64_t now) {
  char el[32], mem[32], rss[32], line[256];
  int off = snprintf(line, sizeof line, "\r[gpuscope] %s  CPU %.0f%%", gs_fmt_duration(now - l->start, el, sizeof el),
                     gs_sink_last(s, l->cpu));
  double cg = gs_sink_last(s, l->cg_cpu), m = gs_sink_last(s, l->mem), tc = gs_sink_last(s, l->tree_cpu);
  if (isfinite(cg))
    off += snprintf(line + off, sizeof line - (size_t)off, " (%.0f%% of quota)", cg);
  if (isfinite(tc))
    off += snprintf(line + off, sizeof line - (size_t)off, "  job %.0f%% CPU %s", tc,
                    gs_fmt_bytes(gs_sink_last(s, l->tree_rss), rss, sizeof rss));
  if (isfinite(m))
    off += snprintf(line + off, sizeof line - (size_t)off, "  mem %s", gs_fmt_bytes(m, mem, sizeof mem));
  double gpu_sum = 0;
  int gpus = 0;
  for (int g = 0; g < 64; g++) {
    char lab[16];
    snprintf(lab, sizeof lab, "gpu=%d", g);
    int id = gs_sink_find(s, "nvml", "gpu.util_pct", lab);
    if (id < 0)
      break;
    double v = gs_sink_last(s, id);
    if (isfinite(v))
      gpu_sum += v, gpus++;
  }
  if (gpus)
    off += snprintf(line + off, sizeof line - (size_t)off, "  GPU %.0f%% (%d)", gpu_sum / gpus, gpus);
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
    attach_command(o->attach_pid, r->command, sizeof r->command);
  else
    join_argv(o->argv, r->command, sizeof r->command);
  if (!getcwd(r->cwd, sizeof r->cwd))
    r->cwd[0] = 0;
  gethostname(r->host, sizeof r->host - 1);
  struct passwd *pw = getpwuid(getuid());
  snprintf(r->user, sizeof r->user, "%s", pw ? pw->pw_name : "");
  r->interval_ns = o->interval_ns;
  r->agent_pid = getpid();
  r->exit_code = -1;
  r->start_wall_ns = gs_wall_ns();
  r->mono_start_ns = gs_mono_ns();
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
    char key[300];
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

int64_t agent_flush_default(int64_t interval_ns) {
  int64_t f = 10 * interval_ns;
  return f < 1000000000LL ? 1000000000LL : f > 10000000000LL ? 10000000000LL : f;
}

int agent_run(const struct agent_opts *o, int *job_status) {
  int rc = GS_OK, sfd = -1, exec_errno = 0;
  char err[256] = "";
  struct store *st = NULL;
  struct gs_sink *sink = NULL;
  struct ingest *in = NULL;
  struct opened cols[8];
  size_t ncols = 0;
  struct store_run run;
  struct writer w = {0};
  int writer_on = 0;
  sigset_t mask, orig;
  struct attach_target target = {.pidfd = -1};
  const int attach = o->attach_pid > 0;
  *job_status = 1;

  if (attach && (rc = attach_target_open(o->attach_pid, &target)))
    return rc;
  if (!(st = store_open(o->store_url))) {
    attach_target_done(&target);
    return gs_last_error()[0] ? GS_EIO : GS_EIO;
  }
  if (attach && attach_ingest_open(o->attach_pid, &in, err, sizeof err) == GS_EBUSY) {
    rc = gs_fail(GS_EBUSY, "attach: %s", err);
    goto out;
  }
  if (!(sink = gs_sink_new())) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto out;
  }
  run_fill(&run, o);
  if ((rc = st->run_begin(st, &run)))
    goto out;
  tags_to_params(sink, o->tags);
  if (attach)
    attach_params(sink, o->attach_pid, in, err);
  else if ((in = ingest_open(err, sizeof err)))
    setenv("GPUSCOPE_SOCKET", ingest_socket_path(in), 1);
  else
    unsetenv("GPUSCOPE_SOCKET");
  setenv("GPUSCOPE_RUN_ID", run.id, 1);

  if (!attach)
    prctl(PR_SET_CHILD_SUBREAPER, 1);
  sigemptyset(&mask);
  int sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
    sigaddset(&mask, sigs[i]);
  sigprocmask(SIG_BLOCK, &mask, &orig);
  sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);

  w = (struct writer){.st = st, .run = &run, .sink = sink, .flush_ns = o->flush_ns ? o->flush_ns : agent_flush_default(o->interval_ns)};
  if ((rc = writer_start(&w)))
    goto out;
  writer_on = 1;

  pid_t job = attach ? o->attach_pid : launch(o->argv, &orig, &exec_errno);
  if (job < 0) {
    rc = gs_fail(GS_EIO, "cannot start %s: %s", o->argv[0], strerror(errno));
    goto out;
  }
  int job_done = 0;
  if (exec_errno) {
    fprintf(stderr, "gpuscope: %s: %s\n", o->argv[0],
            exec_errno == ENOENT ? "command not found" : strerror(exec_errno));
    int ws;
    waitpid(job, &ws, 0);
    *job_status = exec_errno == ENOENT ? 127 : 126;
    job_done = 1;
  }

  char no_gpu[256] = "";
  struct collector_opts copts = {.root = o->root ? o->root : "/", .pid = job, .interval_ns = o->interval_ns,
                                 .subreaper = !attach};
  for (size_t i = 0; collect_registry[i] && ncols < sizeof cols / sizeof *cols && !job_done; i++) {
    err[0] = 0;
    void *ctx = collect_registry[i]->open(&copts, sink, err, sizeof err);
    if (ctx)
      cols[ncols++] = (struct opened){collect_registry[i], ctx};
    else if (err[0]) {
      gs_sink_note(sink, "%s collector off: %s", collect_registry[i]->name, err);
      if (collect_registry[i] == &collector_nvml)
        snprintf(no_gpu, sizeof no_gpu, "%s", err);
    }
  }

  struct live live = {.on = !o->quiet && isatty(2), .start = run.mono_start_ns};
  live.cpu = gs_sink_find(sink, "host", "host.cpu.busy_pct", "cpu=total");
  live.cg_cpu = gs_sink_find(sink, "host", "host.cgroup.cpu_used_pct_of_limit", "");
  live.mem = gs_sink_find(sink, "host", "host.mem.used_bytes", "");
  live.tree_cpu = gs_sink_find(sink, "proctree", "tree.cpu_pct", "");
  live.tree_rss = gs_sink_find(sink, "proctree", "tree.rss_bytes", "");
  int64_t next = gs_mono_ns(), last_live = 0;
  int waiting_tree = 0, stop_sent = 0;
  for (;;) {
    int64_t now = gs_mono_ns();
    if (now >= next) {
      for (size_t i = 0; i < ncols; i++)
        if (cols[i].ctx && cols[i].c->sample(cols[i].ctx, sink, next) == GS_COLLECT_DISABLE) {
          gs_sink_note(sink, "%s collector switched off during the run", cols[i].c->name);
          cols[i].c->close(cols[i].ctx);
          cols[i].ctx = NULL;
        }
      writer_kick(&w);
      if (live.on && now - last_live >= LIVE_NS) {
        live_print(&live, sink, now);
        last_live = now;
      }
      next += o->interval_ns;
      if (next <= now) /* we fell behind (suspended?): skip the missed ticks */
        next = now + o->interval_ns;
      if (waiting_tree && collect_count_descendants(getpid()) == 0)
        break;
      if (attach && !job_done && target.pidfd < 0 && attach_target_gone(&target))
        job_done = attach_end(sink, job_status, "exited");
    }
    if (job_done && !waiting_tree)
      break;
    int64_t wait_ns = next - gs_mono_ns();
    if (wait_ns < 0)
      wait_ns = 0;
    struct timespec ts = {.tv_sec = wait_ns / 1000000000LL, .tv_nsec = wait_ns % 1000000000LL};
    struct pollfd pf[3] = {{.fd = sfd, .events = POLLIN},
                           {.fd = in ? ingest_fd(in) : -1, .events = POLLIN},
                           {.fd = job_done ? -1 : target.pidfd, .events = POLLIN}};
    int n = ppoll(pf, 3, &ts, NULL);
    if (n <= 0)
      continue;
    if (pf[1].revents & POLLIN) {
      ingest_poll(in, sink, gs_mono_ns());
      /* tune's trials: steps are numbered from 0 by the client, so step N-1 is the N-th step. */
      if (o->stop_after_steps > 0 && !attach && !job_done && !stop_sent &&
          gs_sink_last(sink, gs_sink_find(sink, "client", "step.n", "")) + 1 >= (double)o->stop_after_steps)
        stop_sent = !kill(job, SIGTERM);
    }
    if (pf[2].revents & (POLLIN | POLLHUP | POLLERR))
      job_done = attach_end(sink, job_status, "exited");
    if (!(pf[0].revents & POLLIN))
      continue;
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
      if (attach && si.ssi_signo != SIGCHLD) {
        if (!job_done)
          job_done = attach_end(sink, job_status, "interrupted");
      } else if (si.ssi_signo == SIGCHLD) {
        int ws;
        pid_t p;
        while ((p = waitpid(-1, &ws, WNOHANG)) > 0)
          if (p == job && !job_done) {
            *job_status = shell_status(ws);
            job_done = 1;
            waiting_tree = o->wait_tree && collect_count_descendants(getpid()) > 0;
          }
      } else if (!job_done && si.ssi_code != SI_KERNEL) {
        /* Sent to gpuscope itself (kill, a scheduler): pass it on. A terminal's ^C already reached
         * the job through the process group, so it is not sent twice. */
        kill(job, (int)si.ssi_signo);
      }
    }
  }
  int64_t end = gs_mono_ns();
  if (in)
    ingest_poll(in, sink, end);
  for (size_t i = 0; i < ncols; i++)
    if (cols[i].ctx)
      cols[i].c->sample(cols[i].ctx, sink, end);
  if (live.on)
    fprintf(stderr, "\r\033[K");

  int left = attach ? 0 : collect_count_descendants(getpid());
  /* Collector summaries are taken now, then the collectors closed, so a collector with its own
   * thread (NVML) gets its last values into the sink before the writer's final flush. */
  char *col_summary = NULL;
  size_t col_summary_len = 0;
  FILE *mem = open_memstream(&col_summary, &col_summary_len);
  for (size_t i = 0; i < ncols; i++) {
    if (mem && cols[i].ctx && cols[i].c->summary) {
      fprintf(mem, "  ");
      cols[i].c->summary(cols[i].ctx, mem);
    }
    if (cols[i].ctx)
      cols[i].c->close(cols[i].ctx);
    cols[i].ctx = NULL;
  }
  if (mem && no_gpu[0])
    fprintf(mem, "  GPUs: none (%s)\n", no_gpu);
  if (mem)
    fclose(mem);
  writer_stop(&w);
  writer_on = 0;
  run.end_wall_ns = run.start_wall_ns + (end - run.mono_start_ns);
  run.exit_code = attach ? -1 : *job_status; /* a non-child's exit status is unknowable */
  snprintf(run.status, sizeof run.status, "%s",
           *job_status == 0 ? "finished" : *job_status > 128 && !exec_errno ? "killed" : "failed");
  if (st->run_end(st, &run))
    fprintf(stderr, "gpuscope: cannot close the run: %s\n", gs_last_error());
  char unkept[512];
  if (store_write_summary(st, unkept, sizeof unkept))
    fprintf(stderr, "gpuscope: %s\n", unkept);
  size_t nfind = 0;
  if (doctor_run(st, run.id, NULL, &nfind))
    fprintf(stderr, "gpuscope: diagnosis failed: %s\n", gs_last_error());
  if (!o->quiet) {
    /* Collector and client lines first, so the summary ends with the diagnosis. */
    if (col_summary)
      fputs(col_summary, stderr);
    if (in)
      ingest_summary(in, stderr);
    if (left > 0)
      fprintf(stderr, "  %d process%s of the job still running after it exited (use --wait-tree to wait)\n", left,
              left == 1 ? "" : "es");
    report_summary(stderr, st, run.id);
  }
  free(col_summary);
out:
  if (writer_on)
    writer_stop(&w);
  for (size_t i = 0; i < ncols; i++)
    if (cols[i].ctx)
      cols[i].c->close(cols[i].ctx);
  ingest_close(in);
  if (sfd >= 0) {
    close(sfd);
    sigprocmask(SIG_SETMASK, &orig, NULL);
  }
  attach_target_done(&target);
  gs_sink_free(sink);
  if (st)
    st->close(st);
  return rc;
}
