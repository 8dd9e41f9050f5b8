/* serve/views: the run views the API answers from — loaded per request, or for a finished run (which
 * no longer changes) kept in a small least-recently-used cache that streams pin; a group of runs (the
 * ranks of one distributed job) is loaded as one view through store_group_open. Called under the
 * server's store lock. */
#include <stdlib.h>
#include <string.h>

#include "serve/mhd_api.h"
#include "serve/serve_int.h"

void serve_cached_view_done(struct serve_cached_view *c) {
  if (c->loaded)
    runview_done(&c->v);
  if (c->group)
    c->group->close(c->group);
  free(c->run_json);
  free(c->diag);
  memset(c, 0, sizeof *c);
}

void serve_caches_done(struct serve *s) {
  for (size_t i = 0; i < SERVE_VIEW_CACHE; i++)
    serve_cached_view_done(&s->views[i]);
  for (size_t i = 0; i < s->nsummaries; i++)
    free(s->summaries[i].json);
  free(s->summaries);
  for (size_t i = 0; i < SERVE_LIVE_LIST; i++)
    free(s->live[i].f);
}

int serve_view_load(struct serve *s, const char *ref, struct runview *v, struct store **group) {
  *group = NULL;
  int rc = runview_load(s->st, ref, v);
  if (rc != GS_ENOENT)
    return rc;
  runview_done(v);
  if (!(*group = store_group_open(s->st, ref))) {
    memset(v, 0, sizeof *v);
    return GS_ENOENT;
  }
  return runview_load(*group, ref, v);
}

/* The record of ref — a run's, else a group's (its store opened into *group, else NULL) — with the
 * error reply set on failure. */
static int record_get(struct serve *s, const char *ref, struct store_run *run, struct store **group,
                      struct serve_reply *r) {
  *group = NULL;
  int rc = s->st->run_get(s->st, ref, run);
  if (rc == GS_ENOENT && (*group = store_group_open(s->st, ref)) && (rc = (*group)->run_get(*group, ref, run)))
    (*group)->close(*group), *group = NULL;
  if (rc)
    serve_reply_error(r,
                      rc == GS_ENOENT   ? MHD_HTTP_NOT_FOUND
                      : rc == GS_EAMBIG ? MHD_HTTP_CONFLICT
                                        : 500,
                      "%s", gs_last_error());
  return rc;
}

int serve_view_get(struct serve *s, const char *ref, struct serve_reply *r, const struct runview **out,
                   struct serve_cached_view *fresh, struct serve_cached_view **entry) {
  struct store_run run;
  struct store *group;
  memset(fresh, 0, sizeof *fresh);
  *entry = NULL;
  int rc = record_get(s, ref, &run, &group, r);
  if (rc)
    return rc;
  int finished = strcmp(run.status, "running") != 0;
  if (finished)
    for (size_t i = 0; i < SERVE_VIEW_CACHE; i++)
      if (s->views[i].loaded && !strcmp(s->views[i].id, run.id) && s->views[i].end_wall_ns == run.end_wall_ns &&
          !strcmp(s->views[i].v.run.status, run.status) && !s->views[i].group == !group) {
        s->views[i].used = ++s->clock;
        *out = &s->views[i].v;
        *entry = &s->views[i];
        if (group)
          group->close(group);
        return GS_OK;
      }
  struct serve_cached_view *c = fresh;
  if (finished) {
    long k = -1; /* the least recently used slot no stream reads */
    for (size_t i = 0; i < SERVE_VIEW_CACHE; i++)
      if (!s->views[i].pins && (k < 0 || !s->views[i].loaded || s->views[i].used < s->views[k].used)) {
        k = (long)i;
        if (!s->views[i].loaded)
          break;
      }
    if (k >= 0) {
      c = &s->views[k];
      serve_cached_view_done(c);
    } else
      finished = 0; /* every slot is being streamed from: this view is the request's own */
  }
  c->group = group;
  rc = runview_load(group ? group : s->st, run.id, &c->v);
  c->loaded = 1;
  if (rc) {
    serve_cached_view_done(c);
    serve_reply_error(r, 500, "%s", gs_last_error());
    return rc;
  }
  snprintf(c->id, sizeof c->id, "%s", run.id);
  c->end_wall_ns = run.end_wall_ns;
  c->used = ++s->clock;
  *out = &c->v;
  *entry = finished ? c : NULL;
  return GS_OK;
}
