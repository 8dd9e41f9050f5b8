/* ingest: the agent's side of the client protocol (docs/protocol.md). `gpuscope run` opens a UNIX
 * datagram socket in a private directory, passes its path to the job in GPUSCOPE_SOCKET, and the run
 * loop calls ingest_poll() whenever the socket is readable. Every message is validated by the pure
 * parser ingest_parse_line() (fuzzed in tests/fuzz); good ones go into the sink, bad ones are
 * counted, logged once per kind to stderr and noted on the run, and the counts kept as run params
 * ("ingest.bad_messages", "ingest.bad.<kind>").
 *
 * Sink conventions (the report and doctor read these):
 *   metric  -> series source "client", name = the metric name, labels ""
 *   param   -> gs_sink_param(key, value)
 *   step    -> series source "client": "step.n", "step.data_s", "step.h2d_s", "step.compute_s",
 *              "step.total_s", "step.samples" (one point each per step, same timestamp);
 *              another named phase P -> "step.P_s"; timestamp = the message's t= when sane;
 *              rank=R > 0 -> the same series labelled "rank=R" (rank 0 and no rank: no label)
 *   metric with a step -> also series source "client.step", same name, value = the step
 *   mark    -> gs_sink_event(kind "mark", name, value)
 *   dropped, rejected -> counted: params "ingest.client_dropped", "ingest.client_rejected[.CAUSE]"
 */
#ifndef GS_INGEST_H
#define GS_INGEST_H

#include <stdint.h>
#include <stdio.h>

#include "core/core.h"

struct ingest;

/* Creates the private directory (0700) and socket (0600). Returns NULL with a message in err on
 * failure (the run goes on without a client channel). Free with ingest_close(). */
struct ingest *ingest_open(char *err, size_t errlen);
/* The socket path to export as GPUSCOPE_SOCKET. */
const char *ingest_socket_path(const struct ingest *in);
/* The descriptor to poll for readability. */
int ingest_fd(const struct ingest *in);
/* Reads the pending datagrams without blocking (at most 1024 per call, so a flood cannot starve the
 * run loop; the descriptor stays readable for the rest) and puts the valid messages into sink, at
 * their t= when sane, else at now_ns. Pass the same sink on every call (series ids are cached).
 * Returns the number of messages accepted. Never fails the run: every error is counted. */
int ingest_poll(struct ingest *in, struct gs_sink *sink, int64_t now_ns);
/* At the run's end, after the last ingest_poll: writes the final counts as params, and a note when
 * the job's clients dropped messages (the report then warns that its step figures are partial). */
void ingest_finish(struct ingest *in, struct gs_sink *sink, int64_t now_ns);
/* One or two lines for the end-of-run summary: messages accepted and rejected per kind. */
void ingest_summary(const struct ingest *in, FILE *out);
/* Closes the socket and removes it and its directory. NULL is a no-op. */
void ingest_close(struct ingest *in);

/* Opens the channel at a given socket path instead of a fresh private directory (tests, `agent`).
 * The caller owns the directory; ingest_close() removes only the socket. NULL on error (err set). */
struct ingest *ingest_open_at(const char *path, char *err, size_t errlen);

/* ---- the parser: a pure function (no I/O, no allocation, no state), fuzzed in tests/fuzz ---- */

enum ingest_kind {
  INGEST_OTHER = 0,
  INGEST_METRIC,
  INGEST_PARAM,
  INGEST_STEP,
  INGEST_MARK,
  INGEST_DROPPED,  /* the client's count of messages it could not send since its last such message */
  INGEST_REJECTED, /* the client's count of values it refused to send, by cause, since its last one */
  INGEST_NKINDS
};

/* Why a client refused a value (gs1 rejected CAUSE N): INGEST_REJECTED's cause. */
enum ingest_cause {
  INGEST_CAUSE_VALUE = 0, /* "value": not a finite number */
  INGEST_CAUSE_NAME,      /* "name": a metric name that cannot be sent */
  INGEST_CAUSE_STEP,      /* "step": not a whole number >= 0 */
  INGEST_CAUSE_ARGUMENT,  /* "argument": any other bad argument, or an error in the client */
  INGEST_NCAUSES
};

#define INGEST_MAX_DATAGRAM 4096 /* bytes in one datagram */
#define INGEST_MAX_NAME 128      /* bytes in a name, a param key or a phase name */
#define INGEST_MAX_TEXT 1024     /* bytes in a param value */
#define INGEST_MAX_PHASES 16     /* phases other than data/h2d/compute in one step */

/* Which optional fields a message carried (struct ingest_msg.has). */
enum {
  INGEST_HAS_VALUE = 1 << 0,   /* value: metric (always), mark (optional) */
  INGEST_HAS_STEP = 1 << 1,    /* step: metric's step (optional), step's number (always) */
  INGEST_HAS_T = 1 << 2,       /* t: the client's CLOCK_MONOTONIC seconds */
  INGEST_HAS_DATA = 1 << 3,    /* data_s */
  INGEST_HAS_H2D = 1 << 4,     /* h2d_s */
  INGEST_HAS_COMPUTE = 1 << 5, /* compute_s */
  INGEST_HAS_SAMPLES = 1 << 6, /* samples */
  INGEST_HAS_RANK = 1 << 7,    /* rank: which process of a distributed job sent the step */
};

#define INGEST_MAX_RANK 65535

/* A slice of the parsed line: not NUL-terminated, valid as long as the line is. */
struct ingest_str {
  const char *p;
  size_t n;
};

struct ingest_phase {
  struct ingest_str name;
  double s;
};

/* One parsed message. Strings point into the parsed line. */
struct ingest_msg {
  enum ingest_kind kind;  /* set as far as the line tells, also when it is bad */
  const char *error;      /* why the line is bad (static text); NULL when it is good */
  unsigned has;           /* INGEST_HAS_* bits */
  struct ingest_str name; /* metric and mark name, param key */
  struct ingest_str text; /* param value (printable UTF-8, may be empty) */
  double value;
  int64_t step;            /* metric's step, or the step message's number; dropped and rejected: the count */
  enum ingest_cause cause; /* rejected: why */
  double t;                /* seconds on CLOCK_MONOTONIC */
  double data_s, h2d_s, compute_s;
  int64_t samples;
  int64_t rank;                                  /* step: 0..INGEST_MAX_RANK */
  struct ingest_phase phases[INGEST_MAX_PHASES]; /* step: other named phases, in order */
  size_t n_phases;
};

/* Parses one message line (without its newline) of n bytes; s need not be NUL-terminated and may
 * hold any bytes. Returns 0 and fills out for a valid gs1 message, or GS_EINVAL with out->kind and
 * out->error set. Can't fail otherwise; reads only s[0..n). The grammar is docs/protocol.md's. */
int ingest_parse_line(const char *s, size_t n, struct ingest_msg *out);

/* "metric", "param", "step", "mark", "dropped", "rejected", or "other". */
const char *ingest_kind_name(enum ingest_kind k);
/* "value", "name", "step", "argument" (the protocol's words), or "?" out of range. */
const char *ingest_cause_name(enum ingest_cause c);

/* Counters since ingest_open, indexed by enum ingest_kind: messages accepted and rejected (a datagram
 * over INGEST_MAX_DATAGRAM bytes counts as one bad "other"), and valid messages dropped because a
 * per-run limit was reached (distinct client series, params, marks). Can't fail. */
struct ingest_counts {
  uint64_t ok[INGEST_NKINDS], bad[INGEST_NKINDS];
  uint64_t limited;
  uint64_t client_dropped;                  /* what the clients said they dropped (sum of their dropped messages) */
  uint64_t client_rejected[INGEST_NCAUSES]; /* what the clients said they refused, by cause */
};
void ingest_counts(const struct ingest *in, struct ingest_counts *out);

#endif
