/* Unit tests of the doctor's building blocks that the mutation pass (tests/mutation,
 * docs/mutation.md) found untested: each test kills mutants of src/doctor/ that test_doctor_rules.c,
 * the report's tests and the integration tests let live, and says which. They call the helpers of
 * finding.c (comparator and median, number formatting, the bounded JSON object, a finding's severity
 * and node name) directly, through the doctor's private header; the estimates (signals_*.c,
 * rules_*.c) are left to the rules' tests. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "doctor/doctor.h"
#include "doctor/doctor_int.h"

/* Ties compare equal; the median of an even count is the mean of the middle two. Kills
 * runview_cmp_double's `x > y` -> `x >= y`. */
static void test_compare_ties_are_equal_and_median_is_the_middle(void **state) {
  (void)state;
  double one = 1, two = 2, one_again = 1;
  assert_int_equal(runview_cmp_double(&one, &two), -1);
  assert_int_equal(runview_cmp_double(&two, &one), 1);
  assert_int_equal(runview_cmp_double(&one, &one_again), 0);
  double odd[] = {3, 1, 2}, even[] = {4, 1, 3, 2};
  assert_true(dr_median(odd, 3) == 2);
  assert_true(dr_median(even, 4) == 2.5);
  assert_true(isnan(dr_median(even, 0)));
}

/* A known number is printed with its decimals and unit (a space before a unit, none without one);
 * an unknown one is a dash. Kills dr_fmt's `if (!isfinite(v))` -> `if (1)`. */
static void test_fmt_prints_known_numbers_and_a_dash_for_unknown(void **state) {
  (void)state;
  char b[32];
  assert_string_equal(dr_fmt(b, sizeof b, 12.345, 1, "MHz"), "12.3 MHz");
  assert_string_equal(dr_fmt(b, sizeof b, 2, 0, ""), "2");
  assert_string_equal(dr_fmt(b, sizeof b, 2.5, 2, NULL), "2.50");
  assert_string_equal(dr_fmt(b, sizeof b, NAN, 1, "s"), "—");
}

/* The JSON object in a buffer: below 3 bytes nothing is written but an empty string; a member that
 * fits exactly (with its closing brace and NUL) is written, one byte less and it is left out.
 * Kills dr_json_begin's `cap >= 3` -> `1` and member's `j->len + hn + vn + 2` -> `- 2`. */
static void test_json_object_members_fit_exactly_or_are_left_out(void **state) {
  (void)state;
  char buf[16];
  struct dr_json j;
  memset(buf, 'x', sizeof buf);
  dr_json_begin(&j, buf, 2);
  assert_string_equal(buf, "");
  dr_json_int(&j, "a", 1);
  assert_string_equal(buf, "");
  assert_int_equal(buf[2], 'x'); /* nothing past the two bytes it was given */
  dr_json_begin(&j, buf, 3);
  assert_string_equal(buf, "{}");
  dr_json_begin(&j, buf, 8); /* {"a":1} and its NUL: 8 bytes */
  dr_json_int(&j, "a", 1);
  assert_string_equal(buf, "{\"a\":1}");
  dr_json_begin(&j, buf, 7);
  dr_json_int(&j, "a", 1);
  assert_string_equal(buf, "{}");
  dr_json_begin(&j, buf, sizeof buf);
  dr_json_int(&j, "a", 1);
  dr_json_int(&j, "b", 22);
  assert_string_equal(buf, "{\"a\":1,\"b\":22}");
}

/* Numbers: whole ones exactly, others to 6 significant digits, unknown as null; strings escaped;
 * quotes and control characters left out of keys. */
static void test_json_numbers_and_strings_are_written_exactly(void **state) {
  (void)state;
  char buf[256];
  struct dr_json j;
  dr_json_begin(&j, buf, sizeof buf);
  dr_json_num(&j, "w", 3);
  dr_json_num(&j, "f", 1.23456789);
  dr_json_num(&j, "big", 1e15);
  dr_json_num(&j, "neg", -0.5);
  dr_json_num(&j, "none", NAN);
  dr_json_str(&j, "k\"\n", "a\"b\\c\n");
  assert_string_equal(buf, "{\"w\":3,\"f\":1.23457,\"big\":1000000000000000,\"neg\":-0.5,\"none\":null,"
                           "\"k\":\"a\\\"b\\\\c\\u000a\"}");
}

/* Severity follows the share (high from 30 %, medium from 10 %, low above 0, else info), the share
 * is clamped to [0, 1], a speed-up below 1 is none, and time lost is share x window. */
static void test_finding_severity_and_figures_follow_the_share(void **state) {
  (void)state;
  struct dr_run *d = calloc(1, sizeof *d);
  d->window_s = 100;
  struct dr_findings fs = {0};
  static const struct {
    double share;
    const char *severity;
  } cases[] = {{0.30, "high"}, {0.2999, "medium"}, {0.10, "medium"}, {0.0999, "low"}, {0.001, "low"}, {0, "info"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    struct store_finding *f = dr_add(&fs, d, "r", cases[i].share, 1.5);
    assert_non_null(f);
    assert_string_equal(f->severity, cases[i].severity);
    assert_true(fabs(f->lost_s - cases[i].share * 100) < 1e-9);
    assert_true(f->speedup == 1.5);
    assert_string_equal(f->evidence, "{}");
  }
  struct store_finding *f = dr_add(&fs, d, "over", 1.7, 0.5);
  assert_true(f->share == 1 && f->speedup == 1);
  assert_string_equal(f->severity, "high");
  f = dr_add(&fs, d, "under", -0.2, NAN);
  assert_true(f->share == 0 && f->speedup == 1);
  assert_int_equal(fs.n, 8);
  assert_string_equal(fs.v[0].severity, "high"); /* still there after the array grew past 8 */
  f = dr_add(&fs, d, "ninth", 0.5, 2);
  assert_int_equal(fs.n, 9);
  assert_string_equal(fs.v[6].rule, "over");
  assert_true(dr_has(&fs, "ninth") && dr_has(&fs, "r") && !dr_has(&fs, "nope"));
  d->window_s = NAN;
  f = dr_add(&fs, d, "unknown_window", 0.5, 2);
  assert_true(isnan(f->lost_s));
  free(fs.v);
  free(fs.ch);
  struct dr_findings one = {0}; /* the first finding is looked at too (dr_has from 0, not 1) */
  dr_add(&one, d, "only", 0.5, 2);
  assert_true(dr_has(&one, "only"));
  free(one.v);
  free(one.ch);
  free(d);
}

/* In a group, a host-side finding names its node: " (host H)" or " (host H, rank R)" after the title
 * and "host" (and "rank") first in the evidence; without a host nothing changes. Kills
 * dr_name_node's `if (d->host_rank)` -> `if (1)` and `sizeof f->title - len` -> `+ len`. */
static void test_name_node_puts_the_host_and_rank_first(void **state) {
  (void)state;
  struct dr_run *d = calloc(1, sizeof *d);
  struct store_finding *f = calloc(1, sizeof *f);
  snprintf(f->title, sizeof f->title, "Input bound");
  snprintf(f->evidence, sizeof f->evidence, "{\"x\":1}");
  dr_name_node(d, f);
  assert_string_equal(f->title, "Input bound");
  assert_string_equal(f->evidence, "{\"x\":1}");
  snprintf(d->host, sizeof d->host, "node-a");
  dr_name_node(d, f);
  assert_string_equal(f->title, "Input bound (host node-a)");
  assert_string_equal(f->evidence, "{\"host\":\"node-a\",\"x\":1}");
  d->host_rank = 3;
  snprintf(f->title, sizeof f->title, "Input bound");
  snprintf(f->evidence, sizeof f->evidence, "{}");
  dr_name_node(d, f);
  assert_string_equal(f->title, "Input bound (host node-a, rank 3)");
  assert_string_equal(f->evidence, "{\"host\":\"node-a\",\"rank\":3}");
  /* evidence that is not a JSON object (empty here) is left as it is, the title still names the node.
   * Kills dr_name_node's `f->evidence[0] != '{' || ...` -> `&&`. */
  snprintf(f->title, sizeof f->title, "Input bound");
  f->evidence[0] = 0;
  dr_name_node(d, f);
  assert_string_equal(f->evidence, "");
  free(f);
  free(d);
}

/* A key longer than the member's head buffer is cut to the 155 characters that fit (with its quotes,
 * colon and the comma of a next member): the object stays valid JSON. Kills member's `sizeof head - 4`
 * -> `- 5`. */
static void test_json_a_long_key_is_cut_to_what_fits(void **state) {
  (void)state;
  char key[201], buf[512];
  memset(key, 'k', 200);
  key[200] = 0;
  struct dr_json j;
  dr_json_begin(&j, buf, sizeof buf);
  dr_json_int(&j, key, 7);
  char want[200];
  snprintf(want, sizeof want, "{\"%.155s\":7}", key);
  assert_string_equal(buf, want);
}

/* In a group, a series is the focus node's when its labels end in ",host=H" (or ",host=H,run=ID")
 * as a whole member: another host's, a longer host name, or a member that only ends the same way
 * are not; the base labels are what comes before. Kills cut_suffix's `if (!sl || len < sl ||
 * strcmp(...))` -> `if (0)` and its `||` -> `&&`. */
static void test_own_labels_match_whole_members_only(void **state) {
  (void)state;
  struct dr_run *d = calloc(1, sizeof *d);
  char base[64];
  assert_int_equal(dr_own_labels(d, "gpu=0", base, sizeof base), 1); /* a single run: all its own */
  assert_string_equal(base, "gpu=0");
  snprintf(d->host, sizeof d->host, "h");
  snprintf(d->node, sizeof d->node, "host=h,run=R1");
  assert_int_equal(dr_own_labels(d, "gpu=0,host=h", base, sizeof base), 1);
  assert_string_equal(base, "gpu=0");
  assert_int_equal(dr_own_labels(d, "host=h", base, sizeof base), 1);
  assert_string_equal(base, "");
  assert_int_equal(dr_own_labels(d, "cpu=3,host=h,run=R1", base, sizeof base), 1);
  assert_string_equal(base, "cpu=3");
  assert_int_equal(dr_own_labels(d, "gpu=0,host=q", base, sizeof base), 0); /* another host */
  assert_int_equal(dr_own_labels(d, "gpu=0,host=hh", base, sizeof base), 0);
  assert_int_equal(dr_own_labels(d, "gpu=0,xhost=h", base, sizeof base), 0);
  assert_int_equal(dr_own_labels(d, "h", base, sizeof base), 0);
  assert_int_equal(dr_own_labels(d, "", base, sizeof base), 0);
  d->node[0] = 0; /* no run member: only host=H */
  assert_int_equal(dr_own_labels(d, "gpu=1,run=R1", base, sizeof base), 0);
  assert_int_equal(dr_own_labels(d, "gpu=1,host=h", base, sizeof base), 1);
  assert_string_equal(base, "gpu=1");
  free(d);
}

/* An evidence key's unit: "speedup" alone is a factor, like a key ending in _speedup; another key of
 * the same length has none. Kills doctor_evidence_unit's `klen == 7 && !memcmp(key, "speedup", 7)`
 * -> `0` and its `!memcmp` -> `memcmp`. */
static void test_evidence_unit_of_speedup_alone_is_a_factor(void **state) {
  (void)state;
  assert_string_equal(doctor_evidence_unit("speedup", 7), "x");
  assert_string_equal(doctor_evidence_unit("workers", 7), "");
  assert_string_equal(doctor_evidence_unit("est_speedup", 11), "x");
  assert_string_equal(doctor_evidence_unit("speedup_s", 7), "x"); /* the key is its first klen bytes */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_compare_ties_are_equal_and_median_is_the_middle),
      cmocka_unit_test(test_fmt_prints_known_numbers_and_a_dash_for_unknown),
      cmocka_unit_test(test_json_object_members_fit_exactly_or_are_left_out),
      cmocka_unit_test(test_json_numbers_and_strings_are_written_exactly),
      cmocka_unit_test(test_finding_severity_and_figures_follow_the_share),
      cmocka_unit_test(test_name_node_puts_the_host_and_rank_first),
      cmocka_unit_test(test_own_labels_match_whole_members_only),
      cmocka_unit_test(test_json_a_long_key_is_cut_to_what_fits),
      cmocka_unit_test(test_evidence_unit_of_speedup_alone_is_a_factor),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
