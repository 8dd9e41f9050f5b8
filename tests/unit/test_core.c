/* Unit tests of core: durations, the sink's series registry, batches and validity. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"

static void test_duration_accepts_units(void **state) {
  (void)state;
  int64_t ns;
  assert_int_equal(gs_parse_duration("50ms", &ns), 0);
  assert_int_equal(ns, 50000000);
  assert_int_equal(gs_parse_duration("0.5s", &ns), 0);
  assert_int_equal(ns, 500000000);
  assert_int_equal(gs_parse_duration("2s", &ns), 0);
  assert_int_equal(ns, 2000000000);
  assert_int_equal(gs_parse_duration("2", &ns), 0);
  assert_int_equal(ns, 2000000000);
  assert_int_equal(gs_parse_duration("1m", &ns), 0);
  assert_int_equal(ns, 60000000000LL);
}

/* A sampling loop's ticks: the next one on time, or, behind, the first of the same grid after now. */
static void test_tick_after_keeps_the_grid(void **state) {
  (void)state;
  assert_int_equal(gs_tick_after(1000, 1010, 50), 1050); /* on time */
  assert_int_equal(gs_tick_after(1000, 1050, 50), 1100); /* exactly at the next tick: the one after */
  assert_int_equal(gs_tick_after(1000, 1182, 50), 1200); /* 0.132 late: two ticks skipped, not 1232 */
  assert_int_equal(gs_tick_after(-100, 0, 50), 50);      /* a grid that started before zero */
  assert_int_equal(gs_tick_after(0, 10 * GS_NS_PER_S, GS_NS_PER_S), 11 * GS_NS_PER_S);
}

static void test_duration_rejects_garbage(void **state) {
  (void)state;
  int64_t ns;
  const char *bad[] = {"", "abc", "10 ms", "-1s", "nan", "inf", "5parsecs", "1e400", " 5"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(gs_parse_duration(bad[i], &ns), GS_EINVAL);
    assert_true(strlen(gs_last_error()) > 0);
  }
}

static void test_sink_series_are_deduplicated(void **state) {
  (void)state;
  struct gs_sink *s = gs_sink_new();
  int a = gs_sink_series(s, "host", "x", "cpu=0", "%", GS_GAUGE);
  int b = gs_sink_series(s, "host", "x", "cpu=1", "%", GS_GAUGE);
  int c = gs_sink_series(s, "host", "x", "cpu=0", "%", GS_GAUGE);
  assert_true(a >= 0 && b >= 0);
  assert_int_not_equal(a, b);
  assert_int_equal(a, c);
  assert_int_equal(gs_sink_find(s, "host", "x", "cpu=1"), b);
  assert_int_equal(gs_sink_find(s, "host", "y", ""), -1);
  gs_sink_free(s);
}

static void test_sink_many_series_survive_rehash(void **state) {
  (void)state;
  struct gs_sink *s = gs_sink_new();
  char lab[32];
  for (int i = 0; i < 5000; i++) {
    snprintf(lab, sizeof lab, "pid=%d", i);
    assert_int_equal(gs_sink_series(s, "proctree", "proc.cpu_pct", lab, "%", GS_GAUGE), i);
  }
  for (int i = 0; i < 5000; i += 97) {
    snprintf(lab, sizeof lab, "pid=%d", i);
    assert_int_equal(gs_sink_find(s, "proctree", "proc.cpu_pct", lab), i);
  }
  gs_sink_free(s);
}

static void test_sink_drops_non_finite_values(void **state) {
  (void)state;
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "host", "x", "", "", GS_GAUGE);
  gs_sink_put(s, id, 1, NAN);
  gs_sink_put(s, id, 2, INFINITY);
  gs_sink_put(s, id, 3, 7.0);
  gs_sink_put(s, 999, 4, 1.0); /* unknown id: ignored */
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(b->n_points, 1);
  assert_true(b->points[0].v == 7.0);
  assert_int_equal(b->n_series, 1);
  assert_true(gs_sink_last(s, id) == 7.0);
  gs_batch_free(b);
  b = gs_sink_take(s);
  assert_int_equal(b->n_points, 0);
  assert_int_equal(b->n_series, 0); /* a series is announced once */
  gs_batch_free(b);
  gs_sink_free(s);
}

static void test_sink_carries_events_params_notes(void **state) {
  (void)state;
  struct gs_sink *s = gs_sink_new();
  gs_sink_event(s, 5, "mark", "epoch", 1, NULL, "x");
  gs_sink_param(s, "batch_size", "64");
  gs_sink_note(s, "gpu%d: fan: %s", 0, "Not Supported");
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(b->n_events, 1);
  assert_string_equal(b->events[0].labels, "");
  assert_string_equal(b->params[0].value, "64");
  assert_string_equal(b->notes[0], "gpu0: fan: Not Supported");
  gs_batch_free(b);
  gs_sink_free(s);
}

/* The one JSON string writer: escapes, control characters as \u00XX, invalid UTF-8 replaced. */
static void test_json_str_escapes_and_repairs_utf8(void **state) {
  (void)state;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  gs_json_str(f, "a\"b\\c\n\t\x1b[2J\x7f\xff\xc3\xa9");
  fclose(f);
  assert_string_equal(buf, "\"a\\\"b\\\\c\\n\\t\\u001b[2J\\u007f\xef\xbf\xbd\xc3\xa9\"");
  free(buf);
}

static void test_sink_source_last_time_is_the_latest_point(void **state) {
  (void)state;
  struct gs_sink *s = gs_sink_new();
  int a = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  int b = gs_sink_series(s, "nvml", "gpu.temp_c", "gpu=0", "C", GS_GAUGE);
  int c = gs_sink_series(s, "nvmlx", "other", "", "", GS_GAUGE);
  assert_int_equal(gs_sink_source_last_t(s, "nvml"), 0); /* no point yet */
  gs_sink_put(s, a, 100, 1);
  gs_sink_put(s, b, 300, 1);
  gs_sink_put(s, a, 200, 1);
  gs_sink_put(s, c, 900, 1); /* another source, even with a prefix in common */
  assert_int_equal(gs_sink_source_last_t(s, "nvml"), 300);
  gs_batch_free(gs_sink_take(s));
  gs_sink_free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_duration_accepts_units),
      cmocka_unit_test(test_duration_rejects_garbage),
      cmocka_unit_test(test_tick_after_keeps_the_grid),
      cmocka_unit_test(test_sink_series_are_deduplicated),
      cmocka_unit_test(test_sink_many_series_survive_rehash),
      cmocka_unit_test(test_sink_drops_non_finite_values),
      cmocka_unit_test(test_sink_carries_events_params_notes),
      cmocka_unit_test(test_json_str_escapes_and_repairs_utf8),
      cmocka_unit_test(test_sink_source_last_time_is_the_latest_point),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
