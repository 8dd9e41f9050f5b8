/* alert/deliver: the bounded queue between the engine (which evaluates on the writer's thread) and
 * the receivers, and the one thread that empties it. An alert is tried on every webhook and the
 * command in turn; a webhook that times out, refuses or answers 429/5xx is tried again after 1, 2,
 * 4 ... s (at most 30 s apart, c->retries more times), so a dead receiver holds only this thread.
 * What cannot wait — the queue full, more than the rate allows, still queued when the run ends — is
 * dropped and counted, and the engine says so at the run's end. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alert/alert_int.h"
#include "core/core.h"

#define BACKOFF_MAX_NS (30 * GS_NS_PER_S)

/* Waits on q->cv until `until` (monotonic ns) or an abort. Called with q->mu held. */
static void queue_wait_until(struct alert_queue *q, int64_t until) {
  struct timespec ts = {.tv_sec = until / GS_NS_PER_S, .tv_nsec = until % GS_NS_PER_S};
  while (!q->abort && pthread_cond_timedwait(&q->cv, &q->mu, &ts) == 0)
    ; /* woken by a push or a stop: only an abort or the time ends the wait */
}

/* One destination, tried again with back-off while the failure is worth it. */
static int deliver_to(struct alert_queue *q, int hook, const struct alert_msg *m, const char *json, const char *slack,
                      char *err, size_t errlen) {
  int64_t backoff = GS_NS_PER_S;
  for (int attempt = 0;; attempt++) {
    int rc = hook < 0 ? alert_command_run(q->c->command, m, json, q->c->timeout_ns, &q->abort, err, errlen)
                      : alert_webhook_post(q->c->hooks[hook], q->c->hook_slack[hook] ? slack : json,
                                           strlen(q->c->hook_slack[hook] ? slack : json), q->c->timeout_ns, &q->abort,
                                           err, errlen);
    if (rc != ALERT_RETRY || attempt >= q->c->retries || q->abort)
      return rc;
    pthread_mutex_lock(&q->mu);
    queue_wait_until(q, gs_mono_ns() + backoff);
    pthread_mutex_unlock(&q->mu);
    backoff = backoff * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : backoff * 2;
  }
}

static void deliver_one(struct alert_queue *q, const struct alert_msg *m) {
  char *json = NULL, *slack = NULL, err[512] = "";
  size_t jl = 0, sl = 0;
  FILE *f = open_memstream(&json, &jl);
  if (f)
    alert_payload_json(f, m), fclose(f);
  if ((f = open_memstream(&slack, &sl)))
    alert_payload_slack(f, m), fclose(f);
  /* Every destination is tried, whatever the others did: a dead webhook must not keep the alert
   * from the command. It counts as sent when every one took it. */
  int ok = json && slack;
  for (int i = 0; json && slack && i < (int)q->c->nhooks; i++)
    ok &= deliver_to(q, i, m, json, slack, err, sizeof err) == ALERT_SENT;
  if (json && slack && q->c->command[0])
    ok &= deliver_to(q, -1, m, json, slack, err, sizeof err) == ALERT_SENT;
  pthread_mutex_lock(&q->mu);
  if (ok)
    q->sent++;
  else if (q->abort)
    q->dropped_end++;
  else {
    q->failed++;
    snprintf(q->last_error, sizeof q->last_error, "%s", err[0] ? err : "out of memory");
  }
  pthread_mutex_unlock(&q->mu);
  free(json);
  free(slack);
}

static void *queue_main(void *arg) {
  struct alert_queue *q = arg;
  struct alert_msg *m = malloc(sizeof *m);
  pthread_mutex_lock(&q->mu);
  while (m && !q->abort) {
    while (!q->n && !q->stop)
      pthread_cond_wait(&q->cv, &q->mu);
    if (!q->n || q->abort)
      break;
    *m = q->ring[q->head];
    q->head = (q->head + 1) % (size_t)q->c->queue;
    q->n--;
    pthread_mutex_unlock(&q->mu);
    deliver_one(q, m);
    pthread_mutex_lock(&q->mu);
  }
  q->started = 2; /* done: alert_queue_stop waits for this */
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  free(m);
  return NULL;
}

int alert_queue_start(struct alert_queue *q, const struct alert_config *c) {
  memset(q, 0, sizeof *q);
  q->c = c;
  if (!(q->ring = calloc((size_t)c->queue, sizeof *q->ring)))
    return gs_fail(GS_ENOMEM, "out of memory");
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&q->cv, &ca);
  pthread_condattr_destroy(&ca);
  pthread_mutex_init(&q->mu, NULL);
  q->rate_from = gs_mono_ns();
  /* Process signals are the run loop's (its signalfd): this thread must never take one. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  int e = pthread_create(&q->thread, NULL, queue_main, q);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) {
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->ring);
    q->ring = NULL;
    return gs_fail(GS_EIO, "cannot start the alert delivery thread");
  }
  q->started = 1;
  return GS_OK;
}

int alert_queue_push(struct alert_queue *q, const struct alert_msg *m) {
  if (!q->started)
    return 1;
  if (!q->c->nhooks && !q->c->command[0])
    return 0; /* nowhere to send it: the event is all */
  int64_t now = gs_mono_ns();
  int dropped = 1;
  pthread_mutex_lock(&q->mu);
  if (now - q->rate_from >= 60 * GS_NS_PER_S)
    q->rate_from = now, q->rate_n = 0;
  if (q->stop)
    q->dropped_end++;
  else if (q->rate_n >= q->c->rate_per_min)
    q->dropped_rate++;
  else if (q->n >= (size_t)q->c->queue)
    q->dropped_full++;
  else {
    q->ring[(q->head + q->n) % (size_t)q->c->queue] = *m;
    q->n++;
    q->rate_n++;
    q->queued++;
    dropped = 0;
    pthread_cond_broadcast(&q->cv);
  }
  pthread_mutex_unlock(&q->mu);
  return dropped;
}

void alert_queue_stop(struct alert_queue *q, int64_t grace_ns) {
  if (!q->started)
    return;
  int64_t until = gs_mono_ns() + grace_ns;
  struct timespec ts = {.tv_sec = until / GS_NS_PER_S, .tv_nsec = until % GS_NS_PER_S};
  pthread_mutex_lock(&q->mu);
  q->stop = 1;
  pthread_cond_broadcast(&q->cv);
  while (q->started != 2 && pthread_cond_timedwait(&q->cv, &q->mu, &ts) != ETIMEDOUT)
    ;
  q->abort = 1; /* the grace is over: end the transfer in progress */
  pthread_cond_broadcast(&q->cv);
  pthread_mutex_unlock(&q->mu);
  pthread_join(q->thread, NULL);
  q->dropped_end += (long)q->n;
  q->n = 0;
  q->started = 0;
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q->ring);
  q->ring = NULL;
}
