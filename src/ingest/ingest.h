/* ingest: the agent's side of the client protocol (docs/protocol.md). `gpuscope run` opens a UNIX
 * datagram socket in a private directory, passes its path to the job in GPUSCOPE_SOCKET, and the run
 * loop calls ingest_poll() whenever the socket is readable. Every message is validated by the pure
 * parser ingest_parse() (fuzzed in tests/fuzz); good ones go into the sink, bad ones are counted.
 *
 * Sink conventions (the report and doctor read these):
 *   metric  -> series source "client", name = the metric name, labels ""
 *   param   -> gs_sink_param(key, value)
 *   step    -> series source "client": "step.n", "step.data_s", "step.h2d_s", "step.compute_s",
 *              "step.total_s", "step.samples" (one point each per step, same timestamp)
 *   mark    -> gs_sink_event(kind "mark", name, value)
 */
#ifndef GS_INGEST_H
#define GS_INGEST_H

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
/* Reads every pending datagram without blocking and puts the valid ones into sink at now_ns.
 * Returns the number of messages accepted. Never fails the run. */
int ingest_poll(struct ingest *in, struct gs_sink *sink, int64_t now_ns);
/* One or two lines for the end-of-run summary: messages accepted and rejected per kind. */
void ingest_summary(const struct ingest *in, FILE *out);
/* Closes the socket and removes it and its directory. NULL is a no-op. */
void ingest_close(struct ingest *in);

#endif
