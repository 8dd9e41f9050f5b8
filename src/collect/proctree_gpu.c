/* collect/proctree_gpu: the CPU side of the processes that use a GPU, for the node agent (`gpuscope
 * agent`, which launches no job). Each tick it takes the pids NVML listed on any GPU lately (the NVML
 * collector's per-process series in the sink: gpu.proc_mem_bytes, gpu.proc_sm_pct) and keeps one
 * process tree (collector_proctree: the process and its descendants, the loader workers) per pid,
 * with the tree's totals only, labelled pid=<the GPU process> and comm=<its name as it was when first
 * seen>, so the trees of different jobs stay apart. At most GPUTREES_MAX trees: the pids past it (in
 * the order NVML's series first appeared) wait for a slot, counted in gpu_trees.unwatched, with one
 * note. A tree ends when its GPU process exits (its series end with it: no stale line) or when NVML
 * has not listed the pid for 5 ticks (at least 10 s, the endpoint's staleness); a pid whose
 * /proc/PID/stat cannot be read (gone, or outside this pid namespace) gets no tree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collect.h"
#include "collect/collect_util.h"

enum { MAX_LISTED = 1024, STAT_BUF = 1024 };

struct gtree {
  pid_t pid;
  void *ctx;        /* a collector_proctree context */
  int64_t listed_t; /* when NVML last listed the pid */
};

struct listed {
  pid_t pid;
  int64_t t;
};

struct gputrees {
  struct collector_opts opts;
  struct gtree trees[GPUTREES_MAX];
  size_t n;
  int64_t grace_ns;
  int sid_watched, sid_unwatched;
  int capped_noted;
  struct listed listed[MAX_LISTED]; /* this tick's pass over the sink */
  size_t n_listed;
  int64_t since;
};

enum { G_WATCHED, G_UNWATCHED, G_N };

static const struct gs_metric_desc gputrees_metrics[] = {
    [G_WATCHED] = {"gpu_trees.watched", "count", GS_GAUGE,
                   "GPU processes whose CPU tree (tree.* labelled pid, comm) the node agent collects"},
    [G_UNWATCHED] = {"gpu_trees.unwatched", "count", GS_GAUGE,
                     "GPU processes past the node agent's 64 trees, whose CPU trees are not collected"},
};

/* The pid of a "gpu=N,...,pid=P" label list, or 0. */
static pid_t label_pid(const char *labels) {
  for (const char *p = labels; (p = strstr(p, "pid=")); p += 4)
    if (p == labels || p[-1] == ',') {
      const char *v = p + 4;
      uint64_t pid = next_u64(&v);
      return (*v == 0 || *v == ',') && pid > 0 && pid < 1u << 30 ? (pid_t)pid : 0;
    }
  return 0;
}

/* gs_sink_each callback (under the sink's lock: no sink calls): notes the pids of NVML's fresh
 * per-process series. */
static void note_listed(void *user, int id, const char *source, size_t slen, const char *name, size_t nlen,
                        const char *labels, double v, int64_t t) {
  (void)id, (void)v;
  struct gputrees *g = user;
  if (t < g->since || slen != 4 || strncmp(source, "nvml", 4) ||
      !((nlen == 18 && !strncmp(name, "gpu.proc_mem_bytes", 18)) ||
        (nlen == 15 && !strncmp(name, "gpu.proc_sm_pct", 15))))
    return;
  pid_t pid = label_pid(labels);
  if (!pid)
    return;
  size_t i = 0;
  while (i < g->n_listed && g->listed[i].pid != pid)
    i++;
  if (i == g->n_listed) {
    if (g->n_listed == MAX_LISTED)
      return;
    g->listed[g->n_listed++] = (struct listed){pid, t};
  } else if (t > g->listed[i].t) {
    g->listed[i].t = t;
  }
}

/* A process name as a label value of the sink's "k=v,k2=v2" lists: ',' and '=' (which would split
 * it), control characters and bytes that are not UTF-8 become '_' or '?'. */
static void comm_label(char *out, size_t n, const char *comm) {
  size_t off = 0;
  for (const char *s = comm; *s && off + 5 < n;) {
    uint32_t cp;
    size_t k = gs_utf8_next(s, &cp);
    unsigned char c = (unsigned char)*s;
    if (k == 1 && (c >= 0x80 || c < 0x20 || c == 0x7f))
      out[off++] = '?';
    else if (k == 1 && (c == ',' || c == '='))
      out[off++] = '_';
    else
      memcpy(out + off, s, k), off += k;
    s += k;
  }
  out[off] = 0;
}

/* Opens the tree of GPU process pid into g->trees[g->n]; nothing when its stat cannot be read. */
static void tree_open(struct gputrees *g, struct gs_sink *s, pid_t pid, int64_t listed_t) {
  char rel[64], path[512], buf[STAT_BUF], comm[64], labels[160], err[128];
  snprintf(rel, sizeof rel, "/proc/%d/stat", pid);
  FILE *f = fopen(collect_path(&g->opts, rel, path, sizeof path), "re");
  if (!f)
    return;
  size_t len = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[len] = 0;
  const char *a = strchr(buf, '('), *b = strrchr(buf, ')');
  if (!a || !b || b < a)
    return;
  snprintf(rel, sizeof rel, "%.*s", (int)(b - a - 1 < 31 ? b - a - 1 : 31), a + 1);
  comm_label(comm, sizeof comm, rel);
  snprintf(labels, sizeof labels, "pid=%d,comm=%s", pid, comm);
  struct collector_opts o = g->opts;
  o.pid = pid, o.labels = labels, o.tree_only = 1, o.subreaper = 0;
  void *ctx = collector_proctree.open(&o, s, err, sizeof err);
  if (ctx)
    g->trees[g->n++] = (struct gtree){pid, ctx, listed_t};
}

static struct gtree *tree_find(struct gputrees *g, pid_t pid) {
  for (size_t i = 0; i < g->n; i++)
    if (g->trees[i].pid == pid)
      return &g->trees[i];
  return NULL;
}

/* Closes the trees that are over (their process exited) or no longer on a GPU. */
static void trees_close_ended(struct gputrees *g) {
  for (size_t i = 0; i < g->n;) {
    struct gtree *t = &g->trees[i];
    if (t->listed_t >= g->since && !proctree_ended(t->ctx)) {
      i++;
      continue;
    }
    collector_proctree.close(t->ctx); /* ends its series */
    g->trees[i] = g->trees[--g->n];
  }
}

static int gputrees_sample(void *ctx, struct gs_sink *s, int64_t now) {
  struct gputrees *g = ctx;
  g->n_listed = 0;
  g->since = now - g->grace_ns;
  gs_sink_each(s, note_listed, g);
  for (size_t i = 0; i < g->n_listed; i++) {
    struct gtree *t = tree_find(g, g->listed[i].pid);
    if (t)
      t->listed_t = g->listed[i].t;
  }
  size_t unwatched = 0;
  for (size_t i = 0; i < g->n_listed; i++) {
    if (tree_find(g, g->listed[i].pid))
      continue;
    if (g->n < GPUTREES_MAX)
      tree_open(g, s, g->listed[i].pid, g->listed[i].t);
    else
      unwatched++;
  }
  if (unwatched && !g->capped_noted) {
    g->capped_noted = 1;
    gs_sink_note(s, "more than %d GPU processes: the CPU trees of the others are not collected (gpu_trees.unwatched)",
                 GPUTREES_MAX);
  }
  for (size_t i = 0; i < g->n; i++)
    collector_proctree.sample(g->trees[i].ctx, s, now);
  trees_close_ended(g); /* after sampling: a tree whose process exited this tick counts no more */
  gs_sink_put(s, g->sid_watched, now, (double)g->n);
  gs_sink_put(s, g->sid_unwatched, now, (double)unwatched);
  return GS_COLLECT_OK;
}

static void gputrees_close(void *ctx) {
  struct gputrees *g = ctx;
  if (!g)
    return;
  for (size_t i = 0; i < g->n; i++)
    collector_proctree.close(g->trees[i].ctx);
  free(g);
}

static void *gputrees_open(const struct collector_opts *o, struct gs_sink *s, char *err, size_t errlen) {
  (void)err, (void)errlen;
  if (o->pid > 0)
    return NULL; /* a job's own tree is collector_proctree's: off without a word */
  struct gputrees *g = calloc(1, sizeof *g);
  if (!g) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  g->opts = *o;
  int64_t iv = o->interval_ns > 0 ? o->interval_ns : GS_NS_PER_S;
  g->grace_ns = 5 * iv < 10 * GS_NS_PER_S ? 10 * GS_NS_PER_S : 5 * iv;
  g->sid_watched =
      gs_sink_series(s, "gputrees", gputrees_metrics[G_WATCHED].name, "", gputrees_metrics[G_WATCHED].unit, GS_GAUGE);
  g->sid_unwatched = gs_sink_series(s, "gputrees", gputrees_metrics[G_UNWATCHED].name, "",
                                    gputrees_metrics[G_UNWATCHED].unit, GS_GAUGE);
  return g;
}

static void gputrees_summary(void *ctx, FILE *out) {
  const struct gputrees *g = ctx;
  fprintf(out, "GPU processes: %zu trees watched at the end\n", g->n);
}

const struct collector collector_gputrees = {
    .version = 1,
    .name = "gputrees",
    .metrics = gputrees_metrics,
    .n_metrics = G_N,
    .open = gputrees_open,
    .sample = gputrees_sample,
    .summary = gputrees_summary,
    .close = gputrees_close,
};
