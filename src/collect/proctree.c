/* collect/proctree: the job's own process tree — the launched command and every descendant, found
 * again each tick because children come and go (DataLoader workers). Per process: CPU %, RSS,
 * threads, state and I/O bytes from /proc/PID/{stat,io}, and the time its main thread waited for a
 * CPU while runnable (/proc/PID/schedstat's run delay: a starved process, not a sleeping one); for
 * the tree: totals and how many processes are running, sleeping or in uninterruptible (D) sleep.
 * Descendants are found through /proc/PID/task/TID/children; gpuscope is a child subreaper, so
 * orphaned grandchildren become its own children and stay in the tree. Processes that exit between
 * listing and reading are skipped. Each process's files — stat, io, schedstat and its main thread's
 * children list — stay open (pread per tick) while it lives, as does the agent's own children list:
 * opening a procfs file costs more than reading it. A process that exits, and the tree once none is
 * left, end their series (gs_sink_end: no latest value, so /metrics has no line for them); once the
 * root has exited its pid is never followed again (it may name another process soon). A figure not
 * read is not put: no tree CPU before a process has two readings, no tree I/O unless every process's
 * io file could be read (an other user's is not readable). The node agent (proctree_gpu.c) runs one
 * tree per GPU process, labelled and without per-process series. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/collect.h"
#include "collect/collect_util.h"

enum { BUF = 8192, MAX_PROCS = 4096, FULL_SCAN_EVERY = 10 };

/* Indexes into proctree_metrics: the per-process series first, then the tree's. */
enum { P_CPU, P_RSS, P_THREADS, P_READ, P_WRITE, P_RUNQ, P_N };
enum { T_CPU, T_RSS, T_PROCS, T_THREADS, T_RUNNING, T_SLEEPING, T_DSTATE, T_READ, T_WRITE, T_N };

struct proc {
  pid_t pid;
  uint64_t start;                            /* starttime: tells a reused pid from the process we knew */
  int fd_stat, fd_io, fd_children, fd_sched; /* fd_children: /proc/PID/task/PID/children */
  uint64_t cpu_prev, rb_prev, wb_prev, runq_prev;
  int runq_primed;
  int primed;
  unsigned tick;
  int sid[P_N];
  char comm[32];
};

struct proctree {
  struct collector_opts opts;
  char buf[BUF];
  struct proc *procs;
  size_t n, cap;
  pid_t *found;
  size_t n_found, cap_found;
  unsigned tick;
  double hz, page;
  int64_t t_prev;
  int sid[T_N];
  int seen_total, peak_procs;
  double peak_rss;
  int with_self;
  int root_seen, root_gone, live; /* live: the tree's series hold a value */
  char labels[192];               /* of the tree's series */
  struct gs_sink *sink;           /* the one it writes to, for close() to end its series */
  pid_t self_pid;                 /* the agent (with_self), 0 otherwise */
  int fd_self_children;           /* its main thread's children list, kept open; -1 when none */
  pid_t agent_pid;                /* never part of the job, even when it is a descendant (gpuscope attach $PPID) */
};

static const struct gs_metric_desc proctree_metrics[] = {
    {"proc.cpu_pct", "%", GS_GAUGE, "CPU of one process of the job (100 % = one core; labels pid=)"},
    {"proc.rss_bytes", "B", GS_GAUGE, "resident memory of one process"},
    {"proc.threads", "count", GS_GAUGE, "threads of one process"},
    {"proc.read_bytes_s", "B/s", GS_GAUGE, "storage reads of one process (/proc/PID/io read_bytes)"},
    {"proc.write_bytes_s", "B/s", GS_GAUGE, "storage writes of one process"},
    {"proc.runq_wait_pct", "%", GS_GAUGE,
     "time the process's main thread waited for a CPU while runnable (/proc/PID/schedstat run delay; 100 % = "
     "the whole interval): high when the host's CPUs are contended"},
    {"tree.cpu_pct", "%", GS_GAUGE, "CPU of the whole job (100 % = one core)"},
    {"tree.rss_bytes", "B", GS_GAUGE, "resident memory of the whole job"},
    {"tree.procs", "count", GS_GAUGE, "processes in the job"},
    {"tree.threads", "count", GS_GAUGE, "threads in the job"},
    {"tree.running", "count", GS_GAUGE, "processes in state R"},
    {"tree.sleeping", "count", GS_GAUGE, "processes in state S"},
    {"tree.dstate", "count", GS_GAUGE, "processes in uninterruptible sleep (D): usually waiting on storage"},
    {"tree.read_bytes_s", "B/s", GS_GAUGE, "storage reads of the job"},
    {"tree.write_bytes_s", "B/s", GS_GAUGE, "storage writes of the job"},
};

_Static_assert(P_N + T_N == sizeof proctree_metrics / sizeof proctree_metrics[0], "one metric per series");

/* Registers the series of metrics [first, first + n) of proctree_metrics with labels into sid. */
static void register_series(struct gs_sink *s, int first, int n, const char *labels, int *sid) {
  for (int i = 0; i < n; i++) {
    const struct gs_metric_desc *m = &proctree_metrics[first + i];
    sid[i] = gs_sink_series(s, "proctree", m->name, labels, m->unit, m->kind);
  }
}

static int add_found(struct proctree *t, pid_t pid) {
  if (pid == t->agent_pid || (t->root_gone && pid == t->opts.pid))
    return 0;
  for (size_t i = 0; i < t->n_found; i++)
    if (t->found[i] == pid)
      return 0;
  if (t->n_found >= MAX_PROCS)
    return 0;
  if (t->n_found == t->cap_found) {
    size_t c = t->cap_found ? t->cap_found * 2 : 64;
    pid_t *f = realloc(t->found, c * sizeof *f);
    if (!f)
      return 0;
    t->found = f;
    t->cap_found = c;
  }
  t->found[t->n_found++] = pid;
  return 1;
}

/* Adds the pids of a children list read from an open file (from offset 0). */
static void add_children_fd(struct proctree *t, int fd) {
  char buf[4096];
  if (reread(fd, buf, sizeof buf) <= 0)
    return;
  for (const char *s = buf; *s;) {
    while (*s == ' ' || *s == '\n')
      s++;
    if (!*s)
      break;
    pid_t pid = (pid_t)next_u64(&s);
    if (pid > 0)
      add_found(t, pid);
    while (*s && *s != ' ' && *s != '\n')
      s++;
  }
}

static int open_children(struct proctree *t, const char *rel) {
  char p[512];
  return open(collect_path(&t->opts, rel, p, sizeof p), O_RDONLY | O_CLOEXEC);
}

static void add_children_file(struct proctree *t, const char *rel) {
  int fd = open_children(t, rel);
  if (fd < 0)
    return;
  add_children_fd(t, fd);
  close(fd);
}

static struct proc *find_proc(struct proctree *t, pid_t pid);

/* Adds the children of pid: those its main thread started every tick, those of all its threads on
 * a full scan (a child forked from another thread is listed under that thread). */
static void add_children(struct proctree *t, pid_t pid, int full) {
  char rel[320];
  if (!full) {
    struct proc *p = t->self_pid && pid == t->self_pid ? NULL : find_proc(t, pid);
    int fd = t->self_pid && pid == t->self_pid ? t->fd_self_children : p ? p->fd_children : -1;
    if (fd >= 0) {
      add_children_fd(t, fd);
      return;
    }
    snprintf(rel, sizeof rel, "/proc/%d/task/%d/children", pid, pid);
    add_children_file(t, rel);
    return;
  }
  char p[512];
  snprintf(rel, sizeof rel, "/proc/%d/task", pid);
  DIR *d = opendir(collect_path(&t->opts, rel, p, sizeof p));
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9')
      continue;
    snprintf(rel, sizeof rel, "/proc/%d/task/%s/children", pid, e->d_name);
    add_children_file(t, rel);
  }
  closedir(d);
}

static struct proc *find_proc(struct proctree *t, pid_t pid) {
  for (size_t i = 0; i < t->n; i++)
    if (t->procs[i].pid == pid)
      return &t->procs[i];
  return NULL;
}

static void proc_end_series(struct gs_sink *s, struct proc *p) {
  for (int i = 0; i < P_N; i++)
    gs_sink_end(s, p->sid[i]);
}

static void proc_drop(struct proc *p) {
  if (p->fd_stat >= 0)
    close(p->fd_stat);
  if (p->fd_io >= 0)
    close(p->fd_io);
  if (p->fd_children >= 0)
    close(p->fd_children);
  if (p->fd_sched >= 0)
    close(p->fd_sched);
  p->fd_stat = p->fd_io = p->fd_children = p->fd_sched = -1;
}

struct stat_fields {
  char state, comm[32];
  uint64_t cpu, start, threads, rss_pages;
};

static int parse_stat(const char *buf, struct stat_fields *f) {
  const char *open_paren = strchr(buf, '('), *close_paren = strrchr(buf, ')');
  if (!open_paren || !close_paren || close_paren < open_paren)
    return -1;
  size_t len = (size_t)(close_paren - open_paren - 1);
  snprintf(f->comm, sizeof f->comm, "%.*s", (int)(len < 31 ? len : 31), open_paren + 1);
  const char *p = close_paren + 2;
  f->state = *p;
  p++;
  skip_fields(&p, 10); /* ppid .. cmajflt: fields 4-13 */
  uint64_t utime = next_u64(&p), stime = next_u64(&p);
  skip_fields(&p, 4); /* cutime cstime priority nice */
  f->threads = next_u64(&p);
  skip_fields(&p, 1);
  f->start = next_u64(&p);
  skip_fields(&p, 1);
  f->rss_pages = next_u64(&p);
  f->cpu = utime + stime;
  return 0;
}

static int read_io(struct proctree *t, struct proc *p, uint64_t *rb, uint64_t *wb) {
  if (reread(p->fd_io, t->buf, BUF) <= 0)
    return -1;
  const char *r = strstr(t->buf, "read_bytes: "), *w = strstr(t->buf, "\nwrite_bytes: ");
  if (!r || !w)
    return -1;
  r += 12;
  w += 14;
  *rb = next_u64(&r);
  *wb = next_u64(&w);
  return 0;
}

/* The run delay (ns the main thread waited on a run queue), the second field of schedstat. */
static int read_runq(struct proctree *t, struct proc *p, uint64_t *ns) {
  if (p->fd_sched < 0 || reread(p->fd_sched, t->buf, BUF) <= 0)
    return -1;
  const char *q = t->buf;
  skip_fields(&q, 1);
  while (*q == ' ')
    q++;
  if (*q < '0' || *q > '9')
    return -1;
  *ns = next_u64(&q);
  return 0;
}

static struct proc *proc_new(struct proctree *t, struct gs_sink *s, pid_t pid, int64_t now) {
  char rel[64], path[512];
  snprintf(rel, sizeof rel, "/proc/%d/stat", pid);
  int fd = open(collect_path(&t->opts, rel, path, sizeof path), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  struct stat_fields f;
  if (reread(fd, t->buf, BUF) <= 0 || parse_stat(t->buf, &f)) {
    close(fd);
    return NULL;
  }
  if (t->n == t->cap) {
    size_t c = t->cap ? t->cap * 2 : 32;
    struct proc *np = realloc(t->procs, c * sizeof *np);
    if (!np) {
      close(fd);
      return NULL;
    }
    t->procs = np;
    t->cap = c;
  }
  struct proc *p = &t->procs[t->n++];
  memset(p, 0, sizeof *p);
  p->pid = pid;
  p->fd_stat = fd;
  snprintf(rel, sizeof rel, "/proc/%d/io", pid);
  p->fd_io = open(collect_path(&t->opts, rel, path, sizeof path), O_RDONLY | O_CLOEXEC);
  snprintf(rel, sizeof rel, "/proc/%d/task/%d/children", pid, pid);
  p->fd_children = open_children(t, rel);
  snprintf(rel, sizeof rel, "/proc/%d/schedstat", pid); /* absent without CONFIG_SCHED_INFO: not put */
  p->fd_sched = open(collect_path(&t->opts, rel, path, sizeof path), O_RDONLY | O_CLOEXEC);
  p->start = f.start;
  snprintf(p->comm, sizeof p->comm, "%s", f.comm);
  char lab[32];
  snprintf(lab, sizeof lab, "pid=%d", pid);
  if (t->opts.tree_only)
    for (int i = 0; i < P_N; i++)
      p->sid[i] = -1;
  else
    register_series(s, 0, P_N, lab, p->sid);
  gs_sink_event(s, now, "proc_start", f.comm, (double)pid, lab, "");
  t->root_seen |= pid == t->opts.pid;
  t->seen_total++;
  return p;
}

/* Lists the job's tree into t->found: the job, then every descendant, breadth first. */
static void find_tree(struct proctree *t, int full) {
  t->n_found = 0;
  if (t->opts.pid > 0)
    add_found(t, t->opts.pid);
  if (t->with_self)
    add_children(t, getpid(), full);
  for (size_t i = 0; i < t->n_found; i++) /* breadth first: found grows as we go */
    add_children(t, t->found[i], full);
}

/* The tree's totals of one tick, and how many processes each figure covers. */
struct totals {
  double v[T_N];
  int n_cpu;   /* processes with a CPU reading (a previous tick to compare with) */
  int n_io;    /* processes whose io file was read */
  int n_rates; /* of them, with a previous reading */
};

/* Samples one live process (its stat already read into f) and adds it into the tree's totals. */
static void sample_proc(struct proctree *t, struct gs_sink *s, struct proc *p, const struct stat_fields *f, int64_t now,
                        double dt, struct totals *tot) {
  p->tick = t->tick;
  if (strcmp(f->comm, p->comm)) {
    char lab[32];
    snprintf(lab, sizeof lab, "pid=%d", p->pid);
    gs_sink_event(s, now, "proc_exec", f->comm, (double)p->pid, lab, p->comm);
    snprintf(p->comm, sizeof p->comm, "%s", f->comm);
  }
  double pcpu = NAN, prss = (double)f->rss_pages * t->page;
  if (p->primed && dt > 0)
    pcpu = 100.0 * (double)(f->cpu - p->cpu_prev) / t->hz / dt;
  p->cpu_prev = f->cpu;
  gs_sink_put(s, p->sid[P_CPU], now, pcpu);
  gs_sink_put(s, p->sid[P_RSS], now, prss);
  gs_sink_put(s, p->sid[P_THREADS], now, (double)f->threads);
  uint64_t rb, wb;
  if (read_io(t, p, &rb, &wb) == 0) {
    tot->n_io++;
    if (p->primed && dt > 0) {
      double r = (double)(rb - p->rb_prev) / dt, w = (double)(wb - p->wb_prev) / dt;
      gs_sink_put(s, p->sid[P_READ], now, r);
      gs_sink_put(s, p->sid[P_WRITE], now, w);
      tot->v[T_READ] += r, tot->v[T_WRITE] += w;
      tot->n_rates++;
    }
    p->rb_prev = rb, p->wb_prev = wb;
  }
  uint64_t rq;
  if (read_runq(t, p, &rq) == 0) {
    if (p->runq_primed && dt > 0 && rq >= p->runq_prev)
      gs_sink_put(s, p->sid[P_RUNQ], now, 100.0 * (double)(rq - p->runq_prev) / GS_NS_PER_S / dt);
    p->runq_prev = rq, p->runq_primed = 1;
  }
  p->primed = 1;
  if (isfinite(pcpu))
    tot->v[T_CPU] += pcpu, tot->n_cpu++;
  tot->v[T_RSS] += prss;
  tot->v[T_PROCS]++;
  tot->v[T_THREADS] += (double)f->threads;
  tot->v[T_RUNNING] += f->state == 'R';
  tot->v[T_SLEEPING] += f->state == 'S';
  tot->v[T_DSTATE] += f->state == 'D';
}

/* Processes not seen this tick have exited: an event each, their series ended, their files closed.
 * The root's pid is not followed again once it has exited. */
static void drop_exited(struct proctree *t, struct gs_sink *s, int64_t now) {
  for (size_t i = 0; i < t->n;) {
    struct proc *p = &t->procs[i];
    if (p->tick == t->tick) {
      i++;
      continue;
    }
    char lab[32];
    snprintf(lab, sizeof lab, "pid=%d", p->pid);
    gs_sink_event(s, now, "proc_exit", p->comm, (double)p->pid, lab, "");
    t->root_gone |= p->pid == t->opts.pid;
    proc_end_series(s, p);
    proc_drop(p);
    t->procs[i] = t->procs[--t->n];
  }
}

/* Puts the tree's totals; a tree with no live process ends its series instead. */
static void put_totals(struct proctree *t, struct gs_sink *s, const struct totals *tot, int64_t now) {
  if (tot->v[T_PROCS] <= 0) {
    if (t->live)
      for (int i = 0; i < T_N; i++)
        gs_sink_end(s, t->sid[i]);
    t->live = 0;
    return;
  }
  for (int i = 0; i < T_N; i++) {
    if (i == T_CPU && !tot->n_cpu)
      continue; /* no process has two readings yet */
    if ((i == T_READ || i == T_WRITE) && (tot->n_io < (int)tot->v[T_PROCS] || !tot->n_rates))
      continue; /* a process's io cannot be read (another user's): a partial sum is no total */
    gs_sink_put(s, t->sid[i], now, tot->v[i]);
  }
  t->live = 1;
  if (tot->v[T_RSS] > t->peak_rss)
    t->peak_rss = tot->v[T_RSS];
  if (tot->v[T_PROCS] > t->peak_procs)
    t->peak_procs = (int)tot->v[T_PROCS];
}

static int proctree_sample(void *ctx, struct gs_sink *s, int64_t now) {
  struct proctree *t = ctx;
  double dt = t->t_prev ? (double)(now - t->t_prev) / GS_NS_PER_S : 0;
  find_tree(t, t->tick % FULL_SCAN_EVERY == 0);
  t->tick++;
  struct totals tot = {0};
  for (size_t i = 0; i < t->n_found; i++) {
    pid_t pid = t->found[i];
    struct proc *p = find_proc(t, pid);
    if (!p && !(p = proc_new(t, s, pid, now)))
      continue; /* gone already */
    struct stat_fields f;
    if (reread(p->fd_stat, t->buf, BUF) <= 0 || parse_stat(t->buf, &f) || f.start != p->start)
      continue; /* exited (or pid reused): dropped below */
    sample_proc(t, s, p, &f, now, dt, &tot);
  }
  drop_exited(t, s, now);
  put_totals(t, s, &tot, now);
  t->t_prev = now;
  return GS_COLLECT_OK;
}

int proctree_ended(void *ctx) {
  const struct proctree *t = ctx;
  return t->tick > 0 && !t->n && (t->root_gone || !t->root_seen);
}

static void proctree_close(void *ctx) {
  struct proctree *t = ctx;
  if (!t)
    return;
  for (size_t i = 0; i < t->n; i++) {
    proc_end_series(t->sink, &t->procs[i]);
    proc_drop(&t->procs[i]);
  }
  for (int i = 0; i < T_N; i++)
    gs_sink_end(t->sink, t->sid[i]);
  free(t->procs);
  free(t->found);
  if (t->fd_self_children >= 0)
    close(t->fd_self_children);
  free(t);
}

static void *proctree_open(const struct collector_opts *o, struct gs_sink *s, char *err, size_t errlen) {
  if (o->pid <= 0) {
    snprintf(err, errlen, "no process to watch");
    return NULL;
  }
  struct proctree *t = calloc(1, sizeof *t);
  if (!t) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  t->opts = *o;
  t->hz = (double)sysconf(_SC_CLK_TCK);
  t->page = (double)sysconf(_SC_PAGESIZE);
  /* As a subreaper, orphans of the job become our children: watch them too (live system only). */
  t->with_self = o->subreaper;
  t->fd_self_children = -1;
  t->agent_pid = !o->root || !strcmp(o->root, "/") ? getpid() : 0; /* live system only */
  if (t->with_self) {
    char rel[64];
    t->self_pid = getpid();
    snprintf(rel, sizeof rel, "/proc/%d/task/%d/children", t->self_pid, t->self_pid);
    t->fd_self_children = open_children(t, rel);
  }
  snprintf(t->labels, sizeof t->labels, "%s", o->labels ? o->labels : "");
  t->sink = s;
  register_series(s, P_N, T_N, t->labels, t->sid);
  return t;
}

static void proctree_summary(void *ctx, FILE *out) {
  struct proctree *t = ctx;
  char b[32];
  fprintf(out, "job: %d processes seen (at most %d at once), peak RSS %s\n", t->seen_total, t->peak_procs,
          gs_fmt_bytes(t->peak_rss, b, sizeof b));
}

const struct collector collector_proctree = {
    .version = 1,
    .name = "proctree",
    .metrics = proctree_metrics,
    .n_metrics = sizeof proctree_metrics / sizeof *proctree_metrics,
    .open = proctree_open,
    .sample = proctree_sample,
    .summary = proctree_summary,
    .close = proctree_close,
};

int collect_count_descendants(pid_t pid) {
  pid_t *v = NULL;
  int n = collect_list_descendants(pid, &v);
  free(v);
  return n;
}

int collect_list_descendants(pid_t pid, pid_t **out) {
  struct proctree t = {.opts = {.root = "/"}};
  add_found(&t, pid);
  for (size_t i = 0; i < t.n_found; i++)
    add_children(&t, t.found[i], 1);
  int n = (int)t.n_found - 1;
  if (n > 0)
    memmove(t.found, t.found + 1, (size_t)n * sizeof *t.found);
  *out = t.found;
  return n < 0 ? 0 : n;
}
