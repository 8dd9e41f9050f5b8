/* Unit tests of serve's series answers and its self-contained page on a synthetic two-hour run
 * written straight into a store: the downsampler (what the web page's charts read) keeps a dip
 * shorter than a bucket as the bucket's minimum, a gap in the samples is a gap (null) in the line,
 * never zeros, and the HTML page of the long run is written in one piece (or refused in a build
 * without the web UI). Moved from test_report_charts.c, which mixed serve's tests with the
 * report's (issue 25). */
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

#include "json_numbers.h"
#include "runview/runview.h"
#include "serve/serve_int.h"
#include "store/store.h"

#define S 1000000000LL
#define T0 (3 * S)

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs-test-serve-series-XXXXXX");
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_long_run_keeps_a_short_dip_and_a_gap),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
