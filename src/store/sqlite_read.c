/* store/sqlite_read: the SQLite back end's readers — runs (with the crashed verdict), series,
 * samples (decoded from chunks), rollups (stored, or computed from the chunks), events, params,
 * notes and findings. Every list is read through sq_each_row(), so a locked store or an I/O error
 * is reported as one, never returned as a shorter list. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite_int.h"

/* ---- runs ---- */

#define RUN_COLS                                                                                                       \
  "id, name, grp, status, command, cwd, host, user, tags, start_wall_ns, end_wall_ns, heartbeat_wall_ns,"              \
  " exit_code, agent_pid, boot_id, interval_ns"

/* A REAL column that may be NULL: SQLite stores a NaN as NULL, so NULL reads back as unknown (NAN),
 * never as the 0 sqlite3_column_double gives it. */
static double column_num(sqlite3_stmt *st, int col) {
  return sqlite3_column_type(st, col) == SQLITE_NULL ? NAN : sqlite3_column_double(st, col);
}

static void read_run(sqlite3_stmt *st, struct store_run *r, int64_t *heartbeat, char *boot, size_t nboot) {
  memset(r, 0, sizeof *r);
  sq_copy_col(st, 0, r->id, sizeof r->id);
  sq_copy_col(st, 1, r->name, sizeof r->name);
  sq_copy_col(st, 2, r->group, sizeof r->group);
  sq_copy_col(st, 3, r->status, sizeof r->status);
  sq_copy_col(st, 4, r->command, sizeof r->command);
  sq_copy_col(st, 5, r->cwd, sizeof r->cwd);
  sq_copy_col(st, 6, r->host, sizeof r->host);
  sq_copy_col(st, 7, r->user, sizeof r->user);
  sq_copy_col(st, 8, r->tags, sizeof r->tags);
  r->start_wall_ns = sqlite3_column_int64(st, 9);
  r->end_wall_ns = sqlite3_column_int64(st, 10);
  *heartbeat = sqlite3_column_int64(st, 11);
  r->exit_code = sqlite3_column_type(st, 12) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 12);
  r->agent_pid = sqlite3_column_int(st, 13);
  sq_copy_col(st, 14, boot, nboot);
  r->interval_ns = sqlite3_column_int64(st, 15);
}

/* A "running" run whose agent is gone is crashed (store_settle_crashed). The verdict is recorded
 * only in a store opened to write (run, or report/compare on a writable store); a read-only open
 * just reports it. */
static void settle_status(struct sqlite_store *s, struct store_run *r, int64_t heartbeat, const char *run_boot) {
  if (s->kept_run_id[0] && !strcmp(r->id, s->kept_run_id) && !strcmp(r->status, "running")) {
    snprintf(r->status, sizeof r->status, "%s", s->kept_end.status); /* this handle ended it elsewhere */
    r->exit_code = s->kept_end.exit_code;
    r->end_wall_ns = s->kept_end.end_wall_ns;
    return;
  }
  if (!store_settle_crashed(r, heartbeat, run_boot) || s->base.read_only)
    return;
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(s->db,
                         "UPDATE runs SET status = 'crashed', end_wall_ns = ? WHERE id = ? AND status = 'running'", -1,
                         &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int64(st, 1, heartbeat);
  sqlite3_bind_text(st, 2, r->id, -1, SQLITE_STATIC);
  sqlite3_step(st); /* best effort: the verdict is reported either way */
  sqlite3_finalize(st);
}

struct runs_ctx {
  struct sqlite_store *s;
  struct sq_vec v;
};

static int run_row(sqlite3_stmt *st, void *u) {
  struct runs_ctx *c = u;
  struct store_run *r = sq_vec_push(&c->v);
  if (!r)
    return GS_ENOMEM;
  int64_t hb;
  char boot[64];
  read_run(st, r, &hb, boot, sizeof boot);
  settle_status(c->s, r, hb, boot);
  return GS_OK;
}

int sq_query_runs(struct sqlite_store *s, const char *where, const char *arg, struct store_run **out, size_t *n) {
  return sq_query_runs_args(s, where, &arg, arg ? 1 : 0, out, n);
}

int sq_query_runs_args(struct sqlite_store *s, const char *where, const char *const *args, int nargs,
                       struct store_run **out, size_t *n) {
  size_t len = strlen(where) + sizeof("SELECT " RUN_COLS " FROM runs  ORDER BY start_wall_ns DESC, id DESC");
  char *sql = malloc(len);
  if (!sql)
    return gs_fail(GS_ENOMEM, "out of memory");
  snprintf(sql, len, "SELECT " RUN_COLS " FROM runs %s ORDER BY start_wall_ns DESC, id DESC", where);
  sqlite3_stmt *st;
  int rc = sq_prepare(s, sql, &st, "cannot list runs");
  free(sql);
  if (rc)
    return rc;
  for (int i = 0; i < nargs; i++)
    sqlite3_bind_text(st, i + 1, args[i], -1, SQLITE_TRANSIENT);
  struct runs_ctx c = {s, {.elem = sizeof(struct store_run)}};
  if ((rc = sq_each_row(s, st, "cannot list runs", run_row, &c))) {
    free(c.v.v);
    return rc;
  }
  *out = c.v.v;
  *n = c.v.len;
  return GS_OK;
}

int sq_runs_list(struct store *base, struct store_run **out, size_t *n) {
  return sq_query_runs((struct sqlite_store *)base, "", NULL, out, n);
}

/* One lookup of a run reference (store_resolve_ref) as SQL. */
static int sq_ref_query(void *ctx, enum store_ref_kind kind, const char *ref, struct store_run **runs, size_t *n) {
  static const char *const where[] = {[STORE_REF_LAST] = "",
                                      [STORE_REF_ID] = "WHERE id = ?1",
                                      [STORE_REF_NAME] = "WHERE name = ?1",
                                      [STORE_REF_PREFIX] = "WHERE substr(id, 1, length(?1)) = ?1"};
  return sq_query_runs(ctx, where[kind], kind == STORE_REF_LAST ? NULL : ref, runs, n);
}

int sq_run_get(struct store *base, const char *ref, struct store_run *out) {
  return store_resolve_ref(ref, sq_ref_query, (struct sqlite_store *)base, out);
}

/* ---- series and samples ---- */

static int series_row(sqlite3_stmt *st, void *u) {
  struct store_series *x = sq_vec_push(u);
  if (!x)
    return GS_ENOMEM;
  x->id = sqlite3_column_int64(st, 0);
  sq_copy_col(st, 1, x->source, sizeof x->source);
  sq_copy_col(st, 2, x->name, sizeof x->name);
  sq_copy_col(st, 3, x->labels, sizeof x->labels);
  sq_copy_col(st, 4, x->unit, sizeof x->unit);
  x->kind = (enum gs_kind)sqlite3_column_int(st, 5);
  x->count = sqlite3_column_int64(st, 6);
  x->t_first = sqlite3_column_int64(st, 7);
  x->t_last = sqlite3_column_int64(st, 8);
  return GS_OK;
}

/* Runs a per-run list query (?1 = run_id) through row into *out / *n; free_items (or free) cleans a
 * partial list on failure. */
static int read_list(struct sqlite_store *s, const char *sql, const char *run_id, const char *what, size_t elem,
                     int (*row)(sqlite3_stmt *, void *), void (*free_items)(void *, size_t), void **out, size_t *n) {
  sqlite3_stmt *st;
  int rc = sq_prepare(s, sql, &st, what);
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, run_id, -1, SQLITE_TRANSIENT);
  struct sq_vec v = {.elem = elem};
  if ((rc = sq_each_row(s, st, what, row, &v))) {
    if (free_items)
      free_items(v.v, v.len);
    else
      free(v.v);
    return rc;
  }
  *out = v.v;
  *n = v.len;
  return GS_OK;
}

int sq_series_list(struct store *base, const char *run_id, struct store_series **out, size_t *n) {
  return read_list((struct sqlite_store *)base,
                   "SELECT s.id, s.source, s.name, s.labels, s.unit, s.kind, coalesce(sum(c.n), 0),"
                   " coalesce(min(c.t0), 0), coalesce(max(c.t1), 0) FROM series s"
                   " LEFT JOIN chunks c ON c.series_id = s.id WHERE s.run_id = ?1"
                   " GROUP BY s.id ORDER BY s.source, s.name, s.labels",
                   run_id, "cannot list series", sizeof **out, series_row, NULL, (void **)out, n);
}

struct range_ctx {
  struct sqlite_store *s;
  int64_t series_id, from, to;
  store_sample_fn fn;
  void *user;
  int stopped;
};

static int range_filter(void *u, int64_t t, double v) {
  struct range_ctx *c = u;
  if (t < c->from || t > c->to)
    return 0;
  return c->fn(c->user, t, v);
}

static int chunk_row(sqlite3_stmt *st, void *u) {
  struct range_ctx *c = u;
  int rc = chunk_decode(sqlite3_column_blob(st, 1), (size_t)sqlite3_column_bytes(st, 1),
                        (uint32_t)sqlite3_column_int64(st, 0), range_filter, c);
  if (rc < 0)
    return gs_fail(rc, "store %s: a chunk of series %lld is corrupt", c->s->path, (long long)c->series_id);
  if (rc)
    c->stopped = 1; /* the callback asked to stop: not an error */
  return rc;
}

int sq_samples_read(struct store *base, int64_t series_id, int64_t from, int64_t to, store_sample_fn fn, void *user) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st;
  /* A series' chunks do not overlap, so the first one needed is the last to start at or before
   * `from`: one index seek, where "t1 >= from" alone would visit every earlier chunk's row. */
  int rc = sq_prepare(s,
                      "SELECT n, data FROM chunks WHERE series_id = ?1 AND t0 <= ?3 AND t0 >= coalesce("
                      "(SELECT t0 FROM chunks WHERE series_id = ?1 AND t0 <= ?2 ORDER BY t0 DESC LIMIT 1), ?2)"
                      " ORDER BY t0",
                      &st, "cannot read samples");
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, series_id);
  sqlite3_bind_int64(st, 2, from);
  sqlite3_bind_int64(st, 3, to);
  struct range_ctx c = {s, series_id, from, to, fn, user, 0};
  rc = sq_each_row(s, st, "cannot read samples", chunk_row, &c);
  return c.stopped && rc > 0 ? GS_OK : rc;
}

/* ---- rollups ---- */

static int rollup_row(sqlite3_stmt *st, void *u) {
  struct rollup_acc *a = u;
  rollup_add_bucket(a, sqlite3_column_int64(st, 0), sqlite3_column_double(st, 1), sqlite3_column_double(st, 2),
                    sqlite3_column_double(st, 3));
  return a->oom ? gs_fail(GS_ENOMEM, "out of memory") : GS_OK;
}

int sq_rollups_read(struct store *base, int64_t series_id, int64_t res_ns, int64_t **t, double **mn, double **mx,
                    double **mean, size_t *n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  struct rollup_acc a = {.res = res_ns};
  sqlite3_stmt *st;
  int rc = sq_prepare(s, "SELECT t, min, max, mean FROM rollups WHERE series_id = ? AND res_ns = ? ORDER BY t", &st,
                      "cannot read rollups");
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, series_id);
  sqlite3_bind_int64(st, 2, res_ns);
  rc = sq_each_row(s, st, "cannot read rollups", rollup_row, &a);
  return rollup_read_finish(base, series_id, &a, rc, t, mn, mx, mean, n);
}

/* ---- events, params, notes, findings ---- */

static int event_row(sqlite3_stmt *st, void *u) {
  struct store_event *e = sq_vec_push(u);
  if (!e)
    return GS_ENOMEM;
  e->t = sqlite3_column_int64(st, 0);
  sq_copy_col(st, 1, e->kind, sizeof e->kind);
  sq_copy_col(st, 2, e->name, sizeof e->name);
  e->value = column_num(st, 3);
  sq_copy_col(st, 4, e->labels, sizeof e->labels);
  sq_copy_col(st, 5, e->text, sizeof e->text);
  return GS_OK;
}

int sq_events_read(struct store *base, const char *run_id, struct store_event **out, size_t *n) {
  return read_list((struct sqlite_store *)base,
                   "SELECT t, kind, name, value, labels, text FROM events WHERE run_id = ?1 ORDER BY t, rowid", run_id,
                   "cannot read events", sizeof **out, event_row, NULL, (void **)out, n);
}

struct event_page {
  struct sq_vec v; /* first: event_row's vector */
  struct store_event_cursor *cur;
};

static int event_page_row(sqlite3_stmt *st, void *u) {
  struct event_page *p = u;
  *p->cur = (struct store_event_cursor){sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 6)};
  return event_row(st, &p->v);
}

int store_sqlite_events_page(struct store *base, const char *run_id, struct store_event_cursor *cur, size_t max,
                             struct store_event **out, size_t *n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st;
  *out = NULL;
  *n = 0;
  int rc = sq_prepare(s,
                      "SELECT t, kind, name, value, labels, text, rowid FROM events WHERE run_id = ?1 AND"
                      " (t, rowid) > (?2, ?3) ORDER BY t, rowid LIMIT ?4",
                      &st, "cannot read events");
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, run_id, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 2, cur->t);
  sqlite3_bind_int64(st, 3, cur->key);
  sqlite3_bind_int64(st, 4, max < INT64_MAX ? (int64_t)max : INT64_MAX);
  struct store_event_cursor at = *cur;
  struct event_page p = {.v = {.elem = sizeof **out}, .cur = &at};
  if ((rc = sq_each_row(s, st, "cannot read events", event_page_row, &p))) {
    free(p.v.v);
    return rc;
  }
  *cur = at;
  *out = p.v.v;
  *n = p.v.len;
  return GS_OK;
}

static char *text_dup(sqlite3_stmt *st, int col) {
  const char *t = (const char *)sqlite3_column_text(st, col);
  return strdup(t ? t : "");
}

static int param_row(sqlite3_stmt *st, void *u) {
  struct gs_kv *kv = sq_vec_push(u);
  if (!kv)
    return GS_ENOMEM;
  kv->key = text_dup(st, 0);
  kv->value = text_dup(st, 1);
  return kv->key && kv->value ? GS_OK : gs_fail(GS_ENOMEM, "out of memory");
}

static void free_params(void *v, size_t n) {
  store_kv_free(v, n);
}

int sq_params_read(struct store *base, const char *run_id, struct gs_kv **out, size_t *n) {
  return read_list((struct sqlite_store *)base, "SELECT key, value FROM params WHERE run_id = ?1 ORDER BY key", run_id,
                   "cannot read params", sizeof **out, param_row, free_params, (void **)out, n);
}

static int note_row(sqlite3_stmt *st, void *u) {
  char **note = sq_vec_push(u);
  if (!note)
    return GS_ENOMEM;
  *note = text_dup(st, 0);
  return *note ? GS_OK : gs_fail(GS_ENOMEM, "out of memory");
}

static void free_notes(void *v, size_t n) {
  store_notes_free(v, n);
}

int sq_notes_read(struct store *base, const char *run_id, char ***out, size_t *n) {
  return read_list((struct sqlite_store *)base, "SELECT text FROM notes WHERE run_id = ?1 ORDER BY t, rowid", run_id,
                   "cannot read notes", sizeof **out, note_row, free_notes, (void **)out, n);
}

static int finding_row(sqlite3_stmt *st, void *u) {
  struct store_finding *f = sq_vec_push(u);
  if (!f)
    return GS_ENOMEM;
  sq_copy_col(st, 0, f->rule, sizeof f->rule);
  sq_copy_col(st, 1, f->severity, sizeof f->severity);
  f->share = column_num(st, 2);
  f->lost_s = column_num(st, 3);
  f->speedup = column_num(st, 4);
  sq_copy_col(st, 5, f->title, sizeof f->title);
  sq_copy_col(st, 6, f->evidence, sizeof f->evidence);
  sq_copy_col(st, 7, f->fix, sizeof f->fix);
  return GS_OK;
}

int sq_findings_read(struct store *base, const char *run_id, struct store_finding **out, size_t *n) {
  return read_list((struct sqlite_store *)base,
                   "SELECT rule, severity, share, lost_s, speedup, title, evidence, fix FROM findings"
                   " WHERE run_id = ?1 ORDER BY rank",
                   run_id, "cannot read findings", sizeof **out, finding_row, NULL, (void **)out, n);
}
