/* alert_int: what the alert engine's files share, not part of the subsystem's interface — one alert
 * as it is queued and sent, its two payloads, the two ways it goes out (webhook.c, command.c), and
 * the bounded queue with its delivery thread (deliver.c). Calls go one way: engine.c → deliver.c →
 * webhook.c, command.c → payload.c. */
#ifndef GS_ALERT_INT_H
#define GS_ALERT_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "alert/alert.h"

/* One alert: a rule's condition that started (firing) or ended (resolved) for one key. */
struct alert_msg {
  char rule[16];    /* gpu_idle, finding, hang, exit, throttle, gpu_mem, straggler */
  char key[160];    /* what is deduplicated: the rule and what it is about ("gpu_idle gpu=0") */
  char state[12];   /* firing | resolved */
  char labels[256]; /* "gpu=0", "" */
  char spec[128];   /* the rule as written */
  char title[256];  /* one line */
  char text[1024];  /* what was seen, with its figures */
  char fix[4096];   /* a finding's fix ("" none) */
  double value;     /* the figure the rule compared (NAN none) */
  double cost_s;    /* a finding's seconds lost (NAN none) */
  double speedup;   /* a finding's estimated speed-up (NAN none) */
  double t_s;       /* seconds since the run's start */
  int64_t wall_ns;  /* when it was seen */
  char run_id[32], run_name[128], host[256];
};

/* The alert as gpuscope's JSON object, and as Slack's {"text": ...} (mrkdwn's &, <, > escaped). */
void alert_payload_json(FILE *out, const struct alert_msg *m);
void alert_payload_slack(FILE *out, const struct alert_msg *m);

/* Delivery results: sent, worth another try (no answer, a timeout, 429, 5xx), or not (4xx, a bad
 * URL, no libcurl). */
enum { ALERT_SENT = 0, ALERT_RETRY = 1, ALERT_FAIL = 2 };

/* POSTs body (len bytes, JSON) to url within timeout_ns, through libcurl (loaded on first use): TLS
 * verified, proxies from the environment as curl reads them, http and https only. *abort set
 * non-zero ends a transfer in progress. Returns an ALERT_* result, the reason in err. */
int alert_webhook_post(const char *url, const char *body, size_t len, int64_t timeout_ns, const volatile int *abort,
                       char *err, size_t errlen);

/* Runs `/bin/sh -c cmd` with json on its stdin and the alert in GPUSCOPE_ALERT_* variables; waits
 * for it at most timeout_ns (then SIGKILL). Returns ALERT_SENT when it exited 0 (or was reaped by the
 * run loop first, its status unknown), ALERT_FAIL otherwise, the reason in err. */
int alert_command_run(const char *cmd, const struct alert_msg *m, const char *json, int64_t timeout_ns,
                      const volatile int *abort, char *err, size_t errlen);

/* The bounded queue and its delivery thread. Counters are read under mu. */
struct alert_queue {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  const struct alert_config *c;
  struct alert_msg *ring;
  size_t head, n;
  int stop, started;
  volatile int abort;        /* the drain's time is up: end the transfer in progress */
  int64_t rate_from;         /* the rate window's start */
  int rate_n;                /* alerts queued in it */
  long queued, sent, failed; /* deliveries: per alert, every destination tried */
  long dropped_full, dropped_rate, dropped_end;
  char last_error[512]; /* the latest delivery's failure */
};

/* Starts the delivery thread over c (borrowed for the queue's life). Returns 0 or GS_EIO/GS_ENOMEM. */
int alert_queue_start(struct alert_queue *q, const struct alert_config *c);
/* Queues a copy of m unless the queue is full or the rate is spent (counted). Never waits on a
 * delivery. Returns 0 when queued, 1 when dropped. */
int alert_queue_push(struct alert_queue *q, const struct alert_msg *m);
/* Lets the thread send what is queued for at most grace_ns, then ends it; what is left is dropped
 * (dropped_end). Safe to call twice and on a queue never started. */
void alert_queue_stop(struct alert_queue *q, int64_t grace_ns);

#endif
