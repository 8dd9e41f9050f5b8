/* serve/api_log: GET /api/runs/REF/log — the job's output as the store kept it (store.h, "the job's
 * output"), for the run page's log panel: its chunks from a seq on (a live page asks again from
 * "next"), or its last bytes (tail=BYTES: the self-contained page embeds those). Text is the bytes
 * as a JSON string (invalid UTF-8 replaced, NUL as a space); the front end cuts lines, strips the
 * terminal's sequences and puts them in as text nodes. At most SERVE_LOG_MAX bytes an answer. It
 * writes JSON only (api.c routes and answers errors), so it calls nothing else of serve's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve_int.h"

#define SERVE_LOG_MAX (1 << 20)

struct log_ans {
  FILE *out;
  int64_t from, next, bytes; /* tail pass: from is the first seq to keep */
  int n, more;
  /* the tail's first pass: every chunk's (seq, len), to find where the last tail bytes start */
  int64_t (*sizes)[2];
  size_t nsizes, cap;
  int oom;
};

static int log_size(void *u, const struct store_log_chunk *c) {
  struct log_ans *x = u;
  if (x->nsizes == x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 256;
    int64_t(*v)[2] = realloc(x->sizes, cap * sizeof *v);
    if (!v)
      return x->oom = 1;
    x->sizes = v, x->cap = cap;
  }
  x->sizes[x->nsizes][0] = c->seq, x->sizes[x->nsizes++][1] = (int64_t)c->len;
  return 0;
}

static int log_chunk(void *u, const struct store_log_chunk *c) {
  struct log_ans *x = u;
  if (x->n && x->bytes + (int64_t)c->len > SERVE_LOG_MAX)
    return x->more = 1;
  char *text = malloc(c->len + 1);
  if (!text)
    return x->oom = 1;
  for (size_t i = 0; i < c->len; i++)
    text[i] = c->data[i] ? (char)c->data[i] : ' ';
  text[c->len] = 0;
  fprintf(x->out, "%s{\"seq\":%lld,\"t_s\":%.6f,\"stream\":", x->n++ ? "," : "", (long long)c->seq,
          (double)c->t / GS_NS_PER_S);
  gs_json_str(x->out, c->stream);
  fputs(",\"text\":", x->out);
  gs_json_str(x->out, text);
  fputc('}', x->out);
  free(text);
  x->bytes += (int64_t)c->len;
  x->next = c->seq + 1;
  return 0;
}

/* The first seq of the last tail bytes (0 when the whole log fits). */
static int64_t tail_start(struct log_ans *x, int64_t tail) {
  int64_t sum = 0, start = x->nsizes ? x->sizes[x->nsizes - 1][0] : 0;
  for (size_t i = x->nsizes; i-- > 0;) {
    if (sum + x->sizes[i][1] > tail && i + 1 < x->nsizes)
      break;
    sum += x->sizes[i][1];
    start = x->sizes[i][0];
  }
  return start;
}

/* The run's log.* params into the answer ("capture", "streams", "bytes", "kept_bytes"). */
static void log_params(FILE *out, struct store *st, const char *run_id) {
  struct gs_kv *kv = NULL;
  size_t n = 0;
  const char *streams = NULL, *capture = NULL, *bytes = NULL, *kept = NULL;
  if (!st->params_read(st, run_id, &kv, &n)) {
    for (size_t i = 0; i < n; i++) {
      const char *k = kv[i].key ? kv[i].key : "";
      if (!strcmp(k, "log.streams"))
        streams = kv[i].value;
      else if (!strcmp(k, "log.capture"))
        capture = kv[i].value;
      else if (!strcmp(k, "log.bytes"))
        bytes = kv[i].value;
      else if (!strcmp(k, "log.kept_bytes"))
        kept = kv[i].value;
    }
  }
  fputs(",\"streams\":", out);
  streams ? gs_json_str(out, streams) : (void)fputs("null", out);
  fprintf(out, ",\"capture\":%s", capture && !strcmp(capture, "off") ? "false" : streams ? "true" : "null");
  fprintf(out, ",\"bytes\":%s,\"kept_bytes\":%s", bytes ? bytes : "null", kept ? kept : "null");
  store_kv_free(kv, n);
}

int serve_log_json(struct store *st, const char *ref, const char *from_arg, const char *tail_arg, FILE *out,
                   int *status) {
  struct store_run run;
  int rc = st->run_get(st, ref, &run);
  if (rc) {
    *status = rc == GS_ENOENT ? MHD_HTTP_NOT_FOUND : rc == GS_EAMBIG ? MHD_HTTP_CONFLICT : 500;
    return rc;
  }
  char *end = NULL;
  long long from = from_arg ? strtoll(from_arg, &end, 10) : 0;
  int bad = from_arg && (!*from_arg || *end || from < 0);
  long long tail = tail_arg ? strtoll(tail_arg, &end, 10) : 0;
  if (bad || (tail_arg && (!*tail_arg || *end || tail <= 0))) {
    *status = MHD_HTTP_BAD_REQUEST;
    return gs_fail(GS_EINVAL, "from is a chunk number (0 or more), tail a number of bytes (1 or more)");
  }
  struct log_ans x = {.out = out, .from = from, .next = from};
  int has = st->version >= 5 && st->log_read;
  if (has && tail_arg && !from_arg && !(rc = st->log_read(st, run.id, 0, log_size, &x)) && !x.oom)
    x.from = x.next = tail_start(&x, tail);
  free(x.sizes);
  fputs("{\"id\":", out);
  gs_json_str(out, run.id);
  fputs(",\"status\":", out);
  gs_json_str(out, run.status);
  log_params(out, st, run.id);
  fputs(",\"chunks\":[", out);
  if (has && !rc && !x.oom)
    rc = st->log_read(st, run.id, x.from, log_chunk, &x);
  if (rc || x.oom) {
    *status = 500;
    return x.oom ? gs_fail(GS_ENOMEM, "out of memory") : rc;
  }
  fprintf(out, "],\"next\":%lld,\"more\":%s}\n", (long long)x.next, x.more ? "true" : "false");
  return GS_OK;
}
