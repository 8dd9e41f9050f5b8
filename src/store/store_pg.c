/* store/store_pg: the shared back end — one PostgreSQL database (or schema, through the URL's
 * search_path) for a team or a multi-node job, reached through libpq with a
 * postgresql://… or postgres://… URL. Credentials are libpq's own (PGPASSFILE, ~/.pgpass, service
 * files, PGPASSWORD); a password written in the URL is used but never shown: every message names
 * the store by its scrubbed URL.
 *
 * This file opens it: whose database it is, in which mode (enum store_mode), and the schema
 * (meta.schema_version, the same version and data model as the SQLite store; chunks are bytea
 * holding the same codec). A database is ours only when its meta table says app = 'gpuscope': a
 * database with other tables and no such row is refused and never written, as is a newer schema.
 * Creating or migrating takes a transaction-scoped advisory lock, so agents starting together make
 * the schema once; ingest takes row locks only (each run writes its own rows).
 *
 * A store opened to write (gpuscope run) whose server cannot be reached still opens: the run is
 * spooled to a local SQLite file and replayed when the server returns (pg_spool.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg_int.h"

/* Schema version 3 (PG_SCHEMA_VERSION): SQLite's version 2 (store.h) but for the rollups, which are
 * packed STORE_ROLLUP_BLOCK_BUCKETS buckets to a row (rollup_blocks, bytea in the chunk codec): a
 * row per bucket, as in SQLite, cost ~125 bytes for 28 bytes of data (a 24-byte row header and a
 * three-column index), 2.1 bytes a point at 1 Hz. Indexes: what the readers look up — runs by name, by
 * group and newest first; series by run (the unique key); chunks by (series_id, t0), the primary
 * key every sample read seeks; rollup blocks by (series_id, res_ns, t0); events, notes, findings by
 * run.
 * events and notes have a unique key so a replayed spool never stores one twice.
 *
 * The open chunk of each series (rewritten at every flush) lives in open_chunks, one row per series,
 * and a full chunk is inserted into chunks once: every update of a row leaves a dead version behind
 * in PostgreSQL, so the rewrites stay in a small table that HOT updates and vacuum keep small
 * (fillfactor 50 leaves each page room for the next version), and chunks is append-only and dense —
 * the layout SQLite's back end gets from its rowid -N rows. A chunk (at most ~4 KB of codec that does
 * not compress further) stays in its row: no TOAST (toast_tuple_target 8160), no compression
 * (STORAGE EXTERNAL). Readers take both tables. */
#define ROLLUP_BLOCKS_TABLE                                                                                            \
  "CREATE TABLE rollup_blocks(series_id bigint, res_ns bigint, t0 bigint, n integer, data bytea,"                      \
  " PRIMARY KEY(series_id, res_ns, t0)) WITH (toast_tuple_target = 8160)"
#define ROLLUP_BLOCKS_STORAGE "ALTER TABLE rollup_blocks ALTER COLUMN data SET STORAGE EXTERNAL"
/* An event is one row, once: a replayed spool stores none twice. Its value is in the key (NULL
 * as NaN, which PostgreSQL orders equal to itself): events that one poll of the client socket
 * stamped with the same time — two marks taken together — differ only by value, and were kept as
 * one (marks lost under load; the key was (run_id, t, kind, name, labels, text), index events_run). */
#define EVENTS_KEY                                                                                                     \
  "CREATE UNIQUE INDEX IF NOT EXISTS events_key ON events(run_id, t, kind, name, labels, text,"                        \
  " coalesce(value, 'NaN'::double precision))"

static const char *SCHEMA[] = {
    "CREATE TABLE meta(key text PRIMARY KEY, value text)",
    "CREATE TABLE runs(id text PRIMARY KEY, name text NOT NULL DEFAULT '', grp text NOT NULL DEFAULT '',"
    " command text, cwd text, host text, \"user\" text, tags text, git text, start_wall_ns bigint,"
    " end_wall_ns bigint, heartbeat_wall_ns bigint, status text, exit_code integer, agent_pid integer,"
    " boot_id text, interval_ns bigint)",
    "CREATE INDEX runs_name ON runs(name)",
    "CREATE INDEX runs_grp ON runs(grp, start_wall_ns)",
    "CREATE INDEX runs_start ON runs(start_wall_ns DESC, id DESC)",
    "CREATE TABLE params(run_id text, key text, value text, PRIMARY KEY(run_id, key))",
    "CREATE TABLE series(id bigserial PRIMARY KEY, run_id text NOT NULL, source text, name text, labels text,"
    " unit text, kind integer, UNIQUE(run_id, source, name, labels))",
    "CREATE TABLE chunks(series_id bigint, t0 bigint, t1 bigint, n integer, data bytea,"
    " PRIMARY KEY(series_id, t0)) WITH (toast_tuple_target = 8160)",
    "ALTER TABLE chunks ALTER COLUMN data SET STORAGE EXTERNAL",
    "CREATE TABLE open_chunks(series_id bigint PRIMARY KEY, t0 bigint, t1 bigint, n integer, data bytea)"
    " WITH (toast_tuple_target = 8160, fillfactor = 50)",
    "ALTER TABLE open_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
    ROLLUP_BLOCKS_TABLE,
    ROLLUP_BLOCKS_STORAGE,
    "CREATE TABLE events(run_id text, t bigint, kind text, name text, value double precision, labels text,"
    " text text, seq bigserial)",
    EVENTS_KEY,
    "CREATE TABLE notes(run_id text, t bigint, text text, seq bigserial, UNIQUE(run_id, text))",
    "CREATE TABLE findings(run_id text, rank integer, rule text, severity text, share double precision,"
    " lost_s double precision, speedup double precision, title text, evidence text, fix text,"
    " PRIMARY KEY(run_id, rank))",
    NULL};

/* Schema version 4: the tables this version adds, made when a database is created and when an
 * older one is migrated (IF NOT EXISTS: either way); SQLite's SCHEMA_V3. */
static const char *SCHEMA_V4[] = {
    /* the job's output (pg_log.c): chunks of bytes as read, per run in seq order */
    "CREATE TABLE IF NOT EXISTS logs(run_id text, seq bigint, stream text, t bigint, data bytea,"
    " PRIMARY KEY(run_id, seq))",
    NULL};

static void quiet_notice(void *arg, const char *msg) {
  (void)arg, (void)msg; /* "relation exists, skipping" and the like are not for the user */
}

/* Connects to url (a libpq URL) or, when dbname is not NULL, to that database of the same server. */
static PGconn *connect_to(const char *url, const char *dbname) {
  const char *keys[10], *vals[10];
  int k = 0;
  keys[k] = "connect_timeout", vals[k++] = "3";
  keys[k] = "fallback_application_name", vals[k++] = "gpuscope";
  keys[k] = "keepalives_idle", vals[k++] = "10";
  keys[k] = "keepalives_interval", vals[k++] = "5";
  keys[k] = "keepalives_count", vals[k++] = "3";
  keys[k] = "tcp_user_timeout", vals[k++] = "30000"; /* data unacknowledged for 30 s: a peer gone */
  keys[k] = "dbname", vals[k++] = url;               /* expanded: the URL's own settings win over the ones above */
  if (dbname)
    keys[k] = "dbname", vals[k++] = dbname;
  keys[k] = NULL, vals[k] = NULL;
  PGconn *c = PQconnectdbParams(keys, vals, 1);
  if (c)
    PQsetNoticeProcessor(c, quiet_notice, NULL);
  return c;
}

/* The database the URL names (libpq's default: the user name), into out. */
static void url_dbname(const char *url, char *out, size_t n) {
  out[0] = 0;
  PQconninfoOption *o = PQconninfoParse(url, NULL);
  for (PQconninfoOption *p = o; p && p->keyword; p++)
    if (!strcmp(p->keyword, "dbname") && p->val)
      snprintf(out, n, "%s", p->val);
    else if (!strcmp(p->keyword, "user") && p->val && !out[0])
      snprintf(out, n, "%s", p->val);
  PQconninfoFree(o);
}

/* gpuscope run on a server without the database: made, as the SQLite back end makes its file. */
static int create_database(struct pg_store *s) {
  char db[256];
  url_dbname(s->url, db, sizeof db);
  if (!db[0])
    return gs_fail(GS_EINVAL, "store %s names no database", s->name);
  PGconn *c = connect_to(s->url, "postgres");
  if (PQstatus(c) != CONNECTION_OK) {
    int rc = gs_fail(GS_EIO, "store %s: cannot create database %s: %s", s->name, db, PQerrorMessage(c));
    PQfinish(c);
    return rc;
  }
  char *id = PQescapeIdentifier(c, db, strlen(db));
  char sql[600];
  snprintf(sql, sizeof sql, "CREATE DATABASE %s", id ? id : "\"\"");
  PQfreemem(id);
  PGresult *r = PQexec(c, sql);
  const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  int rc = GS_OK;
  /* made by another agent meanwhile: 42P04, or 23505 when both creations ran at once */
  if (PQresultStatus(r) != PGRES_COMMAND_OK && !(state && (!strcmp(state, "42P04") || !strcmp(state, "23505"))))
    rc = gs_fail(GS_EIO, "store %s: cannot create database %s: %s", s->name, db, PQresultErrorMessage(r));
  PQclear(r);
  PQfinish(c);
  return rc;
}

/* The schema version of the database (its current schema): 0 when it has no tables. Refuses one
 * that is not ours, or newer. */
static int schema_version(struct pg_store *s, int *version) {
  *version = 0;
  PGresult *r = pg_query(s,
                         "SELECT to_regclass('meta') IS NOT NULL,"
                         " (SELECT count(*) FROM pg_tables WHERE schemaname = current_schema())",
                         0, NULL, "cannot read");
  if (!r)
    return GS_EIO;
  int has_meta = !strcmp(PQgetvalue(r, 0, 0), "t");
  int64_t tables = pg_i64(r, 0, 1);
  PQclear(r);
  if (tables == 0)
    return GS_OK;
  if (!has_meta)
    return gs_fail(GS_ECORRUPT,
                   "store %s is a database of another application (no gpuscope meta table), not a gpuscope"
                   " store; left untouched",
                   s->name);
  if (!(r = pg_query(s,
                     "SELECT (SELECT value FROM meta WHERE key = 'app'),"
                     " (SELECT value FROM meta WHERE key = 'schema_version')",
                     0, NULL, "cannot read")))
    return gs_fail(GS_ECORRUPT, "store %s is not a gpuscope store (%s); left untouched", s->name, gs_last_error());
  int ours = !PQgetisnull(r, 0, 0) && !strcmp(PQgetvalue(r, 0, 0), "gpuscope");
  *version = (int)pg_i64(r, 0, 1);
  PQclear(r);
  if (!ours)
    return gs_fail(GS_ECORRUPT,
                   "store %s is a database of another application (its meta table has no app = 'gpuscope'),"
                   " not a gpuscope store; left untouched",
                   s->name);
  if (*version <= 0)
    return gs_fail(GS_ECORRUPT, "store %s has no schema version; left untouched", s->name);
  if (*version > PG_SCHEMA_VERSION)
    return gs_fail(GS_ECORRUPT, "store %s has schema version %d, newer than this gpuscope (%d): upgrade gpuscope",
                   s->name, *version, PG_SCHEMA_VERSION);
  return GS_OK;
}

/* Version 2 -> 3: the rollups' rows packed into blocks, series by series (the same buckets, read back
 * the same), then the old table dropped. In the migration's transaction. */
static int migrate_rollups(struct pg_store *s) {
  int rc;
  if ((rc = pg_exec(s, ROLLUP_BLOCKS_TABLE, "cannot migrate the rollups")) ||
      (rc = pg_exec(s, ROLLUP_BLOCKS_STORAGE, "cannot migrate the rollups")))
    return rc;
  PGresult *ids =
      pg_query(s, "SELECT DISTINCT series_id FROM rollups ORDER BY 1", 0, NULL, "cannot migrate the rollups");
  if (!ids)
    return GS_EIO;
  for (int i = 0; i < PQntuples(ids) && !rc; i++) {
    const char *p[] = {PQgetvalue(ids, i, 0)};
    PGresult *r = pg_query(s,
                           "SELECT res_ns, t, min, max, mean FROM rollups WHERE series_id = $1::bigint"
                           " ORDER BY res_ns, t",
                           1, p, "cannot migrate the rollups");
    if (!r) {
      rc = GS_EIO;
      break;
    }
    struct rollup_acc acc[STORE_N_ROLLUP_RES + 1], *lv[STORE_N_ROLLUP_RES + 1];
    int n = 0;
    for (int j = 0; j < PQntuples(r) && !rc; j++) {
      int64_t res = pg_i64(r, j, 0);
      if (!n || acc[n - 1].res != res) {
        if (n == STORE_N_ROLLUP_RES + 1)
          break; /* a resolution no gpuscope wrote: computed from the chunks when read */
        acc[n] = (struct rollup_acc){.res = res};
        lv[n] = &acc[n], n++;
      }
      rollup_add_bucket(&acc[n - 1], pg_i64(r, j, 1), strtod(PQgetvalue(r, j, 2), NULL),
                        strtod(PQgetvalue(r, j, 3), NULL), strtod(PQgetvalue(r, j, 4), NULL));
      if (acc[n - 1].oom)
        rc = gs_fail(GS_ENOMEM, "out of memory");
    }
    PQclear(r);
    if (!rc)
      rc = pg_rollups_write(s, pg_i64(ids, i, 0), lv, n);
    for (int k = 0; k < n; k++)
      rollup_done(&acc[k]);
  }
  PQclear(ids);
  return rc ? rc : pg_exec(s, "DROP TABLE rollups", "cannot migrate the rollups");
}

/* A store made before the events' key held their value gets it (the same schema version: a
 * gpuscope of either key writes with ON CONFLICT DO NOTHING, which any unique index serves). Once,
 * under the schema's advisory lock; a reader never changes it. */
static int events_key(struct pg_store *s) {
  PGresult *r = pg_query(s, "SELECT to_regclass('events_key') IS NULL", 0, NULL, "cannot read the schema");
  if (!r)
    return GS_EIO;
  int missing = !strcmp(PQgetvalue(r, 0, 0), "t");
  PQclear(r);
  if (!missing)
    return GS_OK;
  int rc;
  if ((rc = pg_exec(s, "BEGIN", "cannot migrate the events' key")) ||
      (rc = pg_exec(s, "SELECT pg_advisory_xact_lock(7316853)", "cannot migrate the events' key")) ||
      (rc = pg_exec(s, EVENTS_KEY, "cannot migrate the events' key")) ||
      (rc = pg_exec(s, "DROP INDEX IF EXISTS events_run", "cannot migrate the events' key")) ||
      (rc = pg_exec(s, "COMMIT", "cannot migrate the events' key")))
    pg_rollback(s);
  return rc;
}

/* Creates the schema, or migrates an older one, in one transaction under an advisory lock (agents
 * that start at once wait for the first, then find the schema made). */
static int migrate(struct pg_store *s) {
  int v, rc = schema_version(s, &v);
  if (rc)
    return rc;
  if (!s->base.schema_found)
    s->base.schema_found = v;
  if (v == PG_SCHEMA_VERSION)
    return events_key(s);
  if ((rc = pg_exec(s, "BEGIN", "cannot create or migrate the schema")) ||
      (rc = pg_exec(s, "SELECT pg_advisory_xact_lock(7316853)", "cannot create or migrate the schema")))
    goto fail;
  if ((rc = schema_version(s, &v)))
    goto fail;
  char sql[160];
  if (v == 0) {
    for (int i = 0; SCHEMA[i]; i++)
      if ((rc = pg_exec(s, SCHEMA[i], "cannot create the schema")))
        goto fail;
    snprintf(sql, sizeof sql, "INSERT INTO meta VALUES('schema_version', '%d'), ('app', 'gpuscope')",
             PG_SCHEMA_VERSION);
    if ((rc = pg_exec(s, sql, "cannot create the schema")))
      goto fail;
  } else if (v < PG_SCHEMA_VERSION) {
    /* Version 1 never existed on PostgreSQL (its tables are version 2's). */
    if (v < 3 && (rc = migrate_rollups(s)))
      goto fail;
  }
  for (int i = 0; v < 4 && SCHEMA_V4[i]; i++)
    if ((rc = pg_exec(s, SCHEMA_V4[i], "cannot migrate the schema")))
      goto fail;
  if (v > 0 && v < PG_SCHEMA_VERSION) {
    snprintf(sql, sizeof sql, "UPDATE meta SET value = '%d' WHERE key = 'schema_version'", PG_SCHEMA_VERSION);
    if ((rc = pg_exec(s, sql, "cannot migrate the schema")))
      goto fail;
  }
  if ((rc = pg_exec(s, "COMMIT", "cannot create or migrate the schema")))
    return rc;
  return events_key(s);
fail:
  pg_rollback(s);
  return rc;
}

static int prepare(struct pg_store *s, const char *name, const char *sql) {
  PGresult *r = pg_run_prepare(s, name, sql);
  int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? GS_OK : pg_fail(s, r, "cannot prepare");
  PQclear(r);
  return rc;
}

/* The writer's per-flush statements, prepared once per connection. */
static int writer_prepare(struct pg_store *s) {
  int rc;
  if ((rc = prepare(s, "gs_chunk",
                    "INSERT INTO open_chunks(series_id, t0, t1, n, data) VALUES($1::bigint, $2::bigint, $3::bigint,"
                    " $4::integer, $5::bytea) ON CONFLICT (series_id) DO UPDATE"
                    " SET t0 = excluded.t0, t1 = excluded.t1, n = excluded.n, data = excluded.data")) ||
      (rc = prepare(s, "gs_seal",
                    "INSERT INTO chunks(series_id, t0, t1, n, data) VALUES($1::bigint, $2::bigint, $3::bigint,"
                    " $4::integer, $5::bytea) ON CONFLICT (series_id, t0) DO UPDATE"
                    " SET t1 = excluded.t1, n = excluded.n, data = excluded.data")) ||
      (rc = prepare(s, "gs_heartbeat", "UPDATE runs SET heartbeat_wall_ns = $1::bigint WHERE id = $2")) ||
      (rc = prepare(s, "gs_series",
                    "INSERT INTO series(run_id, source, name, labels, unit, kind) VALUES($1, $2, $3, $4, $5,"
                    " $6::integer) ON CONFLICT (run_id, source, name, labels) DO UPDATE SET unit = excluded.unit"
                    " RETURNING id")) ||
      (rc = prepare(s, "gs_event",
                    "INSERT INTO events(run_id, t, kind, name, value, labels, text) VALUES($1, $2::bigint, $3, $4,"
                    " $5::double precision, $6, $7) ON CONFLICT DO NOTHING")) ||
      (rc = prepare(s, "gs_param",
                    "INSERT INTO params VALUES($1, $2, $3) ON CONFLICT (run_id, key) DO UPDATE"
                    " SET value = excluded.value")))
    return rc;
  return GS_OK;
}

/* Whether a failed connection is the server being away (refused, timed out, restarting: worth a
 * spool and a retry) rather than a refusal that waiting will not change (a wrong password, no such
 * role, a bad option), which `gpuscope run` reports at once. */
static int server_away(const char *msg) {
  static const char *const away[] = {
      "Connection refused",     "timeout expired",          "Network is unreachable",       "No route to host",
      "the database system is", "could not translate host", "server closed the connection", "Connection reset",
      "Connection timed out",   "too many clients"};
  for (size_t i = 0; i < sizeof away / sizeof *away; i++)
    if (strstr(msg, away[i]))
      return 1;
  return 0;
}

int pg_connect(struct pg_store *s) {
  if (s->conn)
    PQfinish(s->conn);
  s->schema_ok = 0;
  s->conn = connect_to(s->url, NULL);
  if (PQstatus(s->conn) != CONNECTION_OK) {
    const char *msg = PQerrorMessage(s->conn);
    int missing = strstr(msg, "database \"") && strstr(msg, "does not exist");
    if (missing && s->mode == STORE_WRITE) {
      int rc = create_database(s);
      if (rc)
        return rc;
      PQfinish(s->conn);
      s->conn = connect_to(s->url, NULL);
    }
    if (PQstatus(s->conn) != CONNECTION_OK) {
      char one[512];
      snprintf(one, sizeof one, "%s", PQerrorMessage(s->conn));
      one[strcspn(one, "\n")] = 0;
      if (missing && s->mode != STORE_WRITE)
        return gs_fail(GS_ENOENT, "no store at %s (%s; 'gpuscope run' creates one)", s->name, one);
      s->down = server_away(one);
      snprintf(s->lost_why, sizeof s->lost_why, "%s", one);
      return gs_fail(GS_EIO, "cannot %s store %s: %s", s->down ? "reach" : "open", s->name, one);
    }
  }
  int rc;
  if (s->timeout_ns && PQsetnonblocking(s->conn, 1)) /* every round trip waited for with a deadline */
    return gs_fail(GS_EIO, "store %s: cannot make the connection non-blocking", s->name);
  if (s->mode == STORE_WRITE || s->mode == STORE_MIGRATE) {
    if ((rc = migrate(s)))
      return rc;
  } else {
    int v;
    if ((rc = schema_version(s, &v)))
      return rc;
    if (v == 0)
      return gs_fail(GS_ECORRUPT, "store %s is an empty database, not a gpuscope store; left untouched", s->name);
    s->base.schema_found = v;
  }
  int current = s->base.schema_found == 0 || s->base.schema_found == PG_SCHEMA_VERSION;
  s->rollup_rows = !current && s->mode != STORE_WRITE && s->mode != STORE_MIGRATE;
  if (s->mode == STORE_READ || (s->mode == STORE_KEEP && !current)) {
    s->base.read_only = 1;
    if ((rc = pg_exec(s, "SET default_transaction_read_only = on", "cannot open read-only")))
      return rc;
  }
  if (s->mode == STORE_WRITE && (rc = writer_prepare(s)))
    return rc;
  s->schema_ok = 1;
  s->down = 0;
  return GS_OK;
}

static void pg_close(struct store *base) {
  struct pg_store *s = (struct pg_store *)base;
  if (!s)
    return;
  pg_writer_done(s);
  pg_spool_done(s);
  store_pending_done(&s->known);
  if (s->conn)
    PQfinish(s->conn);
  free(s);
}

static struct store *open_url(const char *scheme, const char *location, enum store_mode mode) {
  /* libpq is loaded on the first postgresql:// open, never for a run into SQLite (pq_api.h). */
  char err[320];
  int lrc = pq_api_load(err, sizeof err);
  if (lrc) {
    gs_fail(lrc, "%s", err);
    return NULL;
  }
  struct pg_store *s = calloc(1, sizeof *s);
  if (!s) {
    gs_fail(GS_ENOMEM, "out of memory");
    return NULL;
  }
  snprintf(s->url, sizeof s->url, "%s://%s", scheme, location);
  pg_scrub_url(s->url, s->name, sizeof s->name);
  s->mode = mode;
  s->connect = pg_connect;
  if (mode == STORE_WRITE) {
    const char *e = getenv("GPUSCOPE_PG_TIMEOUT_MS");
    long long ms = e && *e ? atoll(e) : 0;
    s->timeout_ns = ms > 0 ? ms * 1000000LL : PG_TIMEOUT_NS;
  }
  s->base = (struct store){.version = 6,
                           .scheme = "postgresql",
                           .schema_version = PG_SCHEMA_VERSION,
                           .run_begin = pg_run_begin,
                           .run_append = pg_run_append,
                           .run_end = pg_run_end,
                           .runs_list = pg_runs_list,
                           .run_get = pg_run_get,
                           .series_list = pg_series_list,
                           .samples_read = pg_samples_read,
                           .rollups_read = pg_rollups_read,
                           .events_read = pg_events_read,
                           .params_read = pg_params_read,
                           .notes_read = pg_notes_read,
                           .findings_write = pg_findings_write,
                           .findings_read = pg_findings_read,
                           .close = pg_close,
                           .run_import = pg_run_import,
                           .log_append = pg_log_append,
                           .log_read = pg_log_read,

                           .run_set_tags = pg_run_set_tags,
                           .run_rename = pg_run_rename,
                           .run_add_note = pg_run_add_note,
                           .run_delete = pg_run_delete,
                           .compact = NULL, /* autovacuum gives deleted rows' room back */
                           .runs_find = pg_runs_find};
  int rc = pg_connect(s);
  /* gpuscope run goes on when the server is unreachable: its run is spooled (pg_spool.c). */
  if (rc && !(mode == STORE_WRITE && s->down)) {
    pg_close(&s->base);
    return NULL;
  }
  if (rc)
    s->next_try_ns = gs_mono_ns() + PG_RETRY_NS;
  else if (mode == STORE_WRITE)
    pg_spool_recover(s); /* what earlier runs on this machine could not bring to the server */
  return &s->base;
}

static struct store *open_postgresql(const char *location, enum store_mode mode) {
  return open_url("postgresql", location, mode);
}

static struct store *open_postgres(const char *location, enum store_mode mode) {
  return open_url("postgres", location, mode);
}

const struct store_backend store_backend_postgresql = {.version = 1, .scheme = "postgresql", .open = open_postgresql};
const struct store_backend store_backend_postgres = {.version = 1, .scheme = "postgres", .open = open_postgres};
