/* store/writer: the writer state every back end shares (declared in store_backend.h) — one chunk
 * encoder per sink series with its row id in the store, grown as series appear; the points of a
 * batch put into those encoders, a series only moving forward; what a rolled-back transaction
 * leaves to forget; and the batch kept across failed appends with the failure counts. A back end
 * adds its own per-series fields by embedding struct store_wseries first in a struct of its own
 * (elem bytes), and writes the chunks through the two callbacks of store_writer_points. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_backend.h"

/* A chunk closes at 1,024 points, after 120 s, or when it nears STORE_CHUNK_MAX_BYTES (a point
 * takes at most STORE_CHUNK_MAX_POINT_BYTES), which keeps every SQLite row within one 4 KiB page
 * (SQLite's default page size): a larger row spills into an overflow page that is rewritten at
 * each flush and half empty for good. The same chunks in every back end keep bytes per point and
 * read costs comparable. */
enum { STORE_CHUNK_MAX_POINTS = 1024, STORE_CHUNK_MAX_BYTES = 4000, STORE_CHUNK_MAX_POINT_BYTES = 19 };
#define STORE_CHUNK_MAX_SPAN_NS (120LL * GS_NS_PER_S)

static size_t elem_of(const struct store_writer *w) {
  return w->elem ? w->elem : sizeof(struct store_wseries);
}

struct store_wseries *store_writer_at(struct store_writer *w, size_t i) {
  return (struct store_wseries *)(w->ws + i * elem_of(w));
}

int store_writer_ensure(struct store_writer *w, int id) {
  if ((size_t)id < w->n)
    return GS_OK;
  size_t n = (size_t)id + 64, elem = elem_of(w);
  unsigned char *ws = realloc(w->ws, n * elem);
  if (!ws)
    return gs_fail(GS_ENOMEM, "out of memory");
  memset(ws + w->n * elem, 0, (n - w->n) * elem);
  w->ws = ws;
  for (size_t i = w->n; i < n; i++) {
    struct store_wseries *x = store_writer_at(w, i);
    x->db_id = -1;
    chunk_enc_init(&x->enc);
  }
  w->n = n;
  return GS_OK;
}

struct store_wseries *store_writer_series(struct store_writer *w, int id) {
  if (id < 0 || (size_t)id >= w->n)
    return NULL;
  struct store_wseries *x = store_writer_at(w, (size_t)id);
  return x->db_id < 0 ? NULL : x;
}

void store_wseries_clear(struct store_writer *w, struct store_wseries *x) {
  chunk_enc_done(&x->enc);
  chunk_enc_init(&x->enc);
  x->dirty = x->sealed = 0;
  memset(x + 1, 0, elem_of(w) - sizeof *x); /* the back end's own fields */
}

void store_writer_forget(struct store_writer *w) {
  for (size_t i = 0; i < w->n; i++) {
    struct store_wseries *x = store_writer_at(w, i);
    if (x->added) {
      x->db_id = -1;
      x->added = 0;
    }
    store_wseries_clear(w, x);
  }
  w->stale = 1;
}

void store_writer_committed(struct store_writer *w) {
  for (size_t i = 0; i < w->n; i++)
    store_writer_at(w, i)->added = 0;
  w->stale = 0;
}

/* True when the point at t does not fit the series' open chunk. */
static int chunk_full(const struct store_wseries *x, int64_t t) {
  const struct chunk_enc *e = &x->enc;
  return x->sealed || e->n >= STORE_CHUNK_MAX_POINTS || (e->n && t - e->t0 > STORE_CHUNK_MAX_SPAN_NS) ||
         chunk_enc_bytes(e) + STORE_CHUNK_MAX_POINT_BYTES > STORE_CHUNK_MAX_BYTES;
}

int store_writer_points(struct store_writer *w, const struct store_run *r, const struct gs_batch *b,
                        store_chunk_fn seal, store_chunk_fn write, void *ctx) {
  int rc;
  for (size_t i = 0; i < b->n_points; i++) {
    const struct gs_point *p = &b->points[i];
    struct store_wseries *x = store_writer_series(w, p->series);
    if (!x)
      continue;
    int64_t t = p->t_ns - r->mono_start_ns;
    if (x->enc.n && t <= x->enc.t_prev)
      continue;             /* out of order or already stored (a replay): a series only moves forward */
    if (chunk_full(x, t)) { /* its last points, then closed; a chunk closed already is not written again */
      if (!x->sealed && x->enc.n && (rc = seal(ctx, x)))
        return rc;
      chunk_enc_done(&x->enc);
      x->sealed = 0;
    }
    if (chunk_enc_put(&x->enc, t, p->v))
      return gs_fail(GS_ENOMEM, "out of memory");
    x->dirty = 1;
  }
  for (size_t i = 0; i < w->n; i++) {
    struct store_wseries *x = store_writer_at(w, i);
    if (x->dirty && (rc = write(ctx, x)))
      return rc;
  }
  return GS_OK;
}

void store_writer_clear(struct store_writer *w, struct store_write_stats *st) {
  store_pending_clear(&w->pending);
  st->points_pending = 0;
}

const struct gs_batch *store_writer_todo(struct store_writer *w, struct store_write_stats *st,
                                         const struct gs_batch *b) {
  if (!store_pending_any(&w->pending))
    return b;
  store_pending_add(&w->pending, b, st); /* earlier appends failed: theirs first, in one go with this */
  return &w->pending.b;
}

int store_writer_wrote(struct store_writer *w, struct store_write_stats *st, const struct gs_batch *b,
                       const struct gs_batch *todo, int rc) {
  if (!rc) {
    store_writer_clear(w, st);
    return GS_OK;
  }
  if (todo == b)
    store_pending_add(&w->pending, b, st);
  store_writer_failed(w, st);
  return rc;
}

int store_writer_end(struct store_writer *w, struct store_write_stats *st, const struct store_run *r,
                     store_batch_fn write, store_end_fn end, void *ctx) {
  int kept = 1;
  if (store_pending_any(&w->pending)) {
    if (!write(ctx, r, &w->pending.b))
      store_writer_clear(w, st);
    else {
      store_writer_failed(w, st);
      kept = 0;
    }
  }
  struct store_write_stats before = *st;
  if (!kept) { /* the run closes without them: counted as not kept in the note */
    st->points_dropped += (int64_t)w->pending.b.n_points;
    st->events_dropped += (int64_t)(w->pending.b.n_events + w->pending.b.n_params + w->pending.b.n_notes);
    st->points_pending = 0;
  }
  int rc = end(ctx, r);
  if (rc) {
    *st = before; /* still pending: a later run_end may write them */
    return rc;
  }
  if (!kept)
    store_pending_clear(&w->pending);
  return GS_OK;
}

void store_writer_failed(struct store_writer *w, struct store_write_stats *st) {
  st->failed_appends++;
  if (!st->first_error[0])
    snprintf(st->first_error, sizeof st->first_error, "%s", gs_last_error());
  st->points_pending = (int64_t)w->pending.b.n_points;
}

void store_writer_new_run(struct store_writer *w) {
  for (size_t i = 0; i < w->n; i++)
    chunk_enc_done(&store_writer_at(w, i)->enc);
  free(w->ws);
  w->ws = NULL;
  w->n = 0;
  w->stale = 0;
}

void store_writer_done(struct store_writer *w) {
  store_writer_new_run(w);
  store_pending_done(&w->pending);
}
