/* store/pg_run: a PostgreSQL run's begin, appends and end — the writer's policy over the outages:
 * an append or an end the server cannot take goes to the spool (pg_spool.c), which is replayed
 * into the server when it answers again, before anything newer. Above the batch writer
 * (pg_write.c) and the spool, which both call the writer; the store's interface (store_pg.c)
 * points here. */
#include <stdio.h>
#include <string.h>

#include "store/pg_int.h"

int pg_run_begin(struct store *base, struct store_run *r) {
  struct pg_store *s = (struct pg_store *)base;
  int rc = pg_check_writable(s);
  if (rc)
    return rc;
  store_writer_new_run(&s->w);
  store_make_run_id(r->id);
  snprintf(r->status, sizeof r->status, "running");
  s->base.stats.notice[0] = 0;
  if (!s->down) {
    pg_settle_running(s); /* runs whose agent died are closed as crashed now, by the next start */
    if (!(rc = pg_insert_run(s, r)) && s->recover_error[0]) /* a left spool the server did not take */
      pg_add_note(s, r, s->recover_error);
    if (!rc || !s->down)
      return rc;
  }
  /* unreachable: the run starts in the spool, and reaches the server when it returns */
  s->outages++;
  s->next_try_ns = gs_mono_ns() + PG_RETRY_NS;
  struct gs_batch none = {0};
  if ((rc = pg_spool_append(s, r, &none)))
    return rc;
  snprintf(s->base.stats.notice, sizeof s->base.stats.notice,
           "store %s is unreachable (%s): the run is kept in the local spool %s and sent to the server when it answers",
           s->name, s->lost_why, s->spool_path);
  return GS_OK;
}

int pg_run_import(struct store *base, const struct store_run *r) {
  struct pg_store *s = (struct pg_store *)base;
  int rc = pg_check_writable(s);
  if (rc)
    return rc;
  if (s->down) /* an import is not spooled: the user is there to run it again */
    return gs_fail(GS_ESTORE, "store %s is unreachable (%s): run %s not imported", s->name, s->lost_why, r->id);
  store_writer_new_run(&s->w);
  s->base.stats.notice[0] = 0;
  return pg_insert_run(s, r);
}

/* ---- appends ---- */

/* Remembers the batch's series definitions: a spool opened later needs every one. */
static void remember_series(struct pg_store *s, const struct gs_batch *b) {
  if (!b->n_series)
    return;
  struct gs_batch defs = {.series = b->series, .n_series = b->n_series};
  struct store_write_stats scratch = {0};
  store_pending_add(&s->known, &defs, &scratch);
}

/* The server is unreachable: what memory holds goes to the spool first, then b. */
static int to_spool(struct pg_store *s, const struct store_run *r, const struct gs_batch *b) {
  int rc;
  if (store_pending_any(&s->w.pending)) {
    if ((rc = pg_spool_append(s, r, &s->w.pending.b)))
      goto fail;
    store_writer_clear(&s->w, &s->base.stats);
  }
  if (!(rc = pg_spool_append(s, r, b)))
    return GS_OK;
fail: /* the spool cannot take it either (its disk is full): kept in memory, bounded */
  store_pending_add(&s->w.pending, b, &s->base.stats);
  store_writer_failed(&s->w, &s->base.stats);
  return rc;
}

/* The append failed: every failure that is not the agent's own goes to the spool, and sampling goes
 * on. An outage (the connection lost, broken or timed out) is retried by reconnecting; a refusal
 * (the server there, but saying no: a revoked grant, a full disk on its side, a constraint) by
 * replaying the spool every PG_RETRY_NS. Either way nothing is lost, and the spool is kept — and
 * said — when the run ends before the server takes it. */
static void count_failure(struct pg_store *s) {
  if (s->down)
    s->outages++;
  else if (!s->refusals++)
    snprintf(s->refuse_error, sizeof s->refuse_error, "%s", gs_last_error());
  s->next_try_ns = gs_mono_ns() + PG_RETRY_NS;
}

int pg_run_append(struct store *base, const struct store_run *r, const struct gs_batch *b) {
  struct pg_store *s = (struct pg_store *)base;
  int rc = pg_check_writable(s);
  if (rc)
    return rc;
  remember_series(s, b);
  if (s->down)
    pg_reconnect(s, 0);
  if (!s->down && s->spool && gs_mono_ns() >= s->next_try_ns && pg_spool_replay(s, r))
    s->next_try_ns = gs_mono_ns() + PG_RETRY_NS; /* refused, or lost again: the spool waits a while */
  if (s->down || s->spool)
    return to_spool(s, r, b);
  const struct gs_batch *todo = store_writer_todo(&s->w, &s->base.stats, b);
  if (!(rc = pg_write_batch(s, r, todo)))
    return store_writer_wrote(&s->w, &s->base.stats, b, todo, rc);
  count_failure(s); /* this flush starts the spool */
  if (todo == b)
    return to_spool(s, r, b);
  struct gs_batch none = {0};
  return to_spool(s, r, &none); /* b is in pending already */
}

/* ---- the run's end ---- */

/* The run ends in its spool (the server is unreachable, or refused the spool): closed there, read
 * there by the summary, replayed by the next run that reaches the server; the stats say where. */
static int end_in_spool(struct pg_store *s, const struct store_run *r) {
  struct gs_batch none = {0};
  int rc;
  if (store_pending_any(&s->w.pending))
    to_spool(s, r, &none);
  if ((rc = pg_spool_end(s, r)))
    return rc;
  char *kept = s->base.stats.kept_elsewhere;
  size_t n = sizeof s->base.stats.kept_elsewhere;
  if (!s->down && s->replay_error[0])
    snprintf(kept, n,
             "the run is kept whole in the local spool %s because the server refused it (%s); the next"
             " gpuscope run that reaches the server replays it",
             s->spool_path, s->replay_error);
  else
    snprintf(kept, n,
             "store %s is unreachable: the run is kept whole in the local spool %s; the next gpuscope run"
             " that reaches the server replays it",
             s->name, s->spool_path);
  return GS_OK;
}

int pg_run_end(struct store *base, const struct store_run *r) {
  struct pg_store *s = (struct pg_store *)base;
  int rc = pg_check_writable(s);
  if (rc)
    return rc;
  if (s->down)
    pg_reconnect(s, 1);
  if (!s->down && s->spool)
    pg_spool_replay(s, r);
  if (!s->down && !s->spool) {
    s->base.stats.kept_elsewhere[0] = 0; /* the server has it */
    /* what failed appends kept (only when the spool could not take it), then the end */
    if (store_pending_any(&s->w.pending) && !(rc = pg_write_batch(s, r, &s->w.pending.b)))
      store_writer_clear(&s->w, &s->base.stats);
    int ended = 0;
    if (!rc)
      rc = pg_write_finish(s, r, &ended);
    if (ended)
      return rc; /* the end is in; rollups that failed after it are computed from the chunks when read */
    /* the server did not take the end: it is kept, with what memory holds, in the spool */
    count_failure(s);
    if (!s->down)
      snprintf(s->replay_error, sizeof s->replay_error, "%s", gs_last_error());
  }
  /* unreachable, or refused: the run ends in the spool, which keeps all of it */
  return end_in_spool(s, r);
}
