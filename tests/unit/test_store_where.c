/* Unit tests of the runs' filter language (src/store/store_where.c) and of the tags edit
 * (src/store/store_meta.c): precedence, three-valued logic over missing values, the number
 * grammar, errors that name their token and place, and SQL that binds every value. The binary's
 * behaviour on both back ends is tests/integration/test_runs_where.py; the fuzzer covers the rest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "store/store.h"

/* A run with name "a", param batch_size "64", param lr "oops", no GPU, no steps. */
static size_t value(void *ctx, const struct store_field *f, const char **vals, size_t max) {
  (void)ctx, (void)max;
  if (!strcmp(f->name, "name"))
    return vals[0] = "a", 1;
  if (f->kind == STORE_FIELD_PARAM && !strcmp(f->key, "batch_size"))
    return vals[0] = "64", 1;
  if (f->kind == STORE_FIELD_PARAM && !strcmp(f->key, "lr"))
    return vals[0] = "oops", 1;
  return 0;
}

static int match(const char *expr) {
  struct store_where *w = store_where_parse(expr);
  if (!w)
    fail_msg("%s: %s", expr, gs_last_error());
  int m = store_where_match(w, value, NULL);
  store_where_free(w);
  return m;
}

static void test_and_binds_tighter_than_or_and_not_tighter_than_and(void **state) {
  (void)state;
  assert_true(match("name = b and name = c or name = a"));
  assert_false(match("name = a and (name = b or name = c)"));
  assert_false(match("not name = a and name = a"));
  assert_true(match("NOT (name = b) AND name = a"));
}

static void test_a_missing_value_matches_no_comparison_not_even_under_not(void **state) {
  (void)state;
  assert_false(match("param.nope = 1"));
  assert_false(match("param.nope != 1"));
  assert_false(match("not param.nope = 1"));
  assert_false(match("samples_per_s > 0 or not samples_per_s > 0"));
  assert_true(match("param.nope = 1 or name = a"));
  assert_false(match("param.lr > 0"));   /* a param that is not a number, compared with one */
  assert_true(match("param.lr = oops")); /* but as text it is there */
  assert_true(match("param.batch_size = 64.0 and param.batch_size >= 6.4e1 and param.batch_size ~ 6"));
}

static void test_numbers_are_what_both_back_ends_cast(void **state) {
  (void)state;
  double v;
  assert_true(store_where_number("-1.5e-3", &v) && v == -1.5e-3);
  assert_true(store_where_number(".5", &v) && v == 0.5);
  assert_true(store_where_number("64.", &v) && v == 64);
  const char *no[] = {
      "", "-", ".", "1e", "1e123", "0x10", "inf", "nan", " 1", "1 ", "1e+", "1.2.3", "1234567890123456789012345678901"};
  for (size_t i = 0; i < sizeof no / sizeof *no; i++)
    assert_false(store_where_number(no[i], NULL));
}

static void expect_error(const char *expr, const char *named) {
  struct store_where *w = store_where_parse(expr);
  if (w)
    fail_msg("%s parsed", expr);
  if (!strstr(gs_last_error(), named))
    fail_msg("%s: '%s' does not name '%s'", expr, gs_last_error(), named);
}

static void test_a_bad_filter_names_its_token_and_place(void **state) {
  (void)state;
  expect_error("name = a or", "at character 12: expected a column");
  expect_error("foo = 1", "unknown column 'foo'");
  expect_error("name a", "at character 6: expected an operator");
  expect_error("duration_s > fast", "'duration_s' is a number and 'fast' is not one");
  expect_error("exit_code ~ 1", "~ wants a text column");
  expect_error("name = 'open", "never closed");
  expect_error("(name = a", "expected ')'");
  expect_error("name = a )", "expected 'and', 'or' or the end, got ')'");
  expect_error("", "empty");
  char deep[300];
  memset(deep, '(', 100);
  snprintf(deep + 100, sizeof deep - 100, "name = a");
  expect_error(deep, "nested more than 32 deep");
}

static void test_the_sql_binds_every_value_and_pastes_none(void **state) {
  (void)state;
  struct store_where *w = store_where_parse("name = \"x' OR '1'='1\" or param.k'x = 1");
  assert_null(w); /* a quote is no part of a column name */
  w = store_where_parse("name = \"x' OR '1'='1\" and param.batch_size >= 64 and samples_per_s > 1");
  assert_non_null(w);
  assert_false(store_where_pushed(w));
  for (int d = 0; d < 2; d++) {
    struct store_sql sql;
    struct store_query q = {w, 1};
    assert_int_equal(store_query_sql(&q, d ? STORE_SQL_PG : STORE_SQL_SQLITE, &sql), 0);
    assert_null(strstr(sql.text, "OR '1'"));
    assert_null(strstr(sql.text, "samples_per_s")); /* decided in C */
    assert_int_equal(sql.nargs, 4);                 /* since, the name, the key, 64 */
    assert_string_equal(sql.args[1], "x' OR '1'='1");
    assert_string_equal(sql.args[2], "batch_size");
    assert_non_null(strstr(sql.text, d ? "$4::double precision" : "CAST(?4 AS REAL)"));
    store_sql_done(&sql);
    /* no start bound: no condition on the start and no argument for it, the filter's first is ?1
     * (mutation: store_where.c:740 `q && q->since_wall_ns > 0` -> always, "start_wall_ns >= 0") */
    struct store_query all = {w, 0};
    assert_int_equal(store_query_sql(&all, d ? STORE_SQL_PG : STORE_SQL_SQLITE, &sql), 0);
    assert_null(strstr(sql.text, "start_wall_ns"));
    assert_int_equal(sql.nargs, 3);
    assert_string_equal(sql.args[0], "x' OR '1'='1");
    store_sql_done(&sql);
  }
  store_where_free(w);
}

static void test_tags_are_set_replaced_and_removed_in_place(void **state) {
  (void)state;
  char tags[64] = "team=nlp,owner=ann";
  char *set[] = {"team=vision", "lr=3e-4"}, *rm[] = {"owner"};
  assert_int_equal(store_tags_edit(tags, sizeof tags, set, 2, rm, 1), 0);
  assert_string_equal(tags, "team=vision,lr=3e-4");
  char *last[] = {"lr"};
  assert_int_equal(store_tags_edit(tags, sizeof tags, NULL, 0, last, 1), 0);
  assert_string_equal(tags, "team=vision");
  char *bad[] = {"novalue", "=v", "a,b=c", "k=a,b", "k=\x01"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    assert_int_equal(store_tags_edit(tags, sizeof tags, &bad[i], 1, NULL, 0), GS_EINVAL);
    assert_string_equal(tags, "team=vision");
  }
  char *big[] = {"k=0123456789012345678901234567890123456789012345678901234567890123456789"};
  assert_int_equal(store_tags_edit(tags, sizeof tags, big, 1, NULL, 0), GS_EINVAL);
  assert_non_null(strstr(gs_last_error(), "at most 63 bytes in all")); /* the room, not the buffer */
  /* pairs before others go with their comma and the rest moves up whole (mutation: store_meta.c:18,
   * the memmove one byte short: the old end's bytes left behind) */
  char three[64] = "a=1,bb=22,c=3";
  char *mid[] = {"bb"}, *first[] = {"a"};
  assert_int_equal(store_tags_edit(three, sizeof three, NULL, 0, mid, 1), 0);
  assert_string_equal(three, "a=1,c=3");
  assert_int_equal(store_tags_edit(three, sizeof three, NULL, 0, first, 1), 0);
  assert_string_equal(three, "c=3");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_and_binds_tighter_than_or_and_not_tighter_than_and),
      cmocka_unit_test(test_a_missing_value_matches_no_comparison_not_even_under_not),
      cmocka_unit_test(test_numbers_are_what_both_back_ends_cast),
      cmocka_unit_test(test_a_bad_filter_names_its_token_and_place),
      cmocka_unit_test(test_the_sql_binds_every_value_and_pastes_none),
      cmocka_unit_test(test_tags_are_set_replaced_and_removed_in_place),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
