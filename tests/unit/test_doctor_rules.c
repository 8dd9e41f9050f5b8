/* Unit tests of the doctor on synthetic runs written straight into a SQLite store: each rule fires on
 * the signals it is written for and stays quiet on a healthy run; the workers model gives the figures
 * docs/diagnosis.md states; evidence is always valid JSON, even when it would overflow its field; a
 * run with no signals at all, or with odd labels, is diagnosed without a crash. The scenario suite
 * (run_scenarios.py) proves the same rules on real workloads; these run in a second, also under ASan. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "doctor/doctor.h"
#include "doctor/doctor_int.h"
#include "report/report_int.h"
#include "store/store.h"

#define S 1000000000LL
#define T0 (5 * S) /* the fake run's monotonic start */

static char dir[256];
static int dbn;

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs-test-doctor-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* A run being written: a fresh store per test, one sink. */
struct fake {
  struct store *st;
  struct store_run run;
  struct gs_sink *sink;
  double dur; /* seconds */
};

/* A run of dur seconds whose command line is cmd. */
static void fake_begin_cmd(struct fake *f, double dur, const char *cmd) {
  char url[400];
  snprintf(url, sizeof url, "sqlite://%s/d%d.db", dir, dbn++);
  f->st = store_open(url);
  assert_non_null(f->st);
  memset(&f->run, 0, sizeof f->run);
  snprintf(f->run.name, sizeof f->run.name, "fake");
  snprintf(f->run.command, sizeof f->run.command, "%s", cmd);
  f->run.agent_pid = getpid();
  f->run.exit_code = -1;
  f->run.start_wall_ns = gs_wall_ns();
  f->run.mono_start_ns = T0;
  f->run.interval_ns = S / 10;
  assert_int_equal(f->st->run_begin(f->st, &f->run), 0);
  f->sink = gs_sink_new();
  f->dur = dur;
}

static void fake_begin(struct fake *f, double dur) {
  fake_begin_cmd(f, dur, "python train.py");
}

/* A constant series sampled at 10 Hz over the whole run. */
static void constant(struct fake *f, const char *source, const char *name, const char *labels, double v) {
  int id = gs_sink_series(f->sink, source, name, labels, "", GS_GAUGE);
  for (int64_t t = 0; t <= (int64_t)(f->dur * 10); t++)
    gs_sink_put(f->sink, id, T0 + t * S / 10, v);
}

/* A series that is v_hi for the first `share` of every period and v_lo for the rest. */
static void periodic(struct fake *f, const char *source, const char *name, const char *labels, double period,
                     double share, double v_hi, double v_lo) {
  int id = gs_sink_series(f->sink, source, name, labels, "", GS_GAUGE);
  for (int64_t t = 0; t <= (int64_t)(f->dur * 10); t++) {
    double s = t / 10.0, ph = fmod(s, period) / period;
    gs_sink_put(f->sink, id, T0 + t * S / 10, ph < share ? v_hi : v_lo);
  }
}

/* Steps of one rank's loop (labels "" for the main loop, "rank=R" for another rank): data + compute
 * seconds back to back over the run (a pause of gap_s every gap_every steps). */
static void rank_steps(struct fake *f, const char *labels, double data, double compute, int gap_every, double gap_s) {
  int ids[4] = {gs_sink_series(f->sink, "client", "step.total_s", labels, "s", GS_GAUGE),
                gs_sink_series(f->sink, "client", "step.data_s", labels, "s", GS_GAUGE),
                gs_sink_series(f->sink, "client", "step.compute_s", labels, "s", GS_GAUGE),
                gs_sink_series(f->sink, "client", "step.samples", labels, "count", GS_GAUGE)};
  double t = 0.5;
  for (int n = 0; t + data + compute < f->dur; n++) {
    t += data + compute;
    if (gap_every && n % gap_every == gap_every - 1)
      t += gap_s;
    int64_t at = T0 + (int64_t)(t * S);
    gs_sink_put(f->sink, ids[0], at, data + compute);
    gs_sink_put(f->sink, ids[1], at, data);
    gs_sink_put(f->sink, ids[2], at, compute);
    gs_sink_put(f->sink, ids[3], at, 32);
  }
}

static void steps(struct fake *f, double data, double compute, int gap_every, double gap_s) {
  rank_steps(f, "", data, compute, gap_every, gap_s);
}

/* The host: ncpu cores, busy_pct overall; the job: one main process using main_cores, with dstate
 * processes in D state on average. */
static void host_job(struct fake *f, int ncpu, double busy_pct, double main_cores, double dstate) {
  for (int c = 0; c < ncpu; c++) {
    char lab[16];
    snprintf(lab, sizeof lab, "cpu=%d", c);
    constant(f, "host", "host.cpu.busy_pct", lab, busy_pct);
  }
  constant(f, "host", "host.cpu.busy_pct", "cpu=total", busy_pct);
  constant(f, "host", "host.mem.available_bytes", "", 20e9);
  constant(f, "proctree", "tree.cpu_pct", "", main_cores * 100);
  constant(f, "proctree", "tree.dstate", "", dstate);
  constant(f, "proctree", "proc.cpu_pct", "pid=100", main_cores * 100);
  constant(f, "proctree", "proc.rss_bytes", "pid=100", 300e6);
  gs_sink_event(f->sink, T0 + S / 100, "proc_start", "python3", 100, "", "");
}

static void host_and_job(struct fake *f, int ncpu, double busy_pct, double main_cores) {
  host_job(f, ncpu, busy_pct, main_cores, 0);
}

/* One GPU with constant signals; util NAN leaves util out, and clocked 0 leaves the SM clock and the
 * throttle reasons out (for the test to write them itself). */
static void gpu_with(struct fake *f, int g, double util, double sm, double tensor, double mem_used, int clocked) {
  char lab[16], key[32];
  snprintf(lab, sizeof lab, "gpu=%d", g);
  if (isfinite(util))
    constant(f, "nvml", "gpu.util_pct", lab, util);
  constant(f, "nvml", "gpu.sm_active_pct", lab, sm);
  constant(f, "nvml", "gpu.tensor_active_pct", lab, tensor);
  constant(f, "nvml", "gpu.mem_used_bytes", lab, mem_used);
  constant(f, "nvml", "gpu.mem_total_bytes", lab, 80e9);
  constant(f, "nvml", "gpu.sm_clock_max_mhz", lab, 1980);
  if (clocked) {
    constant(f, "nvml", "gpu.sm_clock_mhz", lab, 1980);
    constant(f, "nvml", "gpu.throttle_reasons", lab, 0);
  }
  snprintf(key, sizeof key, "gpu.%d.cc", g);
  gs_sink_param(f->sink, key, "9.0");
}

static void gpu(struct fake *f, int g, double util, double sm, double tensor, double mem_used) {
  gpu_with(f, g, util, sm, tensor, mem_used, 1);
}

/* Ends run f without diagnosing it. */
static void fake_close_run(struct fake *f) {
  struct gs_batch *b = gs_sink_take(f->sink);
  assert_int_equal(f->st->run_append(f->st, &f->run, b), 0);
  gs_batch_free(b);
  snprintf(f->run.status, sizeof f->run.status, "finished");
  f->run.exit_code = 0;
  f->run.end_wall_ns = f->run.start_wall_ns + (int64_t)(f->dur * S);
  assert_int_equal(f->st->run_end(f->st, &f->run), 0);
}

/* Ends the run and diagnoses it; returns the findings (caller frees). */
static struct store_finding *fake_end(struct fake *f, size_t *n) {
  fake_close_run(f);
  struct store_finding *out = NULL;
  assert_int_equal(doctor_run(f->st, f->run.id, &out, n), 0);
  for (size_t i = 0; i < *n; i++)
    assert_true(gs_json_object_valid(out[i].evidence));
  return out;
}

static void fake_free(struct fake *f, struct store_finding *fs) {
  free(fs);
  gs_sink_free(f->sink);
  f->st->close(f->st);
}

/* "a,b" == the set of rules found (order free). */
static void expect_rules(const struct store_finding *fs, size_t n, const char *want) {
  char got[512] = "";
  size_t o = 0;
  for (size_t i = 0; i < n; i++)
    o += (size_t)snprintf(got + o, sizeof got - o, "%s%s", i ? "," : "", fs[i].rule);
  size_t nwant = 1;
  for (const char *p = want; *p; p++)
    nwant += *p == ',';
  if (nwant != n)
    fail_msg("expected {%s}, got {%s}", want, got);
  char buf[256];
  snprintf(buf, sizeof buf, "%s", want);
  for (char *save, *r = strtok_r(buf, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (size_t i = 0; i < n; i++)
      found |= !strcmp(fs[i].rule, r);
    if (!found)
      fail_msg("expected {%s}, got {%s}", want, got);
  }
}

static const struct store_finding *find(const struct store_finding *fs, size_t n, const char *rule) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(fs[i].rule, rule))
      return &fs[i];
  static const struct store_finding none;
  fail_msg("no %s finding", rule);
  return &none;
}

static const struct store_finding *find_or_null(const struct store_finding *fs, size_t n, const char *rule);

/* ---- the training loop ---- */

static void test_input_bound_with_idle_core_advises_two_workers(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 50, 1.0);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "input_bound,loader_workers");
  const struct store_finding *lw = find(fs, n, "loader_workers");
  /* step 50 ms; load 40 ms; 2 workers: max(10, 20, 1 core x 50 ms / 2 cores) = 25 ms -> 2.0x */
  assert_non_null(strstr(lw->evidence, "\"recommended_workers\":2"));
  assert_non_null(strstr(lw->evidence, "\"2\":2"));
  assert_true(fabs(lw->speedup - 2.0) < 0.02);
  assert_true(fabs(find(fs, n, "input_bound")->share - 0.8) < 0.01);
  fake_free(&f, fs);
}

/* Other work takes the job's cores only as far as the job waits for them: on a host whose two CPUs
 * are full (the job's one core and another core of other work; PSI cpu some 95 %), a job that hardly
 * waited for a CPU (1 % of the time: it sits above the others in cgroup weight, as in
 * test_pair_speedup's cgroup, where it waits 0.5-1 %) still has both cores, and the job's CPU per step
 * (1 core x 50 ms) fits in 25 ms with two workers: 2.0x, as on an idle host; at 3.5 % (halfway from 2 %
 * to 5 %; the host's pressure not read, which above 2 % would say the cores are full) half the other
 * core is its loss: 1.5 usable cores, 1.5x; at 8.8 % (the case study's baseline beside CPU-bound
 * builds, where a worker made it slower) and at 40 % all of it: 0.5 usable cores, the least, and no
 * workers advice. */
static void test_other_work_counts_only_as_far_as_the_job_waits(void **state) {
  (void)state;
  static const struct {
    double runq_pct, speedup; /* 0: no loader_workers */
    int psi;
  } cases[] = {{1, 2.0, 1}, {3.5, 1.5, 0}, {8.8, 0, 1}, {8.8, 0, 0}, {40, 0, 1}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, 2, 100, 1.0);
    if (cases[k].psi)
      constant(&f, "host", "host.psi.cpu_some_pct", "", 95);
    constant(&f, "proctree", "proc.runq_wait_pct", "pid=100", cases[k].runq_pct);
    steps(&f, 0.040, 0.010, 0, 0);
    gs_sink_param(f.sink, "num_workers", "0");
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    const struct store_finding *lw = find_or_null(fs, n, "loader_workers");
    if (cases[k].speedup > 0 && !(lw && fabs(lw->speedup - cases[k].speedup) < 0.02))
      fail_msg("runq %.1f%%: %s", cases[k].runq_pct, lw ? lw->title : "no loader_workers");
    if (!(cases[k].speedup > 0) && lw)
      fail_msg("runq %.1f%%: %s", cases[k].runq_pct, lw->title);
    fake_free(&f, fs);
  }
}

/* Without workers the loader's CPU is a range from the training process's CPU: m = 1 core, 80 % data
 * wait, 2 usable cores: 0.75-1.25 cores, shown as a range; without the job's CPU (no process tree)
 * it is unknown, not the usable cores. Kills loader_cpu's `if (!isfinite(m) || !(ds > 0))` -> `if (0)`
 * and cores_text's `else if (hi - lo < 0.005)` -> `if (1)` (rules_loop.c). */
static void test_mutants_the_loader_cpu_range_without_workers(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 50, 1.0);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *ib = find(fs, n, "input_bound");
  assert_non_null(strstr(ib->evidence, "\"loader_cpu_cores_min\":0.75,"));
  assert_non_null(strstr(ib->evidence, "\"loader_cpu_cores_max\":1.25,"));
  assert_non_null(strstr(find(fs, n, "loader_workers")->fix, "0.75-1.25 cores"));
  fake_free(&f, fs);

  fake_begin(&f, 20);
  for (int c = 0; c < 2; c++)
    constant(&f, "host", "host.cpu.busy_pct", c ? "cpu=1" : "cpu=0", 50);
  constant(&f, "host", "host.cpu.busy_pct", "cpu=total", 50);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "0");
  fs = fake_end(&f, &n);
  ib = find(fs, n, "input_bound");
  assert_non_null(strstr(ib->evidence, "\"loader_cpu_cores_max\":null"));
  fake_free(&f, fs);
}

/* With one worker process (num_workers=1), the loader's CPU is that worker's own (0.9 cores), not a
 * split of the training process's. Kills loader_cpu's `dr_current_workers(d) > 0` -> `> 1`. */
static void test_mutants_one_worker_is_the_loader(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 4, 60, 0.3);
  int id = gs_sink_series(f.sink, "proctree", "proc.cpu_pct", "pid=101", "%", GS_GAUGE);
  for (int64_t t = 10; t <= 200; t++)
    gs_sink_put(f.sink, id, T0 + t * S / 10, 90);
  gs_sink_event(f.sink, T0 + S, "proc_start", "python3", 101, "", "");
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "1");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *ib = find(fs, n, "input_bound");
  /* 0.9 cores over the ~95 % of the window the worker lived (the split of the trainer's 0.3 cores
   * would say 0-0.375) */
  const char *lo = strstr(ib->evidence, "\"loader_cpu_cores_min\":"),
             *hi = strstr(ib->evidence, "\"loader_cpu_cores_max\":");
  assert_non_null(lo);
  assert_non_null(hi);
  double l = strtod(lo + 23, NULL), h = strtod(hi + 23, NULL);
  assert_true(l == h && l > 0.8 && l <= 0.9);
  fake_free(&f, fs);
}

static void test_input_bound_on_saturated_cpu_gives_no_worker_advice(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 100, 2.0);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "2");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "input_bound");
  fake_free(&f, fs);
}

static void test_cgroup_quota_bounds_the_worker_advice(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 13, 1.0); /* eight idle CPUs, but the job's cgroup may use one core */
  constant(&f, "host", "host.cgroup.cpu_limit_cores", "", 1.0);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "input_bound");
  /* the quota that binds is named: "the cores it can" would read as the host's eight */
  assert_non_null(strstr(find(fs, n, "input_bound")->fix, "already uses the 1.0 cores its cgroup's CPU quota allows"));
  fake_free(&f, fs);
}

static void test_cpuset_bounds_the_worker_advice(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 13, 1.0); /* eight idle CPUs, but the job may run on one (affinity / cpuset) */
  constant(&f, "host", "host.cpuset_cores", "", 1.0);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "input_bound");
  assert_non_null(strstr(find(fs, n, "input_bound")->evidence, "\"usable_cores\":1"));
  fake_free(&f, fs);
}

/* Predecoding keeps what a batch costs from cached samples: the collate the client timed
 * (loader_collate_s), 5 ms of the 40 ms data wait, so the 50 ms step becomes 10 + 5 ms, not 10 ms.
 * The job's one core is its whole cpuset, so the CPU bound holds too: the loading's part of the
 * job's CPU shrinks with it (else the bound would keep the step at 50 ms). */
static void test_input_bound_keeps_the_measured_collate(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 13, 1.0);
  constant(&f, "host", "host.cpuset_cores", "", 1.0);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "0");
  gs_sink_param(f.sink, "loader_collate_s", "0.005");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *ib = find(fs, n, "input_bound");
  if (fabs(ib->speedup - 0.050 / 0.015) > 0.05)
    fail_msg("input_bound %.3fx, want %.3fx (T / (T - data wait + collate))", ib->speedup, 0.050 / 0.015);
  assert_non_null(strstr(ib->evidence, "\"collate_s\":0.005"));
  fake_free(&f, fs);
}

/* Without a timed collate the estimate says it counts a cached batch's cost as nothing. */
static void test_input_bound_says_an_unmeasured_residual_counts_as_nothing(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 13, 1.0);
  constant(&f, "host", "host.cpuset_cores", "", 1.0);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  assert_non_null(strstr(find(fs, n, "input_bound")->fix, "the collate was not timed"));
  fake_free(&f, fs);
}

static void test_loading_in_threads_is_named_and_processes_advised(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 4, 25, 1.0); /* one core busy of four, no worker processes, no num_workers */
  constant(&f, "proctree", "proc.threads", "pid=100", 12);
  steps(&f, 0.040, 0.010, 0, 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *lw = find(fs, n, "loader_workers");
  assert_null(strstr(lw->title, "raise num_workers"));
  assert_non_null(strstr(lw->title, "worker process"));
  assert_non_null(strstr(lw->fix, "GIL"));
  assert_non_null(strstr(lw->fix, "12 threads"));
  fake_free(&f, fs);
}

static void test_data_wait_with_idle_loader_is_latency(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 15, 0.2); /* the main process computes 20% of the time and idles while loading */
  steps(&f, 0.040, 0.010, 0, 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "input_latency");
  fake_free(&f, fs);
}

/* The same low CPU, but the loading process waited for a CPU 70 % of the time (schedstat's run delay:
 * the host's CPUs were taken by others): a starved loader, not latency — it is input-bound. Without
 * workers the training process also computes (20 % of the step here), and a wait that fits in that
 * part of the step may all be the computing's: at 30 % at least 10 points of it fall in the data wait,
 * 0.125 of the loading, under the starved line (the job of test_compare, which sleeps for its data, on
 * a machine whose CPUs burners keep full); at 70 % at least 0.625 of the loading waited. A run-queue
 * wait of 5 % keeps the latency verdict. */
static void test_a_starved_loader_is_not_latency(void **state) {
  (void)state;
  const struct {
    double runq_pct, loading;
    const char *rule, *not_rule;
  } cases[] = {{70, 0.625, "input_bound", "input_latency"},
               {30, 0.125, "input_latency", "input_bound"},
               {5, 0, "input_latency", "input_bound"}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, 2, 15, 0.2);
    constant(&f, "proctree", "proc.runq_wait_pct", "pid=100", cases[c].runq_pct);
    steps(&f, 0.040, 0.010, 0, 0);
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    const struct store_finding *hit = find(fs, n, cases[c].rule);
    assert_non_null(hit);
    assert_null(find_or_null(fs, n, cases[c].not_rule));
    char want[64];
    snprintf(want, sizeof want, "\"loader_runq_wait_share\":%g", cases[c].runq_pct / 100);
    if (!strstr(hit->evidence, want))
      fail_msg("want %s in %s", want, hit->evidence);
    snprintf(want, sizeof want, "\"loading_runq_wait_share\":%g", cases[c].loading);
    if (!strstr(hit->evidence, want))
      fail_msg("want %s in %s", want, hit->evidence);
    fake_free(&f, fs);
  }
}

static void test_data_wait_in_d_state_is_storage(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_job(&f, 2, 20, 0.3, 0.8);
  steps(&f, 0.040, 0.010, 0, 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "io_bound");
  fake_free(&f, fs);
}

static void test_compute_bound_cpu_run_is_healthy(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 50, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "healthy");
  assert_string_equal(fs[0].severity, "info");
  fake_free(&f, fs);
}

static void test_blocked_cpu_loop_is_host_code(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 10, 0.2);
  steps(&f, 0.001, 0.050, 0, 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "host_code_bound");
  fake_free(&f, fs);
}

/* The same low CPU on a host whose tasks wait for a CPU most of the time is contention, not a loop
 * that blocks (the scenario suite's healthy CPU training on a machine shared with busy neighbours). */
static void test_a_contended_host_gets_no_host_code_nor_worker_advice(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 100, 0.2);
  constant(&f, "host", "host.psi.cpu_some_pct", "", 95);
  steps(&f, 0.001, 0.050, 0, 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  assert_null(find_or_null(fs, n, "host_code_bound"));
  assert_non_null(strstr(find(fs, n, "healthy")->evidence, "\"not_judged\":\"host_code_bound: the host's CPUs"));
  fake_free(&f, fs);

  /* and a CPU-bound loader there gets no worker advice: the cores are full, more workers only queue */
  fake_begin(&f, 20);
  host_and_job(&f, 2, 100, 0.3); /* starved below the usable cores' floor: the CPU term sees room */
  constant(&f, "host", "host.psi.cpu_some_pct", "", 95);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "0");
  fs = fake_end(&f, &n);
  assert_non_null(find_or_null(fs, n, "input_bound"));
  assert_null(find_or_null(fs, n, "loader_workers"));
  fake_free(&f, fs);
}

static void test_regular_gaps_between_steps_are_periodic_stalls(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 30);
  host_and_job(&f, 2, 50, 1.0);
  steps(&f, 0.001, 0.020, 100, 0.8); /* 0.8 s pause every ~2.1 s */
  gs_sink_event(f.sink, T0 + 3 * S, "mark", "eval", 1, "", "");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "periodic_stall");
  assert_non_null(strstr(find(fs, n, "periodic_stall")->title, "eval"));
  fake_free(&f, fs);
}

/* The main loop's steps: data + compute seconds back to back, one split until switch_s, another after. */
static void two_stretch_steps(struct fake *f, double switch_s, double data1, double comp1, double data2, double comp2) {
  int ids[4] = {gs_sink_series(f->sink, "client", "step.total_s", "", "s", GS_GAUGE),
                gs_sink_series(f->sink, "client", "step.data_s", "", "s", GS_GAUGE),
                gs_sink_series(f->sink, "client", "step.compute_s", "", "s", GS_GAUGE),
                gs_sink_series(f->sink, "client", "step.samples", "", "count", GS_GAUGE)};
  for (double t = 0.5;;) {
    double data = t < switch_s ? data1 : data2, comp = t < switch_s ? comp1 : comp2;
    if (t + data + comp >= f->dur)
      break;
    t += data + comp;
    int64_t at = T0 + (int64_t)(t * S);
    gs_sink_put(f->sink, ids[0], at, data + comp);
    gs_sink_put(f->sink, ids[1], at, data);
    gs_sink_put(f->sink, ids[2], at, comp);
    gs_sink_put(f->sink, ids[3], at, 32);
  }
}

/* Ends run f and begins the next, of group `group` on `host`, in the same store a second later. */
static void fake_next_in_group(struct fake *f, const char *group, const char *host) {
  fake_close_run(f);
  /* one run per store handle and sink, as each agent has its own */
  char url[400];
  snprintf(url, sizeof url, "sqlite://%s/d%d.db", dir, dbn - 1);
  f->st->close(f->st);
  assert_non_null(f->st = store_open(url));
  gs_sink_free(f->sink);
  f->sink = gs_sink_new();
  f->run.start_wall_ns += S;
  snprintf(f->run.group, sizeof f->run.group, "%s", group);
  snprintf(f->run.host, sizeof f->run.host, "%s", host);
  snprintf(f->run.status, sizeof f->run.status, "running");
  f->run.id[0] = 0;
  f->run.end_wall_ns = 0;
  f->run.exit_code = -1;
  assert_int_equal(f->st->run_begin(f->st, &f->run), 0);
}

/* One task per GPU: two runs of a group on one host, no steps, each seeing the node's two GPUs (the
 * same UUIDs). The group counts two GPUs and two CPUs, not four, and the doctor reads the job of the
 * run that kept the most CPU busy (the second: there is no rank to pick by), on that run's labels. */
static void test_group_runs_on_one_host_count_gpus_once_and_read_the_busiest_job(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 10); /* a run outside the group */
  for (int r = 0; r < 2; r++) {
    fake_next_in_group(&f, "g", "h");
    host_and_job(&f, 2, 50, r ? 1.5 : 0.5);
    gpu(&f, 0, 90, 80, 0, 40e9);
    gpu(&f, 1, 90, 80, 0, 40e9);
    gs_sink_param(f.sink, "gpu.0.uuid", "GPU-aaaa");
    gs_sink_param(f.sink, "gpu.1.uuid", "GPU-bbbb");
  }
  fake_close_run(&f);
  char node[64];
  snprintf(node, sizeof node, "host=h,run=%s", f.run.id);
  struct store *g = store_group_open(f.st, "g");
  assert_non_null(g);
  struct runview v;
  assert_int_equal(runview_load(g, "g", &v), 0);
  struct dr_run d;
  assert_int_equal(dr_run_load(&v, INT64_MIN, INT64_MAX, &d), 0);
  assert_int_equal(d.ngpus, 2);
  assert_int_equal(d.ncpu, 2);
  assert_string_equal(d.host, "h");
  assert_string_equal(d.node, node);
  assert_true(fabs(d.tree_cpu.mean - 150) < 1e-6);
  assert_string_equal(runview_param(&v, "gpu.count"), "2");
  dr_run_done(&d);
  runview_done(&v);
  g->close(g);
  fake_free(&f, NULL);
}

/* The live findings of serve and top: a window names a stretch of the run, and the doctor diagnoses
 * that stretch alone — input-bound for the first 20 s, healthy after — while the usual window (the
 * whole run) still sees the input wait. */
static void test_window_of_a_run_gives_that_stretchs_finding(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 40);
  host_and_job(&f, 2, 100, 2.0);
  two_stretch_steps(&f, 20, 0.040, 0.010, 0.001, 0.020);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  struct runview v;
  assert_int_equal(runview_load(f.st, f.run.id, &v), 0);
  struct store_finding *w = NULL;
  size_t nw = 0;
  assert_int_equal(doctor_diagnose_view(&v, INT64_MIN, INT64_MAX, &w, &nw), 0);
  expect_rules(w, nw, "input_bound");
  assert_true(w[0].share < 0.6); /* the whole run: diluted by the healthy half */
  free(w);
  assert_int_equal(doctor_diagnose_view(&v, 0, 20 * S, &w, &nw), 0);
  expect_rules(w, nw, "input_bound");
  assert_true(fabs(w[0].share - 0.8) < 0.02);
  assert_non_null(strstr(w[0].evidence, "\"data_wait_share\":0.8"));
  free(w);
  assert_int_equal(doctor_diagnose_view(&v, 20 * S, 40 * S, &w, &nw), 0);
  expect_rules(w, nw, "healthy");
  free(w);
  runview_done(&v);
  fake_free(&f, fs);
}

/* The roles top names: the launcher (sh -c), the training process, its loader workers (long-lived,
 * started after it), and a helper seen too briefly to be a worker. */
static void test_proc_roles_name_launcher_trainer_and_workers(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 4, 60, 1.0); /* pid 100, python3, from the start */
  constant(&f, "proctree", "proc.cpu_pct", "pid=99", 0);
  gs_sink_event(f.sink, T0, "proc_start", "sh", 99, "", "");
  for (int pid = 101; pid <= 102; pid++) {
    char lab[16];
    snprintf(lab, sizeof lab, "pid=%d", pid);
    int id = gs_sink_series(f.sink, "proctree", "proc.cpu_pct", lab, "%", GS_GAUGE);
    for (int64_t t = 10; t <= 200; t++)
      gs_sink_put(f.sink, id, T0 + t * S / 10, 80);
    gs_sink_event(f.sink, T0 + S, "proc_start", "python3", pid, "", "");
  }
  int brief = gs_sink_series(f.sink, "proctree", "proc.cpu_pct", "pid=103", "%", GS_GAUGE);
  for (int64_t t = 50; t <= 60; t++)
    gs_sink_put(f.sink, brief, T0 + t * S / 10, 50);
  gs_sink_event(f.sink, T0 + 5 * S, "proc_start", "nvidia-smi", 103, "", "");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  struct runview v;
  assert_int_equal(runview_load(f.st, f.run.id, &v), 0);
  struct doctor_proc_role *roles = NULL;
  size_t nr = 0;
  assert_int_equal(doctor_proc_roles(&v, INT64_MIN, INT64_MAX, &roles, &nr), 0);
  assert_int_equal(nr, 5);
  for (size_t i = 0; i < nr; i++) {
    enum doctor_role want = roles[i].pid == 99    ? DOCTOR_ROLE_LAUNCHER
                            : roles[i].pid == 100 ? DOCTOR_ROLE_TRAINER
                            : roles[i].pid == 103 ? DOCTOR_ROLE_OTHER
                                                  : DOCTOR_ROLE_WORKER;
    assert_int_equal(roles[i].role, want);
  }
  assert_string_equal(doctor_role_name(DOCTOR_ROLE_WORKER), "loader worker");
  assert_string_equal(doctor_role_name(DOCTOR_ROLE_OTHER), "");
  free(roles);
  runview_done(&v);
  fake_free(&f, fs);
}

/* Healthy only on evidence: nothing measured is its own verdict, listing what was missing. */
static void test_run_without_signals_is_not_enough_to_judge(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 5);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "insufficient_data");
  assert_non_null(strstr(fs[0].title, "Not enough measured to judge"));
  assert_non_null(strstr(fs[0].evidence, "\"missing\":\"gpu, steps, job_cpu, host_cpu\""));
  assert_string_equal(fs[0].severity, "info");
  fake_free(&f, fs);
}

/* Each of the four kinds of evidence alone is enough to judge: steps alone, the job's CPU alone, the
 * host's CPU alone (a GPU alone: test_mutants_a_busy_gpu_alone_is_judged_healthy). Kills
 * measured_enough's second and third `||` -> `&&` (doctor.c). */
static void test_mutants_each_kind_of_evidence_alone_is_enough(void **state) {
  (void)state;
  for (int kind = 0; kind < 3; kind++) {
    struct fake f;
    fake_begin(&f, 20);
    if (kind == 0)
      steps(&f, 0.001, 0.020, 0, 0);
    else if (kind == 1)
      constant(&f, "proctree", "tree.cpu_pct", "", 100);
    else
      constant(&f, "host", "host.cpu.busy_pct", "cpu=total", 50);
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++)
      if (!strcmp(fs[i].rule, "insufficient_data"))
        fail_msg("evidence kind %d alone was not enough to judge", kind);
    fake_free(&f, fs);
  }
}

/* ---- GPUs ---- */

static void test_busy_gpu_is_healthy(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  gpu(&f, 0, 97, 80, 55, 68e9);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "healthy");
  fake_free(&f, fs);
}

/* A busy GPU is evidence enough, with nothing else measured (no steps, no host, no job CPU): the run
 * is judged healthy, not "not enough to judge", its title names the GPU and the missing step timings,
 * and a healthy finding costs nothing. Kills (mutation pass, docs/mutation.md) doctor.c's
 * measured_enough `||` -> `&&`, the title's `else if (d->ngpus)` -> `if (0)` and healthy's share
 * `0` -> `1`. */
static void test_mutants_a_busy_gpu_alone_is_judged_healthy(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  gpu(&f, 0, 97, 80, 55, 68e9);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "healthy");
  const struct store_finding *h = find(fs, n, "healthy");
  assert_non_null(strstr(h->title, "GPU busy 97%"));
  assert_non_null(strstr(h->title, "no step timings (the job did not use the gpuscope client)"));
  assert_true(h->share == 0);
  fake_free(&f, fs);
}

/* Mixed precision on a GPU-only run (no steps, no host): the estimate still comes out of the step
 * model, above 1 (which is why the rule's own first guess, 1 / (1 - share), is equivalent when
 * mutated: dr_evaluate_changes replaces it; tests/mutation/equivalent.txt). */
static void test_mutants_mixed_precision_without_steps_has_an_estimate(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  gpu(&f, 0, 97, 80, 1, 68e9);
  gs_sink_param(f.sink, "precision", "fp32");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *mp = find(fs, n, "mixed_precision");
  assert_true(mp->speedup > 1.2 && mp->speedup < 2);
  fake_free(&f, fs);
}

static void test_gpu_rules(void **state) {
  (void)state;
  static const struct {
    const char *want;
    double util, sm, tensor, mem;
    const char *precision, *pin;
    double rx;
  } cases[] = {
      {"batch_too_small", 96, 30, 20, 12e9, "bf16", "True", 0},
      {"mixed_precision", 97, 80, 1, 68e9, NULL, "True", 0},
      {"mixed_precision", 97, 80, 40, 68e9, "fp32", "True", 0},
      {"pageable_copies", 62, 50, 50, 68e9, "bf16", "False", 3e9},
      {"host_code_bound", 34, 24, 18, 66e9, "bf16", "True", 0},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, 8, 20, 0.5);
    steps(&f, 0.001, 0.020, 0, 0);
    gpu(&f, 0, cases[k].util, cases[k].sm, cases[k].tensor, cases[k].mem);
    if (cases[k].rx)
      constant(&f, "nvml", "gpu.pcie_rx_bytes_s", "gpu=0", cases[k].rx);
    if (cases[k].precision)
      gs_sink_param(f.sink, "precision", cases[k].precision);
    gs_sink_param(f.sink, "pin_memory", cases[k].pin);
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    expect_rules(fs, n, cases[k].want);
    fake_free(&f, fs);
  }
}

static void test_thermal_reasons_are_throttling(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  gpu_with(&f, 0, 97, 80, 55, 68e9, 0);
  periodic(&f, "nvml", "gpu.throttle_reasons", "gpu=0", 4, 0.6, 0, 0x20 | 0x40);
  periodic(&f, "nvml", "gpu.sm_clock_mhz", "gpu=0", 4, 0.6, 1980, 1200);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "throttled");
  const struct store_finding *t = find(fs, n, "throttled");
  assert_non_null(strstr(t->title, "SwThermalSlowdown"));
  /* 40% of the time at 1200/1980 of the clock, 97% busy: about 15% lost */
  assert_true(t->share > 0.12 && t->share < 0.18);
  fake_free(&f, fs);
}

static void test_multi_gpu_idle_and_straggler(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  gpu(&f, 0, 97, 82, 55, 68e9);
  gpu(&f, 1, 97, 82, 55, 68e9);
  gpu(&f, 2, 62, 45, 30, 68e9);
  gpu(&f, 3, 0, 0, 0, 1e9);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "straggler,underused_gpus");
  assert_non_null(strstr(find(fs, n, "straggler")->evidence, "\"gpu\":2"));
  assert_non_null(strstr(find(fs, n, "underused_gpus")->evidence, "\"idle_gpus\":\"3\""));
  /* the idle GPU is not one of the used ones the straggler is compared with (kills signals_gpu.c's
   * `if (g->used) d->nused++` -> `if (1)`) */
  assert_non_null(strstr(find(fs, n, "straggler")->evidence, "\"gpus_used\":3"));
  assert_non_null(strstr(find(fs, n, "straggler")->fix, "(CUDA_VISIBLE_DEVICES)"));
  fake_free(&f, fs);
}

/* On AMD GPUs the straggler's fix names AMD's variable, not NVIDIA's tools. */
static void test_an_amd_straggler_names_hip_visible_devices(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  for (int g = 0; g < 3; g++) {
    char key[32];
    snprintf(key, sizeof key, "gpu.%d.vendor", g);
    gs_sink_param(f.sink, key, "amd");
    gpu(&f, g, g == 2 ? 62 : 97, g == 2 ? 45 : 82, g == 2 ? 30 : 55, 68e9);
  }
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *s = find(fs, n, "straggler");
  assert_non_null(s);
  assert_non_null(strstr(s->fix, "(HIP_VISIBLE_DEVICES)"));
  assert_null(strstr(s->fix, "nvidia-smi"));
  fake_free(&f, fs);
}

/* A counter of GPU g rising linearly from 0 to top over the run, read every 5 s (as the collector's
 * health counters are). */
static void rising(struct fake *f, const char *name, int g, double top) {
  char lab[16];
  snprintf(lab, sizeof lab, "gpu=%d", g);
  int id = gs_sink_series(f->sink, "nvml", name, lab, "", GS_COUNTER);
  for (int64_t t = 0; t <= (int64_t)f->dur; t += 5)
    gs_sink_put(f->sink, id, T0 + t * S, top * (double)t / f->dur);
}

/* An Xid 79 on GPU 3 two seconds before the job failed: the first finding says so (the whole run
 * lost), names the GPU and the action, and the other rules' advice (the idle GPU's) is left out. */
static void test_xid_before_the_job_died_comes_first(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  for (int g = 0; g < 3; g++)
    gpu(&f, g, 97, 82, 55, 68e9);
  gpu(&f, 3, 0, 0, 0, 1e9);
  gs_sink_event(f.sink, T0 + 18 * S, "xid", "79", 79, "gpu=3", "Xid 79 (fallen off the bus)");
  struct gs_batch *b = gs_sink_take(f.sink);
  assert_int_equal(f.st->run_append(f.st, &f.run, b), 0);
  gs_batch_free(b);
  snprintf(f.run.status, sizeof f.run.status, "failed");
  f.run.exit_code = 1;
  f.run.end_wall_ns = f.run.start_wall_ns + 20 * S;
  assert_int_equal(f.st->run_end(f.st, &f.run), 0);
  struct store_finding *fs = NULL;
  size_t n;
  assert_int_equal(doctor_run(f.st, f.run.id, &fs, &n), 0);
  expect_rules(fs, n, "gpu_xid");
  assert_string_equal(fs[0].title,
                      "GPU 3 reported Xid 79 (fallen off the bus) 2 s before the job died: not the training code; "
                      "drain the node");
  assert_string_equal(fs[0].severity, "high");
  assert_non_null(strstr(fs[0].fix, "reboot"));
  fake_free(&f, fs);
}

/* The same Xid in a run that finished is a finding, not the whole run, and the others stay. */
static void test_xid_in_a_finished_run_is_a_finding_beside_the_others(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  for (int g = 0; g < 3; g++)
    gpu(&f, g, 97, 82, 55, 68e9);
  gpu(&f, 3, 0, 0, 0, 1e9);
  gs_sink_event(f.sink, T0 + 4 * S, "xid", "13", 13, "gpu=1", "Xid 13");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "underused_gpus,gpu_xid");
  assert_non_null(strstr(find(fs, n, "gpu_xid")->title, "GPU 1 reported Xid 13 (graphics engine exception) at 4 s"));
  fake_free(&f, fs);
}

/* A straggling GPU whose PCIe link replays has that named as the likely cause; uncorrected ECC errors
 * during the run are a finding of their own. */
static void test_straggler_with_pcie_replays_names_them(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  for (int g = 0; g < 4; g++) {
    gpu(&f, g, g == 2 ? 62 : 97, g == 2 ? 45 : 82, g == 2 ? 30 : 55, 68e9);
    rising(&f, "gpu.pcie_replays", g, g == 2 ? 4000 : 0);
    rising(&f, "gpu.ecc_dbe_volatile", g, g == 1 ? 2 : 0);
  }
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "straggler,gpu_ecc");
  const struct store_finding *s = find(fs, n, "straggler");
  assert_non_null(strstr(s->title, "GPU 2 is 37 points behind"));
  assert_non_null(strstr(s->title, " — its PCIe link replayed "));
  assert_non_null(strstr(s->title, " times during the run: the likely cause"));
  assert_non_null(strstr(s->evidence, "\"health\":"));
  assert_non_null(strstr(find(fs, n, "gpu_ecc")->title, "GPU 1 had "));
  assert_non_null(strstr(find(fs, n, "gpu_ecc")->title, " uncorrected ECC error"));
  fake_free(&f, fs);
}

/* A GPU whose PCIe link replays (or with a row remap pending) is sick: its run gets no batch or host
 * code advice from its idle time (the batch case of test_gpu_rules, without and with replays, and
 * with the remap pending). */
static void test_a_sick_gpus_idle_time_is_no_batch_advice(void **state) {
  (void)state;
  for (int k = 0; k < 3; k++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, 8, 20, 0.5);
    steps(&f, 0.001, 0.020, 0, 0);
    gpu(&f, 0, 96, 30, 20, 12e9);
    gs_sink_param(f.sink, "precision", "bf16");
    gs_sink_param(f.sink, "pin_memory", "True");
    if (k == 1)
      rising(&f, "gpu.pcie_replays", 0, 4000);
    if (k == 2)
      constant(&f, "nvml", "gpu.remap_pending", "gpu=0", 1);
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    expect_rules(fs, n, k == 0 ? "batch_too_small" : "gpu_health");
    if (k)
      assert_non_null(strstr(fs[0].title, k == 1 ? "GPU 0 looks sick: its PCIe link replayed "
                                                 : "GPU 0 looks sick: it has a row remap pending"));
    fake_free(&f, fs);
  }
}

/* In a group, the straggling GPU's title names where it is, with what the group's params say: the
 * host alone, the host and the GPU's number on it, or both and the rank using it. Kills
 * name_host's `else if (local)` -> `if (1)` (rules_gpu.c). */
static void test_mutants_a_group_straggler_names_its_host_with_what_is_known(void **state) {
  (void)state;
  static const struct {
    const char *local, *rank, *want;
  } cases[] = {{NULL, NULL, " (host node-b)"},
               {"1", NULL, " (GPU 1 of host node-b)"},
               {"1", "5", " (GPU 1 of host node-b, rank 5)"}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, 8, 20, 1.0);
    steps(&f, 0.001, 0.020, 0, 0);
    gpu(&f, 0, 97, 82, 55, 68e9);
    gpu(&f, 1, 97, 82, 55, 68e9);
    gpu(&f, 2, 62, 45, 30, 68e9);
    gs_sink_param(f.sink, "group.gpu.2.host", "node-b");
    if (cases[c].local)
      gs_sink_param(f.sink, "group.gpu.2.local", cases[c].local);
    if (cases[c].rank)
      gs_sink_param(f.sink, "group.gpu.2.rank", cases[c].rank);
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    const char *title = find(fs, n, "straggler")->title;
    size_t tl = strlen(title), wl = strlen(cases[c].want);
    assert_true(tl > wl);
    assert_string_equal(title + tl - wl, cases[c].want); /* at the end, after the title's own figures */
    fake_free(&f, fs);
  }
}

static void test_slow_rank_is_a_straggler(void **state) {
  (void)state;
  /* 4 ranks of one synchronous job, 30 ms steps: rank 3 waits 15 ms for data, the others 1 ms and
   * spend the rest waiting for it inside their all-reduce */
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 60, 4.0);
  rank_steps(&f, "", 0.001, 0.029, 0, 0);
  rank_steps(&f, "rank=1", 0.001, 0.029, 0, 0);
  rank_steps(&f, "rank=2", 0.002, 0.028, 0, 0);
  rank_steps(&f, "rank=3", 0.015, 0.015, 0, 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "straggler");
  const struct store_finding *s = find(fs, n, "straggler");
  assert_non_null(strstr(s->evidence, "\"rank\":3"));
  assert_true(fabs(s->share - (0.015 - 0.001) / 0.030) < 0.02);
  assert_non_null(strstr(s->title, "rank 3"));
  fake_free(&f, fs);

  /* the same ranks with even inputs: nothing to report */
  fake_begin(&f, 20);
  host_and_job(&f, 8, 60, 4.0);
  rank_steps(&f, "", 0.001, 0.029, 0, 0);
  rank_steps(&f, "rank=1", 0.002, 0.028, 0, 0);
  rank_steps(&f, "rank=7", 0.003, 0.027, 0, 0);
  fs = fake_end(&f, &n);
  expect_rules(fs, n, "healthy");
  fake_free(&f, fs);
}

static void test_gpu_idle_gaps_are_periodic_stalls(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 30);
  host_and_job(&f, 8, 20, 1.0);
  gpu_with(&f, 0, NAN, 80, 55, 68e9, 1);
  periodic(&f, "nvml", "gpu.util_pct", "gpu=0", 3, 0.7, 97, 0); /* 0.9 s idle every 3 s, no steps */
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "periodic_stall");
  assert_non_null(strstr(find(fs, n, "periodic_stall")->evidence, "GPU idle gaps"));
  fake_free(&f, fs);
}

/* ---- each rule with each of its inputs removed in turn ----
 *
 * A rule that lacks an input does not fire, or fires with that input null in its evidence and no
 * figure made up in its text (docs/diagnosis.md, "Missing is not zero"). Each case below builds a run
 * on which the rule fires, then leaves out one input at a time. */

static const char *omitted = ""; /* the input the builder leaves out ("" none) */

static int has(const char *input) {
  return strcmp(omitted, input) != 0;
}

/* host_job's run with every input gated by has(). */
static void host_job_gated(struct fake *f, int ncpu, double busy_pct, double main_cores, double dstate) {
  if (has("host.cpu")) {
    for (int c = 0; c < ncpu; c++) {
      char lab[16];
      snprintf(lab, sizeof lab, "cpu=%d", c);
      constant(f, "host", "host.cpu.busy_pct", lab, busy_pct);
    }
    constant(f, "host", "host.cpu.busy_pct", "cpu=total", busy_pct);
  }
  if (has("mem"))
    constant(f, "host", "host.mem.available_bytes", "", 20e9);
  if (has("tree.cpu"))
    constant(f, "proctree", "tree.cpu_pct", "", main_cores * 100);
  if (has("tree.dstate"))
    constant(f, "proctree", "tree.dstate", "", dstate);
  if (has("tree.read"))
    constant(f, "proctree", "tree.read_bytes_s", "", 200e6);
  if (has("proc")) {
    constant(f, "proctree", "proc.cpu_pct", "pid=100", main_cores * 100);
    if (has("mem"))
      constant(f, "proctree", "proc.rss_bytes", "pid=100", 300e6);
    gs_sink_event(f->sink, T0 + S / 100, "proc_start", "python3", 100, "", "");
  }
}

/* Steps with their phases gated: "step" leaves all out, "step.data" the data phase. */
static void steps_gated(struct fake *f, const char *labels, double data, double compute, int gap_every, double gap_s) {
  if (!has("step"))
    return;
  int ids[4] = {gs_sink_series(f->sink, "client", "step.total_s", labels, "s", GS_GAUGE),
                has("step.data") ? gs_sink_series(f->sink, "client", "step.data_s", labels, "s", GS_GAUGE) : -1,
                gs_sink_series(f->sink, "client", "step.compute_s", labels, "s", GS_GAUGE),
                gs_sink_series(f->sink, "client", "step.samples", labels, "count", GS_GAUGE)};
  double t = 0.5;
  for (int n = 0; t + data + compute < f->dur; n++) {
    t += data + compute;
    if (gap_every && n % gap_every == gap_every - 1)
      t += gap_s;
    int64_t at = T0 + (int64_t)(t * S);
    gs_sink_put(f->sink, ids[0], at, data + compute);
    if (ids[1] >= 0)
      gs_sink_put(f->sink, ids[1], at, data);
    gs_sink_put(f->sink, ids[2], at, compute);
    gs_sink_put(f->sink, ids[3], at, 32);
  }
}

static void param_gated(struct fake *f, const char *key, const char *value) {
  if (has(key))
    gs_sink_param(f->sink, key, value);
}

/* One GPU, every signal gated ("gpu.util", "gpu.sm", "gpu.tensor", "gpu.mem_used", "gpu.mem_total",
 * "gpu.clock", "gpu.throttle", "gpu.cc", "gpu.pcie_rx"); the job has a process on it, so the GPU
 * counts as used even without util. Throttling: 40% of the time at 1200 of 1980 MHz when hot. */
static void gpu_gated(struct fake *f, int g, double util, double sm, double tensor, double mem_used, int hot,
                      double rx) {
  char lab[16], key[32], plab[32];
  snprintf(lab, sizeof lab, "gpu=%d", g);
  snprintf(plab, sizeof plab, "gpu=%d,pid=100", g);
  if (has("gpu.util"))
    constant(f, "nvml", "gpu.util_pct", lab, util);
  if (has("gpu.sm"))
    constant(f, "nvml", "gpu.sm_active_pct", lab, sm);
  if (has("gpu.tensor"))
    constant(f, "nvml", "gpu.tensor_active_pct", lab, tensor);
  if (has("gpu.mem_used"))
    constant(f, "nvml", "gpu.mem_used_bytes", lab, mem_used);
  if (has("gpu.mem_total"))
    constant(f, "nvml", "gpu.mem_total_bytes", lab, 80e9);
  constant(f, "nvml", "gpu.proc_mem_bytes", plab, mem_used);
  if (rx > 0 && has("gpu.pcie_rx"))
    constant(f, "nvml", "gpu.pcie_rx_bytes_s", lab, rx);
  if (has("gpu.clock"))
    constant(f, "nvml", "gpu.sm_clock_max_mhz", lab, 1980);
  if (hot) {
    if (has("gpu.throttle"))
      periodic(f, "nvml", "gpu.throttle_reasons", lab, 4, 0.6, 0, 0x20 | 0x40);
    if (has("gpu.clock"))
      periodic(f, "nvml", "gpu.sm_clock_mhz", lab, 4, 0.6, 1980, 1200);
  } else {
    if (has("gpu.throttle"))
      constant(f, "nvml", "gpu.throttle_reasons", lab, 0);
    if (has("gpu.clock"))
      constant(f, "nvml", "gpu.sm_clock_mhz", lab, 1980);
  }
  snprintf(key, sizeof key, "gpu.%d.cc", g);
  if (has("gpu.cc"))
    gs_sink_param(f->sink, key, "9.0");
}

static void build_input_workers(struct fake *f) {
  host_job_gated(f, 2, 50, 1.0, 0);
  steps_gated(f, "", 0.040, 0.010, 0, 0);
  param_gated(f, "num_workers", "0");
  param_gated(f, "batch_size", "32");
}
static void build_latency(struct fake *f) {
  host_job_gated(f, 2, 15, 0.2, 0);
  steps_gated(f, "", 0.040, 0.010, 0, 0);
}
static void build_io(struct fake *f) {
  host_job_gated(f, 2, 20, 0.3, 0.8);
  steps_gated(f, "", 0.040, 0.010, 0, 0);
}
static void build_host_code_cpu(struct fake *f) {
  host_job_gated(f, 2, 10, 0.2, 0);
  steps_gated(f, "", 0.001, 0.050, 0, 0);
}
static void build_gpu_base(struct fake *f, double util, double sm, double tensor, double mem, int hot, double rx) {
  host_job_gated(f, 8, 20, 0.5, 0);
  steps_gated(f, "", 0.001, 0.020, 0, 0);
  gpu_gated(f, 0, util, sm, tensor, mem, hot, rx);
}
static void build_host_code_gpu(struct fake *f) {
  build_gpu_base(f, 34, 24, 18, 66e9, 0, 0);
  gs_sink_param(f->sink, "precision", "bf16");
}
static void build_stalls(struct fake *f) {
  host_job_gated(f, 2, 50, 1.0, 0);
  steps_gated(f, "", 0.001, 0.020, 100, 0.8);
  if (has("marks"))
    gs_sink_event(f->sink, T0 + 3 * S, "mark", "eval", 1, "", "");
}
static void build_batch(struct fake *f) {
  build_gpu_base(f, 96, 30, 20, 12e9, 0, 0);
  gs_sink_param(f->sink, "precision", "bf16");
  param_gated(f, "batch_size", "32");
}
static void build_mixed(struct fake *f) {
  build_gpu_base(f, 97, 80, 40, 68e9, 0, 0);
  param_gated(f, "precision", "fp32");
}
static void build_pageable(struct fake *f) {
  build_gpu_base(f, 62, 50, 50, 68e9, 0, 3e9);
  gs_sink_param(f->sink, "precision", "bf16");
  param_gated(f, "pin_memory", "False");
}
static void build_throttled(struct fake *f) {
  build_gpu_base(f, 97, 80, 55, 68e9, 1, 0);
  gs_sink_param(f->sink, "precision", "bf16");
}
static void build_gpu_straggler(struct fake *f) {
  host_job_gated(f, 8, 20, 1.0, 0);
  steps_gated(f, "", 0.001, 0.020, 0, 0);
  gs_sink_param(f->sink, "precision", "bf16");
  gpu_gated(f, 0, 97, 82, 55, 68e9, 0, 0);
  gpu_gated(f, 1, 97, 82, 55, 68e9, 0, 0);
  gpu_gated(f, 2, 62, 45, 30, 68e9, 0, 0);
}
static void build_rank_straggler(struct fake *f) {
  host_job_gated(f, 8, 60, 4.0, 0);
  steps_gated(f, "", 0.001, 0.029, 0, 0);
  steps_gated(f, "rank=1", 0.001, 0.029, 0, 0);
  steps_gated(f, "rank=2", 0.015, 0.015, 0, 0);
}
static void build_underused(struct fake *f) {
  host_job_gated(f, 8, 20, 1.0, 0);
  steps_gated(f, "", 0.001, 0.020, 0, 0);
  gs_sink_param(f->sink, "precision", "bf16");
  gpu_gated(f, 0, 97, 82, 55, 68e9, 0, 0);
  gpu_gated(f, 1, 0, 0, 0, 1e9, 0, 0);
}
static void build_healthy_cpu(struct fake *f) {
  host_job_gated(f, 2, 50, 1.0, 0);
  steps_gated(f, "", 0.001, 0.020, 0, 0);
}

/* What leaving one input out must do: the rule stays silent, or it fires with `null_key` null in its
 * evidence (and, when set, `text` in its title or fix, and never `not_text`). */
struct missing {
  const char *input;
  int fires;
  const char *null_key, *text, *not_text;
};

struct rule_case {
  const char *rule;
  void (*build)(struct fake *f);
  double dur;
  struct missing m[8];
};

static const struct rule_case RULE_CASES[] = {
    {"input_bound",
     build_input_workers,
     20,
     {{"step.data", 0, NULL, NULL, NULL},
      {"host.cpu", 1, "usable_cores", NULL, NULL},
      {"tree.cpu", 1, "job_cpu_cores", NULL, NULL},
      {"proc", 1, NULL, NULL, NULL}}},
    {"loader_workers",
     build_input_workers,
     20,
     {{"step.data", 0, NULL, NULL, NULL},
      {"host.cpu", 0, NULL, NULL, NULL},
      {"tree.cpu", 0, NULL, NULL, NULL},
      {"mem", 1, "memory_room_bytes", "not measured", NULL},
      {"num_workers", 1, NULL, "worker process", "raise num_workers"},
      {"batch_size", 1, NULL, "batch_size=B", "batch_size=64"},
      {"proc", 1, "bytes_per_worker", "not measured", NULL}}},
    {"input_latency",
     build_latency,
     20,
     {{"step.data", 0, NULL, NULL, NULL},
      {"host.cpu", 0, NULL, NULL, NULL},
      {"tree.dstate", 1, "dstate_share", "not measured", "disks show little wait"},
      {"proc", 1, NULL, NULL, NULL},
      {"tree.cpu", 0, NULL, NULL, NULL}, /* saturation unknown: input_bound, the cause left open */
      {"batch_size", 1, NULL, "batch_size=B", "batch_size=64"}}},
    {"io_bound",
     build_io,
     20,
     {{"tree.dstate", 0, NULL, NULL, NULL},
      {"step.data", 1, "data_wait_share", NULL, NULL},
      {"tree.read", 1, "job_read_bytes_s", "not measured", " 0 MB/s"},
      {"host.cpu", 1, NULL, NULL, NULL}}},
    {"host_code_bound",
     build_host_code_cpu,
     20,
     {{"step.data", 0, NULL, NULL, NULL},
      {"tree.cpu", 0, NULL, NULL, NULL},
      {"step", 0, NULL, NULL, NULL},
      {"host.cpu", 1, NULL, NULL, NULL}}},
    {"host_code_bound",
     build_host_code_gpu,
     20,
     {{"step.data", 1, "data_wait_share", "data wait is unknown", "sync points"},
      {"gpu.util", 0, NULL, NULL, NULL},
      {"host.cpu", 0, NULL, NULL, NULL},
      {"tree.cpu", 0, NULL, NULL, NULL},
      {"proc", 1, NULL, NULL, NULL}}},
    {"periodic_stall",
     build_stalls,
     30,
     {{"step", 0, NULL, NULL, NULL},
      {"marks", 1, NULL, NULL, "at eval"},
      {"step.data", 1, "data_wait_in_stalls_s", NULL, "epoch boundaries"}}},
    {"batch_too_small",
     build_batch,
     20,
     {{"gpu.mem_used", 0, NULL, NULL, NULL},
      {"gpu.mem_total", 0, NULL, NULL, NULL},
      {"gpu.sm", 0, NULL, NULL, NULL}, /* util 96%: the model promises little */
      {"batch_size", 1, "batch_size", "the current one", "64"},
      {"gpu.util", 1, "gpu_util_pct", NULL, NULL}}},
    {"mixed_precision",
     build_mixed,
     20,
     {{"gpu.cc", 0, NULL, NULL, NULL},
      {"precision", 0, NULL, NULL, NULL}, /* tensor pipes 40% active: not idle */
      {"gpu.util", 1, "gpu_util_pct", NULL, NULL},
      {"gpu.sm", 1, "sm_active_pct", NULL, NULL},
      {"gpu.tensor", 1, "tensor_active_pct", NULL, NULL}}},
    {"pageable_copies",
     build_pageable,
     20,
     {{"pin_memory", 0, NULL, NULL, NULL}, {"gpu.pcie_rx", 0, NULL, NULL, NULL}, {"gpu.util", 1, NULL, NULL, NULL}}},
    {"throttled",
     build_throttled,
     20,
     {{"gpu.throttle", 0, NULL, NULL, NULL}, {"gpu.clock", 0, NULL, NULL, NULL}, {"gpu.util", 0, NULL, NULL, NULL}}},
    {"straggler",
     build_gpu_straggler,
     20,
     {{"gpu.util", 1, NULL, "SM activity", NULL}, {"gpu.sm", 1, NULL, NULL, NULL}, {"gpu.clock", 1, NULL, NULL, NULL}}},
    {"straggler", build_rank_straggler, 20, {{"step.data", 0, NULL, NULL, NULL}}},
    {"underused_gpus", build_underused, 20, {{"gpu.util", 0, NULL, NULL, NULL}, {"step", 1, NULL, NULL, NULL}}},
    {"healthy",
     build_healthy_cpu,
     20,
     {{"tree.cpu", 1, NULL, "not measured", "0.00 cores"}, {"step", 1, "step_s", "no step timings", NULL}}},
};

static const struct store_finding *find_or_null(const struct store_finding *fs, size_t n, const char *rule) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(fs[i].rule, rule))
      return &fs[i];
  return NULL;
}

static void test_each_rule_with_each_input_removed(void **state) {
  (void)state;
  for (size_t c = 0; c < sizeof RULE_CASES / sizeof *RULE_CASES; c++) {
    const struct rule_case *rc = &RULE_CASES[c];
    for (int k = -1; k < 8 && (k < 0 || rc->m[k].input); k++) {
      struct fake f;
      omitted = k < 0 ? "" : rc->m[k].input;
      fake_begin(&f, rc->dur);
      rc->build(&f);
      size_t n;
      struct store_finding *fs = fake_end(&f, &n);
      const struct store_finding *x = find_or_null(fs, n, rc->rule);
      char got[512] = "";
      for (size_t i = 0, o = 0; i < n; i++)
        o += (size_t)snprintf(got + o, sizeof got - o, "%s ", fs[i].rule);
      if (k < 0) {
        if (!x)
          fail_msg("%s: does not fire with every input (got %s)", rc->rule, got);
      } else {
        const struct missing *m = &rc->m[k];
        if (!m->fires && x)
          fail_msg("%s fires without %s: %s | %s", rc->rule, m->input, x->title, x->evidence);
        if (m->fires && !x)
          fail_msg("%s does not fire without %s (got %s)", rc->rule, m->input, got);
        if (x && m->null_key) {
          char want[96];
          snprintf(want, sizeof want, "\"%s\":null", m->null_key);
          if (!strstr(x->evidence, want))
            fail_msg("%s without %s: evidence lacks %s: %s", rc->rule, m->input, want, x->evidence);
        }
        if (x && m->text && !strstr(x->title, m->text) && !strstr(x->fix, m->text))
          fail_msg("%s without %s: no \"%s\" in %s | %s", rc->rule, m->input, m->text, x->title, x->fix);
        if (x && m->not_text && (strstr(x->title, m->not_text) || strstr(x->fix, m->not_text)))
          fail_msg("%s without %s: \"%s\" in %s | %s", rc->rule, m->input, m->not_text, x->title, x->fix);
      }
      /* No finding prints a made-up zero or a C "nan" for what it did not measure. */
      for (size_t i = 0; i < n; i++)
        if (strstr(fs[i].title, "nan") || strstr(fs[i].fix, "nan ") || strstr(fs[i].fix, "-nan"))
          fail_msg("%s: a NAN printed: %s | %s", fs[i].rule, fs[i].title, fs[i].fix);
      fake_free(&f, fs);
    }
  }
  omitted = "";
}

/* The issue's case: a pageable run whose PCIe rate is unknown but whose h2d phase is long says the
 * phase, not "0.0 GB/s". */
static void test_pageable_without_pcie_rate_names_the_h2d_phase(void **state) {
  (void)state;
  struct fake f;
  omitted = "";
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 0.5);
  gpu(&f, 0, 90, 75, 50, 68e9);
  int ids[3] = {gs_sink_series(f.sink, "client", "step.total_s", "", "s", GS_GAUGE),
                gs_sink_series(f.sink, "client", "step.data_s", "", "s", GS_GAUGE),
                gs_sink_series(f.sink, "client", "step.h2d_s", "", "s", GS_GAUGE)};
  for (int i = 1; i < 400; i++) {
    int64_t at = T0 + S / 2 + i * S / 25;
    gs_sink_put(f.sink, ids[0], at, 0.040);
    gs_sink_put(f.sink, ids[1], at, 0.001);
    gs_sink_put(f.sink, ids[2], at, 0.012);
  }
  gs_sink_param(f.sink, "precision", "bf16");
  gs_sink_param(f.sink, "pin_memory", "False");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *p = find(fs, n, "pageable_copies");
  assert_null(strstr(p->title, "GB/s"));
  assert_non_null(strstr(p->title, "30%"));
  assert_non_null(strstr(p->evidence, "\"pcie_rx_bytes_s\":null"));
  fake_free(&f, fs);
}

/* Phases reported by only some steps: their mean and share are over those steps, not all of them. */
static void test_phase_share_counts_only_steps_with_the_phase(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 50, 1.0);
  int ids[2] = {gs_sink_series(f.sink, "client", "step.total_s", "", "s", GS_GAUGE),
                gs_sink_series(f.sink, "client", "step.data_s", "", "s", GS_GAUGE)};
  for (int i = 1; i < 400; i++) {
    int64_t at = T0 + S / 2 + i * S / 20;
    gs_sink_put(f.sink, ids[0], at, 0.050);
    if (i % 2)
      gs_sink_put(f.sink, ids[1], at, 0.040); /* every other step says its data wait: 80% */
  }
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *ib = find(fs, n, "input_bound");
  assert_true(fabs(ib->share - 0.8) < 0.01); /* not 40%: steps without the field are not zero */
  fake_free(&f, fs);
}

/* ---- what the user reads ---- */

static void ev(const char *key, const char *val, const char *want) {
  char buf[128];
  rp_ev_value(buf, sizeof buf, key, strlen(key), val, strlen(val));
  if (strcmp(buf, want))
    fail_msg("%s=%s shown as \"%s\", want \"%s\"", key, val, buf, want);
}

static void test_evidence_is_shown_in_units(void **state) {
  (void)state;
  ev("data_wait_share", "0.318768", "32%");
  ev("mem_used_peak_bytes", "3.90512e+08", "372.4 MiB");
  ev("pcie_rx_bytes_s", "3e9", "3.00 GB/s");
  ev("job_read_bytes_s", "2e8", "200 MB/s");
  ev("step_s", "0.0413", "41.3 ms");
  ev("window_s", "12.5", "12.50 s");
  ev("job_cpu_cores", "1.5", "1.50 cores");
  ev("gpu_util_pct", "34", "34%");
  ev("sm_clock_throttled_mhz", "1200", "1200 MHz");
  ev("usable_cores", "null", "—");
  ev("source", "\"step gaps\"", "step gaps");
  ev("speedup_by_workers", "{\"1\":1.5,\"2\":2}", "1: 1.50x, 2: 2.00x");
  ev("recommended_workers", "2", "2");
}

/* The combined estimate of findings f[0..n) restricted to those whose rule is in `rules` ("a,b"). */
static double combine_rules(const struct store_finding *f, size_t n, const char *rules, int *count) {
  struct store_finding sel[16];
  size_t k = 0;
  for (size_t i = 0; i < n && k < 16; i++) {
    char want[64];
    snprintf(want, sizeof want, ",%s,", f[i].rule);
    char list[160];
    snprintf(list, sizeof list, ",%s,", rules);
    if (strstr(list, want))
      sel[k++] = f[i];
  }
  struct doctor_combined c;
  doctor_combine(sel, k, &c);
  if (count)
    *count = c.findings;
  return c.speedup;
}

static void test_overlapping_findings_get_one_combined_estimate(void **state) {
  (void)state;
  /* input_bound and loader_workers both change the data wait: with it gone, more workers add
   * nothing, so fixing both is input_bound's figure; the stalls are another term of the same T. */
  struct fake f;
  fake_begin(&f, 30);
  host_and_job(&f, 2, 50, 1.0);
  steps(&f, 0.040, 0.010, 100, 0.8);
  gs_sink_param(f.sink, "num_workers", "0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "input_bound,loader_workers,periodic_stall");
  double ib = find(fs, n, "input_bound")->speedup, lw = find(fs, n, "loader_workers")->speedup;
  double ps = find(fs, n, "periodic_stall")->speedup;
  struct doctor_combined c;
  doctor_combine(fs, n, &c);
  assert_int_equal(c.findings, 3);
  assert_true(c.overlapping);
  assert_true(fabs(combine_rules(fs, n, "input_bound,loader_workers", NULL) / ib - 1) < 1e-4);
  /* T = stalls + step, in steps: 0.8 s every 100 steps of 50 ms is 0.16 step per step */
  double stall = 0.8 / (100 * 0.050), t0 = stall + 1, t1 = 0.2; /* the data wait gone, stalls gone */
  assert_true(fabs(c.speedup - t0 / t1) / (t0 / t1) < 0.05);
  /* no second counted twice: the combined share is at most the shares added up */
  assert_true(1 - 1 / c.speedup <= (1 - 1 / ib) + (1 - 1 / lw) + (1 - 1 / ps) + 1e-9);
  char line[320];
  char want[32];
  snprintf(want, sizeof want, "fixing all: ~%.1fx", c.speedup);
  assert_non_null(strstr(rp_combined_line(line, sizeof line, fs, n), want));
  /* one finding: nothing to combine */
  doctor_combine(fs, 1, &c);
  assert_int_equal(c.findings, 1);
  assert_string_equal(rp_combined_line(line, sizeof line, fs, 1), "");
  fake_free(&f, fs);
}

/* Stalls inside the steps, as gpuscope.watch reports an evaluation in the loop body (its step's
 * compute): the step times tile the window, and the stalled seconds are not counted twice. */
static void test_stalls_inside_steps_count_once(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 30);
  host_and_job(&f, 2, 50, 1.0);
  int ids[3] = {gs_sink_series(f.sink, "client", "step.total_s", "", "s", GS_GAUGE),
                gs_sink_series(f.sink, "client", "step.data_s", "", "s", GS_GAUGE),
                gs_sink_series(f.sink, "client", "step.compute_s", "", "s", GS_GAUGE)};
  double t = 0.5;
  for (int i = 0;; i++) {
    double compute = i % 100 == 99 ? 0.810 : 0.010; /* an 0.8 s evaluation every 100 steps */
    if (t + 0.040 + compute >= f.dur)
      break;
    t += 0.040 + compute;
    gs_sink_put(f.sink, ids[0], T0 + (int64_t)(t * S), 0.040 + compute);
    gs_sink_put(f.sink, ids[1], T0 + (int64_t)(t * S), 0.040);
    gs_sink_put(f.sink, ids[2], T0 + (int64_t)(t * S), compute);
  }
  gs_sink_param(f.sink, "num_workers", "0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  find(fs, n, "periodic_stall");
  /* per 100 steps: 5 s of steps (4 s data, 1 s compute) and 0.8 s of stalls; the data wait and the
   * stalls gone leave the 1 s of compute: 5.8x (3.7x when the stall seconds also counted as compute) */
  double got = combine_rules(fs, n, "input_bound,periodic_stall", NULL);
  if (fabs(got / 5.8 - 1) > 0.02)
    fail_msg("input_bound + periodic_stall: %.2fx, want 5.8x", got);
  fake_free(&f, fs);
}

/* ---- robustness ---- */

static void test_odd_labels_and_params_do_not_crash(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 10);
  constant(&f, "nvml", "gpu.util_pct", "gpu=abc", 50);
  constant(&f, "nvml", "gpu.util_pct", "gpu=99999", 50);
  constant(&f, "nvml", "gpu.util_pct", "gpu=-1", 50);
  constant(&f, "proctree", "proc.cpu_pct", "pid=", 50);
  constant(&f, "proctree", "proc.cpu_pct", "pid=-5", 50);
  constant(&f, "host", "host.cpu.busy_pct", "cpu=", 50);
  constant(&f, "nvml", "gpu.throttle_reasons", "gpu=0", 1e300);
  gs_sink_param(f.sink, "num_workers", "lots");
  gs_sink_param(f.sink, "batch_size", "1e400");
  gs_sink_param(f.sink, "gpu.0.cc", "nine");
  gs_sink_event(f.sink, T0, "proc_start", "", NAN, "", "");
  steps(&f, 1e5, 1e5, 0, 0); /* absurd steps: none fit the run */
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  assert_true(n >= 1);
  fake_free(&f, fs);
}

static void test_unknown_run_is_enoent(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 1);
  struct store_finding *out = (void *)1;
  size_t n = 7;
  assert_int_equal(doctor_diagnose(f.st, "no-such-run", &out, &n), GS_ENOENT);
  assert_null(out);
  assert_int_equal(n, 0);
  size_t m;
  free(fake_end(&f, &m));
  gs_sink_free(f.sink);
  f.st->close(f.st);
}

static void test_evidence_builder_stays_valid_when_full(void **state) {
  (void)state;
  char buf[64];
  struct dr_json j;
  dr_json_begin(&j, buf, sizeof buf);
  for (int i = 0; i < 20; i++) {
    char key[16];
    snprintf(key, sizeof key, "k%d", i);
    dr_json_num(&j, key, i * 1.5);
    dr_json_str(&j, "s", "quote \" backslash \\ newline \n");
  }
  dr_json_num(&j, "nan", NAN);
  assert_true(strlen(buf) < sizeof buf);
  assert_true(gs_json_object_valid(buf));
  char tiny[2];
  dr_json_begin(&j, tiny, sizeof tiny);
  dr_json_num(&j, "x", 1);
  assert_true(strlen(tiny) < sizeof tiny);
}

/* ---- the step model: estimates that add up ---- */

/* A GPU without GPM (no SM or tensor activity): util, memory-controller util, memory, CC. */
static void gpu_nogpm(struct fake *f, int g, double util, double mem_util, double mem_used, const char *cc) {
  char lab[16], key[32];
  snprintf(lab, sizeof lab, "gpu=%d", g);
  constant(f, "nvml", "gpu.util_pct", lab, util);
  constant(f, "nvml", "gpu.mem_util_pct", lab, mem_util);
  constant(f, "nvml", "gpu.mem_used_bytes", lab, mem_used);
  constant(f, "nvml", "gpu.mem_total_bytes", lab, 80e9);
  constant(f, "nvml", "gpu.sm_clock_max_mhz", lab, 1410);
  constant(f, "nvml", "gpu.sm_clock_mhz", lab, 1410);
  constant(f, "nvml", "gpu.throttle_reasons", lab, 0);
  snprintf(key, sizeof key, "gpu.%d.cc", g);
  gs_sink_param(f->sink, key, cc);
}

/* The issue's 8 x H200 run (busy8_h200.scn under examples/train.py): eight busy GPUs with GPM, GPU 3
 * at 40 %, 6 GiB/s host-to-device with pin_memory off, fp32, 23 % of each step waiting for data in the
 * training process. */
static void build_busy8(struct fake *f) {
  host_and_job(f, 8, 20, 1.0);
  steps(f, 0.023, 0.077, 0, 0);
  for (int g = 0; g < 8; g++) {
    char lab[16];
    snprintf(lab, sizeof lab, "gpu=%d", g);
    if (g == 3)
      gpu(f, g, 40, 30, 20, 70e9);
    else
      gpu(f, g, 97, 82, 63, 70e9);
    constant(f, "nvml", "gpu.pcie_rx_bytes_s", lab, 6.0 * 1024 * 1024 * 1024);
  }
  gs_sink_param(f->sink, "num_workers", "0");
  gs_sink_param(f->sink, "pin_memory", "False");
  gs_sink_param(f->sink, "precision", "fp32");
}

/* The issue's input-bound run: 87 % of the step waits for data with num_workers=0, on a GPU busy 30 %
 * with 16 of 80 GiB used (no GPM). */
static void build_input87(struct fake *f) {
  host_and_job(f, 8, 15, 1.0);
  steps(f, 0.087, 0.013, 0, 0);
  gpu_nogpm(f, 0, 30, 20, 16e9, "8.0");
  gs_sink_param(f->sink, "num_workers", "0");
  gs_sink_param(f->sink, "pin_memory", "True");
  gs_sink_param(f->sink, "precision", "bf16");
}

static void test_busy8_h200_fixing_all_is_at_most_3x(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  build_busy8(&f);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  struct doctor_combined c;
  doctor_combine(fs, n, &c);
  double best = 1;
  for (size_t i = 0; i < n; i++)
    best = fmax(best, fs[i].speedup);
  assert_true(c.findings >= 2);
  if (!(c.speedup <= 3.0) || c.speedup < best - 1e-9)
    fail_msg("fixing all %.2fx (largest single %.2fx, %d findings)", c.speedup, best, c.findings);
  char line[320];
  assert_null(strstr(rp_combined_line(line, sizeof line, fs, n), "20.0x"));
  fake_free(&f, fs);
}

static void test_input_bound_run_gets_no_batch_too_small(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  build_input87(&f);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  assert_null(find_or_null(fs, n, "batch_too_small"));
  const struct store_finding *ib = find(fs, n, "input_bound");
  struct doctor_combined c;
  doctor_combine(fs, n, &c);
  /* the data wait gone leaves the 13 % of compute: ~7.7x, and no idle second counted twice */
  assert_true(c.speedup >= ib->speedup - 1e-9);
  assert_true(c.speedup < 1 / 0.13 * 1.05);
  fake_free(&f, fs);
}

/* Runs on which several rules fire together, for the pair test below. */
static void build_cpu_input_stalls(struct fake *f) {
  host_and_job(f, 2, 50, 1.0);
  steps(f, 0.040, 0.010, 100, 0.8);
  gs_sink_param(f->sink, "num_workers", "0");
}
static void build_gpu_host_code_stalls_fp32(struct fake *f) {
  host_and_job(f, 8, 20, 0.5);
  steps(f, 0.001, 0.020, 100, 0.8);
  gpu(f, 0, 34, 24, 18, 66e9);
  gs_sink_param(f->sink, "precision", "fp32");
}
static void build_gpu_many(struct fake *f) {
  host_and_job(f, 8, 20, 0.5);
  steps(f, 0.001, 0.020, 0, 0);
  gpu_with(f, 0, 62, 30, 1, 12e9, 0);
  periodic(f, "nvml", "gpu.throttle_reasons", "gpu=0", 4, 0.6, 0, 0x20 | 0x40);
  periodic(f, "nvml", "gpu.sm_clock_mhz", "gpu=0", 4, 0.6, 1980, 1200);
  constant(f, "nvml", "gpu.pcie_rx_bytes_s", "gpu=0", 3e9);
  gs_sink_param(f->sink, "precision", "fp32");
  gs_sink_param(f->sink, "pin_memory", "False");
}
static void build_io_stalls(struct fake *f) {
  host_job(f, 2, 20, 0.3, 0.8);
  steps(f, 0.040, 0.010, 100, 0.8);
}
static void build_latency_stalls(struct fake *f) {
  host_and_job(f, 2, 15, 0.2);
  steps(f, 0.040, 0.010, 100, 0.8);
}
static void build_host_code_cpu_stalls(struct fake *f) {
  host_and_job(f, 2, 10, 0.2);
  steps(f, 0.001, 0.050, 60, 1.0);
}
static void build_ranks_stalls(struct fake *f) {
  host_and_job(f, 8, 60, 4.0);
  rank_steps(f, "", 0.001, 0.029, 100, 0.8);
  rank_steps(f, "rank=1", 0.015, 0.015, 0, 0);
}
static void build_gpu_straggler_fp32(struct fake *f) {
  host_and_job(f, 8, 20, 1.0);
  steps(f, 0.001, 0.020, 0, 0);
  gpu(f, 0, 97, 82, 1, 68e9);
  gpu(f, 1, 97, 82, 1, 68e9);
  gpu(f, 2, 62, 45, 1, 68e9);
}

static void test_fixing_all_lies_between_the_largest_and_the_shares_added(void **state) {
  (void)state;
  static void (*const builds[])(struct fake *) = {
      build_busy8,
      build_input87,
      build_cpu_input_stalls,
      build_gpu_host_code_stalls_fp32,
      build_gpu_many,
      build_io_stalls,
      build_latency_stalls,
      build_host_code_cpu_stalls,
      build_ranks_stalls,
      build_gpu_straggler_fp32,
  };
  char pairs[2048] = "";
  size_t plen = 0;
  int checked = 0;
  for (size_t b = 0; b < sizeof builds / sizeof *builds; b++) {
    struct fake f;
    fake_begin(&f, 30);
    builds[b](&f);
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    for (size_t i = 0; i < n; i++)
      for (size_t k = i + 1; k < n; k++) {
        struct store_finding two[2] = {fs[i], fs[k]};
        struct doctor_combined c;
        doctor_combine(two, 2, &c);
        if (c.findings < 2)
          continue; /* outside the step model (underused_gpus) */
        /* at least the larger; at most what the two shares of T add up to (T / (T - a - b): disjoint
         * terms, Amdahl); less where they act on the same time */
        double lo = fmax(fs[i].speedup, fs[k].speedup);
        double won = (1 - 1 / fs[i].speedup) + (1 - 1 / fs[k].speedup), hi = won < 1 ? 1 / (1 - won) : INFINITY;
        if (c.speedup < lo * (1 - 1e-4) || c.speedup > hi * (1 + 1e-4))
          fail_msg("run %zu: %s %.3fx + %s %.3fx: fixing both %.3fx, not within [%.3f, %.3f]", b, fs[i].rule,
                   fs[i].speedup, fs[k].rule, fs[k].speedup, c.speedup, lo, hi);
        checked++;
        if (plen + 64 < sizeof pairs)
          plen += (size_t)snprintf(pairs + plen, sizeof pairs - plen, " %s+%s", fs[i].rule, fs[k].rule);
      }
    /* and every finding together: at least the largest */
    struct doctor_combined all;
    doctor_combine(fs, n, &all);
    for (size_t i = 0; i < n; i++)
      if (all.findings >= 2 && strcmp(fs[i].rule, "underused_gpus") && all.speedup < fs[i].speedup * (1 - 1e-4))
        fail_msg("run %zu: fixing all %.3fx below %s's %.3fx", b, all.speedup, fs[i].rule, fs[i].speedup);
    fake_free(&f, fs);
  }
  print_message("pairs checked (%d):%s\n", checked, pairs);
  assert_true(checked >= 12);
}

/* A GPU with slower clocks is slower work, not waiting: its fix shortens the GPU work term, and it
 * is reported beside a data wait that fills the rest of the step (the group test's nodec). */
static void test_slow_clock_gpu_straggles_beside_a_data_wait(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.030, 0.020, 0, 0);
  gs_sink_param(f.sink, "precision", "bf16");
  gpu(&f, 0, 95, 80, 50, 100e9);
  gpu(&f, 1, 95, 80, 50, 100e9);
  gpu_with(&f, 2, 95, 80, 50, 100e9, 0);
  constant(&f, "nvml", "gpu.sm_clock_mhz", "gpu=2", 1100);
  constant(&f, "nvml", "gpu.throttle_reasons", "gpu=2", 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *s = find(fs, n, "straggler");
  assert_non_null(strstr(s->evidence, "\"gpu\":2"));
  assert_non_null(strstr(s->evidence, "\"change\":{\"gpu\":"));
  fake_free(&f, fs);
}

/* host_code_bound's estimate follows its cost: util 20 %, data 15 %, stalls 30 % of the window leave
 * about 35 % of host idle — about 1.5x, not 90 / util = 4.5x. */
static void test_host_code_estimate_follows_its_cost(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 30);
  host_and_job(&f, 8, 10, 0.3);
  steps(&f, 0.015, 0.085, 10, 0.43);
  gpu(&f, 0, 20, 15, 10, 66e9);
  gs_sink_param(f.sink, "precision", "bf16");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *h = find(fs, n, "host_code_bound");
  if (!(h->speedup > 1.3 && h->speedup < 1.8))
    fail_msg("host_code_bound %.2fx (share %.2f)", h->speedup, h->share);
  assert_true(fabs(h->share - (1 - 1 / h->speedup)) < 1e-6);
  fake_free(&f, fs);
}

/* underused_gpus: 8 GPUs, 1 busy, 6 middling, 1 idle — the idle one joining the 7 that work is
 * (7 + 0.9) / 7, not 0.9 x 8 / 1 = 7.2x. */
static void test_underused_counts_the_gpus_that_work(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  gpu(&f, 0, 97, 82, 55, 68e9);
  for (int g = 1; g <= 6; g++)
    gpu(&f, g, 20, 15, 10, 68e9);
  gpu(&f, 7, 0, 0, 0, 1e9);
  gs_sink_param(f.sink, "precision", "bf16");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *u = find(fs, n, "underused_gpus");
  if (fabs(u->speedup - (7 + DR_SCALING_EFFICIENCY) / 7) > 0.01)
    fail_msg("underused_gpus %.2fx", u->speedup);
  fake_free(&f, fs);
}

/* GPUs without util (MIG instances) are GPUs: the verdict does not say "no GPU" or print a NAN. */
static void test_gpus_without_util_are_not_no_gpu(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  gpu_with(&f, 0, NAN, 80, 55, 60e9, 1);
  constant(&f, "nvml", "gpu.proc_mem_bytes", "gpu=0,pid=100", 60e9);
  gs_sink_param(f.sink, "precision", "bf16");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *h = find(fs, n, "healthy");
  if (strstr(h->title, "no GPU") || strstr(h->title, "nan"))
    fail_msg("%s", h->title);
  assert_non_null(strstr(h->title, "without util readings"));
  fake_free(&f, fs);
}

/* The issue's no-GPM A100 (util 96 %, 12 of 80 GiB, a data-ready job) with the memory controller
 * busy mu %, diagnosed; cmd is the job's command line. */
static struct store_finding *a100_nogpm(struct fake *f, double util, double mu, const char *cmd, size_t *n) {
  fake_begin_cmd(f, 20, cmd);
  host_and_job(f, 8, 20, 0.5);
  steps(f, 0.001, 0.020, 0, 0);
  gpu_nogpm(f, 0, util, mu, 12e9, "8.0");
  gs_sink_param(f->sink, "precision", "bf16");
  gs_sink_param(f->sink, "pin_memory", "True");
  gs_sink_param(f->sink, "batch_size", "32");
  return fake_end(f, n);
}

/* Without SM activity the memory controller's share is no fill: at mem_util 30 and at 90 the same
 * GPU, busy 96 % of the time with 4.8 % of the step waiting for data, gets the same verdict, and no
 * finding claims more than the time the GPU is not busy (1 / 0.96); the verdict says the fill is
 * unknown and gives the two-trial tune command with the job's batch size in it. */
static void test_batch_without_gpm_claims_no_more_than_the_host_overhead(void **state) {
  (void)state;
  static const double mus[] = {30, 90};
  for (size_t m = 0; m < sizeof mus / sizeof *mus; m++) {
    struct fake f;
    size_t n;
    struct store_finding *fs = a100_nogpm(&f, 96, mus[m], "python train.py --batch-size 32 --epochs 3", &n);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++)
      if (fs[i].speedup > 1 / 0.96 + 1e-9)
        fail_msg("mem_util %.0f: %s claims %.3fx", mus[m], fs[i].rule, fs[i].speedup);
    expect_rules(fs, n, "healthy");
    const char *fix = find(fs, n, "healthy")->fix;
    if (!strstr(fix, "GPU-side fill of a bigger batch is unknown") ||
        !strstr(fix, "gpuscope tune --param batch_size=32,128 -- python train.py --batch-size {batch_size} --epochs 3"))
      fail_msg("mem_util %.0f: %s", mus[m], fix);
    fake_free(&f, fs);
  }
}

/* Where the host overhead is large (util 70 %: 25 % of the step idle between kernels) a bigger batch
 * is advised on that alone: a 4x batch pays it a quarter as often, 1 / (1 - 0.75 x 0.252) = 1.23x,
 * whatever the memory controller's share; the fix says the GPU side is unknown and how to measure it. */
static void test_batch_without_gpm_amortises_only_the_host_overhead(void **state) {
  (void)state;
  double sp[2];
  static const double mus[] = {30, 90};
  for (size_t m = 0; m < 2; m++) {
    struct fake f;
    size_t n;
    struct store_finding *fs = a100_nogpm(&f, 70, mus[m], "python train.py --config a{b}.yaml -b 32", &n);
    const struct store_finding *b = find(fs, n, "batch_too_small");
    sp[m] = b->speedup;
    double host = 1 - 0.70 - 0.001 / 0.021;
    if (fabs(b->speedup - 1 / (1 - 0.75 * host)) > 0.01)
      fail_msg("mem_util %.0f: %.3fx", mus[m], b->speedup);
    assert_non_null(strstr(b->evidence, "\"fill_signal\":\"unknown\""));
    if (!strstr(b->fix, "Measure the GPU-side fill with two trials") ||
        !strstr(b->fix, "batch_size=32,128 -- python train.py --config a{{b}}.yaml -b {batch_size}"))
      fail_msg("%s", b->fix);
    fake_free(&f, fs);
  }
  assert_true(fabs(sp[0] - sp[1]) < 1e-9);
}

/* A command that does not show its batch size is not guessed at: the template names CMD. */
static void test_batch_tune_command_without_the_batch_in_the_command(void **state) {
  (void)state;
  struct fake f;
  size_t n;
  struct store_finding *fs = a100_nogpm(&f, 96, 30, "python train.py --epochs 32", &n);
  const char *fix = find(fs, n, "healthy")->fix;
  if (!strstr(fix, "batch_size=32,128 -- CMD   # CMD: the job's command, with {batch_size}"))
    fail_msg("%s", fix);
  fake_free(&f, fs);
}

/* On a GPU without GPM the precision is the only way to tell fp32: unknown, the verdict says why
 * mixed_precision could not judge. */
static void test_unknown_precision_without_gpm_is_said(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 0.5);
  steps(&f, 0.001, 0.020, 0, 0);
  gpu_nogpm(&f, 0, 97, 60, 70e9, "8.0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *h = find(fs, n, "healthy");
  assert_non_null(strstr(h->evidence, "\"not_judged\":\"mixed_precision"));
  assert_non_null(strstr(h->fix, "precision is unknown"));
  /* the same reason for a report's notes */
  struct runview v;
  char why[256];
  assert_int_equal(runview_load(f.st, f.run.id, &v), 0);
  assert_non_null(strstr(doctor_not_judged(&v, why, sizeof why), "mixed_precision"));
  runview_done(&v);
  fake_free(&f, fs);
}

/* A job's names may be long and hold any bytes: the evidence is cut on a character boundary and stays
 * valid JSON (invalid UTF-8 as U+FFFD). */
static void test_evidence_strings_are_cut_on_a_character_boundary(void **state) {
  (void)state;
  char name[1200], buf[2048];
  size_t o = 0;
  name[o++] = 'x';
  name[o++] = (char)0xff; /* not UTF-8 */
  while (o + 3 < sizeof name)
    name[o++] = (char)0xc3, name[o++] = (char)0xa9; /* é */
  name[o] = 0;
  for (int lead = 0; lead < 3; lead++) {
    struct dr_json j;
    dr_json_begin(&j, buf, sizeof buf);
    dr_json_str(&j, "marks", name + lead);
    assert_true(j.members == 1);
    if (!gs_json_object_valid(buf))
      fail_msg("lead %d: invalid JSON: %.80s...", lead, buf);
  }
}

static void test_rule_ids_are_listed(void **state) {
  (void)state;
  size_t n = 0;
  while (doctor_rule_id(n))
    n++;
  assert_int_equal(n, 17);
  assert_string_equal(doctor_rule_id(0), "periodic_stall"); /* runs first: host_code_bound counts what is left */
  assert_string_equal(doctor_rule_id(n - 2), "healthy");
  assert_string_equal(doctor_rule_id(n - 1), "insufficient_data");
}

/* ---- mutation pass survivors (docs/mutation.md): rules' gates, not their estimates ---- */

/* A busy GPU with idle tensor pipes is advised mixed precision only when the job does not say it
 * runs in reduced precision already. Kills rules_gpu.c's `if (d->precision[0] && !fp32)` -> `if (0)`. */
static void test_mutants_reduced_precision_job_gets_no_mixed_precision_advice(void **state) {
  (void)state;
  static const char *const precision[] = {"bf16-mixed", NULL};
  for (int k = 0; k < 2; k++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, 8, 20, 0.5);
    steps(&f, 0.001, 0.020, 0, 0);
    gpu(&f, 0, 97, 80, 1, 68e9);
    if (precision[k])
      gs_sink_param(f.sink, "precision", precision[k]);
    gs_sink_param(f.sink, "pin_memory", "True");
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    if (precision[k])
      assert_false(dr_has(&(struct dr_findings){.v = fs, .n = n}, "mixed_precision"));
    else
      expect_rules(fs, n, "mixed_precision");
    fake_free(&f, fs);
  }
}

/* One share, one place: a data-wait finding's share is the run view's data share (the figure the
 * report shows beside it), exactly, even where the step model says the fix wins back less — here a
 * loaded host (other work on 1.65 of 2 cores) leaves the job half a core, so the job's CPU per step
 * holds the advised workers to 2.0x (1 - 1/2 = 0.5) while the loop waits 75 % of each step. */
static void test_data_wait_findings_share_the_run_views_figure(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 95, 0.25);
  steps(&f, 0.030, 0.010, 0, 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *il = find(fs, n, "input_latency");
  struct runview v;
  assert_int_equal(runview_load(f.st, f.run.id, &v), 0);
  struct runview_step_figures fig;
  runview_step_figures(&v, 0, v.nsteps, &fig);
  if (il->share != fig.data_share)
    fail_msg("input_latency share %.17g, the run's data share %.17g", il->share, fig.data_share);
  if (!(il->speedup < 1 / (1 - fig.data_share) - 0.5))
    fail_msg("speed-up %.3f: the model's CPU term did not bind", il->speedup);
  runview_done(&v);
  fake_free(&f, fs);
}

/* Two ranks are enough for a straggler. Kills rank_straggler's `d->nranks < 2` -> `<= 2`. */
static void test_mutants_two_ranks_have_a_straggler(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 60, 2.0);
  rank_steps(&f, "", 0.001, 0.029, 0, 0);
  rank_steps(&f, "rank=1", 0.015, 0.015, 0, 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "straggler");
  const struct store_finding *st = find(fs, n, "straggler");
  assert_non_null(strstr(st->evidence, "\"rank\":1"));
  if (!strstr(st->fix, "spends 14 ms more per step") || !strstr(st->fix, "(15 vs 1 ms of a 30 ms step)"))
    fail_msg("fix: %.200s", st->fix); /* 15 ms of data wait against 1 ms, in 30 ms steps */
  fake_free(&f, fs);
}

/* Evenly busy GPUs have no straggler. Kills the GPU straggler's `if (who < 0) return` removed. */
static void test_mutants_even_gpus_have_no_straggler(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  gpu(&f, 0, 97, 82, 55, 68e9);
  gpu(&f, 1, 97, 82, 55, 68e9);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "healthy");
  fake_free(&f, fs);
}

/* Idle GPUs are "unused" only when the job trains (it sent steps) and no GPU did any work; an idle
 * GPU beside one neither idle nor busy is no finding. Kills dr_rule_underused's none_used test with
 * either `&&` -> `||`. */
static void test_mutants_idle_gpus_are_unused_only_when_the_job_trains_elsewhere(void **state) {
  (void)state;
  static const struct {
    double util0, util1;
    int steps;
    int unused;
  } cases[] = {{2, 2, 1, 1}, {2, 2, 0, 0}, {20, 2, 1, 0}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, 8, 20, 1.0);
    if (cases[k].steps)
      steps(&f, 0.001, 0.020, 0, 0);
    gpu(&f, 0, cases[k].util0, cases[k].util0, 0, 1e9);
    gpu(&f, 1, cases[k].util1, cases[k].util1, 0, 1e9);
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    int has = dr_has(&(struct dr_findings){.v = fs, .n = n}, "underused_gpus");
    if (has != cases[k].unused)
      fail_msg("case %zu: underused_gpus %s", k, has ? "found" : "missing");
    fake_free(&f, fs);
  }
}

/* The loader's workers are the job's own figure (its num_workers param) when it sent one, not what
 * the process tree shows. Kills current_workers' `if (isfinite(d->num_workers) ...)` -> `if (0)`. */
static void test_mutants_worker_count_is_the_jobs_param(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "1");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *lw = find(fs, n, "loader_workers");
  assert_non_null(strstr(lw->evidence, "\"num_workers\":1,"));
  fake_free(&f, fs);
}

/* Loaders in D state a sixth of the time are storage-bound only when the host's I/O pressure is
 * high too (the threshold halves with PSI io >= 20 %). Kills dr_rule_input's `io` test with any of
 * the three `&&` of its PSI half -> `||`. */
static void test_mutants_some_d_state_is_storage_only_under_io_pressure(void **state) {
  (void)state;
  static const struct {
    double psi;
    const char *want;
  } cases[] = {{5, "input_latency"}, {30, "io_bound"}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    struct fake f;
    fake_begin(&f, 20);
    host_job(&f, 2, 15, 0.2, 0.17);
    constant(&f, "host", "host.psi.io_some_pct", "", cases[k].psi);
    steps(&f, 0.040, 0.010, 0, 0);
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    expect_rules(fs, n, cases[k].want);
    fake_free(&f, fs);
  }
}

/* A healthy CPU-only run says so with its figures: the job's cores to two decimals, and the fix the
 * thresholds a finding needs. Kills doctor.c's add_healthy `dr_fmt(..., 2, "cores busy")` -> 3 and
 * `DR_MIN_SHARE * 100` -> 101. */
static void test_mutants_healthy_title_and_fix_give_their_figures(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 55, 1.0);
  steps(&f, 0.0002, 0.050, 0, 0);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  expect_rules(fs, n, "healthy");
  if (!strstr(fs[0].title, ", 1.00 cores busy)"))
    fail_msg("title: %s", fs[0].title);
  char want[160];
  snprintf(want, sizeof want, "each needs at least %.0f%% of the run or a %.0f%% speed-up", DR_MIN_SHARE * 100,
           (DR_MIN_SPEEDUP - 1) * 100);
  if (!strstr(fs[0].fix, want))
    fail_msg("fix: %s", fs[0].fix);
  fake_free(&f, fs);
}

/* In a group, a host-side finding names the node it was read on, the first host-side rule
 * (input_bound) and the first finding too. Kills doctor.c's host_side loop and the naming loop
 * starting at 1. */
static void test_mutants_group_input_bound_names_its_host(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 10); /* a run outside the group */
  for (int r = 0; r < 2; r++) {
    fake_next_in_group(&f, "g", "h");
    host_and_job(&f, 2, 50, 1.0);
    steps(&f, 0.040, 0.010, 0, 0);
    gs_sink_param(f.sink, "num_workers", "0");
  }
  fake_close_run(&f);
  struct store *g = store_group_open(f.st, "g");
  assert_non_null(g);
  struct runview v;
  assert_int_equal(runview_load(g, "g", &v), 0);
  struct store_finding *fs;
  size_t n;
  assert_int_equal(doctor_diagnose_view(&v, INT64_MIN, INT64_MAX, &fs, &n), 0);
  find(fs, n, "input_bound");
  for (size_t i = 0; i < n; i++) { /* every one of them is host-side here, the first one too */
    if (!strstr(fs[i].title, "(host h)"))
      fail_msg("%s title: %s", fs[i].rule, fs[i].title);
    assert_non_null(strstr(fs[i].evidence, "\"host\":\"h\""));
  }
  expect_rules(fs, n, "input_bound,loader_workers");
  free(fs);
  runview_done(&v);
  g->close(g);
  fake_free(&f, NULL);
}

/* A window of a run without steps is the stretch asked for: 5 s to 15 s of a 20 s run is 10 s (its
 * length, not its end plus its start). Kills pick_window's `d->to - d->from` -> `+`. */
static void test_mutants_window_length_is_end_minus_start(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 55, 1.0);
  fake_close_run(&f);
  struct runview v;
  assert_int_equal(runview_load(f.st, f.run.id, &v), 0);
  struct store_finding *fs;
  size_t n;
  assert_int_equal(doctor_diagnose_view(&v, 5 * S, 15 * S, &fs, &n), 0);
  expect_rules(fs, n, "healthy");
  if (!strstr(fs[0].evidence, "\"window_s\":10"))
    fail_msg("evidence: %s", fs[0].evidence);
  free(fs);
  runview_done(&v);
  fake_free(&f, NULL);
}

/* ---- the second mutation pass on the step model (docs/mutation.md, 2026-12-02) ---- */

/* healthy's title gives the data wait as a percentage of the step, with a GPU and without one: 5 ms
 * of a 50 ms step is 10 %. Kills verdict_basis's two `d->data_share * 100` -> `/ 100`. */
static void test_mutants_healthy_title_gives_the_data_wait_in_percent(void **state) {
  (void)state;
  for (int with_gpu = 0; with_gpu < 2; with_gpu++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, with_gpu ? 8 : 2, with_gpu ? 20 : 55, 1.0);
    steps(&f, 0.005, 0.045, 0, 0);
    if (with_gpu)
      gpu(&f, 0, 97, 80, 55, 68e9);
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    expect_rules(fs, n, "healthy");
    const char *want = with_gpu ? "GPU busy 97%, data wait 10% of the step" : "no GPU; data wait 10% of the step";
    if (!strstr(fs[0].title, want))
      fail_msg("title: %s", fs[0].title);
    fake_free(&f, fs);
  }
}

/* A GPU busy 97 % of the time and nearly filled (SM activity 94.5 %) with most of its memory free: a
 * 4x batch amortises only the host's 2.6 % of the step and the unfilled 2.5 % of the GPU's: 0.75 x
 * 5.1 % = 3.8 % less, 1.04x — above the 3 % any finding needs but under batch_too_small's own 5 %, so
 * the step model drops it. Kills dr_evaluate_changes' `if (sp < min_speedup || !(sp > 1)) continue` ->
 * `if (0)`. */
static void test_mutants_a_nearly_full_gpu_with_free_memory_gets_no_batch_advice(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.0002, 0.050, 0, 0);
  gpu(&f, 0, 97, 94.5, 55, 12e9);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  assert_null(find_or_null(fs, n, "batch_too_small"));
  expect_rules(fs, n, "healthy");
  fake_free(&f, fs);
}

/* The live diagnosis fills the window it judged only when asked (NULL is allowed), gives the
 * findings of a run it can load, and for a run it cannot load an error, no findings and the usual
 * window. Kills live.c's `if (w)` -> `if (0)` / `if (1)` (both), and `if (!rc)` -> `if (rc)` /
 * `if (1)`. */
static void test_mutants_live_diagnosis_fills_its_window_only_when_asked(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 55, 1.0);
  steps(&f, 0.0002, 0.050, 0, 0);
  fake_close_run(&f);
  struct runview v;
  assert_int_equal(runview_load(f.st, f.run.id, &v), 0);
  struct runview_window want = runview_live_window(&v, 5 * S), junk = {.from = -7, .to = -7, .span_s = -7};
  struct runview_window w = junk;
  struct store_finding *fs = NULL;
  size_t n = 0;
  assert_int_equal(doctor_diagnose_live(&v, 5 * S, &fs, &n, NULL), 0);
  expect_rules(fs, n, "healthy");
  free(fs);
  assert_int_equal(doctor_diagnose_live(&v, 5 * S, &fs, &n, &w), 0);
  expect_rules(fs, n, "healthy");
  free(fs);
  assert_true(w.from == want.from && w.to == want.to);
  runview_done(&v);
  w = junk;
  assert_int_equal(doctor_diagnose_live_run(f.st, f.run.id, 5 * S, &fs, &n, &w), 0);
  expect_rules(fs, n, "healthy");
  free(fs);
  assert_true(w.from == want.from && w.to == want.to);
  assert_int_equal(doctor_diagnose_live_run(f.st, f.run.id, 5 * S, &fs, &n, NULL), 0);
  expect_rules(fs, n, "healthy");
  free(fs);
  w = junk;
  fs = (struct store_finding *)&w; /* overwritten: NULL on failure */
  n = 7;
  assert_int_not_equal(doctor_diagnose_live_run(f.st, "01nosuchrunxxxxxxxxxxxxxxx", 5 * S, &fs, &n, &w), 0);
  assert_null(fs);
  assert_int_equal(n, 0);
  assert_true(w.from == INT64_MIN && w.to == INT64_MAX && isnan(w.span_s));
  fake_free(&f, NULL);
}

/* loader_workers' fix states its model with the run's own figures: compute 10 ms, load 40 ms, a
 * 50 ms step. Kills the fix's `* 1e3` -> `/ 1e3` (compute, load, the new and the old step). */
static void test_mutants_loader_workers_fix_states_its_model_in_ms(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 50, 1.0);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *lw = find(fs, n, "loader_workers");
  /* step 50 ms; load 40 ms; 2 workers: max(10, 20, 1 core x 50 ms / 2 cores) = 25 ms */
  if (!strstr(lw->fix, "Model: step = max(compute 10 ms, load 40 ms / workers, the job's CPU per step / usable "
                       "cores) = 25 ms, down from 50 ms."))
    fail_msg("fix: %s", lw->fix);
  fake_free(&f, fs);
}

/* Periodic stalls are counted one by one and their mean is the time each adds: 1 s pauses every 40
 * steps of 50 ms. Kills step_stalls' count starting at 1 (`k = 0` -> `1`) and mean_stall_s's `lost /
 * n` -> `lost * n`. */
static void test_mutants_periodic_stalls_are_counted_and_averaged_exactly(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 30);
  host_and_job(&f, 2, 55, 1.0);
  steps(&f, 0.001, 0.049, 40, 1.0);
  /* the pauses rank_steps puts in: after every 40th step that ends inside the run */
  int want = 0;
  double t = 0.5;
  for (int k = 0; t + 0.050 < f.dur; k++) {
    t += 0.050;
    if (k % 40 == 39)
      t += 1.0, want++;
  }
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *p = find(fs, n, "periodic_stall");
  char key[32];
  snprintf(key, sizeof key, "\"stalls\":%d,", want);
  if (!strstr(p->evidence, key) || !strstr(p->evidence, "\"mean_stall_s\":1,"))
    fail_msg("%d stalls of 1 s; evidence: %s", want, p->evidence);
  fake_free(&f, fs);
}

/* Five throttled stretches: the clock while throttled is read over each of them (1200 MHz), the
 * clock otherwise over the rest (1980). Kills the interval list's `ivs[niv * 2]` -> `ivs[niv / 2]`. */
static void test_mutants_throttled_clock_is_read_over_every_stretch(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 1.0);
  steps(&f, 0.001, 0.020, 0, 0);
  gpu_with(&f, 0, 97, 80, 55, 68e9, 0);
  periodic(&f, "nvml", "gpu.throttle_reasons", "gpu=0", 4, 0.6, 0, 0x20 | 0x40);
  periodic(&f, "nvml", "gpu.sm_clock_mhz", "gpu=0", 4, 0.6, 1980, 1200);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *t = find(fs, n, "throttled");
  if (!strstr(t->evidence, "\"sm_clock_throttled_mhz\":1200,") ||
      !strstr(t->evidence, "\"sm_clock_otherwise_mhz\":1980,"))
    fail_msg("evidence: %s", t->evidence);
  fake_free(&f, fs);
}

/* A cpuset reading of 0 cores is not a limit (the cgroup file read empty): the usable cores are the
 * host's 2. Kills dr_load_host's `cs.n && cs.min >= 1` -> `||`. */
static void test_mutants_a_cpuset_of_no_cores_is_no_limit(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 50, 1.0);
  constant(&f, "host", "host.cpuset_cores", "", 0);
  steps(&f, 0.040, 0.010, 0, 0);
  gs_sink_param(f.sink, "num_workers", "0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *lw = find(fs, n, "loader_workers");
  if (!strstr(lw->evidence, "\"usable_cores\":2,"))
    fail_msg("evidence: %s", lw->evidence);
  fake_free(&f, fs);
}

/* MIG instances: GPUs without util, the busy time read from their SM activity — of the GPUs that
 * measured it only (a second instance without SM activity does not make the first one idle). The
 * mixed-precision estimate is the same with the second one there. Kills used_sm_active's `used &&
 * sm_active.n` -> `1`. */
static void test_mutants_mig_busy_time_is_read_from_gpus_with_sm_activity(void **state) {
  (void)state;
  double speedup[2];
  for (int second = 0; second < 2; second++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, 8, 20, 1.0);
    steps(&f, 0.001, 0.049, 0, 0);
    gpu_with(&f, 0, NAN, 80, 1, 68e9, 1);
    constant(&f, "nvml", "gpu.proc_mem_bytes", "gpu=0,pid=100", 60e9); /* without util, a process makes it used */
    if (second) {
      constant(&f, "nvml", "gpu.proc_mem_bytes", "gpu=1,pid=100", 20e9);
      constant(&f, "nvml", "gpu.mem_used_bytes", "gpu=1", 30e9);
      constant(&f, "nvml", "gpu.mem_total_bytes", "gpu=1", 80e9);
      gs_sink_param(f.sink, "gpu.1.cc", "9.0");
    }
    gs_sink_param(f.sink, "precision", "fp32");
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    speedup[second] = find(fs, n, "mixed_precision")->speedup;
    fake_free(&f, fs);
  }
  if (!(speedup[0] > 1.05) || fabs(speedup[1] - speedup[0]) > 1e-9)
    fail_msg("mixed_precision %.4fx alone, %.4fx beside an instance without SM activity", speedup[0], speedup[1]);
}

/* host_code_bound's estimate keeps the host time that holds the GPU at 90 % of the compute path: GPU
 * 34 % busy -> of a 1 s step, 0.34 s GPU, 0.038 s host kept, so 1 / 0.378 = 2.65x. Kills the
 * change's `gpu * (1 / value - 1)` -> `gpu * (1 * value - 1)` (all the host time removed: 2.94x). */
static void test_mutants_host_code_estimate_keeps_the_hosts_share_of_the_target(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 8, 20, 0.3);
  steps(&f, 0.001, 0.049, 0, 0);
  gpu(&f, 0, 34, 30, 20, 68e9);
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *h = find(fs, n, "host_code_bound");
  double ds = 0.001 / 0.050, gpu = 0.34, host = 1 - ds - gpu, keep = gpu * (1 / 0.9 - 1);
  double want = 1 / (1 - host + keep);
  if (fabs(h->speedup - want) > 0.01 * want)
    fail_msg("host_code_bound %.3fx, want %.3fx; evidence %s", h->speedup, want, h->evidence);
  fake_free(&f, fs);
}

/* A read that fails while the doctor judges (the store lost its samples table under a loaded view) is
 * an error with its message, not a verdict on what could still be read. Kills dr_read_failed's `if
 * (!d->read_rc)` -> `if (d->read_rc)` / `if (0)` (no read failure kept at all). */
static void test_mutants_a_failed_read_is_an_error_not_a_verdict(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 20);
  host_and_job(&f, 2, 55, 1.0);
  steps(&f, 0.0002, 0.050, 0, 0);
  fake_close_run(&f);
  struct runview v;
  assert_int_equal(runview_load(f.st, f.run.id, &v), 0);
  char path[400];
  snprintf(path, sizeof path, "%s/d%d.db", dir, dbn - 1);
  sqlite3 *db;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  assert_int_equal(sqlite3_exec(db, "DROP TABLE chunks", NULL, NULL, NULL), SQLITE_OK);
  sqlite3_close(db);
  struct store_finding *fs = NULL;
  size_t n = 0;
  assert_int_not_equal(doctor_diagnose_view(&v, INT64_MIN, INT64_MAX, &fs, &n), 0);
  if (!strstr(gs_last_error(), "cannot read the run's data"))
    fail_msg("error: %s", gs_last_error());
  assert_int_equal(n, 0);
  free(fs);
  runview_done(&v);
  fake_free(&f, NULL);
}

/* A long run (more throttle readings than RUNVIEW_QUICK_POINTS: 6 h at 10 Hz) is judged from the
 * collector's throttle_start/stop events and the clock's 10 s rollups: 54 stretches, the first 160 s
 * of every 400 s, the SM clock 1200 MHz inside them and 1980 outside (a rollup straddling an edge
 * mixes both: within 40 MHz). Kills gpu_throttle_long's interval list `ivs[niv * 2]` -> `ivs[niv /
 * 2]` (the stretches' starts written over each other). */
static void test_mutants_a_long_runs_throttled_clock_is_read_over_every_stretch(void **state) {
  (void)state;
  struct fake f;
  fake_begin(&f, 6 * 3600);
  constant(&f, "nvml", "gpu.util_pct", "gpu=0", 97);
  constant(&f, "nvml", "gpu.sm_clock_max_mhz", "gpu=0", 1980);
  periodic(&f, "nvml", "gpu.throttle_reasons", "gpu=0", 400, 0.4, 0x20, 0);
  periodic(&f, "nvml", "gpu.sm_clock_mhz", "gpu=0", 400, 0.4, 1200, 1980);
  for (int64_t k = 0; k * 400 < 6 * 3600; k++) {
    gs_sink_event(f.sink, T0 + k * 400 * S, "throttle_start", "SwThermalSlowdown", 0, "gpu=0", "");
    gs_sink_event(f.sink, T0 + (k * 400 + 160) * S, "throttle_stop", "SwThermalSlowdown", 0, "gpu=0", "");
  }
  gs_sink_param(f.sink, "gpu.0.cc", "9.0");
  size_t n;
  struct store_finding *fs = fake_end(&f, &n);
  const struct store_finding *t = find(fs, n, "throttled");
  double hot[1], cool[1];
  const char *h = strstr(t->evidence, "\"sm_clock_throttled_mhz\":"),
             *c = strstr(t->evidence, "\"sm_clock_otherwise_mhz\":");
  if (!h || !c)
    fail_msg("evidence: %s", t->evidence);
  hot[0] = strtod(h + strlen("\"sm_clock_throttled_mhz\":"), NULL);
  cool[0] = strtod(c + strlen("\"sm_clock_otherwise_mhz\":"), NULL);
  if (!(fabs(hot[0] - 1200) <= 40) || !(fabs(cool[0] - 1980) <= 40) || !strstr(t->evidence, "\"throttled_share\":0.4"))
    fail_msg("evidence: %s", t->evidence);
  fake_free(&f, fs);
}

/* input_latency's fix names the loading processes as many as there are: the training process, one
 * worker ("process"), two ("processes"; one worker was called "processes" before this test). Kills
 * the plural's `w0 > 1` -> `w0 > 2` and `-> w0 > 0` (the mutation pass's `0` -> `1` found it). */
static void test_mutants_input_latency_names_its_loading_processes(void **state) {
  (void)state;
  for (int w = 0; w <= 2; w++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, 4, 15, 0.2);
    for (int k = 0; k < w; k++) {
      char lab[16];
      snprintf(lab, sizeof lab, "pid=%d", 101 + k);
      int id = gs_sink_series(f.sink, "proctree", "proc.cpu_pct", lab, "%", GS_GAUGE);
      for (int64_t t = 10; t <= 200; t++)
        gs_sink_put(f.sink, id, T0 + t * S / 10, 5);
      gs_sink_event(f.sink, T0 + S, "proc_start", "python3", 101 + k, "", "");
    }
    steps(&f, 0.040, 0.010, 0, 0);
    char nw[8];
    snprintf(nw, sizeof nw, "%d", w);
    gs_sink_param(f.sink, "num_workers", nw);
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    const struct store_finding *l = find(fs, n, "input_latency");
    const char *want = w > 1 ? "yet the loading processes used" : "yet the loading process used";
    if (!strstr(l->fix, want))
      fail_msg("%d workers: want \"%s\" in %s", w, want, l->fix);
    fake_free(&f, fs);
  }
}

/* loader_workers' advice keeps the workers alive between epochs unless the job already does
 * (persistent_workers=True). Kills `pf = d->persistent_workers == 1 ? 1 : 0` -> `== 0` / `? 0`. */
static void test_mutants_loader_workers_says_keep_them_alive_unless_they_are(void **state) {
  (void)state;
  for (int persistent = 0; persistent < 2; persistent++) {
    struct fake f;
    fake_begin(&f, 20);
    host_and_job(&f, 2, 50, 1.0);
    steps(&f, 0.040, 0.010, 0, 0);
    gs_sink_param(f.sink, "num_workers", "0");
    gs_sink_param(f.sink, "persistent_workers", persistent ? "true" : "false");
    size_t n;
    struct store_finding *fs = fake_end(&f, &n);
    const struct store_finding *lw = find(fs, n, "loader_workers");
    if ((strstr(lw->fix, ", kept alive between epochs") != NULL) == persistent)
      fail_msg("persistent_workers=%d: %s", persistent, lw->fix);
    fake_free(&f, fs);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_input_bound_with_idle_core_advises_two_workers),
      cmocka_unit_test(test_input_bound_on_saturated_cpu_gives_no_worker_advice),
      cmocka_unit_test(test_input_bound_keeps_the_measured_collate),
      cmocka_unit_test(test_input_bound_says_an_unmeasured_residual_counts_as_nothing),
      cmocka_unit_test(test_mutants_the_loader_cpu_range_without_workers),
      cmocka_unit_test(test_mutants_one_worker_is_the_loader),
      cmocka_unit_test(test_cgroup_quota_bounds_the_worker_advice),
      cmocka_unit_test(test_group_runs_on_one_host_count_gpus_once_and_read_the_busiest_job),
      cmocka_unit_test(test_cpuset_bounds_the_worker_advice),
      cmocka_unit_test(test_loading_in_threads_is_named_and_processes_advised),
      cmocka_unit_test(test_data_wait_with_idle_loader_is_latency),
      cmocka_unit_test(test_a_starved_loader_is_not_latency),
      cmocka_unit_test(test_data_wait_in_d_state_is_storage),
      cmocka_unit_test(test_compute_bound_cpu_run_is_healthy),
      cmocka_unit_test(test_blocked_cpu_loop_is_host_code),
      cmocka_unit_test(test_a_contended_host_gets_no_host_code_nor_worker_advice),
      cmocka_unit_test(test_regular_gaps_between_steps_are_periodic_stalls),
      cmocka_unit_test(test_window_of_a_run_gives_that_stretchs_finding),
      cmocka_unit_test(test_proc_roles_name_launcher_trainer_and_workers),
      cmocka_unit_test(test_run_without_signals_is_not_enough_to_judge),
      cmocka_unit_test(test_busy_gpu_is_healthy),
      cmocka_unit_test(test_mutants_each_kind_of_evidence_alone_is_enough),
      cmocka_unit_test(test_mutants_a_busy_gpu_alone_is_judged_healthy),
      cmocka_unit_test(test_mutants_mixed_precision_without_steps_has_an_estimate),
      cmocka_unit_test(test_gpu_rules),
      cmocka_unit_test(test_thermal_reasons_are_throttling),
      cmocka_unit_test(test_multi_gpu_idle_and_straggler),
      cmocka_unit_test(test_an_amd_straggler_names_hip_visible_devices),
      cmocka_unit_test(test_xid_before_the_job_died_comes_first),
      cmocka_unit_test(test_xid_in_a_finished_run_is_a_finding_beside_the_others),
      cmocka_unit_test(test_straggler_with_pcie_replays_names_them),
      cmocka_unit_test(test_a_sick_gpus_idle_time_is_no_batch_advice),
      cmocka_unit_test(test_slow_rank_is_a_straggler),
      cmocka_unit_test(test_mutants_a_group_straggler_names_its_host_with_what_is_known),
      cmocka_unit_test(test_gpu_idle_gaps_are_periodic_stalls),
      cmocka_unit_test(test_each_rule_with_each_input_removed),
      cmocka_unit_test(test_pageable_without_pcie_rate_names_the_h2d_phase),
      cmocka_unit_test(test_phase_share_counts_only_steps_with_the_phase),
      cmocka_unit_test(test_evidence_is_shown_in_units),
      cmocka_unit_test(test_overlapping_findings_get_one_combined_estimate),
      cmocka_unit_test(test_stalls_inside_steps_count_once),
      cmocka_unit_test(test_odd_labels_and_params_do_not_crash),
      cmocka_unit_test(test_unknown_run_is_enoent),
      cmocka_unit_test(test_evidence_builder_stays_valid_when_full),
      cmocka_unit_test(test_rule_ids_are_listed),
      cmocka_unit_test(test_busy8_h200_fixing_all_is_at_most_3x),
      cmocka_unit_test(test_input_bound_run_gets_no_batch_too_small),
      cmocka_unit_test(test_fixing_all_lies_between_the_largest_and_the_shares_added),
      cmocka_unit_test(test_slow_clock_gpu_straggles_beside_a_data_wait),
      cmocka_unit_test(test_host_code_estimate_follows_its_cost),
      cmocka_unit_test(test_underused_counts_the_gpus_that_work),
      cmocka_unit_test(test_gpus_without_util_are_not_no_gpu),
      cmocka_unit_test(test_batch_without_gpm_claims_no_more_than_the_host_overhead),
      cmocka_unit_test(test_batch_without_gpm_amortises_only_the_host_overhead),
      cmocka_unit_test(test_batch_tune_command_without_the_batch_in_the_command),
      cmocka_unit_test(test_data_wait_findings_share_the_run_views_figure),
      cmocka_unit_test(test_other_work_counts_only_as_far_as_the_job_waits),
      cmocka_unit_test(test_unknown_precision_without_gpm_is_said),
      cmocka_unit_test(test_evidence_strings_are_cut_on_a_character_boundary),
      cmocka_unit_test(test_mutants_reduced_precision_job_gets_no_mixed_precision_advice),
      cmocka_unit_test(test_mutants_two_ranks_have_a_straggler),
      cmocka_unit_test(test_mutants_even_gpus_have_no_straggler),
      cmocka_unit_test(test_mutants_idle_gpus_are_unused_only_when_the_job_trains_elsewhere),
      cmocka_unit_test(test_mutants_worker_count_is_the_jobs_param),
      cmocka_unit_test(test_mutants_some_d_state_is_storage_only_under_io_pressure),
      cmocka_unit_test(test_mutants_healthy_title_and_fix_give_their_figures),
      cmocka_unit_test(test_mutants_group_input_bound_names_its_host),
      cmocka_unit_test(test_mutants_window_length_is_end_minus_start),
      cmocka_unit_test(test_mutants_healthy_title_gives_the_data_wait_in_percent),
      cmocka_unit_test(test_mutants_a_nearly_full_gpu_with_free_memory_gets_no_batch_advice),
      cmocka_unit_test(test_mutants_live_diagnosis_fills_its_window_only_when_asked),
      cmocka_unit_test(test_mutants_loader_workers_fix_states_its_model_in_ms),
      cmocka_unit_test(test_mutants_periodic_stalls_are_counted_and_averaged_exactly),
      cmocka_unit_test(test_mutants_throttled_clock_is_read_over_every_stretch),
      cmocka_unit_test(test_mutants_a_cpuset_of_no_cores_is_no_limit),
      cmocka_unit_test(test_mutants_mig_busy_time_is_read_from_gpus_with_sm_activity),
      cmocka_unit_test(test_mutants_host_code_estimate_keeps_the_hosts_share_of_the_target),
      cmocka_unit_test(test_mutants_a_failed_read_is_an_error_not_a_verdict),
      cmocka_unit_test(test_mutants_a_long_runs_throttled_clock_is_read_over_every_stretch),
      cmocka_unit_test(test_mutants_input_latency_names_its_loading_processes),
      cmocka_unit_test(test_mutants_loader_workers_says_keep_them_alive_unless_they_are),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
