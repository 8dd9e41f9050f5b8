/* Tests of the C client (clients/c, include/gpuscope.h) against the agent's real ingest: what each
 * call sends arrives as the series, params and events the protocol promises; a full or missing
 * socket drops and counts without blocking or raising SIGPIPE; without GPUSCOPE_SOCKET every call is
 * a no-op. Registered by tests/unit/CMakeLists.txt. A test that cannot run here (no decimal-comma
 * locale) makes the program exit 77, a ctest skip, and fails under make check (GS_CHECK_STRICT=1),
 * which installs locales-all. */
#include <locale.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpuscope.h"
#include "ingest/ingest.h"

static struct ingest *agent;
static struct gs_sink *sink;
static int skipped; /* tests that called skip(): the program then exits 77, never 0 */

static const struct gs_point *point(const struct gs_batch *b, const char *source, const char *name) {
  for (size_t i = 0; i < b->n_series; i++)
    if (!strcmp(b->series[i].source, source) && !strcmp(b->series[i].name, name))
      for (size_t k = 0; k < b->n_points; k++)
        if (b->points[k].series == b->series[i].id)
          return &b->points[k];
  return NULL;
}

static const char *param(const struct gs_batch *b, const char *key) {
  for (size_t i = 0; i < b->n_params; i++)
    if (!strcmp(b->params[i].key, key))
      return b->params[i].value;
  return NULL;
}

static void test_calls_arrive_as_protocol_messages(void **state) {
  (void)state;
  assert_true(gpuscope_enabled());
  int64_t before = gs_mono_ns();
  gpuscope_log("loss", 0.25, 12);
  gpuscope_step(3, 0.5, 0.125, 0.25, 64);
  gpuscope_param("model", "resnet\n50");
  gpuscope_mark("epoch", 2);
  gpuscope_mark("checkpoint", NAN);
  assert_int_equal(ingest_poll(agent, sink, gs_mono_ns()), 5);
  struct gs_batch *b = gs_sink_take(sink);
  const struct gs_point *loss = point(b, "client", "loss"), *step = point(b, "client.step", "loss");
  assert_non_null(loss);
  assert_true(loss->v == 0.25);
  assert_true(step && step->v == 12);
  const struct gs_point *data = point(b, "client", "step.data_s"), *total = point(b, "client", "step.total_s");
  assert_true(data && data->v == 0.5);
  assert_true(total && total->v == 0.875);
  assert_true(data->t_ns >= before && data->t_ns <= gs_mono_ns()); /* the client's own time, kept */
  assert_true(point(b, "client", "step.samples")->v == 64);
  assert_string_equal(param(b, "model"), "resnet 50");
  assert_int_equal(b->n_events, 2);
  assert_true(b->events[0].value == 2 && isnan(b->events[1].value));
  gs_batch_free(b);
}

static void test_unmeasured_h2d_is_left_out(void **state) {
  (void)state;
  gpuscope_step(4, 0.5, -1, 0.25, -1);
  gpuscope_step(5, 0.5, NAN, 0.25, -1);
  assert_int_equal(ingest_poll(agent, sink, gs_mono_ns()), 2);
  struct gs_batch *b = gs_sink_take(sink);
  size_t n = 0, totals = 0;
  int h2d = gs_sink_find(sink, "client", "step.h2d_s", ""), total = gs_sink_find(sink, "client", "step.total_s", "");
  for (size_t k = 0; k < b->n_points; k++) {
    n += b->points[k].series == h2d;
    if (b->points[k].series == total)
      totals++, assert_true(b->points[k].v == 0.75);
  }
  assert_int_equal(n, 0); /* not measured is not zero */
  assert_int_equal(totals, 2);
  gs_batch_free(b);
}

static void test_numbers_are_sent_in_the_c_locale(void **state) {
  (void)state;
  const char *comma[] = {"de_DE.UTF-8", "fr_FR.UTF-8", "de_DE", "fr_FR"};
  const char *got = NULL;
  for (size_t i = 0; i < sizeof comma / sizeof *comma && !got; i++)
    got = setlocale(LC_NUMERIC, comma[i]);
  if (!got) {
    const char *strict = getenv("GS_CHECK_STRICT");
    if (strict && !strcmp(strict, "1"))
      fail_msg("no de_DE or fr_FR locale under make check (GS_CHECK_STRICT=1): install locales-all");
    skipped++;
    skip(); /* no decimal-comma locale installed here */
  }
  int comma_point = !strcmp(localeconv()->decimal_point, ",");
  gpuscope_log("lr", 0.5, -1);
  setlocale(LC_NUMERIC, "C");
  assert_true(comma_point); /* else this test would prove nothing */
  assert_int_equal(ingest_poll(agent, sink, gs_mono_ns()), 1);
  struct gs_batch *b = gs_sink_take(sink);
  const struct gs_point *lr = point(b, "client", "lr");
  assert_non_null(lr);
  assert_true(lr->v == 0.5); /* "0,5" would be read as 0 or refused */
  gs_batch_free(b);
}

static void test_long_param_value_is_cut_at_a_character(void **state) {
  (void)state;
  char v[1100];
  memset(v, 'a', 1023);
  strcpy(v + 1023, "\xc3\xa9tail"); /* a 2-byte character straddles the 1024-byte cut */
  gpuscope_param("long", v);
  assert_int_equal(ingest_poll(agent, sink, gs_mono_ns()), 1);
  struct gs_batch *b = gs_sink_take(sink);
  assert_int_equal(strlen(param(b, "long")), 1023);
  gs_batch_free(b);
}

static void test_full_socket_drops_and_counts(void **state) {
  (void)state;
  unsigned long long before = gpuscope_dropped();
  for (int i = 0; i < 200; i++) /* nobody reads: the queue fills, and calls must not block */
    gpuscope_mark("flood", i);
  unsigned long long dropped = gpuscope_dropped() - before;
  int got = ingest_poll(agent, sink, gs_mono_ns());
  assert_true(dropped > 0);
  assert_int_equal((unsigned long long)got + dropped, 200);
  gs_batch_free(gs_sink_take(sink));
}

/* After drops, the next send that gets through tells the agent how many it missed (issue 11). */
static void test_dropped_count_reaches_the_agent(void **state) {
  (void)state;
  unsigned long long dropped = gpuscope_dropped();
  assert_true(dropped > 0); /* the flood before */
  gpuscope_mark("after", 1);
  ingest_poll(agent, sink, gs_mono_ns());
  struct ingest_counts c;
  ingest_counts(agent, &c);
  assert_int_equal(c.client_dropped, dropped);
  assert_int_equal(c.ok[INGEST_MARK] > 0, 1);
  gpuscope_mark("again", 1); /* told once: no second count */
  ingest_poll(agent, sink, gs_mono_ns());
  ingest_counts(agent, &c);
  assert_int_equal(c.client_dropped, dropped);
  gs_batch_free(gs_sink_take(sink));
}

static void test_agent_gone_drops_and_counts(void **state) {
  (void)state;
  ingest_close(agent);
  agent = NULL;
  unsigned long long before = gpuscope_dropped();
  gpuscope_log("loss", 1, -1);
  gpuscope_step(1, 0, 0, 0, -1);
  assert_int_equal(gpuscope_dropped() - before, 2);
}

/* In a child that never had GPUSCOPE_SOCKET: every call returns at once and nothing counts. */
static int disabled_client_is_a_noop(void) {
  pid_t pid = fork();
  if (pid == 0) {
    unsetenv("GPUSCOPE_SOCKET");
    gpuscope_log("loss", 1, 1);
    gpuscope_step(1, 1, 1, 1, 1);
    gpuscope_param("k", "v");
    gpuscope_mark("m", 1);
    _exit(gpuscope_enabled() == 0 && gpuscope_dropped() == 0 ? 0 : 1);
  }
  int st;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(void) {
  if (!disabled_client_is_a_noop()) {
    fprintf(stderr, "without GPUSCOPE_SOCKET the client was not a no-op\n");
    return 1;
  }
  char err[256];
  if (!(agent = ingest_open(err, sizeof err)) || !(sink = gs_sink_new())) {
    fprintf(stderr, "cannot open the ingest: %s\n", err);
    return 1;
  }
  setenv("GPUSCOPE_SOCKET", ingest_socket_path(agent), 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls_arrive_as_protocol_messages),
      cmocka_unit_test(test_unmeasured_h2d_is_left_out),
      cmocka_unit_test(test_numbers_are_sent_in_the_c_locale),
      cmocka_unit_test(test_long_param_value_is_cut_at_a_character),
      cmocka_unit_test(test_full_socket_drops_and_counts),
      cmocka_unit_test(test_dropped_count_reaches_the_agent),
      cmocka_unit_test(test_agent_gone_drops_and_counts),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  ingest_close(agent);
  gs_sink_free(sink);
  return rc ? rc : skipped ? 77 : 0; /* 77: ctest's SKIP_RETURN_CODE (tests/unit/CMakeLists.txt) */
}
