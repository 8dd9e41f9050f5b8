/* store/sqlite_log: the job's output in the SQLite back end — the chunks the agent read from the
 * job's stdout and stderr (agent/joblog.c), one row each in the logs table (schema 3), written by
 * the writer thread after each flush's samples and read back in order by `gpuscope log`, the
 * report and serve. The bound (--log-max) is the agent's: each append says from which seq on the
 * run's chunks are kept, and the older ones go in the same transaction. */
#include <stdio.h>
#include <string.h>

#include "store/sqlite_int.h"

/* Inserts the chunks and trims the run to keep_from, inside the caller's transaction. */
static int log_write(struct sqlite_store *s, const struct store_run *r, const struct store_log_chunk *c, size_t n,
                     int64_t keep_from) {
  sqlite3_stmt *ins = NULL, *del = NULL;
  int rc = sq_prepare(s, "INSERT OR IGNORE INTO logs(run_id, seq, stream, t, data) VALUES(?1, ?2, ?3, ?4, ?5)", &ins,
                      "cannot keep the job's output");
  if (!rc)
    rc = sq_prepare(s, "DELETE FROM logs WHERE run_id = ?1 AND seq < ?2", &del, "cannot keep the job's output");
  for (size_t i = 0; !rc && i < n; i++) {
    sqlite3_reset(ins);
    sqlite3_bind_text(ins, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(ins, 2, c[i].seq);
    sqlite3_bind_text(ins, 3, c[i].stream, -1, SQLITE_STATIC);
    sqlite3_bind_int64(ins, 4, c[i].t);
    sqlite3_bind_blob(ins, 5, c[i].len ? (const void *)c[i].data : "", (int)c[i].len, SQLITE_STATIC);
    if (sqlite3_step(ins) != SQLITE_DONE)
      rc = sq_fail(s, "cannot keep the job's output");
  }
  if (!rc && keep_from > 0) {
    sqlite3_bind_text(del, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(del, 2, keep_from);
    if (sqlite3_step(del) != SQLITE_DONE)
      rc = sq_fail(s, "cannot trim the job's output");
  }
  sqlite3_finalize(ins);
  sqlite3_finalize(del);
  return rc;
}

int sq_log_append(struct store *base, const struct store_run *r, const struct store_log_chunk *c, size_t n,
                  int64_t keep_from) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = sq_check_writable(s);
  if (rc || (!n && keep_from <= 0))
    return rc;
  if ((rc = sq_exec(s, "BEGIN IMMEDIATE", "cannot keep the job's output")))
    return rc;
  if ((rc = log_write(s, r, c, n, keep_from)) || (rc = sq_exec(s, "COMMIT", "cannot keep the job's output")))
    sq_rollback(s);
  return rc;
}

struct log_row_ctx {
  store_log_fn fn;
  void *user;
  int stopped;
};

static int log_row(sqlite3_stmt *st, void *user) {
  struct log_row_ctx *x = user;
  struct store_log_chunk c = {
      .seq = sqlite3_column_int64(st, 0), .t = sqlite3_column_int64(st, 2), .data = sqlite3_column_blob(st, 3)};
  c.len = (size_t)sqlite3_column_bytes(st, 3);
  sq_copy_col(st, 1, c.stream, sizeof c.stream);
  if (x->fn(x->user, &c))
    x->stopped = 1;
  return x->stopped; /* non-zero stops the loop, and is not an error: see below */
}

int sq_log_read(struct store *base, const char *run_id, int64_t from_seq, store_log_fn fn, void *user) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st;
  int rc = sq_prepare(s, "SELECT seq, stream, t, data FROM logs WHERE run_id = ?1 AND seq >= ?2 ORDER BY seq", &st,
                      "cannot read the job's output");
  if (rc && s->base.schema_found > 0 && s->base.schema_found < 3)
    return GS_OK; /* a store read as it is, older than the job's output: no logs table */
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, run_id, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 2, from_seq);
  struct log_row_ctx x = {.fn = fn, .user = user};
  rc = sq_each_row(s, st, "cannot read the job's output", log_row, &x);
  return x.stopped ? GS_OK : rc;
}
