/* serve: `gpuscope serve` — the run pages in a browser, live. An HTTP server (libmicrohttpd) that
 * answers a JSON API over the store (docs/api.md: runs, run, series, steps, findings, compare, and a
 * Server-Sent Events stream of newly committed samples and findings) and the web front end (web/),
 * whose built assets are embedded in the binary. Every answer is built on a run view (runview.h)
 * and, for downsampled series, on the store's min/max rollups, so an idle dip is never averaged away.
 *
 * The server writes nothing to the store. It listens on loopback by default; on any other address
 * a token is required, checked in constant time on every request, and wrong ones are counted per
 * address. Connections, header sizes and times, query arguments, the points of an answer and idle
 * time per connection are limited (SERVE_* below); a few threads wait on every connection (epoll), so
 * slow clients held open cost memory, not threads. */
#ifndef GS_SERVE_H
#define GS_SERVE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runview/runview.h"
#include "store/store.h"

#define SERVE_DEFAULT_LISTEN "127.0.0.1:7733"
enum {
  SERVE_MAX_CONNECTIONS = 4096, /* at once, all clients (fewer when the descriptor limit is lower) */
  SERVE_MAX_PER_IP = 64,        /* at once, from one address other than loopback */
  SERVE_THREADS = 4,            /* the server's threads: each waits on many connections (epoll) */
  SERVE_CONN_MEMORY = 32768,    /* per connection: request line and headers must fit */
  SERVE_HEADER_TIMEOUT_S = 10,  /* a request's headers must be complete this long after the connection
                                   opened or its previous answer went, however slowly they trickle */
  SERVE_CONN_TIMEOUT_S = 30,    /* a client silent (or not reading) this long is dropped */
  SERVE_SEND_TIMEOUT_S = 10,    /* ... and one not reading a streamed series answer this long */
  SERVE_MAX_ARGS = 32,          /* query arguments of one request (more: 414) */
  SERVE_TOKEN_MIN = 16,         /* bytes of a token, at least */
  SERVE_TOKEN_FAILS = 10,       /* wrong tokens from one address in SERVE_TOKEN_WINDOW_S, then 429 */
  SERVE_TOKEN_WINDOW_S = 60,
  SERVE_MAX_POINTS = 10000, /* most points one series answer may hold */
  SERVE_DEFAULT_POINTS = 1000,
  SERVE_MAX_IDS = 256,              /* series of one series request */
  SERVE_MAX_ANSWER_POINTS = 200000, /* series x points of one series request */
  SERVE_LIVE_FINDINGS_EVERY_S = 5,
  SERVE_LIVE_BUFFER = 4 << 20, /* bytes a live run's viewers may lag behind its stream (more: dropped) */
};

struct serve_opts {
  const char *listen;    /* "HOST:PORT", "[V6]:PORT" or ":PORT"; NULL: SERVE_DEFAULT_LISTEN */
  const char *store_url; /* the store to read (opened once per worker, never written) */
  const char *token;     /* NULL or "": none (only allowed on a loopback address) */
  int quiet;             /* no log lines from the HTTP library */
};

/* An address parsed from --listen. */
struct serve_addr {
  char host[64];
  int port;
  int v6, loopback;
};

/* Parses "HOST:PORT" (numeric IPv4, "[IPv6]", "localhost", or empty for 127.0.0.1). Returns 0 or
 * GS_EINVAL with a message. */
int serve_addr_parse(const char *s, struct serve_addr *a);

/* Runs the server until *stop becomes non-zero: the caller's SIGINT/SIGTERM handler sets it (the two
 * signals are blocked in the server's threads and awaited with sigsuspend, so an idle server never
 * wakes). Returns 0, GS_EINVAL for
 * bad options (a token missing for a non-loopback address), GS_EBUSY when the address cannot be
 * bound, or the store's GS_E code when it cannot be opened; each with a message in gs_last_error(). */
int serve_run(const struct serve_opts *o, volatile sig_atomic_t *stop);

/* Writes one self-contained HTML page to out: the run page of refs[0] (n == 1) or the compare page
 * of refs (2..16, the first the baseline) — the same front end as the server's, its assets inlined
 * and the data embedded, so it opens from file:// with no network. Reads st, writes nothing to it.
 * Returns 0, GS_ENOENT / GS_EAMBIG for a bad reference, GS_EINVAL when the web UI was not built in,
 * or another GS_E code; each with a message. */
int serve_page_write(FILE *out, struct store *st, char *const *refs, size_t n);

/* A one-path HTTP endpoint on serve's server, with its limits and token rules (loopback without a
 * token; any other address needs one, sent as "Authorization: Bearer T"): `gpuscope agent`'s and
 * `gpuscope run --listen`'s /metrics. fn answers GET path: it gets the request's Accept header (or
 * NULL) and returns 0 with a malloc'd *body (the server frees it) and *mime, or a GS_E code (500).
 * It runs in one of the server's few threads, several at once: it must not block for long. "/"
 * answers one line naming path. Returns the running endpoint, or NULL with a message (GS_EINVAL:
 * bad address or token; GS_EBUSY: cannot bind). listen as serve_opts.listen ("HOST:0" picks a free
 * port: serve_endpoint_port()). */
typedef int (*serve_endpoint_fn)(void *user, const char *accept, char **body, size_t *len, const char **mime);
struct serve_endpoint;
struct serve_endpoint *serve_endpoint_start(const char *listen, const char *token, const char *path,
                                            serve_endpoint_fn fn, void *user, int quiet);
int serve_endpoint_port(const struct serve_endpoint *e);
const char *serve_endpoint_host(const struct serve_endpoint *e);
/* Stops the server (waits for the requests in progress). NULL is a no-op. */
void serve_endpoint_stop(struct serve_endpoint *e);

/* Compares two byte strings in time that depends only on their lengths. 1 when equal. */
int serve_token_equal(const char *a, size_t alen, const char *b, size_t blen);

/* One built web asset, embedded by the build (web/CMakeLists.txt generates the table). */
struct serve_asset {
  const char *path; /* "/index.html", "/assets/app.js" */
  const char *mime;
  const unsigned char *data;
  size_t len;
};
extern const struct serve_asset serve_assets[];
extern const size_t serve_nassets;
/* Why the assets are absent, when serve_nassets == 0 ("npm was not found at build time"). */
extern const char serve_assets_missing[];

#endif
