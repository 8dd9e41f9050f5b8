/* store/sqlite_meta: the SQLite back end's edits a person makes after the fact — tags, a new name,
 * a note, removing a run, giving its room back — and the runs search (runs_find, the filter of
 * store_where.c as SQL). Each edit is one IMMEDIATE transaction, so it waits for a writing agent
 * (the busy timeout) instead of failing half-way.
 *
 * Removal deletes the rows of every table that has a run_id column, and of every table that has a
 * series_id column for the run's series, as the schema says at that moment (sqlite_master): tables a
 * later version adds (the job's log) go with the run without this file knowing them. The room is
 * given back by VACUUM, not auto_vacuum = INCREMENTAL: stores made so far have auto_vacuum off,
 * which only a VACUUM can change, and an incremental vacuum gives back free pages without packing
 * the half-empty ones a removed run leaves between the others' chunks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite_int.h"

/* Binds text parameters 1..n and runs st to its end (no rows wanted); finalizes it. */
static int run_stmt(struct sqlite_store *s, const char *sql, const char *const *args, int n, const char *what) {
  sqlite3_stmt *st;
  int rc = sq_prepare(s, sql, &st, what);
  if (rc)
    return rc;
  for (int i = 0; i < n; i++)
    sqlite3_bind_text(st, i + 1, args[i], -1, SQLITE_TRANSIENT);
  rc = sqlite3_step(st) == SQLITE_DONE ? GS_OK : sq_fail(s, what);
  sqlite3_finalize(st);
  return rc;
}

static int begin(struct sqlite_store *s) {
  int rc = sq_check_writable(s);
  return rc ? rc : sq_exec(s, "BEGIN IMMEDIATE", "cannot start a transaction");
}

static int end(struct sqlite_store *s, int rc) {
  if (!rc)
    rc = sq_exec(s, "COMMIT", "cannot commit");
  if (rc)
    sq_rollback(s);
  return rc;
}

/* GS_ENOENT unless the last statement changed a row. */
static int changed(struct sqlite_store *s, const char *run_id) {
  return sqlite3_changes(s->db) ? GS_OK : gs_fail(GS_ENOENT, "no run %s in store %s", run_id, s->path);
}

int sq_run_set_tags(struct store *base, const char *run_id, const char *tags) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = begin(s);
  if (rc)
    return rc;
  const char *a[] = {run_id, tags, NULL};
  if ((rc = run_stmt(s, "UPDATE runs SET tags = ?2 WHERE id = ?1", a, 2, "cannot set tags")) ||
      (rc = changed(s, run_id)) ||
      (rc =
           run_stmt(s, "DELETE FROM params WHERE run_id = ?1 AND substr(key, 1, 4) = 'tag.'", a, 1, "cannot set tags")))
    return end(s, rc);
  char *copy = strdup(tags), *save = NULL;
  if (!copy)
    return end(s, gs_fail(GS_ENOMEM, "out of memory"));
  for (char *kv = strtok_r(copy, ",", &save); kv && !rc; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq)
      continue;
    *eq = 0;
    const char *p[] = {run_id, kv, eq + 1};
    rc = run_stmt(s, "INSERT OR REPLACE INTO params VALUES(?1, 'tag.' || ?2, ?3)", p, 3, "cannot set tags");
  }
  free(copy);
  return end(s, rc);
}

int sq_run_rename(struct store *base, const char *run_id, const char *name) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = begin(s);
  if (rc)
    return rc;
  const char *a[] = {run_id, name};
  if (!(rc = run_stmt(s, "UPDATE runs SET name = ?2 WHERE id = ?1", a, 2, "cannot rename the run")))
    rc = changed(s, run_id);
  return end(s, rc);
}

int sq_run_add_note(struct store *base, const char *run_id, const char *text) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = begin(s);
  if (rc)
    return rc;
  char now[24];
  snprintf(now, sizeof now, "%lld", (long long)gs_wall_ns());
  const char *a[] = {run_id, now, text};
  if (!(rc = run_stmt(s, "INSERT INTO notes SELECT id, CAST(?2 AS INTEGER) - start_wall_ns, ?3 FROM runs WHERE id = ?1",
                      a, 3, "cannot add the note")))
    rc = changed(s, run_id);
  return end(s, rc);
}

/* "T" for a table name (quotes doubled). */
static void quote_ident(char *out, size_t n, const char *name) {
  size_t o = 0;
  out[o++] = '"';
  for (const char *p = name; *p && o + 3 < n; p++) {
    if (*p == '"')
      out[o++] = '"';
    out[o++] = *p;
  }
  out[o++] = '"';
  out[o] = 0;
}

struct tables {
  char name[32][130];
  int by_series[32];
  int n;
};

static int table_row(sqlite3_stmt *st, void *u) {
  struct tables *t = u;
  if (t->n >= 32)
    return gs_fail(GS_EINVAL, "the store has more than 32 tables of runs");
  sq_copy_col(st, 0, t->name[t->n], sizeof t->name[t->n]);
  t->by_series[t->n] = !strcmp((const char *)sqlite3_column_text(st, 1), "series_id");
  t->n++;
  return GS_OK;
}

/* Every table with a run_id or series_id column: series_id ones first (they name the run's series,
 * which go with the run_id ones). */
static int run_tables(struct sqlite_store *s, struct tables *t) {
  sqlite3_stmt *st;
  t->n = 0;
  int rc = sq_prepare(s,
                      "SELECT m.name, c.name FROM sqlite_master m JOIN pragma_table_info(m.name) c"
                      " WHERE m.type = 'table' AND c.name IN ('run_id', 'series_id')"
                      " ORDER BY c.name = 'run_id', m.name",
                      &st, "cannot list the tables");
  return rc ? rc : sq_each_row(s, st, "cannot list the tables", table_row, t);
}

static int status_row(sqlite3_stmt *st, void *u) {
  sq_copy_col(st, 0, u, 16);
  return GS_OK;
}

int sq_run_delete(struct store *base, const char *run_id) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = begin(s);
  if (rc)
    return rc;
  char status[16] = "";
  sqlite3_stmt *st;
  if ((rc = sq_prepare(s, "SELECT coalesce(status, '?') FROM runs WHERE id = ?1", &st, "cannot read the run")))
    return end(s, rc);
  sqlite3_bind_text(st, 1, run_id, -1, SQLITE_TRANSIENT);
  if ((rc = sq_each_row(s, st, "cannot read the run", status_row, status)))
    return end(s, rc);
  if (!status[0])
    return end(s, gs_fail(GS_ENOENT, "no run %s in store %s", run_id, s->path));
  if (!strcmp(status, "running"))
    return end(s, gs_fail(GS_EBUSY, "run %s is running: it can be removed once it has ended", run_id));
  struct tables *t = malloc(sizeof *t);
  if (!t)
    return end(s, gs_fail(GS_ENOMEM, "out of memory"));
  rc = run_tables(s, t);
  const char *a[] = {run_id};
  for (int i = 0; i < t->n && !rc; i++) {
    char q[300], sql[512];
    quote_ident(q, sizeof q, t->name[i]);
    snprintf(sql, sizeof sql,
             t->by_series[i] ? "DELETE FROM %s WHERE series_id IN (SELECT id FROM series WHERE run_id = ?1)"
                             : "DELETE FROM %s WHERE run_id = ?1",
             q);
    rc = run_stmt(s, sql, a, 1, "cannot remove the run");
  }
  free(t);
  if (!rc)
    rc = run_stmt(s, "DELETE FROM runs WHERE id = ?1", a, 1, "cannot remove the run");
  return end(s, rc);
}

int sq_compact(struct store *base) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = sq_check_writable(s);
  if (rc || (rc = sq_exec(s, "VACUUM", "cannot compact the store")))
    return rc;
  /* the vacuumed pages are in the WAL: copy them back and cut the file (readers still on older
   * pages make it wait for a later checkpoint, which cuts it then) */
  return sq_exec(s, "PRAGMA wal_checkpoint(TRUNCATE)", "cannot compact the store");
}

/* gs_num(text): the text as a number when the filter language reads it as one, else NULL. */
static void gs_num_fn(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  const unsigned char *t = sqlite3_value_text(argv[0]);
  double v;
  if (t && store_where_number((const char *)t, &v))
    sqlite3_result_double(ctx, v);
  else
    sqlite3_result_null(ctx);
}

int sq_runs_find(struct store *base, const struct store_query *q, struct store_run **out, size_t *n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  if (sqlite3_create_function(s->db, "gs_num", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL, gs_num_fn, NULL, NULL) !=
      SQLITE_OK)
    return sq_fail(s, "cannot search the runs");
  struct store_sql sql;
  int rc = store_query_sql(q, STORE_SQL_SQLITE, &sql);
  if (rc)
    return rc;
  rc = sq_query_runs_args(s, sql.text ? sql.text : "", sql.args, sql.nargs, out, n);
  store_sql_done(&sql);
  return rc;
}
