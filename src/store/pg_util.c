/* store/pg_util: the PostgreSQL back end's shared helpers (pg_int.h) — URLs shown without their
 * password, errors that name the server's message and mark a lost connection, statements with
 * text parameters, and small column helpers.
 *
 * The writer's round trips are bounded: a store opened to write (gpuscope run) sets its connection
 * non-blocking and waits for every answer with poll() and a deadline (pg_store.timeout_ns), so a
 * server that hangs — a partition without RST, a stopped process: the socket open, nothing
 * answering, which TCP keepalives never notice when a middle box answers them — costs one
 * timeout (of silence: a socket that moves restarts it), then the connection is dropped and the outage handled like any
 * other (spooled, retried). Readers wait as long as the server takes. */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
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

void pg_drop(struct pg_store *s, const char *why) {
  if (why)
    snprintf(s->lost_why, sizeof s->lost_why, "%s", why);
  if (s->conn)
    PQfinish(s->conn);
  s->conn = NULL;
  s->down = 1;
  s->schema_ok = 0;
}

/* True when a failure means the connection cannot be trusted any more: its SQLSTATE is a
 * connection exception (class 08) or a shutdown (57P01 admin, 57P02 crash, 57P03 cannot connect
 * now), or libpq says the socket failed. An immediate shutdown or a cut network can leave libpq's
 * status CONNECTION_OK (a failed send is noticed only at the next read) while every later command
 * fails: such a connection is dropped and the failure is an outage. */
static int conn_broken(const char *state, const char *msg) {
  static const char *const broken[] = {
      "server closed the connection", "could not send data",   "could not receive data",
      "no connection to the server",  "Connection reset",      "Broken pipe",
      "connection pointer is NULL",   "terminating connection"};
  if (state &&
      (!strncmp(state, "08", 2) || !strcmp(state, "57P01") || !strcmp(state, "57P02") || !strcmp(state, "57P03")))
    return 1;
  for (size_t i = 0; msg && i < sizeof broken / sizeof *broken; i++)
    if (strstr(msg, broken[i]))
      return 1;
  return 0;
}

int pg_await(struct pg_store *s, int64_t deadline) {
  for (;;) {
    if (pg_conn_lost(s))
      return GS_EIO;
    int flush = PQflush(s->conn); /* what is queued goes out first (non-blocking: it may take turns) */
    if (flush < 0) {
      pg_drop(s, NULL);
      return GS_EIO;
    }
    if (!flush && !PQisBusy(s->conn))
      return GS_OK;
    int64_t left = deadline - gs_mono_ns();
    if (left <= 0) {
      char why[160];
      snprintf(why, sizeof why, "no answer from the server in %.1f s (it hangs, or the network is cut)",
               (double)s->timeout_ns / GS_NS_PER_S);
      pg_drop(s, why);
      return gs_fail(GS_EIO, "store %s: %s", s->name, why);
    }
    struct pollfd pf = {.fd = PQsocket(s->conn), .events = POLLIN | (flush ? POLLOUT : 0)};
    int ms = (int)((left + 999999) / 1000000);
    int n = poll(&pf, 1, ms);
    if (n < 0 && errno != EINTR) {
      pg_drop(s, strerror(errno));
      return GS_EIO;
    }
    if (n > 0) /* the socket moved: the deadline bounds silence, not a long answer that keeps coming */
      deadline = gs_mono_ns() + s->timeout_ns;
    if (n > 0 && (pf.revents & (POLLIN | POLLERR | POLLHUP)) && !PQconsumeInput(s->conn)) {
      char one[256];
      snprintf(one, sizeof one, "%s", PQerrorMessage(s->conn));
      one[strcspn(one, "\n")] = 0;
      pg_drop(s, one);
      return GS_EIO;
    }
  }
}

PGresult *pg_result(struct pg_store *s, int64_t deadline) {
  if (!s->timeout_ns)
    return PQgetResult(s->conn);
  if (pg_await(s, deadline))
    return NULL;
  return PQgetResult(s->conn);
}

int64_t pg_deadline(const struct pg_store *s) {
  return s->timeout_ns ? gs_mono_ns() + s->timeout_ns : INT64_MAX;
}

/* The results of the command just sent, as PQexec would return them (the last, an error in
 * preference, a COPY state at once), each waited for before the deadline. NULL when the server did
 * not answer in time or the connection broke (then dropped: pg_fail says why). */
static PGresult *collect(struct pg_store *s, int sent) {
  if (!sent)
    return NULL;
  int64_t deadline = pg_deadline(s);
  PGresult *last = NULL, *r;
  while ((r = pg_result(s, deadline))) {
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COPY_IN || st == PGRES_COPY_OUT || st == PGRES_COPY_BOTH) {
      PQclear(last);
      return r;
    }
    if (last && PQresultStatus(last) == PGRES_FATAL_ERROR && st != PGRES_FATAL_ERROR) {
      PQclear(r);
      continue;
    }
    PQclear(last);
    last = r;
  }
  if (pg_conn_lost(s)) { /* cut short: not an answer */
    PQclear(last);
    return NULL;
  }
  return last;
}

PGresult *pg_run(struct pg_store *s, const char *sql, int n, const char *const *params, const int *lens,
                 const int *fmts, int binary) {
  if (pg_conn_lost(s))
    return NULL;
  if (!s->timeout_ns)
    return PQexecParams(s->conn, sql, n, NULL, params, lens, fmts, binary);
  return collect(s, PQsendQueryParams(s->conn, sql, n, NULL, params, lens, fmts, binary));
}

PGresult *pg_run_prepared(struct pg_store *s, const char *name, int n, const char *const *params, const int *lens,
                          const int *fmts) {
  if (pg_conn_lost(s))
    return NULL;
  if (!s->timeout_ns)
    return PQexecPrepared(s->conn, name, n, params, lens, fmts, 0);
  return collect(s, PQsendQueryPrepared(s->conn, name, n, params, lens, fmts, 0));
}

PGresult *pg_run_prepare(struct pg_store *s, const char *name, const char *sql) {
  if (pg_conn_lost(s))
    return NULL;
  if (!s->timeout_ns)
    return PQprepare(s->conn, name, sql, 0, NULL);
  return collect(s, PQsendPrepare(s->conn, name, sql, 0, NULL));
}

int pg_fail(struct pg_store *s, const PGresult *res, const char *what) {
  const char *msg = res ? PQresultErrorMessage(res) : "";
  if (!msg || !*msg)
    msg = s->conn ? PQerrorMessage(s->conn) : s->lost_why[0] ? s->lost_why : "not connected";
  char one[512];
  snprintf(one, sizeof one, "%s", msg && *msg ? msg : "unknown error");
  one[strcspn(one, "\n")] = 0; /* libpq's messages end with a newline and may hold a DETAIL line */
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  int busy = state && (!strcmp(state, "40001") || !strcmp(state, "40P01") || !strcmp(state, "55P03"));
  if (!pg_conn_lost(s) && conn_broken(state, one))
    pg_drop(s, one);
  if (pg_conn_lost(s)) {
    s->down = 1;
    s->schema_ok = 0;
    return gs_fail(GS_EIO, "store %s: %s: the server is unreachable (%s)", s->name, what, one);
  }
  return gs_fail(busy ? GS_EBUSY : GS_EIO, "store %s: %s: %s", s->name, what, one);
}

/* A reader (runs, show, serve, report) whose connection was lost — the server restarted — connects
 * again, at most once a second, before its next statement: a long-lived reader such as serve
 * comes back with the server. A writer reconnects through its spool (pg_reconnect). */
static void reader_reconnect(struct pg_store *s) {
  if (s->mode == STORE_WRITE || !pg_conn_lost(s))
    return;
  int64_t now = gs_mono_ns();
  if (now < s->next_try_ns)
    return;
  s->next_try_ns = now + GS_NS_PER_S;
  s->connect(s); /* when it fails, the statement fails with the server's reason */
}

int pg_exec(struct pg_store *s, const char *sql, const char *what) {
  reader_reconnect(s);
  if (pg_conn_lost(s))
    return pg_fail(s, NULL, what);
  PGresult *r = pg_run(s, sql, 0, NULL, NULL, NULL, 0);
  ExecStatusType st = PQresultStatus(r);
  int rc = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? GS_OK : pg_fail(s, r, what);
  PQclear(r);
  return rc;
}

static PGresult *query(struct pg_store *s, const char *sql, int n, const char *const *params, int binary,
                       const char *what) {
  reader_reconnect(s);
  if (pg_conn_lost(s)) {
    pg_fail(s, NULL, what);
    return NULL;
  }
  PGresult *r = pg_run(s, sql, n, params, NULL, NULL, binary);
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
  if (!pg_conn_lost(s) && PQpipelineStatus(s->conn) != PQ_PIPELINE_OFF)
    pg_drop(s, "the connection was left in a pipeline");
  if (!pg_conn_lost(s) && PQtransactionStatus(s->conn) != PQTRANS_IDLE)
    PQclear(pg_run(s, "ROLLBACK", 0, NULL, NULL, NULL, 0));
  if (!pg_conn_lost(s) && PQtransactionStatus(s->conn) != PQTRANS_IDLE)
    pg_drop(s, "the connection's transaction could not be ended"); /* never write on it blind */
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

/* ---- the connection and the spool, as every file sees them ---- */

int pg_reconnect(struct pg_store *s, int force) {
  if (!s->down && !pg_conn_lost(s))
    return GS_OK;
  int64_t now = gs_mono_ns();
  if (!force && now < s->next_try_ns)
    return GS_EIO;
  s->next_try_ns = now + PG_RETRY_NS;
  int rc = s->connect(s);
  if (rc) {
    s->down = 1;
    return rc;
  }
  s->w.stale = 1;     /* whatever the last connection left: the open chunks are read again */
  s->next_try_ns = 0; /* and the spool is replayed at once */
  return GS_OK;
}

const char *pg_spool_run_id(const struct pg_store *s, const char *run_id) {
  return s->spool && !strcmp(run_id, s->server_run_id) ? s->spool_run_id : run_id;
}

struct store *pg_spool_reader(struct pg_store *s) {
  /* the server does not hold the run (unreachable, or it refused the spool): the spool does */
  return s->spool && (s->down || s->replay_error[0]) ? s->spool : NULL;
}
