/* store/pg_read: the PostgreSQL back end's readers — runs (with the crashed verdict), series,
 * samples (decoded from bytea chunks with the same codec), rollups (stored, or computed from the
 * chunks), events, params, notes and findings. Each list is one query whose whole result libpq
 * returns or fails: a lost connection is an error, never a shorter list. While the server is
 * unreachable and this agent's run is in the spool, the readers read the spool (the run's summary
 * and diagnosis still work). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg_int.h"

#define RUN_COLS                                                                                                       \
  "id, name, grp, status, command, cwd, host, \"user\", tags, start_wall_ns, end_wall_ns, heartbeat_wall_ns,"          \
  " exit_code, agent_pid, boot_id, interval_ns"

static void read_run(const PGresult *res, int i, struct store_run *r, int64_t *heartbeat, char *boot, size_t nboot) {
  memset(r, 0, sizeof *r);
  pg_copy(res, i, 0, r->id, sizeof r->id);
  pg_copy(res, i, 1, r->name, sizeof r->name);
  pg_copy(res, i, 2, r->group, sizeof r->group);
  pg_copy(res, i, 3, r->status, sizeof r->status);
  pg_copy(res, i, 4, r->command, sizeof r->command);
  pg_copy(res, i, 5, r->cwd, sizeof r->cwd);
  pg_copy(res, i, 6, r->host, sizeof r->host);
  pg_copy(res, i, 7, r->user, sizeof r->user);
  pg_copy(res, i, 8, r->tags, sizeof r->tags);
  r->start_wall_ns = pg_i64(res, i, 9);
  r->end_wall_ns = pg_i64(res, i, 10);
  *heartbeat = pg_i64(res, i, 11);
  r->exit_code = PQgetisnull(res, i, 12) ? -1 : (int)pg_i64(res, i, 12);
  r->agent_pid = (int)pg_i64(res, i, 13);
  pg_copy(res, i, 14, boot, nboot);
  r->interval_ns = pg_i64(res, i, 15);
}

/* A "running" run whose agent is gone is crashed (store_settle_crashed: its pid dead on this boot
 * of this host, or silent for STORE_STALE_HEARTBEAT_NS, an agent on another node that died).
 * Recorded only in a store open to write; a read-only open just reports it. */
static void settle_status(struct pg_store *s, struct store_run *r, int64_t heartbeat, const char *run_boot) {
  if (!store_settle_crashed(r, heartbeat, run_boot) || s->base.read_only)
    return;
  char hb[24];
  snprintf(hb, sizeof hb, "%lld", (long long)heartbeat);
  const char *p[] = {hb, r->id};
  PGresult *res =
      pg_query(s, "UPDATE runs SET status = 'crashed', end_wall_ns = $1::bigint WHERE id = $2 AND status = 'running'",
               2, p, "cannot record a crashed run");
  PQclear(res); /* best effort: the verdict is reported either way */
}

int pg_query_runs_args(struct pg_store *s, const char *where, const char *const *args, int nargs,
                       struct store_run **out, size_t *n) {
  size_t len = strlen(where) + sizeof("SELECT " RUN_COLS " FROM runs  ORDER BY start_wall_ns DESC, id DESC");
  char *sql = malloc(len);
  if (!sql)
    return gs_fail(GS_ENOMEM, "out of memory");
  snprintf(sql, len, "SELECT " RUN_COLS " FROM runs %s ORDER BY start_wall_ns DESC, id DESC", where);
  PGresult *res = pg_query(s, sql, nargs, nargs ? args : NULL, "cannot list runs");
  free(sql);
  if (!res)
    return GS_EIO;
  int rows = PQntuples(res);
  struct store_run *v = calloc(rows ? (size_t)rows : 1, sizeof *v);
  if (!v) {
    PQclear(res);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < rows; i++) {
    int64_t hb;
    char boot[64];
    read_run(res, i, &v[i], &hb, boot, sizeof boot);
    settle_status(s, &v[i], hb, boot);
  }
  PQclear(res);
  *out = v;
  *n = (size_t)rows;
  return GS_OK;
}

static int query_runs(struct pg_store *s, const char *where, const char *arg, struct store_run **out, size_t *n) {
  return pg_query_runs_args(s, where, &arg, arg ? 1 : 0, out, n);
}

void pg_settle_running(struct pg_store *s) {
  struct store_run *r = NULL;
  size_t n = 0;
  if (!query_runs(s, "WHERE status = 'running'", NULL, &r, &n))
    free(r);
}

int pg_runs_list(struct store *base, struct store_run **out, size_t *n) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (!sp)
    return query_runs(s, "", NULL, out, n);
  int rc = sp->runs_list(sp, out, n);
  for (size_t i = 0; !rc && i < *n; i++)
    if (!strcmp((*out)[i].id, s->spool_run_id)) /* the spool's id for the run is not the run's */
      snprintf((*out)[i].id, sizeof(*out)[i].id, "%s", s->server_run_id);
  return rc;
}

/* One lookup of a run reference (store_resolve_ref) as SQL. */
static int pg_ref_query(void *ctx, enum store_ref_kind kind, const char *ref, struct store_run **runs, size_t *n) {
  static const char *const where[] = {[STORE_REF_LAST] = "",
                                      [STORE_REF_ID] = "WHERE id = $1",
                                      [STORE_REF_NAME] = "WHERE name = $1",
                                      [STORE_REF_PREFIX] = "WHERE starts_with(id, $1)"};
  return query_runs(ctx, where[kind], kind == STORE_REF_LAST ? NULL : ref, runs, n);
}

int pg_run_get(struct store *base, const char *ref, struct store_run *out) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp) {
    int rc = sp->run_get(sp, !strcmp(ref, s->server_run_id) ? s->spool_run_id : ref, out);
    if (!rc && !strcmp(out->id, s->spool_run_id))
      snprintf(out->id, sizeof out->id, "%s", s->server_run_id);
    return rc;
  }
  return store_resolve_ref(ref, pg_ref_query, s, out);
}

/* ---- series and samples ---- */

int pg_series_list(struct store *base, const char *run_id, struct store_series **out, size_t *n) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp)
    return sp->series_list(sp, pg_spool_run_id(s, run_id), out, n);
  const char *p[] = {run_id};
  PGresult *res =
      pg_query(s,
               "SELECT s.id, s.source, s.name, s.labels, s.unit, s.kind, coalesce(sum(c.n), 0),"
               " coalesce(min(c.t0), 0), coalesce(max(c.t1), 0) FROM series s"
               " LEFT JOIN (SELECT series_id, t0, t1, n FROM chunks UNION ALL"
               " SELECT series_id, t0, t1, n FROM open_chunks) c ON c.series_id = s.id WHERE s.run_id = $1"
               " GROUP BY s.id ORDER BY s.source COLLATE \"C\", s.name COLLATE \"C\", s.labels COLLATE \"C\"",
               1, p, "cannot list series");
  if (!res)
    return GS_EIO;
  int rows = PQntuples(res);
  struct store_series *v = calloc(rows ? (size_t)rows : 1, sizeof *v);
  if (!v) {
    PQclear(res);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < rows; i++) {
    v[i].id = pg_i64(res, i, 0);
    pg_copy(res, i, 1, v[i].source, sizeof v[i].source);
    pg_copy(res, i, 2, v[i].name, sizeof v[i].name);
    pg_copy(res, i, 3, v[i].labels, sizeof v[i].labels);
    pg_copy(res, i, 4, v[i].unit, sizeof v[i].unit);
    v[i].kind = (enum gs_kind)pg_i64(res, i, 5);
    v[i].count = pg_i64(res, i, 6);
    v[i].t_first = pg_i64(res, i, 7);
    v[i].t_last = pg_i64(res, i, 8);
  }
  PQclear(res);
  *out = v;
  *n = (size_t)rows;
  return GS_OK;
}

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

int pg_samples_read(struct store *base, int64_t series_id, int64_t from, int64_t to, store_sample_fn fn, void *user) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp)
    return sp->samples_read(sp, series_id, from, to, fn, user);
  if (pg_conn_lost(s))
    return pg_fail(s, NULL, "cannot read samples");
  char a[24], b[24], c[24];
  snprintf(a, sizeof a, "%lld", (long long)series_id);
  snprintf(b, sizeof b, "%lld", (long long)from);
  snprintf(c, sizeof c, "%lld", (long long)to);
  const char *p[] = {a, b, c};
  /* The first full chunk needed is the last to start at or before `from`: one index seek; the open
   * chunk, when the series has one, is the last. */
  PGresult *res = pg_query_bin(s,
                               "SELECT n, data FROM (SELECT t0, n, data FROM chunks WHERE series_id = $1::bigint"
                               " AND t0 <= $3::bigint AND t0 >= coalesce((SELECT t0 FROM chunks WHERE"
                               " series_id = $1::bigint AND t0 <= $2::bigint ORDER BY t0 DESC LIMIT 1), $2::bigint)"
                               " UNION ALL SELECT t0, n, data FROM open_chunks WHERE series_id = $1::bigint"
                               " AND t0 <= $3::bigint AND t1 >= $2::bigint) c ORDER BY t0",
                               3, p, "cannot read samples");
  if (!res)
    return GS_EIO;
  struct range_ctx ctx = {from, to, fn, user};
  int rc = GS_OK;
  for (int i = 0; i < PQntuples(res); i++) {
    int d = chunk_decode((const uint8_t *)PQgetvalue(res, i, 1), (size_t)PQgetlength(res, i, 1), pg_u32(res, i, 0),
                         range_filter, &ctx);
    if (d < 0) {
      rc = gs_fail(d, "store %s: a chunk of series %lld is corrupt", s->name, (long long)series_id);
      break;
    }
    if (d) /* the callback asked to stop: not an error */
      break;
  }
  PQclear(res);
  return rc;
}

/* A version-2 schema's rollups, a row per bucket (a store opened read-only before its migration). */
static int read_rollup_rows(struct pg_store *s, const char *const *p, struct rollup_acc *acc) {
  PGresult *res = pg_query(s,
                           "SELECT t, min, max, mean FROM rollups WHERE series_id = $1::bigint AND res_ns = $2::bigint"
                           " ORDER BY t",
                           2, p, "cannot read rollups");
  if (!res)
    return GS_EIO;
  for (int i = 0; i < PQntuples(res) && !acc->oom; i++)
    rollup_add_bucket(acc, pg_i64(res, i, 0), strtod(PQgetvalue(res, i, 1), NULL), strtod(PQgetvalue(res, i, 2), NULL),
                      strtod(PQgetvalue(res, i, 3), NULL));
  PQclear(res);
  return GS_OK;
}

/* The packed blocks of one resolution, in time order (binary results: the bytea as it is). */
static int read_rollup_blocks(struct pg_store *s, const char *const *p, struct rollup_acc *acc, int64_t series_id) {
  PGresult *res = pg_query_bin(s,
                               "SELECT n, data FROM rollup_blocks WHERE series_id = $1::bigint AND res_ns = $2::bigint"
                               " ORDER BY t0",
                               2, p, "cannot read rollups");
  if (!res)
    return GS_EIO;
  int rc = GS_OK;
  for (int i = 0; i < PQntuples(res) && !rc; i++) {
    rc = rollup_block_decode((const uint8_t *)PQgetvalue(res, i, 1), (size_t)PQgetlength(res, i, 1), pg_u32(res, i, 0),
                             acc);
    if (rc == GS_ECORRUPT)
      rc = gs_fail(rc, "store %s: a rollup block of series %lld is corrupt", s->name, (long long)series_id);
  }
  PQclear(res);
  return rc;
}

int pg_rollups_read(struct store *base, int64_t series_id, int64_t res_ns, int64_t **t, double **mn, double **mx,
                    double **mean, size_t *n) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp)
    return sp->rollups_read(sp, series_id, res_ns, t, mn, mx, mean, n);
  char a[24], b[24];
  snprintf(a, sizeof a, "%lld", (long long)series_id);
  snprintf(b, sizeof b, "%lld", (long long)res_ns);
  const char *p[] = {a, b};
  struct rollup_acc acc = {.res = res_ns};
  int rc = s->rollup_rows ? read_rollup_rows(s, p, &acc) : read_rollup_blocks(s, p, &acc, series_id);
  return rollup_read_finish(base, series_id, &acc, rc, t, mn, mx, mean, n);
}

/* ---- events, params, notes, findings ---- */

/* Runs a per-run list query ($1 = run_id); NULL after the error is set. */
static PGresult *run_list(struct pg_store *s, const char *sql, const char *run_id, const char *what) {
  const char *p[] = {run_id};
  return pg_query(s, sql, 1, p, what);
}

static double f64_or_nan(const PGresult *r, int i, int c) {
  return PQgetisnull(r, i, c) ? NAN : strtod(PQgetvalue(r, i, c), NULL);
}

int pg_events_read(struct store *base, const char *run_id, struct store_event **out, size_t *n) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp)
    return sp->events_read(sp, pg_spool_run_id(s, run_id), out, n);
  PGresult *res = run_list(s, "SELECT t, kind, name, value, labels, text FROM events WHERE run_id = $1 ORDER BY t, seq",
                           run_id, "cannot read events");
  if (!res)
    return GS_EIO;
  int rows = PQntuples(res);
  struct store_event *v = calloc(rows ? (size_t)rows : 1, sizeof *v);
  if (!v) {
    PQclear(res);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < rows; i++) {
    v[i].t = pg_i64(res, i, 0);
    pg_copy(res, i, 1, v[i].kind, sizeof v[i].kind);
    pg_copy(res, i, 2, v[i].name, sizeof v[i].name);
    v[i].value = f64_or_nan(res, i, 3);
    pg_copy(res, i, 4, v[i].labels, sizeof v[i].labels);
    pg_copy(res, i, 5, v[i].text, sizeof v[i].text);
  }
  PQclear(res);
  *out = v;
  *n = (size_t)rows;
  return GS_OK;
}

int pg_params_read(struct store *base, const char *run_id, struct gs_kv **out, size_t *n) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp)
    return sp->params_read(sp, pg_spool_run_id(s, run_id), out, n);
  PGresult *res = run_list(s, "SELECT key, value FROM params WHERE run_id = $1 ORDER BY key COLLATE \"C\"", run_id,
                           "cannot read params");
  if (!res)
    return GS_EIO;
  int rows = PQntuples(res);
  struct gs_kv *v = calloc(rows ? (size_t)rows : 1, sizeof *v);
  int oom = !v;
  for (int i = 0; v && i < rows; i++) {
    v[i].key = strdup(PQgetvalue(res, i, 0));
    v[i].value = strdup(PQgetvalue(res, i, 1));
    oom |= !v[i].key || !v[i].value;
  }
  PQclear(res);
  if (oom) {
    if (v)
      store_kv_free(v, (size_t)rows);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  *out = v;
  *n = (size_t)rows;
  return GS_OK;
}

int pg_notes_read(struct store *base, const char *run_id, char ***out, size_t *n) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp)
    return sp->notes_read(sp, pg_spool_run_id(s, run_id), out, n);
  PGresult *res = run_list(s, "SELECT text FROM notes WHERE run_id = $1 ORDER BY t, seq", run_id, "cannot read notes");
  if (!res)
    return GS_EIO;
  int rows = PQntuples(res);
  char **v = calloc(rows ? (size_t)rows : 1, sizeof *v);
  int oom = !v;
  for (int i = 0; v && i < rows; i++)
    oom |= !(v[i] = strdup(PQgetvalue(res, i, 0)));
  PQclear(res);
  if (oom) {
    if (v)
      store_notes_free(v, (size_t)rows);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  *out = v;
  *n = (size_t)rows;
  return GS_OK;
}

int pg_findings_read(struct store *base, const char *run_id, struct store_finding **out, size_t *n) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp)
    return sp->findings_read(sp, pg_spool_run_id(s, run_id), out, n);
  PGresult *res = run_list(s,
                           "SELECT rule, severity, share, lost_s, speedup, title, evidence, fix FROM findings"
                           " WHERE run_id = $1 ORDER BY rank",
                           run_id, "cannot read findings");
  if (!res)
    return GS_EIO;
  int rows = PQntuples(res);
  struct store_finding *v = calloc(rows ? (size_t)rows : 1, sizeof *v);
  if (!v) {
    PQclear(res);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  for (int i = 0; i < rows; i++) {
    pg_copy(res, i, 0, v[i].rule, sizeof v[i].rule);
    pg_copy(res, i, 1, v[i].severity, sizeof v[i].severity);
    v[i].share = f64_or_nan(res, i, 2);
    v[i].lost_s = f64_or_nan(res, i, 3);
    v[i].speedup = f64_or_nan(res, i, 4);
    pg_copy(res, i, 5, v[i].title, sizeof v[i].title);
    pg_copy(res, i, 6, v[i].evidence, sizeof v[i].evidence);
    pg_copy(res, i, 7, v[i].fix, sizeof v[i].fix);
  }
  PQclear(res);
  *out = v;
  *n = (size_t)rows;
  return GS_OK;
}
