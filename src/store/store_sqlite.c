/* store/store_sqlite: the embedded back end — one SQLite file in WAL mode, so several agents can
 * append at once and readers never block writers. This file opens it: whose file it is, in which
 * mode (enum store_mode), on read-only media too; and creates or migrates the schema
 * (meta.schema_version). The writer is sqlite_write.c, the readers sqlite_read.c (sqlite_int.h).
 *
 * Opening never writes a file that is not ours. Every existing file is first opened read-only
 * (SQLITE_OPEN_READONLY) and checked: SQLite's magic, a meta table with app = 'gpuscope', a schema
 * version this gpuscope knows. Only then do STORE_WRITE and STORE_MIGRATE reopen it to write (and
 * STORE_KEEP, for findings, when it is writable and of this version). A store in WAL mode on a
 * read-only folder or mount, with no -wal and -shm file beside it, is opened `immutable`: nobody
 * can be writing it, and SQLite could not create the shared-memory file a WAL reader needs.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/sqlite_int.h"

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

/* Schema version 3: the tables this version adds, made when a store is created and when an older
 * one is migrated (IF NOT EXISTS: either way). */
static const char *SCHEMA_V3[] = {
    /* the job's output (sqlite_log.c): chunks of bytes as read, per run in seq order; a rowid
     * table, since a chunk may be 64 KiB (too big for a WITHOUT ROWID row) */
    "CREATE TABLE IF NOT EXISTS logs(run_id TEXT, seq INTEGER, stream TEXT, t INTEGER, data BLOB)",
    "CREATE UNIQUE INDEX IF NOT EXISTS logs_run ON logs(run_id, seq)", NULL};

/* ---- the file before SQLite opens it ---- */

struct file_facts {
  int exists, empty, wal_mode; /* wal_mode: the header's read/write versions say WAL */
};

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

/* Reads up to n of path's first bytes into buf through SQLite's own VFS, and returns how many the
 * file holds (at most n), or -1 with errno. Why not open() and close(): closing any descriptor of a
 * file drops every POSIX lock this process holds on it, those of its SQLite connections too
 * (sqlite.org, "How To Corrupt An SQLite Database File", 2.2) — a second open of a store another
 * handle of this process reads (serve's live streams, a run view beside the writer) took the first
 * one's locks away. The unix VFS knows the file's other connections and keeps the descriptor until
 * their locks are gone. */
static ssize_t probe_read(const char *path, const struct stat *sb, unsigned char *buf, size_t n) {
  sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
  sqlite3_file *f = vfs ? calloc(1, (size_t)vfs->szOsFile) : NULL;
  int flags = 0;
  if (!f || vfs->xOpen(vfs, path, f, SQLITE_OPEN_READONLY | SQLITE_OPEN_MAIN_DB, &flags) != SQLITE_OK) {
    if (f && f->pMethods)
      f->pMethods->xClose(f);
    free(f);
    errno = errno ? errno : EIO;
    return -1;
  }
  size_t want = (size_t)sb->st_size < n ? (size_t)sb->st_size : n;
  int rc = want ? f->pMethods->xRead(f, buf, (int)want, 0) : SQLITE_OK;
  f->pMethods->xClose(f);
  free(f);
  if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) {
    errno = EIO;
    return -1;
  }
  return (ssize_t)want;
}

/* What is at path, refused unless it may be a store for this mode: a folder, a device, a missing
 * file (unless STORE_WRITE), an empty file (unless STORE_WRITE), or a file that does not start
 * with SQLite's magic is refused with a one-line message and never touched. */
static int probe_file(const char *path, enum store_mode mode, struct file_facts *f) {
  *f = (struct file_facts){0};
  struct stat sb;
  if (stat(path, &sb) != 0) {
    if (errno != ENOENT)
      return gs_fail(GS_EIO, "cannot open store %s: %s", path, strerror(errno));
    if (mode != STORE_WRITE)
      return gs_fail(GS_ENOENT, "no store at %s (check --store or $GPUSCOPE_STORE; 'gpuscope run' creates one)", path);
    if (mkdir_parents(path))
      return gs_fail(GS_EIO, "cannot create the folder for store %s: %s", path, strerror(errno));
    return GS_OK;
  }
  if (S_ISDIR(sb.st_mode))
    return gs_fail(GS_EINVAL, "store %s is a folder, not a file (name the file: sqlite://%s/gpuscope.db)", path, path);
  if (!S_ISREG(sb.st_mode))
    return gs_fail(GS_EINVAL, "store %s is not a regular file", path);
  f->exists = 1;
  unsigned char head[100] = {0};
  errno = 0;
  ssize_t r = probe_read(path, &sb, head, sizeof head);
  if (r < 0)
    return gs_fail(GS_EIO, "cannot read store %s: %s", path, strerror(errno));
  if (r == 0) {
    f->empty = 1;
    if (mode != STORE_WRITE)
      return gs_fail(GS_ECORRUPT, "store %s is an empty file, not a gpuscope store; left untouched", path);
    return GS_OK;
  }
  if (r < 16 || memcmp(head, "SQLite format 3", 16) != 0)
    return gs_fail(GS_ECORRUPT, "store %s is not a gpuscope store (not an SQLite file); left untouched", path);
  f->wal_mode = r >= 20 && head[18] == 2 && head[19] == 2;
  return GS_OK;
}

/* The size of path+suffix, or -1 when there is no such file. */
static long long size_of(const char *path, const char *suffix) {
  char p[1100];
  struct stat sb;
  snprintf(p, sizeof p, "%s%s", path, suffix);
  return stat(p, &sb) ? -1 : (long long)sb.st_size;
}

/* Whether new files can be made beside path (its -wal and -shm). */
static int folder_writable(const char *path) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    dir[1] = 0;
  else
    *slash = 0;
  return access(dir, W_OK) == 0;
}

/* "file:PATH?QUERY" with PATH percent-encoded, for sqlite3_open_v2 with SQLITE_OPEN_URI. */
static void file_uri(char *out, size_t n, const char *path, const char *query) {
  size_t o = (size_t)snprintf(out, n, "file:");
  for (const unsigned char *p = (const unsigned char *)path; *p && o + 4 < n; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("/._-~", *p))
      out[o++] = (char)*p;
    else
      o += (size_t)snprintf(out + o, n - o, "%%%02X", *p);
  }
  snprintf(out + o, n - o, "?%s", query);
}

/* ---- whose file, which version ---- */

/* The schema version of a gpuscope store: 0 for a database without tables. A database is ours
 * only when its meta table says app = 'gpuscope'; any other is refused and left as it is. */
static int schema_version(struct sqlite_store *s, int *version) {
  sqlite3_stmt *st;
  *version = 0;
  int rc = sqlite3_prepare_v2(s->db, "SELECT count(*) FROM sqlite_master", -1, &st, NULL);
  int step = rc == SQLITE_OK ? sqlite3_step(st) : rc;
  int tables = step == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
  if (tables < 0) {
    int code = sqlite3_errcode(s->db);
    if (code == SQLITE_NOTADB || code == SQLITE_CORRUPT)
      rc = gs_fail(GS_ECORRUPT, "store %s is corrupt or not a database (%s); left untouched", s->path,
                   sqlite3_errmsg(s->db));
    else
      rc = sq_fail(s, "cannot read");
    sqlite3_finalize(st);
    return rc;
  }
  sqlite3_finalize(st);
  if (tables == 0)
    return GS_OK;
  if (sqlite3_prepare_v2(s->db,
                         "SELECT (SELECT value FROM meta WHERE key = 'app'),"
                         " (SELECT value FROM meta WHERE key = 'schema_version')",
                         -1, &st, NULL) != SQLITE_OK)
    return gs_fail(GS_ECORRUPT, "store %s is an SQLite file but not a gpuscope store; left untouched", s->path);
  step = sqlite3_step(st);
  if (step != SQLITE_ROW) {
    rc = sq_fail(s, "cannot read");
    sqlite3_finalize(st);
    return rc;
  }
  const char *app = (const char *)sqlite3_column_text(st, 0);
  int ours = app && !strcmp(app, "gpuscope");
  *version = sqlite3_column_int(st, 1);
  sqlite3_finalize(st);
  if (!ours)
    return gs_fail(GS_ECORRUPT,
                   "store %s is an SQLite file of another application (its meta table has no app = 'gpuscope'),"
                   " not a gpuscope store; left untouched",
                   s->path);
  if (*version <= 0)
    return gs_fail(GS_ECORRUPT, "store %s has no schema version; left untouched", s->path);
  if (*version > GS_STORE_SCHEMA_VERSION)
    return gs_fail(GS_ECORRUPT, "store %s has schema version %d, newer than this gpuscope (%d): upgrade gpuscope",
                   s->path, *version, GS_STORE_SCHEMA_VERSION);
  return GS_OK;
}

/* Creates the schema, or migrates an older one, inside one write transaction. */
static int migrate(struct sqlite_store *s) {
  int v, rc = schema_version(s, &v);
  if (rc)
    return rc;
  s->base.schema_found = v;
  if (v == GS_STORE_SCHEMA_VERSION)
    return GS_OK;
  if ((rc = sq_exec(s, "BEGIN IMMEDIATE", "cannot create or migrate the schema")))
    return rc;
  if ((rc = schema_version(s, &v))) /* another process may have done it meanwhile */
    goto fail;
  char sql[128];
  if (v == 0) {
    for (int i = 0; SCHEMA_V1[i]; i++)
      if ((rc = sq_exec(s, SCHEMA_V1[i], "cannot create the schema")))
        goto fail;
    snprintf(sql, sizeof sql, "INSERT INTO meta VALUES('schema_version', '%d'), ('app', 'gpuscope')",
             GS_STORE_SCHEMA_VERSION);
    if ((rc = sq_exec(s, sql, "cannot create the schema")))
      goto fail;
  }
  /* Version 2 adds decimal chunks and no table: only the number moves. Version 3 adds tables. */
  for (int i = 0; v < 3 && SCHEMA_V3[i]; i++)
    if ((rc = sq_exec(s, SCHEMA_V3[i], "cannot migrate the schema")))
      goto fail;
  if (v > 0 && v < GS_STORE_SCHEMA_VERSION) {
    snprintf(sql, sizeof sql, "UPDATE meta SET value = '%d' WHERE key = 'schema_version'", GS_STORE_SCHEMA_VERSION);
    if ((rc = sq_exec(s, sql, "cannot migrate the schema")))
      goto fail;
  }
  return sq_exec(s, "COMMIT", "cannot create or migrate the schema");
fail:
  sq_rollback(s);
  return rc;
}

/* ---- opening ---- */

static void sq_close(struct store *base) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  if (!s)
    return;
  sq_writer_done(s);
  sqlite3_close(s->db);
  free(s);
}

static int open_db(struct sqlite_store *s, const char *name, int flags) {
  if (s->db)
    sqlite3_close(s->db);
  s->db = NULL;
  if (sqlite3_open_v2(name, &s->db, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
    int rc = gs_fail(GS_EIO, "cannot open store %s: %s", s->path, s->db ? sqlite3_errmsg(s->db) : "out of memory");
    sqlite3_close(s->db);
    s->db = NULL;
    return rc;
  }
  sqlite3_busy_timeout(s->db, 10000);
  return GS_OK;
}

/* Opens an existing file read-only and checks it is a gpuscope store; sets schema_found. */
static int open_checked(struct sqlite_store *s, const struct file_facts *f) {
  /* No -shm means no connection has the store open; an empty or absent -wal holds nothing. */
  int immutable =
      f->wal_mode && size_of(s->path, "-wal") <= 0 && size_of(s->path, "-shm") < 0 && !folder_writable(s->path);
  char uri[3200];
  file_uri(uri, sizeof uri, s->path, immutable ? "immutable=1" : "mode=ro");
  int rc = open_db(s, uri, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
  if (rc)
    return rc;
  int v;
  if ((rc = schema_version(s, &v))) {
    if (f->wal_mode && (sqlite3_errcode(s->db) & 0xff) == SQLITE_CANTOPEN && !folder_writable(s->path))
      rc = gs_fail(GS_EIO,
                   "cannot read store %s: its folder is read-only and its -wal file has no -shm file beside it"
                   " (copy the store with its -wal file to a writable folder)",
                   s->path);
    return rc;
  }
  s->base.schema_found = v;
  return GS_OK;
}

static int open_read(struct sqlite_store *s, const struct file_facts *f) {
  int rc = open_checked(s, f);
  if (rc)
    return rc;
  if (s->base.schema_found == 0)
    return gs_fail(GS_ECORRUPT, "store %s is an empty SQLite database, not a gpuscope store; left untouched", s->path);
  s->base.read_only = 1;
  /* report and compare keep the findings they compute, in a store of this version they can write */
  if (s->mode != STORE_KEEP || s->base.schema_found != GS_STORE_SCHEMA_VERSION || access(s->path, W_OK) ||
      !folder_writable(s->path))
    return GS_OK;
  if (open_db(s, s->path, SQLITE_OPEN_READWRITE) || sqlite3_db_readonly(s->db, "main") == 1) {
    return open_checked(s, f); /* stay read-only */
  }
  s->base.read_only = 0;
  return GS_OK;
}

/* WAL mode needs the file to itself for a moment: while another gpuscope creates or migrates the same
 * store (two runs started at once), SQLite answers the pragma BUSY at once, without its busy handler.
 * So it is tried again for as long as the busy timeout (10 s) lets any other write wait. */
static int set_wal(struct sqlite_store *s) {
  for (int i = 0; i < 500; i++) {
    int rc = sqlite3_exec(s->db, "PRAGMA journal_mode = WAL", NULL, NULL, NULL) & 0xff;
    if (rc == SQLITE_OK)
      return GS_OK;
    if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
      break;
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
  }
  return sq_exec(s, "PRAGMA journal_mode = WAL", "cannot set WAL mode"); /* the error, said once */
}

static int open_write(struct sqlite_store *s, const struct file_facts *f) {
  int rc;
  if (f->exists && !f->empty && (rc = open_checked(s, f)))
    return rc;
  if (s->mode == STORE_MIGRATE && s->base.schema_found == 0)
    return gs_fail(GS_ECORRUPT, "store %s is an empty SQLite database, not a gpuscope store; left untouched", s->path);
  if ((rc = open_db(s, s->path, SQLITE_OPEN_READWRITE | (s->mode == STORE_WRITE ? SQLITE_OPEN_CREATE : 0))))
    return rc;
  if (sqlite3_db_readonly(s->db, "main") == 1)
    return gs_fail(GS_EIO, "store %s is read-only: gpuscope %s needs to write it", s->path,
                   s->mode == STORE_WRITE ? "run" : "migrate");
  if ((rc = migrate(s)) || (rc = set_wal(s)) || (rc = sq_exec(s, "PRAGMA synchronous = NORMAL", "cannot set WAL mode")))
    return rc;
  return s->mode == STORE_WRITE ? sq_writer_prepare(s) : GS_OK;
}

static struct store *sq_open(const char *path, enum store_mode mode) {
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
  s->mode = mode;
  s->w.elem = sizeof(struct wseries);
  s->base = (struct store){.version = 6,
                           .schema_version = GS_STORE_SCHEMA_VERSION,
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
                           .close = sq_close,
                           .run_import = sq_run_import,
                           .log_append = sq_log_append,
                           .log_read = sq_log_read,

                           .run_set_tags = sq_run_set_tags,
                           .run_rename = sq_run_rename,
                           .run_add_note = sq_run_add_note,
                           .run_delete = sq_run_delete,
                           .compact = sq_compact,
                           .runs_find = sq_runs_find};
  struct file_facts f;
  int rc = probe_file(path, mode, &f);
  if (!rc)
    rc = mode == STORE_READ || mode == STORE_KEEP ? open_read(s, &f) : open_write(s, &f);
  if (rc) {
    sq_close(&s->base);
    return NULL;
  }
  return &s->base;
}

const struct store_backend store_backend_sqlite = {.version = 1, .scheme = "sqlite", .open = sq_open};
