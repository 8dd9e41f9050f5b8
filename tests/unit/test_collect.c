/* Unit tests of the procfs collectors against a fabricated root (the fixture trees of
 * tests/fixtures/host and tests/fixtures/proctree, laid in turn over a temp folder that the
 * collector's root prefix points at): rates between two ticks, usage relative to a cgroup v2 quota,
 * and a process tree whose children come and go. */
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
#include "fixture.h"

static char root[256];

/* Lays tests/fixtures/<tree> over the test's root. */
static void lay(const char *tree) {
  assert_int_equal(fixture_lay(tree, root), 0);
}

static int setup(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/gs-test-root-XXXXXX");
  return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return fixture_remove(root);
}

/* A host with 8 CPUs in a cgroup v2 slice (2-core quota, 4 GiB memory limit); tick 2 is the same
 * host a second later: every counter doubled. */
static void write_host(int k) {
  lay(k == 1 ? "host/tick1" : "host/tick2");
}

/* Not cmocka's assert_float_equal: it passes when a value is NAN (both of its comparisons are then
 * false), so a figure the collector failed to put would pass. This fails on NAN. */
#define assert_near(a, b, eps) assert_true(fabs((double)(a) - (double)(b)) <= (eps))

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
  assert_near(last_of(b, gs_sink_find(s, "host", "host.cpu.busy_pct", "cpu=total")), 15.0, 1e-9);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.cpu.iowait_pct", "cpu=total")), 5.0, 1e-9);
  assert_true(gs_sink_find(s, "host", "host.cpu.busy_pct", "cpu=7") >= 0);
  /* the container used 1.9 s of CPU in 1 s under a 2-core quota: 95 % of its limit, not 15 % */
  assert_near(last_of(b, gs_sink_find(s, "host", "host.cgroup.cpu_used_pct_of_limit", "")), 95.0, 1e-9);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.cgroup.cpu_limit_cores", "")), 2.0, 1e-9);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.cgroup.mem_used_pct_of_limit", "")), 25.0, 1e-9);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.mem.used_bytes", "")), 10000000.0 * 1024, 1);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.disk.read_bytes_s", "dev=vda")), 2048.0 * 512, 1e-6);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.disk.util_pct", "dev=vda")), 25.0, 1e-9);
  assert_int_equal(gs_sink_find(s, "host", "host.disk.read_bytes_s", "dev=loop0"), -1);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.net.rx_bytes_s", "iface=eth0")), 1e6, 1e-6);
  assert_int_equal(gs_sink_find(s, "host", "host.net.rx_bytes_s", "iface=lo"), -1);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.psi.cpu_some_pct", "")), 25.0, 1e-9);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.psi.io_some_pct", "")), 10.0, 1e-9);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.load1", "")), 1.5, 1e-9);
  gs_batch_free(b);
  collector_host.close(ctx);
  gs_sink_free(s);
}

static void test_host_without_cgroup_limit_emits_no_cgroup_series(void **state) {
  (void)state;
  write_host(1);
  lay("host/no_limit"); /* cpu.max "max 100000", memory.max "max" */
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
  lay("host/cpuset"); /* cpuset.cpus.effective "0-3,8,10-11" */
  struct collector_opts o = {.root = root};
  struct gs_sink *s = gs_sink_new();
  char err[128];
  void *ctx = collector_host.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  collector_host.sample(ctx, s, 1);
  struct gs_batch *b = gs_sink_take(s);
  /* 8 CPUs in /proc/stat, but the cgroup's cpuset lets the job run on 7 of them */
  assert_near(last_of(b, gs_sink_find(s, "host", "host.cpuset_cores", "")), 7.0, 1e-9);
  gs_batch_free(b);
  collector_host.close(ctx);
  /* no cpuset file (and a fixture root, so no affinity of a real process): no value, not zero */
  lay("host/cpuset_empty");
  ctx = collector_host.open(&o, s, err, sizeof err);
  collector_host.sample(ctx, s, 2);
  b = gs_sink_take(s);
  assert_true(isnan(last_of(b, gs_sink_find(s, "host", "host.cpuset_cores", ""))));
  gs_batch_free(b);
  collector_host.close(ctx);
  gs_sink_free(s);
}

static void test_proctree_follows_children_that_come_and_go(void **state) {
  (void)state;
  double hz = (double)sysconf(_SC_CLK_TCK);
  /* python3 (100, 4 threads) -> pt_data_worker (101) -> "weird ) name" (102, in D state) */
  lay("proctree/start");
  struct collector_opts o = {.root = root, .pid = 100};
  struct gs_sink *s = gs_sink_new();
  char err[128];
  void *ctx = collector_proctree.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  collector_proctree.sample(ctx, s, 1000000000LL);
  /* a second later: utime+stime 100 ticks for 100 (one core for 1 s at Linux's USER_HZ of 100), 50 for
   * 101, which has also read 1 MiB */
  lay("proctree/tick2");
  collector_proctree.sample(ctx, s, 2000000000LL);
  struct gs_batch *b = gs_sink_take(s);
  assert_near(last_of(b, gs_sink_find(s, "proctree", "proc.cpu_pct", "pid=100")), 100.0 * 100 / hz, 1e-6);
  assert_near(last_of(b, gs_sink_find(s, "proctree", "proc.cpu_pct", "pid=101")), 50.0 * 100 / hz, 1e-6);
  assert_near(last_of(b, gs_sink_find(s, "proctree", "tree.cpu_pct", "")), 150.0 * 100 / hz, 1e-6);
  assert_near(last_of(b, gs_sink_find(s, "proctree", "tree.procs", "")), 3, 0);
  assert_near(last_of(b, gs_sink_find(s, "proctree", "tree.dstate", "")), 1, 0);
  assert_near(last_of(b, gs_sink_find(s, "proctree", "tree.threads", "")), 6, 0);
  assert_near(last_of(b, gs_sink_find(s, "proctree", "proc.read_bytes_s", "pid=101")), 1048576.0, 1e-6);
  /* schedstat's run delay went from 0.1 s to 0.8 s in the tick's second: 70 % of it waiting for a CPU;
   * pid 100 has no schedstat (a kernel without CONFIG_SCHED_INFO): no figure, not zero */
  assert_near(last_of(b, gs_sink_find(s, "proctree", "proc.runq_wait_pct", "pid=101")), 70.0, 1e-6);
  assert_true(isnan(last_of(b, gs_sink_find(s, "proctree", "proc.runq_wait_pct", "pid=100"))));
  double page = (double)sysconf(_SC_PAGESIZE);
  assert_near(last_of(b, gs_sink_find(s, "proctree", "tree.rss_bytes", "")), 1510 * page, 1e-6);
  int starts = 0;
  for (size_t i = 0; i < b->n_events; i++)
    starts += !strcmp(b->events[i].kind, "proc_start");
  assert_int_equal(starts, 3);
  gs_batch_free(b);
  /* the worker and its child exit */
  char gone[512];
  for (int pid = 101; pid <= 102; pid++) {
    snprintf(gone, sizeof gone, "%s/proc/%d", root, pid);
    assert_int_equal(fixture_remove(gone), 0);
  }
  lay("proctree/exit"); /* 100's children list is empty */
  collector_proctree.sample(ctx, s, 3000000000LL);
  b = gs_sink_take(s);
  int exits = 0;
  for (size_t i = 0; i < b->n_events; i++)
    exits += !strcmp(b->events[i].kind, "proc_exit");
  assert_int_equal(exits, 2);
  assert_near(last_of(b, gs_sink_find(s, "proctree", "tree.procs", "")), 1, 0);
  gs_batch_free(b);
  collector_proctree.close(ctx);
  gs_sink_free(s);
}

/* A fabricated /proc/PID/stat (no io file: like another user's process, whose io cannot be read). */
static void write_stat(int pid, const char *comm, int utime) {
  char path[512];
  snprintf(path, sizeof path, "%s/proc/%d", root, pid);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/proc/%d/stat", root, pid);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "%d (%s) S 1 1 1 0 -1 0 0 0 0 0 %d 0 0 0 20 0 2 0 4242 100000 100 0 0\n", pid, comm, utime);
  fclose(f);
}

/* NVML's per-process series as the NVML collector puts them: gpu=0, one per pid. */
static void put_gpu_procs(struct gs_sink *s, int64_t t) {
  char lab[64];
  for (int pid = 999; pid < 1070; pid++) { /* 999 is gone: no /proc/999 */
    snprintf(lab, sizeof lab, "gpu=0,pid=%d", pid);
    gs_sink_put(s, gs_sink_series(s, "nvml", "gpu.proc_mem_bytes", lab, "B", GS_GAUGE), t, 1e9);
  }
}

static double last_tree(struct gs_sink *s, const char *name, int pid, const char *comm) {
  char lab[96];
  snprintf(lab, sizeof lab, "pid=%d,comm=%s", pid, comm);
  return gs_sink_last(s, gs_sink_find(s, "proctree", name, lab));
}

static void test_gputrees_one_tree_per_gpu_process_at_most_64(void **state) {
  (void)state;
  char path[512];
  snprintf(path, sizeof path, "%s/proc", root);
  mkdir(path, 0755);
  for (int pid = 1000; pid < 1070; pid++)
    write_stat(pid, pid == 1001 ? "a,b=c\x01" : "python3", 0);
  struct gs_sink *s = gs_sink_new();
  struct collector_opts o = {.root = root, .interval_ns = GS_NS_PER_S};
  char err[128] = "";
  void *ctx = collector_gputrees.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  put_gpu_procs(s, GS_NS_PER_S);
  collector_gputrees.sample(ctx, s, GS_NS_PER_S);
  assert_near(gs_sink_last(s, gs_sink_find(s, "gputrees", "gpu_trees.watched", "")), 64, 0);
  assert_near(gs_sink_last(s, gs_sink_find(s, "gputrees", "gpu_trees.unwatched", "")), 6, 0);
  assert_int_equal(gs_sink_find(s, "proctree", "tree.procs", "pid=999,comm=python3"), -1); /* gone: no tree */
  assert_near(last_tree(s, "tree.procs", 1001, "a_b_c?"), 1, 0);     /* the name made a label value */
  assert_true(isnan(last_tree(s, "tree.cpu_pct", 1000, "python3"))); /* one reading: no CPU yet */
  /* a second later: 1000 used 50 ticks; its io file cannot be read, so no I/O total (not a 0) */
  write_stat(1000, "python3", 50);
  put_gpu_procs(s, 2 * GS_NS_PER_S);
  collector_gputrees.sample(ctx, s, 2 * GS_NS_PER_S);
  double hz = (double)sysconf(_SC_CLK_TCK);
  assert_near(last_tree(s, "tree.cpu_pct", 1000, "python3"), 50.0 * 100 / hz, 1e-6);
  assert_true(isnan(last_tree(s, "tree.read_bytes_s", 1000, "python3")));
  assert_int_equal(gs_sink_find(s, "proctree", "proc.cpu_pct", "pid=1000"), -1); /* trees only */
  /* 1000 exits (its stat reads empty: the kept-open file of a removed fixture would still read, where
   * procfs answers ESRCH): its tree ends at once, and its slot goes to one that waited */
  snprintf(path, sizeof path, "%s/proc/1000/stat", root);
  fclose(fopen(path, "w"));
  put_gpu_procs(s, 3 * GS_NS_PER_S);
  collector_gputrees.sample(ctx, s, 3 * GS_NS_PER_S);
  assert_true(isnan(last_tree(s, "tree.procs", 1000, "python3")));
  assert_near(gs_sink_last(s, gs_sink_find(s, "gputrees", "gpu_trees.watched", "")), 63, 0);
  put_gpu_procs(s, 4 * GS_NS_PER_S);
  collector_gputrees.sample(ctx, s, 4 * GS_NS_PER_S);
  assert_near(gs_sink_last(s, gs_sink_find(s, "gputrees", "gpu_trees.watched", "")), 64, 0);
  assert_near(gs_sink_last(s, gs_sink_find(s, "gputrees", "gpu_trees.unwatched", "")), 5, 0);
  struct gs_batch *b = gs_sink_take(s);
  int noted = 0;
  for (size_t i = 0; i < b->n_notes; i++)
    noted += strstr(b->notes[i], "more than 64 GPU processes") != NULL;
  assert_int_equal(noted, 1);
  gs_batch_free(b);
  collector_gputrees.close(ctx);
  assert_true(isnan(last_tree(s, "tree.procs", 1002, "python3"))); /* closed: no latest value left */
  gs_sink_free(s);
}

/* A job's own agent (opts.pid set) has no GPU-process trees: proctree watches the job. */
static void test_gputrees_is_off_for_a_job(void **state) {
  (void)state;
  struct gs_sink *s = gs_sink_new();
  struct collector_opts o = {.root = root, .pid = 100};
  char err[128] = "";
  assert_null(collector_gputrees.open(&o, s, err, sizeof err));
  assert_string_equal(err, "");
  gs_sink_free(s);
}

/* ---- every cgroup layout gives the same series ---- */

/* The host.cgroup.* values after two ticks of a layout's trees (tests/fixtures/host/layout_<name>,
 * over the tick1/tick2 host), laid on a root of its own so the layouts do not mix. */
static const char *const cg_series[] = {"host.cgroup.cpu_limit_cores",       "host.cgroup.cpu_used_pct_of_limit",
                                        "host.cgroup.cpu_throttled_pct",     "host.cgroup.cpu_throttled_time_pct",
                                        "host.cgroup.mem_limit_bytes",       "host.cgroup.mem_used_bytes",
                                        "host.cgroup.mem_used_pct_of_limit", "host.cgroup.mem_peak_bytes",
                                        "host.cgroup.mem_limit_hits",        "host.cgroup.oom_kills",
                                        "host.cgroup.mem_anon_bytes",        "host.cpuset_cores"};
#define N_CG_SERIES (sizeof cg_series / sizeof *cg_series)

/* Lays the host and the layout's trees of tick k over r. */
static void lay_layout(const char *layout, int k, const char *r) {
  char tree[96];
  assert_int_equal(fixture_lay(k == 1 ? "host/tick1" : "host/tick2", r), 0);
  snprintf(tree, sizeof tree, "host/layout_%s/tick%d", layout, k);
  assert_int_equal(fixture_lay(tree, r), 0);
}

static void layout_values(const char *layout, double *v, int *found_layout) {
  char r[300];
  snprintf(r, sizeof r, "%s/%s", root, layout);
  lay_layout(layout, 1, r);
  struct collect_cgroup cg;
  assert_int_equal(collect_cgroup_find(r, 0, &cg), 0);
  *found_layout = cg.layout;
  struct collector_opts o = {.root = r};
  struct gs_sink *s = gs_sink_new();
  char err[128] = "";
  void *ctx = collector_host.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  assert_int_equal(collector_host.sample(ctx, s, 1000000000LL), GS_COLLECT_OK);
  lay_layout(layout, 2, r);
  assert_int_equal(collector_host.sample(ctx, s, 2000000000LL), GS_COLLECT_OK);
  struct gs_batch *b = gs_sink_take(s);
  for (size_t i = 0; i < N_CG_SERIES; i++)
    v[i] = last_of(b, gs_sink_find(s, "host", cg_series[i], ""));
  gs_batch_free(b);
  collector_host.close(ctx);
  gs_sink_free(s);
  assert_int_equal(fixture_remove(r), 0);
}

static void test_host_cgroup_series_alike_on_v2_v1_and_hybrid(void **state) {
  (void)state;
  static const char *const layouts[] = {"v2", "v1", "hybrid"};
  static const int kinds[] = {COLLECT_CG_V2, COLLECT_CG_V1, COLLECT_CG_HYBRID};
  /* 2-core quota, 1.9 s of CPU in 1 s, 5 of 10 periods throttled for 0.25 s; 1 GiB of a 4 GiB
   * limit, a 2 GiB peak, 3 hits of the limit, one OOM kill, 768 MiB anonymous; 7 CPUs in the cpuset */
  static const double want[N_CG_SERIES] = {2.0,  95.0,         50.0, 25.0, 4294967296.0, 1073741824.0,
                                           25.0, 2147483648.0, 3.0,  1.0,  805306368.0,  7.0};
  for (int l = 0; l < 3; l++) {
    double v[N_CG_SERIES];
    int kind = -1;
    layout_values(layouts[l], v, &kind);
    assert_int_equal(kind, kinds[l]);
    for (size_t i = 0; i < N_CG_SERIES; i++) {
      if (!(fabs(v[i] - want[i]) <= 1e-6 * fmax(1, want[i])))
        fail_msg("layout %s: %s is %g, not %g", layouts[l], cg_series[i], v[i], want[i]);
    }
  }
}

/* On v1 with cpu and cpuacct mounted apart, a job moved into a cpu cgroup only (cpuacct still the
 * root's) keeps its quota, but the root's CPU time is not its use: no use of the quota, not a wrong one. */
static void test_host_v1_quota_without_its_cpuacct_reads_no_use(void **state) {
  (void)state;
  char r[300], p[400];
  snprintf(r, sizeof r, "%s/cpuacct-apart", root);
  lay_layout("hybrid", 1, r);
  snprintf(p, sizeof p, "%s/proc/self/cgroup", r);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs("4:memory:/docker/4f3c2b1a0e9d\n3:cpuset:/docker/4f3c2b1a0e9d\n2:cpuacct:/\n1:cpu:/docker/4f3c2b1a0e9d\n"
        "0::/docker/4f3c2b1a0e9d\n",
        f);
  fclose(f);
  snprintf(p, sizeof p, "%s/sys/fs/cgroup/cpuacct/cpuacct.usage", r); /* the whole host's CPU time */
  assert_non_null(f = fopen(p, "w"));
  fputs("987654321000\n", f);
  fclose(f);
  struct collector_opts o = {.root = r};
  struct gs_sink *s = gs_sink_new();
  char err[128] = "";
  void *ctx = collector_host.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  collector_host.sample(ctx, s, 1000000000LL);
  collector_host.sample(ctx, s, 2000000000LL);
  struct gs_batch *b = gs_sink_take(s);
  assert_near(last_of(b, gs_sink_find(s, "host", "host.cgroup.cpu_limit_cores", "")), 2.0, 1e-9);
  assert_int_equal(gs_sink_find(s, "host", "host.cgroup.cpu_used_pct_of_limit", ""), -1);
  gs_batch_free(b);
  collector_host.close(ctx);
  gs_sink_free(s);
  assert_int_equal(fixture_remove(r), 0);
}

/* The OOM count, limit and peak come from each layout's own files. */
static void test_cgroup_oom_reads_each_layout(void **state) {
  (void)state;
  static const char *const layouts[] = {"v2", "v1", "hybrid"};
  for (int l = 0; l < 3; l++) {
    char r[300], tree[96];
    snprintf(r, sizeof r, "%s/oom-%s", root, layouts[l]);
    snprintf(tree, sizeof tree, "host/layout_%s/tick1", layouts[l]);
    assert_int_equal(fixture_lay(tree, r), 0);
    struct collect_oom m;
    assert_int_equal(collect_cgroup_oom(r, 0, &m), 0);
    assert_int_equal(m.kills, 1);
    assert_int_equal(m.limit_hits, 3);
    assert_near(m.limit_bytes, 4294967296.0, 0.5);
    assert_near(m.peak_bytes, 2147483648.0, 0.5);
    assert_int_equal(fixture_remove(r), 0);
  }
}

/* Provenance's cgroup path: v2's, or on v1 the memory hierarchy's below its mount. */
static void test_cgroup_path_on_v1_is_the_memory_hierarchys(void **state) {
  (void)state;
  char r[300], p[512];
  snprintf(r, sizeof r, "%s/path-v1", root);
  assert_int_equal(fixture_lay("host/layout_v1/tick1", r), 0);
  assert_int_equal(collect_cgroup_path(r, p, sizeof p), 0);
  assert_string_equal(p, "/slurm/uid_1000/job_42/step_0");
  assert_int_equal(fixture_remove(r), 0);
  snprintf(r, sizeof r, "%s/path-v2", root);
  assert_int_equal(fixture_lay("host/layout_v2/tick1", r), 0);
  assert_int_equal(collect_cgroup_path(r, p, sizeof p), 0);
  assert_string_equal(p, "/job.slice");
  assert_int_equal(fixture_remove(r), 0);
}

/* ---- who a GPU process belongs to: real cgroup paths of each runtime, v1 and v2 ---- */

#define CID "4f3c2b1a0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b"
#define UID "0b4f6a1c-2d3e-4f50-8a9b-c0d1e2f3a4b5"
#define UID_ "0b4f6a1c_2d3e_4f50_8a9b_c0d1e2f3a4b5"

static void test_owner_parse_names_each_runtime_on_v1_and_v2(void **state) {
  (void)state;
  static const struct {
    const char *path, *runtime, *container, *pod, *job;
  } cases[] = {
      {"/docker/" CID, "docker", CID, "", ""},                       /* v1 cgroupfs */
      {"/system.slice/docker-" CID ".scope", "docker", CID, "", ""}, /* v2 systemd */
      {"/kubepods/burstable/pod" UID "/" CID, "", CID, UID, ""},     /* v1 kubelet */
      {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_ ".slice/cri-containerd-" CID ".scope",
       "containerd", CID, UID, ""},
      {"/kubepods.slice/kubepods-pod" UID_ ".slice/crio-" CID ".scope", "cri-o", CID, UID, ""}, /* guaranteed */
      {"/machine.slice/libpod-" CID ".scope/container", "podman", CID, "", ""},
      {"/slurm/uid_1000/job_42/step_0", "", "", "", "42"},
      {"/system.slice/slurmstepd.scope/job_4242/step_batch/user/task_0", "", "", "", "4242"},
      {"/user.slice/user-1000.slice/session-3.scope", "", "", "", ""},
      /* look-alikes: not a runtime's id, not a Slurm folder, not a pod UID */
      {"/docker/"
       "4F3C2B1A",
       "", "", "", ""},
      {"/system.slice/docker-xyz.scope", "", "", "", ""},
      {"/home/job_42", "", "", "", ""},
      {"/kubepods/burstable/podnot-a-uid", "", "", "", ""},
      /* a UID that fails late must leave nothing of itself (found by fuzz_owner) */
      {"/kubepods.slice/kubepods-burstable-pod5btf6a1c_2d3e_4f50_8a9b_c0d1e2f3a4b5.slice", "", "", "", ""},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    struct collect_owner o = {.nspid = -1};
    collect_owner_parse(cases[i].path, &o);
    if (strcmp(o.runtime, cases[i].runtime) || strcmp(o.container, cases[i].container) ||
        strcmp(o.pod_uid, cases[i].pod) || strcmp(o.hpc_job, cases[i].job))
      fail_msg("%s: runtime '%s' container '%s' pod '%s' job '%s'", cases[i].path, o.runtime, o.container, o.pod_uid,
               o.hpc_job);
  }
}

/* Writes text into root/rel, making its folders. */
static void put_file(const char *r, const char *rel, const char *text) {
  char p[600];
  snprintf(p, sizeof p, "%s/%s", r, rel);
  for (char *q = p + strlen(r) + 1; (q = strchr(q, '/')); q++) {
    *q = 0;
    mkdir(p, 0755);
    *q = '/';
  }
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* A process in a container, seen from the host: its ids from /proc/PID/cgroup, its own pid from
 * NSpid; the pod's names from the kubelet's folders; a Slurm GPU's job from the mapping files. */
static void test_owner_of_a_pod_process_from_the_host(void **state) {
  (void)state;
  char r[300], p[512];
  snprintf(r, sizeof r, "%s/owner", root);
  assert_int_equal(mkdir(r, 0755), 0);
  static const char *const files[][2] = {
      {"proc/777/cgroup",
       "12:memory:/kubepods/burstable/pod" UID "/" CID "\n11:cpu,cpuacct:/kubepods/burstable/pod" UID "/" CID "\n"},
      {"proc/777/status", "Name:\tpython3\nPid:\t777\nNSpid:\t777\t1\nVmRSS:\t10 kB\n"},
      {"var/log/pods/team-a_train-7f9c_" UID "/trainer/0.log", "x"},
      {"var/log/containers/train-7f9c_team-a_trainer-" CID ".log", "x"},
      {"var/log/containers/train-7f9c_team-a_sidecar-"
       "aa" CID ".log",
       "x"},
      {"jobmap/0", "4242\n"},
      {"jobmap/1", "17\n18\n;rm -rf /\n"},
  };
  for (size_t i = 0; i < sizeof files / sizeof *files; i++)
    put_file(r, files[i][0], files[i][1]);
  struct collect_owner o;
  assert_int_equal(collect_owner_of(r, 777, &o), 0);
  assert_string_equal(o.container, CID);
  assert_string_equal(o.pod_uid, UID);
  assert_int_equal(o.nspid, 1);
  assert_int_equal(o.ns_levels, 2);
  struct collect_pod pod;
  assert_int_equal(collect_k8s_pod(r, o.pod_uid, o.container, &pod), 0);
  assert_string_equal(pod.ns, "team-a");
  assert_string_equal(pod.pod, "train-7f9c");
  assert_string_equal(pod.container, "trainer");
  char job[64];
  snprintf(p, sizeof p, "%s/jobmap", r);
  assert_int_equal(collect_hpc_job_file(p, 0, job, sizeof job), 0);
  assert_string_equal(job, "4242");
  assert_int_equal(collect_hpc_job_file(p, 1, job, sizeof job), 0);
  assert_string_equal(job, "17,18"); /* the line that is no job id is left out */
  assert_int_equal(collect_hpc_job_file(p, 2, job, sizeof job), -1);
  assert_int_equal(collect_owner_of(r, 778, &o), -1);
  assert_int_equal(fixture_remove(r), 0);
}

/* The node agent's owners collector over a fabricated root: NVML's per-process series for pid 777
 * (a Slurm step's process) on GPU 0 give GPU 0 the param hpc_job=42 and an owner line; when the
 * process is gone (NVML still listing it), both go. */
static void test_owners_label_a_gpu_with_its_job_until_it_ends(void **state) {
  (void)state;
  char r[300], v[64];
  snprintf(r, sizeof r, "%s/owners", root);
  assert_int_equal(mkdir(r, 0755), 0);
  put_file(r, "proc/777/cgroup", "12:memory:/slurm/uid_1000/job_42/step_0\n0::/\n");
  put_file(r, "proc/777/status", "Name:\tpython3\nNSpid:\t777\n");
  put_file(r, "proc/777/stat", "777 (python3) S 1 777 777 0 -1 0\n");
  struct gs_sink *s = gs_sink_new();
  gs_sink_param(s, "gpu.0.uuid", "GPU-0");
  int mem = gs_sink_series(s, "nvml", "gpu.proc_mem_bytes", "gpu=0,pid=777", "B", GS_GAUGE);
  struct collector_opts o = {.root = r, .interval_ns = GS_NS_PER_S};
  char err[128] = "";
  void *ctx = collector_gpuowners.open(&o, s, err, sizeof err);
  assert_non_null(ctx);
  gs_sink_put(s, mem, 1000000000LL, 1e9);
  assert_int_equal(collector_gpuowners.sample(ctx, s, 1000000000LL), GS_COLLECT_OK);
  assert_true(gs_sink_param_get(s, "gpu.0.hpc_job", v, sizeof v));
  assert_string_equal(v, "42");
  int own = gs_sink_find(s, "owners", "gpu_proc.owner", "pid=777,hpc_job=42");
  assert_true(own >= 0);
  assert_near(gs_sink_last(s, own), 1.0, 0);
  char gone[320];
  snprintf(gone, sizeof gone, "%s/proc/777", r);
  assert_int_equal(fixture_remove(gone), 0);
  gs_sink_put(s, mem, 2000000000LL, 1e9);
  collector_gpuowners.sample(ctx, s, 2000000000LL);
  assert_true(gs_sink_param_get(s, "gpu.0.hpc_job", v, sizeof v));
  assert_string_equal(v, ""); /* the label leaves the GPU's lines */
  assert_true(isnan(gs_sink_last(s, own)));
  collector_gpuowners.close(ctx);
  gs_batch_free(gs_sink_take(s));
  gs_sink_free(s);
  assert_int_equal(fixture_remove(r), 0);
}

/* The kubelet's ListPodResourcesResponse: one pod with a GPU and a NIC (not nvidia.com/: left out),
 * encoded as api.proto numbers its fields; cut short, it is refused. */
static void test_podres_decode_keeps_the_pods_gpus(void **state) {
  (void)state;
  static const uint8_t msg[] = {
      0x0a, 0x48,                                                                       /* pod_resources (72 bytes) */
      0x0a, 0x07, 'i', 'n', 'f', 'e', 'r', '-', '0',                                    /* name */
      0x12, 0x07, 's', 'e', 'r', 'v', 'i', 'n', 'g',                                    /* namespace */
      0x1a, 0x34,                                                                       /* containers (52 bytes) */
      0x0a, 0x06, 's', 'e', 'r', 'v', 'e', 'r',                                         /* name */
      0x12, 0x15,                                                                       /* devices (21) */
      0x0a, 0x0e, 'n', 'v', 'i', 'd', 'i', 'a', '.', 'c', 'o', 'm', '/', 'g', 'p', 'u', /* resource */
      0x12, 0x03, 'G', 'P', 'U',                                                        /* device_ids */
      0x12, 0x13,                                                                       /* devices (19) */
      0x0a, 0x0c, 'e', 'x', 'a', 'm', 'p', 'l', 'e', '.', 'n', 'i', 'c', 's',           /* resource */
      0x12, 0x03, 'e', 't', 'h',                                                        /* device_ids */
  };
  struct collect_podres_gpu out[4];
  assert_int_equal(collect_podres_decode(msg, sizeof msg, out, 4), 1);
  assert_string_equal(out[0].uuid, "GPU");
  assert_string_equal(out[0].pod, "infer-0");
  assert_string_equal(out[0].ns, "serving");
  assert_string_equal(out[0].container, "server");
  assert_int_equal(collect_podres_decode(msg, sizeof msg - 3, out, 4), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_rates_and_cgroup_quota),
      cmocka_unit_test(test_host_without_cgroup_limit_emits_no_cgroup_series),
      cmocka_unit_test(test_host_cpuset_counts_the_cpus_the_job_may_use),
      cmocka_unit_test(test_host_cgroup_series_alike_on_v2_v1_and_hybrid),
      cmocka_unit_test(test_host_v1_quota_without_its_cpuacct_reads_no_use),
      cmocka_unit_test(test_cgroup_oom_reads_each_layout),
      cmocka_unit_test(test_cgroup_path_on_v1_is_the_memory_hierarchys),
      cmocka_unit_test(test_owner_parse_names_each_runtime_on_v1_and_v2),
      cmocka_unit_test(test_owner_of_a_pod_process_from_the_host),
      cmocka_unit_test(test_owners_label_a_gpu_with_its_job_until_it_ends),
      cmocka_unit_test(test_podres_decode_keeps_the_pods_gpus),
      cmocka_unit_test(test_proctree_follows_children_that_come_and_go),
      cmocka_unit_test(test_gputrees_one_tree_per_gpu_process_at_most_64),
      cmocka_unit_test(test_gputrees_is_off_for_a_job),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
