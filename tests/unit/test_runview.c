/* Unit tests of the run view on a real SQLite store in a temp folder: windowed statistics (raw for a
 * short series, rollups for a long one, with a one-sample dip kept in the minimum), the client's
 * steps joined by timestamp with unmeasured phases left NAN, a run of more steps than a view holds
 * read as evenly spread stretches beside sums over every step, params and labels parsed strictly, and
 * absent things reported as absent. */
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

#include "runview/runview.h"

#define SEC 1000000000LL

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs-test-runview-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* A finished run named name whose sink content fill() produces, in a fresh store file. */
static struct store *make_run(const char *name, void (*fill)(struct gs_sink *s)) {
  char url[400];
  snprintf(url, sizeof url, "sqlite://%s/%s.db", dir, name);
  struct store *st = store_open(url);
  assert_non_null(st);
  struct store_run r = {.exit_code = -1, .agent_pid = getpid(), .mono_start_ns = 0};
  snprintf(r.name, sizeof r.name, "%s", name);
  gethostname(r.host, sizeof r.host - 1);
  r.start_wall_ns = gs_wall_ns();
  assert_int_equal(st->run_begin(st, &r), 0);
  struct gs_sink *s = gs_sink_new();
  fill(s);
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  gs_sink_free(s);
  snprintf(r.status, sizeof r.status, "finished");
  r.exit_code = 0;
  r.end_wall_ns = r.start_wall_ns + 100 * SEC;
  assert_int_equal(st->run_end(st, &r), 0);
  return st;
}

static void fill_short(struct gs_sink *s) {
  int util = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  for (int k = 0; k < 100; k++) /* 0..99 at 1 s */
    gs_sink_put(s, util, k * SEC, (double)k);
  /* Ten steps of 1 s ending at 10..19 s; data wait measured on even steps only, h2d never. */
  int total = gs_sink_series(s, "client", "step.total_s", "", "s", GS_GAUGE);
  int data = gs_sink_series(s, "client", "step.data_s", "", "s", GS_GAUGE);
  int samples = gs_sink_series(s, "client", "step.samples", "", "count", GS_GAUGE);
  for (int k = 0; k < 10; k++) {
    int64_t t = (10 + k) * SEC;
    gs_sink_put(s, total, t, 1.0);
    if (k % 2 == 0)
      gs_sink_put(s, data, t, 0.25);
    gs_sink_put(s, samples, t, 32);
  }
  gs_sink_param(s, "batch_size", "32");
  gs_sink_param(s, "pin_memory", "False");
  gs_sink_param(s, "num_workers", "4 workers");
}

static void test_runview_short_series_stats_in_a_window(void **state) {
  (void)state;
  struct store *st = make_run("short", fill_short);
  struct runview v;
  assert_int_equal(runview_load(st, "short", &v), 0);
  struct runview_stats s;
  assert_int_equal(runview_stats(&v, "nvml", "gpu.util_pct", "gpu=0", INT64_MIN, INT64_MAX, &s), 0);
  assert_int_equal(s.n, 100);
  assert_true(s.min == 0 && s.max == 99 && fabs(s.mean - 49.5) < 1e-9 && fabs(s.p50 - 49.5) < 1e-9);
  assert_true(s.first == 0 && s.last == 99 && s.t_last == 99 * SEC);
  assert_int_equal(runview_stats(&v, NULL, "gpu.util_pct", NULL, 10 * SEC, 19 * SEC, &s), 0);
  assert_int_equal(s.n, 10);
  assert_true(s.min == 10 && s.max == 19 && fabs(s.mean - 14.5) < 1e-9);
  runview_done(&v);
  st->close(st);
}

static void test_runview_absent_series_is_empty_not_zero(void **state) {
  (void)state;
  struct store *st = make_run("absent", fill_short);
  struct runview v;
  assert_int_equal(runview_load(st, "absent", &v), 0);
  struct runview_stats s;
  assert_int_equal(runview_stats(&v, "nvml", "gpu.power_w", NULL, INT64_MIN, INT64_MAX, &s), 0);
  assert_int_equal(s.n, 0);
  assert_true(isnan(s.mean) && isnan(s.min) && isnan(s.max) && isnan(s.sum) && isnan(s.p95));
  assert_int_equal(runview_stats(&v, "nvml", "gpu.util_pct", "gpu=0", 200 * SEC, 300 * SEC, &s), 0);
  assert_int_equal(s.n, 0);
  assert_true(isnan(s.mean));
  runview_done(&v);
  st->close(st);
}

static void test_runview_steps_join_phases_and_leave_unmeasured_nan(void **state) {
  (void)state;
  struct store *st = make_run("steps", fill_short);
  struct runview v;
  assert_int_equal(runview_load(st, "steps", &v), 0);
  assert_int_equal(v.nsteps, 9); /* the warm-up step is left out */
  assert_int_equal(v.steps[0].t, 11 * SEC);
  for (size_t i = 0; i < v.nsteps; i++) {
    int k = (int)i + 1;
    assert_true(v.steps[i].total == 1.0 && v.steps[i].samples == 32);
    assert_true(k % 2 == 0 ? v.steps[i].data == 0.25 : isnan(v.steps[i].data));
    assert_true(isnan(v.steps[i].h2d) && isnan(v.steps[i].compute));
  }
  /* Under the cap every step is held, in one stretch. */
  assert_int_equal(v.nsteps_total, 9);
  assert_int_equal(v.nstretches, 1);
  assert_false(runview_steps_sampled(&v));
  runview_done(&v);
  st->close(st);
}

/* The one definition of the step figures: a phase's share over the steps that reported it (here the
 * four held steps with data=, 0.25 of their 1 s), throughput over the time the steps cover. */
static void test_runview_step_figures_share_each_phase_over_the_steps_that_reported_it(void **state) {
  (void)state;
  struct store *st = make_run("figures", fill_short);
  struct runview v;
  assert_int_equal(runview_load(st, "last", &v), 0);
  struct runview_step_figures f;
  runview_step_figures(&v, 0, v.nsteps, &f);
  assert_int_equal(f.steps, 9); /* ten sent, the warm-up left out */
  assert_int_equal(f.steps_held, 9);
  assert_int_equal(f.stretches, 1);
  assert_true(fabs(f.data_share - 0.25) < 1e-12);         /* 4 x 0.25 s of 4 s, not of all 9 s */
  assert_true(fabs(f.compute_share - 0.75) < 1e-12);      /* the rest of those steps */
  assert_true(isnan(f.h2d_share) && isnan(f.h2d_mean_s)); /* never measured */
  assert_true(f.median_step_s == 1.0 && f.mean_step_s == 1.0);
  assert_true(fabs(f.samples_per_s - 32) < 1e-9); /* 9 x 32 samples over 11..19 s and the first step's 1 s */
  size_t first, n;
  runview_steps_in(&v, 15 * SEC, INT64_MAX, &first, &n); /* the steps that start at 15 s or later */
  assert_int_equal(n, 4);
  assert_int_equal(v.steps[first].t, 16 * SEC);
  runview_step_figures(&v, first, n, &f);
  assert_int_equal(f.steps, 4);
  assert_true(fabs(f.data_share - 0.25) < 1e-12); /* steps 16 and 18 s timed their data wait */
  runview_done(&v);
  st->close(st);
}

/* The one throughput: runview_throughput's rate is the step figures' (samples or steps per second over
 * the time the steps cover), its half-width 0 for steps all alike; fewer than two steps is GS_EINVAL
 * with NAN; compare's speed-up without samples is the ratio of steps per second. */
static void test_runview_throughput_is_the_step_figures_with_a_half_width(void **state) {
  (void)state;
  struct store *st = make_run("throughput", fill_short);
  struct runview v;
  assert_int_equal(runview_load(st, "last", &v), 0);
  struct runview_step_figures f;
  runview_step_figures(&v, 0, v.nsteps, &f);
  double rate, ci;
  int dof;
  assert_int_equal(runview_throughput(&v, 0, v.nsteps, 1, &rate, &ci, &dof), 0);
  assert_true(rate == f.samples_per_s && fabs(rate - 32) < 1e-9 && fabs(ci) < 1e-9 && dof >= 1);
  assert_int_equal(runview_throughput(&v, 0, v.nsteps, 0, &rate, &ci, &dof), 0);
  assert_true(rate == f.steps_per_s && fabs(rate - 1) < 1e-9);
  assert_int_equal(runview_throughput(&v, 3, 1, 1, &rate, &ci, &dof), GS_EINVAL);
  assert_true(isnan(rate) && isnan(ci));
  struct runview_step_figures half = f;
  f.samples_per_s = half.samples_per_s = NAN;
  half.steps_per_s = f.steps_per_s / 2;
  assert_true(fabs(runview_step_speedup(&f, &half) - 0.5) < 1e-12);
  runview_done(&v);
  st->close(st);
}

/* The live window: the last minute up to the newest sample while the run goes on, the usual window
 * (INT64_MIN, INT64_MAX) once it finished. */
static void test_runview_live_window_ends_at_the_newest_sample(void **state) {
  (void)state;
  struct store *st = make_run("live", fill_short);
  struct runview v;
  assert_int_equal(runview_load(st, "last", &v), 0);
  assert_int_equal(v.t_newest_ns, 99 * SEC);
  struct runview_window w = runview_live_window(&v, 0);
  assert_true(w.from == INT64_MIN && w.to == INT64_MAX && isnan(w.span_s)); /* finished */
  snprintf(v.run.status, sizeof v.run.status, "running");
  w = runview_live_window(&v, 0);
  assert_int_equal(w.to, 99 * SEC);
  assert_int_equal(w.from, (99 - RUNVIEW_LIVE_WINDOW_S) * SEC);
  assert_true(w.span_s == RUNVIEW_LIVE_WINDOW_S);
  w = runview_live_window(&v, 200 * SEC); /* longer than the run: from its start */
  assert_true(w.from == 0 && w.span_s == 99);
  runview_done(&v);
  st->close(st);
}

static void test_runview_params_and_labels_are_strict(void **state) {
  (void)state;
  struct store *st = make_run("params", fill_short);
  struct runview v;
  assert_int_equal(runview_load(st, "params", &v), 0);
  assert_true(runview_param_num(&v, "batch_size") == 32);
  assert_true(isnan(runview_param_num(&v, "num_workers"))); /* "4 workers" is not a number */
  assert_true(isnan(runview_param_num(&v, "precision")));
  assert_int_equal(runview_param_bool(&v, "pin_memory"), 0);
  assert_int_equal(runview_param_bool(&v, "batch_size"), -1);
  assert_null(runview_param(&v, "nope"));
  assert_int_equal(runview_gpu_label("gpu=3"), 3);
  assert_int_equal(runview_gpu_label("gpu=3,pid=9"), -1);
  assert_int_equal(runview_gpu_label("gpu=-1"), -1);
  assert_int_equal(runview_gpu_label("gpu="), -1);
  assert_int_equal(runview_rank_label(""), 0);
  assert_int_equal(runview_rank_label("rank=2"), 2);
  assert_int_equal(runview_rank_label("rank=0"), -1);
  assert_int_equal(runview_rank_label("host=a"), -1);
  assert_true(fabs(v.duration_s - 100) < 1e-6);
  runview_done(&v);
  st->close(st);
}

enum { LONG_POINTS = RUNVIEW_QUICK_POINTS + 50000 };

static void fill_long(struct gs_sink *s) {
  int util = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  for (int k = 0; k < LONG_POINTS; k++) /* 100 ms ticks, busy at 90 % but one 100 ms dip to 0 */
    gs_sink_put(s, util, k * (SEC / 10), k == 123457 ? 0.0 : 90.0);
}

static void test_runview_long_series_reads_rollups_and_keeps_a_dip(void **state) {
  (void)state;
  struct store *st = make_run("long", fill_long);
  struct runview v;
  assert_int_equal(runview_load(st, "long", &v), 0);
  struct runview_stats s;
  assert_int_equal(runview_stats(&v, "nvml", "gpu.util_pct", "gpu=0", INT64_MIN, INT64_MAX, &s), 0);
  /* Buckets of 10 s, not raw points: 25,000 s of samples in 2,500 buckets. */
  assert_int_equal(s.n, LONG_POINTS / 100);
  assert_true(s.min == 0 && s.max == 90);
  assert_true(s.mean > 89.99 && s.mean < 90);
  runview_done(&v);
  st->close(st);
}

/* More steps than a view holds: 10 ms each, ending at k * 10 ms, data wait 4 ms on every step, compute
 * measured on odd steps only, 8 samples each. */
#define MANY_STEPS 600000
#define MS 1000000LL

static void fill_many_steps(struct gs_sink *s) {
  int total = gs_sink_series(s, "client", "step.total_s", "", "s", GS_GAUGE);
  int data = gs_sink_series(s, "client", "step.data_s", "", "s", GS_GAUGE);
  int compute = gs_sink_series(s, "client", "step.compute_s", "", "s", GS_GAUGE);
  int samples = gs_sink_series(s, "client", "step.samples", "", "count", GS_GAUGE);
  for (int64_t k = 1; k <= MANY_STEPS; k++) {
    gs_sink_put(s, total, k * 10 * MS, 0.010);
    gs_sink_put(s, data, k * 10 * MS, 0.004);
    if (k % 2)
      gs_sink_put(s, compute, k * 10 * MS, 0.006);
    gs_sink_put(s, samples, k * 10 * MS, 8);
  }
}

static void test_runview_long_run_holds_spread_stretches_and_sums_every_step(void **state) {
  (void)state;
  struct store *st = make_run("many", fill_many_steps);
  struct runview v;
  assert_int_equal(runview_load(st, "many", &v), 0);
  assert_true(runview_steps_sampled(&v));
  assert_int_equal(v.nsteps_total, MANY_STEPS - 1); /* the warm-up step is left out */
  assert_true(v.nsteps <= RUNVIEW_MAX_STEPS && v.nsteps >= RUNVIEW_MAX_STEPS - 1);
  assert_int_equal(v.nstretches, RUNVIEW_STRETCHES);
  /* The first held step is the run's first kept one, the last its last; inside a stretch the steps
   * are consecutive and joined; between stretches whole stretches of the run are skipped. */
  assert_int_equal(v.steps[0].t, 2 * 10 * MS);
  assert_int_equal(v.steps[v.nsteps - 1].t, MANY_STEPS * 10 * MS);
  size_t breaks = 0;
  for (size_t i = 0; i < v.nsteps; i++) {
    int64_t k = v.steps[i].t / (10 * MS);
    assert_true(v.steps[i].data == 0.004 && v.steps[i].samples == 8);
    assert_true(k % 2 ? v.steps[i].compute == 0.006 : isnan(v.steps[i].compute));
    if (i && v.steps[i].stretch == v.steps[i - 1].stretch)
      assert_int_equal(v.steps[i].t - v.steps[i - 1].t, 10 * MS);
    else if (i) {
      breaks++;
      assert_int_equal(v.steps[i].stretch, v.steps[i - 1].stretch + 1);
      assert_true(v.steps[i].t - v.steps[i - 1].t > 1000 * 10 * MS);
    }
  }
  assert_int_equal(breaks, RUNVIEW_STRETCHES - 1);
  /* The sums are the whole run's, not the held steps'. */
  assert_true(v.loop.samples == 8.0 * (MANY_STEPS - 1) && v.loop.nsamples == MANY_STEPS - 1);
  assert_int_equal(v.loop.ndata, MANY_STEPS - 1);
  assert_int_equal(v.loop.ncompute, MANY_STEPS / 2 - 1); /* odd steps, less the warm-up one */
  assert_true(fabs(v.loop.total - 0.010 * (MANY_STEPS - 1)) < 1e-6);
  assert_int_equal(v.loop.t_first, 2 * 10 * MS);
  assert_int_equal(v.loop.t_last, MANY_STEPS * 10 * MS);
  char buf[96], want[96];
  snprintf(want, sizeof want, "%zu of %d steps in %d stretches", v.nsteps, MANY_STEPS - 1, RUNVIEW_STRETCHES);
  assert_string_equal(runview_steps_sampling(&v, buf, sizeof buf), want);
  runview_done(&v);
  st->close(st);
}

static void test_runview_unknown_run_is_enoent(void **state) {
  (void)state;
  struct store *st = make_run("known", fill_short);
  struct runview v;
  assert_int_equal(runview_load(st, "unknown-run", &v), GS_ENOENT);
  runview_done(&v);
  st->close(st);
}

/* A group's series carry host=H: a query that names no host matches every node's, one that names a
 * host matches that node's only; a single run matches exactly. */
static void test_runview_group_labels_match_without_the_host(void **state) {
  (void)state;
  struct runview v = {.group = 1};
  assert_true(runview_labels_match(&v, "cpu=total,host=nodeb", "cpu=total"));
  assert_true(runview_labels_match(&v, "host=nodeb", ""));
  assert_true(runview_labels_match(&v, "pid=7,host=b,x=1", "pid=7,x=1"));
  assert_true(runview_labels_match(&v, "cpu=total,host=nodeb", "cpu=total,host=nodeb"));
  assert_false(runview_labels_match(&v, "cpu=total,host=nodeb", "cpu=total,host=nodea"));
  assert_false(runview_labels_match(&v, "cpu=1,host=nodeb", "cpu=total"));
  assert_false(runview_labels_match(&v, "cpu=total", ""));
  /* several runs on one host: their own series carry run=ID too */
  assert_true(runview_labels_match(&v, "pid=7,host=b,run=R1", "pid=7"));
  assert_true(runview_labels_match(&v, "host=b,run=R1", "host=b"));
  assert_true(runview_labels_match(&v, "host=b,run=R1", "host=b,run=R1"));
  assert_false(runview_labels_match(&v, "host=b,run=R1", "host=b,run=R2"));
  assert_false(runview_labels_match(&v, "host=b,run=R1", "host=a"));
  v.group = 0;
  assert_false(runview_labels_match(&v, "cpu=total,host=nodeb", "cpu=total"));
  assert_true(runview_labels_match(&v, "cpu=total", "cpu=total"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_runview_short_series_stats_in_a_window),
      cmocka_unit_test(test_runview_absent_series_is_empty_not_zero),
      cmocka_unit_test(test_runview_steps_join_phases_and_leave_unmeasured_nan),
      cmocka_unit_test(test_runview_params_and_labels_are_strict),
      cmocka_unit_test(test_runview_step_figures_share_each_phase_over_the_steps_that_reported_it),
      cmocka_unit_test(test_runview_throughput_is_the_step_figures_with_a_half_width),
      cmocka_unit_test(test_runview_live_window_ends_at_the_newest_sample),
      cmocka_unit_test(test_runview_long_series_reads_rollups_and_keeps_a_dip),
      cmocka_unit_test(test_runview_unknown_run_is_enoent),
      cmocka_unit_test(test_runview_group_labels_match_without_the_host),
      cmocka_unit_test(test_runview_long_run_holds_spread_stretches_and_sums_every_step),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
