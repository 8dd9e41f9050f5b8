/* store/store_util: helpers over the store interface that every back end and every reader shares
 * (declared in store.h): freeing what the readers return, loading a whole series, finding a series
 * in a list, the steps of a client metric. A leaf: it calls only through struct store's function pointers. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/collect.h"
#include "store/store_backend.h"

void store_kv_free(struct gs_kv *kv, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(kv[i].key), free(kv[i].value);
  free(kv);
}

void store_notes_free(char **notes, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(notes[i]);
  free(notes);
}

int store_points_reserve(struct store_points *p) {
  if (p->n < p->cap)
    return 0;
  void *const cols[] = {&p->t, &p->v};
  const size_t size[] = {sizeof *p->t, sizeof *p->v};
  if (gs_grow_columns(&p->cap, 256, 2, cols, size))
    return -(p->oom = 1);
  return 0;
}

int store_points_put_all(void *user, int64_t t, double v) {
  struct store_points *p = user;
  if (store_points_reserve(p))
    return 1;
  p->t[p->n] = t;
  p->v[p->n++] = v;
  return 0;
}

int store_points_put(void *user, int64_t t, double v) {
  return isfinite(v) ? store_points_put_all(user, t, v) : 0;
}

void store_points_done(struct store_points *p) {
  free(p->t), free(p->v);
  memset(p, 0, sizeof *p);
}

int store_samples_load(struct store *st, int64_t series_id, int64_t **t, double **v, size_t *n) {
  struct store_points c = {0};
  int rc = st->samples_read(st, series_id, INT64_MIN, INT64_MAX, store_points_put_all, &c);
  if (c.oom)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  if (rc < 0) {
    store_points_done(&c);
    return rc;
  }
  *t = c.t;
  *v = c.v;
  *n = c.n;
  return GS_OK;
}

long store_series_find(const struct store_series *s, size_t n, const char *source, const char *name,
                       const char *labels) {
  for (size_t i = 0; i < n; i++)
    if ((!source || !strcmp(s[i].source, source)) && !strcmp(s[i].name, name) &&
        (!labels || !strcmp(s[i].labels, labels)))
      return (long)i;
  return -1;
}

int store_series_is_steps(const struct store_series *s) {
  return !strcmp(s->source, "client.step");
}

int store_steps_load(struct store *st, const struct store_series *list, size_t n, const struct store_series *s,
                     int64_t from, int64_t to, struct store_steps *out) {
  memset(out, 0, sizeof *out);
  if (strcmp(s->source, "client"))
    return 0;
  long k = store_series_find(list, n, "client.step", s->name, s->labels);
  if (k < 0)
    return 0;
  int rc = st->samples_read(st, list[k].id, from, to, store_points_put, &out->p);
  if (out->p.oom)
    rc = gs_fail(GS_ENOMEM, "out of memory");
  if (rc < 0)
    store_steps_done(out);
  return rc < 0 ? rc : 0;
}

int64_t store_steps_at(struct store_steps *s, int64_t t) {
  while (s->i < s->p.n && s->p.t[s->i] < t)
    s->i++;
  return s->i < s->p.n && s->p.t[s->i] == t ? (int64_t)s->p.v[s->i] : -1;
}

void store_steps_done(struct store_steps *s) {
  store_points_done(&s->p);
  s->i = 0;
}

int store_write_summary(const struct store *st, char *buf, size_t n) {
  const struct store_write_stats *w = &st->stats;
  buf[0] = 0;
  if (!w->failed_appends && !w->points_dropped && !w->events_dropped && !w->points_pending && !w->kept_elsewhere[0])
    return 0;
  int64_t lost = w->points_dropped + w->points_pending;
  if (w->kept_elsewhere[0] && !lost && !w->events_dropped) /* the failed writes are in it: nothing lost */
    snprintf(buf, n, "%s", w->kept_elsewhere);
  else if (lost || w->events_dropped) {
    char ev[64] = "";
    if (w->events_dropped)
      snprintf(ev, sizeof ev, " and %lld event%s, param%s or note%s", (long long)w->events_dropped,
               w->events_dropped == 1 ? "" : "s", w->events_dropped == 1 ? "" : "s", w->events_dropped == 1 ? "" : "s");
    snprintf(buf, n, "the store did not keep %lld sample%s%s (%lld failed write%s): %s", (long long)lost,
             lost == 1 ? "" : "s", ev, (long long)w->failed_appends, w->failed_appends == 1 ? "" : "s", w->first_error);
  } else
    snprintf(buf, n, "%lld write%s to the store failed and %s retried, nothing was lost: %s",
             (long long)w->failed_appends, w->failed_appends == 1 ? "" : "s", w->failed_appends == 1 ? "was" : "were",
             w->first_error);
  return 1;
}

int store_resolve_ref(const char *ref, store_ref_query_fn q, void *ctx, struct store_run *out) {
  struct store_run *runs = NULL;
  size_t n = 0;
  int rc;
  if (!strcmp(ref, "last"))
    rc = q(ctx, STORE_REF_LAST, ref, &runs, &n);
  else if ((rc = q(ctx, STORE_REF_ID, ref, &runs, &n)) == GS_OK && n == 0) {
    free(runs);
    if ((rc = q(ctx, STORE_REF_NAME, ref, &runs, &n)) == GS_OK && n == 0) {
      free(runs);
      rc = q(ctx, STORE_REF_PREFIX, ref, &runs, &n);
      if (!rc && n > 1) {
        free(runs);
        return gs_fail(GS_EAMBIG, "run '%s' is ambiguous: %zu runs start with it", ref, n);
      }
    }
  }
  if (rc)
    return rc;
  if (n == 0) {
    free(runs);
    return gs_fail(GS_ENOENT, "no run '%s' in this store (see 'gpuscope runs')", ref);
  }
  *out = runs[0];
  free(runs);
  return GS_OK;
}

void store_make_run_id(char *out) {
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

void store_boot_id(char *buf, size_t n) {
  collect_boot_id(buf, n); /* collect/ reads every /proc path */
}

int store_spool_dirs(char dirs[][STORE_SPOOL_DIR_MAX], int max) {
  const char *env = getenv("GPUSCOPE_SPOOL_DIR"), *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME"),
             *state = getenv("XDG_STATE_HOME"), *tmp = getenv("TMPDIR");
  home = home && *home ? home : ".";
  int n = 0;
  if (n < max && env && *env)
    snprintf(dirs[n++], STORE_SPOOL_DIR_MAX, "%s", env);
  else if (n < max && xdg && *xdg)
    snprintf(dirs[n++], STORE_SPOOL_DIR_MAX, "%s/gpuscope/spool", xdg);
  else if (n < max)
    snprintf(dirs[n++], STORE_SPOOL_DIR_MAX, "%s/.local/share/gpuscope/spool", home);
  if (n < max && state && *state)
    snprintf(dirs[n++], STORE_SPOOL_DIR_MAX, "%s/gpuscope/spool", state);
  else if (n < max)
    snprintf(dirs[n++], STORE_SPOOL_DIR_MAX, "%s/.local/state/gpuscope/spool", home);
  if (n < max)
    snprintf(dirs[n++], STORE_SPOOL_DIR_MAX, "%s/gpuscope-spool-%u", tmp && *tmp ? tmp : "/tmp", (unsigned)getuid());
  return n;
}

int store_spool_end(struct store_run *r) {
  char dirs[STORE_SPOOL_DIRS][STORE_SPOOL_DIR_MAX], path[STORE_SPOOL_DIRS * STORE_SPOOL_DIR_MAX + 64];
  int n = store_spool_dirs(dirs, STORE_SPOOL_DIRS);
  for (int i = 0; i < 2 * n; i++) { /* a PostgreSQL run's spool, an SQLite run's kept end */
    snprintf(path, sizeof path, "%s/%s-%s.db", dirs[i / 2], i % 2 ? "kept" : "spool", r->id);
    if (access(path, R_OK))
      continue;
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", gs_last_error());
    struct store *sp = store_backend_sqlite.open(path, STORE_READ);
    struct store_run *runs = NULL;
    size_t nruns = 0;
    int found = 0;
    if (sp && !sp->runs_list(sp, &runs, &nruns) && nruns == 1 && strcmp(runs[0].status, "running") &&
        strcmp(runs[0].status, "crashed")) {
      snprintf(r->status, sizeof r->status, "%s", runs[0].status);
      r->exit_code = runs[0].exit_code;
      r->end_wall_ns = runs[0].end_wall_ns;
      found = 1;
    }
    free(runs);
    if (sp)
      sp->close(sp);
    gs_fail(GS_OK, "%s", saved); /* a spool that does not read is not this reader's error */
    if (found)
      return 1;
  }
  return 0;
}

int store_settle_crashed(struct store_run *r, int64_t heartbeat, const char *run_boot) {
  if (strcmp(r->status, "running"))
    return 0;
  char host[128] = "", boot[64];
  gethostname(host, sizeof host - 1);
  store_boot_id(boot, sizeof boot);
  int dead = 0;
  if (!strcmp(host, r->host) && !strcmp(boot, run_boot) && r->agent_pid > 0)
    dead = kill(r->agent_pid, 0) != 0 && errno == ESRCH;
  if (!dead && gs_wall_ns() - heartbeat > STORE_STALE_HEARTBEAT_NS)
    dead = 1;
  if (!dead || store_spool_end(r)) /* ended, its end kept in a spool: not crashed, and the spool's replay records it */
    return 0;
  snprintf(r->status, sizeof r->status, "crashed");
  r->end_wall_ns = heartbeat;
  return 1;
}

int store_batch_push(struct gs_batch *b, int32_t series, int64_t t_ns, double v) {
  if (b->n_points == b->cap_points) {
    size_t cap = b->cap_points ? b->cap_points * 2 : 4096;
    struct gs_point *p = realloc(b->points, cap * sizeof *p);
    if (!p)
      return GS_ENOMEM;
    b->points = p;
    b->cap_points = cap;
  }
  b->points[b->n_points++] = (struct gs_point){.series = series, .t_ns = t_ns, .v = v};
  return 0;
}
