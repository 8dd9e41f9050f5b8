/* store/pending: what a failed append leaves behind. A back end that cannot write a batch keeps a
 * copy here and writes it, with whatever came since, at the next append — so a disk that fills up
 * and frees again, or a store locked for a while, loses nothing up to the bound. Past
 * STORE_PENDING_MAX_POINTS points (32 MiB) the newest points are dropped and counted, so memory
 * stays bounded whatever the outage; series definitions are always kept (later points need them). */
#include <stdlib.h>
#include <string.h>

#include "store/store_backend.h"

static char *copy_str(const char *s) {
  return strdup(s ? s : "");
}

/* Makes room for one more element of size elem in *v (len used, *cap allocated). */
static int reserve(void **v, size_t len, size_t *cap, size_t more, size_t elem) {
  if (len + more <= *cap)
    return 0;
  size_t c = *cap ? *cap : 64;
  while (c < len + more)
    c *= 2;
  void *nv = realloc(*v, c * elem);
  if (!nv)
    return -1;
  *v = nv;
  *cap = c;
  return 0;
}

static int add_series(struct gs_batch *d, const struct gs_series_def *s) {
  if (reserve((void **)&d->series, d->n_series, &d->cap_series, 1, sizeof *d->series))
    return GS_ENOMEM;
  struct gs_series_def *x = &d->series[d->n_series];
  *x = (struct gs_series_def){.id = s->id,
                              .kind = s->kind,
                              .source = copy_str(s->source),
                              .name = copy_str(s->name),
                              .labels = copy_str(s->labels),
                              .unit = copy_str(s->unit)};
  if (!x->source || !x->name || !x->labels || !x->unit) {
    free(x->source), free(x->name), free(x->labels), free(x->unit);
    return GS_ENOMEM;
  }
  d->n_series++;
  return GS_OK;
}

static int add_event(struct gs_batch *d, const struct gs_event *e) {
  if (reserve((void **)&d->events, d->n_events, &d->cap_events, 1, sizeof *d->events))
    return GS_ENOMEM;
  struct gs_event *x = &d->events[d->n_events];
  *x = (struct gs_event){.t_ns = e->t_ns,
                         .value = e->value,
                         .kind = copy_str(e->kind),
                         .name = copy_str(e->name),
                         .labels = copy_str(e->labels),
                         .text = copy_str(e->text)};
  if (!x->kind || !x->name || !x->labels || !x->text) {
    free(x->kind), free(x->name), free(x->labels), free(x->text);
    return GS_ENOMEM;
  }
  d->n_events++;
  return GS_OK;
}

static int add_param(struct gs_batch *d, const struct gs_kv *kv) {
  for (size_t i = 0; i < d->n_params; i++) /* a later value replaces an earlier one, as in the sink */
    if (!strcmp(d->params[i].key, kv->key)) {
      char *v = copy_str(kv->value);
      if (!v)
        return GS_ENOMEM;
      free(d->params[i].value);
      d->params[i].value = v;
      return GS_OK;
    }
  if (reserve((void **)&d->params, d->n_params, &d->cap_params, 1, sizeof *d->params))
    return GS_ENOMEM;
  struct gs_kv *x = &d->params[d->n_params];
  x->key = copy_str(kv->key);
  x->value = copy_str(kv->value);
  if (!x->key || !x->value) {
    free(x->key), free(x->value);
    return GS_ENOMEM;
  }
  d->n_params++;
  return GS_OK;
}

static int add_note(struct gs_batch *d, const char *note) {
  if (reserve((void **)&d->notes, d->n_notes, &d->cap_notes, 1, sizeof *d->notes))
    return GS_ENOMEM;
  if (!(d->notes[d->n_notes] = copy_str(note)))
    return GS_ENOMEM;
  d->n_notes++;
  return GS_OK;
}

int store_pending_add(struct store_pending *p, const struct gs_batch *src, struct store_write_stats *stats) {
  struct gs_batch *d = &p->b;
  int rc = GS_OK;
  for (size_t i = 0; i < src->n_series; i++)
    if (add_series(d, &src->series[i]))
      rc = GS_ENOMEM; /* its points will find no series and be skipped by the writer */
  size_t room = d->n_points < STORE_PENDING_MAX_POINTS ? STORE_PENDING_MAX_POINTS - d->n_points : 0;
  size_t take = src->n_points < room ? src->n_points : room;
  if (take && reserve((void **)&d->points, d->n_points, &d->cap_points, take, sizeof *d->points))
    take = 0, rc = GS_ENOMEM;
  if (take)
    memcpy(d->points + d->n_points, src->points, take * sizeof *src->points);
  d->n_points += take;
  stats->points_dropped += (int64_t)(src->n_points - take);
  for (size_t i = 0; i < src->n_events; i++)
    if (d->n_events >= STORE_PENDING_MAX_EVENTS || add_event(d, &src->events[i]))
      stats->events_dropped++;
  for (size_t i = 0; i < src->n_params; i++)
    if (add_param(d, &src->params[i]))
      stats->events_dropped++, rc = GS_ENOMEM;
  for (size_t i = 0; i < src->n_notes; i++)
    if (d->n_notes >= STORE_PENDING_MAX_EVENTS || add_note(d, src->notes[i]))
      stats->events_dropped++;
  stats->points_pending = (int64_t)d->n_points;
  return rc;
}

int store_pending_any(const struct store_pending *p) {
  const struct gs_batch *b = &p->b;
  return b->n_series || b->n_points || b->n_events || b->n_params || b->n_notes;
}

void store_pending_clear(struct store_pending *p) {
  struct gs_batch *b = &p->b;
  for (size_t i = 0; i < b->n_series; i++)
    free(b->series[i].source), free(b->series[i].name), free(b->series[i].labels), free(b->series[i].unit);
  for (size_t i = 0; i < b->n_events; i++)
    free(b->events[i].kind), free(b->events[i].name), free(b->events[i].labels), free(b->events[i].text);
  for (size_t i = 0; i < b->n_params; i++)
    free(b->params[i].key), free(b->params[i].value);
  for (size_t i = 0; i < b->n_notes; i++)
    free(b->notes[i]);
  /* keep the arrays: an outage usually lasts more than one flush */
  b->n_series = b->n_points = b->n_events = b->n_params = b->n_notes = 0;
}

void store_pending_done(struct store_pending *p) {
  store_pending_clear(p);
  struct gs_batch *b = &p->b;
  free(b->series), free(b->points), free(b->events), free(b->params), free(b->notes);
  memset(b, 0, sizeof *b);
}
