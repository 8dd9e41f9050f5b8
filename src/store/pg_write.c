/* store/pg_write: the PostgreSQL back end's writer — a run's row, its appends and its end, the
 * rollups written at the end, and findings.
 *
 * An append is one transaction: new series, the open chunk of every series that moved (one upsert
 * each, a prepared statement with binary parameters, keyed by (series_id, t0): the same row is
 * rewritten at every flush until the chunk is full), events, params and the heartbeat. Each run
 * writes only its own rows, so agents writing one database at once take row locks only.
 *
 * A failed append is rolled back whole and the writer's memory made to match the database again,
 * as in the SQLite back end. What happens to the batch depends on why it failed: when the server
 * is unreachable (the connection is lost) it goes to the spool (pg_spool.c); otherwise it is kept
 * in memory (pending.c) and written with the next append. */
#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg_int.h"

static void put_be64(char *p, int64_t v) {
  uint64_t u = (uint64_t)v;
  for (int i = 7; i >= 0; i--, u >>= 8)
    p[i] = (char)(u & 0xff);
}

static void put_be32(char *p, int32_t v) {
  uint32_t u = htonl((uint32_t)v);
  memcpy(p, &u, 4);
}

int pg_insert_run(struct pg_store *s, const struct store_run *r) {
  char boot[64], start[24], iv[24], pid[16];
  store_boot_id(boot, sizeof boot);
  snprintf(start, sizeof start, "%lld", (long long)r->start_wall_ns);
  snprintf(iv, sizeof iv, "%lld", (long long)r->interval_ns);
  snprintf(pid, sizeof pid, "%d", r->agent_pid);
  const char *p[] = {r->id,   r->name, r->group, r->command, r->cwd, r->host, r->user,
                     r->tags, start,   start,    pid,        boot,   iv};
  PGresult *res = pg_query(s,
                           "INSERT INTO runs(id, name, grp, command, cwd, host, \"user\", tags, start_wall_ns,"
                           " heartbeat_wall_ns, status, exit_code, agent_pid, boot_id, interval_ns)"
                           " VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9::bigint, $10::bigint, 'running', NULL,"
                           " $11::integer, $12, $13::bigint) ON CONFLICT (id) DO NOTHING",
                           13, p, "cannot add run");
  if (!res)
    return GS_EIO;
  PQclear(res);
  s->run_in_pg = 1;
  return GS_OK;
}

/* ---- chunks ---- */

/* Queues the write of the series' chunk on the pipeline of the append in progress (libpq copies the
 * parameters: the encoder may move on at once): the open chunk into its series' row of
 * open_chunks, or, seal, the full chunk into chunks. */
static int write_chunk(struct pg_store *s, struct store_wseries *w, int *queued, int seal) {
  char sid[8], t0[8], t1[8], n[4];
  put_be64(sid, w->db_id);
  put_be64(t0, w->enc.t0);
  put_be64(t1, w->enc.t_prev);
  put_be32(n, (int32_t)w->enc.n);
  const char *vals[] = {sid, t0, t1, n, (const char *)w->enc.buf};
  int lens[] = {8, 8, 8, 4, (int)chunk_enc_bytes(&w->enc)};
  int fmts[] = {1, 1, 1, 1, 1};
  if (!PQsendQueryPrepared(s->conn, seal ? "gs_seal" : "gs_chunk", 5, vals, lens, fmts, 0))
    return pg_fail(s, NULL, "cannot write samples");
  (*queued)++;
  w->dirty = 0;
  return GS_OK;
}

/* Reads the results of the queued upserts and the pipeline's sync, and leaves pipeline mode:
 * one round trip for every chunk of the flush. Returns the first failure. */
static int pipeline_finish(struct pg_store *s, int queued, int rc) {
  if (pg_conn_lost(s))
    return rc ? rc : pg_fail(s, NULL, "cannot write samples");
  int synced = PQpipelineSync(s->conn) == 1;
  if (!synced && !rc)
    rc = pg_fail(s, NULL, "cannot write samples");
  /* each query's result is followed by a NULL; two NULLs in a row: nothing more is coming */
  int64_t deadline = pg_deadline(s);
  for (int got = 0, nulls = 0; synced && got <= queued && nulls < 2 && !pg_conn_lost(s);) {
    PGresult *r = pg_result(s, deadline);
    if (!r) {
      nulls++;
      continue;
    }
    nulls = 0;
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_PIPELINE_SYNC) {
      PQclear(r);
      break;
    }
    if (st != PGRES_COMMAND_OK && st != PGRES_PIPELINE_ABORTED && !rc)
      rc = pg_fail(s, r, "cannot write samples");
    got++;
    PQclear(r);
  }
  if (pg_conn_lost(s))
    return rc ? rc : pg_fail(s, NULL, "cannot write samples");
  if (PQexitPipelineMode(s->conn) != 1 && !rc)
    rc = pg_fail(s, NULL, "cannot write samples");
  return rc;
}

static int enc_put(void *u, int64_t t, double v) {
  return chunk_enc_put(u, t, v) ? -1 : 0;
}

/* Makes a series' writer state match the database: its open chunk is its row in open_chunks; without
 * one, its last full chunk is read for its times (points at or before its end are stored already). */
static int reload_open_chunk(struct pg_store *s, struct store_wseries *w) {
  store_wseries_clear(&s->w, w);
  char sid[24];
  snprintf(sid, sizeof sid, "%lld", (long long)w->db_id);
  const char *p[] = {sid};
  PGresult *r = pg_query_bin(s,
                             "SELECT n, data, 0 FROM open_chunks WHERE series_id = $1::bigint UNION ALL"
                             " (SELECT n, data, 1 FROM chunks WHERE series_id = $1::bigint ORDER BY t0 DESC LIMIT 1)",
                             1, p, "cannot read the open chunks");
  if (!r)
    return GS_EIO;
  if (PQntuples(r) >= 1) {
    uint32_t sealed = pg_u32(r, 0, 2);
    if (chunk_decode((const uint8_t *)PQgetvalue(r, 0, 1), (size_t)PQgetlength(r, 0, 1), pg_u32(r, 0, 0), enc_put,
                     &w->enc)) /* a corrupt last chunk stays as it is; new points start their own */
      store_wseries_clear(&s->w, w);
    else
      w->sealed = sealed == 1;
  }
  PQclear(r);
  return GS_OK;
}

static int add_series(struct pg_store *s, const struct store_run *r, const struct gs_series_def *d) {
  if (d->id < 0)
    return GS_OK;
  int rc = store_writer_ensure(&s->w, d->id);
  if (rc)
    return rc;
  char kind[8];
  snprintf(kind, sizeof kind, "%d", (int)d->kind);
  const char *p[] = {r->id, d->source, d->name, d->labels ? d->labels : "", d->unit, kind};
  PGresult *res = pg_run_prepared(s, "gs_series", 6, p, NULL, NULL);
  if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
    rc = pg_fail(s, res, "cannot add series");
    PQclear(res);
    return rc;
  }
  struct store_wseries *w = store_writer_at(&s->w, (size_t)d->id);
  int64_t id = pg_i64(res, 0, 0);
  PQclear(res);
  if (w->db_id < 0)
    w->added = 1;
  if (w->db_id != id) { /* new to this writer (or replayed from a spool): its last chunk is the open one */
    w->db_id = id;
    return reload_open_chunk(s, w);
  }
  return GS_OK;
}

/* An append in progress: the chunk writes go on its pipeline. */
struct append_ctx {
  struct pg_store *s;
  int *queued; /* the statements queued */
};

static int seal_cb(void *u, struct store_wseries *w) {
  struct append_ctx *c = u;
  return write_chunk(c->s, w, c->queued, 1); /* into chunks, once (the series' open row is replaced next) */
}

static int write_cb(void *u, struct store_wseries *w) {
  struct append_ctx *c = u;
  return write_chunk(c->s, w, c->queued, 0);
}

/* Runs prepared statement name (no rows wanted) with n text parameters; 0, or pg_fail(what). */
static int exec_prepared(struct pg_store *s, const char *name, int n, const char *const *p, const char *what) {
  PGresult *res = pg_run_prepared(s, name, n, p, NULL, NULL);
  int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? GS_OK : pg_fail(s, res, what);
  PQclear(res);
  return rc;
}

static int write_events(struct pg_store *s, const struct store_run *r, const struct gs_batch *b) {
  for (size_t i = 0; i < b->n_events; i++) {
    const struct gs_event *e = &b->events[i];
    char t[24], v[40];
    snprintf(t, sizeof t, "%lld", (long long)(e->t_ns - r->mono_start_ns));
    snprintf(v, sizeof v, "%.17g", e->value);
    const char *p[] = {r->id,
                       t,
                       e->kind,
                       e->name ? e->name : "",
                       isfinite(e->value) ? v : NULL,
                       e->labels ? e->labels : "",
                       e->text ? e->text : ""};
    int rc = exec_prepared(s, "gs_event", 7, p, "cannot write events");
    if (rc)
      return rc;
  }
  return GS_OK;
}

static int write_params(struct pg_store *s, const struct store_run *r, const struct gs_batch *b) {
  for (size_t i = 0; i < b->n_params; i++) {
    const char *p[] = {r->id, b->params[i].key, b->params[i].value};
    int rc = exec_prepared(s, "gs_param", 3, p, "cannot write params");
    if (rc)
      return rc;
  }
  return GS_OK;
}

/* A note, once: a replay or a retried end never stores the same text twice. In the caller's
 * transaction (or alone). Returns 0, or GS_EIO with the server's message. */
int pg_add_note(struct pg_store *s, const struct store_run *r, const char *text) {
  char t[24];
  snprintf(t, sizeof t, "%lld", (long long)(gs_mono_ns() - r->mono_start_ns));
  const char *p[] = {r->id, t, text};
  PGresult *res = pg_query(s, "INSERT INTO notes(run_id, t, text) VALUES($1, $2::bigint, $3) ON CONFLICT DO NOTHING", 3,
                           p, "cannot write notes");
  if (!res)
    return GS_EIO;
  PQclear(res);
  return GS_OK;
}

/* Queues a statement without parameters (BEGIN, COMMIT) on the pipeline. */
static int queue_exec(struct pg_store *s, const char *sql, int *queued, const char *what) {
  if (!PQsendQueryParams(s->conn, sql, 0, NULL, NULL, NULL, NULL, 0))
    return pg_fail(s, NULL, what);
  (*queued)++;
  return GS_OK;
}

int pg_write_batch(struct pg_store *s, const struct store_run *r, const struct gs_batch *b) {
  pg_rollback(s);
  /* A flush that only moves samples forward (the usual one) is one round trip: BEGIN, the chunk
   * writes, the heartbeat and COMMIT in one pipeline. When a statement fails, the server skips the
   * rest up to the sync, COMMIT included: all or nothing, as one transaction. What needs an answer
   * first (reloaded chunks, new series ids) or is rare (events, params, notes) goes before. */
  int simple = !s->w.stale && !b->n_series && !b->n_notes && !b->n_events && !b->n_params, rc = GS_OK, queued = 0;
  if (!simple) {
    if ((rc = pg_exec(s, "BEGIN", "cannot start writing")))
      goto fail;
    for (size_t i = 0; s->w.stale && i < s->w.n && !rc; i++)
      if (store_writer_at(&s->w, i)->db_id >= 0)
        rc = reload_open_chunk(s, store_writer_at(&s->w, i));
    for (size_t i = 0; i < b->n_series && !rc; i++)
      rc = add_series(s, r, &b->series[i]);
    for (size_t i = 0; i < b->n_notes && !rc; i++)
      rc = pg_add_note(s, r, b->notes[i]);
    if (rc || (rc = write_events(s, r, b)) || (rc = write_params(s, r, b)))
      goto fail;
  }
  if (pg_conn_lost(s) || !PQenterPipelineMode(s->conn)) {
    rc = pg_fail(s, NULL, "cannot write samples");
    goto fail;
  }
  if (simple)
    rc = queue_exec(s, "BEGIN", &queued, "cannot start writing");
  struct append_ctx ctx = {s, &queued};
  if (!rc)
    rc = store_writer_points(&s->w, r, b, seal_cb, write_cb, &ctx);
  if (!rc) {
    char hb[8];
    put_be64(hb, gs_wall_ns());
    const char *vals[] = {hb, r->id};
    int lens[] = {8, 0}, fmts[] = {1, 0};
    if (!PQsendQueryPrepared(s->conn, "gs_heartbeat", 2, vals, lens, fmts, 0))
      rc = pg_fail(s, NULL, "cannot write the heartbeat");
    else
      queued++;
  }
  if (!rc)
    rc = queue_exec(s, "COMMIT", &queued, "cannot commit");
  if (!(rc = pipeline_finish(s, queued, rc)) && PQtransactionStatus(s->conn) == PQTRANS_IDLE) {
    store_writer_committed(&s->w);
    return GS_OK;
  }
  if (!rc) /* every statement answered, yet the transaction is still open: never commit blind */
    rc = gs_fail(GS_EIO, "store %s: cannot commit: the transaction did not end", s->name);
fail:
  pg_rollback(s);
  store_writer_forget(&s->w);
  return rc;
}

/* ---- the run's end ---- */

/* Appends the COPY lines of one resolution's blocks to m (bytea in hex, its backslash escaped for
 * COPY's text format). */
static int copy_blocks(FILE *m, int64_t sid, const struct rollup_acc *a) {
  for (size_t i = 0, next; i < a->len; i = next) {
    uint8_t *buf;
    size_t len;
    int rc = rollup_block_encode(a, i, &next, &buf, &len);
    if (rc)
      return rc;
    fprintf(m, "%lld\t%lld\t%lld\t%zu\t\\\\x", (long long)sid, (long long)a->res, (long long)a->t[i], next - i);
    for (size_t k = 0; k < len; k++)
      fprintf(m, "%02x", buf[k]);
    fputc('\n', m);
    free(buf);
  }
  return GS_OK;
}

/* Sends a COPY's text (len bytes) and reads its end. */
static int copy_in(struct pg_store *s, const char *sql, const char *buf, size_t len, const char *what) {
  int rc = GS_OK;
  PGresult *res = pg_run(s, sql, 0, NULL, NULL, NULL, 0);
  if (PQresultStatus(res) != PGRES_COPY_IN)
    rc = pg_fail(s, res, what);
  PQclear(res);
  if (!rc && (PQputCopyData(s->conn, buf, (int)len) != 1 || PQputCopyEnd(s->conn, NULL) != 1))
    rc = pg_fail(s, NULL, what);
  int64_t deadline = pg_deadline(s);
  while (!rc && (res = pg_result(s, deadline))) {
    if (PQresultStatus(res) != PGRES_COMMAND_OK)
      rc = pg_fail(s, res, what);
    PQclear(res);
  }
  if (!rc && pg_conn_lost(s))
    rc = pg_fail(s, NULL, what);
  while (rc && !pg_conn_lost(s) && (res = pg_result(s, deadline)))
    PQclear(res);
  return rc;
}

int pg_rollups_write(struct pg_store *s, int64_t sid, struct rollup_acc *const *levels, int n) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m)
    return gs_fail(GS_ENOMEM, "out of memory");
  int rc = GS_OK;
  for (int k = 0; k < n && !rc; k++)
    rc = copy_blocks(m, sid, levels[k]);
  fclose(m);
  char id[24];
  snprintf(id, sizeof id, "%lld", (long long)sid);
  const char *p[] = {id};
  PGresult *res = NULL;
  if (!rc &&
      (res = pg_query(s, "DELETE FROM rollup_blocks WHERE series_id = $1::bigint", 1, p, "cannot write rollups")))
    PQclear(res);
  else if (!rc)
    rc = GS_EIO;
  if (!rc && len)
    rc = copy_in(s, "COPY rollup_blocks FROM STDIN", buf, len, "cannot write rollups");
  free(buf);
  return rc;
}

/* Writes the rollups of one series: the resolutions worth storing (rollup_worth_storing), packed
 * STORE_ROLLUP_BLOCK_BUCKETS to a row, replacing what was stored. */
static int write_series_rollups(struct pg_store *s, int64_t sid) {
  struct rollup_all all;
  rollup_all_init(&all);
  int rc = pg_samples_read(&s->base, sid, INT64_MIN, INT64_MAX, rollup_all_point, &all);
  struct rollup_acc *keep[STORE_N_ROLLUP_RES];
  int n = 0;
  for (int k = 0; k < STORE_N_ROLLUP_RES; k++) {
    rollup_emit(&all.a[k]);
    if (!rc && all.a[k].oom)
      rc = gs_fail(GS_ENOMEM, "out of memory");
    if (rollup_worth_storing(&all, &all.a[k]))
      keep[n++] = &all.a[k];
  }
  if (!rc)
    rc = pg_rollups_write(s, sid, keep, n);
  for (int k = 0; k < STORE_N_ROLLUP_RES; k++)
    rollup_done(&all.a[k]);
  return rc;
}

static int write_rollups(struct pg_store *s, const char *run_id) {
  const char *p[] = {run_id};
  PGresult *res = pg_query(s, "SELECT id FROM series WHERE run_id = $1 ORDER BY id", 1, p, "cannot write rollups");
  if (!res)
    return GS_EIO;
  int rc = GS_OK;
  for (int i = 0; !rc && i < PQntuples(res); i++)
    rc = write_series_rollups(s, pg_i64(res, i, 0));
  PQclear(res);
  return rc;
}

/* The run is over: its open chunks move into chunks, where every finished run's chunks are. */
static int seal_open_chunks(struct pg_store *s, const char *run_id) {
  const char *p[] = {run_id};
  PGresult *r = pg_query(s,
                         "WITH moved AS (DELETE FROM open_chunks o USING series x WHERE o.series_id = x.id AND"
                         " x.run_id = $1 RETURNING o.*) INSERT INTO chunks SELECT * FROM moved"
                         " ON CONFLICT (series_id, t0) DO UPDATE SET t1 = excluded.t1, n = excluded.n,"
                         " data = excluded.data",
                         1, p, "cannot close the open chunks");
  if (!r)
    return GS_EIO;
  PQclear(r);
  for (size_t i = 0; i < s->w.n; i++) /* the writer's state follows: a later append starts new chunks */
    if (store_writer_at(&s->w, i)->enc.n)
      store_writer_at(&s->w, i)->sealed = 1;
  return GS_OK;
}

/* Status, exit code, end time, and the notes on what the store went through, in one transaction (a
 * store_end_fn over the store). */
static int write_end(void *store, const struct store_run *r) {
  struct pg_store *s = store;
  int rc = pg_exec(s, "BEGIN", "cannot end run");
  if (rc)
    return rc;
  char code[16], end[24];
  snprintf(code, sizeof code, "%d", r->exit_code);
  snprintf(end, sizeof end, "%lld", (long long)r->end_wall_ns);
  const char *p[] = {r->status, r->exit_code >= 0 ? code : NULL, end, r->id};
  PGresult *res = pg_query(s,
                           "UPDATE runs SET status = $1, exit_code = $2::integer, end_wall_ns = $3::bigint,"
                           " heartbeat_wall_ns = $3::bigint WHERE id = $4",
                           4, p, "cannot end run");
  if (!res) {
    rc = GS_EIO;
    goto fail;
  }
  PQclear(res);
  char note[1024];
  if (store_write_summary(&s->base, note, sizeof note) && (rc = pg_add_note(s, r, note)))
    goto fail;
  if (s->outages) {
    snprintf(note, sizeof note,
             "the store's server was unreachable %lld time%s during the run: %lld samples were spooled to a local"
             " file and replayed, none lost",
             (long long)s->outages, s->outages == 1 ? "" : "s", (long long)s->replayed_points);
    if ((rc = pg_add_note(s, r, note)))
      goto fail;
  }
  if (s->refusals) {
    snprintf(note, sizeof note,
             "the store's server refused %lld write%s during the run (%s): what it refused was spooled to a local"
             " file and replayed, none lost",
             (long long)s->refusals, s->refusals == 1 ? "" : "s", s->refuse_error);
    if ((rc = pg_add_note(s, r, note)))
      goto fail;
  }
  if (!(rc = pg_exec(s, "COMMIT", "cannot end run")))
    return GS_OK;
fail:
  pg_rollback(s);
  return rc;
}

int pg_write_finish(struct pg_store *s, const struct store_run *r, int *ended) {
  int rc = write_end(s, r);
  *ended = !rc;
  if (rc)
    return rc;
  if ((rc = pg_exec(s, "BEGIN", "cannot write rollups")) || (rc = seal_open_chunks(s, r->id)) ||
      (rc = write_rollups(s, r->id)) || (rc = pg_exec(s, "COMMIT", "cannot write rollups"))) {
    pg_rollback(s); /* the run is closed; its rollups are computed from the chunks when read */
    return rc;
  }
  return GS_OK;
}

int pg_findings_write(struct store *base, const char *run_id, const struct store_finding *f, size_t n) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp)
    return sp->findings_write(sp, pg_spool_run_id(s, run_id), f, n);
  int rc;
  if ((rc = pg_check_writable(s)) || (rc = pg_exec(s, "BEGIN", "cannot write findings")))
    return rc;
  const char *del[] = {run_id};
  PGresult *res = pg_query(s, "DELETE FROM findings WHERE run_id = $1", 1, del, "cannot write findings");
  if (!res) {
    rc = GS_EIO;
    goto fail;
  }
  PQclear(res);
  for (size_t i = 0; i < n; i++) {
    char rank[24], share[40], lost[40], speed[40];
    snprintf(rank, sizeof rank, "%zu", i);
    snprintf(share, sizeof share, "%.17g", f[i].share);
    snprintf(lost, sizeof lost, "%.17g", f[i].lost_s);
    snprintf(speed, sizeof speed, "%.17g", f[i].speedup);
    const char *p[] = {run_id,
                       rank,
                       f[i].rule,
                       f[i].severity,
                       isfinite(f[i].share) ? share : NULL,
                       isfinite(f[i].lost_s) ? lost : NULL,
                       isfinite(f[i].speedup) ? speed : NULL,
                       f[i].title,
                       f[i].evidence,
                       f[i].fix};
    if (!(res = pg_query(s,
                         "INSERT INTO findings VALUES($1, $2::integer, $3, $4, $5::double precision,"
                         " $6::double precision, $7::double precision, $8, $9, $10)",
                         10, p, "cannot write findings"))) {
      rc = GS_EIO;
      goto fail;
    }
    PQclear(res);
  }
  if (!(rc = pg_exec(s, "COMMIT", "cannot write findings")))
    return GS_OK;
fail:
  pg_rollback(s);
  return rc;
}

void pg_writer_done(struct pg_store *s) {
  store_writer_done(&s->w);
}

/* ---- the job's output (pg_log.c appends and reads; the spool's replay writes through here) ---- */

/* Inserts chunks c[0..n) of run_id and trims the run to keep_from, in the caller's transaction. */
static int log_rows(struct pg_store *s, const char *run_id, const struct store_log_chunk *c, size_t n,
                    int64_t keep_from) {
  for (size_t i = 0; i < n; i++) {
    char seq[24], t[24];
    snprintf(seq, sizeof seq, "%lld", (long long)c[i].seq);
    snprintf(t, sizeof t, "%lld", (long long)c[i].t);
    const char *p[] = {run_id, seq, c[i].stream, t, c[i].len ? (const char *)c[i].data : ""};
    const int lens[] = {0, 0, 0, 0, (int)c[i].len}, fmts[] = {0, 0, 0, 0, 1};
    PGresult *r = pg_run(s,
                         "INSERT INTO logs(run_id, seq, stream, t, data) VALUES($1, $2::bigint, $3, $4::bigint, $5)"
                         " ON CONFLICT DO NOTHING",
                         5, p, lens, fmts, 0);
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? GS_OK : pg_fail(s, r, "cannot keep the job's output");
    PQclear(r);
    if (rc)
      return rc;
  }
  if (keep_from <= 0)
    return GS_OK;
  char from[24];
  snprintf(from, sizeof from, "%lld", (long long)keep_from);
  const char *p[] = {run_id, from};
  PGresult *r =
      pg_query(s, "DELETE FROM logs WHERE run_id = $1 AND seq < $2::bigint", 2, p, "cannot trim the job's output");
  PQclear(r);
  return r ? GS_OK : GS_EIO;
}

int pg_log_write(struct pg_store *s, const char *run_id, const struct store_log_chunk *c, size_t n, int64_t keep_from) {
  int rc = pg_exec(s, "BEGIN", "cannot keep the job's output");
  if (rc)
    return rc;
  if ((rc = log_rows(s, run_id, c, n, keep_from)) || (rc = pg_exec(s, "COMMIT", "cannot keep the job's output")))
    pg_rollback(s);
  return rc;
}
