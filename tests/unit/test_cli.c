/* Unit tests of the command line (src/cli/): option parsing and its exit codes (cli_parse_opts), and
 * the documented exit codes of sub-commands on bad usage, an unknown run and a store that cannot be
 * opened — called as functions (the gpuscope_cli library), without a process per case. */
#include <getopt.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/cli.h"
#include "core/core.h"

struct seen {
  int n;
  int opts[8];
  char args[8][64];
  int stop_at; /* the option value that makes on_opt stop with 42 */
};

static int on_opt(int opt, const char *arg, void *user) {
  struct seen *s = user;
  if (s->n < 8) {
    s->opts[s->n] = opt;
    snprintf(s->args[s->n], sizeof s->args[0], "%s", arg ? arg : "");
    s->n++;
  }
  return opt == s->stop_at ? 42 : -1;
}

static const struct option longopts[] = {
    {"store", required_argument, NULL, 's'}, {"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0}};

static int parse(struct seen *s, int argc, char **argv) {
  return cli_parse_opts(argc, argv, longopts, "usage: test\n", on_opt, s);
}

static void test_options_and_their_values_reach_the_handler(void **state) {
  (void)state;
  struct seen s = {.stop_at = -2};
  char *argv[] = {"show", "--store", "x.db", "--json", "RUN", NULL};
  assert_int_equal(parse(&s, 5, argv), -1);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.opts[0], 's');
  assert_string_equal(s.args[0], "x.db");
  assert_int_equal(s.opts[1], 'j');
  assert_int_equal(optind, 4); /* the first operand */
  assert_string_equal(argv[optind], "RUN");
}

static void test_an_unknown_option_is_a_usage_error(void **state) {
  (void)state;
  struct seen s = {.stop_at = -2};
  char *argv[] = {"show", "--nope", NULL};
  assert_int_equal(parse(&s, 2, argv), GS_EXIT_USAGE);
  assert_int_equal(s.n, 0);
}

static void test_a_missing_value_is_a_usage_error(void **state) {
  (void)state;
  struct seen s = {.stop_at = -2};
  char *argv[] = {"show", "--store", NULL};
  assert_int_equal(parse(&s, 2, argv), GS_EXIT_USAGE);
  assert_int_equal(s.n, 0);
}

static void test_help_stops_with_success(void **state) {
  (void)state;
  struct seen s = {.stop_at = -2};
  char *argv[] = {"show", "--json", "--help", "--store", "x", NULL};
  assert_int_equal(parse(&s, 5, argv), GS_EXIT_OK);
  assert_int_equal(s.n, 1); /* --json before it was taken, nothing after */
}

static void test_the_handler_s_code_stops_parsing(void **state) {
  (void)state;
  struct seen s = {.stop_at = 'j'};
  char *argv[] = {"show", "--json", "--store", "x", NULL};
  assert_int_equal(parse(&s, 4, argv), 42);
  assert_int_equal(s.n, 1);
}

static void test_in_order_options_stop_at_the_command(void **state) {
  (void)state;
  struct seen s = {.stop_at = -2};
  /* run's way: options stop at the first operand, so the command keeps its own (-q here) */
  char *argv[] = {"run", "-q", "--store", "x", "python3", "-q", "--store", "y", NULL};
  assert_int_equal(cli_parse_opts_short(8, argv, "+q", longopts, "usage\n", on_opt, &s), -1);
  assert_int_equal(s.n, 2);
  assert_int_equal(s.opts[0], 'q');
  assert_string_equal(argv[optind], "python3");
  /* and a later parse in the same process with permutation starts clean */
  struct seen t = {.stop_at = -2};
  char *argv2[] = {"show", "RUN", "--json", NULL};
  assert_int_equal(parse(&t, 3, argv2), -1);
  assert_int_equal(t.n, 1);
  assert_int_equal(t.opts[0], 'j');
}

/* A scratch folder for the store cases; removed after. */
static char scratch[256];

static int setup(void **state) {
  (void)state;
  snprintf(scratch, sizeof scratch, "/tmp/gs-test-cli-XXXXXX");
  return mkdtemp(scratch) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
  return system(cmd) == 0 ? 0 : -1;
}

static void test_a_store_that_cannot_be_opened_exits_3(void **state) {
  (void)state;
  char url[400];
  snprintf(url, sizeof url, "%s/missing/none.db", scratch);
  char *argv[] = {"runs", "--store", url, NULL};
  assert_int_equal(cmd_runs(3, argv), GS_EXIT_STORE);
}

static void test_an_unknown_run_exits_2(void **state) {
  (void)state;
  char url[400];
  snprintf(url, sizeof url, "%s/gs.db", scratch);
  struct store *st = store_open_mode(url, STORE_WRITE); /* an empty store */
  assert_non_null(st);
  st->close(st);
  char *argv[] = {"show", "--store", url, "no-such-run", NULL};
  assert_int_equal(cmd_show(4, argv), GS_EXIT_USAGE);
  char *argv2[] = {"report", "--store", url, "no-such-run", NULL};
  assert_int_equal(cmd_report(4, argv2), GS_EXIT_USAGE);
}

static void test_bad_usage_exits_2(void **state) {
  (void)state;
  char *no_command[] = {"run", NULL};
  assert_int_equal(cmd_run(1, no_command), GS_EXIT_USAGE);
  char *bad_interval[] = {"run", "--interval", "fast", "--", "true", NULL};
  assert_int_equal(cmd_run(5, bad_interval), GS_EXIT_USAGE);
  char *bad_tag[] = {"run", "--tag", "novalue", "--", "true", NULL};
  assert_int_equal(cmd_run(5, bad_tag), GS_EXIT_USAGE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_options_and_their_values_reach_the_handler),
      cmocka_unit_test(test_an_unknown_option_is_a_usage_error),
      cmocka_unit_test(test_a_missing_value_is_a_usage_error),
      cmocka_unit_test(test_help_stops_with_success),
      cmocka_unit_test(test_the_handler_s_code_stops_parsing),
      cmocka_unit_test(test_in_order_options_stop_at_the_command),
      cmocka_unit_test(test_a_store_that_cannot_be_opened_exits_3),
      cmocka_unit_test(test_an_unknown_run_exits_2),
      cmocka_unit_test(test_bad_usage_exits_2),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
