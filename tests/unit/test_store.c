/* The store suite every back end passes, through the store interface only: appended samples read
 * back exactly, runs resolve by id/prefix/name/last, a dead agent's run reads as crashed, a store
 * opened to read refuses every write, and events that share a time, kind and name but not a value
 * are all kept.
 *
 * The back end is chosen by URL: $GS_TEST_STORE_URL is a prefix to which each test appends its own
 * store name ("sqlite:///tmp/x/" gives sqlite:///tmp/x/a.db, ".db" added for SQLite; a PostgreSQL back
 * end would take "postgres://host/gs_test_" and get postgres://host/gs_test_a). Without it, each test gets an SQLite
 * file in a fresh temp folder. What is particular to SQLite files (foreign files, read-only media, a full disk) is in
 * test_store_sqlite.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/store.h"

static char dir[256];
static char prefix[512];

static int setup(void **state) {
  (void)state;
  const char *url = getenv("GS_TEST_STORE_URL");
  if (url && *url) {
    snprintf(prefix, sizeof prefix, "%s", url);
    return 0;
  }
  snprintf(dir, sizeof dir, "/tmp/gs-test-store-XXXXXX");
  if (!mkdtemp(dir))
    return -1;
  snprintf(prefix, sizeof prefix, "sqlite://%s/", dir);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  if (!dir[0])
    return 0;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* The URL of the test store called name: the prefix, the name, and ".db" for an SQLite file. */
static void store_url(char *url, size_t n, const char *name) {
  snprintf(url, n, "%s%s%s", prefix, name, strncmp(prefix, "sqlite://", 9) ? "" : ".db");
}

static struct store *open_db(const char *name) {
  char url[700];
  store_url(url, sizeof url, name);
  struct store *st = store_open(url);
  if (!st)
    fail_msg("cannot open %s: %s", url, gs_last_error());
  return st;
}

static void begin(struct store *st, struct store_run *r, const char *name) {
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", name);
  snprintf(r->command, sizeof r->command, "python train.py");
  gethostname(r->host, sizeof r->host - 1);
  r->agent_pid = getpid();
  r->exit_code = -1;
  r->start_wall_ns = gs_wall_ns();
  r->mono_start_ns = 1000;
  assert_int_equal(st->run_begin(st, r), 0);
}

struct window {
  int64_t first, last;
  size_t n;
};

static int window_one(void *u, int64_t t, double v) {
  struct window *w = u;
  (void)v;
  if (!w->n++)
    w->first = t;
  w->last = t;
  return 0;
}

/* Reads [from, to] and checks it holds exactly the 100 ms ticks inside it (points 0..2999). */
static void check_window(struct store *st, int64_t sid, int64_t from, int64_t to) {
  struct window w = {0};
  assert_int_equal(st->samples_read(st, sid, from, to, window_one, &w), 0);
  const int64_t tick = 100000000LL;
  int64_t lo = from < 0 ? 0 : (from + tick - 1) / tick, hi = to / tick > 2999 ? 2999 : to / tick;
  if (hi < lo) {
    assert_int_equal(w.n, 0);
    return;
  }
  assert_int_equal(w.n, hi - lo + 1);
  assert_int_equal(w.first, lo * tick);
  assert_int_equal(w.last, hi * tick);
}

static void test_store_samples_roundtrip_across_flushes(void **state) {
  (void)state;
  struct store *st = open_db("a");
  assert_non_null(st);
  struct store_run r;
  begin(st, &r, "rt");
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  for (int flush = 0; flush < 30; flush++) { /* 3000 points: crosses chunk boundaries */
    for (int i = 0; i < 100; i++) {
      int k = flush * 100 + i;
      gs_sink_put(s, id, 1000 + 100000000LL * k, (double)(k % 100));
    }
    struct gs_batch *b = gs_sink_take(s);
    assert_int_equal(st->run_append(st, &r, b), 0);
    gs_batch_free(b);
  }
  snprintf(r.status, sizeof r.status, "finished");
  r.exit_code = 0;
  r.end_wall_ns = r.start_wall_ns + 300000000000LL;
  assert_int_equal(st->run_end(st, &r), 0);
  struct store_series *ser;
  size_t n;
  assert_int_equal(st->series_list(st, r.id, &ser, &n), 0);
  assert_int_equal(n, 1);
  assert_int_equal(ser[0].count, 3000);
  int64_t *t;
  double *v;
  size_t np;
  assert_int_equal(store_samples_load(st, ser[0].id, &t, &v, &np), 0);
  assert_int_equal(np, 3000);
  for (size_t k = 0; k < np; k++) {
    assert_int_equal(t[k], 100000000LL * (int64_t)k);
    assert_true(v[k] == (double)(k % 100));
  }
  int64_t *rt;
  double *mn, *mx, *mean;
  size_t nr;
  assert_int_equal(st->rollups_read(st, ser[0].id, 10000000000LL, &rt, &mn, &mx, &mean, &nr), 0);
  assert_int_equal(nr, 30);
  assert_true(mn[0] == 0 && mx[0] == 99);
  free(rt), free(mn), free(mx), free(mean);
  /* windows: inside one chunk, across chunk boundaries (1,024 points each), at the ends, outside */
  int64_t sec = 1000000000LL;
  check_window(st, ser[0].id, 150 * sec, 160 * sec);
  check_window(st, ser[0].id, 100 * sec + 50000000LL, 205 * sec + 1);
  check_window(st, ser[0].id, -5 * sec, 3 * sec);
  check_window(st, ser[0].id, 299 * sec, 400 * sec);
  check_window(st, ser[0].id, 301 * sec, 400 * sec);
  check_window(st, ser[0].id, INT64_MIN, INT64_MAX);
  free(t), free(v), free(ser);
  gs_sink_free(s);
  st->close(st);
}

/* Value k of the 1 Hz series below: decimals that move, with a fractional part now and then. */
static double hz1_value(int k) {
  return (double)(k % 97) + (k % 5 == 0 ? 0.25 : 0.0);
}

/* Checks rollups_read at res against buckets computed here from the samples (n points, 1 s apart). */
static void check_rollups(struct store *st, int64_t sid, int64_t res, int n) {
  int64_t *t;
  double *mn, *mx, *mean;
  size_t nr;
  assert_int_equal(st->rollups_read(st, sid, res, &t, &mn, &mx, &mean, &nr), 0);
  int per = (int)(res / 1000000000LL);
  assert_int_equal(nr, (size_t)((n + per - 1) / per));
  for (size_t b = 0; b < nr; b++) {
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    int cnt = 0;
    for (int k = (int)b * per; k < n && k < ((int)b + 1) * per; k++, cnt++) {
      double v = hz1_value(k);
      lo = v < lo ? v : lo, hi = v > hi ? v : hi, sum += v;
    }
    assert_int_equal(t[b], (int64_t)b * res);
    assert_true(mn[b] == lo && mx[b] == hi);
    assert_true(mean[b] == sum / (double)cnt);
  }
  free(t), free(mn), free(mx), free(mean);
}

/* A 1 Hz series for 5 h, flushed every 10 s as the agent does: its 1 s and 10 s levels (a sample
 * or ten a bucket) are not worth storing, its 1 min level is (300 buckets, more than a stored block
 * holds). Every level reads back as the samples make it, stored or computed. */
static void test_store_rollups_of_a_1hz_series_read_right_at_every_level(void **state) {
  (void)state;
  struct store *st = open_db("hz1");
  struct store_run r;
  begin(st, &r, "hz1");
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "nvml", "gpu.power_w", "gpu=0", "W", GS_GAUGE);
  const int n = 5 * 3600;
  for (int k = 0; k < n; k++) {
    gs_sink_put(s, id, 1000 + 1000000000LL * k, hz1_value(k));
    if (k % 10 == 9 || k == n - 1) {
      struct gs_batch *b = gs_sink_take(s);
      assert_int_equal(st->run_append(st, &r, b), 0);
      gs_batch_free(b);
    }
  }
  snprintf(r.status, sizeof r.status, "finished");
  r.exit_code = 0;
  r.end_wall_ns = r.start_wall_ns + (int64_t)n * 1000000000LL;
  assert_int_equal(st->run_end(st, &r), 0);
  struct store_series *ser;
  size_t ns;
  assert_int_equal(st->series_list(st, r.id, &ser, &ns), 0);
  assert_int_equal(ns, 1);
  check_rollups(st, ser[0].id, 1000000000LL, n);
  check_rollups(st, ser[0].id, 10000000000LL, n);
  check_rollups(st, ser[0].id, 60000000000LL, n);
  free(ser);
  gs_sink_free(s);
  st->close(st);
}

static void test_store_resolves_runs(void **state) {
  (void)state;
  struct store *st = open_db("b");
  struct store_run a, b, got;
  begin(st, &a, "first");
  begin(st, &b, "second");
  assert_int_equal(st->run_get(st, "last", &got), 0);
  assert_string_equal(got.id, b.id);
  assert_int_equal(st->run_get(st, "first", &got), 0);
  assert_string_equal(got.id, a.id);
  assert_int_equal(st->run_get(st, a.id, &got), 0);
  assert_string_equal(got.name, "first");
  char prefix[21];
  memcpy(prefix, b.id, 20);
  prefix[20] = 0;
  assert_int_equal(st->run_get(st, prefix, &got), 0);
  assert_string_equal(got.id, b.id);
  assert_int_equal(st->run_get(st, "0", &got), GS_EAMBIG); /* ids start with the time: both match */
  assert_int_equal(st->run_get(st, "nope", &got), GS_ENOENT);
  st->close(st);
}

static void test_store_dead_agent_run_is_crashed(void **state) {
  (void)state;
  struct store *st = open_db("c");
  struct store_run r, got;
  pid_t child = fork();
  if (child == 0)
    _exit(0);
  waitpid(child, NULL, 0);
  memset(&r, 0, sizeof r);
  gethostname(r.host, sizeof r.host - 1);
  r.agent_pid = child; /* an agent that is gone */
  r.start_wall_ns = gs_wall_ns();
  assert_int_equal(st->run_begin(st, &r), 0);
  assert_int_equal(st->run_get(st, r.id, &got), 0);
  assert_string_equal(got.status, "crashed");
  st->close(st);
}

static void test_store_read_mode_reads_and_refuses_writes(void **state) {
  (void)state;
  struct store *st = open_db("ro");
  assert_non_null(st);
  struct store_run r, got;
  begin(st, &r, "kept");
  st->close(st);
  char url[700];
  store_url(url, sizeof url, "ro");
  st = store_open_mode(url, STORE_READ);
  assert_non_null(st);
  assert_true(st->read_only);
  assert_int_equal(st->run_get(st, "kept", &got), 0);
  assert_string_equal(got.id, r.id);
  struct store_run other;
  memset(&other, 0, sizeof other);
  assert_int_equal(st->run_begin(st, &other), GS_EINVAL); /* refused before it writes (sqlite_run.c:41) */
  assert_int_not_equal(st->findings_write(st, r.id, NULL, 0), 0);
  /* The edits too, each with the read-only error before it touches the database (mutation:
   * pg_meta.c:146, a delete that went on past its failed begin to a server-side refusal, GS_EIO). */
  struct gs_sink *sk = gs_sink_new(); /* an append too, not spooled (mutation: pg_run.c:94) */
  gs_sink_put(sk, gs_sink_series(sk, "host", "cpu.util_pct", "", "%", GS_GAUGE), 1000, 50);
  struct gs_batch *b = gs_sink_take(sk);
  assert_int_equal(st->run_append(st, &r, b), GS_EINVAL);
  gs_batch_free(b);
  gs_sink_free(sk);
  assert_int_equal(st->run_delete(st, r.id), GS_EINVAL);
  assert_int_equal(st->run_set_tags(st, r.id, "k=v"), GS_EINVAL);
  assert_int_equal(st->run_rename(st, r.id, "renamed"), GS_EINVAL);
  assert_int_equal(st->run_add_note(st, r.id, "a note"), GS_EINVAL);
  assert_int_equal(st->run_get(st, "kept", &got), 0);
  st->close(st);
  /* report's mode keeps its findings in a writable store of this version (mutation:
   * store_sqlite.c:329 `sqlite3_db_readonly(...) == 1` -> `== 0`, a writable file kept read-only) */
  st = store_open_mode(url, STORE_KEEP);
  assert_non_null(st);
  assert_false(st->read_only);
  assert_int_equal(st->findings_write(st, r.id, NULL, 0), 0);
  st->close(st);
}

/* Missing is not zero: a finding's unknown figures (NAN) come back unknown, the known ones as written. */
static void test_store_finding_unknown_figures_stay_unknown(void **state) {
  (void)state;
  struct store *st = open_db("findings");
  assert_non_null(st);
  struct store_run r;
  begin(st, &r, "diagnosed");
  struct store_finding f[2];
  memset(f, 0, sizeof f);
  snprintf(f[0].rule, sizeof f[0].rule, "periodic_stall");
  f[0].share = 0.25, f[0].lost_s = NAN, f[0].speedup = 1.5;
  snprintf(f[1].rule, sizeof f[1].rule, "healthy");
  f[1].share = NAN, f[1].lost_s = 12.5, f[1].speedup = NAN;
  assert_int_equal(st->findings_write(st, r.id, f, 2), 0);
  struct store_finding *got = NULL;
  size_t n = 0;
  assert_int_equal(st->findings_read(st, r.id, &got, &n), 0);
  assert_int_equal(n, 2);
  assert_string_equal(got[0].rule, "periodic_stall");
  assert_true(got[0].share == 0.25 && got[0].speedup == 1.5);
  assert_true(isnan(got[0].lost_s));
  assert_true(isnan(got[1].share) && isnan(got[1].speedup));
  assert_true(got[1].lost_s == 12.5);
  free(got);
  st->close(st);
}

/* A run still going is read from another connection (show, top, the web app): every sample of every
 * committed flush, the full chunks and the one still open. */
static void test_store_samples_readable_before_the_run_ends(void **state) {
  (void)state;
  struct store *st = open_db("live");
  struct store_run r;
  begin(st, &r, "live");
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  char url[700];
  store_url(url, sizeof url, "live");
  for (int flush = 0; flush < 15; flush++) { /* 1,500 points: one full chunk and an open one */
    for (int i = 0; i < 100; i++)
      gs_sink_put(s, id, 1000 + 100000000LL * (flush * 100 + i), (double)i);
    struct gs_batch *b = gs_sink_take(s);
    assert_int_equal(st->run_append(st, &r, b), 0);
    gs_batch_free(b);
    if (flush != 4 && flush != 14)
      continue;
    struct store *rd = store_open_mode(url, STORE_READ);
    assert_non_null(rd);
    struct store_series *ser;
    size_t n;
    assert_int_equal(rd->series_list(rd, r.id, &ser, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(ser[0].count, (flush + 1) * 100);
    assert_int_equal(ser[0].t_last, 100000000LL * ((flush + 1) * 100 - 1));
    struct window w = {0};
    assert_int_equal(rd->samples_read(rd, ser[0].id, INT64_MIN, INT64_MAX, window_one, &w), 0);
    assert_int_equal(w.n, (flush + 1) * 100);
    w = (struct window){0}; /* a window that starts in the full chunk and ends in the open one */
    assert_int_equal(rd->samples_read(rd, ser[0].id, 1000 * 100000000LL, 1100 * 100000000LL, window_one, &w), 0);
    assert_int_equal(w.n, flush == 14 ? 101 : 0);
    free(ser);
    rd->close(rd);
  }
  gs_sink_free(s);
  st->close(st);
}

/* One handle writing two runs in turn, each with its own sink (a sink numbers its series from 0):
 * every run keeps its own samples, none lands in the other's series. */
static void one_run(struct store *st, struct store_run *r, const char *name, double value) {
  begin(st, r, name);
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "nvml", value < 50 ? "gpu.util_pct" : "gpu.power_w", "gpu=0", "%", GS_GAUGE);
  for (int i = 0; i < 50; i++)
    gs_sink_put(s, id, 1000 + 100000000LL * i, value);
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, r, b), 0);
  gs_batch_free(b);
  gs_sink_free(s);
  snprintf(r->status, sizeof r->status, "finished");
  r->exit_code = 0;
  r->end_wall_ns = r->start_wall_ns + 5000000000LL;
  assert_int_equal(st->run_end(st, r), 0);
}

static void check_only(struct store *st, const struct store_run *r, const char *name, double value) {
  struct store_series *ser;
  size_t n;
  assert_int_equal(st->series_list(st, r->id, &ser, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(ser[0].name, name);
  int64_t *t;
  double *v;
  size_t np;
  assert_int_equal(store_samples_load(st, ser[0].id, &t, &v, &np), 0);
  assert_int_equal(np, 50);
  for (size_t k = 0; k < np; k++)
    assert_true(v[k] == value);
  free(t), free(v), free(ser);
}

static void test_store_two_runs_on_one_handle_keep_their_own_samples(void **state) {
  (void)state;
  struct store *st = open_db("two");
  struct store_run a, b;
  one_run(st, &a, "first", 10);
  one_run(st, &b, "second", 70);
  check_only(st, &a, "gpu.util_pct", 10);
  check_only(st, &b, "gpu.power_w", 70);
  st->close(st);
}

/* Two marks of one name at the same instant with different values (a client's burst read in one
 * poll is stamped with one arrival time) are two events: every back end keeps both. */
static void test_store_events_at_one_time_with_different_values_are_all_kept(void **state) {
  (void)state;
  struct store *st = open_db("events");
  struct store_run r;
  begin(st, &r, "marks");
  struct gs_sink *s = gs_sink_new();
  for (int i = 0; i < 3; i++)
    gs_sink_event(s, 1000 + 500000000LL, "mark", "tick", (double)i, "", "");
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  gs_sink_free(s);
  snprintf(r.status, sizeof r.status, "finished");
  r.exit_code = 0;
  r.end_wall_ns = r.start_wall_ns + 1000000000LL;
  assert_int_equal(st->run_end(st, &r), 0);
  struct store_event *ev = NULL;
  size_t n = 0;
  assert_int_equal(st->events_read(st, r.id, &ev, &n), 0);
  int seen[3] = {0};
  size_t marks = 0;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(ev[i].kind, "mark") && !strcmp(ev[i].name, "tick") && ev[i].value >= 0 && ev[i].value < 3)
      marks++, seen[(int)ev[i].value]++;
  free(ev);
  st->close(st); /* before the checks: a failed one leaves the test, and would leak the store */
  assert_int_equal(marks, 3);
  assert_true(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
}

struct log_read {
  char data[4096];
  size_t len, n;
  int64_t seq[16], t[16];
  char stream[16][8];
};

static int log_read_one(void *u, const struct store_log_chunk *c) {
  struct log_read *x = u;
  if (x->n < 16) {
    x->seq[x->n] = c->seq, x->t[x->n] = c->t;
    snprintf(x->stream[x->n], sizeof x->stream[0], "%s", c->stream);
  }
  x->n++;
  if (x->len + c->len <= sizeof x->data)
    memcpy(x->data + x->len, c->data, c->len), x->len += c->len;
  return 0;
}

/* The job's output: chunks come back byte for byte (NUL, \r, ESC, bytes that are not UTF-8) in seq
 * order with their stream and time; a chunk appended twice (a replay) is kept once; keep_from trims
 * the oldest, and a read from a seq starts there. */
static void test_store_log_chunks_roundtrip_and_trim(void **state) {
  (void)state;
  struct store *st = open_db("log");
  struct store_run r;
  begin(st, &r, "log");
  assert_true(st->version >= 4 && st->log_append && st->log_read);
  static const uint8_t a[] = {'a', '\r', 'b', 0x1b, '[', '3', '1', 'm', 0, 0xff, '\n'}, b[] = "err\n", c[] = "tail";
  struct store_log_chunk v[3] = {{.seq = 0, .t = 5, .stream = "out", .data = a, .len = sizeof a},
                                 {.seq = 1, .t = 7, .stream = "err", .data = b, .len = 4},
                                 {.seq = 2, .t = 9, .stream = "tty", .data = c, .len = 4}};
  assert_int_equal(st->log_append(st, &r, v, 2, 0), 0);
  assert_int_equal(st->log_append(st, &r, v + 1, 2, 0), 0); /* seq 1 again, and 2 */
  struct log_read x = {0};
  assert_int_equal(st->log_read(st, r.id, 0, log_read_one, &x), 0);
  assert_int_equal(x.n, 3);
  assert_int_equal(x.len, sizeof a + 8);
  assert_memory_equal(x.data, a, sizeof a);
  assert_memory_equal(x.data + sizeof a, "err\ntail", 8);
  assert_true(x.seq[0] == 0 && x.seq[1] == 1 && x.seq[2] == 2 && x.t[0] == 5 && x.t[2] == 9);
  assert_string_equal(x.stream[0], "out");
  assert_string_equal(x.stream[1], "err");
  assert_string_equal(x.stream[2], "tty");
  memset(&x, 0, sizeof x);
  assert_int_equal(st->log_read(st, r.id, 2, log_read_one, &x), 0);
  assert_true(x.n == 1 && x.seq[0] == 2);
  assert_int_equal(st->log_append(st, &r, NULL, 0, 2), 0); /* the bound: keep from seq 2 on */
  memset(&x, 0, sizeof x);
  assert_int_equal(st->log_read(st, r.id, 0, log_read_one, &x), 0);
  st->close(st);
  assert_true(x.n == 1 && x.seq[0] == 2 && x.len == 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_store_samples_roundtrip_across_flushes),
      cmocka_unit_test(test_store_two_runs_on_one_handle_keep_their_own_samples),
      cmocka_unit_test(test_store_rollups_of_a_1hz_series_read_right_at_every_level),
      cmocka_unit_test(test_store_resolves_runs),
      cmocka_unit_test(test_store_dead_agent_run_is_crashed),
      cmocka_unit_test(test_store_read_mode_reads_and_refuses_writes),
      cmocka_unit_test(test_store_finding_unknown_figures_stay_unknown),
      cmocka_unit_test(test_store_samples_readable_before_the_run_ends),
      cmocka_unit_test(test_store_events_at_one_time_with_different_values_are_all_kept),
      cmocka_unit_test(test_store_log_chunks_roundtrip_and_trim),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
