/* store/sqlite_kept: a run's end that its SQLite file could not take. When the disk under the store
 * stays full to the end of a run, the samples failed appends kept in memory (pending.c) and the
 * run's end — status, exit code, end time — are written to a small SQLite store of their own,
 * kept-RUNID.db (RUNID the store's run id), in the first spool folder that takes it
 * (store_spool_dirs: $GPUSCOPE_SPOOL_DIR or the data folder's gpuscope/spool, then the state
 * folder's, then /tmp's), and the agent says where. Until it is written in, readers report the
 * run's end from there (store_spool_end), never `crashed`; the next `gpuscope run` on the store
 * writes it in (sq_recover_kept) and deletes it.
 *
 * Writing it in is idempotent for the samples: each series' last chunk is reloaded first and a
 * series only moves forward, so a recovery cut short and done again stores no sample twice. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/sqlite_int.h"

static int mkdirs(const char *dir) {
  char buf[STORE_SPOOL_DIRS * STORE_SPOOL_DIR_MAX];
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *p = buf + 1;; p++) {
    if (*p && *p != '/')
      continue;
    char c = *p;
    *p = 0;
    if (mkdir(buf, 0700) && errno != EEXIST)
      return -1;
    if (!c)
      return 0;
    *p = c;
  }
}

static void unlink_db(const char *path) {
  const char *suffix[] = {"", "-wal", "-shm", "-journal"};
  char p[STORE_SPOOL_DIRS * STORE_SPOOL_DIR_MAX + 320];
  for (int i = 0; i < 4; i++) {
    snprintf(p, sizeof p, "%s%s", path, suffix[i]);
    unlink(p);
  }
}

/* Every series the writer knows, as definitions with their sink ids: those in the file (read back
 * by row id) and those of failed appends (pending). defs->series is malloc'd, its strings point
 * into *rows or pending. */
static int known_series(struct sqlite_store *s, const struct store_run *r, struct gs_batch *defs,
                        struct store_series **rows) {
  size_t nrows = 0, pend = s->w.pending.b.n_series;
  int rc = sq_series_list(&s->base, r->id, rows, &nrows);
  if (rc)
    return rc;
  defs->series = calloc(s->w.n + pend + 1, sizeof *defs->series);
  if (!defs->series)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < s->w.n; i++) {
    const struct store_wseries *x = store_writer_at(&s->w, i);
    for (size_t k = 0; x->db_id >= 0 && k < nrows; k++)
      if ((*rows)[k].id == x->db_id) {
        struct store_series *e = &(*rows)[k];
        defs->series[defs->n_series++] = (struct gs_series_def){
            .id = (int)i, .kind = e->kind, .source = e->source, .name = e->name, .labels = e->labels, .unit = e->unit};
        break;
      }
  }
  for (size_t i = 0; i < pend; i++)
    defs->series[defs->n_series++] = s->w.pending.b.series[i];
  return GS_OK;
}

/* Writes pending and the end into path as one run; 0, or an error (the file is then removed). */
static int write_kept(struct sqlite_store *s, const struct store_run *r, const char *path) {
  struct gs_batch b = s->w.pending.b, defs = {0};
  struct store_series *rows = NULL;
  struct store *k = NULL;
  int rc = known_series(s, r, &defs, &rows);
  if (rc)
    goto fail;
  b.series = defs.series;
  b.n_series = defs.n_series;
  if (!(k = store_backend_sqlite.open(path, STORE_WRITE))) {
    rc = GS_EIO;
    goto fail;
  }
  ((struct sqlite_store *)k)->keeps_nothing = 1;
  struct store_run kr = *r;
  kr.id[0] = 0;
  if ((rc = k->run_begin(k, &kr)) || (rc = k->run_append(k, &kr, &b)))
    goto fail;
  snprintf(kr.status, sizeof kr.status, "%s", r->status);
  kr.exit_code = r->exit_code;
  kr.end_wall_ns = r->end_wall_ns;
  if ((rc = k->run_end(k, &kr)))
    goto fail;
  k->close(k);
  free(defs.series);
  free(rows);
  return GS_OK;
fail:
  if (k)
    k->close(k);
  unlink_db(path);
  free(defs.series);
  free(rows);
  return rc ? rc : GS_EIO;
}

int sq_keep_elsewhere(struct sqlite_store *s, const struct store_run *r, const char *cause) {
  if (s->keeps_nothing)
    return gs_fail(GS_EIO, "%s", cause);
  char why[512], dirs[STORE_SPOOL_DIRS][STORE_SPOOL_DIR_MAX], path[STORE_SPOOL_DIR_MAX + 64];
  snprintf(why, sizeof why, "%s", cause);
  int n = store_spool_dirs(dirs, STORE_SPOOL_DIRS);
  for (int i = 0; i < n; i++) {
    snprintf(path, sizeof path, "%.*s/kept-%s.db", (int)STORE_SPOOL_DIR_MAX - 1, dirs[i], r->id);
    if (mkdirs(dirs[i]) || write_kept(s, r, path))
      continue;
    int64_t points = (int64_t)s->w.pending.b.n_points;
    store_writer_clear(&s->w, &s->base.stats);
    snprintf(s->base.stats.kept_elsewhere, sizeof s->base.stats.kept_elsewhere,
             "the store could not take the run's end (%s): its last %lld samples and its end are kept in %s; the next"
             " gpuscope run on this store writes them in",
             why, (long long)points, path);
    snprintf(s->kept_run_id, sizeof s->kept_run_id, "%s", r->id);
    s->kept_end = *r;
    return GS_OK;
  }
  return gs_fail(GS_EIO, "%s (and no spool folder took the run's end either)", why);
}

/* The kept file's samples, events, params and notes, in one batch (times since the run's start,
 * series ids 0..n-1 of defs). */
struct kept_load {
  struct gs_batch *b;
  int32_t series;
  int oom;
};

static int load_point(void *u, int64_t t, double v) {
  struct kept_load *c = u;
  if (store_batch_push(c->b, c->series, t, v)) {
    c->oom = 1;
    return 1;
  }
  return 0;
}

/* Writes one kept file into run `id` of s; 0 when it is in. */
static int recover_one(struct sqlite_store *s, const char *path, const char *id) {
  struct store *k = store_backend_sqlite.open(path, STORE_READ);
  if (!k)
    return GS_EIO;
  struct store_run *runs = NULL, rr;
  struct store_series *ser = NULL;
  struct store_event *ev = NULL;
  struct gs_kv *kv = NULL;
  char **notes = NULL;
  size_t nruns = 0, nser = 0, nev = 0, nkv = 0, nnotes = 0;
  struct gs_batch defs = {0}, b = {0};
  struct gs_event *bev = NULL;
  int rc = k->runs_list(k, &runs, &nruns);
  if (!rc && nruns != 1)
    rc = gs_fail(GS_ECORRUPT, "%s holds %zu runs", path, nruns);
  if (rc || (rc = k->series_list(k, runs[0].id, &ser, &nser)) || (rc = k->events_read(k, runs[0].id, &ev, &nev)) ||
      (rc = k->params_read(k, runs[0].id, &kv, &nkv)) || (rc = k->notes_read(k, runs[0].id, &notes, &nnotes)))
    goto fail;
  defs.series = calloc(nser + 1, sizeof *defs.series);
  bev = calloc(nev + 1, sizeof *bev);
  if (!defs.series || !bev) {
    rc = gs_fail(GS_ENOMEM, "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < nser && !rc; i++) {
    defs.series[i] = (struct gs_series_def){.id = (int)i,
                                            .kind = ser[i].kind,
                                            .source = ser[i].source,
                                            .name = ser[i].name,
                                            .labels = ser[i].labels,
                                            .unit = ser[i].unit};
    struct kept_load c = {.b = &b, .series = (int32_t)i};
    rc = k->samples_read(k, ser[i].id, INT64_MIN, INT64_MAX, load_point, &c);
    if (c.oom)
      rc = gs_fail(GS_ENOMEM, "out of memory");
  }
  defs.n_series = nser;
  for (size_t i = 0; i < nev; i++)
    bev[i] = (struct gs_event){.t_ns = ev[i].t,
                               .kind = ev[i].kind,
                               .name = ev[i].name,
                               .value = ev[i].value,
                               .labels = ev[i].labels,
                               .text = ev[i].text};
  b.events = bev, b.n_events = nev, b.params = kv, b.n_params = nkv, b.notes = notes, b.n_notes = nnotes;
  rr = runs[0];
  snprintf(rr.id, sizeof rr.id, "%s", id);
  rr.mono_start_ns = 0; /* the kept file's times are the run's already */
  /* the series first (their rows), then every one's last chunk reloaded: a point already in is
   * skipped, so doing this again after a cut stores nothing twice */
  store_writer_new_run(&s->w);
  if (!rc && !(rc = sq_write_batch(s, &rr, &defs))) {
    s->w.stale = 1;
    if (!(rc = sq_write_batch(s, &rr, &b)))
      rc = sq_write_end(s, &rr);
  }
fail:
  store_writer_new_run(&s->w);
  free(defs.series);
  free(bev);
  free(b.points);
  free(ser);
  free(ev);
  free(runs);
  if (kv)
    store_kv_free(kv, nkv);
  if (notes)
    store_notes_free(notes, nnotes);
  k->close(k);
  if (!rc)
    unlink_db(path);
  return rc;
}

/* True when run id is in s and still "running" there (the kept file is this store's). */
static int run_open_here(struct sqlite_store *s, const char *id) {
  sqlite3_stmt *st;
  int open = 0;
  if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM runs WHERE id = ? AND status = 'running'", -1, &st, NULL) != SQLITE_OK)
    return 0;
  sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
  open = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return open;
}

void sq_recover_kept(struct sqlite_store *s) {
  char dirs[STORE_SPOOL_DIRS][STORE_SPOOL_DIR_MAX], path[STORE_SPOOL_DIRS * STORE_SPOOL_DIR_MAX + 300];
  int n = store_spool_dirs(dirs, STORE_SPOOL_DIRS);
  for (int i = 0; i < n; i++) {
    DIR *d = opendir(dirs[i]);
    struct dirent *e;
    while (d && (e = readdir(d))) {
      size_t len = strlen(e->d_name);
      char id[32];
      if (len < 9 || len - 8 >= sizeof id || strncmp(e->d_name, "kept-", 5) || strcmp(e->d_name + len - 3, ".db"))
        continue;
      snprintf(id, sizeof id, "%.*s", (int)(len - 8), e->d_name + 5);
      if (!run_open_here(s, id))
        continue; /* another store's run, or one closed already */
      snprintf(path, sizeof path, "%s/%s", dirs[i], e->d_name);
      recover_one(s, path, id); /* kept for the next run when it cannot be written in yet */
    }
    if (d)
      closedir(d);
  }
}
