/* Unit tests of the report's charts and pages on synthetic runs written straight into a store: a long
 * run is drawn (serve's downsampler, what the web page's charts read) in buckets whose minimum keeps a
 * dip shorter than a bucket; a gap in the samples is a gap (null) in the line; the HTML page of a long
 * multi-GPU run (the web app's page) is written in one piece; a run
 * too long to read raw is diagnosed and summarised from rollups and throttle events; the JSON
 * checker accepts what JSON allows and nothing else. */
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

#include "doctor/doctor.h"
#include "json_numbers.h"
#include "report/report_int.h"
#include "runview/runview.h"
#include "serve/serve_int.h"
#include "store/store.h"

#define S 1000000000LL
#define T0 (3 * S)

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs-test-charts-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* A two-hour run at 10 Hz: GPU 0 and 1 busy at 97 % except one 0.3 s dip to 0 at 3600 s on GPU 0, and
 * no samples at all from 5000 s to 5100 s on GPU 1 (the driver did not answer). */
static struct store *long_run(struct store_run *run) {
  char url[400];
  snprintf(url, sizeof url, "sqlite://%s/long.db", dir);
  struct store *st = store_open(url);
  assert_non_null(st);
  memset(run, 0, sizeof *run);
  snprintf(run->name, sizeof run->name, "long");
  run->agent_pid = getpid();
  run->exit_code = -1;
  run->start_wall_ns = gs_wall_ns();
  run->mono_start_ns = T0;
  run->interval_ns = S / 10;
  assert_int_equal(st->run_begin(st, run), 0);
  struct gs_sink *sink = gs_sink_new();
  int u0 = gs_sink_series(sink, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  int u1 = gs_sink_series(sink, "nvml", "gpu.util_pct", "gpu=1", "%", GS_GAUGE);
  int m0 = gs_sink_series(sink, "nvml", "gpu.mem_used_bytes", "gpu=0", "B", GS_GAUGE);
  int c0 = gs_sink_series(sink, "host", "host.cpu.busy_pct", "cpu=0", "%", GS_GAUGE);
  for (int64_t k = 0; k <= 7200 * 10; k++) {
    int64_t t = T0 + k * S / 10;
    double s = k / 10.0;
    gs_sink_put(sink, u0, t, s >= 3600 && s < 3600.3 ? 0 : 97);
    if (s < 5000 || s >= 5100)
      gs_sink_put(sink, u1, t, 97);
    gs_sink_put(sink, m0, t, 60e9);
    gs_sink_put(sink, c0, t, 40);
    if (k % 10000 == 0) {
      struct gs_batch *b = gs_sink_take(sink);
      assert_int_equal(st->run_append(st, run, b), 0);
      gs_batch_free(b);
    }
  }
  struct gs_batch *b = gs_sink_take(sink);
  assert_int_equal(st->run_append(st, run, b), 0);
  gs_batch_free(b);
  gs_sink_free(sink);
  snprintf(run->status, sizeof run->status, "finished");
  run->exit_code = 0;
  run->end_wall_ns = run->start_wall_ns + 7200 * S;
  assert_int_equal(st->run_end(st, run), 0);
  return st;
}

/* One series of the run as the web page's charts get it (serve's downsampler), as JSON text. */
static char *chart_json(const struct runview *v, const char *labels, size_t points) {
  long i = runview_find(v, NULL, "gpu.util_pct", labels);
  assert_true(i >= 0);
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  assert_int_equal(serve_series_json(m, v, &v->series[i], INT64_MIN, INT64_MAX, points, 1), 0);
  fclose(m);
  return buf;
}

static void test_long_run_keeps_a_short_dip_and_a_gap(void **state) {
  (void)state;
  struct store_run run;
  struct store *st = long_run(&run);
  struct runview v;
  assert_int_equal(runview_load(st, run.id, &v), 0);
  /* 72,001 raw points become 720 buckets of 10 s, light enough for a chart. */
  static double mn[800], mean[800];
  char *json = chart_json(&v, "gpu=0", 720);
  size_t n = json_numbers(json, "min", mn, 800);
  assert_int_equal(json_numbers(json, "mean", mean, 800), n);
  if (!(n > 700 && n <= 720))
    fail_msg("%zu points", n);
  double lowest = INFINITY, lowest_mean = INFINITY;
  for (size_t i = 0; i < n; i++) {
    lowest = fmin(lowest, mn[i]);
    lowest_mean = fmin(lowest_mean, mean[i]);
  }
  assert_true(lowest == 0);      /* the 0.3 s dip is the bucket's minimum ... */
  assert_true(lowest_mean > 60); /* ... though its mean hides it */
  free(json);
  json = chart_json(&v, "gpu=1", 720);
  n = json_numbers(json, "min", mn, 800);
  int gap = 0;
  for (size_t i = 0; i < n; i++) {
    gap |= isnan(mn[i]);
    assert_true(isnan(mn[i]) || mn[i] == 97);
  }
  assert_true(gap); /* the silent 100 s are a gap (null), never zeros */
  free(json);
  runview_done(&v);

  /* The HTML report: the web app's page with the run's data in it (or, in a build without the
   * web UI, a clear refusal). */
  char *page = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&page, &len);
  char *ref = run.id;
  int rc = serve_page_write(out, st, &ref, 1);
  fclose(out);
  if (!serve_nassets) {
    assert_int_equal(rc, GS_EINVAL);
  } else {
    assert_int_equal(rc, 0);
    assert_non_null(strstr(page, "window.GS_EMBED"));
    assert_non_null(strstr(page, "\"gpu.util_pct\""));
    assert_non_null(strstr(page, "</html>"));
  }
  free(page);
  st->close(st);
}

/* Six hours at 10 Hz (216,001 points a series: past the raw-read limit) with thermal throttling from
 * the first to the second hour, as samples and as the collector's start/stop events. */
static void test_long_run_is_summarised_from_rollups_and_events(void **state) {
  (void)state;
  char url[400];
  snprintf(url, sizeof url, "sqlite://%s/six.db", dir);
  struct store *st = store_open(url);
  assert_non_null(st);
  struct store_run run;
  memset(&run, 0, sizeof run);
  snprintf(run.name, sizeof run.name, "six");
  run.agent_pid = getpid();
  run.exit_code = -1;
  run.start_wall_ns = gs_wall_ns();
  run.mono_start_ns = T0;
  run.interval_ns = S / 10;
  assert_int_equal(st->run_begin(st, &run), 0);
  struct gs_sink *sink = gs_sink_new();
  int util = gs_sink_series(sink, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  int clk = gs_sink_series(sink, "nvml", "gpu.sm_clock_mhz", "gpu=0", "MHz", GS_GAUGE);
  int thr = gs_sink_series(sink, "nvml", "gpu.throttle_reasons", "gpu=0", "", GS_GAUGE);
  int mem = gs_sink_series(sink, "nvml", "gpu.mem_used_bytes", "gpu=0", "B", GS_GAUGE);
  int tot = gs_sink_series(sink, "nvml", "gpu.mem_total_bytes", "gpu=0", "B", GS_GAUGE);
  gs_sink_param(sink, "precision", "bf16");
  gs_sink_event(sink, T0 + 3600 * S, "throttle_start", "SwThermalSlowdown", NAN, "gpu=0", "");
  gs_sink_event(sink, T0 + 7200 * S, "throttle_stop", "SwThermalSlowdown", NAN, "gpu=0", "");
  for (int64_t k = 0; k <= 6 * 36000; k++) {
    int64_t t = T0 + k * S / 10;
    int hot = k >= 36000 && k < 72000;
    gs_sink_put(sink, util, t, 97);
    gs_sink_put(sink, clk, t, hot ? 1200 : 1980);
    gs_sink_put(sink, thr, t, hot ? 0x20 : 0);
    gs_sink_put(sink, mem, t, 70e9);
    gs_sink_put(sink, tot, t, 80e9);
    if (k % 20000 == 0) {
      struct gs_batch *b = gs_sink_take(sink);
      assert_int_equal(st->run_append(st, &run, b), 0);
      gs_batch_free(b);
    }
  }
  struct gs_batch *b = gs_sink_take(sink);
  assert_int_equal(st->run_append(st, &run, b), 0);
  gs_batch_free(b);
  gs_sink_free(sink);
  snprintf(run.status, sizeof run.status, "finished");
  run.exit_code = 0;
  run.end_wall_ns = run.start_wall_ns + 6 * 3600 * S;
  assert_int_equal(st->run_end(st, &run), 0);

  struct store_finding *f;
  size_t n;
  assert_int_equal(doctor_diagnose(st, run.id, &f, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(f[0].rule, "throttled");
  /* a sixth of the run at 1200 of 1980 MHz, 97 % busy: about 6 % lost */
  if (!(f[0].share > 0.05 && f[0].share < 0.075))
    fail_msg("share %g: %s", f[0].share, f[0].evidence);
  free(f);

  struct report_run r;
  assert_int_equal(report_run_load(st, run.id, 0, &r), 0);
  assert_int_equal(r.ngpus, 1);
  assert_true(fabs(r.gpus[0].util - 97) < 1e-9 && r.gpus[0].util_min == 97);
  assert_true(r.gpus[0].mem_peak == 70e9 && fabs(r.gpu_idle_hours - 6 * 0.03) < 1e-6);
  report_run_done(&r);
  st->close(st);
}

static void test_json_checker(void **state) {
  (void)state;
  const char *good[] = {"{}", " { \"a\" : 1 } ", "{\"a\":[1,2.5e-3,-0,true,false,null,\"x\\u00e9\\n\"],\"b\":{}}",
                        "{\"\xc3\xa9\":\"\xe2\x82\xac\"}"};
  const char *bad[] = {"",
                       "[]",
                       "{",
                       "{\"a\":}",
                       "{\"a\":1,}",
                       "{\"a\":01}",
                       "{\"a\":1} x",
                       "{'a':1}",
                       "{\"a\":\"\x01\"}",
                       "{\"a\":\"\xff\"}",
                       "{\"a\":nan}",
                       "{\"a\":.5}",
                       "{\"a\":\"\\x\"}",
                       "{\"a\":tru}"};
  for (size_t i = 0; i < sizeof good / sizeof *good; i++)
    assert_true(gs_json_object_valid(good[i]));
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (gs_json_object_valid(bad[i]))
      fail_msg("accepted %s", bad[i]);
  char deep[512] = "";
  for (int i = 0; i < 40; i++)
    strcat(deep, "{\"a\":");
  strcat(deep, "1");
  for (int i = 0; i < 40; i++)
    strcat(deep, "}");
  assert_false(gs_json_object_valid(deep)); /* nesting is bounded */
}

static void test_utf8_is_repaired(void **state) {
  (void)state;
  char *buf = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&buf, &len);
  gs_json_str(out, "ok \xc3\xa9 \xff \xed\xa0\x80 \x1b[0m \"");
  fputc('\n', out);
  gs_term_text(out, "a\x1b[31mb\x07\xc2\x9b c\n", 0);
  fclose(out);
  assert_string_equal(buf, "\"ok \xc3\xa9 \xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \\u001b[0m \\\"\"\n"
                           "a[31mb c ");
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_long_run_keeps_a_short_dip_and_a_gap),
      cmocka_unit_test(test_long_run_is_summarised_from_rollups_and_events),
      cmocka_unit_test(test_json_checker),
      cmocka_unit_test(test_utf8_is_repaired),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
