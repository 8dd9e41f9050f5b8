/* store/pg_spool: outages lose nothing. When the server cannot be reached (at the start, or a
 * connection lost mid-run), the writer thread appends the run's batches to a local SQLite store —
 * the spool, through the SQLite back end, one file per run ($GPUSCOPE_SPOOL_DIR, else the data
 * folder's gpuscope/spool/spool-RUNID.db, RUNID the server's run id; in the spool the run has an id
 * of its own, which the readers translate) — and tries to reconnect every
 * PG_RETRY_NS. When the server is back, the spool is replayed into it in one transaction before
 * anything newer, then deleted.
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

int pg_reconnect(struct pg_store *s, int force) {
  if (!s->down && !pg_conn_lost(s))
    return GS_OK;
  int64_t now = gs_mono_ns();
  if (!force && now < s->next_try_ns)
    return GS_EIO;
  s->next_try_ns = now + PG_RETRY_NS;
  int rc = pg_connect(s);
  if (rc) {
    s->down = 1;
    return rc;
  }
  s->stale = 1; /* whatever the last connection left: the open chunks are read again */
  return GS_OK;
}

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
  const char *env = getenv("GPUSCOPE_SPOOL_DIR"), *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
  if (env && *env)
    snprintf(buf, n, "%s", env);
  else if (xdg && *xdg)
    snprintf(buf, n, "%s/gpuscope/spool", xdg);
  else
    snprintf(buf, n, "%s/.local/share/gpuscope/spool", home && *home ? home : ".");
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

struct collect_ctx {
  struct gs_batch *b;
  int32_t series;
  int64_t mono0;
  int oom;
};

static int collect_point(void *u, int64_t t, double v) {
  struct collect_ctx *c = u;
  struct gs_batch *b = c->b;
  if (b->n_points == b->cap_points) {
    size_t cap = b->cap_points ? b->cap_points * 2 : 4096;
    struct gs_point *p = realloc(b->points, cap * sizeof *p);
    if (!p) {
      c->oom = 1;
      return 1;
    }
    b->points = p;
    b->cap_points = cap;
  }
  b->points[b->n_points++] = (struct gs_point){.series = c->series, .t_ns = t + c->mono0, .v = v};
  return 0;
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
  int rc;
  if (!s->run_in_pg && (rc = pg_insert_run(s, r)))
    return rc;
  struct gs_batch b = {.series = s->known.b.series, .n_series = s->known.b.n_series};
  struct store_series *ser = NULL;
  struct store_event *ev = NULL;
  struct gs_kv *kv = NULL;
  char **notes = NULL;
  size_t nser = 0, nev = 0, nkv = 0, nnotes = 0;
  struct store *sp = s->spool;
  if ((rc = sp->series_list(sp, s->spool_run_id, &ser, &nser)))
    goto out;
  struct collect_ctx c = {&b, 0, r->mono_start_ns, 0};
  for (size_t i = 0; i < nser && !rc; i++) {
    if ((c.series = sink_id(s, &ser[i])) < 0)
      continue; /* cannot happen: the spool's series came from the agent's definitions */
    rc = sp->samples_read(sp, ser[i].id, INT64_MIN, INT64_MAX, collect_point, &c);
    if (c.oom)
      rc = gs_fail(GS_ENOMEM, "out of memory");
  }
  if (rc || (rc = sp->events_read(sp, s->spool_run_id, &ev, &nev)) ||
      (rc = sp->params_read(sp, s->spool_run_id, &kv, &nkv)) ||
      (rc = sp->notes_read(sp, s->spool_run_id, &notes, &nnotes)))
    goto out;
  struct gs_event *bev = calloc(nev ? nev : 1, sizeof *bev);
  if (!bev) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto out;
  }
  for (size_t i = 0; i < nev; i++)
    bev[i] = (struct gs_event){.t_ns = ev[i].t + r->mono_start_ns,
                               .kind = ev[i].kind,
                               .name = ev[i].name,
                               .value = ev[i].value,
                               .labels = ev[i].labels,
                               .text = ev[i].text};
  b.events = bev, b.n_events = nev;
  b.params = kv, b.n_params = nkv;
  b.notes = notes, b.n_notes = nnotes;
  rc = pg_write_batch(s, r, &b);
  free(bev);
  if (!rc) {
    s->replayed_points += (int64_t)b.n_points;
    remove_spool(s);
  }
out:
  free(b.points);
  free(ser);
  free(ev);
  if (kv)
    store_kv_free(kv, nkv);
  if (notes)
    store_notes_free(notes, nnotes);
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

const char *pg_spool_run_id(const struct pg_store *s, const char *run_id) {
  return s->spool && !strcmp(run_id, s->server_run_id) ? s->spool_run_id : run_id;
}

struct store *pg_spool_reader(struct pg_store *s) {
  return s->down && s->spool ? s->spool : NULL;
}

void pg_spool_done(struct pg_store *s) {
  if (s->spool)
    s->spool->close(s->spool);
  s->spool = NULL;
}

/* ---- spools left behind ---- */

/* Replays one spool file left by an agent that is gone (its run ended while the server was away,
 * or it was killed during an outage) into the server, as run server_id; deletes it when done.
 * Through a writer state of its own (tmp), sharing the connection: the run's own writer is not
 * disturbed. Returns 0, 1 when the spool is still in use (its agent is alive), or a GS_E code. */
/* Reads every spooled series' samples into b (series table and points); b owns what it holds. */
static int spool_read_samples(struct store *sp, struct store_series *ser, size_t nser, struct gs_batch *b) {
  int rc = GS_OK;
  if (!(b->series = calloc(nser ? nser : 1, sizeof *b->series)))
    return gs_fail(GS_ENOMEM, "out of memory");
  struct collect_ctx c = {b, 0, 0, 0};
  for (size_t i = 0; i < nser && !rc; i++) {
    b->series[i] = (struct gs_series_def){.id = (int)i,
                                          .source = ser[i].source,
                                          .name = ser[i].name,
                                          .labels = ser[i].labels,
                                          .unit = ser[i].unit,
                                          .kind = ser[i].kind};
    c.series = (int32_t)i;
    rc = sp->samples_read(sp, ser[i].id, INT64_MIN, INT64_MAX, collect_point, &c);
    if (c.oom)
      rc = gs_fail(GS_ENOMEM, "out of memory");
  }
  b->n_series = nser;
  return rc;
}

/* The spool's events as batch events (pointing into ev); the caller frees the array. NULL when out
 * of memory. */
static struct gs_event *spool_events_copy(struct store_event *ev, size_t nev) {
  struct gs_event *bev = calloc(nev ? nev : 1, sizeof *bev);
  if (!bev)
    return NULL;
  for (size_t i = 0; i < nev; i++)
    bev[i] = (struct gs_event){.t_ns = ev[i].t,
                               .kind = ev[i].kind,
                               .name = ev[i].name,
                               .value = ev[i].value,
                               .labels = ev[i].labels,
                               .text = ev[i].text};
  return bev;
}

/* Removes a recovered spool file and the files SQLite keeps beside it. */
static void spool_unlink(const char *path) {
  const char *suffix[] = {"", "-wal", "-shm", "-journal"};
  char p[1300];
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s%s", path, suffix[i]);
    unlink(p);
  }
}

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
  struct pg_store tmp = {.conn = s->conn, .mode = STORE_WRITE, .schema_ok = 1};
  snprintf(tmp.name, sizeof tmp.name, "%s", s->name);
  struct gs_batch b = {0};
  struct store_series *ser = NULL;
  struct store_event *ev = NULL;
  struct gs_kv *kv = NULL;
  char **notes = NULL;
  size_t nser = 0, nev = 0, nkv = 0, nnotes = 0;
  struct gs_event *bev = NULL;
  struct store_run rr = {0};
  if (rc)
    goto out;
  rr = runs[0];
  const char *spool_id = runs[0].id;
  snprintf(rr.id, sizeof rr.id, "%s", server_id);
  rr.mono_start_ns = 0; /* the spool's times are the run's already */
  if ((rc = sp->series_list(sp, spool_id, &ser, &nser)) || (rc = spool_read_samples(sp, ser, nser, &b)) ||
      (rc = sp->events_read(sp, spool_id, &ev, &nev)) || (rc = sp->params_read(sp, spool_id, &kv, &nkv)) ||
      (rc = sp->notes_read(sp, spool_id, &notes, &nnotes)))
    goto out;
  if (!(bev = spool_events_copy(ev, nev))) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto out;
  }
  b.events = bev, b.n_events = nev;
  b.params = kv, b.n_params = nkv;
  b.notes = notes, b.n_notes = nnotes;
  /* the run as it ended in the spool (or as the crash left it): row, samples, then its end */
  struct store_run row = rr;
  if ((rc = pg_insert_run(&tmp, &row)) || (rc = pg_write_batch(&tmp, &rr, &b)))
    goto out;
  if (!rr.end_wall_ns)
    rr.end_wall_ns = rr.start_wall_ns;
  rc = pg_run_end(&tmp.base, &rr);
out:
  pg_writer_done(&tmp);
  free(bev);
  free(b.series);
  free(b.points);
  free(ser);
  free(ev);
  if (kv)
    store_kv_free(kv, nkv);
  if (notes)
    store_notes_free(notes, nnotes);
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
    if (!recover_one(s, path, id))
      done++;
    else if (pg_conn_lost(s))
      break;
  }
  closedir(d);
  return done;
}
