/* store/pg_util: the PostgreSQL back end's shared helpers (pg_int.h) — URLs shown without their
 * password, errors that name the server's message and mark a lost connection, statements with
 * text parameters, and small column helpers. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/pg_int.h"

void pg_scrub_url(const char *url, char *out, size_t n) {
  char buf[1024];
  snprintf(buf, sizeof buf, "%s", url);
  char *auth = strstr(buf, "://");
  auth = auth ? auth + 3 : buf;
  size_t alen = strcspn(auth, "/?");
  char *at = memchr(auth, '@', alen);
  if (at) { /* postgresql://user:secret@host -> postgresql://user@host */
    char *colon = memchr(auth, ':', (size_t)(at - auth));
    if (colon)
      memmove(colon, at, strlen(at) + 1);
  }
  /* ?password=secret&... -> ?password=***&... */
  for (char *p = strchr(buf, '?'); p; p = strchr(p + 1, '&')) {
    if (strncmp(p + 1, "password=", 9))
      continue;
    char *v = p + 10, *end = v + strcspn(v, "&");
    memmove(v + 3, end, strlen(end) + 1);
    memcpy(v, "***", 3);
  }
  snprintf(out, n, "%s", buf);
}

int pg_conn_lost(const struct pg_store *s) {
  return !s->conn || PQstatus(s->conn) == CONNECTION_BAD;
}

int pg_fail(struct pg_store *s, const PGresult *res, const char *what) {
  const char *msg = res ? PQresultErrorMessage(res) : "";
  if (!msg || !*msg)
    msg = s->conn ? PQerrorMessage(s->conn) : "not connected";
  char one[512];
  snprintf(one, sizeof one, "%s", msg && *msg ? msg : "unknown error");
  one[strcspn(one, "\n")] = 0; /* libpq's messages end with a newline and may hold a DETAIL line */
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  int busy = state && (!strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "55P03"));
  if (pg_conn_lost(s)) {
    s->down = 1;
    s->schema_ok = 0;
    return gs_fail(GS_EIO, "store %s: %s: the server is unreachable (%s)", s->name, what, one);
  }
  return gs_fail(busy ? GS_EBUSY : GS_EIO, "store %s: %s: %s", s->name, what, one);
}

int pg_exec(struct pg_store *s, const char *sql, const char *what) {
  if (pg_conn_lost(s))
    return pg_fail(s, NULL, what);
  PGresult *r = PQexec(s->conn, sql);
  ExecStatusType st = PQresultStatus(r);
  int rc = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? GS_OK : pg_fail(s, r, what);
  PQclear(r);
  return rc;
}

static PGresult *query(struct pg_store *s, const char *sql, int n, const char *const *params, int binary,
                       const char *what) {
  if (pg_conn_lost(s)) {
    pg_fail(s, NULL, what);
    return NULL;
  }
  PGresult *r = PQexecParams(s->conn, sql, n, NULL, params, NULL, NULL, binary);
  ExecStatusType st = PQresultStatus(r);
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
    return r;
  pg_fail(s, r, what);
  PQclear(r);
  return NULL;
}

PGresult *pg_query(struct pg_store *s, const char *sql, int n, const char *const *params, const char *what) {
  return query(s, sql, n, params, 0, what);
}

PGresult *pg_query_bin(struct pg_store *s, const char *sql, int n, const char *const *params, const char *what) {
  return query(s, sql, n, params, 1, what);
}

uint32_t pg_u32(const PGresult *r, int i, int col) {
  uint32_t v;
  memcpy(&v, PQgetvalue(r, i, col), 4);
  return ntohl(v);
}

void pg_rollback(struct pg_store *s) {
  if (!pg_conn_lost(s) && PQtransactionStatus(s->conn) != PQTRANS_IDLE)
    PQclear(PQexec(s->conn, "ROLLBACK"));
}

int pg_check_writable(struct pg_store *s) {
  if (!s->base.read_only)
    return GS_OK;
  return gs_fail(GS_EINVAL, "store %s is open read-only here: nothing was written", s->name);
}

int64_t pg_i64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

void pg_copy(const PGresult *r, int row, int col, char *dst, size_t n) {
  snprintf(dst, n, "%s", PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col));
}
