/* store/store: back-end-independent pieces — URL dispatch, the default location, and helpers the
 * readers share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

struct store *store_sqlite_open(const char *path);

struct store *store_open(const char *url) {
  if (!url || !*url) {
    gs_fail(GS_EINVAL, "empty store URL");
    return NULL;
  }
  if (!strncmp(url, "sqlite://", 9))
    return store_sqlite_open(url + 9);
  if (strstr(url, "://")) {
    gs_fail(GS_EINVAL, "unsupported store URL '%s' (use sqlite:///path/to/file.db)", url);
    return NULL;
  }
  return store_sqlite_open(url);
}

const char *store_default_url(char *buf, size_t n) {
  const char *env = getenv("GPUSCOPE_STORE"), *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
  if (env && *env)
    snprintf(buf, n, "%s", env);
  else if (xdg && *xdg)
    snprintf(buf, n, "sqlite://%s/gpuscope/gpuscope.db", xdg);
  else
    snprintf(buf, n, "sqlite://%s/.local/share/gpuscope/gpuscope.db", home && *home ? home : ".");
  return buf;
}

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

struct load_ctx {
  int64_t *t;
  double *v;
  size_t n, cap;
  int oom;
};

static int load_one(void *u, int64_t t, double v) {
  struct load_ctx *c = u;
  if (c->n == c->cap) {
    size_t cap = c->cap ? c->cap * 2 : 256;
    int64_t *nt = realloc(c->t, cap * sizeof *nt);
    if (nt)
      c->t = nt;
    double *nv = realloc(c->v, cap * sizeof *nv);
    if (nv)
      c->v = nv;
    if (!nt || !nv) {
      c->oom = 1;
      return 1;
    }
    c->cap = cap;
  }
  c->t[c->n] = t;
  c->v[c->n++] = v;
  return 0;
}

int store_samples_load(struct store *st, int64_t series_id, int64_t **t, double **v, size_t *n) {
  struct load_ctx c = {0};
  int rc = st->samples_read(st, series_id, INT64_MIN, INT64_MAX, load_one, &c);
  if (c.oom)
    rc = GS_ENOMEM;
  if (rc < 0) {
    free(c.t), free(c.v);
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
