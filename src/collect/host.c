/* collect/host: the machine as the job sees it, from procfs and the cgroup (v2, v1 or hybrid) — CPU per core and in
 * total (user/system/iowait/steal), load, memory and swap, disk and network throughput per device,
 * pressure stall information, and, when the agent runs under a CPU quota or memory limit, usage
 * relative to that limit (a container with 4 cores on a 64-core host must not look 94 % idle).
 *
 * Every file is opened once and re-read with pread each tick; each kernel source is read by a file
 * of its own, named after it (host_int.h lists them). Rates are computed from the previous tick's
 * counters, so the first tick only primes them. */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/host_int.h"

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
    {"host.cgroup.cpu_limit_cores", "cores", GS_GAUGE, "cgroup CPU quota in cores (v2 cpu.max, v1 cpu.cfs_quota_us)"},
    {"host.cpuset_cores", "cores", GS_GAUGE,
     "CPUs the job may run on: its affinity (sched_getaffinity) and the cgroup's cpuset.cpus.effective"},
    {"host.cgroup.cpu_used_pct_of_limit", "%", GS_GAUGE, "CPU used by the cgroup relative to its quota"},
    {"host.cgroup.cpu_throttled_pct", "%", GS_GAUGE, "share of the quota's periods that were throttled (cpu.stat)"},
    {"host.cgroup.cpu_throttled_time_pct", "%", GS_GAUGE,
     "time throttled per second, summed over the CPUs: may pass 100 % (v2 throttled_usec, v1 throttled_time)"},
    {"host.cgroup.mem_limit_bytes", "B", GS_GAUGE, "cgroup memory limit (v2 memory.max, v1 memory.limit_in_bytes)"},
    {"host.cgroup.mem_used_bytes", "B", GS_GAUGE, "v2 memory.current, v1 memory.usage_in_bytes"},
    {"host.cgroup.mem_used_pct_of_limit", "%", GS_GAUGE, "memory used / the limit"},
    {"host.cgroup.mem_peak_bytes", "B", GS_GAUGE, "v2 memory.peak, v1 memory.max_usage_in_bytes"},
    {"host.cgroup.mem_limit_hits", "count", GS_GAUGE, "times use reached the limit (v2 memory.events max, v1 failcnt)"},
    {"host.cgroup.mem_anon_bytes", "B", GS_GAUGE,
     "memory the limit cannot reclaim without swap (memory.stat: v2 anon, v1 total_rss)"},
    {"host.cgroup.oom_kills", "count", GS_GAUGE,
     "the OOM killer's kills (memory.events / memory.oom_control oom_kill)"},
};

/* ---- the collector ---- */

static void host_close(void *ctx) {
  struct host *h = ctx;
  if (!h)
    return;
  int *fds[] = {&h->fd_stat,
                &h->fd_mem,
                &h->fd_load,
                &h->fd_disk,
                &h->fd_net,
                &h->fd_psi[0],
                &h->fd_psi[1],
                &h->fd_psi[2],
                &h->fd_cg_cpu_max,
                &h->fd_cg_cpu_period,
                &h->fd_cg_cpu_stat,
                &h->fd_cg_cpu_usage,
                &h->fd_cg_mem_max,
                &h->fd_cg_mem_cur,
                &h->fd_cg_mem_peak,
                &h->fd_cg_mem_events,
                &h->fd_cg_mem_failcnt,
                &h->fd_cg_mem_stat,
                &h->fd_cg_cpuset};
  for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
    host_close_fd(fds[i]);
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
  h->fd_stat = host_open_ro(h, "/proc/stat");
  h->fd_mem = host_open_ro(h, "/proc/meminfo");
  h->fd_load = host_open_ro(h, "/proc/loadavg");
  h->fd_disk = host_open_ro(h, "/proc/diskstats");
  h->fd_net = host_open_ro(h, "/proc/net/dev");
  host_open_pressure(h, s);
  if (h->fd_stat < 0) {
    snprintf(err, errlen, "cannot open %s/proc/stat", o->root && strcmp(o->root, "/") ? o->root : "");
    host_close(h);
    return NULL;
  }
  h->sid_load[0] = host_series(s, "host.load1", "", "count");
  h->sid_load[1] = host_series(s, "host.load5", "", "count");
  h->sid_load[2] = host_series(s, "host.load15", "", "count");
  static const char *mem[] = {"host.mem.total_bytes",  "host.mem.used_bytes",  "host.mem.available_bytes",
                              "host.mem.cached_bytes", "host.swap.used_bytes", "host.swap.total_bytes"};
  for (int i = 0; i < 6; i++)
    h->sid_mem[i] = host_series(s, mem[i], "", "B");
  host_open_cgroup(h, s);
  return h;
}

static int host_sample(void *ctx, struct gs_sink *s, int64_t now) {
  struct host *h = ctx;
  double dt = h->primed ? (double)(now - h->t_prev) / GS_NS_PER_S : 0;
  host_read_proc_stat(h, s, now, dt);
  host_read_loadavg(h, s, now);
  host_read_meminfo(h, s, now);
  host_read_diskstats(h, s, now, dt);
  host_read_net_dev(h, s, now, dt);
  host_read_pressure(h, s, now, dt);
  host_read_cgroup(h, s, now, dt);
  h->t_prev = now;
  h->primed = 1;
  return GS_COLLECT_OK;
}

static void host_summary(void *ctx, FILE *out) {
  struct host *h = ctx;
  fprintf(out, "host: %d CPUs", h->ncpu);
  if (h->cg_cores > 0)
    fprintf(out, " (cgroup %s quota %.1f cores)", collect_cgroup_layout_name(h->cg_layout), h->cg_cores);
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
