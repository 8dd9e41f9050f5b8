/* report/log: the job's output read back from the store (`gpuscope log`, the report's last lines
 * of a failed run). The store keeps the bytes as the job wrote them, in chunks per stream
 * (store.h, "the job's output"); this file cuts them into lines per stream, picks lines (a stream,
 * a POSIX regular expression), and writes them either as stored (raw: colours, `\r`, everything)
 * or for a terminal: each line through the one terminal escaper (report_term), a progress bar's
 * line as the terminal last showed it (the text after its last `\r`). Untrusted bytes never reach
 * a terminal as control sequences unless asked for (raw). */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

/* A line is cut at this many bytes (the rest of it is dropped) so one endless line (a progress bar
 * without a newline for hours) cannot take the reader's memory. */
#define RL_LINE_MAX (64 * 1024)

static int rl_stream_index(const char *s) {
  return !strcmp(s, "out") ? 0 : !strcmp(s, "err") ? 1 : 2;
}

/* The text a terminal would show of a line: after its last '\r' that has text after it. */
static const char *rl_shown(char *line, size_t len) {
  line[len] = 0;
  const char *p = line;
  for (size_t i = 0; i + 1 < len; i++)
    if (line[i] == '\r' && line[i + 1] != '\r')
      p = line + i + 1;
  return p;
}

/* A whole line of stream k (its '\n' not included): written when it matches. */
static void rl_emit(FILE *out, struct report_log *l, int k) {
  struct report_log_part *p = &l->part[k];
  static char empty[1];
  char *line = p->buf ? p->buf : empty; /* room for the NUL: rl_feed keeps it */
  size_t len = p->buf ? p->len : 0;
  if (len && line[len - 1] == '\r') /* "\r\n" */
    len--;
  line[len] = 0;
  if (l->re && regexec(l->re, line, 0, NULL, 0) != 0)
    return;
  l->lines_out++;
  if (l->emit) {
    l->emit(l->emit_user, rl_shown(line, len), p->t);
    return;
  }
  if (l->times)
    fprintf(out, "[%9.3fs] ", (double)p->t / 1e9);
  if (l->raw) {
    fwrite(line, 1, len, out);
  } else {
    gs_term_text(out, rl_shown(line, len), 0);
  }
  fputc('\n', out);
}

/* Appends bytes to stream k's open line, emitting each line they end. */
static int rl_feed(FILE *out, struct report_log *l, int k, const uint8_t *b, size_t n, int64_t t) {
  struct report_log_part *p = &l->part[k];
  for (size_t i = 0; i < n; i++) {
    if (!p->len)
      p->t = t;
    if (b[i] == '\n') {
      rl_emit(out, l, k);
      p->len = 0;
      continue;
    }
    if (p->len >= RL_LINE_MAX)
      continue;
    if (p->len + 2 > p->cap) {
      size_t cap = p->cap ? p->cap * 2 : 256;
      char *v = realloc(p->buf, cap);
      if (!v)
        return gs_fail(GS_ENOMEM, "out of memory");
      p->buf = v, p->cap = cap;
    }
    p->buf[p->len++] = b[i] ? (char)b[i] : ' ';
  }
  return GS_OK;
}

struct rl_ctx {
  FILE *out;
  struct report_log *l;
  int rc;
};

static int rl_chunk(void *user, const struct store_log_chunk *c) {
  struct rl_ctx *x = user;
  struct report_log *l = x->l;
  l->next_seq = c->seq + 1;
  l->chunks++;
  if (l->stream && strcmp(l->stream, c->stream))
    return 0;
  l->bytes += (int64_t)c->len;
  if (l->raw && !l->re && !l->times && !l->emit) { /* as stored, byte for byte */
    if (fwrite(c->data, 1, c->len, x->out) != c->len)
      return x->rc = gs_fail(GS_EIO, "cannot write the output"), 1;
    return 0;
  }
  return (x->rc = rl_feed(x->out, l, rl_stream_index(c->stream), c->data, c->len, c->t)) != 0;
}

int report_log_read(FILE *out, struct store *st, const char *run_id, struct report_log *l) {
  if (st->version < 5 || !st->log_read)
    return GS_OK;
  struct rl_ctx x = {.out = out, .l = l};
  int rc = st->log_read(st, run_id, l->next_seq, rl_chunk, &x);
  return rc ? rc : x.rc;
}

void report_log_finish(FILE *out, struct report_log *l) {
  for (int k = 0; k < 3; k++)
    if (l->part[k].len) {
      rl_emit(out, l, k);
      l->part[k].len = 0;
    }
}

void report_log_done(struct report_log *l) {
  for (int k = 0; k < 3; k++)
    free(l->part[k].buf);
  memset(l->part, 0, sizeof l->part);
}

/* ---- the last lines, for a report ---- */

struct rl_tail {
  char **lines;
  size_t max, count; /* a ring of the last max lines; count: every line seen */
  int oom;
};

static void rl_tail_line(void *user, const char *line, int64_t t) {
  (void)t;
  struct rl_tail *x = user;
  size_t i = x->count++ % x->max;
  free(x->lines[i]);
  if (!(x->lines[i] = strdup(line)))
    x->oom = 1;
}

int report_log_tail(struct store *st, const char *run_id, size_t max, char ***lines, size_t *n) {
  *lines = NULL, *n = 0;
  struct rl_tail x = {.max = max ? max : 1};
  x.lines = calloc(x.max, sizeof *x.lines);
  struct report_log l = {.emit = rl_tail_line, .emit_user = &x};
  int rc = x.lines ? report_log_read(NULL, st, run_id, &l) : gs_fail(GS_ENOMEM, "out of memory");
  if (!rc)
    report_log_finish(NULL, &l);
  report_log_done(&l);
  size_t have = x.count < x.max ? x.count : x.max, first = x.count < x.max ? 0 : x.count % x.max;
  char **v = rc || x.oom ? NULL : calloc(have ? have : 1, sizeof *v);
  if (!rc && !v)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; v && i < have; i++) { /* oldest first */
    v[i] = x.lines[(first + i) % x.max];
    x.lines[(first + i) % x.max] = NULL;
  }
  for (size_t i = 0; x.lines && i < x.max; i++)
    free(x.lines[i]);
  free(x.lines);
  if (!rc)
    *lines = v, *n = have;
  return rc;
}
