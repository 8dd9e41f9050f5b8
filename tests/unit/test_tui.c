/* Unit tests of the live view's parts that need no terminal: escaping untrusted text for it, and the
 * snapshot of a run read from a real SQLite store — figures that were not measured stay unknown
 * (NAN), processes carry their escaped names and GPU memory, the steps' breakdown covers the last
 * window only. */
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

#include "tui/tui.h"

#define SEC 1000000000LL

static char dir[256];
static int mixed_steps; /* fill(): the last ten steps alternate with and without data= */

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs-test-tui-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_escape_replaces_control_sequences(void **state) {
  (void)state;
  char out[64];
  assert_string_equal(gs_term_escape("bad\x1b]0;pwned\x07name", 1, out, sizeof out), "bad?]0;pwned?name");
  assert_string_equal(gs_term_escape("a\tb\nc\x7f", 1, out, sizeof out), "a?b?c?");
  /* U+009B, the C1 control sequence introducer, written in UTF-8 */
  assert_string_equal(gs_term_escape("x\xc2\x9b"
                                     "31m",
                                     1, out, sizeof out),
                      "x??31m");
}

/* The bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE, U+2066 LEFT-TO-RIGHT ISOLATE, ...) are
 * well-formed UTF-8 that would display a name reversed: each becomes one '?'. */
static void test_escape_replaces_bidirectional_controls(void **state) {
  (void)state;
  char out[64];
  assert_string_equal(gs_term_escape("\xe2\x80\xaegnp.exe", 1, out, sizeof out), "?gnp.exe");
  assert_string_equal(gs_term_escape("a\xe2\x80\xaa"
                                     "b\xe2\x81\xa6"
                                     "c\xe2\x81\xa9"
                                     "d",
                                     1, out, sizeof out),
                      "a?b?c?d");
  assert_string_equal(gs_term_escape("\xe2\x80\xa9\xe2\x81\xaa", 1, out, sizeof out),
                      "\xe2\x80\xa9\xe2\x81\xaa"); /* neighbours kept */
}

static void test_escape_keeps_utf8_only_on_a_utf8_terminal(void **state) {
  (void)state;
  char out[64];
  assert_string_equal(gs_term_escape("caf\xc3\xa9", 1, out, sizeof out), "caf\xc3\xa9");
  assert_string_equal(gs_term_escape("caf\xc3\xa9", 0, out, sizeof out), "caf??");
  assert_string_equal(gs_term_escape("cut\xc3", 1, out, sizeof out), "cut?");        /* truncated */
  assert_string_equal(gs_term_escape("long\xc0\xaf", 1, out, sizeof out), "long??"); /* overlong '/' */
  assert_string_equal(gs_term_escape("ab\xe2\x82\xac", 1, out, 5), "ab");            /* no room: cut whole */
  assert_string_equal(gs_term_escape(NULL, 1, out, sizeof out), "");
}

/* A finished run: GPU 0 without SM activity or power; two processes, one with an escape sequence in
 * its name; 30 steps, the last ten with a different breakdown. */
static void fill(struct gs_sink *s) {
  int util = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  int used = gs_sink_series(s, "nvml", "gpu.mem_used_bytes", "gpu=0", "B", GS_GAUGE);
  int total = gs_sink_series(s, "nvml", "gpu.mem_total_bytes", "gpu=0", "B", GS_GAUGE);
  int pm = gs_sink_series(s, "nvml", "gpu.proc_mem_bytes", "gpu=0,pid=100", "B", GS_GAUGE);
  int core0 = gs_sink_series(s, "host", "host.cpu.busy_pct", "cpu=0", "%", GS_GAUGE);
  int cpu_a = gs_sink_series(s, "proctree", "proc.cpu_pct", "pid=100", "%", GS_GAUGE);
  int cpu_b = gs_sink_series(s, "proctree", "proc.cpu_pct", "pid=101", "%", GS_GAUGE);
  int rss_a = gs_sink_series(s, "proctree", "proc.rss_bytes", "pid=100", "B", GS_GAUGE);
  for (int k = 0; k <= 30; k++) {
    int64_t t = k * SEC;
    gs_sink_put(s, util, t, k < 20 ? 90 : 40);
    gs_sink_put(s, used, t, 4e9);
    gs_sink_put(s, total, t, 8e9);
    gs_sink_put(s, pm, t, 3e9);
    gs_sink_put(s, core0, t, 55);
    gs_sink_put(s, cpu_a, t, 120);
    if (k >= 5)
      gs_sink_put(s, cpu_b, t, 80);
    gs_sink_put(s, rss_a, t, 1e9);
  }
  gs_sink_event(s, 0, "proc_start", "python3", 100, "pid=100", "");
  gs_sink_event(s, 5 * SEC, "proc_start", "evil\x1b[2J", 101, "pid=101", "");
  gs_sink_event(s, 25 * SEC + SEC / 2, "xid", "79", 79, "gpu=0", "Xid 79 (fallen off the bus)");
  int st_total = gs_sink_series(s, "client", "step.total_s", "", "s", GS_GAUGE);
  int st_data = gs_sink_series(s, "client", "step.data_s", "", "s", GS_GAUGE);
  int st_comp = gs_sink_series(s, "client", "step.compute_s", "", "s", GS_GAUGE);
  int st_smp = gs_sink_series(s, "client", "step.samples", "", "count", GS_GAUGE);
  for (int k = 1; k <= 30; k++) { /* one 1 s step a second; the last ten wait 0.75 s for data */
    int64_t t = k * SEC;
    double data = k > 20 ? 0.75 : 0.25;
    int timed = !mixed_steps || k <= 20 || k % 2 == 0; /* mixed: odd steps time only their compute */
    gs_sink_put(s, st_total, t, 1.0);
    if (timed)
      gs_sink_put(s, st_data, t, data);
    gs_sink_put(s, st_comp, t, timed ? 1.0 - data : 1.0);
    gs_sink_put(s, st_smp, t, 64);
  }
  gs_sink_param(s, "gpu.0.name", "Sim\x1b[5mGPU");
}

static struct store *make_run(void) {
  char url[400];
  snprintf(url, sizeof url, "sqlite://%s/tui.db", dir);
  struct store *st = store_open(url);
  assert_non_null(st);
  struct store_run r = {.exit_code = -1, .agent_pid = getpid(), .mono_start_ns = 0};
  snprintf(r.name, sizeof r.name, "snap\x1b[1m");
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
  r.end_wall_ns = r.start_wall_ns + 31 * SEC;
  assert_int_equal(st->run_end(st, &r), 0);
  return st;
}

static void test_snapshot_keeps_unmeasured_figures_unknown(void **state) {
  (void)state;
  struct store *st = make_run();
  struct tui_snap s;
  assert_int_equal(tui_snap_load(st, "last", 60, 1, 0, &s), 0);
  assert_false(s.running);
  assert_int_equal(s.t_ns, 30 * SEC);
  assert_int_equal(s.ngpus, 1);
  assert_string_equal(s.gpus[0].name, "Sim?[5mGPU");
  assert_string_equal(s.run.name, "snap?[1m");
  assert_true(s.gpus[0].util == 40);
  assert_true(isnan(s.gpus[0].sm));    /* no GPM */
  assert_true(isnan(s.gpus[0].power)); /* not measured is not 0 W */
  assert_true(isnan(s.gpus[0].temp));
  assert_true(s.gpus[0].mem_used == 4e9 && s.gpus[0].mem_total == 8e9);
  assert_true(isnan(s.cpu_total)); /* only cpu=0 was stored */
  assert_int_equal(s.ncores, 1);
  assert_true(s.cores[0] == 55);
  tui_snap_done(&s);
  st->close(st);
}

static void test_snapshot_history_is_per_second_with_the_newest_last(void **state) {
  (void)state;
  struct store *st = make_run();
  struct tui_snap s;
  assert_int_equal(tui_snap_load(st, "last", 60, 1, 0, &s), 0);
  assert_int_equal(s.gpus[0].nhist, 60);
  assert_true(s.gpus[0].hist[59] == 40);      /* the second ending at 30 s */
  assert_true(s.gpus[0].hist[59 - 15] == 90); /* 15 s earlier: before the drop at 20 s */
  assert_true(isnan(s.gpus[0].hist[0]));      /* before the run: a gap, not 0 */
  /* the Xid at 25.5 s is marked in the second ending at 26 s, and named */
  assert_int_equal(s.gpus[0].xid[55], 79);
  assert_int_equal(s.gpus[0].xid[54] + s.gpus[0].xid[56], 0);
  assert_int_equal(s.gpus[0].last_xid, 79);
  tui_snap_done(&s);
  st->close(st);
}

static void test_snapshot_processes_in_order_with_names_and_gpu_memory(void **state) {
  (void)state;
  struct store *st = make_run();
  struct tui_snap s;
  assert_int_equal(tui_snap_load(st, "last", 10, 1, 0, &s), 0);
  assert_int_equal(s.nprocs, 2);
  assert_int_equal(s.procs[0].pid, 100);
  assert_string_equal(s.procs[0].comm, "python3");
  assert_true(s.procs[0].cpu == 120 && s.procs[0].rss == 1e9 && s.procs[0].gpu_mem == 3e9);
  assert_int_equal(s.procs[1].pid, 101);
  assert_string_equal(s.procs[1].comm, "evil?[2J");
  assert_true(isnan(s.procs[1].rss) && isnan(s.procs[1].gpu_mem)); /* none stored */
  tui_snap_done(&s);
  st->close(st);
}

static void test_snapshot_steps_cover_the_last_window(void **state) {
  (void)state;
  struct store *st = make_run();
  struct tui_snap s;
  assert_int_equal(tui_snap_load(st, "last", 10, 1, 0, &s), 0);
  assert_int_equal(s.steps_total, 29); /* the first step is warm-up (runview) */
  assert_true(fabs(s.data_share - 0.75) < 1e-9);
  assert_true(fabs(s.compute_share - 0.25) < 1e-9);
  assert_true(isnan(s.h2d_share)); /* never measured */
  assert_true(fabs(s.step_s - 1.0) < 1e-9);
  assert_true(fabs(s.steps_per_s - 1.0) < 0.11);
  assert_true(fabs(s.samples_per_s - 64) < 7);
  tui_snap_done(&s);
  st->close(st);
}

/* A step that did not time its data wait is not a step without one: the window's data share is over
 * the steps that reported it (runview_step_figures), as the report and serve compute it. */
static void test_snapshot_shares_each_phase_over_the_steps_that_reported_it(void **state) {
  (void)state;
  mixed_steps = 1;
  struct store *st = make_run();
  mixed_steps = 0;
  struct tui_snap s;
  assert_int_equal(tui_snap_load(st, "last", 10, 1, 0, &s), 0);
  assert_true(fabs(s.data_share - 0.75) < 1e-9);
  assert_true(fabs(s.compute_share - 0.25) < 1e-9);
  assert_true(fabs(s.step_s - 1.0) < 1e-9);
  tui_snap_done(&s);
  st->close(st);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_escape_replaces_control_sequences),
      cmocka_unit_test(test_escape_replaces_bidirectional_controls),
      cmocka_unit_test(test_escape_keeps_utf8_only_on_a_utf8_terminal),
      cmocka_unit_test_setup_teardown(test_snapshot_keeps_unmeasured_figures_unknown, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshot_history_is_per_second_with_the_newest_last, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshot_processes_in_order_with_names_and_gpu_memory, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshot_steps_cover_the_last_window, setup, teardown),
      cmocka_unit_test_setup_teardown(test_snapshot_shares_each_phase_over_the_steps_that_reported_it, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
