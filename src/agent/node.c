/* agent/node: `gpuscope agent` — the node mode. No job is launched: the host and NVML collectors
 * watch the whole node (every GPU and the processes NVML lists on them), and the gputrees collector
 * the CPU trees of those processes (collect/proctree_gpu.c), once per tick, into a sink
 * that the Prometheus endpoint (expose/expose.h) reads. Without --record the sink is emptied every
 * flush period and nothing is kept; with it, a node run is kept in the store like any run (the
 * batch is appended every flush period, and the doctor's live findings over the last minute are
 * exported as gpuscope_finding, both by a store thread of their own: a store that is slow or
 * hangs never holds a tick). It ends on SIGINT, SIGTERM or SIGHUP. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "alert/alert.h"
#include "collect/collect.h"
#include "core/core.h"
#include "doctor/doctor.h"
#include "expose/expose.h"
#include "store/store.h"

/* How often a recording node agent asks the doctor about the last minute. */
#define FINDINGS_EVERY_NS (30 * GS_NS_PER_S)

struct node_col {
  const struct collector *c;
  void *ctx;
};

static void node_run_fill(struct store_run *r, const struct agent_node_opts *o) {
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", o->name && *o->name ? o->name : "node");
  snprintf(r->command, sizeof r->command, "gpuscope agent");
  agent_run_fill_here(r, o->interval_ns);
}

static void node_flush(struct gs_sink *sink, struct store *st, struct store_run *run, int *failed) {
  struct gs_batch *b = gs_sink_take(sink);
  if (!b)
    return;
  if (st && st->run_append(st, run, b) && !*failed) {
    *failed = 1;
    fprintf(stderr, "gpuscope agent: cannot write to the store (%s); samples are kept and written when it can\n",
            gs_last_error());
  }
  gs_batch_free(b);
}

/* --record: the store's own thread. It appends the sink's batch every flush period and reads the
 * live findings every FINDINGS_EVERY_NS; the tick loop never touches the store, so a write that
 * waits on the server (an outage until its timeout, a reconnection) never delays a sample. */
struct node_store {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
  int64_t flush_ns;
  struct gs_sink *sink;
  struct store *st;
  struct store_run *run;
  struct expose *m;
  struct alert_engine *alerts; /* evaluated after each flush (NULL: none) */
  int *failed;
};

static void node_store_findings(struct node_store *w) {
  struct store_finding *f = NULL;
  size_t n = 0;
  if (!doctor_diagnose_live_run(w->st, w->run->id, 0, &f, &n, NULL))
    expose_set_findings(w->m, f, n);
  free(f);
}

static void *node_store_main(void *arg) {
  struct node_store *w = arg;
  int64_t next_flush = gs_mono_ns() + w->flush_ns,
          next_findings = next_flush + w->flush_ns; /* the first once the store holds two flushes */
  pthread_mutex_lock(&w->mu);
  while (!w->stop) {
    int64_t until = next_flush < next_findings ? next_flush : next_findings;
    struct timespec ts = {.tv_sec = until / GS_NS_PER_S, .tv_nsec = until % GS_NS_PER_S};
    while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0)
      ; /* woken without cause: wait on */
    if (w->stop)
      break;
    pthread_mutex_unlock(&w->mu);
    int64_t now = gs_mono_ns();
    if (now >= next_flush) {
      node_flush(w->sink, w->st, w->run, w->failed);
      if (w->alerts)
        alert_engine_eval(w->alerts, w->st);
      next_flush = now + w->flush_ns;
    }
    if (now >= next_findings) {
      node_store_findings(w);
      next_findings = gs_mono_ns() + FINDINGS_EVERY_NS;
    }
    pthread_mutex_lock(&w->mu);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

static int node_store_start(struct node_store *w) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&w->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&w->mu, NULL);
  if (pthread_create(&w->thread, NULL, node_store_main, w)) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    return gs_fail(GS_EIO, "cannot start the store thread");
  }
  return GS_OK;
}

/* Stops the store thread once its write in progress is done (the last batch is the caller's). */
static void node_store_stop(struct node_store *w) {
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->thread, NULL);
  pthread_cond_destroy(&w->cv);
  pthread_mutex_destroy(&w->mu);
}

int agent_metrics_start(struct gs_sink *sink, const char *listen, const char *token, const char *host_label,
                        int64_t interval_ns, int quiet, struct expose **out) {
  struct expose_opts mo = {.host_label = host_label, .interval_ns = interval_ns};
  *out = expose_new(sink, &mo);
  if (!*out)
    return gs_fail(GS_ENOMEM, "out of memory");
  if (expose_listen(*out, listen, token, NULL)) {
    char why[512];
    snprintf(why, sizeof why, "--listen: %s", gs_last_error());
    expose_free(*out);
    *out = NULL;
    return gs_fail(GS_EINVAL, "%s", why);
  }
  char url[128];
  expose_url(*out, url, sizeof url);
  if (!quiet)
    fprintf(stderr, "gpuscope: metrics at %s\n", url);
  return GS_OK;
}

/* Opens the host, NVML and GPU-process-tree collectors (in that order: the trees read what NVML put)
 * into cols; one that cannot open here is noted and left out.
 * Returns how many opened. */
static size_t node_open_collectors(const struct agent_node_opts *o, struct gs_sink *sink, struct node_col *cols) {
  char err[256];
  size_t ncols = 0;
  struct collector_opts copts = {.root = o->root ? o->root : "/", .pid = 0, .interval_ns = o->interval_ns};
  const struct collector *want[] = {&collector_host, &collector_nvml, &collector_rocm, &collector_gputrees,
                                    &collector_gpuowners};
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    err[0] = 0;
    void *ctx = want[i]->open(&copts, sink, err, sizeof err);
    if (ctx)
      cols[ncols++] = (struct node_col){want[i], ctx};
    else if (err[0]) {
      gs_sink_note(sink, "%s collector off: %s", want[i]->name, err);
      if (!o->quiet)
        fprintf(stderr, "gpuscope agent: %s collector off: %s\n", want[i]->name, err);
    }
  }
  return ncols;
}

static void node_print_address(const struct agent_node_opts *o, const struct expose *m) {
  if (!o->quiet || o->print_address) {
    char url[128];
    expose_url(m, url, sizeof url);
    printf("gpuscope agent: metrics at %s\n", url);
    fflush(stdout);
  }
}

/* One tick: every collector still on samples at t; one that asks to be switched off is closed. */
static void node_sample_all(struct node_col *cols, size_t ncols, struct gs_sink *sink, int64_t t) {
  for (size_t i = 0; i < ncols; i++)
    if (cols[i].ctx && cols[i].c->sample(cols[i].ctx, sink, t) == GS_COLLECT_DISABLE) {
      gs_sink_note(sink, "%s collector switched off", cols[i].c->name);
      cols[i].c->close(cols[i].ctx);
      cols[i].ctx = NULL;
    }
}

/* Waits until next or a signal on sfd; returns 1 when a signal asks the agent to stop. */
static int node_wait(int sfd, int64_t next) {
  int stop = 0;
  int64_t wait_ns = next - gs_mono_ns();
  if (wait_ns < 0)
    wait_ns = 0;
  struct timespec ts = {.tv_sec = wait_ns / GS_NS_PER_S, .tv_nsec = wait_ns % GS_NS_PER_S};
  struct pollfd pf = {.fd = sfd, .events = POLLIN};
  if (ppoll(&pf, 1, &ts, NULL) > 0 && (pf.revents & POLLIN)) {
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
      stop = 1;
  }
  return stop;
}

/* The tick loop: samples, and empties the sink every flush period when nothing is recorded (when
 * recording, the store thread takes it), until a signal arrives on sfd. */
static void node_loop(const struct agent_node_opts *o, int sfd, struct gs_sink *sink, int recording,
                      struct node_col *cols, size_t ncols) {
  int64_t flush_ns = agent_flush_default(o->interval_ns);
  int64_t next = gs_mono_ns(), next_flush = next + flush_ns;
  for (int stop = 0; !stop;) {
    int64_t now = gs_mono_ns();
    if (now >= next) {
      node_sample_all(cols, ncols, sink, next);
      next = gs_tick_after(next, now, o->interval_ns);
    }
    if (!recording && now >= next_flush) {
      node_flush(sink, NULL, NULL, NULL);
      next_flush = now + flush_ns;
    }
    stop = node_wait(sfd, next);
  }
}

/* Writes the last batch and closes the node run, finished or failed as rc says. */
static void node_run_close(const struct agent_node_opts *o, struct gs_sink *sink, struct store *st,
                           struct store_run *run, int *failed, int rc) {
  int64_t end = gs_mono_ns();
  node_flush(sink, st, run, failed);
  run->end_wall_ns = run->start_wall_ns + (end - run->mono_start_ns);
  snprintf(run->status, sizeof run->status, "%s", rc ? "failed" : "finished");
  char unkept[2304];
  if (st->run_end(st, run))
    fprintf(stderr, "gpuscope agent: cannot close the run: %s\n", gs_last_error());
  else if (store_write_summary(st, unkept, sizeof unkept)) /* kept elsewhere (a spool), or not all of it */
    fprintf(stderr, "gpuscope agent: node run %s: %s\n", run->id, unkept);
  else if (!o->quiet)
    fprintf(stderr, "gpuscope agent: node run %s kept\n", run->id);
}

/* --record with alerts: the engine over the node run, evaluated by the store thread after each flush. */
static struct alert_engine *node_alerts_new(const struct agent_node_opts *o, const struct store_run *run,
                                            struct gs_sink *sink) {
  struct alert_run_info ai = {.run_id = run->id,
                              .run_name = run->name,
                              .host = run->host,
                              .mono_start_ns = run->mono_start_ns,
                              .interval_ns = o->interval_ns};
  return alert_engine_new(o->alerts, &ai, sink);
}

int agent_node_run(const struct agent_node_opts *o) {
  int rc = GS_OK, sfd = -1, failed = 0, begun = 0;
  struct store *st = NULL;
  struct store_run run;
  struct node_col cols[5];
  size_t ncols = 0;
  struct expose *m = NULL;
  struct alert_engine *alerts = NULL;
  struct gs_sink *sink = gs_sink_new();
  if (!sink)
    return gs_fail(GS_ENOMEM, "out of memory");
  sigset_t mask, orig;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigprocmask(SIG_BLOCK, &mask, &orig);
  if ((sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
    rc = gs_fail(GS_EIO, "signalfd: %s", strerror(errno));
    goto fail;
  }
  if (o->record) {
    if (!(st = store_open(o->store_url))) {
      rc = GS_ESTORE;
      goto fail;
    }
    node_run_fill(&run, o);
    if (st->run_begin(st, &run)) {
      rc = GS_ESTORE;
      goto fail;
    }
    begun = 1;
    if (st->stats.notice[0]) /* the store unreachable from the start: said now */
      fprintf(stderr, "gpuscope: %s\n", st->stats.notice);
    gs_sink_param(sink, "node", "1");
  }
  struct expose_opts mo = {.host_label = o->host_label, .interval_ns = o->interval_ns};
  if (!(m = expose_new(sink, &mo))) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto fail;
  }
  /* Collectors before the endpoint, so the first scrape already has the GPUs' labels. */
  ncols = node_open_collectors(o, sink, cols);
  if (expose_listen(m, o->listen, o->token, NULL)) {
    rc = GS_EINVAL;
    goto fail;
  }
  node_print_address(o, m);
  struct node_store w = {
      .flush_ns = agent_flush_default(o->interval_ns), .sink = sink, .st = st, .run = &run, .m = m, .failed = &failed};
  if (st && o->alerts && alert_config_active(o->alerts) && !(alerts = w.alerts = node_alerts_new(o, &run, sink))) {
    rc = GS_EIO;
    goto fail;
  }
  if (st && (rc = node_store_start(&w)))
    goto fail;
  node_loop(o, sfd, sink, st != NULL, cols, ncols);
  if (st)
    node_store_stop(&w);
  alert_engine_finish(alerts, "finished", -1, NAN); /* resolves what fires; its counts go in the last flush */
  if (!o->quiet && alerts)
    alert_engine_summary(alerts, stderr);
fail:
  expose_free(m); /* the endpoint first: no scrape reads the sink after this */
  for (size_t i = 0; i < ncols; i++)
    if (cols[i].ctx)
      cols[i].c->close(cols[i].ctx);
  if (begun)
    node_run_close(o, sink, st, &run, &failed, rc);
  alert_engine_free(alerts);
  if (st)
    st->close(st);
  if (sfd >= 0)
    close(sfd);
  sigprocmask(SIG_SETMASK, &orig, NULL);
  gs_sink_free(sink);
  return rc;
}
