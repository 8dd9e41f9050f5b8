/* core/sink: the thread-safe in-memory buffer between producers (collectors, client ingest) and the
 * store writer. Producers register series once and put values; the writer takes a whole batch once
 * per flush period (1-10 s, see agent.h), so at most that much ever sits in memory. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

struct series_slot {
  char *key; /* source \x1f name \x1f labels */
  double last;
  int64_t last_t; /* 0: no point yet */
};

struct gs_sink {
  pthread_mutex_t mu;
  struct series_slot *series; /* by id */
  size_t n_series, cap_series;
  int32_t *table; /* open-addressing hash of ids, -1 empty */
  size_t table_cap;
  struct gs_batch *cur;
  struct gs_kv *params; /* every param put, kept for readers (gs_sink_param_get); later replace */
  size_t n_params, cap_params;
};

static char *dupz(const char *s) {
  return strdup(s ? s : "");
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return p;
  size_t c = *cap ? *cap * 2 : 16;
  while (c < need)
    c *= 2;
  void *q = realloc(p, c * elem);
  if (q)
    *cap = c;
  return q;
}

#define PUSH(arr, n, cap) ((arr) = grow((arr), &(cap), (n) + 1, sizeof *(arr)), (arr) != NULL)

struct gs_sink *gs_sink_new(void) {
  struct gs_sink *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  pthread_mutex_init(&s->mu, NULL);
  s->cur = calloc(1, sizeof *s->cur);
  s->table_cap = 256;
  s->table = malloc(s->table_cap * sizeof *s->table);
  if (!s->cur || !s->table) {
    gs_sink_free(s);
    return NULL;
  }
  memset(s->table, 0xff, s->table_cap * sizeof *s->table);
  return s;
}

void gs_sink_free(struct gs_sink *s) {
  if (!s)
    return;
  for (size_t i = 0; i < s->n_series; i++)
    free(s->series[i].key);
  free(s->series);
  free(s->table);
  for (size_t i = 0; i < s->n_params; i++)
    free(s->params[i].key), free(s->params[i].value);
  free(s->params);
  gs_batch_free(s->cur);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static int table_find(struct gs_sink *s, const char *key, size_t *slot) {
  size_t mask = s->table_cap - 1, i = hash_str(key) & mask;
  while (s->table[i] >= 0) {
    if (!strcmp(s->series[s->table[i]].key, key)) {
      *slot = i;
      return s->table[i];
    }
    i = (i + 1) & mask;
  }
  *slot = i;
  return -1;
}

static int table_rehash(struct gs_sink *s) {
  size_t cap = s->table_cap * 2;
  int32_t *t = malloc(cap * sizeof *t);
  if (!t)
    return GS_ENOMEM;
  memset(t, 0xff, cap * sizeof *t);
  for (size_t id = 0; id < s->n_series; id++) {
    size_t i = hash_str(s->series[id].key) & (cap - 1);
    while (t[i] >= 0)
      i = (i + 1) & (cap - 1);
    t[i] = (int32_t)id;
  }
  free(s->table);
  s->table = t;
  s->table_cap = cap;
  return GS_OK;
}

static void make_key(char *key, size_t n, const char *source, const char *name, const char *labels) {
  snprintf(key, n, "%s\x1f%s\x1f%s", source ? source : "", name ? name : "", labels ? labels : "");
}

int gs_sink_find(struct gs_sink *s, const char *source, const char *name, const char *labels) {
  char key[768];
  size_t slot;
  make_key(key, sizeof key, source, name, labels);
  pthread_mutex_lock(&s->mu);
  int id = table_find(s, key, &slot);
  pthread_mutex_unlock(&s->mu);
  return id;
}

int gs_sink_series(struct gs_sink *s, const char *source, const char *name, const char *labels, const char *unit,
                   enum gs_kind kind) {
  char key[768];
  size_t slot;
  if (!name || !*name)
    return gs_fail(GS_EINVAL, "series without a name");
  make_key(key, sizeof key, source, name, labels);
  pthread_mutex_lock(&s->mu);
  int id = table_find(s, key, &slot);
  if (id >= 0)
    goto fail;
  id = GS_ENOMEM;
  if ((s->n_series + 1) * 2 > s->table_cap) {
    if (table_rehash(s))
      goto fail;
    table_find(s, key, &slot);
  }
  struct gs_batch *b = s->cur;
  if (!PUSH(s->series, s->n_series, s->cap_series) || !PUSH(b->series, b->n_series, b->cap_series))
    goto fail;
  char *k = strdup(key);
  struct gs_series_def *d = &b->series[b->n_series];
  *d = (struct gs_series_def){.id = (int)s->n_series,
                              .source = dupz(source),
                              .name = dupz(name),
                              .labels = dupz(labels),
                              .unit = dupz(unit),
                              .kind = kind};
  if (!k || !d->source || !d->name || !d->labels || !d->unit) {
    free(k);
    free(d->source), free(d->name), free(d->labels), free(d->unit);
    goto fail;
  }
  b->n_series++;
  s->series[s->n_series] = (struct series_slot){.key = k, .last = NAN, .last_t = 0};
  id = (int)s->n_series++;
  s->table[slot] = id;
fail:
  pthread_mutex_unlock(&s->mu);
  return id;
}

void gs_sink_put(struct gs_sink *s, int series, int64_t t_ns, double v) {
  if (series < 0 || !isfinite(v))
    return;
  pthread_mutex_lock(&s->mu);
  struct gs_batch *b = s->cur;
  if ((size_t)series < s->n_series && PUSH(b->points, b->n_points, b->cap_points)) {
    b->points[b->n_points++] = (struct gs_point){.series = series, .t_ns = t_ns, .v = v};
    s->series[series].last = v;
    if (t_ns > s->series[series].last_t)
      s->series[series].last_t = t_ns;
  }
  pthread_mutex_unlock(&s->mu);
}

void gs_sink_end(struct gs_sink *s, int series) {
  if (series < 0)
    return;
  pthread_mutex_lock(&s->mu);
  if ((size_t)series < s->n_series)
    s->series[series].last = NAN;
  pthread_mutex_unlock(&s->mu);
}

double gs_sink_last(struct gs_sink *s, int series) {
  double v = NAN;
  if (series < 0)
    return v;
  pthread_mutex_lock(&s->mu);
  if ((size_t)series < s->n_series)
    v = s->series[series].last;
  pthread_mutex_unlock(&s->mu);
  return v;
}

int64_t gs_sink_source_last_t(struct gs_sink *s, const char *source) {
  size_t n = strlen(source);
  int64_t t = 0;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n_series; i++)
    if (!strncmp(s->series[i].key, source, n) && s->series[i].key[n] == '\x1f' && s->series[i].last_t > t)
      t = s->series[i].last_t;
  pthread_mutex_unlock(&s->mu);
  return t;
}

void gs_sink_event(struct gs_sink *s, int64_t t_ns, const char *kind, const char *name, double value,
                   const char *labels, const char *text) {
  pthread_mutex_lock(&s->mu);
  struct gs_batch *b = s->cur;
  if (PUSH(b->events, b->n_events, b->cap_events))
    b->events[b->n_events++] = (struct gs_event){.t_ns = t_ns,
                                                 .kind = dupz(kind),
                                                 .name = dupz(name),
                                                 .value = value,
                                                 .labels = dupz(labels),
                                                 .text = dupz(text)};
  pthread_mutex_unlock(&s->mu);
}

/* Under s->mu: the readers' copy of a param (replaces an earlier value of the key). */
static void param_keep(struct gs_sink *s, const char *key, const char *value) {
  for (size_t i = 0; i < s->n_params; i++)
    if (!strcmp(s->params[i].key, key ? key : "")) {
      char *v = dupz(value);
      if (v)
        free(s->params[i].value), s->params[i].value = v;
      return;
    }
  if (!PUSH(s->params, s->n_params, s->cap_params))
    return;
  struct gs_kv kv = {.key = dupz(key), .value = dupz(value)};
  if (!kv.key || !kv.value) {
    free(kv.key), free(kv.value);
    return;
  }
  s->params[s->n_params++] = kv;
}

void gs_sink_param(struct gs_sink *s, const char *key, const char *value) {
  pthread_mutex_lock(&s->mu);
  struct gs_batch *b = s->cur;
  if (PUSH(b->params, b->n_params, b->cap_params))
    b->params[b->n_params++] = (struct gs_kv){.key = dupz(key), .value = dupz(value)};
  param_keep(s, key, value);
  pthread_mutex_unlock(&s->mu);
}

void gs_sink_note(struct gs_sink *s, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&s->mu);
  struct gs_batch *b = s->cur;
  if (PUSH(b->notes, b->n_notes, b->cap_notes))
    b->notes[b->n_notes++] = strdup(buf);
  pthread_mutex_unlock(&s->mu);
}

int gs_sink_param_get(struct gs_sink *s, const char *key, char *buf, size_t n) {
  int found = 0;
  if (n)
    buf[0] = 0;
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n_params && !found; i++)
    if (!strcmp(s->params[i].key, key)) {
      snprintf(buf, n, "%s", s->params[i].value);
      found = 1;
    }
  pthread_mutex_unlock(&s->mu);
  return found;
}

void gs_sink_each(struct gs_sink *s, gs_sink_each_fn fn, void *user) {
  pthread_mutex_lock(&s->mu);
  for (size_t i = 0; i < s->n_series; i++) {
    struct series_slot *sl = &s->series[i];
    if (!isfinite(sl->last))
      continue; /* never put: not supported, or not yet */
    /* key is "source \x1f name \x1f labels" */
    const char *k = sl->key, *a = strchr(k, '\x1f'), *b = a ? strchr(a + 1, '\x1f') : NULL;
    if (!b)
      continue;
    fn(user, (int)i, k, (size_t)(a - k), a + 1, (size_t)(b - a - 1), b + 1, sl->last, sl->last_t);
  }
  pthread_mutex_unlock(&s->mu);
}

size_t gs_sink_pending(struct gs_sink *s) {
  pthread_mutex_lock(&s->mu);
  size_t n = s->cur->n_points + s->cur->n_events;
  pthread_mutex_unlock(&s->mu);
  return n;
}

struct gs_batch *gs_sink_take(struct gs_sink *s) {
  struct gs_batch *fresh = calloc(1, sizeof *fresh);
  if (!fresh)
    return NULL;
  pthread_mutex_lock(&s->mu);
  struct gs_batch *b = s->cur;
  /* Keep the point buffer's size so the next second does not regrow from zero. */
  fresh->points = malloc((b->n_points ? b->n_points : 64) * sizeof *fresh->points);
  fresh->cap_points = fresh->points ? (b->n_points ? b->n_points : 64) : 0;
  s->cur = fresh;
  pthread_mutex_unlock(&s->mu);
  return b;
}

void gs_batch_free(struct gs_batch *b) {
  if (!b)
    return;
  for (size_t i = 0; i < b->n_series; i++) {
    struct gs_series_def *d = &b->series[i];
    free(d->source), free(d->name), free(d->labels), free(d->unit);
  }
  for (size_t i = 0; i < b->n_events; i++) {
    struct gs_event *e = &b->events[i];
    free(e->kind), free(e->name), free(e->labels), free(e->text);
  }
  for (size_t i = 0; i < b->n_params; i++)
    free(b->params[i].key), free(b->params[i].value);
  for (size_t i = 0; i < b->n_notes; i++)
    free(b->notes[i]);
  free(b->series), free(b->points), free(b->events), free(b->params), free(b->notes);
  free(b);
}
