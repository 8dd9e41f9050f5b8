/* serve/serve: the HTTP side of `gpuscope serve` — the libmicrohttpd daemon and its limits, the
 * token check on every request (wrong ones counted per address, conns.c), the Host check that keeps
 * other sites' pages (DNS rebinding) off a loopback server, the embedded web assets, and the hand-off
 * to the JSON API (api.c), the streamed series answers (series.c) and the live streams (live.c).
 * A few threads each wait on many connections (libmicrohttpd's epoll mode with a thread pool), so a
 * thousand slow clients held open cost memory, not threads; nothing a handler does may block for
 * long (a live viewer with nothing to send is suspended, not put to sleep), and an idle server with
 * no browser sleeps in epoll_wait. */
#include <arpa/inet.h>
#include <errno.h>
#include "serve/mhd_api.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "serve/serve_int.h"

#define COOKIE_NAME "gpuscope_token"

int serve_token_equal(const char *a, size_t alen, const char *b, size_t blen) {
  /* Every byte of the longer string is looked at whatever the contents, so the time tells nothing
   * but the lengths. */
  size_t n = alen > blen ? alen : blen;
  unsigned char diff = alen != blen;
  for (size_t i = 0; i < n; i++) {
    unsigned char x = i < alen ? (unsigned char)a[i] : 0, y = i < blen ? (unsigned char)b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

int serve_addr_parse(const char *s, struct serve_addr *a) {
  memset(a, 0, sizeof *a);
  const char *colon;
  char host[64];
  if (!s || !*s)
    return gs_fail(GS_EINVAL, "--listen needs HOST:PORT");
  if (*s == '[') {
    const char *end = strchr(s, ']');
    if (!end || end[1] != ':' || (size_t)(end - s - 1) >= sizeof host)
      return gs_fail(GS_EINVAL, "--listen '%s': expected [IPV6]:PORT", s);
    memcpy(host, s + 1, (size_t)(end - s - 1));
    host[end - s - 1] = 0;
    colon = end + 1;
    a->v6 = 1;
  } else {
    colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof host)
      return gs_fail(GS_EINVAL, "--listen '%s': expected HOST:PORT", s);
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = 0;
  }
  char *e;
  errno = 0;
  long port = strtol(colon + 1, &e, 10);
  if (errno || *e || e == colon + 1 || port < 0 || port > 65535)
    return gs_fail(GS_EINVAL, "--listen '%s': bad port", s);
  a->port = (int)port;
  if (!*host || !strcmp(host, "localhost"))
    snprintf(host, sizeof host, "%s", a->v6 ? "::1" : "127.0.0.1");
  unsigned char bin[16];
  if (inet_pton(a->v6 ? AF_INET6 : AF_INET, host, bin) != 1)
    return gs_fail(GS_EINVAL, "--listen '%s': '%s' is not a numeric %s address", s, host, a->v6 ? "IPv6" : "IPv4");
  snprintf(a->host, sizeof a->host, "%s", host);
  static const unsigned char v6lo[16] = {[15] = 1};
  a->loopback = a->v6 ? !memcmp(bin, v6lo, 16) : bin[0] == 127;
  return GS_OK;
}

static void security_headers(struct MHD_Response *resp) {
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(resp, "X-Frame-Options", "DENY");
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  MHD_add_response_header(resp, "Content-Security-Policy",
                          "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
                          "connect-src 'self'; frame-ancestors 'none'");
}

static enum MHD_Result queue(struct MHD_Connection *c, int status, const char *mime, const void *data, size_t len,
                             enum MHD_ResponseMemoryMode mode, const char *cache) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)data, mode);
  if (!resp)
    return MHD_NO;
  MHD_add_response_header(resp, "Content-Type", mime);
  MHD_add_response_header(resp, "Cache-Control", cache ? cache : "no-store");
  security_headers(resp);
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result queue_text(struct MHD_Connection *c, int status, const char *mime, const char *text) {
  return queue(c, status, mime, text, strlen(text), MHD_RESPMEM_PERSISTENT, NULL);
}

/* A refusal for want of the token: 401 with the scheme to use (RFC 6750), as text or JSON. */
static enum MHD_Result queue_unauthorized(struct MHD_Connection *c, int json, const char *msg) {
  struct serve_reply r;
  const char *body = msg;
  size_t len = strlen(msg);
  enum MHD_ResponseMemoryMode mode = MHD_RESPMEM_PERSISTENT;
  if (json) {
    if (serve_reply_begin(&r))
      return MHD_NO;
    serve_reply_error(&r, MHD_HTTP_UNAUTHORIZED, "%s", msg);
    serve_reply_end(&r);
    body = r.body;
    len = r.len;
    mode = MHD_RESPMEM_MUST_FREE;
  }
  struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)body, mode);
  if (!resp) {
    if (json)
      free(r.body);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", json ? "application/json" : "text/plain; charset=utf-8");
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"gpuscope\"");
  security_headers(resp);
  enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* Too many wrong tokens from this address: 429, and when to try again. */
static enum MHD_Result queue_too_many(struct MHD_Connection *c, int wait_s) {
  static const char msg[] = "{\"error\":\"too many wrong tokens from this address: wait\"}\n";
  struct MHD_Response *resp = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  char after[16];
  snprintf(after, sizeof after, "%d", wait_s);
  MHD_add_response_header(resp, "Content-Type", "application/json");
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, after);
  security_headers(resp);
  enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_TOO_MANY_REQUESTS, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result queue_json_error(struct MHD_Connection *c, int status, const char *msg) {
  struct serve_reply r;
  if (serve_reply_begin(&r))
    return MHD_NO;
  serve_reply_error(&r, status, "%s", msg);
  serve_reply_end(&r);
  enum MHD_Result ret = queue(c, r.status, r.mime, r.body, r.len, MHD_RESPMEM_MUST_FREE, NULL);
  if (ret == MHD_NO)
    free(r.body);
  return ret;
}

/* ---- checks on every request ---- */

/* The token the request shows, or NULL: on "/" a ?token=T (*via_query set: it becomes a cookie),
 * else "Authorization: Bearer T", else (when cookies) the cookie. */
static const char *credential(struct MHD_Connection *c, const char *url, int cookies, int *via_query) {
  *via_query = 0;
  const char *t = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
  if (cookies && t && !strcmp(url, "/")) {
    *via_query = 1;
    return t;
  }
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (h)
    return strncasecmp(h, "Bearer ", 7) ? "" : h + 7;
  return cookies ? MHD_lookup_connection_value(c, MHD_COOKIE_KIND, COOKIE_NAME) : NULL;
}

enum { AUTH_OK, AUTH_NONE, AUTH_WRONG, AUTH_WAIT };

/* Checks the request's token (none needed: AUTH_OK). A wrong one counts against the address; past
 * SERVE_TOKEN_FAILS the address's tokens are not looked at (AUTH_WAIT, *wait_s seconds). */
static int token_check(struct serve *s, struct MHD_Connection *c, const char *url, int cookies, int *via_query,
                       int *wait_s) {
  *via_query = 0;
  if (!s->token_len)
    return AUTH_OK;
  const char *t = credential(c, url, cookies, via_query);
  if (!t)
    return AUTH_NONE;
  if ((*wait_s = serve_conns_token_blocked(&s->conns, c)))
    return AUTH_WAIT;
  if (serve_token_equal(t, strlen(t), s->token, s->token_len))
    return AUTH_OK;
  serve_conns_token_failed(&s->conns, c);
  return AUTH_WRONG;
}

/* Without a token, only pages of this server's own origin may talk to it: a Host naming another
 * site (DNS rebinding) is refused. */
static int host_ok(struct serve *s, struct MHD_Connection *c) {
  if (s->token_len)
    return 1;
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
  if (!h)
    return 1; /* HTTP/1.0 without Host: not a browser */
  char port[16];
  snprintf(port, sizeof port, ":%d", s->addr.port);
  static const char *const names[] = {"127.0.0.1", "localhost", "[::1]"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    size_t n = strlen(names[i]);
    if (!strncasecmp(h, names[i], n) && (!h[n] || !strcmp(h + n, port)))
      return 1;
  }
  if (s->addr.loopback && !strncmp(h, s->addr.host, strlen(s->addr.host))) {
    const char *rest = h + strlen(s->addr.host);
    return !*rest || !strcmp(rest, port);
  }
  return 0;
}

/* A path is a plain absolute path: no "..", no backslash, no empty segment. */
static int path_ok(const char *url) {
  if (url[0] != '/' || strchr(url, '\\') || strstr(url, "//"))
    return 0;
  for (const char *p = url; (p = strstr(p, "..")); p += 2)
    if ((p == url || p[-1] == '/') && (!p[2] || p[2] == '/'))
      return 0;
  for (const char *p = url; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      return 0;
  return 1;
}

/* ---- the static pages ---- */

static enum MHD_Result serve_asset(struct MHD_Connection *c, const char *url) {
  if (!strcmp(url, "/"))
    url = "/index.html";
  for (size_t i = 0; i < serve_nassets; i++)
    if (!strcmp(serve_assets[i].path, url))
      return queue(c, MHD_HTTP_OK, serve_assets[i].mime, serve_assets[i].data, serve_assets[i].len,
                   MHD_RESPMEM_PERSISTENT, "no-cache");
  if (!serve_nassets && !strcmp(url, "/index.html")) {
    static char page[512];
    snprintf(page, sizeof page,
             "<!doctype html><title>gpuscope</title><p>The web UI was not built (%s); the JSON API is at "
             "<a href=\"/api/runs\">/api/runs</a>.</p>\n",
             serve_assets_missing);
    return queue_text(c, MHD_HTTP_OK, "text/html; charset=utf-8", page);
  }
  return queue_json_error(c, MHD_HTTP_NOT_FOUND, "no such page");
}

/* ---- the request handler ---- */

static const char *arg_get(void *user, const char *key) {
  return MHD_lookup_connection_value(user, MHD_GET_ARGUMENT_KIND, key);
}

static enum MHD_Result live_stream(struct serve *s, struct MHD_Connection *c, const char *path) {
  /* path: "runs/REF/live" */
  char ref[256];
  const char *a = path + 5, *e = strrchr(path, '/');
  if ((size_t)(e - a) >= sizeof ref)
    return queue_json_error(c, MHD_HTTP_BAD_REQUEST, "run reference too long");
  memcpy(ref, a, (size_t)(e - a));
  ref[e - a] = 0;
  struct store_run run;
  pthread_mutex_lock(&s->mu);
  int rc = s->st->run_get(s->st, ref, &run);
  pthread_mutex_unlock(&s->mu);
  if (rc)
    return queue_json_error(c,
                            rc == GS_ENOENT   ? MHD_HTTP_NOT_FOUND
                            : rc == GS_EAMBIG ? MHD_HTTP_CONFLICT
                                              : 500,
                            gs_last_error());
  const char *since = arg_get(c, "since");
  int64_t since_ns = -1;
  if (since) {
    char *end;
    double v = strtod(since, &end);
    if (*end || end == since || !(v >= 0 && v < 1e9))
      return queue_json_error(c, MHD_HTTP_BAD_REQUEST, "since: seconds since the run's start");
    since_ns = (int64_t)(v * GS_NS_PER_S);
  }
  struct serve_live *l = serve_live_new(s, run.id, since_ns, c);
  if (!l)
    return queue_json_error(c, 500, gs_last_error());
  struct MHD_Response *resp =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, serve_live_read, l, serve_live_free);
  if (!resp) {
    serve_live_free(l);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", "text/event-stream");
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  security_headers(resp);
  enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* "runs/REF/live" */
static int is_live_path(const char *p) {
  size_t n = strlen(p);
  return !strncmp(p, "runs/", 5) && n > 10 && strchr(p + 5, '/') == p + n - 5 && !strcmp(p + n - 5, "/live");
}

/* The checks every request passes, whatever it asks for: GET or HEAD, no body, a Host of ours
 * (without a token), a plain path. Returns 1 with *ret the queued refusal, or 0 to go on. */
static int request_refused(struct serve *s, struct MHD_Connection *c, const char *url, const char *method,
                           size_t *upload_data_size, enum MHD_Result *ret) {
  if (strcmp(method, "GET") && strcmp(method, "HEAD"))
    return *ret = queue_json_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD"), 1;
  if (*upload_data_size) {
    *upload_data_size = 0;
    return *ret = queue_json_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "no request body is accepted"), 1;
  }
  const char *clen = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if ((clen && strcmp(clen, "0")) || MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
    return *ret = queue_json_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "no request body is accepted"), 1;
  if (!host_ok(s, c))
    return *ret = queue_json_error(c, MHD_HTTP_FORBIDDEN, "Host header names another site"), 1;
  if (!path_ok(url))
    return *ret = queue_json_error(c, MHD_HTTP_BAD_REQUEST, "bad path"), 1;
  return 0;
}

/* An endpoint's request (serve_endpoint_start): the token by Authorization header only (a scraper,
 * not a browser), then the one path. */
static enum MHD_Result endpoint_handle(struct serve *s, struct MHD_Connection *c, const char *url) {
  int via_query, wait_s = 0, auth = token_check(s, c, url, 0, &via_query, &wait_s);
  if (auth == AUTH_WAIT)
    return queue_too_many(c, wait_s);
  if (auth != AUTH_OK)
    return queue_unauthorized(c, 0, "gpuscope: a token is needed (Authorization: Bearer T)\n");
  if (strcmp(url, s->ep_path)) {
    if (!strcmp(url, "/"))
      return queue_text(c, MHD_HTTP_OK, "text/plain; charset=utf-8", s->ep_index);
    return queue_text(c, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8", "gpuscope: no such page\n");
  }
  const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
  char *body = NULL;
  size_t len = 0;
  const char *mime = "text/plain; charset=utf-8";
  if (s->ep_fn(s->ep_user, accept, &body, &len, &mime))
    return queue_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8", "gpuscope: out of memory\n");
  enum MHD_Result ret = queue(c, MHD_HTTP_OK, mime, body, len, MHD_RESPMEM_MUST_FREE, NULL);
  if (ret == MHD_NO)
    free(body);
  return ret;
}

/* The states of a request (*con_cls): its URI seen (too many arguments, or not), its headers done. */
static int uri_ok, uri_too_many, headers_done;

/* libmicrohttpd's URI callback, before it parses the query: a query of more than SERVE_MAX_ARGS
 * arguments is cut off here (each would take the connection's memory, and libmicrohttpd, short of
 * it, would close the connection without a word) and answered 414. */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *c) {
  (void)cls;
  (void)c;
  char *q = strchr(uri, '?');
  if (!q)
    return &uri_ok;
  size_t args = 1;
  for (const char *p = q + 1; *p; p++)
    args += *p == '&';
  if (args <= SERVE_MAX_ARGS)
    return &uri_ok;
  /* The request line is libmicrohttpd's buffer, which it then splits in place itself: an empty query
   * is all it will parse. */
  q[1] = 0;
  return &uri_too_many;
}

/* An API answer: the body made under the store lock, or a streamed series answer. */
static enum MHD_Result api_answer(struct serve *s, struct MHD_Connection *c, const char *path) {
  struct serve_reply r;
  if (serve_reply_begin(&r))
    return MHD_NO;
  struct serve_args a = {arg_get, c};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pthread_mutex_lock(&s->mu);
  serve_api(s, path, &a, &r);
  pthread_mutex_unlock(&s->mu);
  serve_reply_end(&r);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  struct MHD_Response *resp;
  if (r.stream) {
    free(r.body);
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, serve_series_stream_read, r.stream,
                                             serve_series_stream_free);
    if (!resp) {
      serve_series_stream_free(r.stream);
      return MHD_NO;
    }
    /* a client that stops reading holds its stream's series: it goes sooner than a silent one */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)SERVE_SEND_TIMEOUT_S);
  } else if (!(resp = MHD_create_response_from_buffer(r.len, r.body, MHD_RESPMEM_MUST_FREE))) {
    free(r.body);
    return MHD_NO;
  }
  /* the server's own time for the answer (bench/serve_bench.py reads it); for a streamed series
   * answer, the time to check it and find its series */
  char timing[64];
  snprintf(timing, sizeof timing, "app;dur=%.3f",
           (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
  MHD_add_response_header(resp, "Server-Timing", timing);
  MHD_add_response_header(resp, "Content-Type", r.mime);
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  security_headers(resp);
  enum MHD_Result ret = MHD_queue_response(c, (unsigned)r.status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
  (void)version;
  (void)upload_data;
  struct serve *s = cls;
  if (*con_cls != &headers_done)
    serve_conns_headers_done(&s->conns, c); /* the headers are in: their deadline stops */
  if (*con_cls == &uri_too_many) {
    *con_cls = &headers_done;
    return queue_json_error(c, MHD_HTTP_URI_TOO_LONG, "too many query arguments (at most 32)");
  }
  enum MHD_Result refused;
  if (request_refused(s, c, url, method, upload_data_size, &refused))
    return refused; /* decided on the headers (MHD then closes the connection): a body is never read */
  if (*con_cls != &headers_done) {
    /* The first call has only the headers. An answer queued now makes libmicrohttpd (0.9.75) read
     * no more of the connection and close it after the answer ("Connection: close"), so a scraper's
     * every request would cost a new connection: answer on the next call, once MHD has the whole
     * request, and the connection stays open (HTTP/1.1 keep-alive). */
    *con_cls = &headers_done;
    return MHD_YES;
  }
  if (s->ep_fn)
    return endpoint_handle(s, c, url);
  int via_query, wait_s = 0, auth = token_check(s, c, url, 1, &via_query, &wait_s);
  if (auth == AUTH_WAIT)
    return queue_too_many(c, wait_s);
  if (auth == AUTH_OK && via_query) {
    /* /?token=T once: the token becomes a cookie and leaves the address bar. */
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    if (!resp)
      return MHD_NO;
    char cookie[512];
    snprintf(cookie, sizeof cookie, COOKIE_NAME "=%s; Path=/; HttpOnly; SameSite=Strict", s->token);
    MHD_add_response_header(resp, "Set-Cookie", cookie);
    MHD_add_response_header(resp, "Location", "/");
    security_headers(resp);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_FOUND, resp);
    MHD_destroy_response(resp);
    return ret;
  }
  if (auth != AUTH_OK) {
    if (!strncmp(url, "/api/", 5))
      return queue_unauthorized(c, 1, "a token is needed (Authorization: Bearer T)");
    return queue_unauthorized(c, 0, "gpuscope: this server needs its token: open /?token=T once\n");
  }
  if (strncmp(url, "/api/", 5))
    return serve_asset(c, url);
  const char *path = url + 5;
  if (is_live_path(path))
    return live_stream(s, c, path);
  return api_answer(s, c, path);
}

/* libmicrohttpd's messages, at most SERVE_LOG_PER_S a second (a thousand clients closed for slow
 * headers would otherwise be a thousand lines, and a full stderr pipe would stall the thread). */
static void log_mhd(void *cls, const char *fmt, va_list ap) {
  struct serve *s = cls;
  if (s->o->quiet)
    return;
  int64_t sec = gs_mono_ns() / GS_NS_PER_S;
  pthread_mutex_lock(&s->log_mu);
  if (sec != s->log_sec) {
    if (s->log_dropped)
      fprintf(stderr, "gpuscope serve: (%u more messages left out)\n", s->log_dropped);
    s->log_sec = sec;
    s->log_n = s->log_dropped = 0;
  }
  if (s->log_n++ < SERVE_LOG_PER_S) {
    fputs("gpuscope serve: ", stderr);
    vfprintf(stderr, fmt, ap);
  } else
    s->log_dropped++;
  pthread_mutex_unlock(&s->log_mu);
}

/* The token rules of every listener: required off loopback, 16 to 256 printable bytes. */
static int token_setup(struct serve *s, const char *token) {
  s->token = token && *token ? token : NULL;
  s->token_len = s->token ? strlen(s->token) : 0;
  if (!s->addr.loopback && !s->token)
    return gs_fail(GS_EINVAL, "listening on %s (not loopback) needs a token: --token T or GPUSCOPE_TOKEN",
                   s->addr.host);
  if (s->token && (s->token_len < SERVE_TOKEN_MIN || s->token_len > 256))
    return gs_fail(GS_EINVAL,
                   "the token must be %d to 256 bytes long (it is %zu): a random one, e.g. `openssl rand -hex 16`",
                   SERVE_TOKEN_MIN, s->token_len);
  for (const char *p = s->token; p && *p; p++)
    if ((unsigned char)*p <= 0x20 || *p == ';' || *p == ',' || (unsigned char)*p >= 0x7f)
      return gs_fail(GS_EINVAL, "the token must be printable ASCII without spaces, ';' or ','");
  return GS_OK;
}

/* The connections the descriptor limit leaves room for, up to SERVE_MAX_CONNECTIONS. With raise, the
 * soft limit is raised towards the hard one first (nothing in gpuscope uses select(), which a
 * descriptor past 1024 would break); an endpoint does not, since the job `run --listen` starts would
 * inherit it. */
static unsigned conn_capacity(int raise) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl))
    return 256;
  rlim_t want = (rlim_t)SERVE_MAX_CONNECTIONS + 256;
  if (raise && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    struct rlimit up = rl;
    up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
    if (!setrlimit(RLIMIT_NOFILE, &up))
      rl = up;
  }
  rlim_t room = rl.rlim_cur == RLIM_INFINITY ? want : rl.rlim_cur;
  /* the store, logs, the pool's epoll and signalling descriptors need some */
  room = room > 256 + 64 ? room - 256 : 64;
  return room < (rlim_t)SERVE_MAX_CONNECTIONS ? (unsigned)room : (unsigned)SERVE_MAX_CONNECTIONS;
}

/* Starts the daemon on s->addr with serve's limits; s->addr.port becomes the bound port. The
 * caller blocks SIGINT/SIGTERM first when the daemon's threads must not take them, and has started
 * s->conns. Returns the daemon, or NULL with GS_EBUSY's message. */
static struct MHD_Daemon *daemon_start(struct serve *s) {
  char err[320];
  if (mhd_api_load(err, sizeof err)) { /* libmicrohttpd is loaded here, on first use (mhd_api.h) */
    gs_fail(GS_ENOENT, "%s", err);
    return NULL;
  }
  struct sockaddr_storage ss = {0};
  if (s->addr.v6) {
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)s->addr.port);
    inet_pton(AF_INET6, s->addr.host, &a6->sin6_addr);
  } else {
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)s->addr.port);
    inet_pton(AF_INET, s->addr.host, &a4->sin_addr);
  }
  /* epoll with a pool of threads; suspend/resume for live viewers waiting on their hub; ITC so a
   * resumed connection is served at once */
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                   (s->addr.v6 ? MHD_USE_IPv6 : 0);
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, (uint16_t)s->addr.port, serve_conns_accept, &s->conns, handle, s, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, s,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)SERVE_THREADS,
      MHD_OPTION_CONNECTION_LIMIT, conn_capacity(!s->ep_fn), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)SERVE_CONN_MEMORY, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVE_CONN_TIMEOUT_S,
      MHD_OPTION_NOTIFY_CONNECTION, serve_conns_notify, &s->conns, MHD_OPTION_NOTIFY_COMPLETED, serve_conns_completed,
      &s->conns, MHD_OPTION_URI_LOG_CALLBACK, uri_seen, s, MHD_OPTION_END);
  if (!d) {
    gs_fail(GS_EBUSY, "cannot listen on %s:%d (%s)", s->addr.host, s->addr.port,
            errno ? strerror(errno) : "libmicrohttpd refused");
    return NULL;
  }
  /* Port 0 asks the kernel for one: the caller says which (tests read it). */
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  if (info && info->port)
    s->addr.port = (int)info->port;
  return d;
}

/* Stops the daemon and what serves beside it: live streams end first (libmicrohttpd must not be
 * stopped with a connection suspended), the reaper last. */
static void daemon_stop(struct serve *s, struct MHD_Daemon *d) {
  serve_live_stop(s);
  if (d)
    MHD_stop_daemon(d);
  serve_live_done(s);
  serve_conns_done(&s->conns);
}

int serve_run(const struct serve_opts *o, volatile sig_atomic_t *stop) {
  struct serve s = {.o = o, .stop = stop};
  int rc = serve_addr_parse(o->listen ? o->listen : SERVE_DEFAULT_LISTEN, &s.addr);
  if (rc || (rc = token_setup(&s, o->token)))
    return rc;
  s.st = store_open_mode(o->store_url, STORE_READ);
  if (!s.st)
    return GS_EIO;
  pthread_mutex_init(&s.mu, NULL);
  serve_live_init(&s);
  pthread_mutex_init(&s.log_mu, NULL);

  /* SIGINT and SIGTERM wait for the main thread's sigsuspend (the daemon's threads inherit the
   * block): an idle server wakes for nothing. */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  struct MHD_Daemon *d = NULL;
  if ((rc = serve_conns_init(&s.conns)))
    goto fail;
  if (!(d = daemon_start(&s))) {
    rc = GS_EBUSY;
    goto fail;
  }
  printf("gpuscope serve: listening on http://%s%s%s:%d/\n", s.addr.v6 ? "[" : "", s.addr.host, s.addr.v6 ? "]" : "",
         s.addr.port);
  fflush(stdout);
  while (!*stop)
    sigsuspend(&old);
  rc = GS_OK;
fail:
  daemon_stop(&s, d);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  serve_caches_done(&s);
  s.st->close(s.st);
  pthread_mutex_destroy(&s.mu);
  pthread_mutex_destroy(&s.log_mu);
  return rc;
}

/* ---- one-path endpoints (the agent's /metrics) ---- */

struct serve_endpoint {
  struct serve s;
  struct serve_opts o;
  struct MHD_Daemon *d;
  char path[64];
  char index[160];
};

struct serve_endpoint *serve_endpoint_start(const char *listen, const char *token, const char *path,
                                            serve_endpoint_fn fn, void *user, int quiet) {
  struct serve_endpoint *e = calloc(1, sizeof *e);
  if (!e) {
    gs_fail(GS_ENOMEM, "out of memory");
    return NULL;
  }
  e->o = (struct serve_opts){.listen = listen, .token = token, .quiet = quiet};
  e->s.o = &e->o;
  snprintf(e->path, sizeof e->path, "%s", path);
  snprintf(e->index, sizeof e->index, "gpuscope: metrics at %s\n", path);
  e->s.ep_path = e->path;
  e->s.ep_index = e->index;
  e->s.ep_fn = fn;
  e->s.ep_user = user;
  if (serve_addr_parse(listen, &e->s.addr) || token_setup(&e->s, token))
    goto fail;
  serve_live_init(&e->s);
  pthread_mutex_init(&e->s.log_mu, NULL);
  /* The daemon's threads take no signal: the caller's loop waits for them. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  if (!serve_conns_init(&e->s.conns))
    e->d = daemon_start(&e->s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!e->d) {
    daemon_stop(&e->s, NULL);
    pthread_mutex_destroy(&e->s.log_mu);
    goto fail;
  }
  return e;
fail:
  free(e);
  return NULL;
}

int serve_endpoint_port(const struct serve_endpoint *e) {
  return e ? e->s.addr.port : 0;
}

const char *serve_endpoint_host(const struct serve_endpoint *e) {
  return e ? e->s.addr.host : "";
}

void serve_endpoint_stop(struct serve_endpoint *e) {
  if (!e)
    return;
  daemon_stop(&e->s, e->d);
  pthread_mutex_destroy(&e->s.log_mu);
  free(e);
}
