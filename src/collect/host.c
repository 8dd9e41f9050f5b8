/* collect/host: the machine as the job sees it, from procfs and cgroup v2 — CPU per core and in
 * total (user/system/iowait/steal), load, memory and swap, disk and network throughput per device,
 * pressure stall information, and, when the agent runs under a CPU quota or memory limit, usage
 * relative to that limit (a container with 4 cores on a 64-core host must not look 94 % idle).
 *
 * Every file is opened once and re-read with pread each tick; one section per kernel source,
 * each named after the file it reads. Rates are computed from the previous tick's counters, so the
 * first tick only primes them. */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collect.h"
#include "collect/collect_util.h"

enum { MAX_CPUS = 1024, MAX_DEVS = 64, BUF = 1 << 16 };

struct cpu_prev {
  uint64_t user, system, iowait, steal, idle, total;
  int sid[5]; /* busy, user, system, iowait, steal */
  int registered;
};

struct dev_prev { /* a disk or a network interface */
  char name[32];
  uint64_t a, b, c, d, e; /* disk: read sectors, write sectors, reads, writes, io ms; net: rx, tx */
  int sid[5];
  int seen;
};

struct host {
  struct collector_opts opts;
  char *buf;
  int fd_stat, fd_mem, fd_load, fd_disk, fd_net, fd_psi[3];
  int fd_cg_cpu_max, fd_cg_cpu_stat, fd_cg_mem_max, fd_cg_mem_cur, fd_cg_cpuset;
  int sid_cpuset;
  int64_t t_prev;
  int primed;
  struct cpu_prev cpu[MAX_CPUS + 1]; /* [0] total, [1+i] cpu i */
  int ncpu;
  struct dev_prev disk[MAX_DEVS], net[MAX_DEVS];
  int ndisk, nnet;
  char not_disk[MAX_DEVS][32]; /* diskstats names that are not whole disks (partitions, loops) */
  int nnot_disk;
  uint64_t psi_prev[3][2];
  int sid_psi[3][2];
  int sid_load[3];
  int sid_mem[6];
  uint64_t cg_usage_prev;
  int sid_cg[5];
  double cg_cores; /* CPU quota in cores, 0 = none */
};

static const struct gs_metric_desc host_metrics[] = {
    {"host.cpu.busy_pct", "%", GS_GAUGE, "CPU time not idle (labels cpu=total|N)"},
    {"host.cpu.user_pct", "%", GS_GAUGE, "user + nice"},
    {"host.cpu.system_pct", "%", GS_GAUGE, "system + irq + softirq"},
    {"host.cpu.iowait_pct", "%", GS_GAUGE, "idle while waiting for I/O"},
    {"host.cpu.steal_pct", "%", GS_GAUGE, "taken by the hypervisor"},
    {"host.load1", "count", GS_GAUGE, "1-minute load average"},
    {"host.load5", "count", GS_GAUGE, "5-minute load average"},
    {"host.load15", "count", GS_GAUGE, "15-minute load average"},
    {"host.mem.total_bytes", "B", GS_GAUGE, "MemTotal"},
    {"host.mem.used_bytes", "B", GS_GAUGE, "MemTotal - MemAvailable"},
    {"host.mem.available_bytes", "B", GS_GAUGE, "MemAvailable"},
    {"host.mem.cached_bytes", "B", GS_GAUGE, "page cache (Cached + Buffers)"},
    {"host.swap.used_bytes", "B", GS_GAUGE, "SwapTotal - SwapFree"},
    {"host.swap.total_bytes", "B", GS_GAUGE, "SwapTotal"},
    {"host.disk.read_bytes_s", "B/s", GS_GAUGE, "per device (dev=)"},
    {"host.disk.write_bytes_s", "B/s", GS_GAUGE, "per device"},
    {"host.disk.read_ops_s", "1/s", GS_GAUGE, "per device"},
    {"host.disk.write_ops_s", "1/s", GS_GAUGE, "per device"},
    {"host.disk.util_pct", "%", GS_GAUGE, "time the device was busy"},
    {"host.net.rx_bytes_s", "B/s", GS_GAUGE, "per interface (iface=)"},
    {"host.net.tx_bytes_s", "B/s", GS_GAUGE, "per interface"},
    {"host.psi.cpu_some_pct", "%", GS_GAUGE, "share of time some task stalled on CPU"},
    {"host.psi.memory_some_pct", "%", GS_GAUGE, "... on memory"},
    {"host.psi.memory_full_pct", "%", GS_GAUGE, "share of time all tasks stalled on memory"},
    {"host.psi.io_some_pct", "%", GS_GAUGE, "... on I/O"},
    {"host.psi.io_full_pct", "%", GS_GAUGE, "... all tasks on I/O"},
    {"host.cgroup.cpu_limit_cores", "cores", GS_GAUGE, "cgroup v2 CPU quota (cpu.max) in cores"},
    {"host.cpuset_cores", "cores", GS_GAUGE,
     "CPUs the job may run on: its affinity (sched_getaffinity) and the cgroup's cpuset.cpus.effective"},
    {"host.cgroup.cpu_used_pct_of_limit", "%", GS_GAUGE, "CPU used by the cgroup relative to its quota"},
    {"host.cgroup.mem_limit_bytes", "B", GS_GAUGE, "cgroup v2 memory.max"},
    {"host.cgroup.mem_used_bytes", "B", GS_GAUGE, "cgroup v2 memory.current"},
    {"host.cgroup.mem_used_pct_of_limit", "%", GS_GAUGE, "memory.current / memory.max"},
};

static int open_ro(const struct host *h, const char *path) {
  char p[512];
  return open(collect_path(&h->opts, path, p, sizeof p), O_RDONLY | O_CLOEXEC);
}

static void close_fd(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

static int series(struct gs_sink *s, const char *name, const char *labels, const char *unit) {
  return gs_sink_series(s, "host", name, labels, unit, GS_GAUGE);
}

/* ---- /proc/stat ---- */

static void read_proc_stat(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  (void)dt;
  if (reread(h->fd_stat, h->buf, BUF) <= 0)
    return;
  for (const char *line = h->buf; line && !strncmp(line, "cpu", 3);
       line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    const char *p = line + 3;
    int idx = 0;
    if (isdigit((unsigned char)*p)) {
      idx = 1 + (int)next_u64(&p);
      if (idx > MAX_CPUS)
        continue;
    }
    uint64_t user = next_u64(&p), nice = next_u64(&p), sys = next_u64(&p), idle = next_u64(&p), iow = next_u64(&p),
             irq = next_u64(&p), sirq = next_u64(&p), steal = next_u64(&p);
    struct cpu_prev *c = &h->cpu[idx], cur = *c;
    cur.user = user + nice;
    cur.system = sys + irq + sirq;
    cur.iowait = iow;
    cur.steal = steal;
    cur.idle = idle;
    cur.total = cur.user + cur.system + iow + steal + idle;
    if (!c->registered) {
      cur.registered = 1;
      char lab[32];
      if (idx)
        snprintf(lab, sizeof lab, "cpu=%d", idx - 1);
      else
        snprintf(lab, sizeof lab, "cpu=total");
      cur.sid[0] = series(s, "host.cpu.busy_pct", lab, "%");
      cur.sid[1] = series(s, "host.cpu.user_pct", lab, "%");
      cur.sid[2] = series(s, "host.cpu.system_pct", lab, "%");
      cur.sid[3] = series(s, "host.cpu.iowait_pct", lab, "%");
      cur.sid[4] = series(s, "host.cpu.steal_pct", lab, "%");
      if (idx > h->ncpu)
        h->ncpu = idx;
    } else if (h->primed && cur.total > c->total) {
      double d = (double)(cur.total - c->total);
      gs_sink_put(s, cur.sid[0], now,
                  100.0 * (d - (double)(cur.idle - c->idle) - (double)(cur.iowait - c->iowait)) / d);
      gs_sink_put(s, cur.sid[1], now, 100.0 * (double)(cur.user - c->user) / d);
      gs_sink_put(s, cur.sid[2], now, 100.0 * (double)(cur.system - c->system) / d);
      gs_sink_put(s, cur.sid[3], now, 100.0 * (double)(cur.iowait - c->iowait) / d);
      gs_sink_put(s, cur.sid[4], now, 100.0 * (double)(cur.steal - c->steal) / d);
    }
    *c = cur;
  }
}

/* ---- /proc/loadavg and /proc/meminfo ---- */

static void read_loadavg(struct host *h, struct gs_sink *s, int64_t now) {
  if (reread(h->fd_load, h->buf, BUF) <= 0)
    return;
  char *p = h->buf;
  for (int i = 0; i < 3; i++)
    gs_sink_put(s, h->sid_load[i], now, strtod(p, &p));
}

static uint64_t meminfo_kib(const char *buf, const char *key, int *found) {
  const char *p = strstr(buf, key);
  if (!p || (p != buf && p[-1] != '\n'))
    return 0;
  p += strlen(key);
  *found += 1;
  return next_u64(&p);
}

static void read_meminfo(struct host *h, struct gs_sink *s, int64_t now) {
  if (reread(h->fd_mem, h->buf, BUF) <= 0)
    return;
  int f = 0;
  uint64_t total = meminfo_kib(h->buf, "MemTotal:", &f), avail = meminfo_kib(h->buf, "MemAvailable:", &f),
           cached = meminfo_kib(h->buf, "Cached:", &f), buffers = meminfo_kib(h->buf, "Buffers:", &f),
           swt = meminfo_kib(h->buf, "SwapTotal:", &f), swf = meminfo_kib(h->buf, "SwapFree:", &f);
  if (f < 6)
    return;
  gs_sink_put(s, h->sid_mem[0], now, (double)total * 1024);
  gs_sink_put(s, h->sid_mem[1], now, (double)(total - avail) * 1024);
  gs_sink_put(s, h->sid_mem[2], now, (double)avail * 1024);
  gs_sink_put(s, h->sid_mem[3], now, (double)(cached + buffers) * 1024);
  gs_sink_put(s, h->sid_mem[4], now, (double)(swt - swf) * 1024);
  gs_sink_put(s, h->sid_mem[5], now, (double)swt * 1024);
}

/* ---- /proc/diskstats and /proc/net/dev ---- */

static struct dev_prev *dev_slot(struct dev_prev *devs, int *n, const char *name, size_t len, int *fresh) {
  for (int i = 0; i < *n; i++)
    if (strlen(devs[i].name) == len && !memcmp(devs[i].name, name, len))
      return &devs[i];
  if (*n >= MAX_DEVS || len >= sizeof devs->name)
    return NULL;
  struct dev_prev *d = &devs[(*n)++];
  memset(d, 0, sizeof *d);
  memcpy(d->name, name, len);
  *fresh = 1;
  return d;
}

static int same_name(const char *known, const char *name, size_t len) {
  return strlen(known) == len && !memcmp(known, name, len);
}

/* Whether a diskstats name is a whole disk (it has /sys/block/NAME). A name found not to be is
 * remembered, so partitions cost no system call on later ticks. */
static int whole_disk(struct host *h, const char *name, size_t len) {
  for (int i = 0; i < h->nnot_disk; i++)
    if (same_name(h->not_disk[i], name, len))
      return 0;
  char p[256], q[512];
  snprintf(p, sizeof p, "/sys/block/%.*s", (int)len, name);
  if (strncmp(name, "loop", 4) && strncmp(name, "ram", 3) && access(collect_path(&h->opts, p, q, sizeof q), F_OK) == 0)
    return 1;
  if (h->nnot_disk < MAX_DEVS && len < sizeof h->not_disk[0]) {
    memcpy(h->not_disk[h->nnot_disk], name, len);
    h->not_disk[h->nnot_disk++][len] = 0;
  }
  return 0;
}

static void read_diskstats(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  if (reread(h->fd_disk, h->buf, BUF) <= 0)
    return;
  for (char *line = h->buf; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl)
      *nl = 0;
    const char *p = line;
    skip_fields(&p, 2);
    while (*p == ' ')
      p++;
    const char *name = p;
    while (*p && *p != ' ')
      p++;
    size_t len = (size_t)(p - name);
    int fresh = 0;
    struct dev_prev *d = NULL;
    for (int i = 0; i < h->ndisk && !d; i++)
      if (same_name(h->disk[i].name, name, len))
        d = &h->disk[i];
    if (!d && len && whole_disk(h, name, len))
      d = dev_slot(h->disk, &h->ndisk, name, len, &fresh);
    if (d) {
      uint64_t reads = next_u64(&p);
      skip_fields(&p, 1);
      uint64_t rsec = next_u64(&p), _rms = next_u64(&p), writes = next_u64(&p);
      (void)_rms;
      skip_fields(&p, 1);
      uint64_t wsec = next_u64(&p), _wms = next_u64(&p), _inflight = next_u64(&p), io_ms = next_u64(&p);
      (void)_wms, (void)_inflight;
      if (fresh) {
        char lab[48];
        snprintf(lab, sizeof lab, "dev=%s", d->name);
        d->sid[0] = series(s, "host.disk.read_bytes_s", lab, "B/s");
        d->sid[1] = series(s, "host.disk.write_bytes_s", lab, "B/s");
        d->sid[2] = series(s, "host.disk.read_ops_s", lab, "1/s");
        d->sid[3] = series(s, "host.disk.write_ops_s", lab, "1/s");
        d->sid[4] = series(s, "host.disk.util_pct", lab, "%");
      } else if (dt > 0 && d->seen) {
        gs_sink_put(s, d->sid[0], now, (double)(rsec - d->a) * 512 / dt);
        gs_sink_put(s, d->sid[1], now, (double)(wsec - d->b) * 512 / dt);
        gs_sink_put(s, d->sid[2], now, (double)(reads - d->c) / dt);
        gs_sink_put(s, d->sid[3], now, (double)(writes - d->d) / dt);
        gs_sink_put(s, d->sid[4], now, fmin(100.0, (double)(io_ms - d->e) / 10.0 / dt));
      }
      d->a = rsec, d->b = wsec, d->c = reads, d->d = writes, d->e = io_ms, d->seen = 1;
    }
    line = nl ? nl + 1 : NULL;
  }
}

static void read_net_dev(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  if (reread(h->fd_net, h->buf, BUF) <= 0)
    return;
  for (char *line = h->buf; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl)
      *nl = 0;
    char *colon = strchr(line, ':');
    if (colon) {
      char *name = line;
      while (*name == ' ')
        name++;
      size_t len = (size_t)(colon - name);
      if (!(len == 2 && !memcmp(name, "lo", 2))) {
        int fresh = 0;
        struct dev_prev *d = dev_slot(h->net, &h->nnet, name, len, &fresh);
        const char *p = colon + 1;
        uint64_t rx = next_u64(&p);
        skip_fields(&p, 7);
        uint64_t tx = next_u64(&p);
        if (d && fresh) {
          char lab[48];
          snprintf(lab, sizeof lab, "iface=%s", d->name);
          d->sid[0] = series(s, "host.net.rx_bytes_s", lab, "B/s");
          d->sid[1] = series(s, "host.net.tx_bytes_s", lab, "B/s");
        } else if (d && dt > 0 && d->seen) {
          gs_sink_put(s, d->sid[0], now, (double)(rx - d->a) / dt);
          gs_sink_put(s, d->sid[1], now, (double)(tx - d->b) / dt);
        }
        if (d)
          d->a = rx, d->b = tx, d->seen = 1;
      }
    }
    line = nl ? nl + 1 : NULL;
  }
}

/* ---- /proc/pressure/{cpu,memory,io} ---- */

static void read_pressure(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  for (int r = 0; r < 3; r++) {
    if (reread(h->fd_psi[r], h->buf, BUF) <= 0)
      continue;
    for (int k = 0; k < 2; k++) { /* some, full */
      const char *p = strstr(h->buf, k ? "full" : "some");
      p = p ? strstr(p, "total=") : NULL;
      if (!p)
        continue;
      p += 6;
      uint64_t total = next_u64(&p); /* microseconds stalled */
      if (h->primed && dt > 0 && h->sid_psi[r][k] >= 0)
        gs_sink_put(s, h->sid_psi[r][k], now, fmin(100.0, (double)(total - h->psi_prev[r][k]) / 1e4 / dt));
      h->psi_prev[r][k] = total;
    }
  }
}

/* ---- cgroup v2 (the agent's own cgroup, which the job inherits) ---- */

static int cgroup_dir(struct host *h, char *dir, size_t n) {
  int fd = open_ro(h, "/proc/self/cgroup");
  if (fd < 0)
    return -1;
  char buf[4096];
  ssize_t r = reread(fd, buf, sizeof buf);
  close(fd);
  if (r <= 0)
    return -1;
  char *p = strstr(buf, "0::");
  if (!p || (p != buf && p[-1] != '\n'))
    return -1;
  p += 3;
  p[strcspn(p, "\n")] = 0;
  /* Under cgroup v2 the unified hierarchy is at /sys/fs/cgroup; under a hybrid layout at .../unified. */
  if (strlen(p) > 500) /* no cgroup path is that long; bounded, the names below always fit */
    return -1;
  char probe[600], q[700];
  snprintf(probe, sizeof probe, "/sys/fs/cgroup%.500s/cgroup.controllers", strcmp(p, "/") ? p : "");
  if (access(collect_path(&h->opts, probe, q, sizeof q), F_OK) == 0) {
    snprintf(dir, n, "/sys/fs/cgroup%.500s", strcmp(p, "/") ? p : "");
    return 0;
  }
  return -1;
}

static double read_cpu_max(struct host *h) {
  if (reread(h->fd_cg_cpu_max, h->buf, BUF) <= 0 || !strncmp(h->buf, "max", 3))
    return 0;
  const char *p = h->buf;
  uint64_t quota = next_u64(&p), period = next_u64(&p);
  return period ? (double)quota / (double)period : 0;
}

static int read_u64_file(int fd, char *buf, uint64_t *v) {
  if (reread(fd, buf, 64) <= 0 || !isdigit((unsigned char)buf[0]))
    return -1;
  const char *p = buf;
  *v = next_u64(&p);
  return 0;
}

/* CPUs in a cpuset list ("0-3,8,10-11"); 0 when it cannot be parsed. */
static int cpulist_count(const char *p) {
  int n = 0;
  while (*p && *p != '\n') {
    if (!isdigit((unsigned char)*p))
      return 0;
    uint64_t a = next_u64(&p), b = a;
    if (*p == '-') {
      p++;
      if (!isdigit((unsigned char)*p))
        return 0;
      b = next_u64(&p);
    }
    if (b < a || b - a >= MAX_CPUS * 64)
      return 0;
    n += (int)(b - a + 1);
    if (*p == ',')
      p++;
  }
  return n;
}

/* ---- the CPUs the job may use: sched_getaffinity and cpuset.cpus.effective ---- */

/* The fewer of the job's affinity (the real process only: a fixture root has none) and the cgroup's
 * effective cpuset; 0 when neither is known. */
static int read_cpuset(struct host *h) {
  int n = 0;
  if (h->fd_cg_cpuset >= 0 && reread(h->fd_cg_cpuset, h->buf, BUF) > 0)
    n = cpulist_count(h->buf);
  if (!h->opts.root || !strcmp(h->opts.root, "/")) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(h->opts.pid > 0 ? h->opts.pid : 0, sizeof set, &set) == 0) {
      int a = CPU_COUNT(&set);
      if (a > 0 && (!n || a < n))
        n = a;
    }
  }
  return n;
}

static void open_cgroup(struct host *h, struct gs_sink *s) {
  char dir[640], p[700];
  h->fd_cg_cpu_max = h->fd_cg_cpu_stat = h->fd_cg_mem_max = h->fd_cg_mem_cur = h->fd_cg_cpuset = -1;
  for (int i = 0; i < 5; i++)
    h->sid_cg[i] = -1;
  h->sid_cpuset = series(s, "host.cpuset_cores", "", "cores");
  if (cgroup_dir(h, dir, sizeof dir))
    return;
  snprintf(p, sizeof p, "%s/cpuset.cpus.effective", dir);
  h->fd_cg_cpuset = open_ro(h, p);
  snprintf(p, sizeof p, "%s/cpu.max", dir);
  h->fd_cg_cpu_max = open_ro(h, p);
  snprintf(p, sizeof p, "%s/cpu.stat", dir);
  h->fd_cg_cpu_stat = open_ro(h, p);
  snprintf(p, sizeof p, "%s/memory.max", dir);
  h->fd_cg_mem_max = open_ro(h, p);
  snprintf(p, sizeof p, "%s/memory.current", dir);
  h->fd_cg_mem_cur = open_ro(h, p);
  h->cg_cores = read_cpu_max(h);
  if (h->cg_cores > 0 && h->fd_cg_cpu_stat >= 0) {
    h->sid_cg[0] = series(s, "host.cgroup.cpu_limit_cores", "", "cores");
    h->sid_cg[1] = series(s, "host.cgroup.cpu_used_pct_of_limit", "", "%");
  }
  uint64_t lim;
  if (read_u64_file(h->fd_cg_mem_max, h->buf, &lim) == 0) {
    h->sid_cg[2] = series(s, "host.cgroup.mem_limit_bytes", "", "B");
    h->sid_cg[3] = series(s, "host.cgroup.mem_used_bytes", "", "B");
    h->sid_cg[4] = series(s, "host.cgroup.mem_used_pct_of_limit", "", "%");
  }
}

static void read_cgroup(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  int cpus = read_cpuset(h);
  if (cpus > 0)
    gs_sink_put(s, h->sid_cpuset, now, cpus);
  if (h->sid_cg[1] >= 0 && reread(h->fd_cg_cpu_stat, h->buf, BUF) > 0) {
    const char *p = strstr(h->buf, "usage_usec ");
    if (p) {
      p += 11;
      uint64_t usage = next_u64(&p);
      double cores = read_cpu_max(h);
      if (cores > 0)
        h->cg_cores = cores;
      gs_sink_put(s, h->sid_cg[0], now, h->cg_cores);
      if (h->primed && dt > 0)
        gs_sink_put(s, h->sid_cg[1], now, 100.0 * (double)(usage - h->cg_usage_prev) / 1e6 / dt / h->cg_cores);
      h->cg_usage_prev = usage;
    }
  }
  uint64_t lim, cur;
  if (h->sid_cg[2] >= 0 && read_u64_file(h->fd_cg_mem_max, h->buf, &lim) == 0 &&
      read_u64_file(h->fd_cg_mem_cur, h->buf, &cur) == 0) {
    gs_sink_put(s, h->sid_cg[2], now, (double)lim);
    gs_sink_put(s, h->sid_cg[3], now, (double)cur);
    gs_sink_put(s, h->sid_cg[4], now, 100.0 * (double)cur / (double)lim);
  }
}

/* ---- the collector ---- */

static void host_close(void *ctx) {
  struct host *h = ctx;
  if (!h)
    return;
  int *fds[] = {&h->fd_stat,       &h->fd_mem,        &h->fd_load,     &h->fd_disk,       &h->fd_net,
                &h->fd_psi[0],     &h->fd_psi[1],     &h->fd_psi[2],   &h->fd_cg_cpu_max, &h->fd_cg_cpu_stat,
                &h->fd_cg_mem_max, &h->fd_cg_mem_cur, &h->fd_cg_cpuset};
  for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
    close_fd(fds[i]);
  free(h->buf);
  free(h);
}

static void *host_open(const struct collector_opts *o, struct gs_sink *s, char *err, size_t errlen) {
  struct host *h = calloc(1, sizeof *h);
  if (!h || !(h->buf = malloc(BUF))) {
    snprintf(err, errlen, "out of memory");
    free(h);
    return NULL;
  }
  h->opts = *o;
  h->fd_stat = open_ro(h, "/proc/stat");
  h->fd_mem = open_ro(h, "/proc/meminfo");
  h->fd_load = open_ro(h, "/proc/loadavg");
  h->fd_disk = open_ro(h, "/proc/diskstats");
  h->fd_net = open_ro(h, "/proc/net/dev");
  static const char *psi[] = {"/proc/pressure/cpu", "/proc/pressure/memory", "/proc/pressure/io"};
  static const char *psi_names[3][2] = {{"host.psi.cpu_some_pct", NULL},
                                        {"host.psi.memory_some_pct", "host.psi.memory_full_pct"},
                                        {"host.psi.io_some_pct", "host.psi.io_full_pct"}};
  for (int r = 0; r < 3; r++) {
    h->fd_psi[r] = open_ro(h, psi[r]);
    /* a PSI file that exists but cannot be read (PSI disabled) is absent, not zero */
    if (h->fd_psi[r] >= 0 && reread(h->fd_psi[r], h->buf, BUF) <= 0)
      close_fd(&h->fd_psi[r]);
    for (int k = 0; k < 2; k++)
      h->sid_psi[r][k] = h->fd_psi[r] >= 0 && psi_names[r][k] ? series(s, psi_names[r][k], "", "%") : -1;
  }
  if (h->fd_stat < 0) {
    snprintf(err, errlen, "cannot open %s/proc/stat", o->root && strcmp(o->root, "/") ? o->root : "");
    host_close(h);
    return NULL;
  }
  h->sid_load[0] = series(s, "host.load1", "", "count");
  h->sid_load[1] = series(s, "host.load5", "", "count");
  h->sid_load[2] = series(s, "host.load15", "", "count");
  static const char *mem[] = {"host.mem.total_bytes",  "host.mem.used_bytes",  "host.mem.available_bytes",
                              "host.mem.cached_bytes", "host.swap.used_bytes", "host.swap.total_bytes"};
  for (int i = 0; i < 6; i++)
    h->sid_mem[i] = series(s, mem[i], "", "B");
  open_cgroup(h, s);
  return h;
}

static int host_sample(void *ctx, struct gs_sink *s, int64_t now) {
  struct host *h = ctx;
  double dt = h->primed ? (double)(now - h->t_prev) / GS_NS_PER_S : 0;
  read_proc_stat(h, s, now, dt);
  read_loadavg(h, s, now);
  read_meminfo(h, s, now);
  read_diskstats(h, s, now, dt);
  read_net_dev(h, s, now, dt);
  read_pressure(h, s, now, dt);
  read_cgroup(h, s, now, dt);
  h->t_prev = now;
  h->primed = 1;
  return GS_COLLECT_OK;
}

static void host_summary(void *ctx, FILE *out) {
  struct host *h = ctx;
  fprintf(out, "host: %d CPUs", h->ncpu);
  if (h->cg_cores > 0)
    fprintf(out, " (cgroup quota %.1f cores)", h->cg_cores);
  fprintf(out, ", %d disks, %d network interfaces%s\n", h->ndisk, h->nnet, h->fd_psi[0] >= 0 ? ", PSI on" : "");
}

const struct collector collector_host = {
    .version = 1,
    .name = "host",
    .metrics = host_metrics,
    .n_metrics = sizeof host_metrics / sizeof *host_metrics,
    .open = host_open,
    .sample = host_sample,
    .summary = host_summary,
    .close = host_close,
};
