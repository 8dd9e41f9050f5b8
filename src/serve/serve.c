/* serve/serve: the HTTP side of `gpuscope serve` — the libmicrohttpd daemon and its limits, the
 * token check on every request, the Host check that keeps other sites' pages (DNS rebinding) off a
 * loopback server, the embedded web assets, and the hand-off to the JSON API (api.c) and the live
 * stream (live.c). One thread per connection: a live stream blocks in its own thread between polls
 * of the store, and an idle server with no browser sleeps in one poll(). */
#include <arpa/inet.h>
#include <errno.h>
#include "serve/mhd_api.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report/report_int.h"
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

/* ---- replies ---- */

int serve_reply_begin(struct serve_reply *r) {
  memset(r, 0, sizeof *r);
  r->status = MHD_HTTP_OK;
  r->mime = "application/json";
  r->out = open_memstream(&r->body, &r->len);
  return r->out ? GS_OK : gs_fail(GS_ENOMEM, "out of memory");
}

void serve_reply_error(struct serve_reply *r, int status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->status = status;
  r->mime = "application/json";
  if (r->out) /* what was written so far goes */
    fclose(r->out);
  free(r->body);
  r->body = NULL;
  r->len = 0;
  r->out = open_memstream(&r->body, &r->len);
  if (!r->out)
    return;
  fputs("{\"error\":", r->out);
  /* the message may quote the request (a run reference): escaped like any store text */
  rp_json_str(r->out, msg);
  fputs("}\n", r->out);
}

void serve_reply_end(struct serve_reply *r) {
  if (r->out) {
    fclose(r->out);
    r->out = NULL;
  }
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

static int authorized(struct serve *s, struct MHD_Connection *c) {
  if (!s->token_len)
    return 1;
  const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  if (h && !strncasecmp(h, "Bearer ", 7)) {
    h += 7;
    return serve_token_equal(h, strlen(h), s->token, s->token_len);
  }
  const char *k = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, COOKIE_NAME);
  return k && serve_token_equal(k, strlen(k), s->token, s->token_len);
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
  struct serve_live *l = serve_live_new(s, run.id, since_ns);
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
  if (s->token_len) {
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncasecmp(h, "Bearer ", 7) || !serve_token_equal(h + 7, strlen(h + 7), s->token, s->token_len))
      return queue_text(c, MHD_HTTP_UNAUTHORIZED, "text/plain; charset=utf-8",
                        "gpuscope: a token is needed (Authorization: Bearer T)\n");
  }
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

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls) {
  (void)version;
  (void)upload_data;
  struct serve *s = cls;
  static int first_call_marker;
  enum MHD_Result refused;
  if (request_refused(s, c, url, method, upload_data_size, &refused))
    return refused; /* decided on the headers (MHD then closes the connection): a body is never read */
  if (!*con_cls) {
    /* The first call has only the headers. An answer queued now makes libmicrohttpd (0.9.75) read
     * no more of the connection and close it after the answer ("Connection: close"), so a scraper's
     * every request would cost a new connection and a new thread: answer on the next call, once
     * MHD has the whole request, and the connection stays open (HTTP/1.1 keep-alive). */
    *con_cls = &first_call_marker;
    return MHD_YES;
  }
  if (s->ep_fn)
    return endpoint_handle(s, c, url);
  if (!authorized(s, c)) {
    /* /?token=T once: the token becomes a cookie and leaves the address bar. */
    const char *t = arg_get(c, "token");
    if (s->token_len && t && !strcmp(url, "/") && serve_token_equal(t, strlen(t), s->token, s->token_len)) {
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
    if (!strncmp(url, "/api/", 5))
      return queue_json_error(c, MHD_HTTP_UNAUTHORIZED, "a token is needed (Authorization: Bearer T)");
    return queue_text(c, MHD_HTTP_UNAUTHORIZED, "text/plain; charset=utf-8",
                      "gpuscope: this server needs its token: open /?token=T once\n");
  }
  if (strncmp(url, "/api/", 5))
    return serve_asset(c, url);
  const char *path = url + 5;
  if (is_live_path(path))
    return live_stream(s, c, path);
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
  struct MHD_Response *resp = MHD_create_response_from_buffer(r.len, r.body, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(r.body);
    return MHD_NO;
  }
  /* the server's own time for the answer (bench/serve_bench.py reads it) */
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

static void log_mhd(void *cls, const char *fmt, va_list ap) {
  struct serve *s = cls;
  if (s->o->quiet)
    return;
  fputs("gpuscope serve: ", stderr);
  vfprintf(stderr, fmt, ap);
}

/* The token rules of every listener: required off loopback, at most 256 printable bytes. */
static int token_setup(struct serve *s, const char *token) {
  s->token = token && *token ? token : NULL;
  s->token_len = s->token ? strlen(s->token) : 0;
  if (!s->addr.loopback && !s->token)
    return gs_fail(GS_EINVAL, "listening on %s (not loopback) needs a token: --token T or GPUSCOPE_TOKEN",
                   s->addr.host);
  if (s->token_len > 256)
    return gs_fail(GS_EINVAL, "the token is longer than 256 bytes");
  for (const char *p = s->token; p && *p; p++)
    if ((unsigned char)*p <= 0x20 || *p == ';' || *p == ',' || (unsigned char)*p >= 0x7f)
      return gs_fail(GS_EINVAL, "the token must be printable ASCII without spaces, ';' or ','");
  return GS_OK;
}

/* Starts the daemon on s->addr with serve's limits; s->addr.port becomes the bound port. The
 * caller blocks SIGINT/SIGTERM first when the daemon's threads must not take them. Returns the
 * daemon, or NULL with GS_EBUSY's message. */
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
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG |
                   (s->addr.v6 ? MHD_USE_IPv6 : 0);
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, (uint16_t)s->addr.port, NULL, NULL, handle, s, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, s,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVE_MAX_CONNECTIONS,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)SERVE_MAX_PER_IP, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
      (size_t)SERVE_CONN_MEMORY, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVE_CONN_TIMEOUT_S, MHD_OPTION_END);
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

int serve_run(const struct serve_opts *o, volatile sig_atomic_t *stop) {
  struct serve s = {.o = o, .stop = stop};
  int rc = serve_addr_parse(o->listen ? o->listen : SERVE_DEFAULT_LISTEN, &s.addr);
  if (rc || (rc = token_setup(&s, o->token)))
    return rc;
  s.st = store_open_mode(o->store_url, STORE_READ);
  if (!s.st)
    return GS_EIO;
  pthread_mutex_init(&s.mu, NULL);

  /* SIGINT and SIGTERM wait for the main thread's sigsuspend (the daemon's threads inherit the
   * block): an idle server wakes for nothing. */
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  struct MHD_Daemon *d = daemon_start(&s);
  if (!d) {
    rc = GS_EBUSY;
    goto done;
  }
  printf("gpuscope serve: listening on http://%s%s%s:%d/\n", s.addr.v6 ? "[" : "", s.addr.host, s.addr.v6 ? "]" : "",
         s.addr.port);
  fflush(stdout);
  while (!*stop)
    sigsuspend(&old);
  MHD_stop_daemon(d);
  rc = GS_OK;
done:
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  serve_caches_done(&s);
  s.st->close(s.st);
  pthread_mutex_destroy(&s.mu);
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
  /* The daemon's threads take no signal: the caller's loop waits for them. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  e->d = daemon_start(&e->s);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (!e->d)
    goto fail;
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
  MHD_stop_daemon(e->d);
  free(e);
}
