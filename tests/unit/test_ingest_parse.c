/* Unit tests of the gs1 line parser (src/ingest/ingest_parse.c): each message kind's good forms, and
 * one rejected form for every rule docs/protocol.md states. The fuzzer (tests/fuzz) covers the rest. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ingest/ingest.h"

static int parse(const char *s, struct ingest_msg *m) {
  return ingest_parse_line(s, strlen(s), m);
}

static int str_eq(struct ingest_str a, const char *b) {
  return a.n == strlen(b) && !memcmp(a.p, b, a.n);
}

static void test_metric_with_step_and_time_parses(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 metric train/loss 0.25 12 t=1234.5", &m), 0);
  assert_int_equal(m.kind, INGEST_METRIC);
  assert_null(m.error);
  assert_true(str_eq(m.name, "train/loss"));
  assert_true(m.value == 0.25);
  assert_int_equal(m.step, 12);
  assert_true(m.t == 1234.5);
  assert_int_equal(m.has, INGEST_HAS_VALUE | INGEST_HAS_STEP | INGEST_HAS_T);
}

static void test_metric_optional_fields_may_be_left_out(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 metric lr -1.5e-4", &m), 0);
  assert_true(fabs(m.value + 1.5e-4) < 1e-18);
  assert_int_equal(m.has, INGEST_HAS_VALUE);
  assert_int_equal(parse("gs1 metric acc 1 t=5", &m), 0);
  assert_int_equal(m.has, INGEST_HAS_VALUE | INGEST_HAS_T);
  assert_int_equal(parse("gs1 metric acc .5", &m), 0);
  assert_true(m.value == 0.5);
}

static void test_step_fields_and_named_phases_parse(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 step 7 data=0.5 h2d=0.01 compute=0.2 samples=64 forward=0.1 backward=0.05 t=99.25", &m),
                   0);
  assert_int_equal(m.kind, INGEST_STEP);
  assert_int_equal(m.step, 7);
  assert_true(m.data_s == 0.5 && m.h2d_s == 0.01 && m.compute_s == 0.2);
  assert_int_equal(m.samples, 64);
  assert_true(m.t == 99.25);
  assert_int_equal(m.n_phases, 2);
  assert_true(str_eq(m.phases[0].name, "forward") && m.phases[0].s == 0.1);
  assert_true(str_eq(m.phases[1].name, "backward") && m.phases[1].s == 0.05);
  assert_int_equal(parse("gs1 step 0", &m), 0);
  assert_int_equal(m.has, INGEST_HAS_STEP);
  assert_int_equal(parse("gs1 step 3 compute=0.2 rank=65535", &m), 0);
  assert_true((m.has & INGEST_HAS_RANK) && m.rank == 65535 && m.n_phases == 0);
}

static void test_param_value_is_the_rest_of_the_line(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 param model resnet 50 (torchvision) \xc3\xa9t\xc3\xa9", &m), 0);
  assert_int_equal(m.kind, INGEST_PARAM);
  assert_true(str_eq(m.name, "model"));
  assert_true(str_eq(m.text, "resnet 50 (torchvision) \xc3\xa9t\xc3\xa9"));
  assert_int_equal(parse("gs1 param empty", &m), 0);
  assert_int_equal(m.text.n, 0);
}

static void test_mark_value_is_optional(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 mark epoch 3", &m), 0);
  assert_int_equal(m.kind, INGEST_MARK);
  assert_true(m.value == 3);
  assert_int_equal(parse("gs1 mark checkpoint", &m), 0);
  assert_int_equal(m.has, 0);
  assert_int_equal(parse("gs1 mark eval t=10", &m), 0);
  assert_int_equal(m.has, INGEST_HAS_T);
}

static void test_line_need_not_be_nul_terminated(void **state) {
  (void)state;
  struct ingest_msg m;
  const char buf[] = "gs1 metric loss 1.5XXXX";
  assert_int_equal(ingest_parse_line(buf, strlen("gs1 metric loss 1.5"), &m), 0);
  assert_true(m.value == 1.5);
}

struct bad_case {
  const char *line;
  enum ingest_kind kind;
};

static void test_every_rule_rejects_with_a_reason(void **state) {
  (void)state;
  char longname[200], longparam[1100];
  memset(longname, 'a', sizeof longname);
  memcpy(longname, "gs1 metric ", 11);
  strcpy(longname + 11 + 129, " 1");
  snprintf(longparam, sizeof longparam, "gs1 param k %01025d", 0);
  const struct bad_case cases[] = {
      {"", INGEST_OTHER},
      {"gs2 metric loss 1", INGEST_OTHER},
      {"metric loss 1", INGEST_OTHER},
      {"gs1", INGEST_OTHER},
      {"gs1 gauge loss 1", INGEST_OTHER},
      {"gs1  metric loss 1", INGEST_OTHER},
      {"gs1 metric", INGEST_METRIC},
      {"gs1 metric loss", INGEST_METRIC},
      {"gs1 metric lo$s 1", INGEST_METRIC},
      {"gs1 metric step.data_s 1", INGEST_METRIC},
      {longname, INGEST_METRIC},
      {"gs1 metric loss nan", INGEST_METRIC},
      {"gs1 metric loss inf", INGEST_METRIC},
      {"gs1 metric loss 1e999", INGEST_METRIC},
      {"gs1 metric loss 0x10", INGEST_METRIC},
      {"gs1 metric loss 1,5", INGEST_METRIC},
      {"gs1 metric loss 1 -3", INGEST_METRIC},
      {"gs1 metric loss 1 2.5", INGEST_METRIC},
      {"gs1 metric loss 1 2 3", INGEST_METRIC},
      {"gs1 metric loss 1 ", INGEST_METRIC},
      {"gs1 metric loss 1 t=0", INGEST_METRIC},
      {"gs1 metric loss 1 t=-5", INGEST_METRIC},
      {"gs1 metric loss 1\r", INGEST_METRIC},
      {"gs1 param", INGEST_PARAM},
      {"gs1 param b@d x", INGEST_PARAM},
      {"gs1 param ingest.bad 3", INGEST_PARAM},
      {"gs1 param k a\tb", INGEST_PARAM},
      {"gs1 param k \xff", INGEST_PARAM},
      {"gs1 param k \xc0\xaf", INGEST_PARAM},
      {"gs1 param k \xed\xa0\x80", INGEST_PARAM},
      {longparam, INGEST_PARAM},
      {"gs1 step", INGEST_STEP},
      {"gs1 step -1", INGEST_STEP},
      {"gs1 step 1.5", INGEST_STEP},
      {"gs1 step 1 data", INGEST_STEP},
      {"gs1 step 1 data=-0.1", INGEST_STEP},
      {"gs1 step 1 data=0.1 data=0.2", INGEST_STEP},
      {"gs1 step 1 samples=1.5", INGEST_STEP},
      {"gs1 step 1 total=3", INGEST_STEP},
      {"gs1 step 1 rank=65536", INGEST_STEP},
      {"gs1 step 1 rank=-1", INGEST_STEP},
      {"gs1 step 1 rank=1 rank=2", INGEST_STEP},
      {"gs1 step 1 rank=0.5", INGEST_STEP},
      {"gs1 step 1 fwd=1 fwd=2", INGEST_STEP},
      {"gs1 step 1 f$=1", INGEST_STEP},
      {"gs1 step 1 t=abc", INGEST_STEP},
      {"gs1 step 1234567890123456", INGEST_STEP},
      {"gs1 step 1 a=1 b=1 c=1 d=1 e=1 f=1 g=1 h=1 i=1 j=1 k=1 l=1 m=1 o=1 p=1 q=1 r=1", INGEST_STEP},
      {"gs1 mark", INGEST_MARK},
      {"gs1 mark ep och", INGEST_MARK},
      {"gs1 mark epoch 3 4", INGEST_MARK},
      {"gs1 mark epoch nan", INGEST_MARK},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    struct ingest_msg m;
    int rc = parse(cases[i].line, &m);
    if (rc != GS_EINVAL || m.kind != cases[i].kind || !m.error)
      fail_msg("'%s': rc %d kind %d error %s", cases[i].line, rc, m.kind, m.error ? m.error : "(none)");
  }
}

static void test_sixteen_phases_are_allowed(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 step 1 a=1 b=1 c=1 d=1 e=1 f=1 g=1 h=1 i=1 j=1 k=1 l=1 m=1 o=1 p=1 q=1", &m), 0);
  assert_int_equal(m.n_phases, 16);
}

static void test_dropped_count_parses_and_bad_counts_are_rejected(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 dropped 42", &m), 0);
  assert_int_equal(m.kind, INGEST_DROPPED);
  assert_int_equal(m.step, 42);
  const char *bad[] = {"gs1 dropped",     "gs1 dropped 0",   "gs1 dropped -1",
                       "gs1 dropped 1.5", "gs1 dropped 3 4", "gs1 dropped 1234567890123456"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int rc = parse(bad[i], &m);
    if (rc != GS_EINVAL || m.kind != INGEST_DROPPED || !m.error)
      fail_msg("'%s': rc %d kind %d", bad[i], rc, m.kind);
  }
  assert_string_equal(ingest_kind_name(INGEST_DROPPED), "dropped");
}

static void test_rejected_cause_and_count_parse_and_bad_ones_are_rejected(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 rejected name 3", &m), 0);
  assert_int_equal(m.kind, INGEST_REJECTED);
  assert_int_equal(m.cause, INGEST_CAUSE_NAME);
  assert_int_equal(m.step, 3);
  assert_int_equal(parse("gs1 rejected argument 1", &m), 0);
  assert_int_equal(m.cause, INGEST_CAUSE_ARGUMENT);
  const char *bad[] = {"gs1 rejected",         "gs1 rejected value",   "gs1 rejected values 1", "gs1 rejected 2",
                       "gs1 rejected value 0", "gs1 rejected step -1", "gs1 rejected step 1 2"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    int rc = parse(bad[i], &m);
    if (rc != GS_EINVAL || m.kind != INGEST_REJECTED || !m.error)
      fail_msg("'%s': rc %d kind %d", bad[i], rc, m.kind);
  }
  assert_string_equal(ingest_kind_name(INGEST_REJECTED), "rejected");
  assert_string_equal(ingest_cause_name(INGEST_CAUSE_STEP), "step");
  assert_string_equal(ingest_cause_name((enum ingest_cause)9), "?");
}

static void test_kind_names(void **state) {
  (void)state;
  assert_string_equal(ingest_kind_name(INGEST_METRIC), "metric");
  assert_string_equal(ingest_kind_name(INGEST_OTHER), "other");
  assert_string_equal(ingest_kind_name((enum ingest_kind)42), "other");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_metric_with_step_and_time_parses),
      cmocka_unit_test(test_metric_optional_fields_may_be_left_out),
      cmocka_unit_test(test_step_fields_and_named_phases_parse),
      cmocka_unit_test(test_param_value_is_the_rest_of_the_line),
      cmocka_unit_test(test_mark_value_is_optional),
      cmocka_unit_test(test_line_need_not_be_nul_terminated),
      cmocka_unit_test(test_every_rule_rejects_with_a_reason),
      cmocka_unit_test(test_sixteen_phases_are_allowed),
      cmocka_unit_test(test_dropped_count_parses_and_bad_counts_are_rejected),
      cmocka_unit_test(test_rejected_cause_and_count_parse_and_bad_ones_are_rejected),
      cmocka_unit_test(test_kind_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
