/* store/pg_spool: outages lose nothing. When the server cannot be reached (at the start, or a
 * connection lost mid-run), the writer thread appends the run's batches to a local SQLite store —
 * the spool, through the SQLite back end, one file per run ($GPUSCOPE_SPOOL_DIR, else the data
 * folder's gpuscope/spool/spool-RUNID.db, RUNID the server's run id; in the spool the run has an id
 * of its own, which the readers translate) — and tries to reconnect every
 * PG_RETRY_NS. When the server is back, the spool is replayed into it before anything newer, in
 * pieces of at most PG_SPOOL_PIECE_POINTS points (a transaction each: memory and transactions stay
 * bounded after a long outage), then deleted once the last piece is in. A replay that fails for
 * another cause than a lost connection (a constraint, a full disk on the server) keeps the spool
 * and says that cause, never "unreachable".
 *
 * A replay is idempotent, so a replay cut off halfway (or a flush whose COMMIT was lost with the
 * connection, stored or not) is simply replayed again: the run row is inserted unless present,
 * series are upserted on (run, source, name, labels), a series only moves forward (points at or
 * before its last stored time are skipped: they are there already), and events and notes have
 * unique keys (ON CONFLICT DO NOTHING). No sample is lost, none stored twice.
 *
 * The job is never slowed: all of this runs in the agent's writer thread, and a connection try is
 * bounded by libpq's connect_timeout (3 s unless the URL says otherwise). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/pg_int.h"

static int mkdirs(const char *dir) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *p = buf + 1;; p++) {
    if (*p && *p != '/')
      continue;
    char c = *p;
    *p = 0;
    if (mkdir(buf, 0700) && errno != EEXIST)
      return -1;
    if (!c)
      return 0;
    *p = c;
  }
}

static void spool_dir(char *buf, size_t n) {
  char dirs[1][STORE_SPOOL_DIR_MAX];
  store_spool_dirs(dirs, 1);
  snprintf(buf, n, "%s", dirs[0]);
}

/* Opens the run's spool and starts the run in it, with the same id. */
static int spool_open(struct pg_store *s, const struct store_run *r) {
  char dir[900];
  spool_dir(dir, sizeof dir);
  if (mkdirs(dir))
    return gs_fail(GS_EIO, "store %s is unreachable and the spool folder %s cannot be made: %s", s->name, dir,
                   strerror(errno));
  snprintf(s->spool_path, sizeof s->spool_path, "%s/spool-%s.db", dir, r->id);
  snprintf(s->server_run_id, sizeof s->server_run_id, "%s", r->id);
  if (!(s->spool = store_backend_sqlite.open(s->spool_path, STORE_WRITE)))
    return GS_EIO;
  struct store_run sr = *r;
  sr.id[0] = 0;
  int rc = s->spool->run_begin(s->spool, &sr);
  if (rc) {
    s->spool->close(s->spool);
    s->spool = NULL;
    return rc;
  }
  snprintf(s->spool_run_id, sizeof s->spool_run_id, "%s", sr.id);
  s->spool_series_sent = 0;
  return GS_OK;
}

int pg_spool_append(struct pg_store *s, const struct store_run *r, const struct gs_batch *b) {
  int rc;
  if (!s->spool && (rc = spool_open(s, r)))
    return rc;
  struct gs_batch tmp = *b;
  if (!s->spool_series_sent) { /* the spool knows no series yet: every one seen so far, once */
    tmp.series = s->known.b.series;
    tmp.n_series = s->known.b.n_series;
  }
  struct store_run sr = *r;
  snprintf(sr.id, sizeof sr.id, "%s", s->spool_run_id);
  if ((rc = s->spool->run_append(s->spool, &sr, &tmp)))
    return rc;
  s->spool_series_sent = 1;
  s->spooled_points += (int64_t)b->n_points;
  return GS_OK;
}

/* The most points one replayed piece holds: $GPUSCOPE_SPOOL_PIECE_POINTS (for tests), else
 * PG_SPOOL_PIECE_POINTS. */
static size_t piece_points(void) {
  const char *e = getenv("GPUSCOPE_SPOOL_PIECE_POINTS");
  long long v = e && *e ? atoll(e) : 0;
  return v > 0 ? (size_t)v : PG_SPOOL_PIECE_POINTS;
}

struct collect_ctx {
  struct gs_batch *b;
  int32_t series;
  int64_t mono0;
  size_t limit; /* the piece is full at this many points */
  int64_t last; /* the spool time of the last point taken */
  int full, oom;
};

static int collect_point(void *u, int64_t t, double v) {
  struct collect_ctx *c = u;
  if (store_batch_push(c->b, c->series, t + c->mono0, v)) {
    c->oom = 1;
    return 1;
  }
  c->last = t;
  c->full = c->b->n_points >= c->limit;
  return c->full;
}

/* A spool on its way to the server, piece by piece. */
struct replay {
  struct pg_store *w;        /* the writer the pieces go through */
  const struct store_run *r; /* the run as the server knows it */
  struct store *sp;          /* the spool */
  const char *spool_id;      /* the run's id in the spool */
  const struct store_series *ser;
  size_t nser;
  const int32_t *ids; /* each spooled series' id in the batch (-1: not replayed) */
  struct gs_batch *b; /* its series definitions and the piece's points */
  int64_t mono0;      /* a spool time + mono0 = the batch's time */
  int64_t lo, hi, total;
};

/* Fills b with the next piece: each series from its cursor cur[i] up to end, until the piece holds
 * max points (*full: the series after it wait for the next piece). */
static int read_piece(struct replay *p, int64_t *cur, int64_t end, size_t max, int *full) {
  int rc = GS_OK;
  *full = 0;
  for (size_t i = 0; i < p->nser && !*full && !rc; i++) {
    if (p->ids[i] < 0 || cur[i] > end)
      continue;
    struct collect_ctx c = {.b = p->b, .series = p->ids[i], .mono0 = p->mono0, .limit = max};
    rc = p->sp->samples_read(p->sp, p->ser[i].id, cur[i], end, collect_point, &c);
    if (c.oom)
      rc = gs_fail(GS_ENOMEM, "out of memory");
    *full = c.full;
    cur[i] = c.full ? c.last + 1 : end + 1;
  }
  return rc;
}

/* The spool's events as batch events (pointing into ev, times + mono0); the caller frees the
 * array. NULL when out of memory. */
static struct gs_event *spool_events_copy(struct store_event *ev, size_t nev, int64_t mono0) {
  struct gs_event *bev = calloc(nev ? nev : 1, sizeof *bev);
  if (!bev)
    return NULL;
  for (size_t i = 0; i < nev; i++)
    bev[i] = (struct gs_event){.t_ns = ev[i].t + mono0,
                               .kind = ev[i].kind,
                               .name = ev[i].name,
                               .value = ev[i].value,
                               .labels = ev[i].labels,
                               .text = ev[i].text};
  return bev;
}

/* Writes the spool's events to the server in time order, a page of at most max a transaction, read
 * from the spool one page at a time: a long outage's events (a process tree's starts and exits)
 * are bounded in memory and in transaction size like its samples. */
static int replay_events(struct replay *p, size_t max) {
  struct store_event_cursor cur = STORE_EVENT_CURSOR_START;
  int rc = GS_OK;
  for (size_t n = max; !rc && n == max;) {
    struct store_event *ev = NULL;
    if ((rc = store_sqlite_events_page(p->sp, p->spool_id, &cur, max, &ev, &n)))
      break;
    struct gs_event *bev = n ? spool_events_copy(ev, n, p->mono0) : NULL;
    if (n && !bev)
      rc = gs_fail(GS_ENOMEM, "out of memory");
    else if (n) {
      struct gs_batch b = {.events = bev, .n_events = n};
      rc = pg_write_batch(p->w, p->r, &b);
    }
    free(bev);
    free(ev);
  }
  return rc;
}

/* Writes what the spool holds beside its samples, at most max items a transaction: its params and
 * notes (read whole: at most 10,000 params a run, the protocol's limit, and a few notes), then its
 * events, paged. Idempotent as the samples are: params are upserted, events and notes unique. */
static int replay_rest(struct replay *p, size_t max) {
  struct gs_kv *kv = NULL;
  char **notes = NULL;
  size_t nkv = 0, nnotes = 0;
  int rc = p->sp->params_read(p->sp, p->spool_id, &kv, &nkv);
  if (!rc)
    rc = p->sp->notes_read(p->sp, p->spool_id, &notes, &nnotes);
  for (size_t i = 0; !rc && i < nkv; i += max) {
    struct gs_batch b = {.params = kv + i, .n_params = nkv - i < max ? nkv - i : max};
    rc = pg_write_batch(p->w, p->r, &b);
  }
  for (size_t i = 0; !rc && i < nnotes; i += max) {
    struct gs_batch b = {.notes = notes + i, .n_notes = nnotes - i < max ? nnotes - i : max};
    rc = pg_write_batch(p->w, p->r, &b);
  }
  if (kv)
    store_kv_free(kv, nkv);
  if (notes)
    store_notes_free(notes, nnotes);
  if (!rc)
    rc = replay_events(p, max < STORE_PENDING_MAX_EVENTS ? max : STORE_PENDING_MAX_EVENTS);
  return rc;
}

/* Writes the spool to the server in pieces of at most piece_points() points, one transaction each,
 * in time slices of about that many points (the spool's rate taken as even; a piece that fills
 * first leaves the series after it for the next). Each piece is idempotent (a series only moves
 * forward), so a replay cut off between pieces resumes where it stopped. */
static int replay_pieces(struct replay *p) {
  size_t max = piece_points();
  p->lo = INT64_MAX, p->hi = INT64_MIN, p->total = 0;
  for (size_t i = 0; i < p->nser; i++)
    if (p->ids[i] >= 0 && p->ser[i].count > 0) {
      p->lo = p->ser[i].t_first < p->lo ? p->ser[i].t_first : p->lo;
      p->hi = p->ser[i].t_last > p->hi ? p->ser[i].t_last : p->hi;
      p->total += p->ser[i].count;
    }
  int64_t *cur = malloc((p->nser ? p->nser : 1) * sizeof *cur);
  if (!cur)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < p->nser; i++)
    cur[i] = INT64_MIN;
  double span = p->total ? (double)p->hi - (double)p->lo + 1 : 1;
  double wd = span * (double)max / (double)(p->total ? p->total : 1);
  int64_t width = (int64_t)(wd < span ? wd : span) + 1; /* a slice wider than the spool is all of it */
  /* the last slice reaches the end of time: a point past the counted t_last is not left behind */
  int64_t end = !p->total || p->hi - p->lo < width ? INT64_MAX - 1 : p->lo + width - 1;
  int rc = GS_OK, full = 0;
  for (int first = 1;; first = 0) {
    p->b->n_points = 0;
    if ((rc = read_piece(p, cur, end, max, &full)))
      break;
    if ((p->b->n_points || first) && (rc = pg_write_batch(p->w, p->r, p->b)))
      break;
    if (!full && end == INT64_MAX - 1)
      break;
    if (!full)
      end = p->hi - end <= width ? INT64_MAX - 1 : end + width;
  }
  free(cur);
  return rc ? rc : replay_rest(p, max);
}

/* The spool's output chunks on their way to the server, a transaction per PG_LOG_REPLAY_BYTES. */
#define PG_LOG_REPLAY_BYTES (4u << 20)
struct log_replay {
  struct pg_store *w;
  const char *run_id; /* the run's id in the server */
  struct store_log_chunk *c;
  uint8_t *buf;
  size_t n, cap, used, bufcap;
  int rc;
};

static int log_replay_flush(struct log_replay *x) {
  for (size_t i = 0; i < x->n; i++) /* offsets into buf until now: it may have moved */
    x->c[i].data = x->buf + (uintptr_t)x->c[i].data;
  if (x->n && !x->rc)
    x->rc = pg_log_write(x->w, x->run_id, x->c, x->n, 0);
  x->n = x->used = 0;
  return x->rc;
}

/* store_log_fn: one chunk of the spool kept (its bytes copied: they are valid during the call). */
static int log_replay_chunk(void *u, const struct store_log_chunk *c) {
  struct log_replay *x = u;
  if ((x->used + c->len > PG_LOG_REPLAY_BYTES || x->n == x->cap) && log_replay_flush(x))
    return 1;
  if (x->n == x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 256;
    struct store_log_chunk *v = realloc(x->c, cap * sizeof *v);
    if (!v)
      return x->rc = gs_fail(GS_ENOMEM, "out of memory"), 1;
    x->c = v, x->cap = cap;
  }
  if (x->used + c->len > x->bufcap) {
    size_t cap = x->used + c->len > PG_LOG_REPLAY_BYTES ? x->used + c->len : PG_LOG_REPLAY_BYTES;
    uint8_t *b = realloc(x->buf, cap);
    if (!b)
      return x->rc = gs_fail(GS_ENOMEM, "out of memory"), 1;
    x->buf = b, x->bufcap = cap;
  }
  if (c->len)
    memcpy(x->buf + x->used, c->data, c->len);
  x->c[x->n] = *c;
  x->c[x->n++].data = (const uint8_t *)(uintptr_t)x->used; /* an offset until the flush */
  x->used += c->len;
  return 0;
}

/* Writes the spool's output chunks of spool_id to the server as run_id. Idempotent (a chunk there is
 * left). A store without log_read (none today) has nothing to replay. */
static int replay_logs(struct pg_store *w, struct store *sp, const char *spool_id, const char *run_id) {
  if (sp->version < 5 || !sp->log_read)
    return GS_OK;
  struct log_replay x = {.w = w, .run_id = run_id};
  int rc = sp->log_read(sp, spool_id, 0, log_replay_chunk, &x);
  if (!rc)
    rc = log_replay_flush(&x);
  rc = rc ? rc : x.rc;
  free(x.c);
  free(x.buf);
  return rc;
}

/* The sink id of a spooled series (its definitions are the ones the agent gave), or -1. */
static int32_t sink_id(const struct pg_store *s, const struct store_series *x) {
  for (size_t i = 0; i < s->known.b.n_series; i++) {
    const struct gs_series_def *d = &s->known.b.series[i];
    if (!strcmp(d->source, x->source) && !strcmp(d->name, x->name) && !strcmp(d->labels ? d->labels : "", x->labels))
      return d->id;
  }
  return -1;
}

static void remove_spool(struct pg_store *s) {
  s->spool->close(s->spool);
  s->spool = NULL;
  const char *suffix[] = {"", "-wal", "-shm", "-journal"};
  char p[1100];
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s%s", s->spool_path, suffix[i]);
    unlink(p);
  }
}

int pg_spool_replay(struct pg_store *s, const struct store_run *r) {
  if (!s->spool)
    return GS_OK;
  struct gs_batch b = {.series = s->known.b.series, .n_series = s->known.b.n_series};
  struct store_series *ser = NULL;
  int32_t *ids = NULL;
  size_t nser = 0;
  struct store *sp = s->spool;
  int rc = s->run_in_pg ? GS_OK : pg_insert_run(s, r);
  if (rc || (rc = sp->series_list(sp, s->spool_run_id, &ser, &nser)))
    goto fail;
  if (!(ids = malloc((nser ? nser : 1) * sizeof *ids))) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < nser; i++)
    ids[i] = sink_id(s, &ser[i]); /* -1 cannot happen: the spool's series came from the agent's definitions */
  struct replay p = {.w = s,
                     .r = r,
                     .sp = sp,
                     .spool_id = s->spool_run_id,
                     .ser = ser,
                     .nser = nser,
                     .ids = ids,
                     .b = &b,
                     .mono0 = r->mono_start_ns};
  if (!(rc = replay_pieces(&p)) && !(rc = replay_logs(s, sp, s->spool_run_id, r->id))) {
    s->replayed_points += p.total;
    remove_spool(s);
  }
fail:
  if (rc && !s->down) /* the server is there but did not take the spool: the real cause, not "unreachable" */
    snprintf(s->replay_error, sizeof s->replay_error, "%s", gs_last_error());
  else if (!rc)
    s->replay_error[0] = 0;
  free(b.points);
  free(ser);
  free(ids);
  return rc;
}

int pg_spool_end(struct pg_store *s, const struct store_run *r) {
  struct gs_batch none = {0};
  int rc;
  if (!s->spool && (rc = pg_spool_append(s, r, &none)))
    return rc;
  struct store_run sr = *r;
  snprintf(sr.id, sizeof sr.id, "%s", s->spool_run_id);
  return s->spool->run_end(s->spool, &sr);
}

void pg_spool_done(struct pg_store *s) {
  if (s->spool)
    s->spool->close(s->spool);
  s->spool = NULL;
}

/* ---- spools left behind ---- */

/* Removes a recovered spool file and the files SQLite keeps beside it. */
static void spool_unlink(const char *path) {
  const char *suffix[] = {"", "-wal", "-shm", "-journal"};
  char p[1300];
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s%s", path, suffix[i]);
    unlink(p);
  }
}

/* The batch's series definitions of the spooled series (pointing into ser), ids 0..nser-1. */
static int spool_defs(struct store_series *ser, size_t nser, struct gs_batch *b, int32_t **ids) {
  b->series = calloc(nser ? nser : 1, sizeof *b->series);
  *ids = malloc((nser ? nser : 1) * sizeof **ids);
  if (!b->series || !*ids)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < nser; i++) {
    b->series[i] = (struct gs_series_def){.id = (int)i,
                                          .source = ser[i].source,
                                          .name = ser[i].name,
                                          .labels = ser[i].labels,
                                          .unit = ser[i].unit,
                                          .kind = ser[i].kind};
    (*ids)[i] = (int32_t)i;
  }
  b->n_series = nser;
  return GS_OK;
}

/* Replays one spool file left by an agent that is gone (its run ended while the server was away,
 * or it was killed during an outage) into the server, as run server_id, in pieces; deletes it when
 * the last piece is in. Through a writer state of its own (tmp), sharing the connection: the run's
 * own writer is not disturbed. Returns 0, 1 when the spool is still in use (its agent is alive), or
 * a GS_E code (the spool is kept). */
static int recover_one(struct pg_store *s, const char *path, const char *server_id) {
  struct store *sp = store_backend_sqlite.open(path, STORE_READ);
  if (!sp)
    return GS_EIO;
  struct store_run *runs = NULL;
  size_t nruns = 0;
  int rc = sp->runs_list(sp, &runs, &nruns);
  if (!rc && (nruns != 1 || !strcmp(runs[0].status, "running"))) { /* another agent's, in use */
    free(runs);
    sp->close(sp);
    return 1;
  }
  struct pg_store tmp = {
      .conn = s->conn, .connect = s->connect, .mode = STORE_WRITE, .schema_ok = 1, .timeout_ns = s->timeout_ns};
  snprintf(tmp.name, sizeof tmp.name, "%s", s->name);
  struct gs_batch b = {0};
  struct store_series *ser = NULL;
  int32_t *ids = NULL;
  size_t nser = 0;
  struct store_run rr = {0};
  if (rc)
    goto fail;
  rr = runs[0];
  const char *spool_id = runs[0].id;
  snprintf(rr.id, sizeof rr.id, "%s", server_id);
  rr.mono_start_ns = 0; /* the spool's times are the run's already */
  if ((rc = sp->series_list(sp, spool_id, &ser, &nser)) || (rc = spool_defs(ser, nser, &b, &ids)))
    goto fail;
  /* the run as it ended in the spool (or as the crash left it): row, samples, then its end */
  struct store_run row = rr;
  struct replay p = {
      .w = &tmp, .r = &rr, .sp = sp, .spool_id = spool_id, .ser = ser, .nser = nser, .ids = ids, .b = &b};
  if ((rc = pg_insert_run(&tmp, &row)) || (rc = replay_pieces(&p)) || (rc = replay_logs(&tmp, sp, spool_id, server_id)))
    goto fail;
  if (!rr.end_wall_ns)
    rr.end_wall_ns = rr.start_wall_ns;
  int ended;
  rc = pg_write_finish(&tmp, &rr, &ended);
fail:
  if (!tmp.conn) { /* tmp dropped the shared connection (broken, or no answer in time): s has none either */
    s->conn = NULL;
    pg_drop(s, tmp.lost_why);
  }
  pg_writer_done(&tmp);
  free(b.series);
  free(b.points);
  free(ser);
  free(ids);
  free(runs);
  sp->close(sp);
  if (!rc)
    spool_unlink(path);
  return rc;
}

int pg_spool_recover(struct pg_store *s) {
  char dir[900];
  spool_dir(dir, sizeof dir);
  DIR *d = opendir(dir);
  if (!d)
    return 0;
  int done = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    char id[32];
    if (len < 10 || len - 9 >= sizeof id || strncmp(e->d_name, "spool-", 6) || strcmp(e->d_name + len - 3, ".db"))
      continue;
    snprintf(id, sizeof id, "%.*s", (int)(len - 9), e->d_name + 6);
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    int rc = recover_one(s, path, id);
    if (!rc)
      done++;
    else if (pg_conn_lost(s))
      break;
    else if (rc < 0 && !s->recover_error[0]) /* said on the next run (a note), by its cause */
      snprintf(s->recover_error, sizeof s->recover_error,
               "the spool %s, left by an earlier run, was not replayed: %s; it is kept, and the next run that reaches"
               " the server tries again",
               path, gs_last_error());
  }
  closedir(d);
  return done;
}
