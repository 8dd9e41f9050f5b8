/* serve/serve_int: what the files of serve/ share — the server's state, its record of connections,
 * one answer in the making, the JSON pieces the API writes, the series downsampler and its stream,
 * and the live streams. */
#ifndef GS_SERVE_INT_H
#define GS_SERVE_INT_H

#include "serve/mhd_api.h"
#include <pthread.h>
#include <stdio.h>
#include <sys/socket.h>

#include "runview/runview.h"
#include "serve/serve.h"

enum { SERVE_VIEW_CACHE = 8, SERVE_SUMMARY_CACHE = 1024, SERVE_MAX_COMPARE = 16, SERVE_LOG_PER_S = 10 };

/* A finished run's view, kept between requests (a finished run no longer changes). */
struct serve_cached_view {
  char id[32];
  int64_t end_wall_ns;
  unsigned long long used; /* LRU clock */
  struct runview v;
  int loaded;
  char *run_json; /* the /api/runs/REF answer, once made */
  size_t run_json_len;
  struct store_finding *diag; /* the doctor's diagnosis when the run has no stored findings */
  size_t ndiag;
  int diag_done;
  struct store *group; /* a group's view: the store_group_open store it reads (owned), else NULL */
  int pins;            /* series answers still streaming from it: not evicted while > 0 */
};

/* Frees what a cache slot holds and zeroes it. */
void serve_cached_view_done(struct serve_cached_view *c);

/* A finished run's row of the runs list, as JSON text. */
struct serve_cached_summary {
  char id[32];
  int64_t end_wall_ns;
  char name[128], tags[1024]; /* as when cached: `gpuscope rename` and `tag` change them later */
  char *json;
};

/* A running run's live findings for the runs list, recomputed at most every SERVE_LIVE_LIST_S. */
enum { SERVE_LIVE_LIST = 16, SERVE_LIVE_LIST_S = 30 };
struct serve_live_list {
  char id[32];
  double at; /* monotonic seconds */
  struct store_finding *f;
  size_t n;
};

/* ---- connections (conns.c) ---- */

/* One open connection. */
struct serve_conn {
  struct serve_conn *prev, *next;
  int fd;
  unsigned char key[17]; /* its address (conns.c: addr_key) */
  size_t keylen;
  int waiting; /* for a request's headers, since `since` (monotonic s) */
  double since;
  int reaped; /* shut down for taking too long */
};

enum { SERVE_TOKEN_FAIL_SLOTS = 256 };
struct serve_token_fails {
  unsigned char key[17];
  size_t keylen;
  double window_start;
  int count;
};

struct serve_conns {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct serve_conn *head;
  size_t n;
  unsigned long long reaped;
  struct serve_token_fails fails[SERVE_TOKEN_FAIL_SLOTS];
  pthread_t reaper;
  int stop, started, idle; /* idle: the reaper waits with no deadline */
};

/* Starts the reaper thread (the caller blocks signals first). Returns 0 or GS_EIO. */
int serve_conns_init(struct serve_conns *k);
/* Stops the reaper, after the daemon has stopped. A never-started k is a no-op. */
void serve_conns_done(struct serve_conns *k);
/* libmicrohttpd's callbacks, cls the serve_conns: the accept policy (per-address limit), the
 * connection's start and close (socket context) and each request's end. */
enum MHD_Result serve_conns_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen);
void serve_conns_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe);
void serve_conns_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                           enum MHD_RequestTerminationCode toe);
/* The request's headers are complete (the handler's first call): its deadline no longer runs. */
void serve_conns_headers_done(struct serve_conns *k, struct MHD_Connection *connection);
/* Connections open now. */
size_t serve_conns_count(struct serve_conns *k);
/* Seconds until the connection's address may try a token again (0: now). */
int serve_conns_token_blocked(struct serve_conns *k, struct MHD_Connection *connection);
/* Counts a wrong token from the connection's address. */
void serve_conns_token_failed(struct serve_conns *k, struct MHD_Connection *connection);

struct serve_live_hub;

struct serve {
  const struct serve_opts *o;
  struct serve_conns conns;
  struct serve_addr addr;
  const char *token;
  size_t token_len;
  volatile sig_atomic_t *stop;
  /* The API's store handle and everything cached over it, under mu (SQLite connections are not
   * shared between threads; live streams open their own). */
  pthread_mutex_t mu;
  struct store *st;
  struct serve_cached_view views[SERVE_VIEW_CACHE];
  unsigned long long clock;
  struct serve_cached_summary *summaries;
  size_t nsummaries;
  struct serve_live_list live[SERVE_LIVE_LIST];
  /* The live runs being streamed, one reader each (live.c), under live_mu. */
  pthread_mutex_t live_mu;
  pthread_cond_t live_cv; /* signalled when a hub ends */
  struct serve_live_hub *hubs;
  int live_stopping;
  /* libmicrohttpd's messages this second (serve.c: log_mhd) */
  pthread_mutex_t log_mu;
  int64_t log_sec;
  unsigned log_n, log_dropped;
  /* A one-path endpoint (serve_endpoint_start) instead of the API: set, the rest is unused. */
  serve_endpoint_fn ep_fn;
  void *ep_user;
  const char *ep_path, *ep_index;
};

/* Frees every cache of s: its views, the runs list's rows and live findings (not s itself). */
void serve_caches_done(struct serve *s);

struct serve_series_stream;

/* One answer: status, MIME type and a body written through out (an open_memstream); or, when
 * stream is set, a series answer written as the client reads it (series.c). */
struct serve_reply {
  int status;
  const char *mime;
  FILE *out;
  char *body;
  size_t len;
  struct serve_series_stream *stream;
};

/* Query arguments of the request being answered. */
struct serve_args {
  const char *(*get)(void *user, const char *key);
  void *user;
};

/* ---- replies (reply.c) ---- */

/* Starts a reply (status 200, JSON). Returns 0 or GS_ENOMEM. */
int serve_reply_begin(struct serve_reply *r);
/* Replaces whatever was written with {"error": msg} and the status. */
void serve_reply_error(struct serve_reply *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Closes the stream: r->body / r->len are then the body (caller frees body). */
void serve_reply_end(struct serve_reply *r);

/* ---- views (views.c) ---- */

/* Loads the view of ref in s->st: a run, or when no run is called ref the group ref (the runs of one
 * distributed job as one, store_group_open: *group is then its store, which the caller closes after
 * runview_done; NULL for a run). Returns 0, or GS_ENOENT / GS_EAMBIG / another GS_E code with a
 * message; v is valid for runview_done either way. */
int serve_view_load(struct serve *s, const char *ref, struct runview *v, struct store **group);

/* The view of ref (a run or a group): a cached one for a finished run (owned by the cache, *entry its
 * slot), else loaded now into *fresh (the caller runs serve_cached_view_done on it either way; *entry
 * NULL). Under s->mu. Returns 0, or the GS_E code with the reply set. */
int serve_view_get(struct serve *s, const char *ref, struct serve_reply *r, const struct runview **out,
                   struct serve_cached_view *fresh, struct serve_cached_view **entry);

/* The API, under s->mu: path is what follows "/api/" ("runs", "runs/REF/series", "compare"). */
void serve_api(struct serve *s, const char *path, const struct serve_args *a, struct serve_reply *r);

/* GET /api/runs/REF/log[?from=SEQ|tail=BYTES] (api_log.c): the job's output of run ref in st as JSON
 * into out (under s->mu). Returns 0, or a GS_E code with a message and *status the HTTP status to
 * answer with (404 no such run, 409 ambiguous, 400 bad arguments, 500). */
int serve_log_json(struct store *st, const char *ref, const char *from, const char *tail, FILE *out, int *status);

/* ---- JSON pieces (reply.c) ---- */
/* "key": */
void serve_json_key(FILE *out, const char *key);
/* "key":"v", and "key":v (null when not finite), each with a trailing comma. */
void serve_json_kstr(FILE *out, const char *key, const char *v);
void serve_json_knum(FILE *out, const char *key, double v);
void serve_json_finding(FILE *out, const struct store_finding *f);
/* The findings array [ ... ]. */
void serve_json_findings(FILE *out, const struct store_finding *f, size_t n);
/* Seconds from store nanoseconds. */
double serve_sec(int64_t ns);

/* ---- downsampling (series.c) ---- */

/* One series over [from, to] (ns since run start) in at most points buckets: raw samples when they
 * fit (a null between samples further apart than 2.5 typical spacings: missing is not zero), else
 * the min, max and mean of each bucket from raw samples or, for a long window, the store's rollups
 * (bucket minima and maxima, so a dip shorter than a bucket still reaches the band's lower edge).
 * Writes {"id", "name", ..., "res", "t", "mean"[, "min", "max"]} (min and max only when band is set;
 * raw samples of a client metric whose values came with steps also "step", null where one had none).
 * Returns 0 or a GS_E code. */
int serve_series_json(FILE *out, const struct runview *v, const struct store_series *s, int64_t from, int64_t to,
                      size_t points, int band);

/* A series answer streamed as the client reads it: {"run": id, "series": [...]}, one series built at
 * a time under s->mu (the lock is free between them, and at most one series' JSON is held). Takes
 * the view: a cached entry is pinned (unpinned when the stream is freed), a fresh one moved into the
 * stream (*fresh is then zeroed). series are copied. NULL on no memory (the view left as it was). */
struct serve_series_stream *serve_series_stream_new(struct serve *s, struct serve_cached_view *entry,
                                                    struct serve_cached_view *fresh, const struct runview *v,
                                                    const struct store_series *series, size_t n, int64_t from,
                                                    int64_t to, size_t points, int band);
/* libmicrohttpd's content reader and free callback of the stream. */
ssize_t serve_series_stream_read(void *cls, uint64_t pos, char *buf, size_t max);
void serve_series_stream_free(void *cls);

/* ---- the live stream (live.c) ---- */

struct serve_live;
/* One viewer of run_id's live stream, from since_ns on (-1: from now), on connection c: joins the
 * run's hub (one reader of the store per live run, its events shared by every viewer), started when
 * it has none. NULL with a message on failure (GS_EBUSY: the server is stopping). */
struct serve_live *serve_live_new(struct serve *s, const char *run_id, int64_t since_ns, struct MHD_Connection *c);
/* The content reader libmicrohttpd calls for the viewer's bytes: never blocks (with nothing to send,
 * it suspends the connection; the hub resumes it when it has more). */
ssize_t serve_live_read(void *cls, uint64_t pos, char *buf, size_t max);
void serve_live_free(void *cls);
/* Sets up s's hub list; serve_live_stop ends every stream (before the daemon stops: libmicrohttpd
 * must not be stopped with a suspended connection); serve_live_done waits for the hubs to end (after
 * the daemon stopped) and frees the list's lock. */
void serve_live_init(struct serve *s);
void serve_live_stop(struct serve *s);
void serve_live_done(struct serve *s);

#endif
