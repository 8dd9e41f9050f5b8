/* serve/serve_int: what the files of serve/ share — the server's state, one answer in the making,
 * the JSON pieces the API writes, the series downsampler and the live stream. */
#ifndef GS_SERVE_INT_H
#define GS_SERVE_INT_H

#include <pthread.h>
#include <stdio.h>

#include "runview/runview.h"
#include "serve/serve.h"

enum { SERVE_VIEW_CACHE = 8, SERVE_SUMMARY_CACHE = 1024, SERVE_MAX_COMPARE = 16 };

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
};

/* Frees what a cache slot holds and zeroes it. */
void serve_cached_view_done(struct serve_cached_view *c);

/* A finished run's row of the runs list, as JSON text. */
struct serve_cached_summary {
  char id[32];
  int64_t end_wall_ns;
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

struct serve {
  const struct serve_opts *o;
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
  /* A one-path endpoint (serve_endpoint_start) instead of the API: set, the rest is unused. */
  serve_endpoint_fn ep_fn;
  void *ep_user;
  const char *ep_path, *ep_index;
};

/* Frees every cache of s: its views, the runs list's rows and live findings (not s itself). */
void serve_caches_done(struct serve *s);

/* One answer: status, MIME type and a body written through out (an open_memstream). */
struct serve_reply {
  int status;
  const char *mime;
  FILE *out;
  char *body;
  size_t len;
};

/* Query arguments of the request being answered. */
struct serve_args {
  const char *(*get)(void *user, const char *key);
  void *user;
};

/* Starts a reply (status 200, JSON). Returns 0 or GS_ENOMEM. */
int serve_reply_begin(struct serve_reply *r);
/* Replaces whatever was written with {"error": msg} and the status. */
void serve_reply_error(struct serve_reply *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Closes the stream: r->body / r->len are then the body (caller frees body). */
void serve_reply_end(struct serve_reply *r);

/* Loads the view of ref in s->st: a run, or when no run is called ref the group ref (the runs of one
 * distributed job as one, store_group_open: *group is then its store, which the caller closes after
 * runview_done; NULL for a run). Returns 0, or GS_ENOENT / GS_EAMBIG / another GS_E code with a
 * message; v is valid for runview_done either way. */
int serve_view_load(struct serve *s, const char *ref, struct runview *v, struct store **group);

/* The API, under s->mu: path is what follows "/api/" ("runs", "runs/REF/series", "compare"). */
void serve_api(struct serve *s, const char *path, const struct serve_args *a, struct serve_reply *r);

/* ---- JSON pieces (api.c) ---- */
/* "key": */
void serve_json_key(FILE *out, const char *key);
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
 * Writes {"id", "name", ..., "res", "t", "mean"[, "min", "max"]} (min and max only when band is set).
 * Returns 0 or a GS_E code. */
int serve_series_json(FILE *out, const struct runview *v, const struct store_series *s, int64_t from, int64_t to,
                      size_t points, int band);

/* ---- the live stream (live.c) ---- */

struct serve_live;
/* A stream of run_id's new samples from since_ns on; opens its own store handle. NULL with a message
 * on failure. */
struct serve_live *serve_live_new(struct serve *s, const char *run_id, int64_t since_ns);
/* The content reader libmicrohttpd calls for the stream's bytes (blocks up to a second between
 * polls of the store; the connection has a thread of its own). */
ssize_t serve_live_read(void *cls, uint64_t pos, char *buf, size_t max);
void serve_live_free(void *cls);

#endif
