/* store/store_backend: what the store's back ends share, private to src/store/. store.c lists the
 * back ends in one array and picks one by URL scheme; each back end (store_sqlite.c today) fills a
 * `struct store` and uses the back-end-independent pieces declared here: the rollup maths
 * (rollup.c) and the batch kept across failed appends (pending.c). Nothing here calls back into
 * store.c, so the files form no cycle: store.c -> back ends -> rollup.c, pending.c, store_util.c. */
#ifndef GS_STORE_BACKEND_H
#define GS_STORE_BACKEND_H

#include "store/chunk.h"
#include "store/store.h"

struct store_backend {
  int version;        /* 1 */
  const char *scheme; /* "sqlite": the URL scheme before "://" */
  /* Opens the store at location (what follows "scheme://"). NULL with gs_last_error() set on
   * failure; see store_open_mode() for the codes. */
  struct store *(*open)(const char *location, enum store_mode mode);
};

extern const struct store_backend store_backend_sqlite;
/* postgresql:// and postgres:// (store_pg.c): the same back end under both of libpq's schemes. */
extern const struct store_backend store_backend_postgresql, store_backend_postgres;

/* Where a paged read of a run's events stands: after the event at time t with row key `key`. */
struct store_event_cursor {
  int64_t t, key;
};
#define STORE_EVENT_CURSOR_START ((struct store_event_cursor){INT64_MIN, INT64_MIN})
/* The SQLite back end's own (sqlite_read.c), for the PostgreSQL spool (an SQLite store): the next
 * at most max events of run_id after *cur, in time order, into *out (malloc'd, *n of them; fewer
 * than max: the last page), and *cur moved past them. Returns 0 or a GS_E code (*out NULL). */
int store_sqlite_events_page(struct store *st, const char *run_id, struct store_event_cursor *cur, size_t max,
                             struct store_event **out, size_t *n);

/* ---- rollups (rollup.c): min/max/mean per time bucket, the same for every back end ---- */

/* Resolutions written at run end: 1 s, 10 s, 60 s. */
extern const int64_t STORE_ROLLUP_RES[];
enum { STORE_N_ROLLUP_RES = 3 };
/* A resolution is stored only when its buckets summarise this many points on average: a rollup row
 * costs ~40 bytes, more than the ten 10 Hz points of a 1 s bucket, and a level that is not stored
 * is computed from the chunks when read, with the same values. */
enum { STORE_ROLLUP_MIN_POINTS = 20 };

/* An accumulator of one resolution: feed points in time order with rollup_point(), close the last
 * bucket with rollup_emit(); the buckets are in t/mn/mx/mean[0..len) (malloc'd; rollup_done frees
 * them). oom is set (and feeding stops) when an allocation failed. */
struct rollup_acc {
  int64_t res, bucket;
  double min, max, sum;
  int64_t n;
  int64_t *t;
  double *mn, *mx, *mean;
  size_t len, cap;
  int oom;
};

/* A store_sample_fn: adds (t, v) to the accumulator u; returns non-zero (stop) after an OOM. */
int rollup_point(void *u, int64_t t, double v);
/* Closes the open bucket (if any) into the arrays. */
void rollup_emit(struct rollup_acc *a);
/* Appends one finished bucket (as read back from a store). */
void rollup_add_bucket(struct rollup_acc *a, int64_t t, double min, double max, double mean);
void rollup_done(struct rollup_acc *a);
/* The end of every back end's rollups_read: a with the stored buckets it read (rc: how that read
 * went). When none are stored (a crashed run, a short one) they are computed from st's raw chunks.
 * Hands a's arrays to the caller (0), or frees them and returns the GS_E code. */
int rollup_read_finish(struct store *st, int64_t series_id, struct rollup_acc *a, int rc, int64_t **t, double **mn,
                       double **mx, double **mean, size_t *n);

/* Every stored resolution in one pass over a series. */
struct rollup_all {
  struct rollup_acc a[STORE_N_ROLLUP_RES];
  int64_t points;
};
void rollup_all_init(struct rollup_all *all);
/* A store_sample_fn over a struct rollup_all. */
int rollup_all_point(void *u, int64_t t, double v);
/* True when resolution a (of all) is worth storing (STORE_ROLLUP_MIN_POINTS). */
int rollup_worth_storing(const struct rollup_all *all, const struct rollup_acc *a);

/* Packed buckets: at most this many a block, and a block stops before this many bytes (so a row
 * stays in its page). */
enum { STORE_ROLLUP_BLOCK_BUCKETS = 256, STORE_ROLLUP_BLOCK_BYTES = 6000 };
/* Encodes the buckets of a from index `from` on, as many as fit one block (at least one), into *buf
 * (malloc'd, *len bytes): three chunks (chunk.c) of the same times — minimums, maximums, means —
 * the first two preceded by their length (32 bits, big-endian). *to is the index after the last
 * bucket taken. Returns 0 or GS_ENOMEM. */
int rollup_block_encode(const struct rollup_acc *a, size_t from, size_t *to, uint8_t **buf, size_t *len);
/* Appends the n buckets of a block to a. Returns 0, GS_ECORRUPT (a is then partly filled) or
 * GS_ENOMEM. */
int rollup_block_decode(const uint8_t *buf, size_t len, uint32_t n, struct rollup_acc *a);

/* ---- what failed appends leave behind (pending.c) ---- */

/* A batch the back end could not write, kept to be written with the next append. It owns copies
 * of everything; points beyond STORE_PENDING_MAX_POINTS and events beyond STORE_PENDING_MAX_EVENTS
 * are dropped and counted in the stats. */
struct store_pending {
  struct gs_batch b;
};

/* Copies src's series, points, events, params and notes after what p holds. Returns GS_OK, or
 * GS_ENOMEM (what could not be copied is counted as dropped). */
int store_pending_add(struct store_pending *p, const struct gs_batch *src, struct store_write_stats *stats);
/* True when p holds anything to write. */
int store_pending_any(const struct store_pending *p);
/* Empties p (frees what it holds; p can be reused). */
void store_pending_clear(struct store_pending *p);
/* Frees everything p holds; p is then empty (a zeroed struct is empty too). */
void store_pending_done(struct store_pending *p);

/* ---- the writer's state (writer.c), the same for every back end ---- */

/* The writer state of one sink series. A back end with fields of its own embeds it first in a
 * struct of its own; those fields are zero in a fresh state and after store_wseries_clear. */
struct store_wseries {
  int64_t db_id; /* -1: no row in the series table (yet) */
  int added;     /* its series row was inserted by the transaction in progress */
  int dirty;     /* enc holds points the store does not have yet */
  int sealed;    /* enc holds a chunk the store has closed already (read back for its times): new points
                  * start a chunk */
  struct chunk_enc enc;
};

/* A back end's writer: a state per sink series id, the batch kept across failed appends. A zeroed
 * struct is an empty writer of plain struct store_wseries; set elem first for a larger one. */
struct store_writer {
  unsigned char *ws;            /* n states of elem bytes, indexed by sink series id */
  size_t n, elem;               /* elem 0: sizeof(struct store_wseries) */
  int stale;                    /* a write was rolled back: reload the open chunks before the next one */
  struct store_pending pending; /* what failed appends left, written with the next one */
};

/* The state of sink series i (i < w->n). */
struct store_wseries *store_writer_at(struct store_writer *w, size_t i);
/* Makes room for sink series id (new states: no row, an empty encoder). 0 or GS_ENOMEM. */
int store_writer_ensure(struct store_writer *w, int id);
/* The state of sink series id when it has a row in the store, else NULL. */
struct store_wseries *store_writer_series(struct store_writer *w, int id);
/* Empties a series' encoder and clears its flags and the back end's own fields (its row stays). */
void store_wseries_clear(struct store_writer *w, struct store_wseries *x);
/* The transaction was rolled back: series rows it added are gone, and the encoders hold points the
 * store does not; stale is set, so the open chunks are reloaded before the next write. */
void store_writer_forget(struct store_writer *w);
/* The transaction committed: its new series rows are the store's; stale is cleared. */
void store_writer_committed(struct store_writer *w);
/* How a back end writes one series' chunk (ctx its own); returns 0 or a GS_E code. */
typedef int (*store_chunk_fn)(void *ctx, struct store_wseries *x);
/* Puts b's points into their series' encoders (times made relative with r->mono_start_ns; a point at
 * or before its series' last is skipped: a series only moves forward). A chunk that is full is
 * written by seal(ctx, x) before it closes (unless sealed already); at the end, write(ctx, x) for
 * every series with unwritten points. Returns 0, the first callback error, or GS_ENOMEM. */
int store_writer_points(struct store_writer *w, const struct store_run *r, const struct gs_batch *b,
                        store_chunk_fn seal, store_chunk_fn write, void *ctx);
/* Counts a failed append in st (the first error's message kept, the points still pending). */
void store_writer_failed(struct store_writer *w, struct store_write_stats *st);
/* The pending batch is written: empties it (st->points_pending 0). */
void store_writer_clear(struct store_writer *w, struct store_write_stats *st);
/* What an append of b writes: b, or (when failed appends left a batch) that batch with b added. */
const struct gs_batch *store_writer_todo(struct store_writer *w, struct store_write_stats *st,
                                         const struct gs_batch *b);
/* After todo (from store_writer_todo) was written with result rc: on success the pending batch is
 * emptied; on failure b is kept in it (bounded) and the failure counted. Returns rc. */
int store_writer_wrote(struct store_writer *w, struct store_write_stats *st, const struct gs_batch *b,
                       const struct gs_batch *todo, int rc);
/* A back end's batch write (one transaction) and its run-end write (status, exit code, end time
 * and the note from the stats, one transaction); ctx its own. 0 or a GS_E code. */
typedef int (*store_batch_fn)(void *ctx, const struct store_run *r, const struct gs_batch *b);
typedef int (*store_end_fn)(void *ctx, const struct store_run *r);
/* The first part of every back end's run_end: writes what failed appends kept (write), then the
 * run's end (end). What cannot be written is counted as not kept in the end's note; when the end
 * fails too it is kept, and the stats restored, for a later run_end. Returns 0 or end's error. */
int store_writer_end(struct store_writer *w, struct store_write_stats *st, const struct store_run *r,
                     store_batch_fn write, store_end_fn end, void *ctx);
/* A run begins on this handle: its sink numbers its series from 0 again, so the last run's series
 * states (row ids, encoders) are let go — else its points would land in the last run's series. */
void store_writer_new_run(struct store_writer *w);
/* Frees the states and the pending batch; w is then empty. */
void store_writer_done(struct store_writer *w);

/* ---- runs (store_util.c), the same for every back end ---- */

/* A running run that has not written for this long is crashed whatever its host (an agent on
 * another node that died). */
#define STORE_STALE_HEARTBEAT_NS (120LL * GS_NS_PER_S)
/* A new run id: 26 characters of Crockford base32 (lower case), 10 of milliseconds since the epoch
 * then 16 random (/dev/urandom), so ids sort by start time; out holds at least 27 bytes. */
void store_make_run_id(char *out);
/* This boot's id (/proc/sys/kernel/random/boot_id), "" when unknown. */
void store_boot_id(char *buf, size_t n);
/* Appends the point (series, t_ns, v) to b's points, growing them by doubling (4096 at first).
 * Returns 0, or GS_ENOMEM with b unchanged. For the readers that rebuild a batch from stored points
 * (the PostgreSQL spool's replay, SQLite's kept file). */
int store_batch_push(struct gs_batch *b, int32_t series, int64_t t_ns, double v);
/* The folders a spool may be in, best first, into dirs (at most max); returns how many:
 * $GPUSCOPE_SPOOL_DIR, else the data folder's gpuscope/spool ($XDG_DATA_HOME, else
 * ~/.local/share); then the state folder's gpuscope/spool ($XDG_STATE_HOME, else ~/.local/state);
 * then ${TMPDIR:-/tmp}/gpuscope-spool-UID. A writer whose store cannot take the run (a server
 * away or refusing, a full disk) keeps it in the first of them that takes it, as
 * spool-RUNID.db (RUNID the store's run id); readers look in all of them. */
enum { STORE_SPOOL_DIRS = 3, STORE_SPOOL_DIR_MAX = 900 };
int store_spool_dirs(char dirs[][STORE_SPOOL_DIR_MAX], int max);
/* When a spool of run r (its id) holds the run's end — the agent closed the run there because
 * its store could not take it — copies its status, exit code and end time into r and returns 1;
 * else 0 (no spool, or one whose run is still open). */
int store_spool_end(struct store_run *r);
/* When "running" run r's agent is gone — its pid dead on this boot of this host (run_boot: the
 * boot it started on), or no heartbeat for STORE_STALE_HEARTBEAT_NS — marks r crashed (ended at
 * its last heartbeat) and returns 1, for the back end to record; else 0. A run whose end is kept
 * in a spool (store_spool_end) is not crashed: r takes the spool's end, and 0 is returned (the
 * spool's replay records it). */
int store_settle_crashed(struct store_run *r, int64_t heartbeat, const char *run_boot);

/* ---- resolving a run reference (store_util.c), the same for every back end ---- */

/* The lookups a reference goes through, in this order: "last" is the newest run; otherwise an exact
 * id, then the newest run of that name, then a unique id prefix. */
enum store_ref_kind { STORE_REF_LAST, STORE_REF_ID, STORE_REF_NAME, STORE_REF_PREFIX };
/* A back end's query for one lookup: the runs matching ref as kind says, newest first, in *runs
 * (malloc'd). Returns 0 or a GS_E code. */
typedef int (*store_ref_query_fn)(void *ctx, enum store_ref_kind kind, const char *ref, struct store_run **runs,
                                  size_t *n);
/* run_get for any back end: resolves ref through q into *out. GS_ENOENT when nothing matches,
 * GS_EAMBIG when a prefix matches several, or q's error. */
int store_resolve_ref(const char *ref, store_ref_query_fn q, void *ctx, struct store_run *out);

#endif
