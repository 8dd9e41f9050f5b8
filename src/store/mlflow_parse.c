/* store/mlflow_parse: the readers of an MLflow file store's meta.yaml (through libyaml's event
 * parser) and metric files (mlflow_int.h). Pure and fuzzed (tests/fuzz/fuzz_mlflow_parse.c): any
 * bytes give a result or a one-line reason with the byte offset where it went wrong. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "store/mlflow_int.h"

static int say(char *err, size_t n, size_t off, const char *why) {
  snprintf(err, n, "offset %zu: %s", off, why);
  return -1;
}

/* Passes over a value that is a list or mapping (its start event already read), nested ones too. */
static int skip_nested(yaml_parser_t *p, char *err, size_t n) {
  int depth = 1;
  while (depth > 0) {
    yaml_event_t e;
    if (!yaml_parser_parse(p, &e))
      return say(err, n, p->problem_mark.index, p->problem ? p->problem : "not YAML");
    if (e.type == YAML_SEQUENCE_START_EVENT || e.type == YAML_MAPPING_START_EVENT)
      depth++;
    else if (e.type == YAML_SEQUENCE_END_EVENT || e.type == YAML_MAPPING_END_EVENT)
      depth--;
    else if (e.type == YAML_STREAM_END_EVENT || e.type == YAML_ALIAS_EVENT)
      depth = -1;
    yaml_event_delete(&e);
  }
  return depth ? say(err, n, p->mark.index, "an alias or an unended list") : 0;
}

static int is_null(const yaml_event_t *e) {
  const char *v = (const char *)e->data.scalar.value;
  return e->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
         (!*v || !strcmp(v, "null") || !strcmp(v, "~") || !strcmp(v, "Null") || !strcmp(v, "NULL"));
}

/* One key and its value, the key's event already read; a scalar value is kept. */
static int read_pair(yaml_parser_t *p, const yaml_event_t *k, struct ml_meta *out, char *err, size_t n) {
  if (k->type != YAML_SCALAR_EVENT)
    return say(err, n, k->start_mark.index, "a key that is not a plain word");
  yaml_event_t v;
  if (!yaml_parser_parse(p, &v))
    return say(err, n, p->problem_mark.index, p->problem ? p->problem : "not YAML");
  int rc = 0;
  if (v.type == YAML_SEQUENCE_START_EVENT || v.type == YAML_MAPPING_START_EVENT)
    rc = skip_nested(p, err, n);
  else if (v.type != YAML_SCALAR_EVENT)
    rc = say(err, n, v.start_mark.index, "a value that is neither a scalar, a list nor a mapping");
  else if (k->data.scalar.length >= sizeof out->kv[0].key || v.data.scalar.length >= ML_MAX_VALUE)
    rc = say(err, n, k->start_mark.index, "a key or value too long");
  else if (out->n == ML_MAX_KEYS)
    rc = say(err, n, k->start_mark.index, "more than 64 keys");
  else if (!is_null(&v)) {
    memcpy(out->kv[out->n].key, k->data.scalar.value, k->data.scalar.length + 1);
    memcpy(out->kv[out->n].val, v.data.scalar.value, v.data.scalar.length + 1);
    if (strlen(out->kv[out->n].key) != k->data.scalar.length || strlen(out->kv[out->n].val) != v.data.scalar.length)
      rc = say(err, n, k->start_mark.index, "a NUL byte in a key or value");
    else
      out->n++;
  }
  yaml_event_delete(&v);
  return rc;
}

/* The events of the one document: a mapping of pairs, then its end. */
static int read_doc(yaml_parser_t *p, struct ml_meta *out, char *err, size_t n) {
  int state = 0; /* 0 before the mapping, 1 in it, 2 after it */
  for (;;) {
    yaml_event_t e;
    if (!yaml_parser_parse(p, &e))
      return say(err, n, p->problem_mark.index, p->problem ? p->problem : "not YAML");
    yaml_event_type_t t = e.type;
    size_t at = e.start_mark.index;
    int rc = 0;
    if (t == YAML_STREAM_END_EVENT) {
      yaml_event_delete(&e);
      return state == 2 ? 0 : say(err, n, at, "no mapping of keys (not a meta.yaml)");
    }
    if (t == YAML_MAPPING_START_EVENT && state == 0)
      state = 1;
    else if (t == YAML_MAPPING_END_EVENT && state == 1)
      state = 2;
    else if (state == 1)
      rc = read_pair(p, &e, out, err, n);
    else if (t == YAML_DOCUMENT_START_EVENT && state == 2)
      rc = say(err, n, at, "a second document");
    else if (t != YAML_STREAM_START_EVENT && t != YAML_DOCUMENT_START_EVENT && t != YAML_DOCUMENT_END_EVENT)
      rc = say(err, n, at, "not a mapping of keys (not a meta.yaml)");
    yaml_event_delete(&e);
    if (rc)
      return rc;
  }
}

int ml_parse_meta(const char *s, size_t n, struct ml_meta *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  yaml_parser_t p;
  if (!yaml_parser_initialize(&p))
    return say(err, errlen, 0, "out of memory");
  yaml_parser_set_input_string(&p, (const unsigned char *)s, n);
  int rc = read_doc(&p, out, err, errlen);
  yaml_parser_delete(&p);
  if (rc)
    out->n = 0;
  return rc;
}

const char *ml_meta_get(const struct ml_meta *m, const char *key) {
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->kv[i].key, key))
      return m->kv[i].val;
  return NULL;
}

/* One metric line (len bytes at s, no newline) into *pt: 1 kept, 0 left out (not finite), -1 bad. */
static int metric_line(const char *s, size_t len, struct ml_point *pt) {
  char buf[160];
  if (!len || len >= sizeof buf || memchr(s, 0, len))
    return -1;
  memcpy(buf, s, len);
  buf[len] = 0;
  char *a = buf, *end;
  errno = 0;
  long long ts = strtoll(a, &end, 10);
  if (end == a || *end != ' ' || errno || ts < 0 || ts > 9000000000000LL)
    return -1;
  a = end + 1;
  if (*a == ' ' || !*a)
    return -1;
  double v = strtod(a, &end);
  if (end == a || (*end && *end != ' '))
    return -1;
  long long step = -1;
  if (*end) {
    a = end + 1;
    errno = 0;
    step = strtoll(a, &end, 10);
    if (end == a || *end || errno || step < 0 || step > 999999999999999LL)
      return -1;
  }
  *pt = (struct ml_point){.ts_ms = ts, .v = v, .step = step};
  return isfinite(v) ? 1 : 0;
}

int ml_parse_metric(const char *s, size_t n, struct ml_point **pts, size_t *np, char *err, size_t errlen) {
  *pts = NULL;
  *np = 0;
  size_t cap = 0, off = 0;
  struct ml_point *p = NULL;
  while (off < n) {
    const char *nl = memchr(s + off, '\n', n - off);
    size_t len = nl ? (size_t)(nl - (s + off)) : n - off;
    struct ml_point pt;
    int r = metric_line(s + off, len, &pt);
    if (r < 0 || (r > 0 && *np == ML_MAX_POINTS)) {
      free(p);
      *np = 0;
      return say(err, errlen, off, r < 0 ? "not a metric line 'TIMESTAMP VALUE [STEP]'" : "over 10,000,000 points");
    }
    if (r > 0 && *np == cap) {
      cap = cap ? cap * 2 : 64;
      struct ml_point *q = realloc(p, cap * sizeof *q);
      if (!q) {
        free(p);
        *np = 0;
        return say(err, errlen, off, "out of memory");
      }
      p = q;
    }
    if (r > 0)
      p[(*np)++] = pt;
    off += len + 1;
  }
  *pts = p;
  return 0;
}
