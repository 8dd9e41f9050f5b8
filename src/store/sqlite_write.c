/* store/sqlite_write: the SQLite back end's writer — a run's row, its appends and its end, the
 * rollups written at the end, and findings.
 *
 * An append is one transaction. When it fails (disk full, a file size limit, a lock held past the
 * busy timeout) it is rolled back as a whole, and the writer's memory is made to match the file
 * again: series rows added by that transaction lose their ids (they are added again), and every
 * open chunk is reloaded from the file before the next write (`stale`). The batch is kept
 * (pending.c) and written with the next append, so samples are neither lost nor attached to a
 * series id that no longer exists — which a later run would otherwise inherit. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/sqlite_int.h"

static void make_run_id(char *out) {
  static const char alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz"; /* Crockford base32, lower */
  uint64_t ms = (uint64_t)(gs_wall_ns() / 1000000);
  unsigned char rnd[10] = {0};
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, rnd, sizeof rnd) != (ssize_t)sizeof rnd)
      memset(rnd, 0, sizeof rnd);
    close(fd);
  }
  for (int i = 9; i >= 0; i--, ms >>= 5)
    out[i] = alphabet[ms & 31];
  for (int i = 0; i < 16; i++) {
    int bit = i * 5, byte = bit / 8, off = bit % 8;
    unsigned v = ((unsigned)rnd[byte] << 8 | (byte + 1 < 10 ? rnd[byte + 1] : getpid() & 0xff)) >> (11 - off);
    out[10 + i] = alphabet[v & 31];
  }
  out[26] = 0;
}

int sq_run_begin(struct store *base, struct store_run *r) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = sq_check_writable(s);
  if (rc)
    return rc;
  /* Runs whose agent died are closed as crashed now, by the next start (reading settles them). */
  struct store_run *running = NULL;
  size_t nrunning = 0;
  if (!sq_query_runs(s, "WHERE status = 'running'", NULL, &running, &nrunning))
    free(running);
  char boot[64];
  sq_boot_id(boot, sizeof boot);
  make_run_id(r->id);
  snprintf(r->status, sizeof r->status, "running");
  sqlite3_stmt *st;
  if ((rc = sq_prepare(s,
                       "INSERT INTO runs(id, name, grp, command, cwd, host, user, tags, start_wall_ns,"
                       " heartbeat_wall_ns, status, exit_code, agent_pid, boot_id, interval_ns)"
                       " VALUES(?,?,?,?,?,?,?,?,?,?,?,NULL,?,?,?)",
                       &st, "cannot add run")))
    return rc;
  const char *txt[] = {r->id, r->name, r->group, r->command, r->cwd, r->host, r->user, r->tags};
  for (int i = 0; i < 8; i++)
    sqlite3_bind_text(st, i + 1, txt[i], -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 9, r->start_wall_ns);
  sqlite3_bind_int64(st, 10, r->start_wall_ns);
  sqlite3_bind_text(st, 11, r->status, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 12, r->agent_pid);
  sqlite3_bind_text(st, 13, boot, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 14, r->interval_ns);
  rc = sqlite3_step(st) == SQLITE_DONE ? GS_OK : sq_fail(s, "cannot add run");
  sqlite3_finalize(st);
  return rc;
}

/* ---- chunks ---- */

/* Writes the chunk as a row keyed by (series_id, t0), INSERT OR REPLACE: how a clustered store
 * keeps every chunk, and how the rowid layout puts a full chunk at the end of the table (the
 * replaced row being the chunk's own open row, if it had one). */
static int insert_chunk(struct sqlite_store *s, struct wseries *w) {
  sqlite3_stmt *st = s->ins_chunk;
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, w->db_id);
  sqlite3_bind_int64(st, 2, w->enc.t0);
  sqlite3_bind_int64(st, 3, w->enc.t_prev);
  sqlite3_bind_int64(st, 4, w->enc.n);
  sqlite3_bind_blob(st, 5, w->enc.buf, (int)chunk_enc_bytes(&w->enc), SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_DONE)
    return sq_fail(s, "cannot write samples");
  w->dirty = 0;
  return GS_OK;
}

/* Writes the open chunk of a series. Rowid layout: into the series' row at rowid -db_id — in
 * place while it holds this chunk; otherwise whatever the row holds (an older chunk, say after a
 * flush was rolled back) is first moved to the end of the table, kept, never overwritten. */
static int write_chunk(struct sqlite_store *s, struct wseries *w) {
  if (!s->upd_open)
    return insert_chunk(s, w);
  int bytes = (int)chunk_enc_bytes(&w->enc);
  sqlite3_stmt *st;
  if (w->open_row) {
    st = s->upd_open;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, w->enc.t_prev);
    sqlite3_bind_int64(st, 2, w->enc.n);
    sqlite3_bind_blob(st, 3, w->enc.buf, bytes, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, -w->db_id);
    sqlite3_bind_int64(st, 5, w->db_id);
    sqlite3_bind_int64(st, 6, w->enc.t0);
    if (sqlite3_step(st) != SQLITE_DONE)
      return sq_fail(s, "cannot write samples");
    if (sqlite3_changes(s->db) == 1) {
      w->dirty = 0;
      return GS_OK;
    }
    w->open_row = 0;
  }
  if (!w->slot_empty) {
    sqlite3_reset(s->move_open);
    sqlite3_bind_int64(s->move_open, 1, -w->db_id);
    if (sqlite3_step(s->move_open) != SQLITE_DONE)
      return sq_fail(s, "cannot write samples");
  }
  st = s->ins_open;
  sqlite3_reset(st);
  sqlite3_bind_int64(st, 1, -w->db_id);
  sqlite3_bind_int64(st, 2, w->db_id);
  sqlite3_bind_int64(st, 3, w->enc.t0);
  sqlite3_bind_int64(st, 4, w->enc.t_prev);
  sqlite3_bind_int64(st, 5, w->enc.n);
  sqlite3_bind_blob(st, 6, w->enc.buf, bytes, SQLITE_STATIC);
  if (sqlite3_step(st) != SQLITE_DONE)
    return sq_fail(s, "cannot write samples");
  w->open_row = 1;
  w->slot_empty = 0;
  w->dirty = 0;
  return GS_OK;
}

/* A chunk is full: writes its last points and, in the rowid layout, moves it out of the series'
 * open row to the end of the table, where full chunks are appended and pages fill up. */
static int seal_chunk(struct sqlite_store *s, struct wseries *w) {
  if (!s->upd_open)
    return w->dirty ? insert_chunk(s, w) : GS_OK;
  if (!w->dirty && !w->open_row)
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
  chunk_enc_done(&w->enc);
  chunk_enc_init(&w->enc);
  w->dirty = w->open_row = w->slot_empty = 0;
  sqlite3_stmt *st;
  int rc = sq_prepare(s, "SELECT rowid, n, data FROM chunks WHERE series_id = ? ORDER BY t0 DESC LIMIT 1", &st,
                      "cannot read the open chunks");
  if (rc)
    return rc;
  sqlite3_bind_int64(st, 1, w->db_id);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    int dec = chunk_decode(sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2),
                           (uint32_t)sqlite3_column_int64(st, 1), enc_put, &w->enc);
    if (dec) { /* a corrupt last chunk stays as it is; new points start a chunk of their own */
      chunk_enc_done(&w->enc);
      chunk_enc_init(&w->enc);
    } else
      w->open_row = s->upd_open && sqlite3_column_int64(st, 0) == -w->db_id;
  } else if (step != SQLITE_DONE)
    rc = sq_fail(s, "cannot read the open chunks");
  sqlite3_finalize(st);
  return rc;
}

/* ---- appends ---- */

static int ensure_ws(struct sqlite_store *s, int id) {
  if ((size_t)id < s->n_ws)
    return GS_OK;
  size_t n = (size_t)id + 64;
  struct wseries *ws = realloc(s->ws, n * sizeof *ws);
  if (!ws)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = s->n_ws; i < n; i++) {
    ws[i] = (struct wseries){.db_id = -1};
    chunk_enc_init(&ws[i].enc);
  }
  s->ws = ws;
  s->n_ws = n;
  return GS_OK;
}

static int add_series(struct sqlite_store *s, const struct store_run *r, const struct gs_series_def *d) {
  if (d->id < 0)
    return GS_OK;
  int rc = ensure_ws(s, d->id);
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
  struct wseries *w = &s->ws[d->id];
  if (sqlite3_step(st) == SQLITE_ROW) {
    if (w->db_id < 0)
      w->added = 1;
    w->db_id = sqlite3_column_int64(st, 0);
  } else
    rc = sq_fail(s, "cannot add series");
  sqlite3_finalize(st);
  return rc;
}

static int write_points(struct sqlite_store *s, const struct store_run *r, const struct gs_batch *b) {
  int rc;
  for (size_t i = 0; i < b->n_points; i++) {
    const struct gs_point *p = &b->points[i];
    if (p->series < 0 || (size_t)p->series >= s->n_ws || s->ws[p->series].db_id < 0)
      continue;
    struct wseries *w = &s->ws[p->series];
    int64_t t = p->t_ns - r->mono_start_ns;
    if (w->enc.n && t <= w->enc.t_prev)
      continue; /* out of order or duplicate: a series only moves forward */
    if (w->enc.n >= CHUNK_MAX_POINTS || (w->enc.n && t - w->enc.t0 > CHUNK_MAX_SPAN_NS) ||
        chunk_enc_bytes(&w->enc) + CHUNK_MAX_POINT_BYTES > CHUNK_MAX_BYTES) {
      /* the chunk is full: its last points, then off to the end of the table */
      if ((rc = seal_chunk(s, w)))
        return rc;
      chunk_enc_done(&w->enc);
    }
    if (chunk_enc_put(&w->enc, t, p->v))
      return gs_fail(GS_ENOMEM, "out of memory");
    w->dirty = 1;
  }
  for (size_t i = 0; i < s->n_ws; i++)
    if (s->ws[i].dirty && (rc = write_chunk(s, &s->ws[i])))
      return rc;
  return GS_OK;
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

/* The transaction failed and was rolled back: series rows it added are gone, and the encoders
 * hold points the file does not. */
static void forget_transaction(struct sqlite_store *s) {
  for (size_t i = 0; i < s->n_ws; i++) {
    struct wseries *w = &s->ws[i];
    if (w->added) {
      w->db_id = -1;
      w->added = 0;
    }
    chunk_enc_done(&w->enc);
    chunk_enc_init(&w->enc);
    w->dirty = w->open_row = w->slot_empty = 0;
  }
  s->stale = 1;
}

/* Writes a batch in one transaction; all or nothing. */
static int write_batch(struct sqlite_store *s, const struct store_run *r, const struct gs_batch *b) {
  sq_rollback(s); /* a transaction an earlier failure may have left open */
  int rc = sq_step_done(s, s->begin, "cannot start writing");
  if (rc)
    return rc;
  for (size_t i = 0; s->stale && i < s->n_ws && !rc; i++)
    if (s->ws[i].db_id >= 0)
      rc = reload_open_chunk(s, &s->ws[i]);
  for (size_t i = 0; i < b->n_series && !rc; i++)
    rc = add_series(s, r, &b->series[i]);
  for (size_t i = 0; i < b->n_notes && !rc; i++)
    rc = add_note(s, r, b->notes[i]);
  if (!rc && !(rc = write_points(s, r, b)) && !(rc = write_events(s, r, b)) && !(rc = write_params(s, r, b))) {
    sqlite3_reset(s->heartbeat);
    sqlite3_bind_int64(s->heartbeat, 1, gs_wall_ns());
    sqlite3_bind_text(s->heartbeat, 2, r->id, -1, SQLITE_STATIC);
    if (!(rc = sq_step_done(s, s->heartbeat, "cannot write the heartbeat")))
      rc = sq_step_done(s, s->commit, "cannot commit");
  }
  if (!rc) {
    for (size_t i = 0; i < s->n_ws; i++)
      s->ws[i].added = 0;
    s->stale = 0;
    return GS_OK;
  }
  sq_rollback(s);
  forget_transaction(s);
  return rc;
}

static void count_failure(struct sqlite_store *s) {
  struct store_write_stats *w = &s->base.stats;
  w->failed_appends++;
  if (!w->first_error[0])
    snprintf(w->first_error, sizeof w->first_error, "%s", gs_last_error());
  w->points_pending = (int64_t)s->pending.b.n_points;
}

int sq_run_append(struct store *base, const struct store_run *r, const struct gs_batch *b) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = sq_check_writable(s);
  if (rc)
    return rc;
  const struct gs_batch *todo = b;
  if (store_pending_any(&s->pending)) { /* earlier appends failed: theirs first, in one go with this */
    store_pending_add(&s->pending, b, &s->base.stats);
    todo = &s->pending.b;
  }
  if (!(rc = write_batch(s, r, todo))) {
    store_pending_clear(&s->pending);
    s->base.stats.points_pending = 0;
    return GS_OK;
  }
  if (todo == b)
    store_pending_add(&s->pending, b, &s->base.stats);
  count_failure(s);
  return rc;
}

/* ---- the run's end ---- */

static int write_rollups(struct sqlite_store *s, const char *run_id) {
  sqlite3_stmt *q = NULL, *ins = NULL;
  int rc;
  if ((rc = sq_prepare(s, "SELECT id FROM series WHERE run_id = ?", &q, "cannot write rollups")) ||
      (rc = sq_prepare(s, "INSERT OR REPLACE INTO rollups VALUES(?,?,?,?,?,?,?)", &ins, "cannot write rollups")))
    goto out;
  sqlite3_bind_text(q, 1, run_id, -1, SQLITE_STATIC);
  int step = SQLITE_DONE;
  while (!rc && (step = sqlite3_step(q)) == SQLITE_ROW) {
    int64_t sid = sqlite3_column_int64(q, 0);
    struct rollup_all all;
    rollup_all_init(&all);
    rc = sq_samples_read(&s->base, sid, INT64_MIN, INT64_MAX, rollup_all_point, &all);
    for (int k = 0; k < STORE_N_ROLLUP_RES; k++) {
      struct rollup_acc *a = &all.a[k];
      rollup_emit(a);
      if (!rc && a->oom)
        rc = gs_fail(GS_ENOMEM, "out of memory");
      for (size_t i = 0; !rc && rollup_worth_storing(&all, a) && i < a->len; i++) {
        sqlite3_reset(ins);
        sqlite3_bind_int64(ins, 1, sid);
        sqlite3_bind_int64(ins, 2, a->res);
        sqlite3_bind_int64(ins, 3, a->t[i]);
        sqlite3_bind_int64(ins, 4, 0);
        sqlite3_bind_double(ins, 5, a->mn[i]);
        sqlite3_bind_double(ins, 6, a->mx[i]);
        sqlite3_bind_double(ins, 7, a->mean[i]);
        if (sqlite3_step(ins) != SQLITE_DONE)
          rc = sq_fail(s, "cannot write rollups");
      }
      rollup_done(a);
    }
  }
  if (!rc && step != SQLITE_DONE)
    rc = sq_fail(s, "cannot write rollups");
out:
  sqlite3_finalize(q);
  sqlite3_finalize(ins);
  return rc;
}

/* Status, exit code and end time, and a note when the store did not keep everything: a
 * transaction of its own, a page or two, so it goes through when the samples cannot. */
static int write_end(struct sqlite_store *s, const struct store_run *r) {
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

int sq_run_end(struct store *base, const struct store_run *r) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = sq_check_writable(s);
  if (rc)
    return rc;
  int kept = 1;
  if (store_pending_any(&s->pending)) {
    if (!write_batch(s, r, &s->pending.b)) {
      store_pending_clear(&s->pending);
      s->base.stats.points_pending = 0;
    } else {
      count_failure(s);
      kept = 0;
    }
  }
  struct store_write_stats before = s->base.stats;
  if (!kept) { /* the run closes without them: counted as not kept in the note */
    s->base.stats.points_dropped += (int64_t)s->pending.b.n_points;
    s->base.stats.events_dropped += (int64_t)(s->pending.b.n_events + s->pending.b.n_params + s->pending.b.n_notes);
    s->base.stats.points_pending = 0;
  }
  if ((rc = write_end(s, r))) {
    s->base.stats = before; /* still pending: a later run_end may write them */
    return rc;
  }
  if (!kept)
    store_pending_clear(&s->pending);
  if ((rc = sq_exec(s, "BEGIN IMMEDIATE", "cannot write rollups")))
    return rc;
  if ((rc = write_rollups(s, r->id)) || (rc = sq_exec(s, "COMMIT", "cannot write rollups"))) {
    sq_rollback(s); /* the run is closed; its rollups are computed from the chunks when read */
    return rc;
  }
  return GS_OK;
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
  for (size_t i = 0; i < s->n_ws; i++)
    chunk_enc_done(&s->ws[i].enc);
  free(s->ws);
  s->ws = NULL;
  s->n_ws = 0;
  store_pending_done(&s->pending);
  sqlite3_stmt *stmts[] = {s->ins_chunk, s->upd_open, s->ins_open, s->move_open, s->begin, s->commit, s->heartbeat};
  for (size_t i = 0; i < sizeof stmts / sizeof *stmts; i++)
    sqlite3_finalize(stmts[i]);
}
