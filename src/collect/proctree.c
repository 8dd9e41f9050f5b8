/* collect/proctree: the job's own process tree — the launched command and every descendant, found
 * again each tick because children come and go (DataLoader workers). Per process: CPU %, RSS,
 * threads, state and I/O bytes from /proc/PID/{stat,io}; for the tree: totals and how many
 * processes are running, sleeping or in uninterruptible (D) sleep. Descendants are found through
 * /proc/PID/task/TID/children; gpuscope is a child subreaper, so orphaned grandchildren become its
 * own children and stay in the tree. Processes that exit between listing and reading are skipped.
 * Each process's files — stat, io and its main thread's children list — stay open (pread per tick)
 * while it lives, as does the agent's own children list: opening a procfs file costs more than
 * reading it. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/collect.h"
#include "collect/collect_util.h"

enum { BUF = 8192, MAX_PROCS = 4096, FULL_SCAN_EVERY = 10 };

struct proc {
  pid_t pid;
  uint64_t start; /* starttime: tells a reused pid from the process we knew */
  int fd_stat, fd_io, fd_children; /* fd_children: /proc/PID/task/PID/children */
  uint64_t cpu_prev, rb_prev, wb_prev;
  int primed;
  unsigned tick;
  int sid[5];
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
  int sid[9];
  int seen_total, peak_procs;
  double peak_rss;
  int with_self;
  pid_t self_pid;       /* the agent (with_self), 0 otherwise */
  int fd_self_children; /* its main thread's children list, kept open; -1 when none */
};

static const struct gs_metric_desc proctree_metrics[] = {
    {"proc.cpu_pct", "%", GS_GAUGE, "CPU of one process of the job (100 = one core; labels pid=)"},
    {"proc.rss_bytes", "B", GS_GAUGE, "resident memory of one process"},
    {"proc.threads", "count", GS_GAUGE, "threads of one process"},
    {"proc.read_bytes_s", "B/s", GS_GAUGE, "storage reads of one process (/proc/PID/io read_bytes)"},
    {"proc.write_bytes_s", "B/s", GS_GAUGE, "storage writes of one process"},
    {"tree.cpu_pct", "%", GS_GAUGE, "CPU of the whole job (100 = one core)"},
    {"tree.rss_bytes", "B", GS_GAUGE, "resident memory of the whole job"},
    {"tree.procs", "count", GS_GAUGE, "processes in the job"},
    {"tree.threads", "count", GS_GAUGE, "threads in the job"},
    {"tree.running", "count", GS_GAUGE, "processes in state R"},
    {"tree.sleeping", "count", GS_GAUGE, "processes in state S"},
    {"tree.dstate", "count", GS_GAUGE, "processes in uninterruptible sleep (D): usually waiting on storage"},
    {"tree.read_bytes_s", "B/s", GS_GAUGE, "storage reads of the job"},
    {"tree.write_bytes_s", "B/s", GS_GAUGE, "storage writes of the job"},
};

static int add_found(struct proctree *t, pid_t pid) {
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

static void proc_drop(struct proc *p) {
  if (p->fd_stat >= 0)
    close(p->fd_stat);
  if (p->fd_io >= 0)
    close(p->fd_io);
  if (p->fd_children >= 0)
    close(p->fd_children);
  p->fd_stat = p->fd_io = p->fd_children = -1;
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
  p->start = f.start;
  snprintf(p->comm, sizeof p->comm, "%s", f.comm);
  char lab[32];
  snprintf(lab, sizeof lab, "pid=%d", pid);
  p->sid[0] = gs_sink_series(s, "proctree", "proc.cpu_pct", lab, "%", GS_GAUGE);
  p->sid[1] = gs_sink_series(s, "proctree", "proc.rss_bytes", lab, "B", GS_GAUGE);
  p->sid[2] = gs_sink_series(s, "proctree", "proc.threads", lab, "count", GS_GAUGE);
  p->sid[3] = gs_sink_series(s, "proctree", "proc.read_bytes_s", lab, "B/s", GS_GAUGE);
  p->sid[4] = gs_sink_series(s, "proctree", "proc.write_bytes_s", lab, "B/s", GS_GAUGE);
  gs_sink_event(s, now, "proc_start", f.comm, (double)pid, lab, "");
  t->seen_total++;
  return p;
}

static int proctree_sample(void *ctx, struct gs_sink *s, int64_t now) {
  struct proctree *t = ctx;
  double dt = t->t_prev ? (double)(now - t->t_prev) / 1e9 : 0;
  int full = t->tick % FULL_SCAN_EVERY == 0;
  t->tick++;
  t->n_found = 0;
  if (t->opts.pid > 0)
    add_found(t, t->opts.pid);
  if (t->with_self)
    add_children(t, getpid(), full);
  for (size_t i = 0; i < t->n_found; i++) /* breadth first: found grows as we go */
    add_children(t, t->found[i], full);

  double cpu = 0, rss = 0, rbs = 0, wbs = 0;
  int procs = 0, threads = 0, running = 0, sleeping = 0, dstate = 0;
  for (size_t i = 0; i < t->n_found; i++) {
    pid_t pid = t->found[i];
    struct proc *p = find_proc(t, pid);
    if (!p && !(p = proc_new(t, s, pid, now)))
      continue; /* gone already */
    struct stat_fields f;
    if (reread(p->fd_stat, t->buf, BUF) <= 0 || parse_stat(t->buf, &f) || f.start != p->start)
      continue; /* exited (or pid reused): dropped below */
    p->tick = t->tick;
    if (strcmp(f.comm, p->comm)) {
      char lab[32];
      snprintf(lab, sizeof lab, "pid=%d", pid);
      gs_sink_event(s, now, "proc_exec", f.comm, (double)pid, lab, p->comm);
      snprintf(p->comm, sizeof p->comm, "%s", f.comm);
    }
    double pcpu = NAN, prss = (double)f.rss_pages * t->page;
    if (p->primed && dt > 0)
      pcpu = 100.0 * (double)(f.cpu - p->cpu_prev) / t->hz / dt;
    p->cpu_prev = f.cpu;
    gs_sink_put(s, p->sid[0], now, pcpu);
    gs_sink_put(s, p->sid[1], now, prss);
    gs_sink_put(s, p->sid[2], now, (double)f.threads);
    uint64_t rb, wb;
    if (read_io(t, p, &rb, &wb) == 0) {
      if (p->primed && dt > 0) {
        double r = (double)(rb - p->rb_prev) / dt, w = (double)(wb - p->wb_prev) / dt;
        gs_sink_put(s, p->sid[3], now, r);
        gs_sink_put(s, p->sid[4], now, w);
        rbs += r, wbs += w;
      }
      p->rb_prev = rb, p->wb_prev = wb;
    }
    p->primed = 1;
    if (isfinite(pcpu))
      cpu += pcpu;
    rss += prss;
    procs++;
    threads += (int)f.threads;
    running += f.state == 'R';
    sleeping += f.state == 'S';
    dstate += f.state == 'D';
  }
  /* Processes not seen this tick have exited. */
  for (size_t i = 0; i < t->n;) {
    struct proc *p = &t->procs[i];
    if (p->tick == t->tick) {
      i++;
      continue;
    }
    char lab[32];
    snprintf(lab, sizeof lab, "pid=%d", p->pid);
    gs_sink_event(s, now, "proc_exit", p->comm, (double)p->pid, lab, "");
    proc_drop(p);
    t->procs[i] = t->procs[--t->n];
  }
  if (procs) {
    double vals[9] = {cpu, rss, procs, threads, running, sleeping, dstate, rbs, wbs};
    for (int i = 0; i < 9; i++)
      if (i < 7 || dt > 0)
        gs_sink_put(s, t->sid[i], now, vals[i]);
    if (rss > t->peak_rss)
      t->peak_rss = rss;
    if (procs > t->peak_procs)
      t->peak_procs = procs;
  }
  t->t_prev = now;
  return GS_COLLECT_OK;
}

static void proctree_close(void *ctx) {
  struct proctree *t = ctx;
  if (!t)
    return;
  for (size_t i = 0; i < t->n; i++)
    proc_drop(&t->procs[i]);
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
  if (t->with_self) {
    char rel[64];
    t->self_pid = getpid();
    snprintf(rel, sizeof rel, "/proc/%d/task/%d/children", t->self_pid, t->self_pid);
    t->fd_self_children = open_children(t, rel);
  }
  static const char *names[9] = {"tree.cpu_pct", "tree.rss_bytes", "tree.procs", "tree.threads", "tree.running",
                                 "tree.sleeping", "tree.dstate", "tree.read_bytes_s", "tree.write_bytes_s"};
  static const char *units[9] = {"%", "B", "count", "count", "count", "count", "count", "B/s", "B/s"};
  for (int i = 0; i < 9; i++)
    t->sid[i] = gs_sink_series(s, "proctree", names[i], "", units[i], GS_GAUGE);
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
  struct proctree t = {.opts = {.root = "/"}};
  add_found(&t, pid);
  for (size_t i = 0; i < t.n_found; i++)
    add_children(&t, t.found[i], 1);
  int n = (int)t.n_found - 1;
  free(t.found);
  return n;
}
