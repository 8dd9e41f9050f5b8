/* store/store_move: runs moved between stores (store.h, "moving runs") — `gpuscope export` writes
 * runs into one self-describing file, `import` writes such a file into a store, `copy` is an export
 * into a temporary file imported at once. The format is docs/export.md: JSON Lines, a header line,
 * per run its record and one line per param, series, piece of points, event, note and finding, a
 * run_end line counting the run's lines, and an end line counting the runs.
 *
 * A run is its id (26 characters: the start's milliseconds and 80 random bits, store_make_run_id),
 * kept by the copy (`run_import`): an import adds a run the store has nothing of and skips one it
 * holds, so a second copy adds nothing. The file is read twice: once through the checker alone
 * (store_import_check, move_parse.c), so nothing is written of a truncated or damaged file, then
 * to write (checked again as it goes). Each section
 * is one function on each side: a writer in `sections[]` and a reader in `readers[]` (and the line
 * type's fields in move_parse.c's table). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/move_int.h"
#include "store/store.h"

/* ---- export ---- */

struct xout {
  struct store *st;
  const struct store_run *run;
  FILE *out;
  int64_t lines; /* of the run, its run line included */
};

static void put_str(FILE *o, const char *key, const char *v) {
  fprintf(o, ",\"%s\":", key);
  gs_json_str(o, v);
}

static void put_int(FILE *o, const char *key, int64_t v) {
  fprintf(o, ",\"%s\":%lld", key, (long long)v);
}

/* 17 digits: every double reads back as itself (gs_json_num's 15 would not). */
static void put_num(FILE *o, const char *key, double v) {
  if (isfinite(v))
    fprintf(o, ",\"%s\":%.17g", key, v);
  else
    fprintf(o, ",\"%s\":null", key);
}

static void line_open(struct xout *x, const char *type) {
  fprintf(x->out, "{\"type\":\"%s\"", type);
  put_str(x->out, "run", x->run->id);
  x->lines++;
}

static int put_params(struct xout *x) {
  struct gs_kv *kv;
  size_t n;
  int rc = x->st->params_read(x->st, x->run->id, &kv, &n);
  for (size_t i = 0; !rc && i < n; i++) {
    if (!strcmp(kv[i].key, STORE_PARAM_IMPORTED))
      continue; /* the store that takes the run marks it itself */
    line_open(x, "param");
    put_str(x->out, "key", kv[i].key);
    put_str(x->out, "value", kv[i].value);
    fputs("}\n", x->out);
  }
  if (!rc)
    store_kv_free(kv, n);
  return rc;
}

struct xpoints {
  struct xout *x;
  int64_t series;
  int64_t t[1024];
  double v[1024];
  size_t n;
};

static void points_flush(struct xpoints *p) {
  if (!p->n)
    return;
  line_open(p->x, "points");
  fprintf(p->x->out, ",\"series\":%lld,\"t\":[", (long long)p->series);
  for (size_t i = 0; i < p->n; i++)
    fprintf(p->x->out, i ? ",%lld" : "%lld", (long long)p->t[i]);
  fputs("],\"v\":[", p->x->out);
  for (size_t i = 0; i < p->n; i++)
    fprintf(p->x->out, i ? ",%.17g" : "%.17g", p->v[i]);
  fputs("]}\n", p->x->out);
  p->n = 0;
}

static int point_add(void *u, int64_t t, double v) {
  struct xpoints *p = u;
  p->t[p->n] = t;
  p->v[p->n++] = v;
  if (p->n == sizeof p->t / sizeof *p->t)
    points_flush(p);
  return 0;
}

static const char *kind_name(enum gs_kind k) {
  return k == GS_COUNTER ? "counter" : k == GS_EVENT ? "event" : "gauge";
}

/* Every series line first, then each series' points, in pieces of at most 1,024. */
static int put_series(struct xout *x) {
  struct store_series *s;
  size_t n;
  int rc = x->st->series_list(x->st, x->run->id, &s, &n);
  if (rc)
    return rc;
  for (size_t i = 0; i < n; i++) {
    line_open(x, "series");
    put_int(x->out, "id", (int64_t)i);
    put_str(x->out, "source", s[i].source);
    put_str(x->out, "name", s[i].name);
    put_str(x->out, "labels", s[i].labels);
    put_str(x->out, "unit", s[i].unit);
    put_str(x->out, "kind", kind_name(s[i].kind));
    fputs("}\n", x->out);
  }
  struct xpoints *p = malloc(sizeof *p);
  if (!p)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; !rc && i < n; i++) {
    *p = (struct xpoints){.x = x, .series = (int64_t)i};
    if (!(rc = x->st->samples_read(x->st, s[i].id, INT64_MIN, INT64_MAX, point_add, p)))
      points_flush(p);
  }
  free(p);
  free(s);
  return rc;
}

static int put_events(struct xout *x) {
  struct store_event *e;
  size_t n;
  int rc = x->st->events_read(x->st, x->run->id, &e, &n);
  if (rc)
    return rc;
  for (size_t i = 0; i < n; i++) {
    line_open(x, "event");
    put_int(x->out, "t", e[i].t);
    put_str(x->out, "kind", e[i].kind);
    put_str(x->out, "name", e[i].name);
    put_str(x->out, "labels", e[i].labels);
    put_str(x->out, "text", e[i].text);
    put_num(x->out, "value", e[i].value);
    fputs("}\n", x->out);
  }
  free(e);
  return 0;
}

static int put_notes(struct xout *x) {
  char **notes;
  size_t n;
  int rc = x->st->notes_read(x->st, x->run->id, &notes, &n);
  if (rc)
    return rc;
  for (size_t i = 0; i < n; i++) {
    line_open(x, "note");
    put_str(x->out, "text", notes[i]);
    fputs("}\n", x->out);
  }
  store_notes_free(notes, n);
  return 0;
}

static int put_findings(struct xout *x) {
  struct store_finding *f = NULL;
  size_t n = 0;
  int rc = x->st->findings_read(x->st, x->run->id, &f, &n);
  if (rc)
    return rc;
  for (size_t i = 0; i < n; i++) {
    line_open(x, "finding");
    put_str(x->out, "rule", f[i].rule);
    put_str(x->out, "severity", f[i].severity);
    put_num(x->out, "share", f[i].share);
    put_num(x->out, "lost_s", f[i].lost_s);
    put_num(x->out, "speedup", f[i].speedup);
    put_str(x->out, "title", f[i].title);
    put_str(x->out, "evidence", f[i].evidence);
    put_str(x->out, "fix", f[i].fix);
    fputs("}\n", x->out);
  }
  free(f);
  return 0;
}

/* The job's output, a line per stored chunk, its bytes in base64 (output need not be UTF-8 text). */
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void put_b64(FILE *o, const char *key, const uint8_t *d, size_t n) {
  fprintf(o, ",\"%s\":\"", key);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
    char q[4] = {B64[v >> 18 & 63], B64[v >> 12 & 63], i + 1 < n ? B64[v >> 6 & 63] : '=',
                 i + 2 < n ? B64[v & 63] : '='};
    fwrite(q, 1, 4, o);
  }
  fputc('"', o);
}

static int log_chunk_out(void *user, const struct store_log_chunk *c) {
  struct xout *x = user;
  line_open(x, "log");
  put_int(x->out, "seq", c->seq);
  put_int(x->out, "t", c->t);
  put_str(x->out, "stream", c->stream);
  put_b64(x->out, "data", c->data, c->len);
  fputs("}\n", x->out);
  return 0;
}

static int put_log(struct xout *x) {
  if (x->st->version < 5 || !x->st->log_read) /* a store without the job's output (a group) */
    return GS_OK;
  return x->st->log_read(x->st, x->run->id, 0, log_chunk_out, x);
}

/* The sections after the run line, in file order. A new one: its writer here, its reader in
 * readers[] below, its line's fields in move_parse.c (kinds[] and sections[]). */
static const struct section {
  const char *name;
  int (*put)(struct xout *x);
} sections[] = {{"param", put_params}, {"series", put_series}, {"event", put_events},
                {"note", put_notes},   {"log", put_log},       {"finding", put_findings}};

static void put_run(struct xout *x) {
  const struct store_run *r = x->run;
  FILE *o = x->out;
  fputs("{\"type\":\"run\"", o);
  put_str(o, "id", r->id);
  put_str(o, "name", r->name);
  put_str(o, "group", r->group);
  put_str(o, "status", r->status);
  put_str(o, "command", r->command);
  put_str(o, "cwd", r->cwd);
  put_str(o, "host", r->host);
  put_str(o, "user", r->user);
  put_str(o, "tags", r->tags);
  put_int(o, "start_wall_ns", r->start_wall_ns);
  put_int(o, "end_wall_ns", r->end_wall_ns);
  put_int(o, "interval_ns", r->interval_ns);
  put_int(o, "exit_code", r->exit_code);
  fputs("}\n", o);
  x->lines = 1;
}

int store_export(struct store *st, const struct store_run *runs, size_t n, void *out_file) {
  FILE *out = out_file;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(runs[i].status, "running"))
      return gs_fail(GS_EINVAL, "run %s is still running: export it when it has ended", runs[i].id);
  fprintf(out, "{\"type\":\"header\",\"format\":\"gpuscope-export\",\"version\":%d,\"sections\":\"run",
          MV_FORMAT_VERSION);
  for (size_t k = 0; k < sizeof sections / sizeof *sections; k++)
    fprintf(out, ",%s%s", sections[k].name, !strcmp(sections[k].name, "series") ? ",points" : "");
  fputs("\"}\n", out);
  for (size_t i = 0; i < n; i++) {
    struct xout x = {.st = st, .run = &runs[i], .out = out};
    put_run(&x);
    for (size_t k = 0; k < sizeof sections / sizeof *sections; k++) {
      int rc = sections[k].put(&x);
      if (rc)
        return rc;
    }
    fprintf(out, "{\"type\":\"run_end\"");
    put_str(out, "run", runs[i].id);
    put_int(out, "lines", x.lines + 1);
    fputs("}\n", out);
  }
  fprintf(out, "{\"type\":\"end\",\"runs\":%zu}\n", n);
  if (fflush(out) || ferror(out))
    return gs_fail(GS_EIO, "cannot write the export file: %s", "a write failed (a full disk?)");
  return GS_OK;
}

/* ---- import ---- */

struct xin {
  struct store *dst;
  store_import_fn fn;
  void *user;
  struct store_run run;
  int skip;             /* the run is in dst already: its lines are passed over */
  struct gs_sink *sink; /* the run's series, points, events, params and notes until the next append */
  struct store_finding *find;
  size_t n_find;
  size_t n_other;   /* events, params and notes in the sink */
  const char *from; /* the file's name, for STORE_PARAM_IMPORTED */
};

/* An append at most this many points, or events, params and notes: an import's memory is bounded
 * whatever the run's size. */
enum { XIN_APPEND_POINTS = 65536, XIN_APPEND_OTHER = 16384 };

/* Writes what the sink holds (everything read since the last append) in one append. */
static int xin_append(struct xin *x) {
  struct gs_batch *b = gs_sink_take(x->sink);
  if (!b)
    return gs_fail(GS_ENOMEM, "out of memory");
  x->n_other = 0;
  int rc = x->dst->run_append(x->dst, &x->run, b);
  gs_batch_free(b);
  return rc;
}

/* Whether dst holds the run of this id: 0 no, 1 yes as in the file, or a GS_E code. */
static int xin_held(struct xin *x, const struct store_run *r) {
  struct store_run have;
  int rc = x->dst->run_get(x->dst, r->id, &have);
  if (rc == GS_ENOENT || rc == GS_EAMBIG || (!rc && strcmp(have.id, r->id)))
    return 0;
  if (rc)
    return rc;
  if (!strcmp(have.status, r->status) && have.end_wall_ns == r->end_wall_ns)
    return 1;
  return gs_fail(GS_EINVAL,
                 "run %s is in the store already, but %s where the file has it %s (a copy cut short?): remove it "
                 "there and import again",
                 r->id, have.status, r->status);
}

static int read_run(struct xin *x, const struct mv_line *l) {
  struct store_run *r = &x->run;
  memset(r, 0, sizeof *r);
  snprintf(r->id, sizeof r->id, "%s", mv_str(l, "id"));
  snprintf(r->name, sizeof r->name, "%s", mv_str(l, "name"));
  snprintf(r->group, sizeof r->group, "%s", mv_str(l, "group"));
  snprintf(r->status, sizeof r->status, "%s", mv_str(l, "status"));
  snprintf(r->command, sizeof r->command, "%s", mv_str(l, "command"));
  snprintf(r->cwd, sizeof r->cwd, "%s", mv_str(l, "cwd"));
  snprintf(r->host, sizeof r->host, "%s", mv_str(l, "host"));
  snprintf(r->user, sizeof r->user, "%s", mv_str(l, "user"));
  snprintf(r->tags, sizeof r->tags, "%s", mv_str(l, "tags"));
  r->start_wall_ns = mv_int(l, "start_wall_ns", 0);
  r->end_wall_ns = mv_int(l, "end_wall_ns", 0);
  r->interval_ns = mv_int(l, "interval_ns", 0);
  r->exit_code = (int)mv_int(l, "exit_code", -1);
  r->mono_start_ns = 0; /* the file's times are since the run's start already */
  r->agent_pid = (int)getpid();
  int rc = xin_held(x, r);
  if (rc < 0)
    return rc;
  if ((x->skip = rc))
    return GS_OK;
  if (!x->dst->run_import)
    return gs_fail(GS_EINVAL, "this store cannot take runs");
  if (!(x->sink = gs_sink_new()))
    return gs_fail(GS_ENOMEM, "out of memory");
  char mark[400], when[32] = "";
  time_t now = time(NULL);
  struct tm tm;
  if (gmtime_r(&now, &tm))
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
  snprintf(mark, sizeof mark, "%.360s, %s", x->from ? x->from : "", when);
  gs_sink_param(x->sink, STORE_PARAM_IMPORTED, mark);
  return x->dst->run_import(x->dst, r);
}

/* After an event, param or note went into the sink: an append when enough wait. */
static int xin_other(struct xin *x) {
  return ++x->n_other >= XIN_APPEND_OTHER ? xin_append(x) : GS_OK;
}

static int read_param(struct xin *x, const struct mv_line *l) {
  if (!strcmp(mv_str(l, "key"), STORE_PARAM_IMPORTED))
    return GS_OK; /* a file does not say it was not imported: the mark is this import's (read_run) */
  gs_sink_param(x->sink, mv_str(l, "key"), mv_str(l, "value"));
  return xin_other(x);
}

static int read_series(struct xin *x, const struct mv_line *l) {
  const char *k = mv_str(l, "kind");
  enum gs_kind kind = !strcmp(k, "counter") ? GS_COUNTER : !strcmp(k, "event") ? GS_EVENT : GS_GAUGE;
  int id =
      gs_sink_series(x->sink, mv_str(l, "source"), mv_str(l, "name"), mv_str(l, "labels"), mv_str(l, "unit"), kind);
  if (id < 0)
    return id;
  if (id != (int)mv_int(l, "id", -1)) /* the same source, name and labels twice */
    return gs_fail(GS_ECORRUPT, "series %lld of run %s repeats an earlier one", (long long)mv_int(l, "id", -1),
                   x->run.id);
  return GS_OK;
}

static int read_points(struct xin *x, const struct mv_line *l) {
  const struct mv_field *t = mv_get(l, "t"), *v = mv_get(l, "v");
  int series = (int)mv_int(l, "series", -1);
  for (size_t i = 0; i < t->len; i++)
    gs_sink_put(x->sink, series, t->arr_i[i], v->arr[i]);
  return gs_sink_pending(x->sink) >= XIN_APPEND_POINTS ? xin_append(x) : GS_OK;
}

static int read_event(struct xin *x, const struct mv_line *l) {
  gs_sink_event(x->sink, mv_int(l, "t", 0), mv_str(l, "kind"), mv_str(l, "name"), mv_num(l, "value"),
                mv_str(l, "labels"), mv_str(l, "text"));
  return xin_other(x);
}

static int read_note(struct xin *x, const struct mv_line *l) {
  gs_sink_note(x->sink, "%s", mv_str(l, "text"));
  return xin_other(x);
}

/* base64 text into out (room for 3/4 of its length): the bytes, or -1 for text that is not base64. */
static long b64_decode(const char *s, size_t n, uint8_t *out) {
  if (n % 4)
    return -1;
  size_t k = 0;
  for (size_t i = 0; i < n; i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int j = 0; j < 4; j++) {
      const char *p = s[i + j] ? strchr(B64, s[i + j]) : NULL;
      if (s[i + j] == '=' && i + 4 == n && j >= 2 && (j == 3 || s[i + 3] == '='))
        pad++, v <<= 6;
      else if (p && !pad)
        v = v << 6 | (uint32_t)(p - B64);
      else
        return -1;
    }
    out[k++] = (uint8_t)(v >> 16);
    if (pad < 2)
      out[k++] = (uint8_t)(v >> 8);
    if (pad < 1)
      out[k++] = (uint8_t)v;
  }
  return (long)k;
}

/* A chunk of the job's output, stored as it came (a store without output storage drops it). */
static int read_log(struct xin *x, const struct mv_line *l) {
  if (x->dst->version < 5 || !x->dst->log_append)
    return GS_OK;
  const char *text = mv_str(l, "data"), *stream = mv_str(l, "stream");
  size_t n = strlen(text);
  if (strcmp(stream, "out") && strcmp(stream, "err") && strcmp(stream, "tty"))
    return gs_fail(GS_ECORRUPT, "run %s: output of an unknown stream '%.16s'", x->run.id, stream);
  uint8_t *data = malloc(n / 4 * 3 + 3);
  if (!data)
    return gs_fail(GS_ENOMEM, "out of memory");
  long len = b64_decode(text, n, data);
  int rc;
  if (len < 0) {
    rc = gs_fail(GS_ECORRUPT, "run %s: output chunk %lld is not base64", x->run.id, (long long)mv_int(l, "seq", -1));
  } else {
    struct store_log_chunk c = {.seq = mv_int(l, "seq", 0), .t = mv_int(l, "t", 0), .data = data, .len = (size_t)len};
    snprintf(c.stream, sizeof c.stream, "%s", stream);
    rc = x->dst->log_append(x->dst, &x->run, &c, 1, 0);
  }
  free(data);
  return rc;
}

static int read_finding(struct xin *x, const struct mv_line *l) {
  struct store_finding *f = realloc(x->find, (x->n_find + 1) * sizeof *f);
  if (!f)
    return gs_fail(GS_ENOMEM, "out of memory");
  x->find = f;
  f += x->n_find++;
  memset(f, 0, sizeof *f);
  snprintf(f->rule, sizeof f->rule, "%s", mv_str(l, "rule"));
  snprintf(f->severity, sizeof f->severity, "%s", mv_str(l, "severity"));
  f->share = mv_num(l, "share");
  f->lost_s = mv_num(l, "lost_s");
  f->speedup = mv_num(l, "speedup");
  snprintf(f->title, sizeof f->title, "%s", mv_str(l, "title"));
  snprintf(f->evidence, sizeof f->evidence, "%s", mv_str(l, "evidence"));
  snprintf(f->fix, sizeof f->fix, "%s", mv_str(l, "fix"));
  return GS_OK;
}

/* The run's last append, its end (status, exit code, end time; rollups), then its findings. */
static int read_run_end(struct xin *x, const struct mv_line *l) {
  (void)l;
  int rc = xin_append(x);
  if (!rc)
    rc = x->dst->run_end(x->dst, &x->run);
  if (!rc && x->dst->stats.kept_elsewhere[0])
    rc = gs_fail(GS_ESTORE, "run %s: %s", x->run.id, x->dst->stats.kept_elsewhere);
  if (!rc && x->n_find)
    rc = x->dst->findings_write(x->dst, x->run.id, x->find, x->n_find);
  return rc;
}

static const struct reader {
  const char *type;
  int (*read)(struct xin *x, const struct mv_line *l);
} readers[] = {{"run", read_run},       {"param", read_param},     {"series", read_series},
               {"points", read_points}, {"event", read_event},     {"note", read_note},
               {"log", read_log},       {"finding", read_finding}, {"run_end", read_run_end}};

static void xin_run_done(struct xin *x) {
  gs_sink_free(x->sink);
  x->sink = NULL;
  x->n_other = 0;
  free(x->find);
  x->find = NULL;
  x->n_find = 0;
}

/* One line to x: the reader of its type, unless its run is held already. */
static int xin_line(struct xin *x, const char *type, const struct mv_line *l) {
  int is_end = !strcmp(type, "run_end"), rc = GS_OK;
  if (!strcmp(type, "header") || !strcmp(type, "end"))
    return GS_OK;
  if (!x->skip || !strcmp(type, "run"))
    for (size_t i = 0; i < sizeof readers / sizeof *readers; i++)
      if (!strcmp(readers[i].type, type)) {
        rc = readers[i].read(x, l);
        break;
      }
  if (!rc && !strcmp(type, "run") && x->skip && x->fn)
    x->fn(x->user, &x->run, 0);
  if (!rc && is_end && !x->skip && x->fn)
    x->fn(x->user, &x->run, 1);
  if (is_end || rc)
    xin_run_done(x);
  if (is_end)
    x->skip = 0;
  return rc;
}

/* Reads the next line of in into buf (at most MV_MAX_LINE bytes with its newline). Returns its
 * length without the newline, -1 at the end of the file, or -2 with the reason in err. */
static long read_line(FILE *in, char *buf, char *err, size_t errlen) {
  long n = 0;
  int ch;
  while ((ch = getc_unlocked(in)) != EOF && ch != '\n') {
    if (n == MV_MAX_LINE - 1)
      return snprintf(err, errlen, "a line over %d bytes", MV_MAX_LINE), -2;
    if (!ch)
      return snprintf(err, errlen, "a NUL byte"), -2;
    buf[n++] = (char)ch;
  }
  if (ferror(in))
    return snprintf(err, errlen, "a read failed"), -2;
  if (ch == EOF && n)
    return snprintf(err, errlen, "the last line has no newline: truncated"), -2;
  return ch == EOF ? -1 : n;
}

/* One pass over the file: checked, and written into x when x is not NULL. */
static int import_pass(FILE *in, const char *name, char *buf, struct xin *x) {
  struct mv_check c = {0};
  char err[512];
  int rc = GS_OK;
  long n;
  while (!rc && (n = read_line(in, buf, err, sizeof err)) >= 0) {
    struct mv_line l;
    const char *type;
    if (mv_parse(buf, (size_t)n, &l, err, sizeof err)) {
      rc = gs_fail(GS_ECORRUPT, "%s line %lld: %s", name, (long long)c.line_no + 1, err);
      break;
    }
    if (mv_check(&c, &l, &type, err, sizeof err))
      rc = gs_fail(GS_ECORRUPT, "%s line %lld: %s", name, (long long)c.line_no, err);
    else if (x)
      rc = xin_line(x, type, &l);
    mv_line_done(&l);
  }
  if (!rc && n == -2)
    rc = gs_fail(GS_ECORRUPT, "%s line %lld: %s", name, (long long)c.line_no + 1, err);
  if (!rc && mv_check_eof(&c, err, sizeof err))
    rc = gs_fail(GS_ECORRUPT, "%s: %s", name, err);
  mv_check_done(&c);
  return rc;
}

int store_import_check(void *in_file, const char *name) {
  char *buf = malloc(MV_MAX_LINE);
  if (!buf)
    return gs_fail(GS_ENOMEM, "out of memory");
  int rc = import_pass(in_file, name, buf, NULL);
  if (!rc && fseek(in_file, 0, SEEK_SET))
    rc = gs_fail(GS_EIO, "%s: cannot read it again (not a file?)", name);
  free(buf);
  return rc;
}

int store_import(struct store *dst, void *in_file, const char *name, store_import_fn fn, void *user) {
  char *buf = malloc(MV_MAX_LINE);
  if (!buf)
    return gs_fail(GS_ENOMEM, "out of memory");
  struct xin x = {.dst = dst, .fn = fn, .user = user, .from = name};
  int rc = import_pass(in_file, name, buf, &x);
  xin_run_done(&x);
  free(buf);
  return rc;
}

int store_copy(struct store *src, const struct store_run *runs, size_t n, struct store *dst, store_import_fn fn,
               void *user) {
  const char *dir = getenv("TMPDIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/gpuscope-copy-XXXXXX", dir && *dir ? dir : "/tmp");
  int fd = mkstemp(path);
  if (fd < 0)
    return gs_fail(GS_EIO, "cannot make a temporary file in %s", dir && *dir ? dir : "/tmp");
  unlink(path);
  FILE *f = fdopen(fd, "w+");
  if (!f) {
    close(fd);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  int rc = store_export(src, runs, n, f);
  if (!rc && fseek(f, 0, SEEK_SET))
    rc = gs_fail(GS_EIO, "cannot read the temporary file back");
  if (!rc && !(rc = store_import_check(f, "the copy")))
    rc = store_import(dst, f, "the copy", fn, user);
  fclose(f);
  return rc;
}
