/* store/store_group: a group of runs — the nodes of one distributed job, each a run of its own
 * agent with the same --group — seen as one run, so the run view, the doctor, every report and
 * compare read a group exactly as they read a run, with no code of their own for it.
 *
 * A group store is a read-only `struct store` over another store (any back end). It holds one run,
 * the group: its id and name are the group's name, its start the earliest run's and its end the
 * latest's, its hosts listed. Its series are the union of the runs' series, with times moved onto
 * the group's clock (each run's offset from the earliest start), labelled so they stay apart:
 *   - GPUs are numbered across the group (gpu=0..7 on the first host, gpu=8.. on the next), so the
 *     GPU rules (straggler, underused_gpus) compare and count every GPU of the job;
 *   - step series keep their rank label (the clients send the global rank); a second unlabelled
 *     main loop (a node whose job set no rank) gets the next free rank;
 *   - every other series (the host's, the job's processes, the client's own metrics) gets host=HOST
 *     added to its labels, on every run alike: no node is the unlabelled reference, so a reader that
 *     wants one node's host names it, and one that wants all of them matches the labels without host
 *     (runview_labels_match).
 * Which host each GPU and rank is on is in the group's params (group.gpu.N.host, group.rank.R.host,
 * group.runs, group.hosts), so a finding can name the host. Events and notes are merged in time order
 * (notes prefixed with their host; events other than a GPU's labelled host=HOST like series). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_backend.h"

struct gseries {
  size_t run;      /* index in runs */
  int64_t base_id; /* the series' id in the base store */
};

struct group_store {
  struct store base; /* first: the interface */
  struct store *src; /* borrowed */
  struct store_run group;
  struct store_run *runs;
  size_t nruns;
  int64_t *offset; /* per run: its start minus the group's, ns */
  struct store_series *series;
  struct gseries *map;
  size_t nseries;
  struct store_event *events;
  size_t nevents;
  struct gs_kv *params;
  size_t nparams, cap_params;
  char **notes;
  size_t nnotes;
};

static int refuse(struct store *base) {
  (void)base;
  return gs_fail(GS_EINVAL, "a group of runs is read-only: nothing was written");
}
static int g_run_begin(struct store *b, struct store_run *r) {
  (void)r;
  return refuse(b);
}
static int g_run_append(struct store *b, const struct store_run *r, const struct gs_batch *x) {
  (void)r, (void)x;
  return refuse(b);
}
static int g_run_end(struct store *b, const struct store_run *r) {
  (void)r;
  return refuse(b);
}
static int g_findings_write(struct store *b, const char *id, const struct store_finding *f, size_t n) {
  (void)id, (void)f, (void)n;
  return refuse(b);
}

static int g_runs_list(struct store *base, struct store_run **out, size_t *n) {
  struct group_store *g = (struct group_store *)base;
  if (!(*out = malloc(sizeof **out)))
    return gs_fail(GS_ENOMEM, "out of memory");
  **out = g->group;
  *n = 1;
  return GS_OK;
}

static int g_run_get(struct store *base, const char *ref, struct store_run *out) {
  struct group_store *g = (struct group_store *)base;
  if (strcmp(ref, "last") && strcmp(ref, g->group.id) && strcmp(ref, g->group.name))
    return gs_fail(GS_ENOENT, "no group '%s' in this store (see 'gpuscope runs --group NAME')", ref);
  *out = g->group;
  return GS_OK;
}

static int g_series_list(struct store *base, const char *run_id, struct store_series **out, size_t *n) {
  struct group_store *g = (struct group_store *)base;
  (void)run_id;
  if (!(*out = malloc((g->nseries ? g->nseries : 1) * sizeof **out)))
    return gs_fail(GS_ENOMEM, "out of memory");
  memcpy(*out, g->series, g->nseries * sizeof **out);
  *n = g->nseries;
  return GS_OK;
}

struct shift_ctx {
  int64_t off;
  store_sample_fn fn;
  void *user;
};

static int shift_one(void *u, int64_t t, double v) {
  struct shift_ctx *c = u;
  return c->fn(c->user, t + c->off, v);
}

static const struct gseries *lookup(const struct group_store *g, int64_t id) {
  return id >= 1 && (size_t)id <= g->nseries ? &g->map[id - 1] : NULL;
}

static int64_t sat_sub(int64_t a, int64_t b) { /* a - b, kept inside int64 for the open ends */
  if (a == INT64_MIN || a == INT64_MAX)
    return a;
  return a - b;
}

static int g_samples_read(struct store *base, int64_t id, int64_t from, int64_t to, store_sample_fn fn, void *user) {
  struct group_store *g = (struct group_store *)base;
  const struct gseries *m = lookup(g, id);
  if (!m)
    return gs_fail(GS_ENOENT, "no series %lld in this group", (long long)id);
  struct shift_ctx c = {g->offset[m->run], fn, user};
  return g->src->samples_read(g->src, m->base_id, sat_sub(from, c.off), sat_sub(to, c.off), shift_one, &c);
}

static int g_rollups_read(struct store *base, int64_t id, int64_t res, int64_t **t, double **mn, double **mx,
                          double **mean, size_t *n) {
  struct group_store *g = (struct group_store *)base;
  const struct gseries *m = lookup(g, id);
  if (!m)
    return gs_fail(GS_ENOENT, "no series %lld in this group", (long long)id);
  int rc = g->src->rollups_read(g->src, m->base_id, res, t, mn, mx, mean, n);
  for (size_t i = 0; !rc && i < *n; i++)
    (*t)[i] += g->offset[m->run];
  return rc;
}

static int g_events_read(struct store *base, const char *run_id, struct store_event **out, size_t *n) {
  struct group_store *g = (struct group_store *)base;
  (void)run_id;
  if (!(*out = malloc((g->nevents ? g->nevents : 1) * sizeof **out)))
    return gs_fail(GS_ENOMEM, "out of memory");
  memcpy(*out, g->events, g->nevents * sizeof **out);
  *n = g->nevents;
  return GS_OK;
}

static int g_params_read(struct store *base, const char *run_id, struct gs_kv **out, size_t *n) {
  struct group_store *g = (struct group_store *)base;
  (void)run_id;
  struct gs_kv *kv = calloc(g->nparams ? g->nparams : 1, sizeof *kv);
  if (!kv)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < g->nparams; i++)
    if (!(kv[i].key = strdup(g->params[i].key)) || !(kv[i].value = strdup(g->params[i].value))) {
      store_kv_free(kv, i + 1);
      return gs_fail(GS_ENOMEM, "out of memory");
    }
  *out = kv;
  *n = g->nparams;
  return GS_OK;
}

static int g_notes_read(struct store *base, const char *run_id, char ***out, size_t *n) {
  struct group_store *g = (struct group_store *)base;
  (void)run_id;
  char **v = calloc(g->nnotes ? g->nnotes : 1, sizeof *v);
  if (!v)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < g->nnotes; i++)
    if (!(v[i] = strdup(g->notes[i]))) {
      store_notes_free(v, i);
      return gs_fail(GS_ENOMEM, "out of memory");
    }
  *out = v;
  *n = g->nnotes;
  return GS_OK;
}

static int g_findings_read(struct store *base, const char *run_id, struct store_finding **out, size_t *n) {
  (void)base, (void)run_id; /* a group's findings are computed each time it is read, never stored */
  *out = NULL;
  *n = 0;
  return GS_OK;
}

static void g_close(struct store *base) {
  struct group_store *g = (struct group_store *)base;
  if (!g)
    return;
  free(g->runs), free(g->offset), free(g->series), free(g->map), free(g->events);
  store_kv_free(g->params, g->nparams);
  store_notes_free(g->notes, g->nnotes);
  free(g);
}

/* ---- building the group ---- */

static int add_param(struct group_store *g, const char *key, const char *value) {
  for (size_t i = 0; i < g->nparams; i++)
    if (!strcmp(g->params[i].key, key))
      return GS_OK; /* the first run's value stands */
  if (g->nparams == g->cap_params) {
    size_t cap = g->cap_params ? g->cap_params * 2 : 32;
    struct gs_kv *kv = realloc(g->params, cap * sizeof *kv);
    if (!kv)
      return gs_fail(GS_ENOMEM, "out of memory");
    g->params = kv;
    g->cap_params = cap;
  }
  struct gs_kv *kv = &g->params[g->nparams];
  kv->key = strdup(key);
  kv->value = strdup(value);
  if (!kv->key || !kv->value) {
    free(kv->key), free(kv->value);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  g->nparams++;
  return GS_OK;
}

/* N for labels "gpu=N" or "gpu=N,..." (a GPU's own series, or a process on it), else -1; *rest is
 * what follows N. */
static int gpu_of(const char *labels, const char **rest) {
  char *end;
  if (strncmp(labels, "gpu=", 4) || labels[4] < '0' || labels[4] > '9')
    return -1;
  long n = strtol(labels + 4, &end, 10);
  if ((*end && *end != ',') || n > 1023)
    return -1;
  *rest = end;
  return (int)n;
}

/* "" -> 0, "rank=R" -> R, else -1. */
static int rank_of(const char *labels) {
  if (!labels[0])
    return 0;
  char *end;
  if (strncmp(labels, "rank=", 5) || !labels[5])
    return -1;
  long n = strtol(labels + 5, &end, 10);
  return *end || n < 1 || n > 65535 ? -1 : (int)n;
}

/* Appends host=HOST to a label list in place (cut at n - 1 bytes: labels are bounded). */
static void add_host_label(char *labels, size_t n, const char *host) {
  size_t len = strlen(labels);
  if (len + 1 < n && snprintf(labels + len, n - len, "%shost=%s", len ? "," : "", host) >= (int)(n - len))
    labels[n - 1] = 0;
}

static int is_step(const struct store_series *s) {
  return !strncmp(s->name, "step.", 5);
}

static int rank_used(const struct group_store *g, int rank) {
  char key[64];
  snprintf(key, sizeof key, "group.rank.%d.host", rank);
  for (size_t i = 0; i < g->nparams; i++)
    if (!strcmp(g->params[i].key, key))
      return 1;
  return 0;
}

/* Adds run i's series with group labels. gpu_base is the first group GPU number of this run. */
static int add_run_series(struct group_store *g, size_t i, int *gpu_base) {
  struct store_series *s = NULL;
  size_t n = 0;
  const struct store_run *r = &g->runs[i];
  int rc = g->src->series_list(g->src, r->id, &s, &n);
  if (rc)
    return rc;
  struct store_series *all = realloc(g->series, (g->nseries + n + 1) * sizeof *all);
  struct gseries *map = all ? realloc(g->map, (g->nseries + n + 1) * sizeof *map) : NULL;
  if (all)
    g->series = all;
  if (!all || !map) {
    free(s);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  g->map = map;
  int gpus = 0, rank_remap = -1; /* rank_remap: this run's main loop collides: its new rank */
  for (size_t k = 0; k < n; k++)
    if (is_step(&s[k]) && rank_of(s[k].labels) >= 0 && rank_used(g, rank_of(s[k].labels))) {
      if (rank_of(s[k].labels) == 0 && rank_remap < 0) {
        rank_remap = 1;
        while (rank_used(g, rank_remap))
          rank_remap++;
      }
    }
  char val[200], key[64];
  for (size_t k = 0; k < n; k++) {
    struct store_series x = s[k];
    const char *rest = "";
    int gpu = gpu_of(s[k].labels, &rest), rank = is_step(&x) ? rank_of(x.labels) : -1;
    if (gpu >= 0) {
      if (snprintf(x.labels, sizeof x.labels, "gpu=%d%s", *gpu_base + gpu, rest) >= (int)sizeof x.labels)
        x.labels[sizeof x.labels - 1] = 0;
      gpus = gpu + 1 > gpus ? gpu + 1 : gpus;
      snprintf(key, sizeof key, "group.gpu.%d.host", *gpu_base + gpu);
      if ((rc = add_param(g, key, r->host)))
        break;
      snprintf(key, sizeof key, "group.gpu.%d.local", *gpu_base + gpu);
      snprintf(val, sizeof val, "%d", gpu);
      if ((rc = add_param(g, key, val)))
        break;
    } else if (rank >= 0) {
      if (rank == 0 && rank_remap > 0)
        rank = rank_remap;
      if (rank > 0)
        snprintf(x.labels, sizeof x.labels, "rank=%d", rank);
    } else
      add_host_label(x.labels, sizeof x.labels, r->host);
    int64_t off = g->offset[i];
    if (x.count)
      x.t_first += off, x.t_last += off;
    g->map[g->nseries] = (struct gseries){i, x.id};
    x.id = (int64_t)g->nseries + 1;
    g->series[g->nseries++] = x;
  }
  /* the ranks of this run, for a finding to name their host */
  for (size_t k = 0; !rc && k < n; k++) {
    int rank = is_step(&s[k]) ? rank_of(s[k].labels) : -1;
    if (rank < 0)
      continue;
    if (rank == 0 && rank_remap > 0)
      rank = rank_remap;
    snprintf(key, sizeof key, "group.rank.%d.host", rank);
    rc = add_param(g, key, r->host);
  }
  free(s);
  *gpu_base += gpus;
  return rc;
}

/* Run i's events on the group's clock, their GPU renumbered from gpu_base, the others labelled with the host. */
static int add_run_events(struct group_store *g, size_t i, int gpu_base) {
  struct store_event *e = NULL;
  size_t n = 0;
  int rc = g->src->events_read(g->src, g->runs[i].id, &e, &n);
  if (rc)
    return rc;
  struct store_event *all = realloc(g->events, (g->nevents + n + 1) * sizeof *all);
  if (!all) {
    free(e);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  g->events = all;
  for (size_t k = 0; k < n; k++) {
    struct store_event x = e[k];
    x.t += g->offset[i];
    const char *rest = "";
    int gpu = gpu_of(e[k].labels, &rest);
    if (gpu >= 0 && snprintf(x.labels, sizeof x.labels, "gpu=%d%s", gpu_base + gpu, rest) >= (int)sizeof x.labels)
      x.labels[sizeof x.labels - 1] = 0;
    if (gpu < 0)
      add_host_label(x.labels, sizeof x.labels, g->runs[i].host);
    g->events[g->nevents++] = x;
  }
  free(e);
  return GS_OK;
}

static int by_time(const void *a, const void *b) {
  const struct store_event *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t;
}

/* Run i's params (a GPU's, gpu.N.*, renumbered from gpu_base like its series) and notes. */
static int add_run_params_notes(struct group_store *g, size_t i, int gpu_base) {
  struct gs_kv *kv = NULL;
  char **notes = NULL;
  size_t nkv = 0, nn = 0;
  const struct store_run *r = &g->runs[i];
  int rc = g->src->params_read(g->src, r->id, &kv, &nkv);
  for (size_t k = 0; !rc && k < nkv; k++) {
    char key[300], *end;
    long n = !strncmp(kv[k].key, "gpu.", 4) ? strtol(kv[k].key + 4, &end, 10) : -1;
    if (n >= 0 && end != kv[k].key + 4 && *end == '.' &&
        snprintf(key, sizeof key, "gpu.%ld%s", gpu_base + n, end) < (int)sizeof key)
      rc = add_param(g, key, kv[k].value);
    else
      rc = add_param(g, kv[k].key, kv[k].value);
  }
  if (kv)
    store_kv_free(kv, nkv);
  if (rc || (rc = g->src->notes_read(g->src, r->id, &notes, &nn)))
    return rc;
  char **all = realloc(g->notes, (g->nnotes + nn + 1) * sizeof *all);
  if (!all) {
    store_notes_free(notes, nn);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  g->notes = all;
  for (size_t k = 0; k < nn; k++) {
    size_t len = strlen(r->host) + strlen(notes[k]) + 3;
    char *x = malloc(len);
    if (!x) {
      rc = gs_fail(GS_ENOMEM, "out of memory");
      break;
    }
    snprintf(x, len, "%s: %s", r->host, notes[k]);
    g->notes[g->nnotes++] = x;
  }
  store_notes_free(notes, nn);
  return rc;
}

/* The group's own record: its span, hosts, and a status that says whether all of it finished. */
static void fill_group_run(struct group_store *g, const char *name) {
  struct store_run *x = &g->group;
  memset(x, 0, sizeof *x);
  snprintf(x->id, sizeof x->id, "%s", name);
  snprintf(x->name, sizeof x->name, "%s", name);
  snprintf(x->group, sizeof x->group, "%s", name);
  const struct store_run *first = &g->runs[0];
  snprintf(x->command, sizeof x->command, "%s", first->command);
  snprintf(x->cwd, sizeof x->cwd, "%s", first->cwd);
  snprintf(x->user, sizeof x->user, "%s", first->user);
  snprintf(x->tags, sizeof x->tags, "%s", first->tags);
  x->interval_ns = first->interval_ns;
  x->start_wall_ns = first->start_wall_ns;
  x->exit_code = 0;
  snprintf(x->status, sizeof x->status, "finished");
  size_t hl = 0;
  int any_running = 0, all_ended = 1;
  for (size_t i = 0; i < g->nruns; i++) {
    const struct store_run *r = &g->runs[i];
    if (!strstr(x->host, r->host) && hl + strlen(r->host) + 3 < sizeof x->host)
      hl += (size_t)snprintf(x->host + hl, sizeof x->host - hl, "%s%s", hl ? ", " : "", r->host);
    if (r->end_wall_ns > x->end_wall_ns)
      x->end_wall_ns = r->end_wall_ns;
    all_ended &= r->end_wall_ns != 0;
    any_running |= !strcmp(r->status, "running");
    if (strcmp(r->status, "finished") && strcmp(x->status, "finished") == 0)
      snprintf(x->status, sizeof x->status, "%s", r->status);
    if (r->exit_code != 0 && (x->exit_code == 0 || r->exit_code > x->exit_code))
      x->exit_code = r->exit_code;
  }
  if (any_running)
    snprintf(x->status, sizeof x->status, "running");
  if (!all_ended)
    x->end_wall_ns = 0;
}

struct store *store_group_open(struct store *src, const char *name) {
  struct store_run *runs = NULL;
  size_t n = 0;
  if (!name || !*name) {
    gs_fail(GS_EINVAL, "a group needs a name");
    return NULL;
  }
  if (src->runs_list(src, &runs, &n))
    return NULL;
  struct group_store *g = calloc(1, sizeof *g);
  if (!g) {
    free(runs);
    gs_fail(GS_ENOMEM, "out of memory");
    return NULL;
  }
  for (size_t i = 0; i < n; i++)
    if (!strcmp(runs[i].group, name))
      runs[g->nruns++] = runs[i];
  g->runs = runs;
  g->base = (struct store){.version = 2,
                           .scheme = src->scheme,
                           .schema_found = src->schema_found,
                           .read_only = 1,
                           .run_begin = g_run_begin,
                           .run_append = g_run_append,
                           .run_end = g_run_end,
                           .runs_list = g_runs_list,
                           .run_get = g_run_get,
                           .series_list = g_series_list,
                           .samples_read = g_samples_read,
                           .rollups_read = g_rollups_read,
                           .events_read = g_events_read,
                           .params_read = g_params_read,
                           .notes_read = g_notes_read,
                           .findings_write = g_findings_write,
                           .findings_read = g_findings_read,
                           .close = g_close};
  g->src = src;
  if (!g->nruns) {
    gs_fail(GS_ENOENT, "no run or group '%s' in this store (see 'gpuscope runs')", name);
    goto fail;
  }
  /* oldest first: the first run's GPUs are the group's first, its params stand where runs differ */
  for (size_t i = 1; i < g->nruns; i++)
    for (size_t k = i; k > 0 && g->runs[k].start_wall_ns < g->runs[k - 1].start_wall_ns; k--) {
      struct store_run t = g->runs[k];
      g->runs[k] = g->runs[k - 1];
      g->runs[k - 1] = t;
    }
  if (!(g->offset = calloc(g->nruns, sizeof *g->offset))) {
    gs_fail(GS_ENOMEM, "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < g->nruns; i++)
    g->offset[i] = g->runs[i].start_wall_ns - g->runs[0].start_wall_ns;
  fill_group_run(g, name);
  char list[2048] = "", num[32];
  size_t len = 0;
  for (size_t i = 0; i < g->nruns && len + 40 < sizeof list; i++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s@%s", i ? "," : "", g->runs[i].id, g->runs[i].host);
  snprintf(num, sizeof num, "%zu", g->nruns);
  int gpu_base = 0;
  if (add_param(g, "group.runs", list) || add_param(g, "group.nruns", num) ||
      add_param(g, "group.hosts", g->group.host))
    goto fail;
  for (size_t i = 0; i < g->nruns; i++) {
    int base = gpu_base;
    if (add_run_series(g, i, &gpu_base) || add_run_events(g, i, base) || add_run_params_notes(g, i, base))
      goto fail;
  }
  if (g->nevents > 1)
    qsort(g->events, g->nevents, sizeof *g->events, by_time);
  return &g->base;
fail:
  g_close(&g->base);
  return NULL;
}
