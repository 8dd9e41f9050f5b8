/* collect/host_int: the host collector's private parts, shared by its files. host.c is the
 * collector (open, sample, summary, close, the metric table); each kernel source has a file named
 * after it, as netdata's proc.plugin does — proc_stat.c, proc_loadavg.c, proc_meminfo.c,
 * proc_diskstats.c, proc_net_dev.c, proc_pressure.c, sys_fs_cgroup.c (the cgroup's limits on v2,
 * v1 and hybrid hosts, and the CPUs the job may use) — and host_util.c holds what they share (opening under the root
 * prefix, series, device slots). Calls go one way: host.c → the readers → host_util.c. */
#ifndef GS_COLLECT_HOST_INT_H
#define GS_COLLECT_HOST_INT_H

#include <stdint.h>

#include "collect/collect.h"
#include "collect/collect_util.h"

enum { MAX_CPUS = 1024, MAX_DEVS = 64, BUF = 1 << 16 };
/* The cgroup series, by slot of struct host's sid_cg. */
enum {
  CG_CPU_LIMIT,
  CG_CPU_PCT,
  CG_MEM_LIMIT,
  CG_MEM_USED,
  CG_MEM_PCT,
  CG_THROTTLED,
  CG_MEM_PEAK,
  CG_MEM_HITS,
  CG_OOM_KILLS,
  CG_THR_TIME,
  CG_MEM_ANON,
  CG_NSERIES
};

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
  /* the cgroup's files (sys_fs_cgroup.c): on v1 cpu_max is cpu.cfs_quota_us, events memory.oom_control */
  int fd_cg_cpu_max, fd_cg_cpu_period, fd_cg_cpu_stat, fd_cg_cpu_usage;
  int fd_cg_mem_max, fd_cg_mem_cur, fd_cg_mem_peak, fd_cg_mem_events, fd_cg_mem_failcnt, fd_cg_mem_stat, fd_cg_cpuset;
  int cg_v1_cpu, cg_v1_mem, cg_layout;
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
  uint64_t cg_usage_prev; /* ns */
  uint64_t cg_periods_prev, cg_throttled_prev, cg_thr_ns_prev;
  int sid_cg[CG_NSERIES];
  double cg_cores; /* CPU quota in cores, 0 = none */
};

/* ---- host_util.c ---- */

/* Opens path under the collector's root prefix, read-only. Returns the descriptor or -1. */
int host_open_ro(const struct host *h, const char *path);
/* Closes *fd when open and marks it closed (-1). */
void host_close_fd(int *fd);
/* Registers a host gauge series. Returns the sink's series id. */
int host_series(struct gs_sink *s, const char *name, const char *labels, const char *unit);
/* The slot of device name[0..len) in devs (n of them), made when new (*fresh = 1). Returns NULL when
 * the table is full or the name too long. */
struct dev_prev *host_dev_slot(struct dev_prev *devs, int *n, const char *name, size_t len, int *fresh);
/* Whether known equals name[0..len). */
int host_same_name(const char *known, const char *name, size_t len);

/* ---- one reader per kernel source: each re-reads its open file and puts this tick's values at
 * now; dt is the seconds since the last tick (0 on the first, which only primes the counters). ---- */

void host_read_proc_stat(struct host *h, struct gs_sink *s, int64_t now, double dt); /* proc_stat.c */
void host_read_loadavg(struct host *h, struct gs_sink *s, int64_t now);              /* proc_loadavg.c */
void host_read_meminfo(struct host *h, struct gs_sink *s, int64_t now);              /* proc_meminfo.c */
void host_read_diskstats(struct host *h, struct gs_sink *s, int64_t now, double dt); /* proc_diskstats.c */
void host_read_net_dev(struct host *h, struct gs_sink *s, int64_t now, double dt);   /* proc_net_dev.c */
void host_open_pressure(struct host *h, struct gs_sink *s);                          /* proc_pressure.c */
void host_read_pressure(struct host *h, struct gs_sink *s, int64_t now, double dt);
/* The cgroup's limits on every layout (the agent's own cgroup, which the job inherits) and the CPUs
 * the job may use (sched_getaffinity, the effective cpuset): sys_fs_cgroup.c. */
void host_open_cgroup(struct host *h, struct gs_sink *s);
void host_read_cgroup(struct host *h, struct gs_sink *s, int64_t now, double dt);

#endif
