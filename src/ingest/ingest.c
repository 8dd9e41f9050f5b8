/* ingest: placeholder until the client protocol lands — no socket, so the job's client is a no-op. */
#include "ingest/ingest.h"

#include <stdio.h>

struct ingest *ingest_open(char *err, size_t errlen) {
  snprintf(err, errlen, "client channel not built");
  return NULL;
}
const char *ingest_socket_path(const struct ingest *in) { (void)in; return ""; }
int ingest_fd(const struct ingest *in) { (void)in; return -1; }
int ingest_poll(struct ingest *in, struct gs_sink *sink, int64_t now_ns) { (void)in; (void)sink; (void)now_ns; return 0; }
void ingest_summary(const struct ingest *in, FILE *out) { (void)in; (void)out; }
void ingest_close(struct ingest *in) { (void)in; }
