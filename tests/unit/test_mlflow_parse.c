/* Unit tests of the MLflow file store's readers (store/mlflow_parse.c): meta.yaml as MLflow's
 * FileStore writes it, metric files old and new, and the offsets of what is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/mlflow_int.h"

static struct ml_meta m;

static void test_meta_keeps_scalars_and_passes_over_lists_and_nulls(void **state) {
  (void)state;
  static const char y[] = "artifact_uri: file:///m/0/a\nend_time: null\nexperiment_id: '0'\n"
                          "run_name: \"res net\"\nstatus: 3\ntags:\n- key: a\n  value: b\nuser_id: alice\n";
  char err[256];
  assert_int_equal(ml_parse_meta(y, sizeof y - 1, &m, err, sizeof err), 0);
  assert_string_equal(ml_meta_get(&m, "experiment_id"), "0");
  assert_string_equal(ml_meta_get(&m, "run_name"), "res net");
  assert_string_equal(ml_meta_get(&m, "status"), "3");
  assert_string_equal(ml_meta_get(&m, "user_id"), "alice");
  assert_null(ml_meta_get(&m, "end_time")); /* null is absent, not 0 */
  assert_null(ml_meta_get(&m, "tags"));
}

static void test_meta_refusals_say_the_offset(void **state) {
  (void)state;
  char err[256];
  static const char bad[] = "run_id: abc\nstart_time: [1, 2\n";
  assert_int_equal(ml_parse_meta(bad, sizeof bad - 1, &m, err, sizeof err), -1);
  assert_true(!strncmp(err, "offset ", 7));
  assert_int_equal(ml_parse_meta("- a\n- b\n", 8, &m, err, sizeof err), -1); /* a list, not a mapping */
  assert_non_null(strstr(err, "not a mapping"));
  assert_int_equal(ml_parse_meta("", 0, &m, err, sizeof err), -1);
}

static void test_metric_lines_with_and_without_step(void **state) {
  (void)state;
  static const char f[] = "1700000001000 0.5 0\n1700000002000 nan 1\n1700000003000 -1e-3\n";
  struct ml_point *p;
  size_t n;
  char err[256];
  assert_int_equal(ml_parse_metric(f, sizeof f - 1, &p, &n, err, sizeof err), 0);
  assert_int_equal(n, 2); /* nan left out */
  assert_int_equal(p[0].ts_ms, 1700000001000LL);
  assert_true(p[0].v == 0.5 && p[0].step == 0);
  assert_true(p[1].v == -1e-3 && p[1].step == -1); /* MLflow before 1.0 wrote no step */
  free(p);
}

static void test_metric_refusal_says_the_line_offset(void **state) {
  (void)state;
  static const char f[] = "1700000001000 0.5 0\n1700000002000 oops 1\n";
  struct ml_point *p;
  size_t n;
  char err[256];
  assert_int_equal(ml_parse_metric(f, sizeof f - 1, &p, &n, err, sizeof err), -1);
  assert_string_equal(err, "offset 20: not a metric line 'TIMESTAMP VALUE [STEP]'");
  assert_null(p);
  const char *bad[] = {"1 2 -3", "-1 2 3", "1  2", "1 2 3 4", "x 1", "1 2 3x"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    if (ml_parse_metric(bad[i], strlen(bad[i]), &p, &n, err, sizeof err) != -1)
      fail_msg("'%s' was taken", bad[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_meta_keeps_scalars_and_passes_over_lists_and_nulls),
      cmocka_unit_test(test_meta_refusals_say_the_offset),
      cmocka_unit_test(test_metric_lines_with_and_without_step),
      cmocka_unit_test(test_metric_refusal_says_the_line_offset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
