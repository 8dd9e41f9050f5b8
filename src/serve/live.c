/* serve/live: the live stream of one run (Server-Sent Events, docs/api.md), one reader per run for
 * every viewer of it. A run's hub has a thread of its own and reads through the server's store
 * handle, under its lock (a second SQLite handle in one process would have its raw header check
 * close a descriptor of the file, which drops the first handle's POSIX locks). Once a second it
 * polls the store for samples committed since the last poll (per series), recomputes the live findings every
 * SERVE_LIVE_FINDINGS_EVERY_S (sent when they change), beats every 10 s so proxies and the
 * connection timeout keep the stream open, and ends with a "status" event once the run has
 * finished. What it finds goes once into the hub's log, which every viewer reads at its own place:
 * so 200 viewers cost one poll and one diagnosis, not 200. A viewer that asked for samples from
 * `since` on first gets those from the store (its catch-up, read by its own connection), then the
 * log from where it joined. A viewer never blocks a server thread: with nothing to send its
 * connection is suspended, and the hub resumes it when the log grows. One that lags more than
 * SERVE_LIVE_BUFFER behind is dropped, and the log keeps only what some viewer has still to read. */
#include <math.h>
#include "serve/mhd_api.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctor/doctor.h"
#include "serve/serve_int.h"

enum { POLL_MS = 1000, BEAT_S = 10, MAX_POINTS_PER_EVENT = 20000 };

struct last_sent {
  int64_t id, t;
};

/* A viewer's catch-up of one series: samples after `from` up to `upto` (where the hub's log starts). */
struct catchup {
  struct store_series s;
  int64_t from, upto;
};

struct serve_live_hub {
  struct serve_live_hub *next; /* in s->hubs */
  struct serve *s;
  char run_id[32];
  int refs; /* its viewers, under s->live_mu */
  /* The server's store handle and its lock (s->st, s->mu), and what the log holds of each series
   * (its last sample), under that lock. */
  pthread_mutex_t *st_mu;
  struct store *st;
  struct last_sent *last;
  size_t nlast;
  /* The log and the viewers, under mu: log[0] is byte `base` of the hub's stream. */
  pthread_mutex_t mu;
  char *log;
  size_t len, cap;
  uint64_t base;
  struct serve_live *viewers;
  char *findings_event; /* the last findings event, for a viewer who joins later */
  int ended, stopping;
  /* The hub thread's own. */
  pthread_t thread;
  char *findings_json; /* last sent */
  double next_findings, next_beat;
};

struct serve_live {
  struct serve_live *prev, *next; /* in hub->viewers */
  struct serve_live_hub *hub;
  struct MHD_Connection *c;
  uint64_t pos; /* its place in the hub's stream */
  char *pre;    /* its own bytes before the log's: a greeting, the findings, its catch-up */
  size_t plen, poff;
  struct catchup *cu; /* per series left to catch up */
  size_t ncu, icu;
  int suspended, dropped; /* under hub->mu */
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / GS_NS_PER_S;
}

static int64_t *last_of(struct serve_live_hub *h, int64_t id, int64_t start) {
  for (size_t i = 0; i < h->nlast; i++)
    if (h->last[i].id == id)
      return &h->last[i].t;
  struct last_sent *n = realloc(h->last, (h->nlast + 1) * sizeof *n);
  if (!n)
    return NULL;
  h->last = n;
  n[h->nlast] = (struct last_sent){id, start};
  return &n[h->nlast++].t;
}

/* The samples of one event: their times written as they come, the values kept for after them. */
struct pts {
  FILE *out;
  int64_t last;
  struct store_points kept;
};

static int put_t(void *user, int64_t t, double v) {
  struct pts *p = user;
  if (!isfinite(v))
    return 0;
  if (store_points_put(&p->kept, t, v))
    return -1;
  if (p->kept.n > 1)
    fputc(',', p->out);
  gs_json_num(p->out, serve_sec(t));
  p->last = t;
  return p->kept.n >= MAX_POINTS_PER_EVENT;
}

/* One series' samples in (after, upto], at most MAX_POINTS_PER_EVENT, as a member of a samples event
 * (the event's head written before the first: *k counts them). *last becomes the last one sent
 * (unchanged when none). Returns 0 or a GS_E code. */
static int series_samples(FILE *out, struct store *st, const struct store_series *s, int64_t after, int64_t upto,
                          int *k, int64_t *last) {
  fputs((*k)++ ? ",{" : "event: samples\ndata: {\"series\":[{", out);
  fprintf(out, "\"id\":%lld,\"source\":", (long long)s->id);
  gs_json_str(out, s->source);
  fputs(",\"name\":", out);
  gs_json_str(out, s->name);
  fputs(",\"labels\":", out);
  gs_json_str(out, s->labels);
  fputs(",\"unit\":", out);
  gs_json_str(out, s->unit);
  fputs(",\"t\":[", out);
  struct pts p = {.out = out, .last = *last};
  int rc = st->samples_read(st, s->id, after + 1, upto, put_t, &p);
  fputs("],\"v\":[", out);
  for (size_t j = 0; j < p.kept.n; j++) {
    if (j)
      fputc(',', out);
    gs_json_num(out, p.kept.v[j]);
  }
  fputs("]}", out);
  store_points_done(&p.kept);
  *last = p.last;
  return rc < 0 ? rc : GS_OK;
}

/* One poll of the hub: new samples as an event (appended to out); sets *any when there were some. */
static int poll_samples(struct serve_live_hub *h, FILE *out, int *any) {
  struct store_series *series;
  size_t n;
  int rc = h->st->series_list(h->st, h->run_id, &series, &n);
  if (rc)
    return rc;
  int k = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    const struct store_series *s = &series[i];
    int64_t *last = last_of(h, s->id, -1);
    if (!last || s->count <= 0 || s->t_last <= *last)
      continue;
    rc = series_samples(out, h->st, s, *last, INT64_MAX, &k, last);
  }
  free(series);
  if (k) {
    fputs("]}\n\n", out);
    *any = 1;
  }
  return rc;
}

static void poll_findings(struct serve_live_hub *h, FILE *out, char **event) {
  struct store_finding *f;
  size_t n;
  struct runview_window w;
  if (doctor_diagnose_live_run(h->st, h->run_id, 0, &f, &n, &w))
    return;
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (m) {
    fprintf(m, "{\"live\":true,\"window_s\":");
    gs_json_num(m, w.span_s);
    fputs(",\"findings\":", m);
    serve_json_findings(m, f, n);
    fputc('}', m);
    fclose(m);
    if (!h->findings_json || strcmp(h->findings_json, buf)) {
      char *ev = NULL;
      size_t evlen = 0;
      FILE *e = open_memstream(&ev, &evlen);
      if (e) {
        fprintf(e, "event: findings\ndata: %s\n\n", buf);
        fclose(e);
        fputs(ev, out);
        free(*event);
        *event = ev;
      }
      free(h->findings_json);
      h->findings_json = buf;
      buf = NULL;
    }
  }
  free(buf);
  free(f);
}

/* The hub's next events (under st_mu): into *buf (malloc'd), 0 when there were none. *event is a
 * new findings event (malloc'd) when the findings changed. */
static int hub_events(struct serve_live_hub *h, char **buf, size_t *len, char **event, int *ended) {
  *buf = NULL;
  *len = 0;
  FILE *out = open_memstream(buf, len);
  if (!out)
    return 0;
  double now = now_s();
  int any = 0;
  struct store_run run;
  int rc = h->st->run_get(h->st, h->run_id, &run);
  if (rc) {
    fputs("event: error\ndata: {\"error\":", out);
    gs_json_str(out, gs_last_error());
    fputs("}\n\n", out);
    *ended = any = 1;
  } else if (poll_samples(h, out, &any) == GS_OK && strcmp(run.status, "running")) {
    /* finished: the last samples went above; the doctor's stored word and the status close it */
    struct store_finding *f;
    size_t n;
    if (!h->st->findings_read(h->st, h->run_id, &f, &n)) {
      fputs("event: findings\ndata: {\"live\":false,\"window_s\":null,\"findings\":", out);
      serve_json_findings(out, f, n);
      fputs("}\n\n", out);
      free(f);
    }
    fputs("event: status\ndata: {\"status\":", out);
    gs_json_str(out, run.status);
    fputs("}\n\n", out);
    *ended = any = 1;
  } else if (now >= h->next_findings) {
    fflush(out);
    size_t before = *len;
    poll_findings(h, out, event);
    fflush(out);
    any |= *len > before;
    h->next_findings = now + SERVE_LIVE_FINDINGS_EVERY_S;
  }
  if (!any && now >= h->next_beat) {
    fputs(": beat\n\n", out);
    any = 1;
  }
  fclose(out);
  if (any)
    h->next_beat = now + BEAT_S;
  return any;
}

static void resume(struct serve_live *v) {
  if (v->suspended) {
    v->suspended = 0;
    MHD_resume_connection(v->c);
  }
}

/* Appends to the log (under mu) and wakes the viewers; then lets go of what every viewer has read,
 * dropping those that lag more than SERVE_LIVE_BUFFER behind. */
static void hub_append(struct serve_live_hub *h, const char *data, size_t n) {
  if (h->len + n > h->cap) {
    size_t cap = h->cap ? h->cap : 65536;
    while (cap < h->len + n)
      cap *= 2;
    char *nl = realloc(h->log, cap);
    if (!nl) { /* no memory: the viewers cannot get this; end their streams rather than skip it */
      h->ended = 1;
      for (struct serve_live *v = h->viewers; v; v = v->next)
        v->dropped = 1, resume(v);
      return;
    }
    h->log = nl;
    h->cap = cap;
  }
  memcpy(h->log + h->len, data, n);
  h->len += n;
  uint64_t end = h->base + h->len, keep = end;
  for (struct serve_live *v = h->viewers; v; v = v->next) {
    if (!v->dropped && end - v->pos > SERVE_LIVE_BUFFER)
      v->dropped = 1; /* a reader that does not read */
    if (!v->dropped && v->pos < keep)
      keep = v->pos;
    resume(v);
  }
  size_t drop = (size_t)(keep - h->base);
  memmove(h->log, h->log + drop, h->len - drop);
  h->len -= drop;
  h->base = keep;
}

static void hub_free(struct serve_live_hub *h) {
  pthread_mutex_destroy(&h->mu);
  free(h->last);
  free(h->log);
  free(h->findings_event);
  free(h->findings_json);
  free(h);
}

static void *hub_main(void *arg) {
  struct serve_live_hub *h = arg;
  struct serve *s = h->s;
  for (;;) {
    pthread_mutex_lock(&s->live_mu);
    if (!h->refs) { /* nobody watches: the hub goes (a new viewer starts a new one) */
      struct serve_live_hub **p = &s->hubs;
      while (*p != h)
        p = &(*p)->next;
      *p = h->next;
      pthread_cond_broadcast(&s->live_cv);
      pthread_mutex_unlock(&s->live_mu);
      hub_free(h);
      return NULL;
    }
    pthread_mutex_unlock(&s->live_mu);
    pthread_mutex_lock(&h->mu);
    int done = h->ended || h->stopping;
    pthread_mutex_unlock(&h->mu);
    if (!done) {
      pthread_mutex_lock(h->st_mu);
      char *buf, *event = NULL;
      size_t len;
      int ended = 0;
      int any = hub_events(h, &buf, &len, &event, &ended);
      pthread_mutex_lock(&h->mu);
      if (event) {
        free(h->findings_event);
        h->findings_event = event;
      }
      if (any)
        hub_append(h, buf, len);
      if (ended) {
        h->ended = 1;
        for (struct serve_live *v = h->viewers; v; v = v->next)
          resume(v);
      }
      pthread_mutex_unlock(&h->mu);
      pthread_mutex_unlock(h->st_mu);
      free(buf);
    }
    struct timespec ts = {POLL_MS / 1000, (POLL_MS % 1000) * 1000000L};
    nanosleep(&ts, NULL);
  }
}

/* Finds run_id's hub or starts one (its store opened, its places at each series' last sample), and
 * counts the caller as a viewer. NULL with a message. All under s->live_mu, so viewers arriving at
 * once find the one hub the first of them started. */
static struct serve_live_hub *hub_join(struct serve *s, const char *run_id) {
  struct serve_live_hub *h = NULL;
  pthread_mutex_lock(&s->live_mu);
  if (s->live_stopping) {
    gs_fail(GS_EBUSY, "the server is stopping");
    goto fail;
  }
  for (h = s->hubs; h; h = h->next) {
    pthread_mutex_lock(&h->mu);
    int ended = h->ended;
    pthread_mutex_unlock(&h->mu);
    if (!ended && !strcmp(h->run_id, run_id)) {
      h->refs++;
      pthread_mutex_unlock(&s->live_mu);
      return h;
    }
  }
  if (!(h = calloc(1, sizeof *h))) {
    gs_fail(GS_ENOMEM, "out of memory");
    goto fail;
  }
  h->s = s;
  snprintf(h->run_id, sizeof h->run_id, "%s", run_id);
  pthread_mutex_init(&h->mu, NULL);
  h->st = s->st;
  h->st_mu = &s->mu;
  struct store_series *series = NULL;
  size_t n = 0;
  pthread_mutex_lock(h->st_mu);
  int rc = h->st->series_list(h->st, h->run_id, &series, &n);
  pthread_mutex_unlock(h->st_mu);
  if (rc)
    goto fail;
  for (size_t i = 0; i < n; i++) /* from now on: each series from its last committed sample */
    last_of(h, series[i].id, series[i].count > 0 ? series[i].t_last : -1); /* no thread has h yet */
  free(series);
  h->refs = 1;
  if (pthread_create(&h->thread, NULL, hub_main, h)) {
    gs_fail(GS_EIO, "cannot start a thread");
    goto fail;
  }
  pthread_detach(h->thread);
  h->next = s->hubs;
  s->hubs = h;
  pthread_mutex_unlock(&s->live_mu);
  return h;
fail:
  pthread_mutex_unlock(&s->live_mu);
  if (h)
    hub_free(h);
  return NULL;
}

struct serve_live *serve_live_new(struct serve *s, const char *run_id, int64_t since_ns, struct MHD_Connection *c) {
  struct serve_live *v = calloc(1, sizeof *v);
  if (!v) {
    gs_fail(GS_ENOMEM, "out of memory");
    return NULL;
  }
  struct serve_live_hub *h = hub_join(s, run_id);
  if (!h) {
    free(v);
    return NULL;
  }
  v->hub = h;
  v->c = c;
  /* Under st_mu the hub's places do not move: the catch-up ends where its log begins for v. */
  pthread_mutex_lock(h->st_mu);
  struct store_series *series = NULL;
  size_t n = 0;
  if (since_ns >= 0 && !h->st->series_list(h->st, h->run_id, &series, &n) && n && (v->cu = calloc(n, sizeof *v->cu)))
    for (size_t i = 0; i < n; i++) {
      int64_t *last = last_of(h, series[i].id, -1);
      if (last && *last > since_ns)
        v->cu[v->ncu++] = (struct catchup){.s = series[i], .from = since_ns, .upto = *last};
    }
  free(series);
  pthread_mutex_lock(&h->mu);
  const char *hello = ": gpuscope live\n\n";
  const char *ev = h->findings_event ? h->findings_event : "";
  v->plen = strlen(hello) + strlen(ev);
  if ((v->pre = malloc(v->plen + 1)))
    snprintf(v->pre, v->plen + 1, "%s%s", hello, ev);
  else
    v->plen = 0;
  v->pos = h->base + h->len;
  v->next = h->viewers;
  if (h->viewers)
    h->viewers->prev = v;
  h->viewers = v;
  pthread_mutex_unlock(&h->mu);
  pthread_mutex_unlock(h->st_mu);
  return v;
}

void serve_live_free(void *cls) {
  struct serve_live *v = cls;
  if (!v)
    return;
  struct serve_live_hub *h = v->hub;
  struct serve *s = h->s;
  pthread_mutex_lock(&s->live_mu);
  pthread_mutex_lock(&h->mu);
  if (v->prev)
    v->prev->next = v->next;
  else
    h->viewers = v->next;
  if (v->next)
    v->next->prev = v->prev;
  pthread_mutex_unlock(&h->mu);
  h->refs--; /* the hub thread sees it and goes when it was the last */
  pthread_mutex_unlock(&s->live_mu);
  free(v->pre);
  free(v->cu);
  free(v);
}

/* The viewer's next piece of catch-up (samples up to where it joined the log) into v->pre. */
static int catchup_next(struct serve_live *v) {
  struct serve_live_hub *h = v->hub;
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  if (!out)
    return -1;
  int k = 0, rc = GS_OK;
  pthread_mutex_lock(h->st_mu);
  for (; v->icu < v->ncu && rc == GS_OK && len < 65536; v->icu++, fflush(out)) {
    struct catchup *c = &v->cu[v->icu];
    int64_t from = c->from;
    rc = series_samples(out, h->st, &c->s, c->from, c->upto, &k, &c->from);
    if (rc == GS_OK && c->from != from && c->from < c->upto)
      v->icu--; /* more of this one next time */
  }
  pthread_mutex_unlock(h->st_mu);
  if (k)
    fputs("]}\n\n", out);
  fclose(out);
  free(v->pre);
  v->pre = buf;
  v->plen = len;
  v->poff = 0;
  return rc == GS_OK ? 0 : -1;
}

ssize_t serve_live_read(void *cls, uint64_t pos, char *buf, size_t max) {
  struct serve_live *v = cls;
  struct serve_live_hub *h = v->hub;
  (void)pos;
  for (;;) {
    if (v->poff < v->plen) {
      size_t n = v->plen - v->poff < max ? v->plen - v->poff : max;
      memcpy(buf, v->pre + v->poff, n);
      v->poff += n;
      return (ssize_t)n;
    }
    if (v->icu >= v->ncu)
      break;
    if (catchup_next(v))
      return MHD_CONTENT_READER_END_WITH_ERROR;
  }
  pthread_mutex_lock(&h->mu);
  ssize_t ret;
  if (v->dropped)
    ret = MHD_CONTENT_READER_END_WITH_ERROR;
  else if (h->stopping)
    ret = MHD_CONTENT_READER_END_OF_STREAM;
  else if (v->pos < h->base + h->len) {
    size_t n = (size_t)(h->base + h->len - v->pos);
    if (n > max)
      n = max;
    memcpy(buf, h->log + (v->pos - h->base), n);
    v->pos += n;
    ret = (ssize_t)n;
  } else if (h->ended)
    ret = MHD_CONTENT_READER_END_OF_STREAM;
  else {
    /* Nothing yet: the connection waits off the server's threads until the hub has more. */
    v->suspended = 1;
    MHD_suspend_connection(v->c);
    ret = 0;
  }
  pthread_mutex_unlock(&h->mu);
  return ret;
}

void serve_live_init(struct serve *s) {
  pthread_mutex_init(&s->live_mu, NULL);
  pthread_cond_init(&s->live_cv, NULL);
  s->hubs = NULL;
  s->live_stopping = 0;
}

void serve_live_stop(struct serve *s) {
  pthread_mutex_lock(&s->live_mu);
  s->live_stopping = 1;
  for (struct serve_live_hub *h = s->hubs; h; h = h->next) {
    pthread_mutex_lock(&h->mu);
    h->stopping = 1;
    for (struct serve_live *v = h->viewers; v; v = v->next)
      resume(v);
    pthread_mutex_unlock(&h->mu);
  }
  pthread_mutex_unlock(&s->live_mu);
}

void serve_live_done(struct serve *s) {
  pthread_mutex_lock(&s->live_mu);
  while (s->hubs) /* each ends within a poll once its viewers are gone */
    pthread_cond_wait(&s->live_cv, &s->live_mu);
  pthread_mutex_unlock(&s->live_mu);
  pthread_cond_destroy(&s->live_cv);
  pthread_mutex_destroy(&s->live_mu);
}
