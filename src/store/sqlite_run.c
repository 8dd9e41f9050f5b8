/* store/sqlite_run: a SQLite run's begin and end, above the writer (sqlite_write.c) and the kept
 * file (sqlite_kept.c), which both call the writer: the begin first writes in what earlier runs
 * could not (a full disk) and settles runs whose agent died, then adds the run's row; the end writes
 * what failed appends kept and the end row, keeps both in a file elsewhere when the store takes
 * neither, and computes the run's rollups from its chunks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite_int.h"

/* The run's row, in status "running". */
static int insert_run(struct sqlite_store *s, const struct store_run *r) {
  char boot[64];
  store_boot_id(boot, sizeof boot);
  sqlite3_stmt *st;
  int rc;
  if ((rc = sq_prepare(s,
                       "INSERT INTO runs(id, name, grp, command, cwd, host, user, tags, start_wall_ns,"
                       " heartbeat_wall_ns, status, exit_code, agent_pid, boot_id, interval_ns)"
                       " VALUES(?,?,?,?,?,?,?,?,?,?,'running',NULL,?,?,?)",
                       &st, "cannot add run")))
    return rc;
  const char *txt[] = {r->id, r->name, r->group, r->command, r->cwd, r->host, r->user, r->tags};
  for (int i = 0; i < 8; i++)
    sqlite3_bind_text(st, i + 1, txt[i], -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 9, r->start_wall_ns);
  sqlite3_bind_int64(st, 10, r->start_wall_ns);
  sqlite3_bind_int(st, 11, r->agent_pid);
  sqlite3_bind_text(st, 12, boot, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 13, r->interval_ns);
  rc = sqlite3_step(st) == SQLITE_DONE ? GS_OK : sq_fail(s, "cannot add run");
  sqlite3_finalize(st);
  return rc;
}

int sq_run_begin(struct store *base, struct store_run *r) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = sq_check_writable(s);
  if (rc)
    return rc;
  sq_recover_kept(s); /* what earlier runs could not write here (a full disk), first */
  store_writer_new_run(&s->w);
  s->kept_run_id[0] = 0;
  /* Runs whose agent died are closed as crashed now, by the next start (reading settles them). */
  struct store_run *running = NULL;
  size_t nrunning = 0;
  if (!sq_query_runs(s, "WHERE status = 'running'", NULL, &running, &nrunning))
    free(running);
  store_make_run_id(r->id);
  snprintf(r->status, sizeof r->status, "running");
  return insert_run(s, r);
}

int sq_run_import(struct store *base, const struct store_run *r) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = sq_check_writable(s);
  if (rc)
    return rc;
  store_writer_new_run(&s->w);
  s->kept_run_id[0] = 0;
  return insert_run(s, r);
}

/* ---- the run's end ---- */

static int write_rollups(struct sqlite_store *s, const char *run_id) {
  sqlite3_stmt *q = NULL, *ins = NULL;
  int rc;
  if ((rc = sq_prepare(s, "SELECT id FROM series WHERE run_id = ?", &q, "cannot write rollups")) ||
      (rc = sq_prepare(s, "INSERT OR REPLACE INTO rollups VALUES(?,?,?,?,?,?,?)", &ins, "cannot write rollups")))
    goto fail;
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
fail:
  sqlite3_finalize(q);
  sqlite3_finalize(ins);
  return rc;
}

int sq_run_end(struct store *base, const struct store_run *r) {
  struct sqlite_store *s = (struct sqlite_store *)base;
  int rc = sq_check_writable(s);
  if (rc)
    return rc;
  s->base.stats.kept_elsewhere[0] = 0;
  /* What failed appends kept, then the end. When the file takes neither (its disk full to the end),
   * both are kept in a file of their own elsewhere, said, and written in by the next run. */
  if (store_pending_any(&s->w.pending)) {
    if (!(rc = sq_write_batch(s, r, &s->w.pending.b)))
      store_writer_clear(&s->w, &s->base.stats);
    else {
      store_writer_failed(&s->w, &s->base.stats);
      return sq_keep_elsewhere(s, r, gs_last_error()) ? rc : GS_OK;
    }
  }
  if ((rc = store_writer_end(&s->w, &s->base.stats, r, sq_write_batch, sq_write_end, s)))
    return sq_keep_elsewhere(s, r, gs_last_error()) ? rc : GS_OK;
  if ((rc = sq_exec(s, "BEGIN IMMEDIATE", "cannot write rollups")))
    return rc;
  if ((rc = write_rollups(s, r->id)) || (rc = sq_exec(s, "COMMIT", "cannot write rollups"))) {
    sq_rollback(s); /* the run is closed; its rollups are computed from the chunks when read */
    return rc;
  }
  return GS_OK;
}
