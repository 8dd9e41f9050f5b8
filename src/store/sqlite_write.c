/* store/sqlite_write: the SQLite back end's writer — a batch's transaction (chunks, series, events,
 * params, notes), the run's end row, and findings. A run's begin and end, which also read and write
 * the kept file (sqlite_kept.c), are sqlite_run.c's, above both.
 *
 * An append is one transaction. When it fails (disk full, a file size limit, a lock held past the
 * busy timeout) it is rolled back as a whole, and the writer's memory is made to match the file
 * again: series rows added by that transaction lose their ids (they are added again), and every
 * open chunk is reloaded from the file before the next write (`stale`). The batch is kept
 * (pending.c) and written with the next append, so samples are neither lost nor attached to a
 * series id that no longer exists — which a later run would otherwise inherit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite_int.h"

/* ---- chunks ---- */

/* Writes the chunk as a row keyed by (series_id, t0), INSERT OR REPLACE: how a clustered store
 * keeps every chunk, and how the rowid layout puts a full chunk at the end of the table (the
 * replaced row being the chunk's own open row, if it had one). */
static int insert_chunk(struct sqlite_store *s, struct wseries *w) {
  sqlite3_stmt *st = s->ins_chunk;
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, w->x.db_id);
  sqlite3_bind_int64(st, 2, w->x.enc.t0);
  sqlite3_bind_int64(st, 3, w->x.enc.t_prev);
  sqlite3_bind_int64(st, 4, w->x.enc.n);
  sqlite3_bind_blob(st, 5, w->x.enc.buf, (int)chunk_enc_bytes(&w->x.enc), SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_DONE)
    return sq_fail(s, "cannot write samples");
  w->x.dirty = 0;
  return GS_OK;
}

/* Writes the open chunk of a series. Rowid layout: into the series' row at rowid -db_id — in
 * place while it holds this chunk; otherwise whatever the row holds (an older chunk, say after a
 * flush was rolled back) is first moved to the end of the table, kept, never overwritten. */
static int write_chunk(struct sqlite_store *s, struct wseries *w) {
  if (!s->upd_open)
    return insert_chunk(s, w);
  int bytes = (int)chunk_enc_bytes(&w->x.enc);
  sqlite3_stmt *st;
  if (w->open_row) {
    st = s->upd_open;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, w->x.enc.t_prev);
    sqlite3_bind_int64(st, 2, w->x.enc.n);
    sqlite3_bind_blob(st, 3, w->x.enc.buf, bytes, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, -w->x.db_id);
    sqlite3_bind_int64(st, 5, w->x.db_id);
    sqlite3_bind_int64(st, 6, w->x.enc.t0);
    if (sqlite3_step(st) != SQLITE_DONE)
      return sq_fail(s, "cannot write samples");
    if (sqlite3_changes(s->db) == 1) {
      w->x.dirty = 0;
      return GS_OK;
    }
    w->open_row = 0;
  }
  if (!w->slot_empty) {
    sqlite3_reset(s->move_open);
    sqlite3_bind_int64(s->move_open, 1, -w->x.db_id);
    if (sqlite3_step(s->move_open) != SQLITE_DONE)
      return sq_fail(s, "cannot write samples");
  }
  st = s->ins_open;
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, -w->x.db_id);
  sqlite3_bind_int64(st, 2, w->x.db_id);
  sqlite3_bind_int64(st, 3, w->x.enc.t0);
  sqlite3_bind_int64(st, 4, w->x.enc.t_prev);
  sqlite3_bind_int64(st, 5, w->x.enc.n);
  sqlite3_bind_blob(st, 6, w->x.enc.buf, bytes, SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_DONE)
    return sq_fail(s, "cannot write samples");
  w->open_row = 1;
  w->slot_empty = 0;
  w->x.dirty = 0;
  return GS_OK;
}

/* A chunk is full: writes its last points and, in the rowid layout, moves it out of the series'
 * open row to the end of the table, where full chunks are appended and pages fill up. */
static int seal_chunk(struct sqlite_store *s, struct wseries *w) {
  if (!s->upd_open)
    return w->x.dirty ? insert_chunk(s, w) : GS_OK;
  if (!w->x.dirty && !w->open_row)
    return GS_OK;
  int rc = insert_chunk(s, w); /* replaces the open row: same (series_id, t0) */
  if (!rc && w->open_row)
    w->slot_empty = 1;
  w->open_row = 0;
  return rc;
}

static int enc_put(void *u, int64_t t, double v) {
  return chunk_enc_put(u, t, v) ? -1 : 0;
}

/* Makes a series' writer state match the file: its open chunk is the series' last chunk, decoded
 * into the encoder again (in the rowid layout it may sit in the series' open row or, sealed, at
 * the end of the table; both are rewritten in place by the next write). */
static int reload_open_chunk(struct sqlite_store *s, struct wseries *w) {
  store_wseries_clear(&s->w, &w->x);
  sqlite3_stmt *st;
  int rc = sq_prepare(s, "SELECT rowid, n, data FROM chunks WHERE series_id = ? ORDER BY t0 DESC LIMIT 1", &st,
                      "cannot read the open chunks");
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, w->x.db_id);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    int dec = chunk_decode(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2),
                           (uint32_t)sqlite3_column_int64(st, 1), enc_put, &w->x.enc);
    if (dec) /* a corrupt last chunk stays as it is; new points start a chunk of their own */
      store_wseries_clear(&s->w, &w->x);
    else
      w->open_row = s->upd_open && sqlite3_column_int64(st, 0) == -w->x.db_id;
  } else if (step != SQLITE_DONE)
    rc = sq_fail(s, "cannot read the open chunks");
  sqlite3_finalize(st);
  return rc;
}

/* ---- appends ---- */

static int add_series(struct sqlite_store *s, const struct store_run *r, const struct gs_series_def *d) {
  if (d->id < 0)
    return GS_OK;
  int rc = store_writer_ensure(&s->w, d->id);
  if (rc)
    return rc;
  sqlite3_stmt *st;
  if ((rc = sq_prepare(s,
                       "INSERT INTO series(run_id, source, name, labels, unit, kind) VALUES(?,?,?,?,?,?)"
                       " ON CONFLICT DO UPDATE SET unit = excluded.unit RETURNING id",
                       &st, "cannot add series")))
    return rc;
  sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, d->source, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, d->name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 4, d->labels, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 5, d->unit, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 6, (int)d->kind);
  struct store_wseries *x = store_writer_at(&s->w, (size_t)d->id);
  if (sqlite3_step(st) == SQLITE_ROW) {
    if (x->db_id < 0)
      x->added = 1;
    x->db_id = sqlite3_column_int64(st, 0);
  } else
    rc = sq_fail(s, "cannot add series");
  sqlite3_finalize(st);
  return rc;
}

static int seal_cb(void *s, struct store_wseries *x) {
  return seal_chunk(s, (struct wseries *)x);
}

static int write_cb(void *s, struct store_wseries *x) {
  return write_chunk(s, (struct wseries *)x);
}

static int write_events(struct sqlite_store *s, const struct store_run *r, const struct gs_batch *b) {
  if (!b->n_events)
    return GS_OK;
  sqlite3_stmt *st;
  int rc = sq_prepare(s, "INSERT INTO events VALUES(?,?,?,?,?,?,?)", &st, "cannot write events");
  for (size_t i = 0; !rc && i < b->n_events; i++) {
    const struct gs_event *e = &b->events[i];
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, e->t_ns - r->mono_start_ns);
    sqlite3_bind_text(st, 3, e->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, e->name, -1, SQLITE_STATIC);
    if (isfinite(e->value))
      sqlite3_bind_double(st, 5, e->value);
    else
      sqlite3_bind_null(st, 5);
    sqlite3_bind_text(st, 6, e->labels, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 7, e->text, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
      rc = sq_fail(s, "cannot write events");
  }
  sqlite3_finalize(st);
  return rc;
}

static int write_params(struct sqlite_store *s, const struct store_run *r, const struct gs_batch *b) {
  if (!b->n_params)
    return GS_OK;
  sqlite3_stmt *st;
  int rc = sq_prepare(s, "INSERT OR REPLACE INTO params VALUES(?,?,?)", &st, "cannot write params");
  for (size_t i = 0; !rc && i < b->n_params; i++) {
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, b->params[i].key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, b->params[i].value, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
      rc = sq_fail(s, "cannot write params");
  }
  sqlite3_finalize(st);
  return rc;
}

static int add_note(struct sqlite_store *s, const struct store_run *r, const char *text) {
  sqlite3_stmt *st;
  int rc = sq_prepare(s, "INSERT INTO notes VALUES(?,?,?)", &st, "cannot write notes");
  if (rc)
    return rc;
  sqlite3_bind_text(st, 1, r->id, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 2, gs_mono_ns() - r->mono_start_ns);
  sqlite3_bind_text(st, 3, text, -1, SQLITE_STATIC);
  rc = sqlite3_step(st) == SQLITE_DONE ? GS_OK : sq_fail(s, "cannot write notes");
  sqlite3_finalize(st);
  return rc;
}

/* Writes a batch in one transaction; all or nothing (a store_batch_fn over the store). */
int sq_write_batch(void *store, const struct store_run *r, const struct gs_batch *b) {
  struct sqlite_store *s = store;
  sq_rollback(s); /* a transaction an earlier failure may have left open */
  int rc = sq_step_done(s, s->begin, "cannot start writing");
  if (rc)
    return rc;
  for (size_t i = 0; s->w.stale && i < s->w.n && !rc; i++)
    if (store_writer_at(&s->w, i)->db_id >= 0)
      rc = reload_open_chunk(s, (struct wseries *)store_writer_at(&s->w, i));
  for (size_t i = 0; i < b->n_series && !rc; i++)
    rc = add_series(s, r, &b->series[i]);
  for (size_t i = 0; i < b->n_notes && !rc; i++)
    rc = add_note(s, r, b->notes[i]);
  if (!rc && !(rc = store_writer_points(&s->w, r, b, seal_cb, write_cb, s)) && !(rc = write_events(s, r, b)) &&
      !(rc = write_params(s, r, b))) {
    sqlite3_reset(s->heartbeat);
    sqlite3_bind_int64(s->heartbeat, 1, gs_wall_ns());
    sqlite3_bind_text(s->heartbeat, 2, r->id, -1, SQLITE_STATIC);
    if (!(rc = sq_step_done(s, s->heartbeat, "cannot write the heartbeat")))
      rc = sq_step_done(s, s->commit, "cannot commit");
  }
  if (!rc) {
    store_writer_committed(&s->w);
    return GS_OK;
  }
  sq_rollback(s);
  store_writer_forget(&s->w);
  return rc;
}

int sq_run_append(struct store *base, const struct store_run *r, const struct gs_batch *b) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = sq_check_writable(s);
  if (rc)
    return rc;
  const struct gs_batch *todo = store_writer_todo(&s->w, &s->base.stats, b);
  return store_writer_wrote(&s->w, &s->base.stats, b, todo, sq_write_batch(s, r, todo));
}

/* ---- the run's end ---- */

/* Status, exit code and end time, and a note when the store did not keep everything: a
 * transaction of its own, a page or two, so it goes through when the samples cannot. */
int sq_write_end(void *store, const struct store_run *r) {
  struct sqlite_store *s = store;
  int rc = sq_exec(s, "BEGIN IMMEDIATE", "cannot end run");
  if (rc)
    return rc;
  sqlite3_stmt *st;
  if ((rc = sq_prepare(s,
                       "UPDATE runs SET status = ?, exit_code = ?, end_wall_ns = ?, heartbeat_wall_ns = ?"
                       " WHERE id = ?",
                       &st, "cannot end run")))
    goto fail;
  sqlite3_bind_text(st, 1, r->status, -1, SQLITE_STATIC);
  if (r->exit_code >= 0)
    sqlite3_bind_int(st, 2, r->exit_code);
  else
    sqlite3_bind_null(st, 2);
  sqlite3_bind_int64(st, 3, r->end_wall_ns);
  sqlite3_bind_int64(st, 4, r->end_wall_ns);
  sqlite3_bind_text(st, 5, r->id, -1, SQLITE_STATIC);
  rc = sqlite3_step(st) == SQLITE_DONE ? GS_OK : sq_fail(s, "cannot end run");
  sqlite3_finalize(st);
  char note[512];
  if (!rc && store_write_summary(&s->base, note, sizeof note))
    rc = add_note(s, r, note);
  if (!rc && !(rc = sq_exec(s, "COMMIT", "cannot end run")))
    return GS_OK;
fail:
  sq_rollback(s);
  return rc;
}

int sq_findings_write(struct store *base, const char *run_id, const struct store_finding *f, size_t n) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  sqlite3_stmt *st = NULL;
  int rc;
  if ((rc = sq_check_writable(s)) || (rc = sq_exec(s, "BEGIN IMMEDIATE", "cannot write findings")))
    return rc;
  if ((rc = sq_prepare(s, "DELETE FROM findings WHERE run_id = ?", &st, "cannot write findings")))
    goto fail;
  sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
  rc = sqlite3_step(st) == SQLITE_DONE ? GS_OK : sq_fail(s, "cannot write findings");
  sqlite3_finalize(st);
  st = NULL;
  if (rc || (rc = sq_prepare(s, "INSERT INTO findings VALUES(?,?,?,?,?,?,?,?,?,?)", &st, "cannot write findings")))
    goto fail;
  for (size_t i = 0; i < n && !rc; i++) {
    sqlite3_reset(st);
    sqlite3_bind_text(st, 1, run_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (int64_t)i);
    sqlite3_bind_text(st, 3, f[i].rule, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, f[i].severity, -1, SQLITE_STATIC);
    sqlite3_bind_double(st, 5, f[i].share);
    sqlite3_bind_double(st, 6, f[i].lost_s);
    sqlite3_bind_double(st, 7, f[i].speedup);
    sqlite3_bind_text(st, 8, f[i].title, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 9, f[i].evidence, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 10, f[i].fix, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
      rc = sq_fail(s, "cannot write findings");
  }
  sqlite3_finalize(st);
  st = NULL;
  if (!rc && !(rc = sq_exec(s, "COMMIT", "cannot write findings")))
    return GS_OK;
fail:
  sqlite3_finalize(st);
  sq_rollback(s);
  return rc;
}

/* ---- writer statements ---- */

/* True when the chunks table is a rowid table (created by this version), false for the clustered
 * WITHOUT ROWID table of older stores. */
static int chunks_in_append_order(struct sqlite_store *s) {
  sqlite3_stmt *st;
  int rowid = 0;
  if (sqlite3_prepare_v2(s->db, "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'chunks'", -1, &st,
                         NULL) != SQLITE_OK)
    return 0;
  if (sqlite3_step(st) == SQLITE_ROW) {
    const char *sql = (const char *)sqlite3_column_text(st, 0);
    rowid = sql && !strstr(sql, "WITHOUT ROWID");
  }
  sqlite3_finalize(st);
  return rowid;
}

int sq_writer_prepare(struct sqlite_store *s) {
  int rc;
  if ((rc = sq_prepare(s, "INSERT OR REPLACE INTO chunks VALUES(?,?,?,?,?)", &s->ins_chunk, "cannot prepare")) ||
      (rc = sq_prepare(s, "BEGIN IMMEDIATE", &s->begin, "cannot prepare")) ||
      (rc = sq_prepare(s, "COMMIT", &s->commit, "cannot prepare")) ||
      (rc = sq_prepare(s, "UPDATE runs SET heartbeat_wall_ns = ? WHERE id = ?", &s->heartbeat, "cannot prepare")))
    return rc;
  if (!chunks_in_append_order(s))
    return GS_OK;
  if ((rc =
           sq_prepare(s, "UPDATE chunks SET t1 = ?1, n = ?2, data = ?3 WHERE rowid = ?4 AND series_id = ?5 AND t0 = ?6",
                      &s->upd_open, "cannot prepare")) ||
      (rc = sq_prepare(s, "INSERT OR REPLACE INTO chunks(rowid, series_id, t0, t1, n, data) VALUES(?,?,?,?,?,?)",
                       &s->ins_open, "cannot prepare")) ||
      (rc = sq_prepare(s,
                       "INSERT OR REPLACE INTO chunks(series_id, t0, t1, n, data)"
                       " SELECT series_id, t0, t1, n, data FROM chunks WHERE rowid = ?",
                       &s->move_open, "cannot prepare")))
    return rc;
  return GS_OK;
}

void sq_writer_done(struct sqlite_store *s) {
  store_writer_done(&s->w);
  sqlite3_stmt *stmts[] = {s->ins_chunk, s->upd_open, s->ins_open, s->move_open, s->begin, s->commit, s->heartbeat};
  for (size_t i = 0; i < sizeof stmts / sizeof *stmts; i++)
    sqlite3_finalize(stmts[i]);
}
