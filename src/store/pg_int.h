/* store/pg_int: the PostgreSQL back end's private parts, shared by its files —
 *   store_pg.c  opening (libpq, modes, whose database it is), schema and migration, URL scrubbing;
 *   pg_write.c  the writer: runs, appends (kept and retried when they fail), run end, rollups;
 *   pg_spool.c  outages: a local SQLite spool (through the SQLite back end) while the server is
 *               unreachable, replayed when it returns;
 *   pg_read.c   the readers: runs, series, samples, rollups, events, params, notes, findings;
 *   pg_log.c    the job's output: its chunks appended (to the server or the spool) and read;
 *   pg_meta.c   what a person edits (tags, name, notes, removal) and searches (runs_find);
 *   pg_util.c   errors that name their cause (never a password), statements, small helpers.
 * pg_spool.c is the one file that calls both ways: it reconnects (store_pg.c) and replays through
 * the writer (pg_write.c), which hands it what the server cannot take. */
#ifndef GS_STORE_PG_INT_H
#define GS_STORE_PG_INT_H

#include "store/pq_api.h"

#include "store/store_backend.h"

/* The schema version of this back end: 3 packs rollups in blocks (version 2 had a row per bucket,
 * the tables of SQLite's version 2); 4 adds SQLite's version-3 tables (SCHEMA_V4). A newer one is
 * refused. */
enum { PG_SCHEMA_VERSION = 4 };
/* While the server is unreachable, a reconnection is tried at most this often (by the writer
 * thread, so the job never waits for it). */
#define PG_RETRY_NS (2LL * GS_NS_PER_S)
/* A spool is replayed in pieces of at most this many points, one transaction each
 * ($GPUSCOPE_SPOOL_PIECE_POINTS overrides it, for tests). */
enum { PG_SPOOL_PIECE_POINTS = 2 * 1024 * 1024 };
/* The writer gives a silent server this long (no byte answered nor taken) before it drops the
 * connection and treats the server as unreachable ($GPUSCOPE_PG_TIMEOUT_MS overrides it, for tests): long
 * enough for a loaded server's slowest write (a replayed piece, the run's rollups), short enough
 * that a hung server never holds the run's end for long. */
#define PG_TIMEOUT_NS (20LL * GS_NS_PER_S)

struct pg_store {
  struct store base; /* first: the interface */
  PGconn *conn;      /* NULL or bad while the server is unreachable */
  enum store_mode mode;
  char url[1024];        /* as given, for libpq (may hold a password: never printed) */
  char name[1024];       /* the URL without its password: every message uses this */
  int schema_ok;         /* the schema was checked (and made) on the current connection */
  int rollup_rows;       /* an unmigrated version-2 schema, read only: a rollups row per bucket */
  int64_t timeout_ns;    /* the most one round trip may wait (writers only; 0: no limit) */
  char lost_why[512];    /* why the last connection was dropped (a timeout, a broken socket) */
  struct store_writer w; /* its pending batch: what failed appends left (not outages: those go to the spool) */
  /* Opens the connection again and checks the schema: pg_connect, set by store_pg.c, which also
   * migrates. The statement helpers (pg_util.c) and the spool reconnect through it, as a back end
   * is called through its interface, so no call runs back up to the file that opens the store. */
  int (*connect)(struct pg_store *s);
  /* ---- outages (pg_spool.c) ---- */
  int down;                   /* the server was unreachable at the last try */
  int64_t next_try_ns;        /* monotonic time of the next reconnection */
  int run_in_pg;              /* the run's row is in the server */
  struct store_pending known; /* every series definition seen (a spool needs them all) */
  struct store *spool;        /* the SQLite spool of this run while it holds anything */
  int spool_series_sent;      /* the spool has been given every known series definition */
  char spool_path[1024];
  char server_run_id[32], spool_run_id[32]; /* the run's id in the server and in the spool */
  int64_t outages, spooled_points, replayed_points;
  int64_t refusals;         /* writes the server refused (not an outage): spooled too */
  char refuse_error[512];   /* the first refusal's cause */
  char replay_error[512];   /* why the last replay of this run's spool failed, the server being there */
  char recover_error[1600]; /* a left spool that could not be replayed: a note on the next run */
};

/* ---- pg_util.c ---- */

/* Reconnects when the server was unreachable and a try is due (or force); checks the schema.
 * Returns 0 when connected. */
int pg_reconnect(struct pg_store *s, int force);
/* The spool's store when the spool holds the run and the server does not (unreachable, or it
 * refused the replay): readers go there. */
struct store *pg_spool_reader(struct pg_store *s);
/* The id a reader of the spool uses for run_id: the spool's own id for this agent's run. */
const char *pg_spool_run_id(const struct pg_store *s, const char *run_id);

/* ---- pg_read.c ---- */

/* Copies url into out without its password (the userinfo's ":secret" and any password=...
 * parameter), so it can be shown. */
void pg_scrub_url(const char *url, char *out, size_t n);
/* Sets "store NAME: WHAT: server message" from the connection (or res when not NULL); marks the
 * store down when the connection is lost. Returns GS_EIO (GS_EBUSY for a lock or serialization
 * failure). */
int pg_fail(struct pg_store *s, const PGresult *res, const char *what);
/* True when the connection is gone (the server stopped or the network dropped). */
int pg_conn_lost(const struct pg_store *s);
/* Closes the connection (why, when not NULL, is what pg_fail says next) and marks the server
 * unreachable: the next write goes to the spool and a reconnection is tried. */
void pg_drop(struct pg_store *s, const char *why);
/* The deadline of a round trip starting now (INT64_MAX when the store has no timeout). */
int64_t pg_deadline(const struct pg_store *s);
/* Sends what is queued and waits, until deadline, for a result that PQgetResult can return
 * without blocking; each time the socket moves (bytes sent or received) the deadline is pushed to
 * timeout_ns from then, so it bounds the server's silence. 0, or GS_EIO with the connection
 * dropped (the server was silent too long, or the socket failed). */
int pg_await(struct pg_store *s, int64_t deadline);
/* PQgetResult bounded by deadline (pg_await first when the store has a timeout): NULL at the end
 * of a command's results, and when the wait failed (then pg_conn_lost). */
PGresult *pg_result(struct pg_store *s, int64_t deadline);
/* PQexecParams, PQexecPrepared and PQprepare, each bounded by the store's timeout: the result
 * (caller PQclear()s), or NULL when the connection is lost, broke or timed out (it is then
 * dropped; pg_fail(s, NULL, ...) names why). */
PGresult *pg_run(struct pg_store *s, const char *sql, int n, const char *const *params, const int *lens,
                 const int *fmts, int binary);
PGresult *pg_run_prepared(struct pg_store *s, const char *name, int n, const char *const *params, const int *lens,
                          const int *fmts);
PGresult *pg_run_prepare(struct pg_store *s, const char *name, const char *sql);
/* Runs sql (no parameters, no rows wanted); on failure pg_fail(s, res, what). */
int pg_exec(struct pg_store *s, const char *sql, const char *what);
/* Runs sql with n text parameters (NULL = SQL NULL); returns the result (caller PQclear()s) when it
 * succeeded, else NULL after pg_fail(). */
PGresult *pg_query(struct pg_store *s, const char *sql, int n, const char *const *params, const char *what);
/* pg_query with the rows in binary (a bytea as it is, an integer in network order: pg_u32). */
PGresult *pg_query_bin(struct pg_store *s, const char *sql, int n, const char *const *params, const char *what);
/* Row i, column col of a binary result: a 4-byte integer in host order. */
uint32_t pg_u32(const PGresult *r, int i, int col);
/* Ends the transaction in progress, if any, by rolling it back (its own error ignored). */
void pg_rollback(struct pg_store *s);
/* Refuses a write on a store opened read-only; 0 when writable. */
int pg_check_writable(struct pg_store *s);
/* A text column as an int64 (0 for NULL). */
int64_t pg_i64(const PGresult *r, int row, int col);
void pg_copy(const PGresult *r, int row, int col, char *dst, size_t n);

/* ---- pg_read.c ---- */

int pg_runs_list(struct store *base, struct store_run **out, size_t *n);
int pg_run_get(struct store *base, const char *ref, struct store_run *out);
int pg_series_list(struct store *base, const char *run_id, struct store_series **out, size_t *n);
int pg_samples_read(struct store *base, int64_t series_id, int64_t from, int64_t to, store_sample_fn fn, void *user);
int pg_rollups_read(struct store *base, int64_t series_id, int64_t res_ns, int64_t **t, double **min, double **max,
                    double **mean, size_t *n);
int pg_events_read(struct store *base, const char *run_id, struct store_event **out, size_t *n);
int pg_params_read(struct store *base, const char *run_id, struct gs_kv **out, size_t *n);
int pg_notes_read(struct store *base, const char *run_id, char ***out, size_t *n);
int pg_findings_read(struct store *base, const char *run_id, struct store_finding **out, size_t *n);
/* Runs matching the clause where (its nargs text parameters $1..$N), newest first, their status
 * settled; *out malloc'd. */
int pg_query_runs_args(struct pg_store *s, const char *where, const char *const *args, int nargs,
                       struct store_run **out, size_t *n);
/* Closes runs still "running" whose agent is gone as crashed (in a writable store). */
void pg_settle_running(struct pg_store *s);

/* ---- pg_meta.c: what a person edits and searches (struct store's version-4 block) ---- */

int pg_run_set_tags(struct store *base, const char *run_id, const char *tags);
int pg_run_rename(struct store *base, const char *run_id, const char *name);
int pg_run_add_note(struct store *base, const char *run_id, const char *text);
int pg_run_delete(struct store *base, const char *run_id);
int pg_runs_find(struct store *base, const struct store_query *q, struct store_run **out, size_t *n);

/* ---- pg_spool.c ---- */

/* Writes b to the run's spool (opened, with the run and every known series, on first use). */
int pg_spool_append(struct pg_store *s, const struct store_run *r, const struct gs_batch *b);
/* Writes everything the spool holds to the server in pieces of at most PG_SPOOL_PIECE_POINTS, one
 * transaction each (a replay that is cut off is simply replayed again: points at or before a
 * series' last stored time and events already stored are skipped), then deletes the spool. 0 when
 * nothing is left to replay; on another failure than a lost connection, replay_error says why. */
int pg_spool_replay(struct pg_store *s, const struct store_run *r);
/* Closes the run in the spool (the server is still unreachable at its end). */
int pg_spool_end(struct pg_store *s, const struct store_run *r);
void pg_spool_done(struct pg_store *s);
/* Replays the spools that agents now gone left in the spool folder (a run that ended, or was
 * killed, while the server was away) and deletes them; those of a live agent are left. Returns how
 * many were replayed. Called by gpuscope run once it reaches the server. */
int pg_spool_recover(struct pg_store *s);

/* ---- pg_run.c ---- */

int pg_run_begin(struct store *base, struct store_run *r);
int pg_run_import(struct store *base, const struct store_run *r);
int pg_run_append(struct store *base, const struct store_run *r, const struct gs_batch *b);
int pg_run_end(struct store *base, const struct store_run *r);

/* ---- pg_write.c ---- */

int pg_findings_write(struct store *base, const char *run_id, const struct store_finding *f, size_t n);
/* Inserts the run's row unless it is there (a replay after an outage at the start). */
int pg_insert_run(struct pg_store *s, const struct store_run *r);
/* Writes a batch in one transaction; all or nothing (the writer state follows). */
int pg_write_batch(struct pg_store *s, const struct store_run *r, const struct gs_batch *b);
void pg_writer_done(struct pg_store *s);
/* Adds a note to run r (in the caller's transaction, or one of its own). Returns 0 or GS_EIO. */
int pg_add_note(struct pg_store *s, const struct store_run *r, const char *text);
/* The run's end on the server: its row (status, end time, notes on what was not kept) in one
 * transaction — *ended 1 once that is in — then its open chunks sealed and its rollups, in another.
 * Returns 0, or the GS_E code of the step that failed (the rollups are then computed from the
 * chunks when read). The spool is not involved: pg_run_end decides what a failure means. */
int pg_write_finish(struct pg_store *s, const struct store_run *r, int *ended);
/* Writes chunks of the job's output of run_id to the server and trims the run to keep_from, in one
 * transaction (chunks already there are left). 0 or a GS_E code (nothing written). */
int pg_log_write(struct pg_store *s, const char *run_id, const struct store_log_chunk *c, size_t n, int64_t keep_from);
/* Replaces the stored rollups of series sid by the buckets of levels[0..n) (one resolution each),
 * packed in blocks (rollup_block_encode) by one COPY. In the caller's transaction. */
int pg_rollups_write(struct pg_store *s, int64_t sid, struct rollup_acc *const *levels, int n);

/* ---- pg_log.c (the job's output) ---- */

/* store->log_append: to the server, or to the run's spool while its samples go there. */
int pg_log_append(struct store *base, const struct store_run *r, const struct store_log_chunk *c, size_t n,
                  int64_t keep_from);
/* store->log_read: the server's, or the spool's while it holds the run. */
int pg_log_read(struct store *base, const char *run_id, int64_t from_seq, store_log_fn fn, void *user);

/* ---- store_pg.c ---- */

/* Connects and checks (creates or migrates, by mode) the schema. */
int pg_connect(struct pg_store *s);

#endif
