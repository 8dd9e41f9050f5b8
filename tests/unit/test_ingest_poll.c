/* Unit tests of the agent's end of the client channel (src/ingest/ingest.c) over a real socket: what
 * each message kind becomes in the sink, the timestamps steps get, and how bad messages, oversize
 * datagrams and runaway clients are counted without stopping the good ones. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "ingest/ingest.h"

struct fixture {
  struct ingest *in;
  struct gs_sink *sink;
  int client;
  struct sockaddr_un addr;
};

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof *f);
  char err[256];
  f->in = ingest_open(err, sizeof err);
  f->sink = gs_sink_new();
  f->client = socket(AF_UNIX, SOCK_DGRAM, 0);
  if (!f->in || !f->sink || f->client < 0)
    return -1;
  f->addr.sun_family = AF_UNIX;
  snprintf(f->addr.sun_path, sizeof f->addr.sun_path, "%s", ingest_socket_path(f->in));
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fixture *f = *state;
  ingest_close(f->in);
  gs_sink_free(f->sink);
  close(f->client);
  free(f);
  return 0;
}

static void send_dgram(struct fixture *f, const char *s, size_t n) {
  assert_int_equal(sendto(f->client, s, n, 0, (struct sockaddr *)&f->addr, sizeof f->addr), (ssize_t)n);
}

static void send_str(struct fixture *f, const char *s) {
  send_dgram(f, s, strlen(s));
}

static int series_id(const struct gs_batch *b, const char *source, const char *name) {
  for (size_t i = 0; i < b->n_series; i++)
    if (!strcmp(b->series[i].source, source) && !strcmp(b->series[i].name, name))
      return b->series[i].id;
  return -1;
}

/* The n-th point (0-based) of a series in the batch, or NULL. */
static const struct gs_point *point(const struct gs_batch *b, const char *source, const char *name, size_t nth) {
  int id = series_id(b, source, name);
  for (size_t i = 0; i < b->n_points; i++)
    if (b->points[i].series == id && nth-- == 0)
      return &b->points[i];
  return NULL;
}

static const char *param(const struct gs_batch *b, const char *key) {
  const char *v = NULL;
  for (size_t i = 0; i < b->n_params; i++)
    if (!strcmp(b->params[i].key, key))
      v = b->params[i].value;
  return v;
}

static void test_socket_is_private(void **state) {
  struct fixture *f = *state;
  struct stat st;
  assert_int_equal(stat(ingest_socket_path(f->in), &st), 0);
  assert_true(S_ISSOCK(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0600);
  char dir[128];
  snprintf(dir, sizeof dir, "%s", ingest_socket_path(f->in));
  *strrchr(dir, '/') = 0;
  assert_int_equal(stat(dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
}

static void test_step_becomes_step_series_at_its_time(void **state) {
  struct fixture *f = *state;
  int64_t t = gs_mono_ns();
  char msg[256];
  snprintf(msg, sizeof msg, "gs1 step 3 data=0.5 h2d=0.125 compute=0.25 samples=32 fwd=0.125 t=%.9f\n",
           (double)t / 1e9);
  send_str(f, msg);
  assert_int_equal(ingest_poll(f->in, f->sink, t + 5000000), 1);
  struct gs_batch *b = gs_sink_take(f->sink);
  const char *names[] = {"step.n",       "step.data_s",  "step.h2d_s", "step.compute_s",
                         "step.total_s", "step.samples", "step.fwd_s"};
  const double want[] = {3, 0.5, 0.125, 0.25, 1.0, 32, 0.125};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    const struct gs_point *p = point(b, "client", names[i], 0);
    assert_non_null(p);
    assert_true(fabs(p->v - want[i]) < 1e-12);
    assert_true(llabs(p->t_ns - t) < 1000); /* t= kept, to the microsecond the text carries */
  }
  gs_batch_free(b);
}

static void test_step_without_sane_time_gets_arrival_time(void **state) {
  struct fixture *f = *state;
  send_str(f, "gs1 step 1 data=0.1 compute=0.1 t=1.0\ngs1 step 2 data=0.1 compute=0.1");
  int64_t now = gs_mono_ns();
  assert_int_equal(ingest_poll(f->in, f->sink, now), 2);
  struct gs_batch *b = gs_sink_take(f->sink);
  const struct gs_point *p1 = point(b, "client", "step.n", 0), *p2 = point(b, "client", "step.n", 1);
  assert_non_null(p1);
  assert_non_null(p2);
  assert_true(p1->t_ns == now);
  assert_true(p2->t_ns == now + 1); /* same arrival: moved a nanosecond on, never lost */
  gs_batch_free(b);
}

static void test_metrics_in_one_datagram_all_keep_distinct_times(void **state) {
  struct fixture *f = *state;
  send_str(f, "gs1 metric loss 3 10\ngs1 metric loss 2 11\n\ngs1 metric loss 1 12\n");
  int64_t now = gs_mono_ns();
  assert_int_equal(ingest_poll(f->in, f->sink, now), 3);
  struct gs_batch *b = gs_sink_take(f->sink);
  for (size_t i = 0; i < 3; i++) {
    const struct gs_point *v = point(b, "client", "loss", i), *s = point(b, "client.step", "loss", i);
    assert_non_null(v);
    assert_non_null(s);
    assert_true(v->v == 3.0 - (double)i);
    assert_true(s->v == 10.0 + (double)i);
    assert_true(v->t_ns == now + (int64_t)i && s->t_ns == v->t_ns);
  }
  gs_batch_free(b);
}

static void test_params_and_marks_are_routed(void **state) {
  struct fixture *f = *state;
  send_str(f, "gs1 param batch_size 64\ngs1 mark epoch 2\ngs1 mark checkpoint");
  assert_int_equal(ingest_poll(f->in, f->sink, gs_mono_ns()), 3);
  struct gs_batch *b = gs_sink_take(f->sink);
  assert_string_equal(param(b, "batch_size"), "64");
  assert_int_equal(b->n_events, 2);
  assert_string_equal(b->events[0].kind, "mark");
  assert_string_equal(b->events[0].name, "epoch");
  assert_true(b->events[0].value == 2);
  assert_string_equal(b->events[1].name, "checkpoint");
  assert_true(isnan(b->events[1].value));
  gs_batch_free(b);
}

static void test_bad_messages_are_counted_and_good_ones_still_stored(void **state) {
  struct fixture *f = *state;
  /* A UNIX datagram queue holds only net.unix.max_dgram_qlen (often 10) datagrams: poll as we go. */
  int accepted = 0;
  for (int i = 0; i < 10; i++) {
    send_str(f, "gs1 metric loss nan\ngs1 param k \x01\ngs1 step -1\ngs1 mark\ngs9 hello\ngs1 metric ok 1");
    accepted += ingest_poll(f->in, f->sink, gs_mono_ns());
  }
  assert_int_equal(accepted, 10);
  struct ingest_counts c;
  ingest_counts(f->in, &c);
  for (int k = 0; k < INGEST_NKINDS; k++)
    /* no dropped- or rejected-count message was sent */
    assert_int_equal(c.bad[k], k == INGEST_DROPPED || k == INGEST_REJECTED ? 0 : 10);
  assert_int_equal(c.ok[INGEST_METRIC], 10);
  struct gs_batch *b = gs_sink_take(f->sink);
  assert_non_null(point(b, "client", "ok", 9));
  assert_int_equal(series_id(b, "client", "loss"), -1);
  assert_string_equal(param(b, "ingest.bad_messages"), "50 (metric 10, param 10, step 10, mark 10, other 10)");
  assert_string_equal(param(b, "ingest.bad.step"), "10");
  assert_int_equal(b->n_notes, 5); /* the first of each kind, once */
  gs_batch_free(b);
}

static void test_oversize_datagram_is_counted(void **state) {
  struct fixture *f = *state;
  static char big[INGEST_MAX_DATAGRAM + 100];
  memset(big, 'x', sizeof big);
  send_dgram(f, big, sizeof big);
  send_str(f, "gs1 metric after 1");
  assert_int_equal(ingest_poll(f->in, f->sink, gs_mono_ns()), 1);
  struct ingest_counts c;
  ingest_counts(f->in, &c);
  assert_int_equal(c.bad[INGEST_OTHER], 1);
  gs_batch_free(gs_sink_take(f->sink));
}

static void test_runaway_client_series_are_limited(void **state) {
  struct fixture *f = *state;
  char msg[64];
  for (int i = 0; i < 1005; i++) {
    snprintf(msg, sizeof msg, "gs1 metric m%d 1", i);
    send_str(f, msg);
    if (i % 5 == 0)
      ingest_poll(f->in, f->sink, gs_mono_ns());
  }
  ingest_poll(f->in, f->sink, gs_mono_ns());
  struct ingest_counts c;
  ingest_counts(f->in, &c);
  assert_int_equal(c.ok[INGEST_METRIC], 1000);
  assert_int_equal(c.limited, 5);
  gs_batch_free(gs_sink_take(f->sink));
}

static void test_close_removes_socket_and_directory(void **state) {
  (void)state;
  char err[256], path[128], dir[128];
  struct ingest *in = ingest_open(err, sizeof err);
  assert_non_null(in);
  snprintf(path, sizeof path, "%s", ingest_socket_path(in));
  snprintf(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = 0;
  ingest_close(in);
  assert_int_equal(access(path, F_OK), -1);
  assert_int_equal(access(dir, F_OK), -1);
  ingest_close(NULL);
}

/* The run summary's lines as ingest_summary writes them (the caller frees them). */
static char *summary_text(struct fixture *f) {
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  ingest_summary(f->in, out);
  fclose(out);
  return text;
}

static void test_summary_reports_counts(void **state) {
  struct fixture *f = *state;
  send_str(f, "gs1 step 1 data=0\ngs1 metric x 1\ngs1 metric x nan");
  ingest_poll(f->in, f->sink, gs_mono_ns());
  char *text = summary_text(f);
  assert_non_null(strstr(text, "client: 2 messages (1 steps, 1 metrics"));
  assert_non_null(strstr(text, "1 bad messages rejected (metric 1,"));
  free(text);
  gs_batch_free(gs_sink_take(f->sink));
}

static void test_client_refusals_are_kept_by_cause(void **state) {
  struct fixture *f = *state;
  send_str(f, "gs1 rejected value 2\ngs1 rejected name 1\ngs1 dropped 4\ngs1 rejected value 3\ngs1 rejected why 1");
  ingest_poll(f->in, f->sink, gs_mono_ns());
  ingest_finish(f->in, f->sink, gs_mono_ns());
  struct ingest_counts c;
  ingest_counts(f->in, &c);
  assert_int_equal(c.client_rejected[INGEST_CAUSE_VALUE], 5);
  assert_int_equal(c.client_rejected[INGEST_CAUSE_NAME], 1);
  assert_int_equal(c.client_rejected[INGEST_CAUSE_STEP], 0);
  assert_int_equal(c.client_dropped, 4);       /* what could not be sent stays apart from what was refused */
  assert_int_equal(c.bad[INGEST_REJECTED], 1); /* an unknown cause is a bad message, not a count */
  struct gs_batch *b = gs_sink_take(f->sink);
  assert_string_equal(param(b, "ingest.client_rejected"), "6 (value 5, name 1, step 0, argument 0)");
  assert_string_equal(param(b, "ingest.client_rejected.value"), "5");
  assert_string_equal(param(b, "ingest.client_dropped"), "4");
  int noted = 0;
  for (size_t i = 0; i < b->n_notes; i++)
    noted += strstr(b->notes[i], "refused 6 values") != NULL;
  assert_int_equal(noted, 1);
  gs_batch_free(b);
  char *text = summary_text(f);
  assert_non_null(strstr(text, "client: 6 values refused by the job's client, not stored (value 5, name 1,"));
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_socket_is_private, setup, teardown),
      cmocka_unit_test_setup_teardown(test_step_becomes_step_series_at_its_time, setup, teardown),
      cmocka_unit_test_setup_teardown(test_step_without_sane_time_gets_arrival_time, setup, teardown),
      cmocka_unit_test_setup_teardown(test_metrics_in_one_datagram_all_keep_distinct_times, setup, teardown),
      cmocka_unit_test_setup_teardown(test_params_and_marks_are_routed, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_messages_are_counted_and_good_ones_still_stored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_oversize_datagram_is_counted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_runaway_client_series_are_limited, setup, teardown),
      cmocka_unit_test(test_close_removes_socket_and_directory),
      cmocka_unit_test_setup_teardown(test_summary_reports_counts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_client_refusals_are_kept_by_cause, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
