/* Unit tests of the procfs collectors against a fabricated root (tests write /proc and /sys files
 * into a temp folder and point the collector's root prefix at it): rates between two ticks, usage
 * relative to a cgroup v2 quota, and a process tree whose children come and go. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "collect/collect.h"

static char root[256];

static void put_file(const char *rel, const char *fmt, ...) {
  char path[512], cmd[600];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
  assert_int_equal(system(cmd), 0);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fclose(f);
}

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/gs-test-root-XXXXXX");
  return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* Host with 8 CPUs; `k` scales the counters so tick 2 differs from tick 1. */
static void write_host(int k) {
  char stat[2048];
  int off = snprintf(stat, sizeof stat, "cpu  %d 0 %d %d %d 0 0 0 0 0\n", 800 * k, 400 * k, 6400 * k, 400 * k);
  for (int c = 0; c < 8; c++)
    off += snprintf(stat + off, sizeof stat - (size_t)off, "cpu%d %d 0 %d %d %d 0 0 0 0 0\n", c, 100 * k, 50 * k,
                    800 * k, 50 * k);
  snprintf(stat + off, sizeof stat - (size_t)off, "intr 1 2 3\nctxt 55\n");
  put_file("proc/stat", "%s", stat);
  put_file("proc/meminfo", "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    6000000 kB\n"
                           "Buffers:          100000 kB\nCached:          2000000 kB\nSwapTotal:       1000000 kB\n"
                           "SwapFree:         1000000 kB\n");
  put_file("proc/loadavg", "1.50 1.00 0.50 2/300 12345\n");
  put_file("proc/diskstats", "   7       0 loop0 9 0 9 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
                             " 254       0 vda %d 0 %d 0 %d 0 %d 0 0 %d 0 0 0 0 0 0 0\n",
           10 * k, 2048 * k, 5 * k, 1024 * k, 250 * k);
  put_file("proc/net/dev", "Inter-|   Receive\n face |bytes\n    lo: 999 1 0 0 0 0 0 0 999 1 0 0 0 0 0 0\n"
                           "  eth0: %d 10 0 0 0 0 0 0 %d 5 0 0 0 0 0 0\n",
           1000000 * k, 500000 * k);
  put_file("proc/pressure/cpu", "some avg10=0.00 avg60=0.00 avg300=0.00 total=%d\n", 250000 * k);
  put_file("proc/pressure/memory", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
                                   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
  put_file("proc/pressure/io", "some avg10=0.00 avg60=0.00 avg300=0.00 total=%d\n"
                               "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
           100000 * k);
  put_file("proc/self/cgroup", "0::/job.slice\n");
  put_file("sys/fs/cgroup/job.slice/cgroup.controllers", "cpu memory\n");
  put_file("sys/fs/cgroup/job.slice/cpu.max", "200000 100000\n");
  put_file("sys/fs/cgroup/job.slice/cpu.stat", "usage_usec %d\nuser_usec 0\n", 1900000 * k);
  put_file("sys/fs/cgroup/job.slice/memory.max", "4294967296\n");
  put_file("sys/fs/cgroup/job.slice/memory.current", "1073741824\n");
  put_file("sys/block/vda/size", "1\n");
}

static double last_of(struct gs_batch *b, int id) {
  double v = NAN;
  for (size_t i = 0; i < b->n_points; i++)
    if (b->points[i].series == id)
      v = b->points[i].v;
  return v;
}

static void test_host_rates_and_cgroup_quota(void **state) {
  (void)state;
  write_host(1);
  struct collector_opts o = {.root = root};
  struct gs_sink *s = gs_sink_new();
  char err[128] = "";
  void *ctx = collector_host.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  assert_int_equal(collector_host.sample(ctx, s, 1000000000LL), GS_COLLECT_OK);
  write_host(2);
  assert_int_equal(collector_host.sample(ctx, s, 2000000000LL), GS_COLLECT_OK);
  struct gs_batch *b = gs_sink_take(s);
  /* total: 800 user + 400 system + 6400 idle + 400 iowait per step -> busy 1200/8000 = 15 % */
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.cpu.busy_pct", "cpu=total")), 15.0, 1e-9);
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.cpu.iowait_pct", "cpu=total")), 5.0, 1e-9);
  assert_true(gs_sink_find(s, "host", "host.cpu.busy_pct", "cpu=7") >= 0);
  /* the container used 1.9 s of CPU in 1 s under a 2-core quota: 95 % of its limit, not 15 % */
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.cgroup.cpu_used_pct_of_limit", "")), 95.0, 1e-9);
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.cgroup.cpu_limit_cores", "")), 2.0, 1e-9);
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.cgroup.mem_used_pct_of_limit", "")), 25.0, 1e-9);
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.mem.used_bytes", "")), 10000000.0 * 1024, 1);
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.disk.read_bytes_s", "dev=vda")), 2048.0 * 512, 1e-6);
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.disk.util_pct", "dev=vda")), 25.0, 1e-9);
  assert_int_equal(gs_sink_find(s, "host", "host.disk.read_bytes_s", "dev=loop0"), -1);
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.net.rx_bytes_s", "iface=eth0")), 1e6, 1e-6);
  assert_int_equal(gs_sink_find(s, "host", "host.net.rx_bytes_s", "iface=lo"), -1);
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.psi.cpu_some_pct", "")), 25.0, 1e-9);
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.psi.io_some_pct", "")), 10.0, 1e-9);
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.load1", "")), 1.5, 1e-9);
  gs_batch_free(b);
  collector_host.close(ctx);
  gs_sink_free(s);
}

static void test_host_without_cgroup_limit_emits_no_cgroup_series(void **state) {
  (void)state;
  write_host(1);
  put_file("sys/fs/cgroup/job.slice/cpu.max", "max 100000\n");
  put_file("sys/fs/cgroup/job.slice/memory.max", "max\n");
  struct collector_opts o = {.root = root};
  struct gs_sink *s = gs_sink_new();
  char err[128];
  void *ctx = collector_host.open(&o, s, err, sizeof err);
  collector_host.sample(ctx, s, 1);
  assert_int_equal(gs_sink_find(s, "host", "host.cgroup.cpu_used_pct_of_limit", ""), -1);
  assert_int_equal(gs_sink_find(s, "host", "host.cgroup.mem_limit_bytes", ""), -1);
  collector_host.close(ctx);
  gs_sink_free(s);
}

static void test_host_cpuset_counts_the_cpus_the_job_may_use(void **state) {
  (void)state;
  write_host(1);
  put_file("sys/fs/cgroup/job.slice/cpuset.cpus.effective", "0-3,8,10-11\n");
  struct collector_opts o = {.root = root};
  struct gs_sink *s = gs_sink_new();
  char err[128];
  void *ctx = collector_host.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  collector_host.sample(ctx, s, 1);
  struct gs_batch *b = gs_sink_take(s);
  /* 8 CPUs in /proc/stat, but the cgroup's cpuset lets the job run on 7 of them */
  assert_float_equal(last_of(b, gs_sink_find(s, "host", "host.cpuset_cores", "")), 7.0, 1e-9);
  gs_batch_free(b);
  collector_host.close(ctx);
  /* no cpuset file (and a fixture root, so no affinity of a real process): no value, not zero */
  put_file("sys/fs/cgroup/job.slice/cpuset.cpus.effective", "\n");
  ctx = collector_host.open(&o, s, err, sizeof err);
  collector_host.sample(ctx, s, 2);
  b = gs_sink_take(s);
  assert_true(isnan(last_of(b, gs_sink_find(s, "host", "host.cpuset_cores", ""))));
  gs_batch_free(b);
  collector_host.close(ctx);
  gs_sink_free(s);
}

static void write_proc(int pid, const char *comm, char state, int ticks, int threads, int rss_pages, int rb) {
  char rel[64];
  snprintf(rel, sizeof rel, "proc/%d/stat", pid);
  put_file(rel, "%d (%s) %c 1 1 1 0 -1 0 0 0 0 0 %d %d 0 0 20 0 %d 0 4242 100000 %d 0 0\n", pid, comm, state, ticks,
           ticks, threads, rss_pages);
  snprintf(rel, sizeof rel, "proc/%d/io", pid);
  put_file(rel, "rchar: 0\nwchar: 0\nsyscr: 0\nsyscw: 0\nread_bytes: %d\nwrite_bytes: 0\ncancelled_write_bytes: 0\n", rb);
}

static void test_proctree_follows_children_that_come_and_go(void **state) {
  (void)state;
  double hz = (double)sysconf(_SC_CLK_TCK);
  write_proc(100, "python3", 'R', 0, 4, 1000, 0);
  write_proc(101, "pt_data_worker", 'S', 0, 1, 500, 0);
  write_proc(102, "weird ) name", 'D', 0, 1, 10, 0);
  put_file("proc/100/task/100/children", "101 ");
  put_file("proc/101/task/101/children", "102");
  struct collector_opts o = {.root = root, .pid = 100};
  struct gs_sink *s = gs_sink_new();
  char err[128];
  void *ctx = collector_proctree.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  collector_proctree.sample(ctx, s, 1000000000LL);
  write_proc(100, "python3", 'R', (int)hz / 2, 4, 1000, 0); /* utime+stime = hz: one core for 1 s */
  write_proc(101, "pt_data_worker", 'R', (int)hz / 4, 1, 500, 1 << 20);
  collector_proctree.sample(ctx, s, 2000000000LL);
  struct gs_batch *b = gs_sink_take(s);
  assert_float_equal(last_of(b, gs_sink_find(s, "proctree", "proc.cpu_pct", "pid=100")), 100.0, 1e-6);
  assert_float_equal(last_of(b, gs_sink_find(s, "proctree", "proc.cpu_pct", "pid=101")), 50.0, 1e-6);
  assert_float_equal(last_of(b, gs_sink_find(s, "proctree", "tree.cpu_pct", "")), 150.0, 1e-6);
  assert_float_equal(last_of(b, gs_sink_find(s, "proctree", "tree.procs", "")), 3, 0);
  assert_float_equal(last_of(b, gs_sink_find(s, "proctree", "tree.dstate", "")), 1, 0);
  assert_float_equal(last_of(b, gs_sink_find(s, "proctree", "tree.threads", "")), 6, 0);
  assert_float_equal(last_of(b, gs_sink_find(s, "proctree", "proc.read_bytes_s", "pid=101")), 1048576.0, 1e-6);
  double page = (double)sysconf(_SC_PAGESIZE);
  assert_float_equal(last_of(b, gs_sink_find(s, "proctree", "tree.rss_bytes", "")), 1510 * page, 1e-6);
  int starts = 0;
  for (size_t i = 0; i < b->n_events; i++)
    starts += !strcmp(b->events[i].kind, "proc_start");
  assert_int_equal(starts, 3);
  gs_batch_free(b);
  /* the worker and its child exit */
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s/proc/101' '%s/proc/102'", root, root);
  assert_int_equal(system(cmd), 0);
  put_file("proc/100/task/100/children", "");
  collector_proctree.sample(ctx, s, 3000000000LL);
  b = gs_sink_take(s);
  int exits = 0;
  for (size_t i = 0; i < b->n_events; i++)
    exits += !strcmp(b->events[i].kind, "proc_exit");
  assert_int_equal(exits, 2);
  assert_float_equal(last_of(b, gs_sink_find(s, "proctree", "tree.procs", "")), 1, 0);
  gs_batch_free(b);
  collector_proctree.close(ctx);
  gs_sink_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_rates_and_cgroup_quota),
      cmocka_unit_test(test_host_without_cgroup_limit_emits_no_cgroup_series),
      cmocka_unit_test(test_host_cpuset_counts_the_cpus_the_job_may_use),
      cmocka_unit_test(test_proctree_follows_children_that_come_and_go),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
