/* store/store_group: a group of runs — the nodes of one distributed job, each a run of its own
 * agent with the same --group — seen as one run, so the run view, the doctor, every report and
 * compare read a group exactly as they read a run, with no code of their own for it.
 *
 * A group store is a read-only `struct store` over another store (any back end). It holds one run,
 * the group: its id and name are the group's name, its start the earliest run's and its end the
 * latest's, its hosts listed. Its series are the union of the runs' series, with times moved onto
 * the group's clock (each run's offset from the earliest start), each thing that is there counted
 * once and labelled so they stay apart:
 *   - a GPU is its UUID (param gpu.N.uuid; host and index for a run without one), so the runs of
 *     one node that each see all of its GPUs (one task per GPU: NVML ignores CUDA_VISIBLE_DEVICES)
 *     count them once. The group numbers its distinct GPUs in the order the runs (oldest first) saw
 *     them (gpu=0..7 on the first host, gpu=8.. on the next), and reads each GPU's series, events
 *     and gpu.N.* params from one run: the one whose series of it cover the longest time (the
 *     earliest on a tie; the others' are the same readings). So the GPU rules (straggler,
 *     underused_gpus) compare and count every GPU of the job, each once;
 *   - step series keep their rank label (the clients send the global rank); a second unlabelled
 *     main loop (a node whose job set no rank) gets the next free rank;
 *   - a host's own series (source "host") come from one run on it, the one covering the longest
 *     time, labelled host=HOST;
 *   - every other series (the job's processes, the client's own metrics) and event stays per run,
 *     labelled host=HOST, and host=HOST,run=ID where several runs of the group share the host. No
 *     node is the unlabelled reference: a reader that wants one node's (or run's) names it, and one
 *     that wants all of them matches the labels without them (runview_labels_match).
 * Where things are is in the group's params: group.gpu.N.host and .local (the GPU's host and its
 * number there), group.gpu.N.run and .rank (the run, and its rank, whose job's process the
 * per-process GPU series show on it, when that is one run), group.rank.R.host and .labels (the
 * labels of that rank's run's own series), group.run.K.host and .labels (K: oldest first),
 * group.runs, group.hosts; gpu.count is the group's GPUs. Events and notes are merged in time order
 * (notes prefixed with their host, the same note of one host kept once). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_backend.h"

enum { GROUP_MAX_LOCAL = 1024 }; /* GPU numbers a run may use (gpu=0..1023) */

struct gseries {
  size_t run;      /* index in runs */
  int64_t base_id; /* the series' id in the base store */
};

/* One run of the group as the base store has it, and what the group makes of it. */
struct grun {
  struct store_series *s; /* its series and params, read once */
  size_t ns;
  struct gs_kv *kv;
  size_t nkv;
  int gpu[GROUP_MAX_LOCAL]; /* its GPU N: the group's number, -1 none */
  int64_t host_span;        /* how long its host series cover, ns (-1 none) */
  int host_own;             /* its host's series are the group's: the run covering them longest */
  int rank;                 /* its one rank (-1 none, -2 several) */
  char node[200];           /* labels added to its own series: host=H, or host=H,run=ID on a shared host */
};

/* One physical GPU of the group. */
struct ggpu {
  char key[128]; /* uuid=UUID, or host=H,gpu=N for a run that knows no UUID */
  size_t run;    /* the run its series are read from */
  int local;     /* its number in that run */
  int64_t span;  /* how long that run's series of it cover, ns (-1 none) */
  long by;       /* the run whose job uses it: -1 unknown, -2 several */
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
  struct grun *gr; /* per run */
  struct ggpu *gpus;
  size_t ngpus;
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
  for (size_t i = 0; g->gr && i < g->nruns; i++) {
    free(g->gr[i].s);
    if (g->gr[i].kv)
      store_kv_free(g->gr[i].kv, g->gr[i].nkv);
  }
  free(g->gr), free(g->gpus);
  free(g->runs), free(g->offset), free(g->series), free(g->map), free(g->events);
  store_kv_free(g->params, g->nparams);
  store_notes_free(g->notes, g->nnotes);
  free(g);
}

/* ---- building the group ---- */

static int add_param(struct group_store *g, const char *key, const char *value) {
  for (size_t i = 0; i < g->nparams; i++)
    if (!strcmp(g->params[i].key, key))
      return GS_OK; /* the first value stands */
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
  if ((*end && *end != ',') || n >= GROUP_MAX_LOCAL)
    return -1;
  *rest = end;
  return (int)n;
}

/* N for a param key "gpu.N.<fact>", else -1; *rest is ".<fact>". */
static int gpu_of_key(const char *key, const char **rest) {
  char *end;
  if (strncmp(key, "gpu.", 4) || key[4] < '0' || key[4] > '9')
    return -1;
  long n = strtol(key + 4, &end, 10);
  if (*end != '.' || n >= GROUP_MAX_LOCAL)
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

/* Appends ",extra" (or "extra" to an empty list) to a label list in place (cut at n - 1 bytes:
 * labels are bounded). */
static void add_labels(char *labels, size_t n, const char *extra) {
  size_t len = strlen(labels);
  if (len + 1 < n && snprintf(labels + len, n - len, "%s%s", len ? "," : "", extra) >= (int)(n - len))
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

static const char *run_param(const struct grun *r, const char *key) {
  for (size_t i = 0; i < r->nkv; i++)
    if (!strcmp(r->kv[i].key, key))
      return r->kv[i].value;
  return NULL;
}

/* Run i's series list and params, read once: the plan and every later step work from them. */
static int load_run(struct group_store *g, size_t i) {
  struct grun *r = &g->gr[i];
  for (int k = 0; k < GROUP_MAX_LOCAL; k++)
    r->gpu[k] = -1;
  r->rank = -1;
  int rc = g->src->series_list(g->src, g->runs[i].id, &r->s, &r->ns);
  if (!rc)
    rc = g->src->params_read(g->src, g->runs[i].id, &r->kv, &r->nkv);
  return rc;
}

/* The group's number of GPU `local` of run i: a GPU is its UUID (gpu.N.uuid; host and index when the
 * run has none), so every run that saw it gets the same number. Of those runs, the one whose series
 * of it cover the longest time is the one its series are read from (the earliest on a tie). */
static int claim_gpu(struct group_store *g, size_t i, int local, int64_t span) {
  char key[sizeof g->gpus->key], k[64];
  snprintf(k, sizeof k, "gpu.%d.uuid", local);
  const char *uuid = run_param(&g->gr[i], k);
  if (uuid && *uuid)
    snprintf(key, sizeof key, "uuid=%s", uuid);
  else
    snprintf(key, sizeof key, "host=%.100s,gpu=%d", g->runs[i].host, local);
  size_t n = 0;
  while (n < g->ngpus && strcmp(g->gpus[n].key, key))
    n++;
  if (n == g->ngpus) {
    struct ggpu *all = realloc(g->gpus, (g->ngpus + 1) * sizeof *all);
    if (!all)
      return gs_fail(GS_ENOMEM, "out of memory");
    g->gpus = all;
    g->gpus[g->ngpus++] = (struct ggpu){.run = i, .local = local, .span = span, .by = -1};
    snprintf(g->gpus[n].key, sizeof g->gpus[n].key, "%s", key);
  } else if (span > g->gpus[n].span) {
    g->gpus[n].run = i, g->gpus[n].local = local, g->gpus[n].span = span;
  }
  g->gr[i].gpu[local] = (int)n;
  return GS_OK;
}

/* Claims every GPU run i saw (in a series or a gpu.N.* param), in its own order, and measures how
 * long its host series cover. */
static int claim_run_gpus(struct group_store *g, size_t i) {
  int64_t lo[GROUP_MAX_LOCAL], hi[GROUP_MAX_LOCAL], hlo = INT64_MAX, hhi = INT64_MIN;
  char seen[GROUP_MAX_LOCAL] = {0};
  struct grun *r = &g->gr[i];
  const char *rest;
  for (size_t k = 0; k < r->ns; k++) {
    const struct store_series *s = &r->s[k];
    int n = gpu_of(s->labels, &rest);
    int64_t *a = n >= 0 ? &lo[n] : &hlo, *b = n >= 0 ? &hi[n] : &hhi;
    if (n >= 0 && !seen[n])
      seen[n] = 1, lo[n] = INT64_MAX, hi[n] = INT64_MIN;
    if ((n >= 0 || !strcmp(s->source, "host")) && s->count) {
      *a = s->t_first < *a ? s->t_first : *a;
      *b = s->t_last > *b ? s->t_last : *b;
    }
  }
  for (size_t k = 0; k < r->nkv; k++) {
    int n = gpu_of_key(r->kv[k].key, &rest);
    if (n >= 0 && !seen[n])
      seen[n] = 1, lo[n] = INT64_MAX, hi[n] = INT64_MIN;
  }
  r->host_span = hhi >= hlo ? hhi - hlo : -1;
  int rc = GS_OK;
  for (int n = 0; !rc && n < GROUP_MAX_LOCAL; n++)
    if (seen[n])
      rc = claim_gpu(g, i, n, hi[n] >= lo[n] ? hi[n] - lo[n] : -1);
  return rc;
}

/* Where several runs of the group share a host (one task per GPU): the run whose host series cover
 * the longest time gives the host's (the earliest on a tie), and each run's own series (its job's
 * processes, its client's metrics) get run=ID beside host=HOST so they stay apart. */
static void plan_hosts(struct group_store *g) {
  for (size_t i = 0; i < g->nruns; i++) {
    struct grun *r = &g->gr[i];
    size_t same = 0, best = i;
    for (size_t k = 0; k < g->nruns; k++)
      if (!strcmp(g->runs[k].host, g->runs[i].host)) {
        same++;
        if (g->gr[k].host_span > g->gr[best].host_span || (g->gr[k].host_span == g->gr[best].host_span && k < best))
          best = k;
      }
    r->host_own = best == i;
    if (same > 1)
      snprintf(r->node, sizeof r->node, "host=%.*s,run=%s", 120, g->runs[i].host, g->runs[i].id);
    else
      snprintf(r->node, sizeof r->node, "host=%.*s", 120, g->runs[i].host);
  }
}

/* The run of the group on `host` whose job has process pidlab ("pid=P": a proc.* series of it), or -1. */
static long job_of_pid(const struct group_store *g, const char *host, const char *pidlab) {
  for (size_t j = 0; j < g->nruns; j++)
    for (size_t k = 0; !strcmp(g->runs[j].host, host) && k < g->gr[j].ns; k++)
      if (!strcmp(g->gr[j].s[k].source, "proctree") && !strcmp(g->gr[j].s[k].labels, pidlab))
        return (long)j;
  return -1;
}

/* Which run's job uses each GPU, from every run's per-process GPU series (gpu.proc_mem_bytes
 * labelled gpu=N,pid=P) joined to the runs' process series on that host, and from a run in a
 * container whose NVML lists host pids, its own inference (param gpu.N.owner "job"): one run, or
 * none when several runs' processes (or none known) are on it. */
static void attribute_gpus(struct group_store *g) {
  for (size_t i = 0; i < g->nruns; i++) {
    for (size_t k = 0; k < g->gr[i].nkv; k++) {
      const char *rest;
      int n = gpu_of_key(g->gr[i].kv[k].key, &rest);
      if (n < 0 || g->gr[i].gpu[n] < 0 || strcmp(rest, ".owner") || strcmp(g->gr[i].kv[k].value, "job"))
        continue;
      struct ggpu *x = &g->gpus[g->gr[i].gpu[n]];
      if (x->by != -2)
        x->by = x->by == -1 || x->by == (long)i ? (long)i : -2;
    }
    for (size_t k = 0; k < g->gr[i].ns; k++) {
      const struct store_series *s = &g->gr[i].s[k];
      const char *rest, *pid;
      int n = gpu_of(s->labels, &rest);
      if (n < 0 || g->gr[i].gpu[n] < 0 || strcmp(s->name, "gpu.proc_mem_bytes") || !(pid = strstr(rest, ",pid=")))
        continue;
      char lab[64];
      snprintf(lab, sizeof lab, "%.*s", (int)strcspn(pid + 1, ","), pid + 1);
      long j = job_of_pid(g, g->runs[i].host, lab);
      struct ggpu *x = &g->gpus[g->gr[i].gpu[n]];
      if (j >= 0 && x->by != -2)
        x->by = x->by == -1 || x->by == j ? j : -2;
    }
  }
}

/* Group labels for run i's series x; returns 0 to skip it (a GPU or host series another run gives). */
static int relabel_series(struct group_store *g, size_t i, struct store_series *x, int rank_remap) {
  struct grun *r = &g->gr[i];
  const char *rest = "";
  int gpu = gpu_of(x->labels, &rest), rank = is_step(x) ? rank_of(x->labels) : -1;
  if (gpu >= 0) {
    int n = r->gpu[gpu];
    if (n < 0 || g->gpus[n].run != i)
      return 0;
    char lab[sizeof x->labels];
    if (snprintf(lab, sizeof lab, "gpu=%d%s", n, rest) >= (int)sizeof lab)
      lab[sizeof lab - 1] = 0;
    memcpy(x->labels, lab, sizeof lab);
  } else if (rank >= 0) {
    if (rank == 0 && rank_remap > 0)
      rank = rank_remap;
    if (rank > 0)
      snprintf(x->labels, sizeof x->labels, "rank=%d", rank);
    r->rank = r->rank == -1 || r->rank == rank ? rank : -2;
  } else if (!strcmp(x->source, "host")) {
    char h[140];
    if (!r->host_own)
      return 0;
    snprintf(h, sizeof h, "host=%.*s", 120, g->runs[i].host);
    add_labels(x->labels, sizeof x->labels, h);
  } else
    add_labels(x->labels, sizeof x->labels, r->node);
  return 1;
}

/* Adds run i's series with group labels. */
static int add_run_series(struct group_store *g, size_t i) {
  const struct grun *r = &g->gr[i];
  struct store_series *all = realloc(g->series, (g->nseries + r->ns + 1) * sizeof *all);
  struct gseries *map = all ? realloc(g->map, (g->nseries + r->ns + 1) * sizeof *map) : NULL;
  if (all)
    g->series = all;
  if (!all || !map)
    return gs_fail(GS_ENOMEM, "out of memory");
  g->map = map;
  int rank_remap = -1; /* this run's main loop collides: its new rank */
  for (size_t k = 0; k < r->ns && rank_remap < 0; k++)
    if (is_step(&r->s[k]) && rank_of(r->s[k].labels) == 0 && rank_used(g, 0)) {
      rank_remap = 1;
      while (rank_used(g, rank_remap))
        rank_remap++;
    }
  for (size_t k = 0; k < r->ns; k++) {
    struct store_series x = r->s[k];
    if (!relabel_series(g, i, &x, rank_remap))
      continue;
    if (x.count)
      x.t_first += g->offset[i], x.t_last += g->offset[i];
    g->map[g->nseries] = (struct gseries){i, x.id};
    x.id = (int64_t)g->nseries + 1;
    g->series[g->nseries++] = x;
  }
  /* the ranks of this run, for a finding to name their host and read their run's own series */
  int rc = GS_OK;
  char key[64];
  for (size_t k = 0; !rc && k < r->ns; k++) {
    int rank = is_step(&r->s[k]) ? rank_of(r->s[k].labels) : -1;
    if (rank < 0)
      continue;
    if (rank == 0 && rank_remap > 0)
      rank = rank_remap;
    snprintf(key, sizeof key, "group.rank.%d.host", rank);
    rc = add_param(g, key, g->runs[i].host);
    snprintf(key, sizeof key, "group.rank.%d.labels", rank);
    if (!rc)
      rc = add_param(g, key, r->node);
  }
  return rc;
}

/* Run i's events on the group's clock: a GPU's renumbered (from the run its series are read from
 * only: the others saw the same), the others labelled like the run's own series. */
static int add_run_events(struct group_store *g, size_t i) {
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
    int gpu = gpu_of(e[k].labels, &rest), num = gpu >= 0 ? g->gr[i].gpu[gpu] : -1;
    if (gpu >= 0 && (num < 0 || g->gpus[num].run != i))
      continue;
    if (gpu >= 0 && snprintf(x.labels, sizeof x.labels, "gpu=%d%s", num, rest) >= (int)sizeof x.labels)
      x.labels[sizeof x.labels - 1] = 0;
    if (gpu < 0)
      add_labels(x.labels, sizeof x.labels, g->gr[i].node);
    g->events[g->nevents++] = x;
  }
  free(e);
  return GS_OK;
}

static int by_time(const void *a, const void *b) {
  const struct store_event *x = a, *y = b;
  return x->t < y->t ? -1 : x->t > y->t;
}

static int has_note(const struct group_store *g, const char *s) {
  for (size_t i = 0; i < g->nnotes; i++)
    if (!strcmp(g->notes[i], s))
      return 1;
  return 0;
}

/* Run i's params (a GPU's, gpu.N.*, renumbered like its series, from the run its series are read
 * from) and notes, prefixed with the host (the same note from two runs on one host kept once). */
static int add_run_params_notes(struct group_store *g, size_t i) {
  char **notes = NULL;
  size_t nn = 0;
  const struct grun *gr = &g->gr[i];
  const struct store_run *r = &g->runs[i];
  int rc = GS_OK;
  for (size_t k = 0; !rc && k < gr->nkv; k++) {
    char key[300];
    const char *rest;
    int n = gpu_of_key(gr->kv[k].key, &rest), num = n >= 0 ? gr->gpu[n] : -1;
    if (n < 0)
      rc = add_param(g, gr->kv[k].key, gr->kv[k].value);
    else if (num >= 0 && g->gpus[num].run == i && snprintf(key, sizeof key, "gpu.%d%s", num, rest) < (int)sizeof key)
      rc = add_param(g, key, gr->kv[k].value);
  }
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
    if (has_note(g, x))
      free(x);
    else
      g->notes[g->nnotes++] = x;
  }
  store_notes_free(notes, nn);
  return rc;
}

/* The group's params on where things are: each GPU's host, own number there and the run (and rank)
 * whose job uses it; each run's host and the labels of its own series. */
static int add_place_params(struct group_store *g) {
  char key[64], val[200];
  int rc = GS_OK;
  for (size_t n = 0; !rc && n < g->ngpus; n++) {
    const struct ggpu *x = &g->gpus[n];
    snprintf(key, sizeof key, "group.gpu.%zu.host", n);
    rc = add_param(g, key, g->runs[x->run].host);
    snprintf(key, sizeof key, "group.gpu.%zu.local", n);
    snprintf(val, sizeof val, "%d", x->local);
    if (!rc)
      rc = add_param(g, key, val);
    snprintf(key, sizeof key, "group.gpu.%zu.run", n);
    if (!rc && x->by >= 0)
      rc = add_param(g, key, g->runs[x->by].id);
    snprintf(key, sizeof key, "group.gpu.%zu.rank", n);
    snprintf(val, sizeof val, "%d", x->by >= 0 ? g->gr[x->by].rank : -1);
    if (!rc && x->by >= 0 && g->gr[x->by].rank >= 0)
      rc = add_param(g, key, val);
  }
  for (size_t i = 0; !rc && i < g->nruns; i++) {
    snprintf(key, sizeof key, "group.run.%zu.host", i);
    rc = add_param(g, key, g->runs[i].host);
    snprintf(key, sizeof key, "group.run.%zu.labels", i);
    if (!rc)
      rc = add_param(g, key, g->gr[i].node);
  }
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

/* Reads every run once, decides which GPUs and hosts are one (plan), then adds the runs' series,
 * events, params and notes in the group's terms. */
static int build(struct group_store *g) {
  char list[2048] = "", num[32];
  size_t len = 0;
  int rc = GS_OK;
  for (size_t i = 0; !rc && i < g->nruns; i++)
    if (!(rc = load_run(g, i)))
      rc = claim_run_gpus(g, i);
  if (rc)
    return rc;
  plan_hosts(g);
  attribute_gpus(g);
  for (size_t i = 0; i < g->nruns && len + 40 < sizeof list; i++)
    len += (size_t)snprintf(list + len, sizeof list - len, "%s%s@%s", i ? "," : "", g->runs[i].id, g->runs[i].host);
  if ((rc = add_param(g, "group.runs", list)))
    return rc;
  snprintf(num, sizeof num, "%zu", g->nruns);
  if ((rc = add_param(g, "group.nruns", num)) || (rc = add_param(g, "group.hosts", g->group.host)))
    return rc;
  snprintf(num, sizeof num, "%zu", g->ngpus);
  if (g->ngpus && (rc = add_param(g, "gpu.count", num)))
    return rc;
  for (size_t i = 0; !rc && i < g->nruns; i++)
    if (!(rc = add_run_series(g, i)) && !(rc = add_run_events(g, i)))
      rc = add_run_params_notes(g, i);
  return rc ? rc : add_place_params(g);
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
  if (!(g->offset = calloc(g->nruns, sizeof *g->offset)) || !(g->gr = calloc(g->nruns, sizeof *g->gr))) {
    gs_fail(GS_ENOMEM, "out of memory");
    goto fail;
  }
  for (size_t i = 0; i < g->nruns; i++)
    g->offset[i] = g->runs[i].start_wall_ns - g->runs[0].start_wall_ns;
  fill_group_run(g, name);
  if (build(g))
    goto fail;
  if (g->nevents > 1)
    qsort(g->events, g->nevents, sizeof *g->events, by_time);
  return &g->base;
fail:
  g_close(&g->base);
  return NULL;
}
