/* store/move_parse: reads the lines of an export file (docs/export.md) — a strict parser of the flat
 * JSON objects the exporter writes, and the checker that follows the lines in order (move_int.h).
 * An export file comes from elsewhere (another machine, a mail, a truncated copy): every byte is
 * untrusted, every bound is checked here, and store_move.c writes nothing of a file this checker
 * has not passed whole. Fuzzed by tests/fuzz/fuzz_export_parse.c. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/move_int.h"

static int say(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int say(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
  return -1;
}

/* ---- the parser ---- */

struct cur {
  const char *p, *end;
  char *err;
  size_t errlen;
};

static void skip_ws(struct cur *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r'))
    c->p++;
}

static int hex4(const char *p, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char h = p[i];
    v <<= 4;
    if (h >= '0' && h <= '9')
      v |= (unsigned)(h - '0');
    else if (h >= 'a' && h <= 'f')
      v |= (unsigned)(h - 'a' + 10);
    else if (h >= 'A' && h <= 'F')
      v |= (unsigned)(h - 'A' + 10);
    else
      return -1;
  }
  *out = v;
  return 0;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80)
    return o[0] = (char)cp, 1;
  if (cp < 0x800)
    return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3f)), o[2] = (char)(0x80 | (cp & 0x3f)), 3;
  o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* One \u escape (p after the 'u'), with its low surrogate when it is a high one. */
static int read_u_escape(struct cur *c, unsigned *cp) {
  if (c->end - c->p < 4 || hex4(c->p, cp))
    return say(c->err, c->errlen, "a bad \\u escape in a string");
  c->p += 4;
  if (*cp >= 0xdc00 && *cp <= 0xdfff)
    return say(c->err, c->errlen, "a lone low surrogate in a string");
  if (*cp >= 0xd800 && *cp <= 0xdbff) {
    unsigned lo;
    if (c->end - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u' || hex4(c->p + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
      return say(c->err, c->errlen, "a lone high surrogate in a string");
    c->p += 6;
    *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
  }
  if (*cp == 0)
    return say(c->err, c->errlen, "a NUL character (\\u0000) in a string");
  return 0;
}

/* A string at c->p (its opening quote); out malloc'd. Decoded text is never longer than the text. */
static int read_string(struct cur *c, char **out, size_t *outlen) {
  c->p++;
  const char *q = c->p;
  while (q < c->end && *q != '"')
    q += *q == '\\' && q + 1 < c->end ? 2 : 1;
  if (q >= c->end)
    return say(c->err, c->errlen, "a string that does not end");
  if ((size_t)(q - c->p) > MV_MAX_STR)
    return say(c->err, c->errlen, "a string over %d bytes", MV_MAX_STR);
  char *s = malloc((size_t)(q - c->p) + 1), *o = s;
  if (!s)
    return say(c->err, c->errlen, "out of memory");
  while (c->p < q) {
    unsigned char ch = (unsigned char)*c->p++;
    if (ch < 0x20) {
      free(s);
      return say(c->err, c->errlen, "a control character in a string (not escaped)");
    }
    if (ch != '\\') {
      *o++ = (char)ch;
      continue;
    }
    char e = *c->p++;
    unsigned cp = 0;
    const char *simple = strchr("\"\\/bfnrt", e), *to = "\"\\/\b\f\n\r\t";
    if (e && simple)
      *o++ = to[simple - "\"\\/bfnrt"];
    else if (e == 'u' && !read_u_escape(c, &cp))
      o += put_utf8(o, cp);
    else {
      if (e != 'u')
        say(c->err, c->errlen, "a bad escape '\\%c' in a string", e >= 0x20 && e < 0x7f ? e : '?');
      free(s);
      return -1;
    }
  }
  c->p = q + 1;
  *o = 0;
  *out = s;
  *outlen = (size_t)(o - s);
  return 0;
}

/* A JSON number at c->p. *is_int when it has neither fraction nor exponent and fits int64. */
static int read_number(struct cur *c, double *num, int64_t *i, int *is_int) {
  const char *p = c->p;
  if (p < c->end && *p == '-')
    p++;
  if (p >= c->end || *p < '0' || *p > '9')
    return say(c->err, c->errlen, "a bad number");
  if (*p == '0' && p + 1 < c->end && p[1] >= '0' && p[1] <= '9')
    return say(c->err, c->errlen, "a number with a leading zero");
  while (p < c->end && *p >= '0' && *p <= '9')
    p++;
  int integral = 1;
  if (p < c->end && *p == '.') {
    integral = 0;
    if (++p >= c->end || *p < '0' || *p > '9')
      return say(c->err, c->errlen, "a bad number");
    while (p < c->end && *p >= '0' && *p <= '9')
      p++;
  }
  if (p < c->end && (*p == 'e' || *p == 'E')) {
    integral = 0;
    if (++p < c->end && (*p == '+' || *p == '-'))
      p++;
    if (p >= c->end || *p < '0' || *p > '9')
      return say(c->err, c->errlen, "a bad number");
    while (p < c->end && *p >= '0' && *p <= '9')
      p++;
  }
  char buf[64];
  if ((size_t)(p - c->p) >= sizeof buf)
    return say(c->err, c->errlen, "a number over %zu characters", sizeof buf - 1);
  memcpy(buf, c->p, (size_t)(p - c->p));
  buf[p - c->p] = 0;
  c->p = p;
  *num = strtod(buf, NULL);
  if (!isfinite(*num))
    return say(c->err, c->errlen, "a number out of range");
  *is_int = 0;
  if (integral) {
    errno = 0;
    long long v = strtoll(buf, NULL, 10);
    if (!errno) {
      *i = v;
      *is_int = 1;
    }
  }
  return 0;
}

static int read_array(struct cur *c, struct mv_field *f) {
  c->p++;
  size_t cap = 0;
  f->is_int = 1;
  skip_ws(c);
  if (c->p < c->end && *c->p == ']') {
    c->p++;
    return 0;
  }
  for (;;) {
    skip_ws(c);
    if (f->len == MV_MAX_POINTS)
      return say(c->err, c->errlen, "an array over %d numbers", MV_MAX_POINTS);
    if (f->len == cap) {
      cap = cap ? cap * 2 : 64;
      double *a = realloc(f->arr, cap * sizeof *a);
      int64_t *ai = a ? realloc(f->arr_i, cap * sizeof *ai) : NULL;
      if (a)
        f->arr = a;
      if (!ai)
        return say(c->err, c->errlen, "out of memory");
      f->arr_i = ai;
    }
    int is_int = 0;
    if (read_number(c, &f->arr[f->len], &f->arr_i[f->len], &is_int))
      return -1;
    f->is_int &= is_int;
    f->len++;
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
      c->p++;
      continue;
    }
    if (c->p < c->end && *c->p == ']') {
      c->p++;
      return 0;
    }
    return say(c->err, c->errlen, "an array that does not end");
  }
}

static int word(struct cur *c, const char *w) {
  size_t n = strlen(w);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n))
    return 0;
  c->p += n;
  return 1;
}

static int read_value(struct cur *c, struct mv_field *f) {
  if (c->p >= c->end)
    return say(c->err, c->errlen, "a value missing");
  char ch = *c->p;
  if (ch == '"') {
    f->type = MV_STR;
    return read_string(c, &f->str, &f->len);
  }
  if (ch == '[') {
    f->type = MV_ARR;
    return read_array(c, f);
  }
  if (ch == '-' || (ch >= '0' && ch <= '9')) {
    f->type = MV_NUM;
    return read_number(c, &f->num, &f->i, &f->is_int);
  }
  if (word(c, "null"))
    return f->type = MV_NULL, 0;
  if (word(c, "true"))
    return f->type = MV_BOOL, f->num = 1, 0;
  if (word(c, "false"))
    return f->type = MV_BOOL, f->num = 0, 0;
  return say(c->err, c->errlen, "a value that is not a string, number, array, null or boolean");
}

static int read_field(struct cur *c, struct mv_line *l) {
  if (c->p >= c->end || *c->p != '"')
    return say(c->err, c->errlen, "a field name missing");
  char *key;
  size_t klen;
  if (read_string(c, &key, &klen))
    return -1;
  int bad = klen == 0 || klen >= sizeof l->f[0].key;
  for (size_t i = 0; !bad && i < l->n; i++)
    bad = !strcmp(l->f[i].key, key) ? 2 : 0;
  if (bad) {
    say(c->err, c->errlen, bad == 2 ? "a field given twice" : "a field name empty or over 31 bytes");
    free(key);
    return -1;
  }
  if (l->n == MV_MAX_FIELDS) {
    free(key);
    return say(c->err, c->errlen, "an object of more than %d fields", MV_MAX_FIELDS);
  }
  struct mv_field *f = &l->f[l->n++];
  memcpy(f->key, key, klen + 1);
  free(key);
  skip_ws(c);
  if (c->p >= c->end || *c->p++ != ':')
    return say(c->err, c->errlen, "a ':' missing after a field name");
  skip_ws(c);
  return read_value(c, f);
}

int mv_parse(const char *s, size_t len, struct mv_line *l, char *err, size_t errlen) {
  struct cur c = {s, s + len, err, errlen};
  memset(l, 0, sizeof *l);
  skip_ws(&c);
  if (c.p >= c.end || *c.p++ != '{')
    return say(err, errlen, "not a JSON object"), mv_line_done(l), -1;
  skip_ws(&c);
  if (c.p < c.end && *c.p == '}')
    c.p++;
  else
    for (;;) {
      if (read_field(&c, l))
        return mv_line_done(l), -1;
      skip_ws(&c);
      if (c.p < c.end && *c.p == ',') {
        c.p++;
        skip_ws(&c);
        continue;
      }
      if (c.p < c.end && *c.p == '}') {
        c.p++;
        break;
      }
      return say(err, errlen, "an object that does not end"), mv_line_done(l), -1;
    }
  skip_ws(&c);
  if (c.p != c.end)
    return say(err, errlen, "text after the object"), mv_line_done(l), -1;
  return 0;
}

void mv_line_done(struct mv_line *l) {
  for (size_t i = 0; i < l->n; i++)
    free(l->f[i].str), free(l->f[i].arr), free(l->f[i].arr_i);
  l->n = 0;
}

const struct mv_field *mv_get(const struct mv_line *l, const char *key) {
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->f[i].key, key))
      return &l->f[i];
  return NULL;
}

const char *mv_str(const struct mv_line *l, const char *key) {
  const struct mv_field *f = mv_get(l, key);
  return f && f->type == MV_STR ? f->str : "";
}

int64_t mv_int(const struct mv_line *l, const char *key, int64_t def) {
  const struct mv_field *f = mv_get(l, key);
  return f && f->type == MV_NUM && f->is_int ? f->i : def;
}

double mv_num(const struct mv_line *l, const char *key) {
  const struct mv_field *f = mv_get(l, key);
  return f && f->type == MV_NUM ? f->num : NAN;
}

/* ---- the checker: each line type's fields, then its place in the file ---- */

struct spec {
  const char *key;
  char type; /* s string, i integer, n number or null, a array of numbers */
  int max;   /* s: most bytes */
};

struct line_kind {
  const char *type;
  struct spec f[16];
};

static const struct line_kind kinds[] = {
    {"header", {{"format", 's', 31}, {"version", 'i', 0}, {"sections", 's', 1023}}},
    {"run",
     {{"id", 's', 31},
      {"name", 's', 127},
      {"group", 's', 63},
      {"status", 's', 15},
      {"command", 's', 2047},
      {"cwd", 's', 511},
      {"host", 's', 127},
      {"user", 's', 63},
      {"tags", 's', 1023},
      {"start_wall_ns", 'i', 0},
      {"end_wall_ns", 'i', 0},
      {"interval_ns", 'i', 0},
      {"exit_code", 'i', 0}}},
    {"param", {{"run", 's', 31}, {"key", 's', 255}, {"value", 's', MV_MAX_STR}}},
    {"series",
     {{"run", 's', 31},
      {"id", 'i', 0},
      {"source", 's', 31},
      {"name", 's', 159},
      {"labels", 's', 255},
      {"unit", 's', 15},
      {"kind", 's', 15}}},
    {"points", {{"run", 's', 31}, {"series", 'i', 0}, {"t", 'a', 0}, {"v", 'a', 0}}},
    {"event",
     {{"run", 's', 31},
      {"t", 'i', 0},
      {"kind", 's', 31},
      {"name", 's', 127},
      {"labels", 's', 255},
      {"text", 's', 511},
      {"value", 'n', 0}}},
    {"note", {{"run", 's', 31}, {"text", 's', 65535}}},
    {"log", {{"run", 's', 31}, {"seq", 'i', 0}, {"t", 'i', 0}, {"stream", 's', 7}, {"data", 's', 1 << 20}}},
    {"finding",
     {{"run", 's', 31},
      {"rule", 's', 31},
      {"severity", 's', 15},
      {"share", 'n', 0},
      {"lost_s", 'n', 0},
      {"speedup", 'n', 0},
      {"title", 's', 255},
      {"evidence", 's', 2047},
      {"fix", 's', 4095}}},
    {"run_end", {{"run", 's', 31}, {"lines", 'i', 0}}},
    {"end", {{"runs", 'i', 0}}},
};

/* The sections a file may list: those this gpuscope imports (a newer one's is refused by name). */
static const char *const sections[] = {"run", "param", "series", "points", "event", "note", "log", "finding"};

static int check_fields(const struct line_kind *k, const struct mv_line *l, char *err, size_t n) {
  size_t want = 1; /* "type" */
  for (const struct spec *s = k->f; s < k->f + 16 && s->key; s++, want++) {
    const struct mv_field *f = mv_get(l, s->key);
    if (!f)
      return say(err, n, "a %s line without its field '%s'", k->type, s->key);
    int ok = s->type == 's'   ? f->type == MV_STR
             : s->type == 'i' ? f->type == MV_NUM && f->is_int
             : s->type == 'n' ? f->type == MV_NUM || f->type == MV_NULL
                              : f->type == MV_ARR;
    const char *what = s->type == 's'   ? "a string"
                       : s->type == 'i' ? "an integer"
                       : s->type == 'n' ? "a number or null"
                                        : "an array of numbers";
    if (!ok)
      return say(err, n, "a %s line whose '%s' is not %s", k->type, s->key, what);
    if (s->type == 's' && f->len > (size_t)s->max)
      return say(err, n, "a %s line whose '%s' is over %d bytes", k->type, s->key, s->max);
  }
  if (l->n != want)
    for (size_t i = 0; i < l->n; i++) {
      int known = !strcmp(l->f[i].key, "type");
      for (const struct spec *s = k->f; !known && s < k->f + 16 && s->key; s++)
        known = !strcmp(s->key, l->f[i].key);
      if (!known)
        return say(err, n, "a %s line with a field this gpuscope does not know ('%s')", k->type, l->f[i].key);
    }
  return 0;
}

static int check_header(struct mv_check *c, const struct mv_line *l, char *err, size_t n) {
  if (strcmp(mv_str(l, "format"), "gpuscope-export"))
    return say(err, n, "not a gpuscope export file (its format is not gpuscope-export)");
  int64_t v = mv_int(l, "version", 0);
  if (v > MV_FORMAT_VERSION)
    return say(err, n, "export format version %lld is newer than this gpuscope reads (%d): upgrade gpuscope",
               (long long)v, MV_FORMAT_VERSION);
  if (v < 1)
    return say(err, n, "export format version %lld is not one there ever was", (long long)v);
  char list[1024];
  snprintf(list, sizeof list, "%s", mv_str(l, "sections"));
  for (char *save = NULL, *s = strtok_r(list, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
    size_t k = 0;
    while (k < sizeof sections / sizeof *sections && strcmp(sections[k], s))
      k++;
    if (k == sizeof sections / sizeof *sections)
      return say(err, n, "the file has a '%.64s' section, which this gpuscope cannot import: upgrade gpuscope", s);
  }
  c->state = 1;
  return 0;
}

static int check_run(struct mv_check *c, const struct mv_line *l, char *err, size_t n) {
  const char *id = mv_str(l, "id"), *status = mv_str(l, "status");
  if (!*id || strspn(id, "0123456789abcdefghijklmnopqrstuvwxyz") != strlen(id))
    return say(err, n, "a run id that is not letters a-z and digits");
  if (strcmp(status, "finished") && strcmp(status, "failed") && strcmp(status, "killed") && strcmp(status, "crashed"))
    return say(err, n, "run %s has status '%.15s' (an export holds ended runs: finished, failed, killed, crashed)", id,
               status);
  int64_t code = mv_int(l, "exit_code", 0), start = mv_int(l, "start_wall_ns", 0);
  if (code < -1 || code > 65535 || start < 0 || mv_int(l, "end_wall_ns", 0) < start || mv_int(l, "interval_ns", 0) < 0)
    return say(err, n, "run %s has an exit code, a start, an end or an interval out of range", id);
  snprintf(c->run_id, sizeof c->run_id, "%s", id);
  c->state = 2;
  c->runs++;
  c->run_lines = 1; /* the run line */
  c->n_series = 0;
  return 0;
}

static int check_series(struct mv_check *c, const struct mv_line *l, char *err, size_t n) {
  const char *kind = mv_str(l, "kind");
  if (strcmp(kind, "gauge") && strcmp(kind, "counter") && strcmp(kind, "event"))
    return say(err, n, "a series of kind '%.15s' (gauge, counter or event)", kind);
  if (mv_int(l, "id", -1) != (int64_t)c->n_series)
    return say(err, n, "series %lld declared out of order (series %zu was next)", (long long)mv_int(l, "id", -1),
               c->n_series);
  if (c->n_series == MV_MAX_SERIES)
    return say(err, n, "a run of more than %d series", MV_MAX_SERIES);
  if (c->n_series == c->cap_series) {
    size_t cap = c->cap_series ? c->cap_series * 2 : 256;
    int64_t *t = realloc(c->last_t, cap * sizeof *t);
    if (!t)
      return say(err, n, "out of memory");
    c->last_t = t;
    c->cap_series = cap;
  }
  c->last_t[c->n_series++] = INT64_MIN;
  return 0;
}

static int check_points(struct mv_check *c, const struct mv_line *l, char *err, size_t n) {
  int64_t s = mv_int(l, "series", -1);
  const struct mv_field *t = mv_get(l, "t"), *v = mv_get(l, "v");
  if (s < 0 || (size_t)s >= c->n_series)
    return say(err, n, "points of series %lld, which the run has not declared", (long long)s);
  if (!t->len || t->len != v->len || !t->is_int)
    return say(err, n, "a points line whose t and v are not as many, or t not integers, or none");
  for (size_t i = 0; i < t->len; i++) {
    if (t->arr_i[i] <= c->last_t[s])
      return say(err, n, "points of series %lld that go back in time", (long long)s);
    c->last_t[s] = t->arr_i[i];
  }
  return 0;
}

/* A chunk of the job's output: a known stream, and its bytes in base64 (the reader decodes them). */
static int check_log(const struct mv_line *l, char *err, size_t n) {
  const char *st = mv_str(l, "stream"), *d = mv_str(l, "data");
  if (strcmp(st, "out") && strcmp(st, "err") && strcmp(st, "tty"))
    return say(err, n, "output of stream '%.7s' (out, err or tty)", st);
  size_t len = strlen(d), body = strspn(d, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
  size_t pad = strspn(d + body, "=");
  if (len % 4 || body + pad != len || pad > 2 || mv_int(l, "seq", -1) < 0)
    return say(err, n, "an output chunk whose data is not base64, or whose seq is negative");
  return 0;
}

static const struct line_kind *kind_of(const struct mv_line *l, char *err, size_t n) {
  const struct mv_field *t = mv_get(l, "type");
  if (!t || t->type != MV_STR) {
    say(err, n, "a line without a \"type\"");
    return NULL;
  }
  for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
    if (!strcmp(kinds[i].type, t->str))
      return &kinds[i];
  say(err, n, "a line of type '%.32s', which this gpuscope does not know", t->str);
  return NULL;
}

static int check_place(struct mv_check *c, const struct line_kind *k, const struct mv_line *l, char *err, size_t n) {
  int is_header = !strcmp(k->type, "header"), is_run = !strcmp(k->type, "run"), is_end = !strcmp(k->type, "end");
  if (c->state == 3)
    return say(err, n, "a line after the end line");
  if (c->state == 0)
    return is_header ? check_header(c, l, err, n) : say(err, n, "not a gpuscope export file (no header line)");
  if (is_header)
    return say(err, n, "a second header line");
  if (c->state == 1) {
    if (is_run)
      return check_run(c, l, err, n);
    if (!is_end)
      return say(err, n, "a %s line outside a run", k->type);
    if (mv_int(l, "runs", -1) != c->runs)
      return say(err, n, "the end line counts %lld runs, the file holds %lld", (long long)mv_int(l, "runs", -1),
                 (long long)c->runs);
    c->state = 3;
    return 0;
  }
  if (is_run || is_end)
    return say(err, n, "run %s ends without its run_end line", c->run_id);
  if (strcmp(mv_str(l, "run"), c->run_id))
    return say(err, n, "a %s line of run '%.31s' inside run %s", k->type, mv_str(l, "run"), c->run_id);
  c->run_lines++;
  if (!strcmp(k->type, "series"))
    return check_series(c, l, err, n);
  if (!strcmp(k->type, "points"))
    return check_points(c, l, err, n);
  if (!strcmp(k->type, "log"))
    return check_log(l, err, n);
  if (!strcmp(k->type, "run_end")) {
    if (mv_int(l, "lines", -1) != c->run_lines)
      return say(err, n, "run %s's end counts %lld lines, the file holds %lld", c->run_id,
                 (long long)mv_int(l, "lines", -1), (long long)c->run_lines);
    c->state = 1;
  }
  return 0;
}

int mv_check(struct mv_check *c, const struct mv_line *l, const char **type, char *err, size_t errlen) {
  c->line_no++;
  const struct line_kind *k = kind_of(l, err, errlen);
  if (!k || check_fields(k, l, err, errlen))
    return -1;
  *type = k->type;
  return check_place(c, k, l, err, errlen);
}

int mv_check_eof(const struct mv_check *c, char *err, size_t errlen) {
  if (c->state == 3)
    return 0;
  if (c->state == 2)
    return say(err, errlen, "the file ends inside run %s, before its end line: truncated", c->run_id);
  return say(err, errlen, c->state ? "the file ends before its end line: truncated" : "an empty file");
}

void mv_check_done(struct mv_check *c) {
  free(c->last_t);
  memset(c, 0, sizeof *c);
}
