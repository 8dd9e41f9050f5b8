/* store: where runs live. A `struct store` is a table of function pointers with one back end per
 * URL scheme (sqlite://, and postgresql:// or postgres:// for a shared server; both pass one suite). The run loop's
 * writer thread appends batches taken from the sink; read-back commands, the doctor and reports
 * read runs, series, samples, events, params and notes.
 *
 * Time in the store: every sample and event time is nanoseconds since the run's start on the
 * monotonic clock; the run keeps its wall-clock start as the anchor. Samples are kept in chunks per
 * series (delta-of-delta timestamps, XOR floats: the Gorilla scheme) — see chunk.c. */
#ifndef GS_STORE_H
#define GS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

/* 2: chunks may be decimal chunks (chunk.c), which a version-1 gpuscope would misread: it refuses
 * a version-2 store instead. 3: new tables (SCHEMA_V3 in store_sqlite.c; the job's output: logs).
 * A back end may have moved on alone (its struct store's schema_version: PostgreSQL's is 4, rollups
 * packed in blocks since its 3). */
enum { GS_STORE_SCHEMA_VERSION = 3 };

struct store_run {
  char id[32];
  char name[128];
  char group[64];
  char status[16]; /* running, finished, failed, killed, crashed */
  char command[2048];
  char cwd[512];
  char host[128];
  char user[64];
  char tags[1024];                    /* "k=v,k2=v2" */
  int64_t start_wall_ns, end_wall_ns; /* end 0 while running */
  int64_t mono_start_ns;              /* the agent's monotonic clock at start (not stored) */
  int64_t interval_ns;
  int exit_code; /* the job's status as gpuscope exits with it; -1 unknown */
  int agent_pid;
};

struct store_series {
  int64_t id;
  char source[32];
  char name[160];
  char labels[256];
  char unit[16];
  enum gs_kind kind;
  int64_t count;           /* points stored */
  int64_t t_first, t_last; /* ns since run start */
};

struct store_event {
  int64_t t; /* ns since run start */
  char kind[32], name[128], labels[256], text[512];
  double value; /* NAN when none */
};

struct store_finding {
  char rule[32];
  char severity[16]; /* info, low, medium, high */
  double share;      /* of run time lost, 0..1 */
  double lost_s;     /* seconds lost */
  double speedup;    /* estimated speed-up if fixed (1.0 = none) */
  char title[256];
  char evidence[2048]; /* JSON object */
  char fix[4096];
};

/* A search of the runs (store_where.c): a filter, and a start no earlier than since_wall_ns. */
struct store_where;
struct store_query {
  const struct store_where *where; /* NULL: every run */
  int64_t since_wall_ns;           /* 0: any start */
};

/* Callback for sample reads: return non-zero to stop. */
typedef int (*store_sample_fn)(void *user, int64_t t, double v);

/* ---- the job's output (schema 3; sqlite_log.c, pg_log.c) ---- */

/* A piece of the job's output as the agent read it: bytes of one stream, unchanged. */
struct store_log_chunk {
  int64_t seq;    /* its place in the run's output, from 0, over every stream */
  int64_t t;      /* ns since run start when its first byte was read */
  char stream[8]; /* "out", "err", or "tty" (a pseudo-terminal: stdout and stderr as one) */
  const uint8_t *data;
  size_t len;
};
/* Callback for log reads (data valid during the call only): return non-zero to stop. */
typedef int (*store_log_fn)(void *user, const struct store_log_chunk *c);

/* How a store is opened. Only STORE_WRITE creates, only STORE_WRITE and STORE_MIGRATE migrate; a
 * file is a gpuscope store only when its meta table says app = 'gpuscope', and any other file is
 * opened read-only and left as it was, whatever the mode. */
enum store_mode {
  STORE_READ,    /* read-only (runs, show, metrics): never creates, migrates or writes; works on a
                  * read-only file, folder or mount */
  STORE_KEEP,    /* read, and keep derived data (findings, a crashed verdict) in a gpuscope store of
                  * this schema version when it is writable (report, compare); never creates or
                  * migrates; read-only when the file cannot be written */
  STORE_WRITE,   /* gpuscope run: creates the file and its folder when missing, migrates an older
                  * schema, refuses a read-only store */
  STORE_MIGRATE, /* gpuscope migrate: migrates an existing store; never creates one */
};

/* What the writer could not do. A failed append keeps its samples in memory (up to
 * STORE_PENDING_MAX_POINTS) and writes them with the next append; the counters say how many were
 * given up, and run_end records them as a note on the run. */
struct store_write_stats {
  int64_t failed_appends; /* appends that failed (each retried with the next one) */
  int64_t points_pending; /* points kept in memory, waiting for the store to take a write */
  int64_t points_dropped; /* points given up: over the bound, or never written by run_end */
  int64_t events_dropped; /* events, params and notes given up likewise */
  char first_error[256];  /* the first failure's message, naming its cause ("" when none) */
  /* Where the run is kept when the store itself could not take it at its end ("" when the store
   * has it): "the run is kept whole in the local spool PATH because ...". Said instead of the
   * failed writes, which it answers for. */
  char kept_elsewhere[2304];
  /* What the caller should say at once ("" when nothing): the store unreachable when the run
   * begins (an unresolvable host, a server down), and where the run goes meanwhile. The agent
   * prints it after run_begin; it stays until the next run_begin. */
  char notice[3584];
};

enum { STORE_PENDING_MAX_POINTS = 2 * 1024 * 1024, STORE_PENDING_MAX_EVENTS = 65536 };

struct store {
  int version; /* 2: schema_found and stats added; 3: schema_version; 4: run_import; 5: log_append, log_read;
                * 6: the edits and runs_find */
  const char *scheme;
  int schema_found;   /* the schema version the file had when opened (0: created now) */
  int schema_version; /* the back end's own version, that this gpuscope writes (0: GS_STORE_SCHEMA_VERSION) */
  int read_only;      /* opened (or fell back to) read-only: every write fails with GS_EINVAL */
  struct store_write_stats stats;
  /* Inserts a new run in status "running"; fills run->id. Returns 0 or a GS_E code. */
  int (*run_begin)(struct store *st, struct store_run *run);
  /* Appends a batch taken from the sink (times converted with run->mono_start_ns) and refreshes the
   * run's heartbeat, in one transaction. Everything appended, and everything kept from failed
   * appends before, is durable when this returns 0. On failure nothing of it is written, the batch
   * is kept (bounded, see stats) for the next call, and the message names the cause (disk full,
   * file size limit, read-only, locked). The caller still owns and frees b. */
  int (*run_append)(struct store *st, const struct store_run *run, const struct gs_batch *b);
  /* Closes the run: writes what earlier appends kept, then status, exit_code and end time from
   * run (with a note when samples were not kept) in a transaction of their own, then rollups. The
   * status is recorded even when the kept samples cannot be (they are then counted as not kept).
   * Returns 0, or the error of the status write (the run is still open: call again when the store
   * can take a write) or of the rollups (the run is closed; rollups are computed when read). A
   * back end that closes the run elsewhere (PostgreSQL's local spool, the server being away or
   * refusing it) returns 0 and says where in stats.kept_elsewhere; its readers read it there. */
  int (*run_end)(struct store *st, const struct store_run *run);
  /* Lists runs, newest first. *out is malloc'd (caller frees). Runs whose agent died are reported
   * as "crashed" (and recorded so when the store is open to write). */
  int (*runs_list)(struct store *st, struct store_run **out, size_t *n);
  /* Resolves an id, a unique id prefix, a name (newest run of that name) or "last".
   * GS_ENOENT when nothing matches, GS_EAMBIG when a prefix matches several. */
  int (*run_get)(struct store *st, const char *ref, struct store_run *out);
  /* Series of a run (with counts), sorted by source, name, labels. Returns 0 with *out malloc'd (the
   * caller frees it; it may be NULL when *n is 0), or a negative GS_E code with the message in gs_last_error()
   * and *out and *n untouched (nothing to free): GS_ENOMEM, GS_EBUSY, GS_EIO or GS_ECORRUPT, as
   * events_read. An unknown run id is a run with no series (0, *n 0). */
  int (*series_list)(struct store *st, const char *run_id, struct store_series **out, size_t *n);
  /* Streams a series' raw samples with from <= t <= to (ns since run start), in time order. */
  int (*samples_read)(struct store *st, int64_t series_id, int64_t from, int64_t to, store_sample_fn fn, void *user);
  /* Rollups of a series at resolution res_ns (min/max/mean per bucket), computed from the raw
   * chunks when absent. Arrays malloc'd. */
  int (*rollups_read)(struct store *st, int64_t series_id, int64_t res_ns, int64_t **t, double **min, double **max,
                      double **mean, size_t *n);
  /* A run's events in time order (then in the order written). Returns 0 with *out malloc'd (the
   * caller frees it with free(); it may be NULL when *n is 0), or a negative GS_E code with the message in
   * gs_last_error() and *out and *n untouched (nothing to free): GS_ENOMEM, GS_EBUSY (a lock held
   * past the busy timeout), GS_EIO or GS_ECORRUPT (the store's read failed). An unknown run id is a
   * run with no events (0, *n 0). */
  int (*events_read)(struct store *st, const char *run_id, struct store_event **out, size_t *n);
  /* A run's params sorted by key. Returns 0 with *out malloc'd (free with store_kv_free), or a
   * negative GS_E code with the message in gs_last_error() and *out and *n untouched (nothing to
   * free), as events_read. An unknown run id is a run with no params (0, *n 0). */
  int (*params_read)(struct store *st, const char *run_id, struct gs_kv **out, size_t *n);
  /* A run's notes (what it missed, said in words) in time order. Returns 0 with *out malloc'd (free
   * with store_notes_free), or a negative GS_E code with the message in gs_last_error() and *out and
   * *n untouched (nothing to free), as events_read. An unknown run id is a run with no notes (0). */
  int (*notes_read)(struct store *st, const char *run_id, char ***out, size_t *n);
  /* Replaces the run's findings. */
  int (*findings_write)(struct store *st, const char *run_id, const struct store_finding *f, size_t n);
  int (*findings_read)(struct store *st, const char *run_id, struct store_finding **out, size_t *n);
  void (*close)(struct store *st);
  /* Version 4 (moving runs, store_move.c). Inserts a run that keeps run->id (an imported run: the
   * caller has made sure no run of that id is there), in status "running" whatever run->status
   * says; then run_append and run_end write it as they write a new run. Returns 0 or a GS_E code
   * (GS_ESTORE when the store cannot take it now, a server away: nothing is written). NULL in a
   * store that cannot take runs (a group). */
  int (*run_import)(struct store *st, const struct store_run *run);
  /* ---- version 5: the job's output (NULL in a back end without it: a group of runs) ---- */
  /* Stores chunks c[0..n) of run's output (a chunk already there, by run and seq, is left: a replay
   * stores nothing twice) and deletes the run's chunks with seq < keep_from (the bound: the tail
   * is kept), in one transaction. Returns 0 or a GS_E code with a message (nothing written). */
  int (*log_append)(struct store *st, const struct store_run *run, const struct store_log_chunk *c, size_t n,
                    int64_t keep_from);
  /* Calls fn for each stored chunk of run_id with seq >= from_seq, in seq order, until fn returns
   * non-zero. A run without output, or a store older than schema 3, has no chunks (0). Returns 0
   * or a GS_E code with a message. */
  int (*log_read)(struct store *st, const char *run_id, int64_t from_seq, store_log_fn fn, void *user);
  /* ---- what a person edits and searches (version 6; store_meta.c, store_where.c, sqlite_meta.c,
   * pg_meta.c). Each write needs a store open to write (STORE_WRITE or STORE_MIGRATE: GS_EINVAL
   * otherwise) and is one transaction; GS_ENOENT when no run has this id. ---- */
  /* Sets the run's tags to `tags` ("k=v,k2=v2", already checked: store_tags_edit) and its tag.K
   * params to the same pairs (the params every filter reads), dropping the tag.K params of keys
   * it no longer has. */
  int (*run_set_tags)(struct store *st, const char *run_id, const char *tags);
  /* Gives the run a new name (at most 127 bytes). */
  int (*run_rename)(struct store *st, const char *run_id, const char *name);
  /* Adds a note (a person's words) to the run, at the time it is written (ns since the run's
   * start). */
  int (*run_add_note)(struct store *st, const char *run_id, const char *text);
  /* Deletes the run and everything of it: every row of every table with a run_id column, and of
   * every table with a series_id column that names one of its series (samples, rollups, events,
   * params, notes, findings, and what later versions add). A run whose status in the store is
   * "running" is refused with GS_EBUSY (settle it first: run_get records a dead agent's run as
   * crashed on a writable store). */
  int (*run_delete)(struct store *st, const char *run_id);
  /* Gives the room of deleted runs back to the file system where the back end can (SQLite:
   * VACUUM, then a WAL checkpoint that truncates); 0 where it has nothing to do. */
  int (*compact)(struct store *st);
  /* The runs that may match q (store_where.c), newest first, in *out (malloc'd; the caller frees):
   * exactly those when store_where_pushed(q->where), else a superset that the caller narrows with
   * store_where_match. Returns 0 or a GS_E code with the message. */
  int (*runs_find)(struct store *st, const struct store_query *q, struct store_run **out, size_t *n);
};

/* Opens the store named by url ("sqlite:///abs/path", "sqlite://rel/path", or a bare path) in the
 * given mode (see enum store_mode). Returns NULL with a one-line message in gs_last_error() on
 * failure: GS_ENOENT when a mode that does not create finds no file, GS_ECORRUPT for a file that is
 * not a gpuscope store (or a newer one), GS_EINVAL for a bad URL or a path that is a folder, GS_EIO
 * otherwise. Close with st->close(st). */
struct store *store_open_mode(const char *url, enum store_mode mode);

/* store_open_mode(url, STORE_WRITE): what `gpuscope run` and the tests that build stores use. */
struct store *store_open(const char *url);

/* The default store URL: $GPUSCOPE_STORE, else sqlite://$XDG_DATA_HOME/gpuscope/gpuscope.db, else
 * sqlite://$HOME/.local/share/gpuscope/gpuscope.db. Writes into buf; returns buf. */
const char *store_default_url(char *buf, size_t n);

/* Opens the runs of group `name` in src (runs started with --group NAME: the nodes of one
 * distributed job) as one read-only run named NAME, on the group's clock, its distinct GPUs (by UUID)
 * numbered across the group, step series by rank, each host's series once, every other series of
 * every run labelled host=HOST (and run=ID where runs share a host) (store_group.c).
 * src stays the caller's and must outlive the group. Returns NULL with GS_ENOENT when no run has this group. Close with
 * st->close(st). */
struct store *store_group_open(struct store *src, const char *name);

/* Frees arrays returned by params_read / notes_read. */
void store_kv_free(struct gs_kv *kv, size_t n);
void store_notes_free(char **notes, size_t n);

/* Says in one line what the writer could not do ("the store did not keep 1234 samples and 2
 * events: CAUSE", or "2 writes failed and were retried, nothing was lost: CAUSE", or where the run
 * is kept when the store could not take it: stats.kept_elsewhere), into buf.
 * Returns 1 when there is something to say, else 0 (buf ""). */
int store_write_summary(const struct store *st, char *buf, size_t n);

/* Points read from the store in a pair of growing arrays: the one buffer a samples_read callback
 * fills (the run view's raw samples, store_samples_load, serve's charts and live stream). Start it
 * zeroed; store_points_done frees it. */
struct store_points {
  int64_t *t;
  double *v;
  size_t n, cap;
  int oom; /* growing failed: the callback returned 1, stopping the read */
};
/* Room for one more point in p (its arrays doubled when full). Returns 0, or -1 with p->oom set
 * (p keeps what it holds). */
int store_points_reserve(struct store_points *p);
/* samples_read callbacks (user: a struct store_points) that append a point: every one, or only those
 * with a finite value (missing is not zero: a non-finite sample is skipped, never kept). They return
 * 0, or 1 (stop) when memory ran out (oom set). */
int store_points_put_all(void *user, int64_t t, double v);
int store_points_put(void *user, int64_t t, double v);
/* Frees what p holds and zeroes it. */
void store_points_done(struct store_points *p);

/* Reads all samples of one series into malloc'd arrays (helper over samples_read), in time order.
 * Returns 0 with *t and *v the caller's to free (NULL when *n is 0), or a negative GS_E code
 * (GS_ENOMEM, or samples_read's: GS_ECORRUPT for a damaged chunk, GS_EBUSY, GS_EIO) with the
 * message in gs_last_error() and *t, *v and *n untouched (nothing to free): nothing read is kept,
 * so a damaged chunk is never half a series. An unknown series id is an empty series (0, *n 0). Prefer the run view
 * (runview.h), which applies the rollup policy; this reads every raw point. */
int store_samples_load(struct store *st, int64_t series_id, int64_t **t, double **v, size_t *n);

/* Finds a series of a run by source (NULL: any), name and labels (NULL: any; "" matches ""), in
 * an array from series_list. Returns its index or -1. */
long store_series_find(const struct store_series *s, size_t n, const char *source, const char *name,
                       const char *labels);

/* The steps that came with a client metric's values. The agent keeps a value's step in a companion
 * series (source "client.step", the metric's name and labels, one point at the value's exact time:
 * docs/protocol.md), never a value of its own: readers show it as the step of its metric's point. */
struct store_steps {
  struct store_points p; /* the companion's points: t, and the step as v */
  size_t i;              /* the cursor of store_steps_at */
};
/* 1 when s is such a companion (source "client.step"): a reader shows it as steps, not as a series. */
int store_series_is_steps(const struct store_series *s);
/* Reads into out (zeroed by this call) the steps of metric series s from the list of its run's n
 * series, within [from, to]. Returns 0 — out empty when s has no companion — or a negative GS_E
 * code of samples_read's (GS_ENOMEM when memory ran out) with out empty. Free with
 * store_steps_done. */
int store_steps_load(struct store *st, const struct store_series *list, size_t n, const struct store_series *s,
                     int64_t from, int64_t to, struct store_steps *out);
/* The step of the value at time t, or -1 when that value came without one. Calls must come in
 * ascending t (a series' points in order). Can't fail. */
int64_t store_steps_at(struct store_steps *s, int64_t t);
/* Frees what s holds and zeroes it. */
void store_steps_done(struct store_steps *s);

/* ---- moving runs between stores: export, import, copy (store_move.c; the format: docs/export.md) ---- */

/* Hears of each run an import met: written 1 when it was written, 0 when the store held it already
 * (a run is its id: an import or copy adds a run the store has nothing of, and nothing else). */
typedef void (*store_import_fn)(void *user, const struct store_run *run, int written);

/* Writes the n runs (ended ones, as run_get gives them) of st to out (a FILE *) as one export file:
 * JSON Lines, format version 1 — each run's record, params, series with their points, events,
 * notes and findings, and an end line that says the file is whole. Returns 0, or a GS_E code with
 * the message: GS_EINVAL for a run still running, GS_EIO when out cannot be written, a read's
 * error otherwise (out then holds a file without its end line, which import refuses). */
int store_export(struct store *st, const struct store_run *runs, size_t n, void *out_file);

/* Reads a whole export file (in: a FILE * open for reading that can seek; name for messages)
 * through the checker, and back to its start. Returns 0 when it is whole and this gpuscope can
 * import it; GS_ECORRUPT for one truncated, damaged or of a newer format ("NAME line N: why");
 * GS_EIO when it cannot be read again (a pipe). Writes nothing. */
int store_import_check(void *in_file, const char *name);

/* The param an import or copy gives each run it writes: where it came from and when ("runs.jsonl,
 * 2026-12-03T12:00:00Z"). A moved run is data from elsewhere — `tune --resume` says so before it
 * runs a command read from one — so export leaves this param out and import drops a file's own. */
#define STORE_PARAM_IMPORTED "gpuscope.imported"

/* Writes the runs of an export file (store_import_check passed it) into dst, each with its id and
 * STORE_PARAM_IMPORTED, unless dst holds that run already (nothing added; a run of that id there in
 * another state is GS_EINVAL). Checks every line again as it goes (GS_ECORRUPT). fn (may be NULL) hears of each run.
 * Returns 0 or a GS_E code with the message; runs written before a failure stay written. */
int store_import(struct store *dst, void *in_file, const char *name, store_import_fn fn, void *user);

/* 1 when path is a folder of an MLflow file store (mlruns/: a folder holding EXPERIMENT/meta.yaml),
 * else 0. Can't fail. */
int store_mlflow_is(const char *path);
/* Reads every run of the MLflow file store at dir (mlflow_import.c; docs/export.md "From MLflow")
 * and converts them into an export file, checked (store_import_check) and rewound: a FILE * the
 * caller passes to store_import and fcloses (a temporary file, gone when closed). Each run's id is
 * "ml" and the MLflow id's first 29 characters, so a second import adds nothing. NULL with the
 * message on error: GS_ECORRUPT's "FILE offset N: why" for a damaged file (nothing is written
 * anywhere), GS_EINVAL for a folder or file that cannot be read, GS_EIO, GS_ENOMEM. */
void *store_mlflow_convert(const char *dir);

/* 1 when path is a TensorBoard log directory (a folder with events.out.tfevents.* files in it or in
 * a folder below), else 0. Can't fail. */
int store_tb_is(const char *path);
/* Reads every run of the TensorBoard log directory at dir (tb_import.c; docs/export.md "From
 * TensorBoard": a run is a folder holding event files) and converts them into an export file,
 * checked and rewound, as store_mlflow_convert does: a FILE * the caller passes to store_import and
 * fcloses. Each run's id is "tb" and a hash of its first event file's name and first record, so a
 * second import adds nothing. What was passed over (images, histograms...) is said in said ("3
 * images, 1 graph"; "" when nothing). NULL with the message on error: GS_ECORRUPT's "FILE: offset
 * N: why" for a damaged file (nothing is written anywhere), GS_EINVAL, GS_EIO, GS_ENOMEM. */
void *store_tb_convert(const char *dir, char *said, size_t saidlen);

/* Copies n runs of src (as run_get gives them) into dst: store_export into a temporary file (in
 * $TMPDIR, else /tmp; removed), then store_import_check and store_import, so a copy is what an import of an export is.
 * Returns 0 or a GS_E code with the message. */
int store_copy(struct store *src, const struct store_run *runs, size_t n, struct store *dst, store_import_fn fn,
               void *user);

/* ---- the runs' one filter language (store_where.c; docs/runs.md "Search") ----
 * `param.batch_size >= 64 and tag.team = vision and gpu.name ~ A100 and samples_per_s > 500`:
 * comparisons (= != < <= > >= ~) of a column with a value, joined by and / or / not and
 * parentheses. A missing value never matches a comparison (SQL's three-valued logic: not of an
 * unknown is unknown). The one parser: `runs --where`, serve's /api/runs and the web runs page. */

/* A column, as the language names it. */
enum store_field_kind {
  STORE_FIELD_TEXT,     /* compared as text; ~ is a substring test */
  STORE_FIELD_NUM,      /* a number; a value that is not one is refused */
  STORE_FIELD_PARAM,    /* param.KEY, tag.KEY: text, compared as a number against a number (a value
                         * that does not read as a number is then unknown) */
  STORE_FIELD_GPU_NAME, /* every GPU's name: true when one of them matches */
};
/* What reading a column needs besides the run's record (store_field.needs). */
enum { STORE_NEEDS_PARAMS = 1, STORE_NEEDS_FINDINGS = 2, STORE_NEEDS_VIEW = 4 };
struct store_field {
  int id;         /* which column (store_where.c's table) */
  int kind;       /* enum store_field_kind */
  int needs;      /* STORE_NEEDS_* */
  int pushable;   /* the back ends' SQL reads it */
  char name[160]; /* as spelled: "param.batch_size" */
  char key[160];  /* the params key of param.KEY ("KEY") and tag.KEY ("tag.KEY") */
};
/* Looks a column up by name. Returns 0 with *f filled, or GS_EINVAL with a message naming the
 * column and the columns there are. */
int store_field_lookup(const char *name, struct store_field *f);
/* The column names, for messages and help: "id, name, ... param.KEY, tag.KEY". */
extern const char STORE_FIELD_NAMES[];

struct store_where;
/* Parses a filter. Returns it (free with store_where_free), or NULL with GS_EINVAL's message naming
 * the column or token and its place ("at character 12"), GS_ENOMEM otherwise. */
struct store_where *store_where_parse(const char *expr);
void store_where_free(struct store_where *w);
/* True when the back ends' SQL decides the whole filter (no column only C reads). */
int store_where_pushed(const struct store_where *w);
/* The STORE_NEEDS_* of every column the filter reads. */
int store_where_needs(const struct store_where *w);
/* The values of column f for one run: at most max into vals (owned by ctx, valid until the next
 * call); returns how many (0: missing). Numbers as text. */
typedef size_t (*store_value_fn)(void *ctx, const struct store_field *f, const char **vals, size_t max);
/* Whether the run that fn reads matches w: 1 true, 0 false or unknown. */
int store_where_match(const struct store_where *w, store_value_fn fn, void *ctx);
/* Whether s is a number as the language reads one: [-+] digits [. digits] [e [-+] digits], at
 * most 30 digits before and after the point and 2 of exponent (what both back ends can cast). */
int store_where_number(const char *s, double *v);

/* A query's SQL text and its parameters (text; pointers into the query's filter, or into since). */
enum store_sql_dialect { STORE_SQL_SQLITE, STORE_SQL_PG };
struct store_sql {
  char *text;
  size_t len, cap;
  const char **args;
  int nargs, cap_args;
  int oom;
  char since[24];
};
/* Writes into sql the condition of q for the runs table: " WHERE ..." (or "" for no condition),
 * every value a parameter (?N or $N, from 1), never pasted into the text. The parts of the filter
 * the SQL cannot decide are left out, so it selects a superset. Returns 0 or GS_ENOMEM.
 * store_sql_done frees it. A SQLite connection needs the function gs_num (sqlite_meta.c). */
int store_query_sql(const struct store_query *q, enum store_sql_dialect d, struct store_sql *sql);
void store_sql_done(struct store_sql *sql);

/* Edits a tags string ("k=v,k2=v2", at most n - 1 bytes) in place: sets each "k=v" of set (its
 * key's old value replaced), then removes each key of rm. Returns 0, or GS_EINVAL with a message
 * (a pair without '=', an empty key, a comma or '=' in a key, a comma in a value, too long). */
int store_tags_edit(char *tags, size_t n, char *const *set, size_t nset, char *const *rm, size_t nrm);

#endif
