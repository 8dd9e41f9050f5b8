/* collect/sys_fs_cgroup: the job's cgroup limits under /sys/fs/cgroup, on every layout — the
 * agent's own cgroup, which the job inherits, each controller's folder found by
 * proc_pid_cgroup.c (v2, v1, or hybrid: v1 controllers beside an empty v2) — CPU quota, use
 * relative to it and throttling, memory limit, use, peak, limit hits and OOM kills, and the CPUs
 * the job may run on (its affinity and the cgroup's effective cpuset). v1 and v2 give the same
 * series from their own files:
 *
 *   series                 v2                        v1
 *   quota                  cpu.max                   cpu.cfs_quota_us / cpu.cfs_period_us
 *   CPU used               cpu.stat usage_usec       cpuacct.usage (ns)
 *   throttled periods      cpu.stat nr_throttled / nr_periods (both)
 *   throttled time         cpu.stat throttled_usec       cpu.stat throttled_time (ns)
 *   anonymous memory       memory.stat anon              memory.stat total_rss
 *   memory limit, used     memory.max, .current      memory.limit_in_bytes, .usage_in_bytes
 *   peak                   memory.peak               memory.max_usage_in_bytes
 *   limit hits, OOM kills  memory.events max, oom_kill   memory.failcnt, memory.oom_control oom_kill
 *   cpuset                 cpuset.cpus.effective     cpuset.effective_cpus */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/host_int.h"

/* The quota in cores; 0 when none ("max", v1's -1) or unreadable. */
static double read_quota(struct host *h) {
  if (reread(h->fd_cg_cpu_max, h->buf, BUF) <= 0 || !isdigit((unsigned char)h->buf[0]))
    return 0;
  const char *p = h->buf;
  uint64_t quota = next_u64(&p), period = 0;
  if (!h->cg_v1_cpu) {
    period = next_u64(&p);
  } else if (reread(h->fd_cg_cpu_period, h->buf, BUF) > 0) {
    p = h->buf;
    period = next_u64(&p);
  }
  return period ? (double)quota / (double)period : 0;
}

static int read_u64_file(int fd, char *buf, uint64_t *v) {
  if (reread(fd, buf, 64) <= 0 || !isdigit((unsigned char)buf[0]))
    return -1;
  const char *p = buf;
  *v = next_u64(&p);
  return 0;
}

/* The value of a "key N" line of text; -1 when absent. */
static int key_in(const char *text, const char *key, uint64_t *v) {
  size_t kl = strlen(key);
  for (const char *p = text; p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, key, kl) && p[kl] == ' ') {
      p += kl + 1;
      *v = next_u64(&p);
      return 0;
    }
  return -1;
}

/* The value of "key N" in the file's current text (h->buf, re-read); -1 when absent. */
static int read_key(struct host *h, int fd, const char *key, uint64_t *v) {
  if (reread(fd, h->buf, BUF) <= 0)
    return -1;
  return key_in(h->buf, key, v);
}

/* The cgroup's CPU time so far, in ns: v2 cpu.stat usage_usec, v1 cpuacct.usage. -1 when unknown. */
static int read_usage_ns(struct host *h, uint64_t *ns) {
  if (h->cg_v1_cpu)
    return read_u64_file(h->fd_cg_cpu_usage, h->buf, ns);
  uint64_t us;
  if (read_key(h, h->fd_cg_cpu_stat, "usage_usec", &us))
    return -1;
  *ns = us * 1000;
  return 0;
}

/* The memory limit in bytes; -1 when none ("max", v1's largest counter) or unreadable. */
static int read_mem_limit(struct host *h, uint64_t *v) {
  return read_u64_file(h->fd_cg_mem_max, h->buf, v) || (double)*v >= COLLECT_CG_V1_UNLIMITED ? -1 : 0;
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

/* ---- the CPUs the job may use: sched_getaffinity and the cgroup's effective cpuset ---- */

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

/* Opens dir/name under the root (-1 when dir is unknown or the file absent). */
static int open_in(struct host *h, const char *dir, const char *name) {
  char p[COLLECT_CG_DIR_MAX + 64];
  if (!dir[0])
    return -1;
  snprintf(p, sizeof p, "%s/%s", dir, name);
  return host_open_ro(h, p);
}

/* The files of each layout, v2 first. */
static void open_files(struct host *h, const struct collect_cgroup *cg) {
  const char *cpu = cg->dir[COLLECT_CG_CPU], *mem = cg->dir[COLLECT_CG_MEMORY];
  h->cg_v1_cpu = cg->v1[COLLECT_CG_CPU], h->cg_v1_mem = cg->v1[COLLECT_CG_MEMORY];
  h->fd_cg_cpuset = open_in(h, cg->dir[COLLECT_CG_CPUSET],
                            cg->v1[COLLECT_CG_CPUSET] ? "cpuset.effective_cpus" : "cpuset.cpus.effective");
  h->fd_cg_cpu_stat = open_in(h, cpu, "cpu.stat");
  if (h->cg_v1_cpu) {
    h->fd_cg_cpu_max = open_in(h, cpu, "cpu.cfs_quota_us");
    h->fd_cg_cpu_period = open_in(h, cpu, "cpu.cfs_period_us");
    /* the quota's own cgroup's use: cpuacct apart from cpu (not co-mounted) and in another cgroup
     * (a job moved into a cpu cgroup only) counts other processes' time, so none is read */
    if (!strcmp(cg->path[COLLECT_CG_CPU], cg->path[COLLECT_CG_CPUACCT]))
      h->fd_cg_cpu_usage = open_in(h, cg->dir[COLLECT_CG_CPUACCT], "cpuacct.usage");
  } else {
    h->fd_cg_cpu_max = open_in(h, cpu, "cpu.max");
  }
  int v1 = h->cg_v1_mem;
  h->fd_cg_mem_max = open_in(h, mem, v1 ? "memory.limit_in_bytes" : "memory.max");
  h->fd_cg_mem_cur = open_in(h, mem, v1 ? "memory.usage_in_bytes" : "memory.current");
  h->fd_cg_mem_peak = open_in(h, mem, v1 ? "memory.max_usage_in_bytes" : "memory.peak");
  h->fd_cg_mem_events = open_in(h, mem, v1 ? "memory.oom_control" : "memory.events");
  h->fd_cg_mem_failcnt = v1 ? open_in(h, mem, "memory.failcnt") : -1;
  h->fd_cg_mem_stat = open_in(h, mem, "memory.stat");
}

/* The series a limit makes meaningful; those of an unlimited cgroup are not registered. */
static void register_series(struct host *h, struct gs_sink *s) {
  uint64_t v;
  h->cg_cores = read_quota(h);
  if (h->cg_cores > 0)
    h->sid_cg[CG_CPU_LIMIT] = host_series(s, "host.cgroup.cpu_limit_cores", "", "cores");
  if (h->cg_cores > 0 && !read_usage_ns(h, &v))
    h->sid_cg[CG_CPU_PCT] = host_series(s, "host.cgroup.cpu_used_pct_of_limit", "", "%");
  if (h->cg_cores > 0 && !read_key(h, h->fd_cg_cpu_stat, "nr_periods", &v))
    h->sid_cg[CG_THROTTLED] = host_series(s, "host.cgroup.cpu_throttled_pct", "", "%");
  if (h->cg_cores > 0 && !read_key(h, h->fd_cg_cpu_stat, h->cg_v1_cpu ? "throttled_time" : "throttled_usec", &v))
    h->sid_cg[CG_THR_TIME] = host_series(s, "host.cgroup.cpu_throttled_time_pct", "", "%");
  if (read_mem_limit(h, &v))
    return;
  h->sid_cg[CG_MEM_LIMIT] = host_series(s, "host.cgroup.mem_limit_bytes", "", "B");
  h->sid_cg[CG_MEM_USED] = host_series(s, "host.cgroup.mem_used_bytes", "", "B");
  h->sid_cg[CG_MEM_PCT] = host_series(s, "host.cgroup.mem_used_pct_of_limit", "", "%");
  if (!read_u64_file(h->fd_cg_mem_peak, h->buf, &v))
    h->sid_cg[CG_MEM_PEAK] = host_series(s, "host.cgroup.mem_peak_bytes", "", "B");
  if (h->cg_v1_mem ? !read_u64_file(h->fd_cg_mem_failcnt, h->buf, &v) : !read_key(h, h->fd_cg_mem_events, "max", &v))
    h->sid_cg[CG_MEM_HITS] = host_series(s, "host.cgroup.mem_limit_hits", "", "count");
  if (!read_key(h, h->fd_cg_mem_events, "oom_kill", &v))
    h->sid_cg[CG_OOM_KILLS] = host_series(s, "host.cgroup.oom_kills", "", "count");
  if (!read_key(h, h->fd_cg_mem_stat, h->cg_v1_mem ? "total_rss" : "anon", &v))
    h->sid_cg[CG_MEM_ANON] = host_series(s, "host.cgroup.mem_anon_bytes", "", "B");
}

void host_open_cgroup(struct host *h, struct gs_sink *s) {
  h->fd_cg_cpu_max = h->fd_cg_cpu_period = h->fd_cg_cpu_stat = h->fd_cg_cpu_usage = -1;
  h->fd_cg_mem_max = h->fd_cg_mem_cur = h->fd_cg_mem_peak = h->fd_cg_mem_events = h->fd_cg_mem_failcnt = -1;
  h->fd_cg_mem_stat = -1;
  h->fd_cg_cpuset = -1;
  for (int i = 0; i < CG_NSERIES; i++)
    h->sid_cg[i] = -1;
  h->sid_cpuset = host_series(s, "host.cpuset_cores", "", "cores");
  struct collect_cgroup cg;
  if (collect_cgroup_find(h->opts.root, 0, &cg))
    return;
  h->cg_layout = cg.layout;
  open_files(h, &cg);
  register_series(h, s);
}

/* CPU: use over the quota, and the share of enforcement periods that were throttled. */
static void read_cpu(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  uint64_t usage, periods, throttled;
  if (h->sid_cg[CG_CPU_LIMIT] >= 0) {
    double cores = read_quota(h);
    if (cores > 0)
      h->cg_cores = cores;
    gs_sink_put(s, h->sid_cg[CG_CPU_LIMIT], now, h->cg_cores);
  }
  if (h->sid_cg[CG_CPU_PCT] >= 0 && !read_usage_ns(h, &usage)) {
    if (h->primed && dt > 0 && usage >= h->cg_usage_prev)
      gs_sink_put(s, h->sid_cg[CG_CPU_PCT], now, 100.0 * (double)(usage - h->cg_usage_prev) / 1e9 / dt / h->cg_cores);
    h->cg_usage_prev = usage;
  }
  if (h->sid_cg[CG_THROTTLED] < 0 || reread(h->fd_cg_cpu_stat, h->buf, BUF) <= 0)
    return;
  uint64_t thr;
  if (h->sid_cg[CG_THR_TIME] >= 0 && !key_in(h->buf, h->cg_v1_cpu ? "throttled_time" : "throttled_usec", &thr)) {
    thr *= h->cg_v1_cpu ? 1 : 1000; /* ns */
    if (h->primed && dt > 0 && thr >= h->cg_thr_ns_prev)
      gs_sink_put(s, h->sid_cg[CG_THR_TIME], now, 100.0 * (double)(thr - h->cg_thr_ns_prev) / 1e9 / dt);
    h->cg_thr_ns_prev = thr;
  }
  if (!key_in(h->buf, "nr_periods", &periods) && !key_in(h->buf, "nr_throttled", &throttled)) {
    if (h->primed && periods > h->cg_periods_prev && throttled >= h->cg_throttled_prev)
      gs_sink_put(s, h->sid_cg[CG_THROTTLED], now,
                  100.0 * (double)(throttled - h->cg_throttled_prev) / (double)(periods - h->cg_periods_prev));
    else if (h->primed && periods == h->cg_periods_prev)
      gs_sink_put(s, h->sid_cg[CG_THROTTLED], now, 0); /* no period ran: nothing wanted CPU */
    h->cg_periods_prev = periods, h->cg_throttled_prev = throttled;
  }
}

void host_read_cgroup(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  int cpus = read_cpuset(h);
  if (cpus > 0)
    gs_sink_put(s, h->sid_cpuset, now, cpus);
  read_cpu(h, s, now, dt);
  uint64_t lim, cur, v;
  if (h->sid_cg[CG_MEM_LIMIT] >= 0 && !read_mem_limit(h, &lim) && read_u64_file(h->fd_cg_mem_cur, h->buf, &cur) == 0) {
    gs_sink_put(s, h->sid_cg[CG_MEM_LIMIT], now, (double)lim);
    gs_sink_put(s, h->sid_cg[CG_MEM_USED], now, (double)cur);
    if (lim > 0)
      gs_sink_put(s, h->sid_cg[CG_MEM_PCT], now, 100.0 * (double)cur / (double)lim);
  }
  if (h->sid_cg[CG_MEM_PEAK] >= 0 && !read_u64_file(h->fd_cg_mem_peak, h->buf, &v))
    gs_sink_put(s, h->sid_cg[CG_MEM_PEAK], now, (double)v);
  if (h->sid_cg[CG_MEM_HITS] >= 0 &&
      (h->cg_v1_mem ? !read_u64_file(h->fd_cg_mem_failcnt, h->buf, &v) : !read_key(h, h->fd_cg_mem_events, "max", &v)))
    gs_sink_put(s, h->sid_cg[CG_MEM_HITS], now, (double)v);
  if (h->sid_cg[CG_OOM_KILLS] >= 0 && !read_key(h, h->fd_cg_mem_events, "oom_kill", &v))
    gs_sink_put(s, h->sid_cg[CG_OOM_KILLS], now, (double)v);
  if (h->sid_cg[CG_MEM_ANON] >= 0 && !read_key(h, h->fd_cg_mem_stat, h->cg_v1_mem ? "total_rss" : "anon", &v))
    gs_sink_put(s, h->sid_cg[CG_MEM_ANON], now, (double)v);
}
