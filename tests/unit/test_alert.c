/* Unit tests of alert/config and alert/payload: rules as --alert writes them (defaults, figures,
 * options, and a message for each wrong one), alerts.ini read with the line of its first error
 * (libinih's syntax errors and our own settings' alike), and the two payloads escaping untrusted
 * text. */
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

#include "alert/alert.h"
#include "alert/alert_int.h"
#include "core/core.h"

static void test_rules_take_their_defaults_figures_and_options(void **state) {
  (void)state;
  struct alert_rule r;
  char err[256];
  assert_int_equal(alert_rule_parse("gpu_idle", &r, err, sizeof err), 0);
  assert_int_equal(r.kind, ALERT_GPU_IDLE);
  assert_true(r.threshold == 5 && r.for_ns == 60 * GS_NS_PER_S);
  assert_int_equal(alert_rule_parse("gpu_idle<10%:for=2m", &r, err, sizeof err), 0);
  assert_true(r.threshold == 10 && r.for_ns == 120 * GS_NS_PER_S);
  assert_string_equal(r.spec, "gpu_idle<10%:for=2m");
  assert_int_equal(alert_rule_parse("finding:gain=1.2,severity=medium", &r, err, sizeof err), 0);
  assert_true(r.kind == ALERT_FINDING && r.gain == 1.2 && r.severity == 2);
  assert_int_equal(alert_rule_parse("finding", &r, err, sizeof err), 0);
  assert_true(r.gain == 1.1 && r.severity == 0);
  assert_int_equal(alert_rule_parse("throttle>20:for=30s", &r, err, sizeof err), 0);
  assert_true(r.kind == ALERT_THROTTLE && r.threshold == 20 && r.for_ns == 30 * GS_NS_PER_S);
  assert_int_equal(alert_rule_parse("hang:for=1.5s", &r, err, sizeof err), 0);
  assert_true(r.kind == ALERT_HANG && r.for_ns == 1500000000LL);
  assert_int_equal(alert_rule_parse("exit", &r, err, sizeof err), 0);
  assert_int_equal(r.kind, ALERT_EXIT);
}

static void test_a_wrong_rule_is_one_message_naming_it(void **state) {
  (void)state;
  struct {
    const char *spec, *says;
  } bad[] = {{"gpu_idle>5", "takes '<'"},
             {"nope", "unknown rule"},
             {"hang:for=soon", "duration"},
             {"exit:for=1s", "this rule takes none"},
             {"job:for=1s", "this rule takes none"},
             {"job:level=loud", "level= is info, warn or error"},
             {"finding:gain=0.5", "at least 1"},
             {"gpu_idle<101", "0..100"},
             {"gpu_idle<10%x", "unexpected"},
             {"hang:bogus=1", "unknown option"},
             {"hang:for", "KEY=VALUE"},
             {"hang<3", "takes no figure"},
             {"finding:severity=huge", "info, low"},
             {"finding:gain=0x10", "at least 1"}, /* hex is not a figure a person writes: not 16 */
             {"finding:gain=1e1", "at least 1"},
             {"finding:gain=inf", "at least 1"},
             {"gpu_idle<0x10", "0..100"},
             {"gpu_idle<0", "can never fire"}, /* a GPU's use is never below 0 % */
             {"gpu_mem>100", "can never fire"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    struct alert_rule r;
    char err[256] = "";
    assert_int_equal(alert_rule_parse(bad[i].spec, &r, err, sizeof err), GS_EINVAL);
    if (!strstr(err, bad[i].says) || !strstr(err, bad[i].spec))
      fail_msg("'%s': the message '%s' should say '%s' and name the rule", bad[i].spec, err, bad[i].says);
  }
}

/* The GPU health rules: their defaults, ecc's rate=, and what they refuse. */
static void test_health_rules_take_their_defaults_and_ecc_a_rate(void **state) {
  (void)state;
  struct alert_rule r;
  char err[256] = "";
  assert_int_equal(alert_rule_parse("xid", &r, err, sizeof err), 0);
  assert_true(r.kind == ALERT_XID && r.for_ns == 300 * GS_NS_PER_S);
  assert_int_equal(alert_rule_parse("ecc:rate=10/min,for=1m", &r, err, sizeof err), 0);
  assert_true(r.kind == ALERT_ECC && r.rate == 10 && r.for_ns == 60 * GS_NS_PER_S);
  assert_int_equal(alert_rule_parse("ecc", &r, err, sizeof err), 0);
  assert_true(r.rate == 0); /* uncorrected only */
  assert_int_equal(alert_rule_parse("row_remap", &r, err, sizeof err), 0);
  assert_int_equal(r.kind, ALERT_ROW_REMAP);
  assert_int_equal(alert_rule_parse("nvlink:for=30s", &r, err, sizeof err), 0);
  assert_true(r.kind == ALERT_NVLINK && r.for_ns == 30 * GS_NS_PER_S);
  assert_int_equal(alert_rule_parse("ecc:rate=-1", &r, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "corrected errors per minute"));
  assert_int_equal(alert_rule_parse("xid:rate=1", &r, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "unknown option"));
  assert_int_equal(alert_rule_parse("xid>3", &r, err, sizeof err), GS_EINVAL);
  assert_non_null(strstr(err, "takes no figure"));
}

/* Writes text to a private file and loads it into c; the error in err. */
static int load_text(const char *text, struct alert_config *c, char *err, size_t n, char *path, size_t pn) {
  snprintf(path, pn, "/tmp/gs-alert-test-%d.ini", (int)getpid());
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
  alert_config_init(c);
  err[0] = 0;
  int rc = alert_config_load(c, path, err, n);
  unlink(path);
  return rc;
}

static void test_the_file_sets_what_the_flags_set(void **state) {
  (void)state;
  struct alert_config c;
  char err[1400], path[64];
  assert_int_equal(load_text("; a comment\n[alerts]\nrule = exit\nrule = hang:for=5m\n"
                             "slack = https://hooks.example/x\nwebhook = http://127.0.0.1:1/y\n"
                             "command = logger gpuscope\nevery = 10s\nretries = 0\nqueue = 2\nrate = 5\n",
                             &c, err, sizeof err, path, sizeof path),
                   0);
  assert_int_equal(c.nrules, 2);
  assert_int_equal(c.nhooks, 2);
  struct alert_config c2;
  /* one rule twice with another figure is two rules; a gain written 1.5x is 1.5 */
  assert_int_equal(load_text("[alerts]\nrule = hang\nrule = hang:for=5m\nrule = finding:gain=1.5x\n", &c2, err,
                             sizeof err, path, sizeof path),
                   0);
  assert_int_equal(c2.nrules, 3);
  assert_true(c2.rules[2].gain == 1.5);
  /* a destination without a rule gets exit, hang and job; with one, or without a destination, nothing */
  assert_int_equal(alert_config_default_rules(&c2), 0);
  assert_int_equal(load_text("[alerts]\ncommand = logger x\n", &c2, err, sizeof err, path, sizeof path), 0);
  assert_int_equal(alert_config_default_rules(&c2), 1);
  assert_true(c2.nrules == 3 && c2.rules[0].kind == ALERT_EXIT && c2.rules[1].kind == ALERT_HANG &&
              c2.rules[2].kind == ALERT_JOB);
  alert_config_init(&c2);
  assert_int_equal(alert_config_default_rules(&c2), 0);
  assert_true(c.hook_slack[0] == 1 && c.hook_slack[1] == 0);
  assert_string_equal(c.command, "logger gpuscope");
  assert_true(c.every_ns == 10 * GS_NS_PER_S && c.retries == 0 && c.queue == 2 && c.rate_per_min == 5);
  assert_true(alert_config_active(&c));
  alert_config_init(&c);
  assert_false(alert_config_active(&c));
  assert_int_equal(alert_config_load(&c, "/nonexistent/gpuscope/alerts.ini", err, sizeof err), 1);
}

static void test_the_first_wrong_line_is_named_whichever_kind_it_is(void **state) {
  (void)state;
  struct {
    const char *text;
    int line;
    const char *says;
  } bad[] = {
      {"[alerts]\nrule = nope\nthis is no setting\n", 2, "unknown rule"}, /* ours first, then libinih's */
      {"[alerts]\nthis is no setting\nrule = nope\n", 2, "key = value"},  /* libinih's first, then ours */
      {"[alerts]\nrule = exit\n\n\nqueue = many\n", 5, "whole number"},   /* blank lines counted */
      {"rule = exit\n", 1, "[alerts]"},                                   /* no section */
      {"[alerts]\nwebhook = file:///etc/passwd\n", 2, "http://"},         /* no other scheme */
      {"[alerts]\nbogus = 1\n", 2, "unknown setting 'bogus'"},
      {"[alerts]\nrule = exit\nwebhook = http://\n", 3, "names no host"},
      {"[alerts]\nwebhook = https://:8080/x\n", 2, "names no host"},
      {"[alerts]\nwebhook = https://user@/x\n", 2, "names no host"},
      {"[alerts]\nwebhook = https://hooks.example/a b\n", 2, "a space"},
      {"[alerts]\nrule = exit\nrule = hang\nrule = exit\n", 4, "the same rule as 'exit'"},
      {"[alerts]\nrule = hang\nrule = hang:for=2m\n", 3, "the same rule as 'hang'"}, /* 2 min is hang's own */
      {"[alerts]\nrule = gpu_idle<0\n", 2, "can never fire"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    struct alert_config c;
    char err[1400], path[64], want[96];
    assert_int_equal(load_text(bad[i].text, &c, err, sizeof err, path, sizeof path), GS_EINVAL);
    snprintf(want, sizeof want, "%s:%d: ", path, bad[i].line);
    if (strncmp(err, want, strlen(want)) || !strstr(err, bad[i].says))
      fail_msg("case %zu: '%s' should start '%s' and say '%s'", i, err, want, bad[i].says);
  }
}

static void test_a_line_too_long_for_libinih_is_an_error_not_a_cut_url(void **state) {
  (void)state;
  char text[600], err[1400], path[64];
  struct alert_config c;
  snprintf(text, sizeof text, "[alerts]\nwebhook = https://hooks.example/%0400d\n", 7);
  assert_int_equal(load_text(text, &c, err, sizeof err, path, sizeof path), GS_EINVAL);
  assert_non_null(strstr(err, ":2: the line is longer than"));
  assert_int_equal(c.nhooks, 0);
}

static void test_payloads_escape_untrusted_text(void **state) {
  (void)state;
  struct alert_msg m;
  memset(&m, 0, sizeof m);
  snprintf(m.state, sizeof m.state, "firing");
  snprintf(m.rule, sizeof m.rule, "exit");
  snprintf(m.title, sizeof m.title, "the run failed");
  snprintf(m.run_name, sizeof m.run_name, "<!channel> & \"x\"\n");
  m.value = 3, m.cost_s = NAN, m.speedup = NAN;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  alert_payload_slack(f, &m);
  fclose(f);
  assert_non_null(strstr(buf, "&lt;!channel&gt; &amp; \\\"x\\\"\\n"));
  assert_null(strstr(buf, "<!channel>"));
  free(buf);
  f = open_memstream(&buf, &len);
  alert_payload_json(f, &m);
  fclose(f);
  assert_non_null(strstr(buf, "\"name\":\"<!channel> & \\\"x\\\"\\n\""));
  assert_non_null(strstr(buf, "\"cost_s\":null"));
  assert_non_null(strstr(buf, "\"value\":3"));
  free(buf);
}

static struct alert_msg *msg_new(void) {
  struct alert_msg *m = calloc(1, sizeof *m);
  assert_non_null(m);
  snprintf(m->state, sizeof m->state, "firing");
  snprintf(m->rule, sizeof m->rule, "exit");
  m->value = m->cost_s = m->speedup = NAN;
  return m;
}

static void test_the_queue_drops_past_the_rate_and_counts_it(void **state) {
  (void)state;
  struct alert_config c;
  alert_config_init(&c);
  snprintf(c.command, sizeof c.command, "cat > /dev/null");
  c.rate_per_min = 2;
  struct alert_queue q;
  assert_int_equal(alert_queue_start(&q, &c), 0);
  struct alert_msg *m = msg_new();
  int dropped = 0;
  for (int i = 0; i < 5; i++)
    dropped += alert_queue_push(&q, m);
  assert_int_equal(dropped, 3);
  alert_queue_stop(&q, 30 * GS_NS_PER_S); /* both are sent well within it */
  assert_int_equal(q.dropped_rate, 3);
  assert_int_equal(q.queued, 2);
  assert_int_equal(q.sent, 2);
  assert_int_equal(q.dropped_full + q.dropped_end + q.failed, 0);
  free(m);
}

static void test_a_full_queue_drops_and_its_end_abandons_what_waits(void **state) {
  (void)state;
  struct alert_config c;
  alert_config_init(&c);
  snprintf(c.command, sizeof c.command, "exec sleep 60"); /* a receiver that never finishes */
  c.queue = 1;
  struct alert_queue q;
  assert_int_equal(alert_queue_start(&q, &c), 0);
  struct alert_msg *m = msg_new();
  int dropped = 0;
  for (int i = 0; i < 4; i++)
    dropped += alert_queue_push(&q, m);
  assert_true(dropped >= 2);              /* one in the queue, at most one taken by the thread meanwhile */
  alert_queue_stop(&q, GS_NS_PER_S / 10); /* the command is killed: the drain never waits 60 s */
  assert_int_equal(q.dropped_full, dropped);
  assert_int_equal(q.queued, 4 - dropped);
  assert_int_equal(q.sent + q.failed, 0);
  assert_int_equal(q.dropped_end, q.queued); /* what was queued or in flight at the end */
  free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rules_take_their_defaults_figures_and_options),
      cmocka_unit_test(test_a_wrong_rule_is_one_message_naming_it),
      cmocka_unit_test(test_health_rules_take_their_defaults_and_ecc_a_rate),
      cmocka_unit_test(test_the_file_sets_what_the_flags_set),
      cmocka_unit_test(test_the_first_wrong_line_is_named_whichever_kind_it_is),
      cmocka_unit_test(test_a_line_too_long_for_libinih_is_an_error_not_a_cut_url),
      cmocka_unit_test(test_payloads_escape_untrusted_text),
      cmocka_unit_test(test_the_queue_drops_past_the_rate_and_counts_it),
      cmocka_unit_test(test_a_full_queue_drops_and_its_end_abandons_what_waits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
