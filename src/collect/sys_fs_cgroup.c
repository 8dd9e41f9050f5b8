/* collect/sys_fs_cgroup: cgroup v2 under /sys/fs/cgroup (the agent's own cgroup, from
 * /proc/self/cgroup, which the job inherits) — CPU quota and use relative to it, memory limit and
 * use — and the CPUs the job may run on (its affinity and cpuset.cpus.effective). */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/host_int.h"

static int cgroup_dir(struct host *h, char *dir, size_t n) {
  int fd = host_open_ro(h, "/proc/self/cgroup");
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

void host_open_cgroup(struct host *h, struct gs_sink *s) {
  char dir[640], p[700];
  h->fd_cg_cpu_max = h->fd_cg_cpu_stat = h->fd_cg_mem_max = h->fd_cg_mem_cur = h->fd_cg_cpuset = -1;
  for (int i = 0; i < 5; i++)
    h->sid_cg[i] = -1;
  h->sid_cpuset = host_series(s, "host.cpuset_cores", "", "cores");
  if (cgroup_dir(h, dir, sizeof dir))
    return;
  snprintf(p, sizeof p, "%s/cpuset.cpus.effective", dir);
  h->fd_cg_cpuset = host_open_ro(h, p);
  snprintf(p, sizeof p, "%s/cpu.max", dir);
  h->fd_cg_cpu_max = host_open_ro(h, p);
  snprintf(p, sizeof p, "%s/cpu.stat", dir);
  h->fd_cg_cpu_stat = host_open_ro(h, p);
  snprintf(p, sizeof p, "%s/memory.max", dir);
  h->fd_cg_mem_max = host_open_ro(h, p);
  snprintf(p, sizeof p, "%s/memory.current", dir);
  h->fd_cg_mem_cur = host_open_ro(h, p);
  h->cg_cores = read_cpu_max(h);
  if (h->cg_cores > 0 && h->fd_cg_cpu_stat >= 0) {
    h->sid_cg[0] = host_series(s, "host.cgroup.cpu_limit_cores", "", "cores");
    h->sid_cg[1] = host_series(s, "host.cgroup.cpu_used_pct_of_limit", "", "%");
  }
  uint64_t lim;
  if (read_u64_file(h->fd_cg_mem_max, h->buf, &lim) == 0) {
    h->sid_cg[2] = host_series(s, "host.cgroup.mem_limit_bytes", "", "B");
    h->sid_cg[3] = host_series(s, "host.cgroup.mem_used_bytes", "", "B");
    h->sid_cg[4] = host_series(s, "host.cgroup.mem_used_pct_of_limit", "", "%");
  }
}

void host_read_cgroup(struct host *h, struct gs_sink *s, int64_t now, double dt) {
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
