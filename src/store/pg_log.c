/* store/pg_log: the job's output in the PostgreSQL back end — the same chunks as SQLite's
 * (sqlite_log.c) in the logs table (schema 4), bytea as read. The writer thread appends a flush's
 * chunks after its samples: to the server when the run's samples went there, to the run's spool
 * while they go there (the server unreachable, or a spool not yet replayed), so the output follows
 * the samples through an outage; pg_spool.c brings the spool's chunks to the server with the rest
 * (pg_log_write, in pg_write.c: a chunk already there is left, so a replay done twice stores none
 * twice). The reader reads the spool while it holds the run, as every reader does. Nothing in the
 * back end calls this file (store_pg.c puts its two functions in the interface). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg_int.h"

int pg_log_append(struct store *base, const struct store_run *r, const struct store_log_chunk *c, size_t n,
                  int64_t keep_from) {
  struct pg_store *s = (struct pg_store *)base;
  int rc = pg_check_writable(s);
  if (rc || (!n && keep_from <= 0))
    return rc;
  if (s->spool) { /* the run's samples go to the spool: its output with them */
    struct store_run sr = *r;
    snprintf(sr.id, sizeof sr.id, "%s", s->spool_run_id);
    return s->spool->log_append(s->spool, &sr, c, n, keep_from);
  }
  if (s->down)
    return gs_fail(GS_EIO, "store %s is unreachable", s->name);
  return pg_log_write(s, r->id, c, n, keep_from);
}

static int64_t be64(const char *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v = v << 8 | (uint8_t)p[i];
  return (int64_t)v;
}

int pg_log_read(struct store *base, const char *run_id, int64_t from_seq, store_log_fn fn, void *user) {
  struct pg_store *s = (struct pg_store *)base;
  struct store *sp = pg_spool_reader(s);
  if (sp)
    return sp->log_read(sp, pg_spool_run_id(s, run_id), from_seq, fn, user);
  if (s->base.schema_found > 0 && s->base.schema_found < 4 && s->mode != STORE_WRITE && s->mode != STORE_MIGRATE)
    return GS_OK; /* a database read as it is, older than the job's output: no logs table */
  char from[24];
  snprintf(from, sizeof from, "%lld", (long long)from_seq);
  const char *p[] = {run_id, from};
  PGresult *res =
      pg_query_bin(s, "SELECT seq, stream, t, data FROM logs WHERE run_id = $1 AND seq >= $2::bigint ORDER BY seq", 2,
                   p, "cannot read the job's output");
  if (!res)
    return GS_EIO;
  for (int i = 0, rows = PQntuples(res); i < rows; i++) {
    struct store_log_chunk c = {.seq = be64(PQgetvalue(res, i, 0)),
                                .t = be64(PQgetvalue(res, i, 2)),
                                .data = (const uint8_t *)PQgetvalue(res, i, 3),
                                .len = (size_t)PQgetlength(res, i, 3)};
    snprintf(c.stream, sizeof c.stream, "%.*s", PQgetlength(res, i, 1), PQgetvalue(res, i, 1));
    if (fn(user, &c))
      break;
  }
  PQclear(res);
  return GS_OK;
}
