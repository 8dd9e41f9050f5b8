/* store/store_sqlite: the embedded back end — one SQLite file in WAL mode, so several agents can
 * append at once and readers never block writers. Samples are kept as Gorilla chunks (chunk.c); the
 * open chunk of every series is rewritten at each flush, so a run killed at any moment keeps
 * everything up to its last flush. The schema is created and migrated here (meta.schema_version).
 *
 * Why the chunks table is a rowid table with a unique index on (series_id, t0), rather than
 * clustered by series: each flush rewrites the open chunk of every series, and SQLite writes every
 * page a transaction touched to the WAL. Clustered by series, the open chunks of a long run sit on
 * one page per series (60 host series: ~60 pages, 240 KB per second). Here the open chunk of
 * series N lives in its own row at rowid -N: all open chunks share the table's first few pages,
 * an in-place UPDATE leaves the index alone, and a full chunk moves to the end of the table (a new
 * rowid), where full chunks are appended one after another and pages fill up. Stores created
 * before keep the clustered table and are written the old way: both layouts have the same
 * columns, so any version reads and writes either. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store.h"

/* A chunk closes at 1,024 points, after 120 s, or when it nears CHUNK_MAX_BYTES, which keeps every
 * row within one 4 KiB page (SQLite's default page size): a larger row spills into an overflow
 * page that is rewritten at each flush and half empty for good. */
enum { CHUNK_MAX_POINTS = 1024, CHUNK_MAX_BYTES = 4000, CHUNK_MAX_POINT_BYTES = 19 };
#define CHUNK_MAX_SPAN_NS (120LL * 1000000000LL)
#define STALE_HEARTBEAT_NS (120LL * 1000000000LL)

struct wseries { /* writer state of one sink series */
  int64_t db_id;
  int open_row;   /* rowid layout: the open chunk is in the series' row at rowid -db_id */
  int slot_empty; /* rowid layout: that row is known not to exist */
  struct chunk_enc enc;
  int dirty;
};

struct sqlite_store {
  struct store base; /* first: the interface */
  sqlite3 *db;
  char path[1024];
  struct wseries *ws; /* indexed by sink series id */
  size_t n_ws;
  sqlite3_stmt *ins_chunk;
  sqlite3_stmt *upd_open, *ins_open, *move_open; /* rowid layout only (NULL for a clustered store) */
  sqlite3_stmt *begin, *commit, *heartbeat; /* the writer's per-flush statements, prepared once */
};

static const char *SCHEMA_V1[] = {
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE runs(id TEXT PRIMARY KEY, name TEXT NOT NULL DEFAULT '', grp TEXT NOT NULL DEFAULT '',"
    " command TEXT, cwd TEXT, host TEXT, user TEXT, tags TEXT, git TEXT, start_wall_ns INTEGER,"
    " end_wall_ns INTEGER, heartbeat_wall_ns INTEGER, status TEXT, exit_code INTEGER, agent_pid INTEGER,"
    " boot_id TEXT, interval_ns INTEGER)",
    "CREATE INDEX runs_name ON runs(name)",
    "CREATE TABLE params(run_id TEXT, key TEXT, value TEXT, PRIMARY KEY(run_id, key)) WITHOUT ROWID",
    "CREATE TABLE series(id INTEGER PRIMARY KEY, run_id TEXT NOT NULL, source TEXT, name TEXT, labels TEXT,"
    " unit TEXT, kind INTEGER, UNIQUE(run_id, source, name, labels))",
    "CREATE TABLE chunks(series_id INTEGER, t0 INTEGER, t1 INTEGER, n INTEGER, data BLOB)",
    "CREATE UNIQUE INDEX chunks_series ON chunks(series_id, t0)",
    "CREATE TABLE rollups(series_id INTEGER, res_ns INTEGER, t INTEGER, n INTEGER, min REAL, max REAL,"
    " mean REAL, PRIMARY KEY(series_id, res_ns, t)) WITHOUT ROWID",
    "CREATE TABLE events(run_id TEXT, t INTEGER, kind TEXT, name TEXT, value REAL, labels TEXT, text TEXT)",
    "CREATE INDEX events_run ON events(run_id, t)",
    "CREATE TABLE notes(run_id TEXT, t INTEGER, text TEXT)",
    "CREATE TABLE findings(run_id TEXT, rank INTEGER, rule TEXT, severity TEXT, share REAL, lost_s REAL,"
    " speedup REAL, title TEXT, evidence TEXT, fix TEXT, PRIMARY KEY(run_id, rank)) WITHOUT ROWID",
    NULL};

static int db_fail(struct sqlite_store *s, int code, const char *what) {
  return gs_fail(code, "store %s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
}

static int exec(struct sqlite_store *s, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    int rc = gs_fail(GS_EIO, "store %s: %s", s->path, msg ? msg : "error");
    sqlite3_free(msg);
    return rc;
  }
  return GS_OK;
}

static void copy_col(sqlite3_stmt *st, int col, char *dst, size_t n) {
  const unsigned char *t = sqlite3_column_text(st, col);
  snprintf(dst, n, "%s", t ? (const char *)t : "");
}

static int mkdir_parents(const char *path) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = 0;
    if (mkdir(buf, 0755) && errno != EEXIST)
      return -1;
    *p = '/';
  }
  return 0;
}

/* A non-empty file that does not start with SQLite's magic is not ours: never touch it. */
static int check_magic(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errno == ENOENT ? GS_OK : gs_fail(GS_EIO, "cannot read store %s: %s", path, strerror(errno));
  char head[16] = {0};
  ssize_t r = read(fd, head, sizeof head);
  close(fd);
  if (r > 0 && (r < 16 || memcmp(head, "SQLite format 3", 16) != 0))
    return gs_fail(GS_ECORRUPT, "store %s is not a gpuscope store (not an SQLite file); left untouched", path);
  return GS_OK;
}

static int schema_version(struct sqlite_store *s, int *version) {
  sqlite3_stmt *st;
  *version = 0;
  int rc = sqlite3_prepare_v2(s->db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL);
  if (rc != SQLITE_OK)
    return sqlite3_errcode(s->db) == SQLITE_NOTADB || sqlite3_errcode(s->db) == SQLITE_CORRUPT
               ? gs_fail(GS_ECORRUPT, "store %s is corrupt or not a database (%s); left untouched", s->path,
                         sqlite3_errmsg(s->db))
               : db_fail(s, GS_EIO, "cannot read");
  rc = sqlite3_step(st);
  int tables = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
  sqlite3_finalize(st);
  if (tables < 0)
    return rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT
               ? gs_fail(GS_ECORRUPT, "store %s is corrupt or not a database; left untouched", s->path)
               : db_fail(s, GS_EIO, "cannot read");
  if (tables == 0)
    return GS_OK;
  if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &st, NULL) !=
      SQLITE_OK)
    return gs_fail(GS_ECORRUPT, "store %s is an SQLite file but not a gpuscope store; left untouched", s->path);
  if (sqlite3_step(st) == SQLITE_ROW)
    *version = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  if (*version <= 0)
    return gs_fail(GS_ECORRUPT, "store %s has no schema version; left untouched", s->path);
  return GS_OK;
}

/* Creates the schema, or migrates an older one, inside one write transaction. */
static int migrate(struct sqlite_store *s) {
  int v, rc = schema_version(s, &v);
  if (rc)
    return rc;
  if (v == GS_STORE_SCHEMA_VERSION)
    return GS_OK;
  if (v > GS_STORE_SCHEMA_VERSION)
    return gs_fail(GS_ECORRUPT, "store %s has schema version %d, newer than this gpuscope (%d): upgrade gpuscope",
                   s->path, v, GS_STORE_SCHEMA_VERSION);
  if ((rc = exec(s, "BEGIN IMMEDIATE")))
    return rc;
  if ((rc = schema_version(s, &v)))
    goto fail;
  if (v == 0) {
    for (int i = 0; SCHEMA_V1[i]; i++)
      if ((rc = exec(s, SCHEMA_V1[i])))
        goto fail;
    char sql[128];
    snprintf(sql, sizeof sql, "INSERT INTO meta VALUES('schema_version', '%d'), ('app', 'gpuscope')",
             GS_STORE_SCHEMA_VERSION);
    if ((rc = exec(s, sql)))
      goto fail;
  }
  /* Version 2 adds decimal chunks and no table: only the number moves. Future migrations: if (v < 3)
   * { ALTER ...; } then the number. */
  if (v > 0 && v < GS_STORE_SCHEMA_VERSION) {
    char sql[128];
    snprintf(sql, sizeof sql, "UPDATE meta SET value = '%d' WHERE key = 'schema_version'", GS_STORE_SCHEMA_VERSION);
    if ((rc = exec(s, sql)))
      goto fail;
  }
  return exec(s, "COMMIT");
fail:
  exec(s, "ROLLBACK");
  return rc;
}

static void sq_close(struct store *base) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  if (!s)
    return;
  for (size_t i = 0; i < s->n_ws; i++)
    chunk_enc_done(&s->ws[i].enc);
  free(s->ws);
  sqlite3_stmt *stmts[] = {s->ins_chunk, s->upd_open, s->ins_open, s->move_open, s->begin, s->commit, s->heartbeat};
  for (size_t i = 0; i < sizeof stmts / sizeof *stmts; i++)
    sqlite3_finalize(stmts[i]);
  sqlite3_close(s->db);
  free(s);
}

static void boot_id(char *buf, size_t n) {
  buf[0] = 0;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (fgets(buf, (int)n, f))
      buf[strcspn(buf, "\n")] = 0;
    fclose(f);
  }
}

static void make_run_id(char *out) {
  static const char alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz"; /* Crockford base32, lower */
  uint64_t ms = (uint64_t)(gs_wall_ns() / 1000000);
  unsigned char rnd[10] = {0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd)
      memset(rnd, 0, sizeof rnd);
    close(fd);
  }
  for (int i = 9; i >= 0; i--, ms >>= 5)
    out[i] = alphabet[ms & 31];
  for (int i = 0; i < 16; i++) {
    int bit = i * 5, byte = bit / 8, off = bit % 8;
    unsigned v = ((unsigned)rnd[byte] << 8 | (byte + 1 < 10 ? rnd[byte + 1] : getpid() & 0xff)) >> (11 - off);
    out[10 + i] = alphabet[v & 31];
  }
  out[26] = 0;
}

static int sq_run_begin(struct store *base, struct store_run *r) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  char boot[64];
  boot_id(boot, sizeof boot);
  make_run_id(r->id);
  snprintf(r->status, sizeof r->status, "running");
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db,
                         "INSERT INTO runs(id, name, grp, command, cwd, host, user, tags, start_wall_ns,"
                         " heartbeat_wall_ns, status, exit_code, agent_pid, boot_id, interval_ns)"
                         " VALUES(?,?,?,?,?,?,?,?,?,?,?,NULL,?,?,?)",
                         -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, GS_EIO, "cannot add run");
  const char *txt[] = {r->id, r->name, r->group, r->command, r->cwd, r->host, r->user, r->tags};
  for (int i = 0; i < 8; i++)
    sqlite3_bind_text(st, i + 1, txt[i], -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 9, r->start_wall_ns);
  sqlite3_bind_int64(st, 10, r->start_wall_ns);
  sqlite3_bind_text(st, 11, r->status, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 12, r->agent_pid);
  sqlite3_bind_text(st, 13, boot, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 14, r->interval_ns);
  int rc = sqlite3_step(st) == SQLITE_DONE ? GS_OK : db_fail(s, GS_EIO, "cannot add run");
  sqlite3_finalize(st);
  return rc;
}

/* Steps a prepared statement that returns no rows (reset first, so it can be reused). */
static int step_done(struct sqlite_store *s, sqlite3_stmt *st, const char *what) {
  sqlite3_reset(st);
  return sqlite3_step(st) == SQLITE_DONE ? GS_OK : db_fail(s, GS_EIO, what);
}

/* Writes the chunk as a row keyed by (series_id, t0), INSERT OR REPLACE: how a clustered store
 * keeps every chunk, and how the rowid layout puts a full chunk at the end of the table (the
 * replaced row being the chunk's own open row, if it had one). */
static int insert_chunk(struct sqlite_store *s, struct wseries *w) {
  sqlite3_stmt *st = s->ins_chunk;
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, w->db_id);
  sqlite3_bind_int64(st, 2, w->enc.t0);
  sqlite3_bind_int64(st, 3, w->enc.t_prev);
  sqlite3_bind_int64(st, 4, w->enc.n);
  sqlite3_bind_blob(st, 5, w->enc.buf, (int)chunk_enc_bytes(&w->enc), SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_DONE)
    return db_fail(s, GS_EIO, "cannot write samples");
  w->dirty = 0;
  return GS_OK;
}

/* Writes the open chunk of a series. Rowid layout: into the series' row at rowid -db_id — in
 * place while it holds this chunk; otherwise whatever the row holds (an older chunk, say after a
 * flush was rolled back) is first moved to the end of the table, kept, never overwritten. */
static int write_chunk(struct sqlite_store *s, struct wseries *w) {
  if (!s->upd_open)
    return insert_chunk(s, w);
  int bytes = (int)chunk_enc_bytes(&w->enc);
  sqlite3_stmt *st;
  if (w->open_row) {
    st = s->upd_open;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, w->enc.t_prev);
    sqlite3_bind_int64(st, 2, w->enc.n);
    sqlite3_bind_blob(st, 3, w->enc.buf, bytes, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, -w->db_id);
    sqlite3_bind_int64(st, 5, w->db_id);
    sqlite3_bind_int64(st, 6, w->enc.t0);
    if (sqlite3_step(st) != SQLITE_DONE)
      return db_fail(s, GS_EIO, "cannot write samples");
    if (sqlite3_changes(s->db) == 1) {
      w->dirty = 0;
      return GS_OK;
    }
    w->open_row = 0;
  }
  if (!w->slot_empty) {
    sqlite3_reset(s->move_open);
    sqlite3_bind_int64(s->move_open, 1, -w->db_id);
    if (sqlite3_step(s->move_open) != SQLITE_DONE)
      return db_fail(s, GS_EIO, "cannot write samples");
  }
  st = s->ins_open;
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, -w->db_id);
  sqlite3_bind_int64(st, 2, w->db_id);
  sqlite3_bind_int64(st, 3, w->enc.t0);
  sqlite3_bind_int64(st, 4, w->enc.t_prev);
  sqlite3_bind_int64(st, 5, w->enc.n);
  sqlite3_bind_blob(st, 6, w->enc.buf, bytes, SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_DONE)
    return db_fail(s, GS_EIO, "cannot write samples");
  w->open_row = 1;
  w->slot_empty = 0;
  w->dirty = 0;
  return GS_OK;
}

/* A chunk is full: writes its last points and, in the rowid layout, moves it out of the series'
 * open row to the end of the table, where full chunks are appended and pages fill up. */
static int seal_chunk(struct sqlite_store *s, struct wseries *w) {
  if (!s->upd_open)
    return w->dirty ? insert_chunk(s, w) : GS_OK;
  if (!w->dirty && !w->open_row)
    return GS_OK;
  int rc = insert_chunk(s, w); /* replaces the open row: same (series_id, t0) */
  if (!rc && w->open_row)
    w->slot_empty = 1;
  w->open_row = 0;
  return rc;
}

static int add_series(struct sqlite_store *s, const struct store_run *r, const struct gs_series_def *d) {
  if ((size_t)d->id >= s->n_ws) {
    size_t n = (size_t)d->id + 64;
    struct wseries *ws = realloc(s->ws, n * sizeof *ws);
    if (!ws)
      return gs_fail(GS_ENOMEM, "out of memory");
    for (size_t i = s->n_ws; i < n; i++) {
      ws[i].db_id = -1;
      ws[i].open_row = ws[i].slot_empty = 0;
      ws[i].dirty = 0;
      chunk_enc_init(&ws[i].enc);
    }
    s->ws = ws;
    s->n_ws = n;
  }
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db,
                         "INSERT INTO series(run_id, source, name, labels, unit, kind) VALUES(?,?,?,?,?,?)"
                         " ON CONFLICT DO UPDATE SET unit = excluded.unit RETURNING id",
                         -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, GS_EIO, "cannot add series");
  sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, d->source, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, d->name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, d->labels, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, d->unit, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 6, (int)d->kind);
  int rc = GS_OK;
  if (sqlite3_step(st) == SQLITE_ROW)
    s->ws[d->id].db_id = sqlite3_column_int64(st, 0);
  else
    rc = db_fail(s, GS_EIO, "cannot add series");
  sqlite3_finalize(st);
  return rc;
}

static int sq_run_append(struct store *base, const struct store_run *r, const struct gs_batch *b) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st = NULL;
  int rc = step_done(s, s->begin, "cannot start writing");
  if (rc)
    return rc;
  for (size_t i = 0; i < b->n_series; i++)
    if ((rc = add_series(s, r, &b->series[i])))
      goto fail;
  for (size_t i = 0; i < b->n_points; i++) {
    const struct gs_point *p = &b->points[i];
    if ((size_t)p->series >= s->n_ws || s->ws[p->series].db_id < 0)
      continue;
    struct wseries *w = &s->ws[p->series];
    int64_t t = p->t_ns - r->mono_start_ns;
    if (w->enc.n && t <= w->enc.t_prev)
      continue; /* out of order or duplicate: a series only moves forward */
    if (w->enc.n >= CHUNK_MAX_POINTS || (w->enc.n && t - w->enc.t0 > CHUNK_MAX_SPAN_NS) ||
        chunk_enc_bytes(&w->enc) + CHUNK_MAX_POINT_BYTES > CHUNK_MAX_BYTES) {
      /* the chunk is full: its last points, then off to the end of the table */
      if ((rc = seal_chunk(s, w)))
        goto fail;
      chunk_enc_done(&w->enc);
    }
    if (chunk_enc_put(&w->enc, t, p->v)) {
      rc = gs_fail(GS_ENOMEM, "out of memory");
      goto fail;
    }
    w->dirty = 1;
  }
  for (size_t i = 0; i < s->n_ws; i++)
    if (s->ws[i].dirty && (rc = write_chunk(s, &s->ws[i])))
      goto fail;
  if (b->n_events) {
    if (sqlite3_prepare_v2(s->db, "INSERT INTO events VALUES(?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
      goto dbfail;
    for (size_t i = 0; i < b->n_events; i++) {
      const struct gs_event *e = &b->events[i];
      sqlite3_reset(st);
      sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
      sqlite3_bind_int64(st, 2, e->t_ns - r->mono_start_ns);
      sqlite3_bind_text(st, 3, e->kind, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, 4, e->name, -1, SQLITE_STATIC);
      if (isfinite(e->value))
        sqlite3_bind_double(st, 5, e->value);
      else
        sqlite3_bind_null(st, 5);
      sqlite3_bind_text(st, 6, e->labels, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, 7, e->text, -1, SQLITE_STATIC);
      if (sqlite3_step(st) != SQLITE_DONE)
        goto dbfail;
    }
    sqlite3_finalize(st);
    st = NULL;
  }
  if (b->n_params) {
    if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO params VALUES(?,?,?)", -1, &st, NULL) != SQLITE_OK)
      goto dbfail;
    for (size_t i = 0; i < b->n_params; i++) {
      sqlite3_reset(st);
      sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, 2, b->params[i].key, -1, SQLITE_STATIC);
      sqlite3_bind_text(st, 3, b->params[i].value, -1, SQLITE_STATIC);
      if (sqlite3_step(st) != SQLITE_DONE)
        goto dbfail;
    }
    sqlite3_finalize(st);
    st = NULL;
  }
  if (b->n_notes) {
    if (sqlite3_prepare_v2(s->db, "INSERT INTO notes VALUES(?,?,?)", -1, &st, NULL) != SQLITE_OK)
      goto dbfail;
    for (size_t i = 0; i < b->n_notes; i++) {
      sqlite3_reset(st);
      sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
      sqlite3_bind_int64(st, 2, gs_mono_ns() - r->mono_start_ns);
      sqlite3_bind_text(st, 3, b->notes[i], -1, SQLITE_STATIC);
      if (sqlite3_step(st) != SQLITE_DONE)
        goto dbfail;
    }
    sqlite3_finalize(st);
    st = NULL;
  }
  sqlite3_reset(s->heartbeat);
  sqlite3_bind_int64(s->heartbeat, 1, gs_wall_ns());
  sqlite3_bind_text(s->heartbeat, 2, r->id, -1, SQLITE_STATIC);
  if ((rc = step_done(s, s->heartbeat, "cannot write the heartbeat")) ||
      (rc = step_done(s, s->commit, "cannot commit")))
    goto fail;
  return GS_OK;
dbfail:
  rc = db_fail(s, GS_EIO, "cannot write");
fail:
  sqlite3_finalize(st);
  exec(s, "ROLLBACK");
  /* The open chunks no longer match the database: start them afresh on the next append. */
  for (size_t i = 0; i < s->n_ws; i++) {
    if (s->ws[i].dirty)
      chunk_enc_done(&s->ws[i].enc), s->ws[i].dirty = 0;
    s->ws[i].open_row = s->ws[i].slot_empty = 0; /* the rows may be as they were before this flush */
  }
  return rc;
}

/* ---- rollups ---- */

static const int64_t ROLLUP_RES[] = {1000000000LL, 10000000000LL, 60000000000LL};
enum { N_ROLLUP_RES = sizeof ROLLUP_RES / sizeof *ROLLUP_RES };
/* A resolution is stored only when its buckets summarise this many points on average: a rollup row
 * costs ~40 bytes, more than the ten 10 Hz points of a 1 s bucket, and a level that is not stored
 * is computed from the chunks when read (sq_rollups_read), with the same values. */
enum { ROLLUP_MIN_POINTS = 20 };

struct rollup_acc {
  int64_t res, bucket;
  double min, max, sum;
  int64_t n;
  int64_t *t;
  double *mn, *mx, *mean;
  size_t len, cap;
  int oom;
};

static void rollup_emit(struct rollup_acc *a) {
  if (!a->n)
    return;
  if (a->len == a->cap) {
    size_t c = a->cap ? a->cap * 2 : 64;
    int64_t *t = realloc(a->t, c * sizeof *t);
    if (t)
      a->t = t;
    double *mn = realloc(a->mn, c * sizeof *mn);
    if (mn)
      a->mn = mn;
    double *mx = realloc(a->mx, c * sizeof *mx);
    if (mx)
      a->mx = mx;
    double *me = realloc(a->mean, c * sizeof *me);
    if (me)
      a->mean = me;
    if (!t || !mn || !mx || !me) {
      a->oom = 1;
      return;
    }
    a->cap = c;
  }
  a->t[a->len] = a->bucket;
  a->mn[a->len] = a->min;
  a->mx[a->len] = a->max;
  a->mean[a->len++] = a->sum / (double)a->n;
  a->n = 0;
}

static int rollup_one(void *u, int64_t t, double v) {
  struct rollup_acc *a = u;
  int64_t b = t >= 0 ? t / a->res * a->res : -((-t + a->res - 1) / a->res) * a->res;
  if (a->n && b != a->bucket)
    rollup_emit(a);
  if (!a->n) {
    a->bucket = b;
    a->min = a->max = v;
    a->sum = 0;
  }
  a->min = v < a->min ? v : a->min;
  a->max = v > a->max ? v : a->max;
  a->sum += v;
  a->n++;
  return a->oom;
}

static int sq_samples_read(struct store *base, int64_t series_id, int64_t from, int64_t to, store_sample_fn fn,
                           void *user);

struct range_ctx {
  int64_t from, to;
  store_sample_fn fn;
  void *user;
};

static int range_filter(void *u, int64_t t, double v) {
  struct range_ctx *c = u;
  if (t < c->from || t > c->to)
    return 0;
  return c->fn(c->user, t, v);
}

static int sq_samples_read(struct store *base, int64_t series_id, int64_t from, int64_t to, store_sample_fn fn,
                           void *user) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st;
  /* A series' chunks do not overlap, so the first one needed is the last to start at or before
   * `from`: one index seek, where "t1 >= from" alone would visit every earlier chunk's row. */
  if (sqlite3_prepare_v2(s->db,
                         "SELECT n, data FROM chunks WHERE series_id = ?1 AND t0 <= ?3 AND t0 >= coalesce("
                         "(SELECT t0 FROM chunks WHERE series_id = ?1 AND t0 <= ?2 ORDER BY t0 DESC LIMIT 1), ?2)"
                         " ORDER BY t0",
                         -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, GS_EIO, "cannot read samples");
  sqlite3_bind_int64(st, 1, series_id);
  sqlite3_bind_int64(st, 2, from);
  sqlite3_bind_int64(st, 3, to);
  struct range_ctx c = {from, to, fn, user};
  int rc = GS_OK, step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    rc = chunk_decode(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1),
                      (uint32_t)sqlite3_column_int64(st, 0), range_filter, &c);
    if (rc < 0)
      rc = gs_fail(rc, "store %s: a chunk of series %lld is corrupt", s->path, (long long)series_id);
    if (rc)
      break;
  }
  if (!rc && step != SQLITE_DONE)
    rc = db_fail(s, GS_EIO, "cannot read samples");
  sqlite3_finalize(st);
  return rc < 0 ? rc : GS_OK;
}

static int compute_rollup(struct sqlite_store *s, int64_t series_id, struct rollup_acc *a) {
  int rc = sq_samples_read(&s->base, series_id, INT64_MIN, INT64_MAX, rollup_one, a);
  rollup_emit(a);
  if (a->oom)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  return rc;
}

static void rollup_free(struct rollup_acc *a) { free(a->t), free(a->mn), free(a->mx), free(a->mean); }

struct rollup_all { /* every resolution in one pass over the chunks */
  struct rollup_acc a[N_ROLLUP_RES];
  int64_t points;
};

static int rollup_all_one(void *u, int64_t t, double v) {
  struct rollup_all *all = u;
  int stop = 0;
  for (int r = 0; r < N_ROLLUP_RES; r++)
    stop |= rollup_one(&all->a[r], t, v);
  all->points++;
  return stop;
}

static int write_rollups(struct sqlite_store *s, const char *run_id) {
  sqlite3_stmt *q = NULL, *ins = NULL;
  int rc = GS_OK;
  if (sqlite3_prepare_v2(s->db, "SELECT id FROM series WHERE run_id = ?", -1, &q, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO rollups VALUES(?,?,?,?,?,?,?)", -1, &ins, NULL) != SQLITE_OK) {
    rc = db_fail(s, GS_EIO, "cannot write rollups");
    goto out;
  }
  sqlite3_bind_text(q, 1, run_id, -1, SQLITE_STATIC);
  while (!rc && sqlite3_step(q) == SQLITE_ROW) {
    int64_t sid = sqlite3_column_int64(q, 0);
    struct rollup_all all = {.points = 0};
    for (int r = 0; r < N_ROLLUP_RES; r++)
      all.a[r].res = ROLLUP_RES[r];
    rc = sq_samples_read(&s->base, sid, INT64_MIN, INT64_MAX, rollup_all_one, &all);
    for (int r = 0; r < N_ROLLUP_RES; r++) {
      struct rollup_acc *a = &all.a[r];
      rollup_emit(a);
      if (!rc && a->oom)
        rc = gs_fail(GS_ENOMEM, "out of memory");
      for (size_t i = 0; !rc && all.points >= (int64_t)a->len * ROLLUP_MIN_POINTS && i < a->len; i++) {
        sqlite3_reset(ins);
        sqlite3_bind_int64(ins, 1, sid);
        sqlite3_bind_int64(ins, 2, a->res);
        sqlite3_bind_int64(ins, 3, a->t[i]);
        sqlite3_bind_int64(ins, 4, 0);
        sqlite3_bind_double(ins, 5, a->mn[i]);
        sqlite3_bind_double(ins, 6, a->mx[i]);
        sqlite3_bind_double(ins, 7, a->mean[i]);
        if (sqlite3_step(ins) != SQLITE_DONE)
          rc = db_fail(s, GS_EIO, "cannot write rollups");
      }
      rollup_free(a);
    }
  }
out:
  sqlite3_finalize(q);
  sqlite3_finalize(ins);
  return rc;
}

static int sq_rollups_read(struct store *base, int64_t series_id, int64_t res_ns, int64_t **t, double **mn,
                           double **mx, double **mean, size_t *n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  struct rollup_acc a = {.res = res_ns};
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT t, min, max, mean FROM rollups WHERE series_id = ? AND res_ns = ? ORDER BY t",
                         -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, GS_EIO, "cannot read rollups");
  sqlite3_bind_int64(st, 1, series_id);
  sqlite3_bind_int64(st, 2, res_ns);
  while (sqlite3_step(st) == SQLITE_ROW && !a.oom) {
    a.bucket = sqlite3_column_int64(st, 0);
    a.min = sqlite3_column_double(st, 1);
    a.max = sqlite3_column_double(st, 2);
    a.sum = sqlite3_column_double(st, 3);
    a.n = 1;
    rollup_emit(&a);
  }
  sqlite3_finalize(st);
  int rc = a.oom ? gs_fail(GS_ENOMEM, "out of memory") : GS_OK;
  if (!rc && a.len == 0) /* a crashed run has none yet: compute them from the raw chunks */
    rc = compute_rollup(s, series_id, &a);
  if (rc) {
    rollup_free(&a);
    return rc;
  }
  *t = a.t, *mn = a.mn, *mx = a.mx, *mean = a.mean, *n = a.len;
  return GS_OK;
}

static int sq_run_end(struct store *base, const struct store_run *r) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st;
  int rc = exec(s, "BEGIN IMMEDIATE");
  if (rc)
    return rc;
  if (sqlite3_prepare_v2(s->db, "UPDATE runs SET status = ?, exit_code = ?, end_wall_ns = ?, heartbeat_wall_ns = ?"
                         " WHERE id = ?", -1, &st, NULL) != SQLITE_OK) {
    rc = db_fail(s, GS_EIO, "cannot end run");
    goto fail;
  }
  sqlite3_bind_text(st, 1, r->status, -1, SQLITE_STATIC);
  if (r->exit_code >= 0)
    sqlite3_bind_int(st, 2, r->exit_code);
  else
    sqlite3_bind_null(st, 2);
  sqlite3_bind_int64(st, 3, r->end_wall_ns);
  sqlite3_bind_int64(st, 4, r->end_wall_ns);
  sqlite3_bind_text(st, 5, r->id, -1, SQLITE_STATIC);
  rc = sqlite3_step(st) == SQLITE_DONE ? GS_OK : db_fail(s, GS_EIO, "cannot end run");
  sqlite3_finalize(st);
  if (rc || (rc = write_rollups(s, r->id)))
    goto fail;
  return exec(s, "COMMIT");
fail:
  exec(s, "ROLLBACK");
  return rc;
}

/* ---- reading runs ---- */

#define RUN_COLS                                                                                              \
  "id, name, grp, status, command, cwd, host, user, tags, start_wall_ns, end_wall_ns, heartbeat_wall_ns,"    \
  " exit_code, agent_pid, boot_id, interval_ns"

static void read_run(sqlite3_stmt *st, struct store_run *r, int64_t *heartbeat, char *boot, size_t nboot) {
  memset(r, 0, sizeof *r);
  copy_col(st, 0, r->id, sizeof r->id);
  copy_col(st, 1, r->name, sizeof r->name);
  copy_col(st, 2, r->group, sizeof r->group);
  copy_col(st, 3, r->status, sizeof r->status);
  copy_col(st, 4, r->command, sizeof r->command);
  copy_col(st, 5, r->cwd, sizeof r->cwd);
  copy_col(st, 6, r->host, sizeof r->host);
  copy_col(st, 7, r->user, sizeof r->user);
  copy_col(st, 8, r->tags, sizeof r->tags);
  r->start_wall_ns = sqlite3_column_int64(st, 9);
  r->end_wall_ns = sqlite3_column_int64(st, 10);
  *heartbeat = sqlite3_column_int64(st, 11);
  r->exit_code = sqlite3_column_type(st, 12) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 12);
  r->agent_pid = sqlite3_column_int(st, 13);
  copy_col(st, 14, boot, nboot);
  r->interval_ns = sqlite3_column_int64(st, 15);
}

/* A "running" run whose agent is gone is crashed: its pid is dead on this boot of this host, or it
 * has not written for STALE_HEARTBEAT_NS. Records the verdict when the store is writable. */
static void settle_status(struct sqlite_store *s, struct store_run *r, int64_t heartbeat, const char *run_boot) {
  if (strcmp(r->status, "running"))
    return;
  char host[128] = "", boot[64];
  gethostname(host, sizeof host - 1);
  boot_id(boot, sizeof boot);
  int dead = 0;
  if (!strcmp(host, r->host) && !strcmp(boot, run_boot) && r->agent_pid > 0)
    dead = kill(r->agent_pid, 0) != 0 && errno == ESRCH;
  if (!dead && gs_wall_ns() - heartbeat > STALE_HEARTBEAT_NS)
    dead = 1;
  if (!dead)
    return;
  snprintf(r->status, sizeof r->status, "crashed");
  r->end_wall_ns = heartbeat;
  char sql[200];
  snprintf(sql, sizeof sql,
           "UPDATE runs SET status = 'crashed', end_wall_ns = %lld WHERE id = '%s' AND status = 'running'",
           (long long)heartbeat, r->id);
  sqlite3_exec(s->db, sql, NULL, NULL, NULL); /* best effort: a read-only store still reports it */
}

static int query_runs(struct sqlite_store *s, const char *where, const char *arg, struct store_run **out,
                      size_t *n) {
  char sql[512];
  snprintf(sql, sizeof sql, "SELECT " RUN_COLS " FROM runs %s ORDER BY start_wall_ns DESC, id DESC", where);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, GS_EIO, "cannot list runs");
  if (arg)
    sqlite3_bind_text(st, 1, arg, -1, SQLITE_TRANSIENT);
  struct store_run *runs = NULL;
  size_t len = 0, cap = 0;
  int rc = GS_OK;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (len == cap) {
      cap = cap ? cap * 2 : 16;
      struct store_run *nr = realloc(runs, cap * sizeof *nr);
      if (!nr) {
        rc = gs_fail(GS_ENOMEM, "out of memory");
        break;
      }
      runs = nr;
    }
    int64_t hb;
    char boot[64];
    read_run(st, &runs[len], &hb, boot, sizeof boot);
    settle_status(s, &runs[len], hb, boot);
    len++;
  }
  sqlite3_finalize(st);
  if (rc) {
    free(runs);
    return rc;
  }
  *out = runs;
  *n = len;
  return GS_OK;
}

static int sq_runs_list(struct store *base, struct store_run **out, size_t *n) {
  return query_runs((struct sqlite_store *)base, "", NULL, out, n);
}

static int sq_run_get(struct store *base, const char *ref, struct store_run *out) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  struct store_run *runs = NULL;
  size_t n = 0;
  int rc;
  if (!strcmp(ref, "last"))
    rc = query_runs(s, "", NULL, &runs, &n);
  else if ((rc = query_runs(s, "WHERE id = ?1", ref, &runs, &n)) == GS_OK && n == 0) {
    free(runs);
    if ((rc = query_runs(s, "WHERE name = ?1", ref, &runs, &n)) == GS_OK && n == 0) {
      free(runs);
      char like[140];
      snprintf(like, sizeof like, "%s", ref);
      rc = query_runs(s, "WHERE substr(id, 1, length(?1)) = ?1", like, &runs, &n);
      if (!rc && n > 1) {
        free(runs);
        return gs_fail(GS_EAMBIG, "run '%s' is ambiguous: %zu runs start with it", ref, n);
      }
    }
  }
  if (rc)
    return rc;
  if (n == 0) {
    free(runs);
    return gs_fail(GS_ENOENT, "no run '%s' in this store (see 'gpuscope runs')", ref);
  }
  *out = runs[0];
  free(runs);
  return GS_OK;
}

static int sq_series_list(struct store *base, const char *run_id, struct store_series **out, size_t *n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT s.id, s.source, s.name, s.labels, s.unit, s.kind, coalesce(sum(c.n), 0),"
                         " coalesce(min(c.t0), 0), coalesce(max(c.t1), 0) FROM series s"
                         " LEFT JOIN chunks c ON c.series_id = s.id WHERE s.run_id = ?"
                         " GROUP BY s.id ORDER BY s.source, s.name, s.labels",
                         -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, GS_EIO, "cannot list series");
  sqlite3_bind_text(st, 1, run_id, -1, SQLITE_TRANSIENT);
  struct store_series *v = NULL;
  size_t len = 0, cap = 0;
  int rc = GS_OK;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (len == cap) {
      cap = cap ? cap * 2 : 64;
      struct store_series *nv = realloc(v, cap * sizeof *nv);
      if (!nv) {
        rc = gs_fail(GS_ENOMEM, "out of memory");
        break;
      }
      v = nv;
    }
    struct store_series *x = &v[len++];
    x->id = sqlite3_column_int64(st, 0);
    copy_col(st, 1, x->source, sizeof x->source);
    copy_col(st, 2, x->name, sizeof x->name);
    copy_col(st, 3, x->labels, sizeof x->labels);
    copy_col(st, 4, x->unit, sizeof x->unit);
    x->kind = (enum gs_kind)sqlite3_column_int(st, 5);
    x->count = sqlite3_column_int64(st, 6);
    x->t_first = sqlite3_column_int64(st, 7);
    x->t_last = sqlite3_column_int64(st, 8);
  }
  sqlite3_finalize(st);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  *n = len;
  return GS_OK;
}

static int sq_events_read(struct store *base, const char *run_id, struct store_event **out, size_t *n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT t, kind, name, value, labels, text FROM events WHERE run_id = ?"
                         " ORDER BY t, rowid", -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, GS_EIO, "cannot read events");
  sqlite3_bind_text(st, 1, run_id, -1, SQLITE_TRANSIENT);
  struct store_event *v = NULL;
  size_t len = 0, cap = 0;
  int rc = GS_OK;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (len == cap) {
      cap = cap ? cap * 2 : 64;
      struct store_event *nv = realloc(v, cap * sizeof *nv);
      if (!nv) {
        rc = gs_fail(GS_ENOMEM, "out of memory");
        break;
      }
      v = nv;
    }
    struct store_event *e = &v[len++];
    e->t = sqlite3_column_int64(st, 0);
    copy_col(st, 1, e->kind, sizeof e->kind);
    copy_col(st, 2, e->name, sizeof e->name);
    e->value = sqlite3_column_type(st, 3) == SQLITE_NULL ? NAN : sqlite3_column_double(st, 3);
    copy_col(st, 4, e->labels, sizeof e->labels);
    copy_col(st, 5, e->text, sizeof e->text);
  }
  sqlite3_finalize(st);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  *n = len;
  return GS_OK;
}

static int sq_params_read(struct store *base, const char *run_id, struct gs_kv **out, size_t *n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT key, value FROM params WHERE run_id = ? ORDER BY key", -1, &st, NULL) !=
      SQLITE_OK)
    return db_fail(s, GS_EIO, "cannot read params");
  sqlite3_bind_text(st, 1, run_id, -1, SQLITE_TRANSIENT);
  struct gs_kv *v = NULL;
  size_t len = 0, cap = 0;
  int rc = GS_OK;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (len == cap) {
      cap = cap ? cap * 2 : 32;
      struct gs_kv *nv = realloc(v, cap * sizeof *nv);
      if (!nv) {
        rc = gs_fail(GS_ENOMEM, "out of memory");
        break;
      }
      v = nv;
    }
    const char *k = (const char *)sqlite3_column_text(st, 0), *val = (const char *)sqlite3_column_text(st, 1);
    v[len].key = strdup(k ? k : "");
    v[len].value = strdup(val ? val : "");
    len++;
  }
  sqlite3_finalize(st);
  if (rc) {
    store_kv_free(v, len);
    return rc;
  }
  *out = v;
  *n = len;
  return GS_OK;
}

static int sq_notes_read(struct store *base, const char *run_id, char ***out, size_t *n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT text FROM notes WHERE run_id = ? ORDER BY t, rowid", -1, &st, NULL) !=
      SQLITE_OK)
    return db_fail(s, GS_EIO, "cannot read notes");
  sqlite3_bind_text(st, 1, run_id, -1, SQLITE_TRANSIENT);
  char **v = NULL;
  size_t len = 0, cap = 0;
  int rc = GS_OK;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (len == cap) {
      cap = cap ? cap * 2 : 16;
      char **nv = realloc(v, cap * sizeof *nv);
      if (!nv) {
        rc = gs_fail(GS_ENOMEM, "out of memory");
        break;
      }
      v = nv;
    }
    const char *t = (const char *)sqlite3_column_text(st, 0);
    v[len++] = strdup(t ? t : "");
  }
  sqlite3_finalize(st);
  if (rc) {
    store_notes_free(v, len);
    return rc;
  }
  *out = v;
  *n = len;
  return GS_OK;
}

static int sq_findings_write(struct store *base, const char *run_id, const struct store_finding *f, size_t n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st = NULL;
  int rc = exec(s, "BEGIN IMMEDIATE");
  if (rc)
    return rc;
  char sql[128];
  snprintf(sql, sizeof sql, "DELETE FROM findings WHERE run_id = '%s'", run_id);
  if ((rc = exec(s, sql)))
    goto fail;
  if (sqlite3_prepare_v2(s->db, "INSERT INTO findings VALUES(?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
    goto dbfail;
  for (size_t i = 0; i < n; i++) {
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)i);
    sqlite3_bind_text(st, 3, f[i].rule, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, f[i].severity, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 5, f[i].share);
    sqlite3_bind_double(st, 6, f[i].lost_s);
    sqlite3_bind_double(st, 7, f[i].speedup);
    sqlite3_bind_text(st, 8, f[i].title, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 9, f[i].evidence, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 10, f[i].fix, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
      goto dbfail;
  }
  sqlite3_finalize(st);
  return exec(s, "COMMIT");
dbfail:
  rc = db_fail(s, GS_EIO, "cannot write findings");
fail:
  sqlite3_finalize(st);
  exec(s, "ROLLBACK");
  return rc;
}

static int sq_findings_read(struct store *base, const char *run_id, struct store_finding **out, size_t *n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db, "SELECT rule, severity, share, lost_s, speedup, title, evidence, fix FROM findings"
                         " WHERE run_id = ? ORDER BY rank", -1, &st, NULL) != SQLITE_OK)
    return db_fail(s, GS_EIO, "cannot read findings");
  sqlite3_bind_text(st, 1, run_id, -1, SQLITE_TRANSIENT);
  struct store_finding *v = NULL;
  size_t len = 0, cap = 0;
  int rc = GS_OK;
  while (sqlite3_step(st) == SQLITE_ROW) {
    if (len == cap) {
      cap = cap ? cap * 2 : 8;
      struct store_finding *nv = realloc(v, cap * sizeof *nv);
      if (!nv) {
        rc = gs_fail(GS_ENOMEM, "out of memory");
        break;
      }
      v = nv;
    }
    struct store_finding *f = &v[len++];
    copy_col(st, 0, f->rule, sizeof f->rule);
    copy_col(st, 1, f->severity, sizeof f->severity);
    f->share = sqlite3_column_double(st, 2);
    f->lost_s = sqlite3_column_double(st, 3);
    f->speedup = sqlite3_column_double(st, 4);
    copy_col(st, 5, f->title, sizeof f->title);
    copy_col(st, 6, f->evidence, sizeof f->evidence);
    copy_col(st, 7, f->fix, sizeof f->fix);
  }
  sqlite3_finalize(st);
  if (rc) {
    free(v);
    return rc;
  }
  *out = v;
  *n = len;
  return GS_OK;
}

/* True when the chunks table is a rowid table (created by this version), false for the clustered
 * WITHOUT ROWID table of older stores. */
static int chunks_in_append_order(struct sqlite_store *s) {
  sqlite3_stmt *st;
  int rowid = 0;
  if (sqlite3_prepare_v2(s->db, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chunks'", -1, &st,
                         NULL) != SQLITE_OK)
    return 0;
  if (sqlite3_step(st) == SQLITE_ROW) {
    const char *sql = (const char *)sqlite3_column_text(st, 0);
    rowid = sql && !strstr(sql, "WITHOUT ROWID");
  }
  sqlite3_finalize(st);
  return rowid;
}

struct store *store_sqlite_open(const char *path) {
  if (!*path) {
    gs_fail(GS_EINVAL, "store URL has no file path (use sqlite:///path/to/file.db)");
    return NULL;
  }
  struct sqlite_store *s = calloc(1, sizeof *s);
  if (!s) {
    gs_fail(GS_ENOMEM, "out of memory");
    return NULL;
  }
  snprintf(s->path, sizeof s->path, "%s", path);
  s->base = (struct store){.version = 1,
                           .scheme = "sqlite",
                           .run_begin = sq_run_begin,
                           .run_append = sq_run_append,
                           .run_end = sq_run_end,
                           .runs_list = sq_runs_list,
                           .run_get = sq_run_get,
                           .series_list = sq_series_list,
                           .samples_read = sq_samples_read,
                           .rollups_read = sq_rollups_read,
                           .events_read = sq_events_read,
                           .params_read = sq_params_read,
                           .notes_read = sq_notes_read,
                           .findings_write = sq_findings_write,
                           .findings_read = sq_findings_read,
                           .close = sq_close};
  if (check_magic(path))
    goto fail;
  struct stat sb;
  if (stat(path, &sb) != 0 && mkdir_parents(path) != 0) {
    gs_fail(GS_EIO, "cannot create the folder for store %s: %s", path, strerror(errno));
    goto fail;
  }
  if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) !=
      SQLITE_OK) {
    gs_fail(GS_EIO, "cannot open store %s: %s", path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
    goto fail;
  }
  sqlite3_busy_timeout(s->db, 10000);
  if (migrate(s))
    goto fail;
  char *msg = NULL;
  if (sqlite3_exec(s->db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL", NULL, NULL, &msg) != SQLITE_OK) {
    gs_fail(GS_EIO, "store %s: %s", path, msg ? msg : "cannot set WAL mode");
    sqlite3_free(msg);
    goto fail;
  }
  if (sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO chunks VALUES(?,?,?,?,?)", -1, &s->ins_chunk, NULL) !=
          SQLITE_OK ||
      sqlite3_prepare_v2(s->db, "BEGIN IMMEDIATE", -1, &s->begin, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(s->db, "COMMIT", -1, &s->commit, NULL) != SQLITE_OK ||
      sqlite3_prepare_v2(s->db, "UPDATE runs SET heartbeat_wall_ns = ? WHERE id = ?", -1, &s->heartbeat, NULL) !=
          SQLITE_OK) {
    db_fail(s, GS_EIO, "cannot prepare");
    goto fail;
  }
  if (chunks_in_append_order(s) &&
      (sqlite3_prepare_v2(s->db,
                          "UPDATE chunks SET t1 = ?1, n = ?2, data = ?3 WHERE rowid = ?4 AND series_id = ?5"
                          " AND t0 = ?6",
                          -1, &s->upd_open, NULL) != SQLITE_OK ||
       sqlite3_prepare_v2(s->db, "INSERT OR REPLACE INTO chunks(rowid, series_id, t0, t1, n, data) VALUES(?,?,?,?,?,?)",
                          -1, &s->ins_open, NULL) != SQLITE_OK ||
       sqlite3_prepare_v2(s->db,
                          "INSERT OR REPLACE INTO chunks(series_id, t0, t1, n, data)"
                          " SELECT series_id, t0, t1, n, data FROM chunks WHERE rowid = ?",
                          -1, &s->move_open, NULL) != SQLITE_OK)) {
    db_fail(s, GS_EIO, "cannot prepare");
    goto fail;
  }
  return &s->base;
fail:
  sq_close(&s->base);
  return NULL;
}
