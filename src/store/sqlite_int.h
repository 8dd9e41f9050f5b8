/* store/sqlite_int: the SQLite back end's private parts, shared by its files —
 *   store_sqlite.c  opening (modes, read-only media, whose file it is), schema and migration;
 *   sqlite_write.c  the writer: runs, appends (kept and retried when they fail), run end, rollups;
 *   sqlite_read.c   the readers: runs, series, samples, rollups, events, params, notes, findings;
 *   sqlite_meta.c   what a person edits (tags, name, notes, removal, compaction) and searches;
 *   sqlite_util.c   errors that name their cause, the one row-reading loop, small helpers;
 *   sqlite_log.c    the job's output: its chunks written and read.
 * Calls go one way only: store_sqlite.c -> sqlite_write.c, sqlite_meta.c -> sqlite_read.c ->
 * sqlite_util.c, and store_sqlite.c -> sqlite_log.c -> sqlite_util.c. */
#ifndef GS_STORE_SQLITE_INT_H
#define GS_STORE_SQLITE_INT_H

#include <sqlite3.h>

#include "store/store_backend.h"

struct wseries {          /* writer state of one sink series */
  struct store_wseries x; /* first: what every back end keeps */
  int open_row;           /* rowid layout: the open chunk is in the series' row at rowid -db_id */
  int slot_empty;         /* rowid layout: that row is known not to exist */
};

struct sqlite_store {
  struct store base; /* first: the interface */
  sqlite3 *db;
  enum store_mode mode;
  char path[1024];
  struct store_writer w; /* of struct wseries */
  sqlite3_stmt *ins_chunk;
  sqlite3_stmt *upd_open, *ins_open, *move_open; /* rowid layout only (NULL for a clustered store) */
  sqlite3_stmt *begin, *commit, *heartbeat;      /* the writer's per-flush statements, prepared once */
  /* The run this handle ended elsewhere (sqlite_kept.c): its id ("" when none) and its end as
   * kept there, which this handle's readers report. */
  char kept_run_id[32];
  struct store_run kept_end;
  int keeps_nothing; /* this store is itself a kept file: its end is never kept elsewhere */
};

/* ---- sqlite_util.c ---- */

/* Sets the error message "store PATH: WHAT: CAUSE (sqlite's message)" from the connection's last
 * error, where CAUSE names disk full, a file size limit, a quota, a read-only store or a lock when
 * it is one of those. Returns GS_EBUSY for a lock, GS_EIO otherwise. Call it right after the
 * failing call, before any other on the connection. */
int sq_fail(struct sqlite_store *s, const char *what);
/* Runs sql (no rows); on failure, sq_fail(s, what). */
int sq_exec(struct sqlite_store *s, const char *sql, const char *what);
/* Steps a prepared statement that returns no rows (reset first, so it can be reused). */
int sq_step_done(struct sqlite_store *s, sqlite3_stmt *st, const char *what);
/* Ends the transaction in progress, if any, by rolling it back. Its own error is ignored and never
 * replaces the message of the failure that caused it. */
void sq_rollback(struct sqlite_store *s);
/* Steps st through every row, calling row(st, user) for each (which returns 0 to go on, or a GS_E
 * code to stop with). Returns GS_OK at the end of the rows; a store still locked when the busy
 * timeout runs out is GS_EBUSY and any other failure GS_EIO (sq_fail(s, what)): a short list is
 * never returned as success. Finalizes st. */
int sq_each_row(struct sqlite_store *s, sqlite3_stmt *st, const char *what, int (*row)(sqlite3_stmt *st, void *user),
                void *user);
/* Prepares sql, or sq_fail(s, what). */
int sq_prepare(struct sqlite_store *s, const char *sql, sqlite3_stmt **st, const char *what);
/* Copies a text column into dst (n bytes, "" for NULL). */
void sq_copy_col(sqlite3_stmt *st, int col, char *dst, size_t n);
/* Refuses a write on a store opened read-only (GS_EINVAL with a message); 0 when writable. */
int sq_check_writable(struct sqlite_store *s);

/* A growing array of elem-sized items for the readers. */
struct sq_vec {
  void *v;
  size_t len, cap, elem;
};
/* Appends one zeroed item and returns it, or NULL (with a message) when out of memory. */
void *sq_vec_push(struct sq_vec *x);

/* ---- sqlite_kept.c ---- */

/* The run's end when the file cannot take it (its disk full to the end, say): what failed appends
 * kept (pending) and the end are written to kept-RUNID.db in the first spool folder that takes
 * them (store_spool_dirs), stats.kept_elsewhere says where, and this handle's readers report
 * that end. Returns 0, or an error when no folder took them (nothing changed). */
int sq_keep_elsewhere(struct sqlite_store *s, const struct store_run *r, const char *cause);
/* Writes into the store the kept files of its runs (a run "running" here whose kept-RUNID.db is in
 * a spool folder): their samples, events, params and notes, then their end; deletes each file once
 * it is in. Called by gpuscope run (run_begin), before anything else is written. A file that
 * cannot be written in (the disk still full) is kept for the next run. */
void sq_recover_kept(struct sqlite_store *s);
/* Writes a batch in one transaction; all or nothing (sqlite_write.c). */
int sq_write_batch(void *store, const struct store_run *r, const struct gs_batch *b);
/* Status, exit code, end time and the notes of the run's end, in one transaction (sqlite_write.c). */
int sq_write_end(void *store, const struct store_run *r);

/* ---- sqlite_read.c ---- */

int sq_runs_list(struct store *base, struct store_run **out, size_t *n);
/* Runs matching "WHERE ..." (where, with ?1 bound to arg when not NULL), newest first, with their
 * status settled (see settle_status). */
int sq_query_runs(struct sqlite_store *s, const char *where, const char *arg, struct store_run **out, size_t *n);
/* The same with nargs text parameters (?1 .. ?N) and a where clause of any length. */
int sq_query_runs_args(struct sqlite_store *s, const char *where, const char *const *args, int nargs,
                       struct store_run **out, size_t *n);
int sq_run_get(struct store *base, const char *ref, struct store_run *out);
int sq_series_list(struct store *base, const char *run_id, struct store_series **out, size_t *n);
int sq_samples_read(struct store *base, int64_t series_id, int64_t from, int64_t to, store_sample_fn fn, void *user);
int sq_rollups_read(struct store *base, int64_t series_id, int64_t res_ns, int64_t **t, double **min, double **max,
                    double **mean, size_t *n);
int sq_events_read(struct store *base, const char *run_id, struct store_event **out, size_t *n);
int sq_params_read(struct store *base, const char *run_id, struct gs_kv **out, size_t *n);
int sq_notes_read(struct store *base, const char *run_id, char ***out, size_t *n);
int sq_findings_read(struct store *base, const char *run_id, struct store_finding **out, size_t *n);

/* ---- sqlite_log.c (the job's output) ---- */

int sq_log_append(struct store *base, const struct store_run *r, const struct store_log_chunk *c, size_t n,
                  int64_t keep_from);
int sq_log_read(struct store *base, const char *run_id, int64_t from_seq, store_log_fn fn, void *user);

/* ---- sqlite_meta.c: what a person edits and searches (struct store's version-6 block) ---- */

int sq_run_set_tags(struct store *base, const char *run_id, const char *tags);
int sq_run_rename(struct store *base, const char *run_id, const char *name);
int sq_run_add_note(struct store *base, const char *run_id, const char *text);
int sq_run_delete(struct store *base, const char *run_id);
int sq_compact(struct store *base);
int sq_runs_find(struct store *base, const struct store_query *q, struct store_run **out, size_t *n);

/* ---- sqlite_write.c ---- */

int sq_run_begin(struct store *base, struct store_run *r);
int sq_run_import(struct store *base, const struct store_run *r);
int sq_run_append(struct store *base, const struct store_run *r, const struct gs_batch *b);
int sq_run_end(struct store *base, const struct store_run *r);
int sq_findings_write(struct store *base, const char *run_id, const struct store_finding *f, size_t n);
/* Prepares the writer's statements (after the schema is in place). */
int sq_writer_prepare(struct sqlite_store *s);
/* Frees the writer's state and statements. */
void sq_writer_done(struct sqlite_store *s);

#endif
