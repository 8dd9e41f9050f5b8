/* serve/live: the live stream of one run (Server-Sent Events, docs/api.md). Each stream has its own
 * store handle and runs in its connection's thread: it polls the store once a second for samples
 * committed since the last poll (per series), sends them as a "samples" event, recomputes the live
 * findings every SERVE_LIVE_FINDINGS_EVERY_S (sent when they change), beats every 10 s so proxies and
 * the connection timeout keep it open, and ends with a "status" event once the run has finished. */
#include <math.h>
#include "serve/mhd_api.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "report/report_int.h"
#include "serve/serve_int.h"

enum { POLL_MS = 1000, BEAT_S = 10, MAX_POINTS_PER_EVENT = 20000 };

struct last_sent {
  int64_t id, t;
};

struct serve_live {
  struct serve *s;
  struct store *st;
  char run_id[32];
  int64_t since;
  struct last_sent *last;
  size_t nlast;
  char *pending;
  size_t plen, poff;
  char *findings_json; /* last sent */
  double next_findings, next_beat, next_poll;
  int ended, finished;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / GS_NS_PER_S;
}

struct serve_live *serve_live_new(struct serve *s, const char *run_id, int64_t since_ns) {
  struct serve_live *l = calloc(1, sizeof *l);
  if (!l) {
    gs_fail(GS_ENOMEM, "out of memory");
    return NULL;
  }
  l->s = s;
  l->st = store_open_mode(s->o->store_url, STORE_READ);
  if (!l->st) {
    free(l);
    return NULL;
  }
  snprintf(l->run_id, sizeof l->run_id, "%s", run_id);
  l->since = since_ns;
  return l;
}

void serve_live_free(void *cls) {
  struct serve_live *l = cls;
  if (!l)
    return;
  if (l->st)
    l->st->close(l->st);
  free(l->last);
  free(l->pending);
  free(l->findings_json);
  free(l);
}

static int64_t *last_of(struct serve_live *l, int64_t id, int64_t start) {
  for (size_t i = 0; i < l->nlast; i++)
    if (l->last[i].id == id)
      return &l->last[i].t;
  struct last_sent *n = realloc(l->last, (l->nlast + 1) * sizeof *n);
  if (!n)
    return NULL;
  l->last = n;
  n[l->nlast] = (struct last_sent){id, start};
  return &n[l->nlast++].t;
}

struct pts {
  FILE *out;
  size_t n;
  int64_t last;
  double *v;
  size_t cap;
};

static int put_t(void *user, int64_t t, double v) {
  struct pts *p = user;
  if (!isfinite(v))
    return 0;
  if (p->n == p->cap) {
    size_t cap = p->cap ? p->cap * 2 : 256;
    double *nv = realloc(p->v, cap * sizeof *nv);
    if (!nv)
      return -1;
    p->v = nv;
    p->cap = cap;
  }
  if (p->n)
    fputc(',', p->out);
  rp_json_num(p->out, serve_sec(t));
  p->v[p->n++] = v;
  p->last = t;
  return p->n >= MAX_POINTS_PER_EVENT;
}

/* One poll: new samples as an event (appended to out); sets *any when there were some. */
static int poll_samples(struct serve_live *l, FILE *out, int *any) {
  struct store_series *series;
  size_t n;
  int rc = l->st->series_list(l->st, l->run_id, &series, &n);
  if (rc)
    return rc;
  if (l->since < 0) { /* from now on: start at each series' last committed sample */
    for (size_t i = 0; i < n; i++)
      last_of(l, series[i].id, series[i].count > 0 ? series[i].t_last : -1);
    l->since = 0;
    free(series);
    return GS_OK;
  }
  int k = 0;
  double *tmp = NULL;
  for (size_t i = 0; i < n; i++) {
    const struct store_series *s = &series[i];
    int64_t *last = last_of(l, s->id, l->since);
    if (!last || s->count <= 0 || s->t_last <= *last)
      continue;
    fputs(k++ ? ",{" : "event: samples\ndata: {\"series\":[{", out);
    fprintf(out, "\"id\":%lld,\"source\":", (long long)s->id);
    rp_json_str(out, s->source);
    fputs(",\"name\":", out);
    rp_json_str(out, s->name);
    fputs(",\"labels\":", out);
    rp_json_str(out, s->labels);
    fputs(",\"unit\":", out);
    rp_json_str(out, s->unit);
    fputs(",\"t\":[", out);
    struct pts p = {.out = out, .last = *last, .v = tmp};
    rc = l->st->samples_read(l->st, s->id, *last + 1, INT64_MAX, put_t, &p);
    tmp = p.v;
    if (rc < 0)
      break;
    rc = GS_OK;
    fputs("],\"v\":[", out);
    for (size_t j = 0; j < p.n; j++) {
      if (j)
        fputc(',', out);
      rp_json_num(out, p.v[j]);
    }
    fputs("]}", out);
    *last = p.last;
  }
  free(tmp);
  free(series);
  if (k) {
    fputs("]}\n\n", out);
    *any = 1;
  }
  return rc;
}

static void poll_findings(struct serve_live *l, FILE *out) {
  struct store_finding *f;
  size_t n;
  double window_s;
  if (serve_live_findings(l->st, l->run_id, &f, &n, &window_s))
    return;
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (m) {
    fprintf(m, "{\"live\":true,\"window_s\":");
    rp_json_num(m, window_s);
    fputs(",\"findings\":", m);
    serve_json_findings(m, f, n);
    fputc('}', m);
    fclose(m);
    if (!l->findings_json || strcmp(l->findings_json, buf)) {
      fprintf(out, "event: findings\ndata: %s\n\n", buf);
      free(l->findings_json);
      l->findings_json = buf;
      buf = NULL;
    }
  }
  free(buf);
  free(f);
}

/* Fills l->pending with the next events; 0 when there was nothing (yet). */
static int next_events(struct serve_live *l) {
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  if (!out)
    return -1;
  double now = now_s();
  int any = 0;
  struct store_run run;
  int rc = l->st->run_get(l->st, l->run_id, &run);
  if (rc) {
    fprintf(out, "event: error\ndata: ");
    fputs("{\"error\":", out);
    rp_json_str(out, gs_last_error());
    fputs("}\n\n", out);
    l->ended = 1;
    any = 1;
  } else {
    if (poll_samples(l, out, &any) == GS_OK && strcmp(run.status, "running")) {
      /* finished: the last samples went above; the doctor's stored word and the status close it */
      struct store_finding *f;
      size_t n;
      if (!l->st->findings_read(l->st, l->run_id, &f, &n)) {
        fprintf(out, "event: findings\ndata: {\"live\":false,\"window_s\":null,\"findings\":");
        serve_json_findings(out, f, n);
        fputs("}\n\n", out);
        free(f);
      }
      fprintf(out, "event: status\ndata: {\"status\":");
      rp_json_str(out, run.status);
      fputs("}\n\n", out);
      l->ended = 1;
      any = 1;
    } else if (now >= l->next_findings) {
      size_t before = len;
      fflush(out);
      before = len;
      poll_findings(l, out);
      fflush(out);
      any |= len > before;
      l->next_findings = now + SERVE_LIVE_FINDINGS_EVERY_S;
    }
  }
  if (!any && now >= l->next_beat) {
    fputs(": beat\n\n", out);
    any = 1;
  }
  fclose(out);
  if (any) {
    l->next_beat = now + BEAT_S;
    free(l->pending);
    l->pending = buf;
    l->plen = len;
    l->poff = 0;
    return 1;
  }
  free(buf);
  return 0;
}

ssize_t serve_live_read(void *cls, uint64_t pos, char *buf, size_t max) {
  struct serve_live *l = cls;
  (void)pos;
  for (;;) {
    if (*l->s->stop)
      return MHD_CONTENT_READER_END_OF_STREAM;
    if (l->poff < l->plen) {
      size_t n = l->plen - l->poff < max ? l->plen - l->poff : max;
      memcpy(buf, l->pending + l->poff, n);
      l->poff += n;
      return (ssize_t)n;
    }
    if (l->ended)
      return MHD_CONTENT_READER_END_OF_STREAM;
    double now = now_s();
    if (now >= l->next_poll) {
      l->next_poll = now + POLL_MS / 1000.0;
      int r = next_events(l);
      if (r < 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
      if (r)
        continue;
    }
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}
