/* core: the small shared vocabulary of gpuscope — error codes, clocks, and the sample sink that
 * every producer (collectors, the client ingest) writes into and the store writer drains.
 *
 * Flow: producers call gs_sink_series() once per series and gs_sink_put() per value; the run loop's
 * writer thread calls gs_sink_take() once per flush period (1-10 s) and hands the batch to the store. The sink
 * is thread-safe, so a collector may sample from its own thread (NVML does, so a slow driver cannot
 * stall the others). */
#ifndef GS_CORE_H
#define GS_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Error codes: functions return 0 or one of these (negative). */
enum {
  GS_OK = 0,
  GS_EINVAL = -1,   /* bad argument or input */
  GS_ENOMEM = -2,   /* allocation failed */
  GS_EIO = -3,      /* an OS call failed */
  GS_ENOENT = -4,   /* not found */
  GS_ECORRUPT = -5, /* a file is not what it should be */
  GS_EBUSY = -6,    /* locked or in use */
  GS_EAMBIG = -7,   /* a reference matches more than one thing */
  GS_ESTORE = -8,   /* the store cannot be opened, created or written (the message says why) */
};

/* The last error message of this thread (never NULL; "" when none). */
const char *gs_last_error(void);
/* Sets this thread's error message (printf-style) and returns code, so `return gs_fail(GS_EIO,...)`. */
int gs_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Nanoseconds per second: the one spelling (a duration is n * GS_NS_PER_S; seconds from ns are
 * (double)ns / GS_NS_PER_S). */
#define GS_NS_PER_S 1000000000LL

/* Monotonic nanoseconds (CLOCK_MONOTONIC); wall-clock nanoseconds since the Unix epoch. */
int64_t gs_mono_ns(void);
int64_t gs_wall_ns(void);

/* A sampling loop's next tick after the one at `next` (interval > 0): next + interval, or, when that is
 * not after now (the loop fell behind: suspended, a slow call, no CPU), the first tick of the same
 * grid after now. The missed ticks are skipped; the grid never moves. */
int64_t gs_tick_after(int64_t next, int64_t now, int64_t interval);

/* Parses a duration such as "100ms", "0.5s", "2s", "250us", "1m", "90d", or a bare number of seconds.
 * Returns 0 and sets *ns, or GS_EINVAL with a message. */
int gs_parse_duration(const char *s, int64_t *ns);

/* Formats a duration in a short human form ("1.2 s", "3 m 05 s", "2 h 01 m") into buf. */
const char *gs_fmt_duration(int64_t ns, char *buf, size_t n);
/* Formats bytes ("512 B", "3.4 MiB"). */
const char *gs_fmt_bytes(double bytes, char *buf, size_t n);
/* Formats a limit as it was set: whole GiB or MiB without decimals ("700 MiB", "4 GiB"), else as
 * gs_fmt_bytes. Returns buf. */
const char *gs_fmt_limit(double bytes, char *buf, size_t n);

/* Decodes one UTF-8 code point at s (NUL-terminated); invalid or overlong bytes give U+FFFD and
 * consume one byte. Returns the bytes consumed (0 at the end). */
size_t gs_utf8_next(const char *s, uint32_t *cp);
/* Grows k parallel arrays to twice *cap elements (first_cap when *cap is 0): cols[i] is the address of
 * the i-th array's pointer (an int64_t **, a double **, ...) and size[i] its element's size. An array
 * that grew is kept grown even when another could not; *cap rises only when all did. Returns 0, or
 * -1 when memory ran out (no message: the caller says what it was growing). The one growth step of
 * the arrays the store's readers fill (struct store_points, the rollup accumulator). */
int gs_grow_columns(size_t *cap, size_t first_cap, size_t k, void *const cols[], const size_t size[]);

/* Writes code point c as UTF-8 to out (a FILE *). */
void gs_utf8_put(void *out_file, uint32_t c);
/* Writes s as a JSON string literal to out (a FILE *): '"' and '\\' escaped, newline and tab as
 * \n and \t, other control characters and DEL as \u00XX, invalid UTF-8 replaced by U+FFFD. NULL
 * writes "". The one JSON string writer: every command, report and serve use it. */
void gs_json_str(void *out_file, const char *s);
/* Writes a number as JSON (null when not finite). The one JSON number writer. */
void gs_json_num(void *out_file, double v);

/* ---- untrusted text out (core/text.c): every command's output goes through these ---- */

/* 1 when s is exactly one valid JSON object (RFC 8259; depth at most 32), else 0. */
int gs_json_object_valid(const char *s);
/* Calls fn for each top-level member of a valid JSON object: key without quotes (escapes left as
 * they are) and the value's raw text. Does nothing when obj is not valid. */
void gs_json_members(const char *obj,
                     void (*fn)(void *user, const char *key, size_t klen, const char *val, size_t vlen), void *user);
/* Text escaped for HTML (&, <, >, ", '; other control characters but newline and tab as a space),
 * invalid UTF-8 replaced. */
void gs_html_text(FILE *out, const char *s);
/* Text for a terminal: control characters (escape sequences included) dropped, tabs (and newlines
 * unless newlines is set) as spaces, the bidirectional controls (gs_utf8_is_bidi) shown as
 * "<U+202E>", invalid UTF-8 replaced. */
void gs_term_text(FILE *out, const char *s, int newlines);
/* The same (newlines as spaces) into dst (n bytes with the NUL), cut at a character boundary: for
 * padded table columns. Returns dst. */
const char *gs_term_copy(char *dst, size_t n, const char *s);
/* s as one RFC 4180 CSV field: always quoted, '"' doubled, newlines kept inside the quotes, other
 * control characters dropped, invalid UTF-8 replaced. */
void gs_csv_field(FILE *out, const char *s);

/* NVML's clock-event ("throttle") reasons, named as NVML names them: the one table the collector
 * (event names), the doctor (which bits cut clocks for heat or power) and the reports read. The
 * bits are NVML's own (nvmlClocksEventReasons), stable across driver versions. */
enum {
  GS_REASON_IDLE = 1,     /* only says the GPU is idle */
  GS_REASON_THROTTLE = 2, /* clocks cut for heat or power (what the doctor's `throttled` counts) */
  GS_REASON_HEAT = 4,
  GS_REASON_POWER = 8,
};
struct gs_clock_reason {
  unsigned long long bit;
  const char *name; /* "SwPowerCap" */
  unsigned flags;   /* GS_REASON_* */
};
extern const struct gs_clock_reason gs_clock_reasons[];
extern const size_t gs_clock_reasons_n;
/* The reason of that bit or name, or NULL. */
const struct gs_clock_reason *gs_clock_reason_of_bit(unsigned long long bit);
const struct gs_clock_reason *gs_clock_reason_named(const char *name);
/* The union of the bits whose flags include every flag in flags. */
unsigned long long gs_clock_reasons_mask(unsigned flags);

/* An Xid code as NVIDIA's Xid catalogue explains it (core/xid.c). */
struct gs_xid {
  unsigned code;
  const char *meaning; /* "fallen off the bus" */
  const char *action;  /* what NVIDIA documents doing: "drain the node; reboot it ..." */
  int fatal;           /* the GPU needs a reset or more: the node's work on it is over */
};
/* The entry of code, or NULL for a code the table does not explain. Can't fail. */
const struct gs_xid *gs_xid_of(unsigned code);

/* What kind of quantity a series holds. */
enum gs_kind { GS_GAUGE = 0, GS_COUNTER = 1, GS_EVENT = 2 };
const char *gs_kind_name(enum gs_kind k);

/* A static description of one metric a producer emits (for docs, Prometheus and `metrics`). */
struct gs_metric_desc {
  const char *name; /* "host.cpu.user_pct" */
  const char *unit; /* "%", "B", "B/s", "W", "J", "C", "MHz", "count", "s" */
  enum gs_kind kind;
  const char *help;
};

/* ---- the sink ---- */

struct gs_series_def {
  int id;
  char *source, *name, *labels, *unit;
  enum gs_kind kind;
};

struct gs_point {
  int32_t series;
  int64_t t_ns; /* monotonic, absolute (gs_mono_ns clock) */
  double v;
};

struct gs_event {
  int64_t t_ns; /* monotonic, absolute */
  char *kind;   /* "throttle_start", "mark", "gpu_lost", "proc_exit", ... */
  char *name;   /* "epoch", reason names, ... (may be "") */
  double value; /* NAN when none */
  char *labels; /* "gpu=0" (may be "") */
  char *text;   /* free text (may be "") */
};

struct gs_kv {
  char *key, *value;
};

/* What the writer takes out of the sink: everything produced since the last take. Owned by the
 * caller of gs_sink_take(); free with gs_batch_free(). */
struct gs_batch {
  struct gs_series_def *series; /* series first seen since the last take */
  size_t n_series;
  struct gs_point *points;
  size_t n_points, cap_points;
  struct gs_event *events;
  size_t n_events, cap_events;
  struct gs_kv *params; /* run params (key -> value); later values replace earlier */
  size_t n_params, cap_params;
  char **notes; /* one-line notes on the run ("gpu0: fan speed not supported") */
  size_t n_notes, cap_notes;
  size_t cap_series;
};

struct gs_sink;

/* Creates an empty sink. Returns NULL on allocation failure. Free with gs_sink_free(). */
struct gs_sink *gs_sink_new(void);
void gs_sink_free(struct gs_sink *s);

/* Registers (or finds) a series and returns its id (>= 0, stable for the sink's life), or a negative
 * GS_E code. labels is a comma-separated "k=v,k2=v2" string or NULL/"". Thread-safe. */
int gs_sink_series(struct gs_sink *s, const char *source, const char *name, const char *labels, const char *unit,
                   enum gs_kind kind);

/* Adds one value. Non-finite values are dropped (missing is not zero). Thread-safe, cheap. */
void gs_sink_put(struct gs_sink *s, int series, int64_t t_ns, double v);

/* Ends a series' latest value: until its next put, gs_sink_each skips it and gs_sink_last gives NAN
 * (a process that exited has no latest value). The points already put are kept. Thread-safe. */
void gs_sink_end(struct gs_sink *s, int series);

/* The most recent value put into a series, or NAN when none (or ended). Thread-safe. */
double gs_sink_last(struct gs_sink *s, int series);

/* The latest time put into any series of source (the largest t_ns), or 0 when none has a point yet.
 * Thread-safe; walks the series, so call it at most about once a second. */
int64_t gs_sink_source_last_t(struct gs_sink *s, const char *source);

/* Finds a series id by source/name/labels without creating it; -1 when absent. */
int gs_sink_find(struct gs_sink *s, const char *source, const char *name, const char *labels);

/* Records an event; strings are copied (NULL means ""). Thread-safe. */
void gs_sink_event(struct gs_sink *s, int64_t t_ns, const char *kind, const char *name, double value,
                   const char *labels, const char *text);

/* Records a run parameter (copied). Thread-safe. */
void gs_sink_param(struct gs_sink *s, const char *key, const char *value);

/* Records a note on the run (copied, printf-style). Thread-safe. */
void gs_sink_note(struct gs_sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A param's latest value (gs_sink_param keeps a copy for readers: a /metrics scrape reads the GPUs'
 * UUIDs there) into buf. Returns 1 when the key was ever put, else 0 (buf ""). Thread-safe. */
int gs_sink_param_get(struct gs_sink *s, const char *key, char *buf, size_t n);

/* Calls fn once per series that holds a value, under the sink's lock (so fn must be quick and must
 * not call the sink): the series' source, name and labels as (pointer, length) for the first two and
 * a NUL-terminated string for labels, its latest value and that value's time (monotonic ns). The
 * strings live as long as the sink. A series never put (unsupported, or not yet read) is skipped:
 * missing is not zero. */
typedef void (*gs_sink_each_fn)(void *user, int id, const char *source, size_t source_len, const char *name,
                                size_t name_len, const char *labels, double last, int64_t last_t);
void gs_sink_each(struct gs_sink *s, gs_sink_each_fn fn, void *user);

/* Number of points waiting (for the writer's flush policy). Thread-safe. */
size_t gs_sink_pending(struct gs_sink *s);

/* Takes everything produced since the last take. Returns a batch the caller owns (never NULL
 * unless allocation fails). Thread-safe. */
struct gs_batch *gs_sink_take(struct gs_sink *s);
void gs_batch_free(struct gs_batch *b);

/* ---- text for a terminal (core/util.c): one sanitiser for top's and tune's buffers; the report's
 * stream writers (report/export.c) apply the same rules ---- */

/* Whether cp is a bidirectional embedding, override or isolate control (U+202A-U+202E,
 * U+2066-U+2069): raw, a run named "\u202Egnp.exe" displays as "exe.png". */
int gs_utf8_is_bidi(uint32_t cp);
/* Copies untrusted text (a process or run name) into out for the terminal: printable ASCII, and
 * well-formed UTF-8 other than C1 controls when utf8 != 0; every other byte becomes '?', and a
 * bidirectional control (U+202A-U+202E, U+2066-U+2069: a name that would display reversed) one '?'.
 * Always NUL-terminates (n > 0). Returns out. */
char *gs_term_escape(const char *in, int utf8, char *out, size_t n);

/* ---- libraries loaded on first use (core/dynlib.c) ---- */

/* One entry point of a library loaded with gs_dynlib_load: its name and where its address goes in
 * the caller's table (an offset into a struct of function pointers). */
struct gs_dynsym {
  const char *name;
  size_t off;
};

/* Opens soname (or the path in the environment variable env, when set and not empty: tests point it
 * at a library that is not there) with dlopen(RTLD_NOW | RTLD_LOCAL) and writes the address of each
 * of the n symbols into table at its offset. Returns the library's handle, which the caller keeps
 * for the life of the process; or NULL with a one-line message in err: "<what> needs <soname>, which
 * could not be loaded (<reason>): install the Debian package <package>", or, when an entry point is
 * missing, "<library> lacks <symbol>". Not thread-safe by itself: callers load under pthread_once. */
void *gs_dynlib_load(const char *soname, const char *env, const char *what, const char *package,
                     const struct gs_dynsym *syms, size_t n, void *table, char *err, size_t errlen);

/* A library a subsystem loads on first use: what gs_dynlib_load needs, and the outcome of the one
 * try. Define one statically with the first eight fields named; the rest start zero. */
struct gs_dynlib {
  const char *soname, *env, *what, *package;
  const struct gs_dynsym *syms;
  size_t nsyms;
  void *table; /* the caller's struct of function pointers, filled on success */
  size_t table_size;
  int tried, rc;
  char err[320];
};
/* Loads d once per process (thread-safe: under one lock for all such libraries) and says how that
 * went every time: 0, or GS_ENOENT with the load's one-line message in err (errlen bytes). */
int gs_dynlib_use(struct gs_dynlib *d, char *err, size_t errlen);

/* ---- the noise model of measured rates (core/stats.c) ---- */

/* A rate from per-step samples and durations — sum(samples) / sum(seconds), or steps per
 * second when samples is NULL — and its 95 % confidence half-width: the ratio estimator's standard
 * error over blocks of floor(sqrt(n)) consecutive steps (batch means, so a loader's bursts do not
 * count as noise), times Student's t for (blocks - 1) degrees of freedom. Pairs with a missing or
 * non-positive duration are left out. Needs 2 pairs; returns 0, or GS_EINVAL (*rate, *ci NAN). */
int gs_rate_ci(const double *samples, const double *secs, size_t n, double *rate, double *ci, int *dof);

/* Student's t quantile 0.975 for dof degrees of freedom (NAN below 1). */
double gs_t975(int dof);

/* Whether two measured figures tie: |a - b| <= sqrt(ci_a^2 + ci_b^2), their 95 % half-widths. */
int gs_tie(double a, double ci_a, double b, double ci_b);

/* ---- SHA-256 (core/sha256.c) ---- */

struct gs_sha256 {
  uint32_t h[8];
  uint64_t len; /* bytes so far */
  unsigned char buf[64];
  size_t nbuf;
};
void gs_sha256_init(struct gs_sha256 *c);
void gs_sha256_update(struct gs_sha256 *c, const void *data, size_t n);
/* Ends the hash and writes its 64 hex digits and a NUL into hex. c must be initialised again to be
 * used again. */
void gs_sha256_hex(struct gs_sha256 *c, char hex[65]);

#endif
