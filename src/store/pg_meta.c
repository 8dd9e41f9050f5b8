/* store/pg_meta: the PostgreSQL back end's edits a person makes after the fact — tags, a new name, a
 * note, removing a run — and the runs search (runs_find, the filter of store_where.c as SQL with
 * bound parameters). Each edit is one transaction; a row count comes from RETURNING, so no libpq
 * function beyond the lazy-load table's is needed.
 *
 * Removal deletes the rows of every table of the schema with a run_id column, and of every table
 * with a series_id column for the run's series (information_schema), so tables a later version adds
 * go with the run. The server's autovacuum gives the room back: there is nothing to compact. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg_int.h"

/* Runs sql with n text parameters in the transaction; *rows (when not NULL) the rows it returned. */
static int run_stmt(struct pg_store *s, const char *sql, const char *const *p, int n, int *rows, const char *what) {
  PGresult *res = pg_query(s, sql, n, p, what);
  if (!res)
    return GS_EIO;
  if (rows)
    *rows = PQntuples(res);
  PQclear(res);
  return GS_OK;
}

static int begin(struct pg_store *s) {
  if (pg_spool_reader(s))
    return gs_fail(GS_EIO, "store %s: the server is unreachable: nothing was changed", s->name);
  int rc = pg_check_writable(s);
  return rc ? rc : pg_exec(s, "BEGIN", "cannot start a transaction");
}

static int end(struct pg_store *s, int rc) {
  if (!rc)
    rc = pg_exec(s, "COMMIT", "cannot commit");
  if (rc)
    pg_rollback(s);
  return rc;
}

static int found(struct pg_store *s, const char *run_id, int rows) {
  return rows ? GS_OK : gs_fail(GS_ENOENT, "no run %s in store %s", run_id, s->name);
}

int pg_run_set_tags(struct store *base, const char *run_id, const char *tags) {
  struct pg_store *s = (struct pg_store *)base;
  int rc = begin(s), rows = 0;
  if (rc)
    return rc;
  const char *a[] = {run_id, tags};
  if ((rc = run_stmt(s, "UPDATE runs SET tags = $2 WHERE id = $1 RETURNING id", a, 2, &rows, "cannot set tags")) ||
      (rc = found(s, run_id, rows)) ||
      (rc = run_stmt(s, "DELETE FROM params WHERE run_id = $1 AND starts_with(key, 'tag.')", a, 1, NULL,
                     "cannot set tags")))
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
    rc = run_stmt(s,
                  "INSERT INTO params(run_id, key, value) VALUES($1, 'tag.' || $2, $3)"
                  " ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value",
                  p, 3, NULL, "cannot set tags");
  }
  free(copy);
  return end(s, rc);
}

int pg_run_rename(struct store *base, const char *run_id, const char *name) {
  struct pg_store *s = (struct pg_store *)base;
  int rc = begin(s), rows = 0;
  if (rc)
    return rc;
  const char *a[] = {run_id, name};
  if (!(rc = run_stmt(s, "UPDATE runs SET name = $2 WHERE id = $1 RETURNING id", a, 2, &rows, "cannot rename the run")))
    rc = found(s, run_id, rows);
  return end(s, rc);
}

int pg_run_add_note(struct store *base, const char *run_id, const char *text) {
  struct pg_store *s = (struct pg_store *)base;
  int rc = begin(s), rows = 0;
  if (rc)
    return rc;
  char now[24];
  snprintf(now, sizeof now, "%lld", (long long)gs_wall_ns());
  const char *a[] = {run_id, now, text};
  if ((rc = run_stmt(s, "SELECT 1 FROM runs WHERE id = $1", a, 1, &rows, "cannot add the note")) ||
      (rc = found(s, run_id, rows)))
    return end(s, rc);
  /* the notes key is (run, text): the same words twice are one note */
  rc = run_stmt(s,
                "INSERT INTO notes(run_id, t, text) SELECT id, $2::bigint - start_wall_ns, $3 FROM runs WHERE id = $1"
                " ON CONFLICT DO NOTHING",
                a, 3, NULL, "cannot add the note");
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

/* Deletes the run's rows from every table with a run_id or series_id column (series_id ones first:
 * they name the run's series). */
static int delete_rows(struct pg_store *s, const char *run_id) {
  PGresult *res = pg_query(s,
                           "SELECT table_name, column_name FROM information_schema.columns"
                           " WHERE table_schema = current_schema() AND column_name IN ('run_id', 'series_id')"
                           " ORDER BY column_name = 'run_id', table_name",
                           0, NULL, "cannot list the tables");
  if (!res)
    return GS_EIO;
  int rc = GS_OK;
  const char *a[] = {run_id};
  for (int i = 0; i < PQntuples(res) && !rc; i++) {
    char q[300], sql[512];
    quote_ident(q, sizeof q, PQgetvalue(res, i, 0));
    snprintf(sql, sizeof sql,
             !strcmp(PQgetvalue(res, i, 1), "series_id")
                 ? "DELETE FROM %s WHERE series_id IN (SELECT id FROM series WHERE run_id = $1)"
                 : "DELETE FROM %s WHERE run_id = $1",
             q);
    rc = run_stmt(s, sql, a, 1, NULL, "cannot remove the run");
  }
  PQclear(res);
  return rc;
}

int pg_run_delete(struct store *base, const char *run_id) {
  struct pg_store *s = (struct pg_store *)base;
  int rc = begin(s);
  if (rc)
    return rc;
  const char *a[] = {run_id};
  PGresult *res =
      pg_query(s, "SELECT coalesce(status, '?') FROM runs WHERE id = $1 FOR UPDATE", 1, a, "cannot read the run");
  if (!res)
    return end(s, GS_EIO);
  int rows = PQntuples(res);
  int running = rows && !strcmp(PQgetvalue(res, 0, 0), "running");
  PQclear(res);
  if ((rc = found(s, run_id, rows)))
    return end(s, rc);
  if (running)
    return end(s, gs_fail(GS_EBUSY, "run %s is running: it can be removed once it has ended", run_id));
  if (!(rc = delete_rows(s, run_id)))
    rc = run_stmt(s, "DELETE FROM runs WHERE id = $1", a, 1, NULL, "cannot remove the run");
  return end(s, rc);
}

int pg_runs_find(struct store *base, const struct store_query *q, struct store_run **out, size_t *n) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp) { /* the server away: the spool's runs (an SQLite store), searched there */
    int rc = sp->runs_find(sp, q, out, n);
    for (size_t i = 0; !rc && i < *n; i++)
      if (!strcmp((*out)[i].id, s->spool_run_id)) /* the spool's id for the run is not the run's */
        snprintf((*out)[i].id, sizeof(*out)[i].id, "%s", s->server_run_id);
    return rc;
  }
  struct store_sql sql;
  int rc = store_query_sql(q, STORE_SQL_PG, &sql);
  if (rc)
    return rc;
  /* Without JIT: a filter of many comparisons (each a subquery) has a plan costly enough on paper
   * for the server to compile it, which took 25 s for 256 of them over four runs (50 ms without). */
  if (!(rc = pg_exec(s, "BEGIN", "cannot search the runs")) &&
      !(rc = pg_exec(s, "SET LOCAL jit = off", "cannot search the runs")) &&
      !(rc = pg_query_runs_args(s, sql.text ? sql.text : "", sql.args, sql.nargs, out, n)) &&
      (rc = pg_exec(s, "COMMIT", "cannot search the runs")))
    free(*out);
  if (rc)
    pg_rollback(s);
  store_sql_done(&sql);
  return rc;
}
