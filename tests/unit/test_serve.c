/* Unit tests of serve/: the constant-time token comparison, --listen parsing (which addresses are
 * loopback), and the series downsampler over a real SQLite store (raw samples with a null at a gap;
 * buckets whose minimum keeps a one-sample dip that their mean averages away). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "json_numbers.h"
#include "serve/serve_int.h"

static void test_token_equal_compares_whole_strings(void **state) {
  (void)state;
  assert_true(serve_token_equal("abc", 3, "abc", 3));
  assert_false(serve_token_equal("abc", 3, "abd", 3));
  assert_false(serve_token_equal("ab", 2, "abc", 3));
  assert_false(serve_token_equal("abcd", 4, "abc", 3));
  assert_false(serve_token_equal("", 0, "a", 1));
  assert_true(serve_token_equal("", 0, "", 0));
}

static void test_listen_addresses_and_loopback(void **state) {
  (void)state;
  struct serve_addr a;
  assert_int_equal(serve_addr_parse("127.0.0.1:7733", &a), 0);
  assert_true(a.loopback);
  assert_int_equal(a.port, 7733);
  assert_int_equal(serve_addr_parse(":0", &a), 0);
  assert_true(a.loopback);
  assert_string_equal(a.host, "127.0.0.1");
  assert_int_equal(serve_addr_parse("localhost:5", &a), 0);
  assert_true(a.loopback);
  assert_int_equal(serve_addr_parse("127.8.9.10:80", &a), 0);
  assert_true(a.loopback);
  assert_int_equal(serve_addr_parse("[::1]:80", &a), 0);
  assert_true(a.loopback && a.v6);
  assert_int_equal(serve_addr_parse("0.0.0.0:80", &a), 0);
  assert_false(a.loopback);
  assert_int_equal(serve_addr_parse("10.1.2.3:8080", &a), 0);
  assert_false(a.loopback);
  assert_int_equal(serve_addr_parse("[::]:80", &a), 0);
  assert_false(a.loopback);
  static const char *const bad[] = {"nohost", "1.2.3.4:99999", "example.com:80", "[::1]80", "1.2.3.4:", "1.2.3.4:x",
                                    ""};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_int_equal(serve_addr_parse(bad[i], &a), GS_EINVAL);
}

/* A store in a temporary file with one run of one series: n samples 100 ms apart, value v(k). */
struct fixture {
  char path[64];
  struct store *st;
  struct runview v;
};

static void make_run(struct fixture *f, size_t n, double (*v)(size_t k), int64_t (*t)(size_t k)) {
  snprintf(f->path, sizeof f->path, "/tmp/gs-test-serve-%d.db", (int)getpid());
  unlink(f->path);
  f->st = store_open(f->path);
  assert_non_null(f->st);
  struct store_run run = {.interval_ns = 100000000, .mono_start_ns = 1000000000, .agent_pid = getpid()};
  snprintf(run.name, sizeof run.name, "t");
  assert_int_equal(f->st->run_begin(f->st, &run), 0);
  struct gs_series_def def = {.id = 0, .source = "nvml", .name = "gpu.util_pct", .labels = "gpu=0", .unit = "%"};
  struct gs_batch b = {.series = &def, .n_series = 1};
  b.points = calloc(n, sizeof *b.points);
  assert_non_null(b.points);
  for (size_t k = 0; k < n; k++)
    b.points[b.n_points++] = (struct gs_point){.series = 0, .t_ns = run.mono_start_ns + t(k), .v = v(k)};
  assert_int_equal(f->st->run_append(f->st, &run, &b), 0);
  free(b.points);
  snprintf(run.status, sizeof run.status, "finished");
  run.end_wall_ns = run.start_wall_ns + t(n - 1);
  assert_int_equal(f->st->run_end(f->st, &run), 0);
  assert_int_equal(runview_load(f->st, run.id, &f->v), 0);
  assert_int_equal((int)f->v.nseries, 1);
}

static void drop(struct fixture *f) {
  runview_done(&f->v);
  f->st->close(f->st);
  char p[96];
  unlink(f->path);
  snprintf(p, sizeof p, "%s-wal", f->path), unlink(p);
  snprintf(p, sizeof p, "%s-shm", f->path), unlink(p);
}

/* The series as JSON text (caller frees). */
static char *series_json(struct fixture *f, size_t points) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  assert_int_equal(serve_series_json(m, &f->v, &f->v.series[0], INT64_MIN, INT64_MAX, points, 1), 0);
  fclose(m);
  return buf;
}

static double busy_with_one_dip(size_t k) {
  return k == 5003 ? 0 : 98;
}
static int64_t every_100ms(size_t k) {
  return (int64_t)k * 100000000;
}
static int64_t gap_after_ten(size_t k) {
  return (int64_t)(k < 10 ? k : k + 50) * 100000000;
}
static double fifty(size_t k) {
  (void)k;
  return 50;
}

static void test_buckets_keep_a_one_sample_dip_in_their_minimum(void **state) {
  (void)state;
  struct fixture f;
  make_run(&f, 10000, busy_with_one_dip, every_100ms);
  char *json = series_json(&f, 100);
  double mn[200], mean[200];
  size_t n = json_numbers(json, "min", mn, 200);
  assert_int_equal(json_numbers(json, "mean", mean, 200), n);
  assert_true(n == 100);
  size_t zero = 0, at = 0;
  for (size_t i = 0; i < n; i++)
    if (mn[i] == 0)
      zero++, at = i;
  assert_int_equal(zero, 1);
  assert_true(at == 50);      /* sample 5003 of 10000 */
  assert_true(mean[at] > 97); /* the mean of its 100 samples hides it */
  assert_non_null(strstr(json, "\"bucket_s\":"));
  free(json);
  drop(&f);
}

static void test_raw_samples_have_a_null_at_a_gap(void **state) {
  (void)state;
  struct fixture f;
  make_run(&f, 20, fifty, gap_after_ten);
  char *json = series_json(&f, 1000);
  double t[64], v[64];
  size_t n = json_numbers(json, "t", t, 64);
  assert_int_equal(json_numbers(json, "mean", v, 64), n);
  assert_int_equal(n, 21); /* 20 samples and one null between 0.9 s and 6.0 s */
  assert_true(isnan(v[10]) && t[10] > 0.9 && t[10] < 6.0);
  assert_null(strstr(json, "\"min\""));
  assert_non_null(strstr(json, "\"res\":\"raw\""));
  free(json);
  drop(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_token_equal_compares_whole_strings),
      cmocka_unit_test(test_listen_addresses_and_loopback),
      cmocka_unit_test(test_buckets_keep_a_one_sample_dip_in_their_minimum),
      cmocka_unit_test(test_raw_samples_have_a_null_at_a_gap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
