/* Unit tests of the store that the mutation pass (tests/mutation, docs/mutation.md) found missing:
 * each test here kills mutants of src/store/ that every other test let live, and says which. Some
 * call the inner parts directly (the pending batch of failed appends) through the back ends' private
 * header; the others go through the store interface, on the back end $GS_TEST_STORE_URL names (as
 * test_store.c: a prefix to which each test appends its store's name; pg_unit_test_store_mutants runs
 * them on PostgreSQL), else on an SQLite file in a fresh temp folder. */
#include <errno.h>
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
#include <libpq-fe.h>
#include <sqlite3.h>

#include "store/pg_int.h"
#include "store/store_backend.h"

/* A batch of n_series series, n_points points, n_events events, two params and n_notes notes; each
 * string says what it is and its index (free with gs_batch_free). */
static struct gs_batch *batch_new(int n_series, int n_points, int n_events, int n_notes, const char *param_a) {
  struct gs_batch *b = calloc(1, sizeof *b);
  char s[64];
  b->series = calloc((size_t)n_series + 1, sizeof *b->series);
  for (int i = 0; i < n_series; i++) {
    snprintf(s, sizeof s, "name%d", i);
    b->series[i] = (struct gs_series_def){.id = i,
                                          .kind = GS_GAUGE,
                                          .source = strdup("host"),
                                          .name = strdup(s),
                                          .labels = strdup("gpu=0"),
                                          .unit = strdup("%")};
  }
  b->n_series = b->cap_series = (size_t)n_series;
  b->points = calloc((size_t)n_points + 1, sizeof *b->points);
  for (int i = 0; i < n_points; i++)
    b->points[i] = (struct gs_point){.series = 0, .t_ns = 1000 + i, .v = i};
  b->n_points = b->cap_points = (size_t)n_points;
  b->events = calloc((size_t)n_events + 1, sizeof *b->events);
  for (int i = 0; i < n_events; i++) {
    snprintf(s, sizeof s, "event%d", i);
    b->events[i] = (struct gs_event){
        .t_ns = i, .kind = strdup("mark"), .name = strdup(s), .value = i, .labels = strdup(""), .text = strdup(s)};
  }
  b->n_events = b->cap_events = (size_t)n_events;
  b->params = calloc(2, sizeof *b->params);
  b->params[0] = (struct gs_kv){strdup("a"), strdup(param_a)};
  b->params[1] = (struct gs_kv){strdup("b"), strdup("2")};
  b->n_params = b->cap_params = 2;
  b->notes = calloc((size_t)n_notes + 1, sizeof *b->notes);
  for (int i = 0; i < n_notes; i++) {
    snprintf(s, sizeof s, "note%d", i);
    b->notes[i] = strdup(s);
  }
  b->n_notes = b->cap_notes = (size_t)n_notes;
  return b;
}

/* Events, params and notes of failed appends are kept, in order, past the arrays' first growth; a
 * param sent again replaces its value. Kills pending.c's `reserve(..., 1, ...)` -> 0 for events
 * (the 65th event written past the array) and `if (!v)` -> `if (1)` (a replaced param counted
 * as dropped). */
static void test_pending_keeps_events_params_and_notes_of_failed_appends(void **state) {
  (void)state;
  struct store_pending p;
  memset(&p, 0, sizeof p);
  struct store_write_stats stats;
  memset(&stats, 0, sizeof stats);
  struct gs_batch *b1 = batch_new(2, 3, 70, 2, "1"), *b2 = batch_new(0, 2, 1, 1, "one");
  assert_int_equal(store_pending_add(&p, b1, &stats), GS_OK);
  assert_int_equal(store_pending_add(&p, b2, &stats), GS_OK);
  assert_int_equal(stats.events_dropped, 0);
  assert_int_equal(stats.points_dropped, 0);
  assert_int_equal(stats.points_pending, 5);
  assert_int_equal(p.b.n_series, 2);
  assert_string_equal(p.b.series[1].name, "name1");
  assert_string_equal(p.b.series[1].labels, "gpu=0");
  assert_int_equal(p.b.n_points, 5);
  assert_int_equal(p.b.points[3].t_ns, 1000);
  assert_int_equal(p.b.n_events, 71);
  assert_string_equal(p.b.events[69].name, "event69");
  assert_string_equal(p.b.events[69].text, "event69");
  assert_true(p.b.events[69].value == 69);
  assert_string_equal(p.b.events[70].name, "event0");
  assert_int_equal(p.b.n_params, 2);
  assert_string_equal(p.b.params[0].key, "a");
  assert_string_equal(p.b.params[0].value, "one");
  assert_string_equal(p.b.params[1].value, "2");
  assert_int_equal(p.b.n_notes, 3);
  assert_string_equal(p.b.notes[2], "note0");
  assert_true(store_pending_any(&p));
  store_pending_clear(&p);
  assert_false(store_pending_any(&p));
  store_pending_done(&p);
  gs_batch_free(b1);
  gs_batch_free(b2);
}

/* Past STORE_PENDING_MAX_EVENTS events (and as many notes) the newest are dropped and counted. */
static void test_pending_events_and_notes_are_bounded_and_counted(void **state) {
  (void)state;
  struct store_pending p;
  memset(&p, 0, sizeof p);
  struct store_write_stats stats;
  memset(&stats, 0, sizeof stats);
  struct gs_batch *b = batch_new(0, 0, STORE_PENDING_MAX_EVENTS + 3, 2, "1");
  assert_int_equal(store_pending_add(&p, b, &stats), GS_OK);
  assert_int_equal(p.b.n_events, STORE_PENDING_MAX_EVENTS);
  assert_int_equal(stats.events_dropped, 3);
  assert_int_equal(p.b.n_notes, 2);
  store_pending_done(&p);
  gs_batch_free(b);
}

/* A URL's password never shows: the user's secret before '@' goes, a password= parameter reads
 * ***, wherever it is in the query, and the rest is kept byte for byte. Kills pg_scrub_url's
 * `strlen(at) + 1` -> `- 1` and `strlen(end) + 1` -> `- 1` (the text after it cut short). */
static void test_pg_url_is_shown_without_its_password(void **state) {
  (void)state;
  char out[256];
  pg_scrub_url("postgresql://ada:s3cret@db.example:5432/gpuscope?sslmode=require", out, sizeof out);
  assert_string_equal(out, "postgresql://ada@db.example:5432/gpuscope?sslmode=require");
  pg_scrub_url("postgresql://db/gpuscope?password=s3cret&sslmode=require", out, sizeof out);
  assert_string_equal(out, "postgresql://db/gpuscope?password=***&sslmode=require");
  pg_scrub_url("postgres://db/g?sslmode=require&password=s3cret", out, sizeof out);
  assert_string_equal(out, "postgres://db/g?sslmode=require&password=***");
  pg_scrub_url("postgresql://ada@db/g?application_name=password", out, sizeof out);
  assert_string_equal(out, "postgresql://ada@db/g?application_name=password");
  pg_scrub_url("postgresql://ada:pw@db/g?password=pw", out, sizeof out);
  assert_string_equal(out, "postgresql://ada@db/g?password=***");
}

/* Buckets are floored to a multiple of the resolution on both sides of the run's start: a point
 * 0.5 s before it is in the bucket starting 1 s before, one at -1 s exactly in that bucket too, and
 * each bucket has the min, max and mean of its own points. Kills rollup_point's negative-time
 * floor (`-t + a->res - 1` -> `-t - a->res - 1`, `- 1` -> `- 0`). */
static void test_rollup_buckets_floor_times_before_the_start(void **state) {
  (void)state;
  const int64_t sec = 1000000000LL;
  struct rollup_acc a;
  memset(&a, 0, sizeof a);
  a.res = sec;
  static const struct {
    int64_t t;
    double v;
  } pts[] = {{-2 * sec - 1, 9}, {-1 * sec, 1}, {-sec / 2, 3}, {0, 5}, {sec - 1, 7}, {sec, 2}};
  for (size_t i = 0; i < sizeof pts / sizeof *pts; i++)
    assert_int_equal(rollup_point(&a, pts[i].t, pts[i].v), 0);
  rollup_emit(&a);
  assert_int_equal(a.len, 4);
  static const int64_t want_t[] = {-3 * sec, -1 * sec, 0, sec};
  static const double want_min[] = {9, 1, 5, 2}, want_max[] = {9, 3, 7, 2}, want_mean[] = {9, 2, 6, 2};
  for (size_t i = 0; i < 4; i++) {
    assert_int_equal(a.t[i], want_t[i]);
    assert_true(a.mn[i] == want_min[i] && a.mx[i] == want_max[i] && a.mean[i] == want_mean[i]);
  }
  rollup_done(&a);
}

/* A rollup block whose first column claims more bytes than the block holds is corrupt, whatever
 * lies in memory after it; a block that is not even its two length words is too. Kills
 * rollup_block_decode's `l0 > len - 8` -> `l0 > len + 8`. */
static void test_rollup_block_with_overlong_column_is_corrupt(void **state) {
  (void)state;
  uint8_t mem[64] = {0}; /* zeros after the block's 12 bytes, as a reader past its end would find */
  mem[3] = 6;            /* l0 = 6 (big-endian): after it, the block has 4 bytes, not 6 + 4 */
  for (uint32_t n = 0; n < 3; n++) {
    struct rollup_acc a;
    memset(&a, 0, sizeof a);
    a.res = 1000000000LL;
    assert_int_equal(rollup_block_decode(mem, 12, n, &a), GS_ECORRUPT);
    rollup_done(&a);
  }
  struct rollup_acc a;
  memset(&a, 0, sizeof a);
  assert_int_equal(rollup_block_decode(mem, 7, 1, &a), GS_ECORRUPT);
  rollup_done(&a);
}

/* The write summary says nothing (0, "") when nothing failed, and otherwise the counts in words,
 * singular or plural. Kills store_write_summary's `buf[0] = 0` -> 1 and its first test's `!`
 * removed. */
static void test_write_summary_is_empty_without_failures_and_counts_them_otherwise(void **state) {
  (void)state;
  struct store st;
  memset(&st, 0, sizeof st);
  char buf[512];
  memset(buf, 'x', sizeof buf);
  assert_int_equal(store_write_summary(&st, buf, sizeof buf), 0);
  assert_string_equal(buf, "");
  snprintf(st.stats.first_error, sizeof st.stats.first_error, "disk full");
  st.stats.failed_appends = 1;
  assert_int_equal(store_write_summary(&st, buf, sizeof buf), 1);
  assert_string_equal(buf, "1 write to the store failed and was retried, nothing was lost: disk full");
  st.stats.failed_appends = 3;
  st.stats.points_dropped = 5;
  st.stats.events_dropped = 1;
  assert_int_equal(store_write_summary(&st, buf, sizeof buf), 1);
  assert_string_equal(buf, "the store did not keep 5 samples and 1 event, param or note (3 failed writes): disk full");
  snprintf(st.stats.kept_elsewhere, sizeof st.stats.kept_elsewhere, "the run is kept in the spool /tmp/s.db");
  assert_int_equal(store_write_summary(&st, buf, sizeof buf), 1); /* kept, but samples lost: the loss */
  assert_non_null(strstr(buf, "did not keep 5 samples"));
  st.stats.points_dropped = st.stats.events_dropped = 0;
  assert_int_equal(store_write_summary(&st, buf, sizeof buf), 1); /* kept, nothing lost: where */
  assert_string_equal(buf, "the run is kept in the spool /tmp/s.db");
  memset(&st.stats, 0, sizeof st.stats);
  snprintf(st.stats.kept_elsewhere, sizeof st.stats.kept_elsewhere, "kept in the spool");
  assert_int_equal(store_write_summary(&st, buf, sizeof buf), 1);
}

static char dir[256];
static char prefix[512];

static int setup(void **state) {
  (void)state;
  const char *url = getenv("GS_TEST_STORE_URL");
  if (url && *url) {
    snprintf(prefix, sizeof prefix, "%s", url);
    return 0;
  }
  snprintf(dir, sizeof dir, "/tmp/gs-test-store-mutants-XXXXXX");
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

static int on_sqlite(void) {
  return !strncmp(prefix, "sqlite://", 9);
}

static void url_of(char *url, size_t n, const char *name) {
  snprintf(url, n, "%s%s%s", prefix, name, on_sqlite() ? ".db" : "");
}

static struct store *open_db(const char *name) {
  char url[700];
  url_of(url, sizeof url, name);
  struct store *st = store_open(url);
  if (!st)
    fail_msg("cannot open %s: %s", url, gs_last_error());
  return st;
}

static void check_run_equal(const struct store_run *got, const struct store_run *want) {
  assert_string_equal(got->id, want->id);
  assert_string_equal(got->name, want->name);
  assert_string_equal(got->group, want->group);
  assert_string_equal(got->status, want->status);
  assert_string_equal(got->command, want->command);
  assert_string_equal(got->cwd, want->cwd);
  assert_string_equal(got->host, want->host);
  assert_string_equal(got->user, want->user);
  assert_string_equal(got->tags, want->tags);
  assert_int_equal(got->start_wall_ns, want->start_wall_ns);
  assert_int_equal(got->end_wall_ns, want->end_wall_ns);
  assert_int_equal(got->interval_ns, want->interval_ns);
  assert_int_equal(got->exit_code, want->exit_code);
  assert_int_equal(got->agent_pid, want->agent_pid);
}

/* A group of runs on two hosts reads as one run: its host names both, and its group.runs param
 * lists each run as ID@HOST. Kills store_group.c's host list starting at byte 1 or going back
 * (`hl += ...` -> `-=`), and the group.runs list's `len + 40 < sizeof list` -> `len - 40`. */
static void test_group_record_names_its_hosts_and_runs(void **state) {
  (void)state;
  struct store_run r[2];
  static const char *const hosts[] = {"node-a", "node-b"};
  for (int k = 0; k < 2; k++) {
    struct store *st = open_db("group");
    memset(&r[k], 0, sizeof r[k]);
    snprintf(r[k].name, sizeof r[k].name, "train");
    snprintf(r[k].group, sizeof r[k].group, "job7");
    snprintf(r[k].host, sizeof r[k].host, "%s", hosts[k]);
    r[k].agent_pid = getpid();
    r[k].start_wall_ns = gs_wall_ns() + k;
    r[k].mono_start_ns = 1000;
    assert_int_equal(st->run_begin(st, &r[k]), 0);
    snprintf(r[k].status, sizeof r[k].status, "finished");
    r[k].exit_code = 0;
    r[k].end_wall_ns = r[k].start_wall_ns + 10000000000LL;
    assert_int_equal(st->run_end(st, &r[k]), 0);
    st->close(st);
  }
  struct store *st = open_db("group");
  struct store *g = store_group_open(st, "job7");
  assert_non_null(g);
  struct store_run got;
  assert_int_equal(g->run_get(g, "job7", &got), 0);
  assert_string_equal(got.host, "node-a, node-b");
  assert_string_equal(got.status, "finished"); /* every run ended, none running */
  struct gs_kv *kv;
  size_t n;
  assert_int_equal(g->params_read(g, got.id, &kv, &n), 0);
  char want[200];
  snprintf(want, sizeof want, "%s@node-a,%s@node-b", r[0].id, r[1].id);
  int seen = 0;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(kv[i].key, "group.runs")) {
      assert_string_equal(kv[i].value, want);
      seen = 1;
    }
  assert_true(seen);
  store_kv_free(kv, n);
  g->close(g);
  st->close(st);
}

/* A bare path is an SQLite store; a URL names its back end by its scheme, and an unknown scheme is
 * refused with the forms it takes; closing NULL does nothing. Kills store_open_mode's `if (!sep)` ->
 * `if (0)`, the registry loop's `sizeof BACKENDS / sizeof *BACKENDS` -> `*`, and sq_close's
 * `if (!s) return` removed. */
static void test_store_opens_a_bare_path_and_refuses_an_unknown_scheme(void **state) {
  (void)state;
  char tmp[64] = "/tmp/gs-test-store-bare-XXXXXX", path[128], cmd[160];
  assert_non_null(mkdtemp(tmp));
  snprintf(path, sizeof path, "%s/bare.db", tmp);
  struct store *st = store_open(path);
  if (!st)
    fail_msg("%s: %s", path, gs_last_error());
  st->close(st);
  assert_null(store_open("mysql://db.example/gpuscope"));
  assert_non_null(strstr(gs_last_error(), "unsupported store URL 'mysql://db.example/gpuscope'"));
  assert_null(store_open(""));
  st = store_open(path);
  assert_non_null(st);
  void (*close_fn)(struct store *) = st->close;
  st->close(st);
  close_fn(NULL); /* closing NULL does nothing */
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
  assert_int_equal(system(cmd), 0);
}

/* The default store: $GPUSCOPE_STORE when set and not empty, else under $XDG_DATA_HOME when set and
 * not empty, else under $HOME. Kills store_default_url's `env && *env` and `xdg && *xdg` mutants. */
static void test_store_default_url_follows_the_environment(void **state) {
  (void)state;
  char buf[256], home[512] = "";
  const char *h = getenv("HOME");
  int had_home = h != NULL;
  if (h)
    snprintf(home, sizeof home, "%s", h);
  setenv("HOME", "/home/ada", 1);
  setenv("GPUSCOPE_STORE", "", 1);
  setenv("XDG_DATA_HOME", "", 1);
  assert_string_equal(store_default_url(buf, sizeof buf), "sqlite:///home/ada/.local/share/gpuscope/gpuscope.db");
  unsetenv("GPUSCOPE_STORE");
  unsetenv("XDG_DATA_HOME");
  assert_string_equal(store_default_url(buf, sizeof buf), "sqlite:///home/ada/.local/share/gpuscope/gpuscope.db");
  setenv("XDG_DATA_HOME", "/data", 1);
  assert_string_equal(store_default_url(buf, sizeof buf), "sqlite:///data/gpuscope/gpuscope.db");
  setenv("GPUSCOPE_STORE", "postgresql://db/gs", 1);
  assert_string_equal(store_default_url(buf, sizeof buf), "postgresql://db/gs");
  unsetenv("GPUSCOPE_STORE");
  unsetenv("XDG_DATA_HOME");
  if (had_home) /* the later tests' libpq reads HOME (its .pgpass) */
    setenv("HOME", home, 1);
  else
    unsetenv("HOME");
}

/* Every field of a run's record reads back as written, by run_get and by runs_list, while it runs
 * (exit code unknown: -1) and once ended. Kills pg_read.c's read_run reading another column (5 for
 * the folder, 12 for the exit code). */
static void test_store_run_record_reads_back_field_by_field(void **state) {
  (void)state;
  struct store *st = open_db("record");
  struct store_run r, got;
  memset(&r, 0, sizeof r);
  snprintf(r.name, sizeof r.name, "resnet");
  snprintf(r.group, sizeof r.group, "job42");
  snprintf(r.command, sizeof r.command, "python train.py --lr 0.1");
  snprintf(r.cwd, sizeof r.cwd, "/home/ada/exp");
  gethostname(r.host, sizeof r.host - 1);
  snprintf(r.user, sizeof r.user, "ada");
  snprintf(r.tags, sizeof r.tags, "team=vision,try=3");
  r.agent_pid = getpid();
  r.exit_code = -1;
  r.start_wall_ns = gs_wall_ns();
  r.mono_start_ns = 1000;
  r.interval_ns = 250000000;
  assert_int_equal(st->run_begin(st, &r), 0);
  snprintf(r.status, sizeof r.status, "running");
  assert_int_equal(st->run_get(st, r.id, &got), 0);
  check_run_equal(&got, &r);

  r.exit_code = 3;
  r.end_wall_ns = r.start_wall_ns + 7000000000LL;
  snprintf(r.status, sizeof r.status, "failed");
  assert_int_equal(st->run_end(st, &r), 0);
  assert_int_equal(st->run_get(st, r.id, &got), 0);
  check_run_equal(&got, &r);
  struct store_run *runs = NULL;
  size_t n = 0;
  assert_int_equal(st->runs_list(st, &runs, &n), 0);
  assert_int_equal(n, 1);
  check_run_equal(&runs[0], &r);
  free(runs);
  st->close(st);
}

/* A run's events (every field, a missing value as NaN), params (a later value replaces) and notes
 * read back as written, events in time order. Kills pg_read.c's events read taking the time from
 * another column (`pg_i64(res, i, 0)` -> 1). */
static void test_store_events_params_and_notes_read_back_field_by_field(void **state) {
  (void)state;
  struct store *st = open_db("events");
  struct store_run r;
  memset(&r, 0, sizeof r);
  snprintf(r.name, sizeof r.name, "ev");
  r.agent_pid = getpid();
  r.exit_code = -1;
  r.start_wall_ns = gs_wall_ns();
  r.mono_start_ns = 1000;
  assert_int_equal(st->run_begin(st, &r), 0);
  struct gs_sink *s = gs_sink_new();
  gs_sink_event(s, 1000 + 2500000000LL, "throttle_start", "hw_slowdown", 87.5, "gpu=1", "power cap");
  gs_sink_event(s, 1000 + 4000000000LL, "mark", "epoch", NAN, "", "");
  gs_sink_param(s, "lr", "0.1");
  gs_sink_param(s, "batch", "64");
  gs_sink_note(s, "gpu%d: fan speed not supported", 0);
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  gs_sink_param(s, "lr", "0.05");
  b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  snprintf(r.status, sizeof r.status, "finished");
  r.exit_code = 0;
  r.end_wall_ns = r.start_wall_ns + 5000000000LL;
  assert_int_equal(st->run_end(st, &r), 0);

  struct store_event *ev;
  size_t n;
  assert_int_equal(st->events_read(st, r.id, &ev, &n), 0);
  assert_int_equal(n, 2);
  assert_int_equal(ev[0].t, 2500000000LL);
  assert_string_equal(ev[0].kind, "throttle_start");
  assert_string_equal(ev[0].name, "hw_slowdown");
  assert_true(ev[0].value == 87.5);
  assert_string_equal(ev[0].labels, "gpu=1");
  assert_string_equal(ev[0].text, "power cap");
  assert_int_equal(ev[1].t, 4000000000LL);
  assert_string_equal(ev[1].kind, "mark");
  assert_true(isnan(ev[1].value));
  free(ev);
  struct gs_kv *kv;
  assert_int_equal(st->params_read(st, r.id, &kv, &n), 0);
  assert_int_equal(n, 2);
  int seen = 0;
  for (size_t i = 0; i < n; i++) {
    if (!strcmp(kv[i].key, "lr"))
      assert_string_equal(kv[i].value, "0.05"), seen |= 1;
    else if (!strcmp(kv[i].key, "batch"))
      assert_string_equal(kv[i].value, "64"), seen |= 2;
  }
  assert_int_equal(seen, 3);
  store_kv_free(kv, n);
  char **notes;
  assert_int_equal(st->notes_read(st, r.id, &notes, &n), 0);
  assert_int_equal(n, 1);
  assert_string_equal(notes[0], "gpu0: fan speed not supported");
  store_notes_free(notes, n);
  gs_sink_free(s);
  st->close(st);
}

/* Runs sql on the store called name behind the store's back (its own SQLite file or PostgreSQL
 * database). */
static void exec_behind(const char *name, const char *sql) {
  char url[700];
  url_of(url, sizeof url, name);
  if (on_sqlite()) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(url + strlen("sqlite://"), &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    return;
  }
  PGconn *c = PQconnectdb(url);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  PGresult *res = PQexec(c, sql);
  if (PQresultStatus(res) != PGRES_COMMAND_OK)
    fail_msg("%s: %s", sql, PQerrorMessage(c));
  PQclear(res);
  PQfinish(c);
}

static long long pg_count(const char *name, const char *sql);

/* The one integer sql answers on the store called name, read behind the store's back. */
static long long behind_int(const char *name, const char *sql) {
  if (!on_sqlite())
    return pg_count(name, sql);
  char url[700];
  url_of(url, sizeof url, name);
  sqlite3 *db;
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_open(url + strlen("sqlite://"), &db), SQLITE_OK);
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  long long v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return v;
}

/* Begins run r on st: this process its agent, started now, its clock at 1000 ns. */
static void begin_run(struct store *st, struct store_run *r) {
  memset(r, 0, sizeof *r);
  r->agent_pid = getpid();
  r->start_wall_ns = gs_wall_ns();
  r->mono_start_ns = 1000;
  assert_int_equal(st->run_begin(st, r), 0);
}

/* A store_log_fn that counts the chunks. */
static int count_chunk(void *u, const struct store_log_chunk *c) {
  (void)c;
  ++*(int *)u;
  return 0;
}

/* Missing is not zero: a read whose query fails (its table gone, renamed behind the store's back) is
 * an error, never an empty answer, nor rollups computed afresh as if none were stored. Kills
 * pg_read.c's `if (!res) return GS_EIO` -> skipped in the runs list (line 62) and in the rollup
 * blocks' read (line 240), and sqlite_log.c's "an old store has no logs table" test widened to a
 * store of today (`&&` -> `||`, line 75). */
static void test_store_a_failed_read_is_an_error_not_an_empty_answer(void **state) {
  (void)state;
  int nchunks = 0;
  struct store *st = open_db("gone");
  struct store_run r;
  begin_run(st, &r);
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  for (int i = 0; i < 1200; i++) /* 10 Hz for 2 min: the 10 s level is stored at the run's end */
    gs_sink_put(s, id, 1000 + i * 100000000LL, i % 100);
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  gs_sink_free(s);
  snprintf(r.status, sizeof r.status, "finished");
  r.end_wall_ns = r.start_wall_ns + 120000000000LL;
  assert_int_equal(st->run_end(st, &r), 0);
  struct store_series *ser = NULL;
  size_t nser = 0;
  assert_int_equal(st->series_list(st, r.id, &ser, &nser), 0);
  assert_int_equal(nser, 1);
  int64_t *t = NULL;
  double *mn = NULL, *mx = NULL, *mean = NULL;
  size_t n = 0;
  assert_int_equal(st->rollups_read(st, ser[0].id, 10000000000LL, &t, &mn, &mx, &mean, &n), 0);
  assert_true(n >= 12);
  free(t), free(mn), free(mx), free(mean);
  exec_behind("gone", on_sqlite() ? "ALTER TABLE rollups RENAME TO rollups_gone"
                                  : "ALTER TABLE rollup_blocks RENAME TO rollup_blocks_gone");
  assert_int_not_equal(st->rollups_read(st, ser[0].id, 10000000000LL, &t, &mn, &mx, &mean, &n), 0);
  static const uint8_t out[] = "step 1\n";
  struct store_log_chunk c = {.seq = 0, .t = 5, .stream = "out", .data = out, .len = sizeof out - 1};
  assert_int_equal(st->log_append(st, &r, &c, 1, 0), 0);
  exec_behind("gone", "ALTER TABLE logs RENAME TO logs_gone");
  assert_int_not_equal(st->log_read(st, r.id, 0, count_chunk, &nchunks), 0);
  exec_behind("gone", "ALTER TABLE runs RENAME TO runs_gone");
  struct store_run *runs = NULL;
  size_t nruns = 0;
  assert_int_not_equal(st->runs_list(st, &runs, &nruns), 0);
  free(ser);
  st->close(st);
}

/* A run of one series at 100 Hz for 30 s (its 1 s level is worth storing) and a note, begun 5 s ago
 * on the monotonic clock, appended and ended on st. */
static void run_of_100hz(struct store *st, struct store_run *r) {
  memset(r, 0, sizeof *r);
  r->agent_pid = getpid();
  r->start_wall_ns = gs_wall_ns();
  r->mono_start_ns = gs_mono_ns() - 5 * GS_NS_PER_S;
  assert_int_equal(st->run_begin(st, r), 0);
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  for (int i = 0; i < 3000; i++)
    gs_sink_put(s, id, r->mono_start_ns + i * 10000000LL, i % 100);
  gs_sink_note(s, "a note");
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, r, b), 0);
  gs_batch_free(b);
  gs_sink_free(s);
}

/* A note's time is the time since its run began, and the finest rollup level (1 s) is stored when
 * its buckets are full enough, as the coarser ones (the reads would compute it again, so only the
 * tables tell). Kills pg_write.c's note time `gs_mono_ns() - r->mono_start_ns` -> `+` (line 222) and
 * write_series_rollups' levels loop from 1 (368). */
static void test_store_note_times_and_the_finest_rollups_are_stored(void **state) {
  (void)state;
  struct store *st = open_db("fine");
  struct store_run r;
  run_of_100hz(st, &r);
  snprintf(r.status, sizeof r.status, "finished");
  r.end_wall_ns = r.start_wall_ns + 30 * GS_NS_PER_S;
  assert_int_equal(st->run_end(st, &r), 0);
  long long t = behind_int("fine", "SELECT t FROM notes WHERE text = 'a note'");
  if (t < 5 * GS_NS_PER_S || t > 600 * GS_NS_PER_S)
    fail_msg("the note's time since the run began: %lld ns (it began 5 s before the note)", t);
  assert_true(behind_int("fine", on_sqlite() ? "SELECT count(*) FROM rollups WHERE res_ns = 1000000000"
                                             : "SELECT count(*) FROM rollup_blocks WHERE res_ns = 1000000000") > 0);
  st->close(st);
}

/* An edit of a run the store does not hold is GS_ENOENT, and changes nothing. Kills sqlite_meta.c's
 * note `if (!(rc = run_stmt(...)))` -> `if ((rc = ...))` (line 94: the insert of no row taken as
 * done). */
static void test_store_edits_of_an_unknown_run_are_not_found(void **state) {
  (void)state;
  struct store *st = open_db("unknown");
  struct store_run r;
  memset(&r, 0, sizeof r);
  r.agent_pid = getpid();
  r.start_wall_ns = gs_wall_ns();
  assert_int_equal(st->run_begin(st, &r), 0);
  assert_int_equal(st->run_add_note(st, "01nosuchrun", "a note"), GS_ENOENT);
  assert_int_equal(st->run_set_tags(st, "01nosuchrun", "k=v"), GS_ENOENT);
  assert_int_equal(st->run_rename(st, "01nosuchrun", "n"), GS_ENOENT);
  assert_int_equal(st->run_delete(st, "01nosuchrun"), GS_ENOENT);
  assert_int_equal(behind_int("unknown", "SELECT count(*) FROM notes"), 0);
  st->close(st);
}

/* A run whose agent is gone is settled as crashed by the first reader that may write, in the store
 * itself (so every later reader, read-only ones too, reads it crashed), and left as it is by a
 * read-only one. Kills sqlite_read.c's UPDATE prepared with length `-1` -> `-0` (line 58: an empty
 * statement, nothing written). */
static void test_store_a_dead_agents_run_is_recorded_crashed(void **state) {
  (void)state;
  struct store *st = open_db("dead");
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
  st->close(st);
  char url[700];
  url_of(url, sizeof url, "dead");
  st = store_open_mode(url, STORE_READ);
  assert_int_equal(st->run_get(st, r.id, &got), 0);
  assert_string_equal(got.status, "crashed");
  st->close(st);
  assert_int_equal(behind_int("dead", "SELECT count(*) FROM runs WHERE status = 'running'"), 1);
  st = open_db("dead");
  assert_int_equal(st->run_get(st, r.id, &got), 0);
  assert_string_equal(got.status, "crashed");
  st->close(st);
  assert_int_equal(behind_int("dead", "SELECT count(*) FROM runs WHERE status = 'crashed'"), 1);
}

/* A run's series read back field by field: two of one name told apart by their labels, each with its
 * source, unit, kind and its own points. Kills sqlite_write.c's labels bound with length `-1` -> `-0`
 * (line 144: every series stored without labels, the two taken for one). */
static void test_store_series_read_back_field_by_field(void **state) {
  (void)state;
  struct store *st = open_db("series");
  struct store_run r;
  begin_run(st, &r);
  struct gs_sink *s = gs_sink_new();
  int a = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  int b = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=1", "%", GS_GAUGE);
  int c = gs_sink_series(s, "host", "net.rx_bytes", "dev=eth0", "B", GS_COUNTER);
  for (int i = 0; i < 5; i++) {
    gs_sink_put(s, a, 1000 + i * 100000000LL, 10);
    gs_sink_put(s, b, 1000 + i * 100000000LL, 90);
  }
  gs_sink_put(s, c, 1000, 4096);
  struct gs_batch *bt = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, bt), 0);
  gs_batch_free(bt);
  gs_sink_free(s);
  struct store_series *ser = NULL;
  size_t n = 0;
  assert_int_equal(st->series_list(st, r.id, &ser, &n), 0);
  assert_int_equal(n, 3);
  int seen = 0;
  for (size_t i = 0; i < n; i++) {
    if (!strcmp(ser[i].labels, "gpu=0") || !strcmp(ser[i].labels, "gpu=1")) {
      assert_string_equal(ser[i].source, "nvml");
      assert_string_equal(ser[i].name, "gpu.util_pct");
      assert_string_equal(ser[i].unit, "%");
      assert_int_equal(ser[i].kind, GS_GAUGE);
      assert_int_equal(ser[i].count, 5);
      int64_t *t = NULL;
      double *v = NULL;
      size_t np = 0;
      assert_int_equal(store_samples_load(st, ser[i].id, &t, &v, &np), 0);
      assert_int_equal(np, 5);
      assert_true(v[4] == (ser[i].labels[4] == '0' ? 10 : 90));
      free(t), free(v);
      seen |= ser[i].labels[4] == '0' ? 1 : 2;
    } else {
      assert_string_equal(ser[i].labels, "dev=eth0");
      assert_string_equal(ser[i].source, "host");
      assert_string_equal(ser[i].unit, "B");
      assert_int_equal(ser[i].kind, GS_COUNTER);
      seen |= 4;
    }
  }
  assert_int_equal(seen, 7);
  free(ser);
  st->close(st);
}

/* Every append records the agent's heartbeat on its run (what tells a live agent on another host
 * from a dead one). Kills sqlite_write.c's heartbeat bind of the run id at parameter 3 instead of
 * 2 (the UPDATE matching no run). */
static void test_store_append_records_the_heartbeat(void **state) {
  (void)state;
  struct store *st = open_db("heartbeat");
  struct store_run r;
  memset(&r, 0, sizeof r);
  r.agent_pid = getpid();
  r.start_wall_ns = gs_wall_ns() - 60000000000LL; /* began a minute ago */
  r.mono_start_ns = 1000;
  assert_int_equal(st->run_begin(st, &r), 0);
  char sql[200];
  snprintf(sql, sizeof sql, "SELECT coalesce(heartbeat_wall_ns, 0) FROM runs WHERE id = '%s'", r.id);
  long long before = behind_int("heartbeat", sql);
  int64_t t0 = gs_wall_ns();
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "host", "v", "", "", GS_GAUGE);
  gs_sink_put(s, id, 2000, 1);
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  gs_sink_free(s);
  long long after = behind_int("heartbeat", sql);
  if (!(after >= t0 && after > before))
    fail_msg("heartbeat %lld before the append, %lld after it (appended at %lld)", before, after, (long long)t0);
  st->close(st);
}

/* A run of an agent on another host with a fresh heartbeat is running, not crashed (its pid means
 * nothing here), and so is a live agent's on this host. Kills store_settle_crashed's `int dead = 0`
 * -> 1 and `kill(r->agent_pid, 0) != 0` -> `!= 1` (a stale errno then taken for the agent gone). */
static void test_store_live_run_of_another_host_is_running(void **state) {
  (void)state;
  struct store *st = open_db("otherhost");
  struct store_run r, got;
  memset(&r, 0, sizeof r);
  snprintf(r.host, sizeof r.host, "another-node-of-the-job");
  r.agent_pid = 1; /* alive here, but not that agent */
  r.start_wall_ns = gs_wall_ns();
  r.mono_start_ns = 1000;
  assert_int_equal(st->run_begin(st, &r), 0);
  assert_int_equal(st->run_get(st, r.id, &got), 0);
  assert_string_equal(got.status, "running");
  struct store_run mine;
  memset(&mine, 0, sizeof mine); /* and one of this host's live agents (this process), whatever errno says */
  gethostname(mine.host, sizeof mine.host - 1);
  mine.agent_pid = getpid();
  mine.start_wall_ns = gs_wall_ns();
  mine.mono_start_ns = 1000;
  assert_int_equal(st->run_begin(st, &mine), 0);
  errno = ESRCH; /* left by an earlier call: only kill()'s own failure may say the agent is gone */
  assert_int_equal(st->run_get(st, mine.id, &got), 0);
  assert_string_equal(got.status, "running");
  /* A pid is asked only on its own host and boot: another host's agent whose pid is free here, and
   * this host's agent of an earlier boot, are judged by their heartbeat alone (fresh: running). Kills
   * store_settle_crashed's `!strcmp(host, r->host) && !strcmp(boot, run_boot) && r->agent_pid > 0`
   * with either `&&` -> `||` (store_util.c:216). */
  pid_t child = fork();
  if (child == 0)
    _exit(0);
  waitpid(child, NULL, 0);
  struct store_run far, old;
  memset(&far, 0, sizeof far);
  snprintf(far.host, sizeof far.host, "another-node-of-the-job");
  far.agent_pid = child;
  far.start_wall_ns = gs_wall_ns();
  assert_int_equal(st->run_begin(st, &far), 0);
  memset(&old, 0, sizeof old);
  gethostname(old.host, sizeof old.host - 1);
  old.agent_pid = child;
  old.start_wall_ns = gs_wall_ns();
  assert_int_equal(st->run_begin(st, &old), 0);
  char sql[200];
  snprintf(sql, sizeof sql, "UPDATE runs SET boot_id = 'an-earlier-boot' WHERE id = '%s'", old.id);
  exec_behind("otherhost", sql);
  assert_int_equal(st->run_get(st, far.id, &got), 0);
  assert_string_equal(got.status, "running");
  assert_int_equal(st->run_get(st, old.id, &got), 0);
  assert_string_equal(got.status, "running");
  st->close(st);
}

/* A series only moves forward: a point at or before the last one stored (a replay, a batch sent
 * twice) is skipped, so each time is stored once. Kills the writer's `if (x->enc.n && t <=
 * x->enc.t_prev)` -> `if (0)`. */
static void test_store_points_at_or_before_the_last_are_stored_once(void **state) {
  (void)state;
  struct store *st = open_db("forward");
  struct store_run r;
  begin_run(st, &r);
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "host", "v", "", "", GS_GAUGE);
  static const int64_t ts[][3] = {{1, 2, 3}, {3, 2, 4}};
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 3; i++)
      gs_sink_put(s, id, 1000 + ts[k][i] * 1000000000LL, (double)ts[k][i]);
    struct gs_batch *b = gs_sink_take(s);
    assert_int_equal(st->run_append(st, &r, b), 0);
    gs_batch_free(b);
  }
  gs_sink_free(s);
  snprintf(r.status, sizeof r.status, "finished");
  r.exit_code = 0;
  r.end_wall_ns = r.start_wall_ns + 5000000000LL;
  assert_int_equal(st->run_end(st, &r), 0);
  struct store_series *ser;
  size_t n;
  assert_int_equal(st->series_list(st, r.id, &ser, &n), 0);
  assert_int_equal(n, 1);
  int64_t *t;
  double *v;
  size_t np;
  assert_int_equal(store_samples_load(st, ser[0].id, &t, &v, &np), 0);
  assert_int_equal(np, 4);
  for (size_t i = 0; i < np; i++)
    assert_true(t[i] == (int64_t)(i + 1) * 1000000000LL && v[i] == (double)(i + 1));
  free(t), free(v), free(ser);
  st->close(st);
}

/* A chunk whose bytes are not a chunk is an error on every back end (GS_ECORRUPT), never samples
 * made up or a short read taken for the whole series. Kills pg_read.c's `if (d < 0)` -> `if (0)`
 * (the decode error dropped). */
static void test_store_corrupt_chunk_is_an_error_on_every_back_end(void **state) {
  (void)state;
  struct store *st = open_db("corrupt");
  struct store_run r;
  begin_run(st, &r);
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "host", "v", "", "", GS_GAUGE);
  for (int i = 0; i < 50; i++)
    gs_sink_put(s, id, 1000 + i * 1000000000LL, i * 0.1);
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  gs_sink_free(s);
  snprintf(r.status, sizeof r.status, "finished");
  r.exit_code = 0;
  r.end_wall_ns = r.start_wall_ns + 50000000000LL;
  assert_int_equal(st->run_end(st, &r), 0);
  st->close(st);
  if (on_sqlite())
    exec_behind("corrupt", "UPDATE chunks SET data = x'00', n = 50");
  else
    exec_behind("corrupt", "UPDATE chunks SET data = '\\x00'::bytea, n = 50; "
                           "UPDATE open_chunks SET data = '\\x00'::bytea, n = 50");
  st = open_db("corrupt");
  struct store_series *ser;
  size_t n;
  assert_int_equal(st->series_list(st, r.id, &ser, &n), 0);
  assert_int_equal(n, 1);
  int64_t *t;
  double *v;
  size_t np;
  assert_int_equal(store_samples_load(st, ser[0].id, &t, &v, &np), GS_ECORRUPT);
  free(ser);
  st->close(st);
}

/* Runs sql, which fails, and returns its error result. */
static PGresult *failing(PGconn *c, const char *sql) {
  PGresult *res = PQexec(c, sql);
  assert_int_equal(PQresultStatus(res), PGRES_FATAL_ERROR);
  return res;
}

/* PostgreSQL only: the server's errors are named by their first line; a lock or serialization
 * failure (SQLSTATE 40001, 40P01, 55P03) is GS_EBUSY, another error GS_EIO; a result without a
 * message takes the connection's (and without one either, it is an "unknown error"); a lost
 * connection marks the store down and says "unreachable". Kills pg_fail's `||` -> `&&` in the busy
 * states and in the empty-message test, `msg && *msg` -> `||`, and `s->down = 1` -> 0. */
static void test_pg_errors_name_the_cause_and_tell_busy_from_failed(void **state) {
  (void)state;
  struct store *st = open_db("errors"); /* makes the database */
  st->close(st);
  char url[700];
  url_of(url, sizeof url, "errors");
  PGconn *c = PQconnectdb(url);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  struct pg_store *s = calloc(1, sizeof *s);
  s->conn = c;
  s->connect = pg_connect; /* as store_pg.c's open sets it: a reader reconnects through it */
  snprintf(s->name, sizeof s->name, "pgtest");
  static const char *const busy[] = {"40001", "40P01", "55P03"};
  for (size_t i = 0; i < sizeof busy / sizeof *busy; i++) {
    char sql[200];
    snprintf(sql, sizeof sql, "DO $$ BEGIN RAISE EXCEPTION 'held up' USING ERRCODE = '%s'; END $$", busy[i]);
    PGresult *res = failing(c, sql);
    assert_int_equal(pg_fail(s, res, "writing"), GS_EBUSY);
    PQclear(res);
    assert_non_null(strstr(gs_last_error(), "store pgtest: writing: "));
    assert_non_null(strstr(gs_last_error(), "held up"));
  }
  PGresult *res = failing(c, "DO $$ BEGIN RAISE EXCEPTION 'taken' USING ERRCODE = '23505'; END $$");
  assert_int_equal(pg_fail(s, res, "writing"), GS_EIO);
  PQclear(res);
  assert_int_equal(pg_exec(s, "SELECT 1", "reading"), GS_OK);
  assert_int_equal(pg_exec(s, "SELECT 1/0", "dividing"), GS_EIO);
  assert_non_null(strstr(gs_last_error(), "division by zero"));
  assert_null(strchr(gs_last_error(), '\n'));
  res = PQmakeEmptyPGresult(NULL, PGRES_FATAL_ERROR); /* no message of its own: the connection's */
  assert_int_equal(pg_fail(s, res, "again"), GS_EIO);
  PQclear(res);
  assert_non_null(strstr(gs_last_error(), "store pgtest: again: "));
  assert_non_null(strstr(gs_last_error(), "division by zero"));
  assert_int_equal(s->down, 0);
  PQfinish(c);
  s->conn = c = PQconnectdb(url); /* a fresh connection, no error of its own: "unknown error" */
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  res = PQmakeEmptyPGresult(NULL, PGRES_FATAL_ERROR);
  assert_int_equal(pg_fail(s, res, "again"), GS_EIO);
  PQclear(res);
  assert_non_null(strstr(gs_last_error(), "store pgtest: again: unknown error"));
  PQfinish(c);
  s->conn = NULL;
  assert_int_equal(pg_exec(s, "SELECT 1", "reading"), GS_EIO);
  assert_non_null(strstr(gs_last_error(), "unreachable"));
  assert_int_equal(s->down, 1);
  if (s->conn) /* a reader tries to connect again (pg_util.c): what it made is the test's to close */
    PQfinish(s->conn);
  free(s);
}

/* A pg_store on a fresh connection to the database called name, as store_pg.c's open makes a
 * writer's: non-blocking, every answer waited for until timeout_ms (free with drop_store). */
static struct pg_store *store_on(const char *name, long long timeout_ms) {
  struct pg_store *s = calloc(1, sizeof *s);
  url_of(s->url, sizeof s->url, name);
  snprintf(s->name, sizeof s->name, "pgtest");
  s->connect = pg_connect;
  s->mode = STORE_WRITE;
  s->timeout_ns = timeout_ms * 1000000LL;
  s->conn = PQconnectdb(s->url);
  assert_int_equal(PQstatus(s->conn), CONNECTION_OK);
  assert_int_equal(PQsetnonblocking(s->conn, 1), 0);
  return s;
}

static void drop_store(struct pg_store *s) {
  if (s->conn)
    PQfinish(s->conn);
  free(s);
}

/* PostgreSQL only: a server that does not answer within the store's timeout (here a statement that
 * sleeps past it) is dropped, and the store says why then and at its next statement; a prepared
 * statement is held to the same deadline. Kills pg_util.c's `if (left <= 0)` -> never (line 88: the
 * wait goes on until the answer), `if (why)` -> never (48: the next statement's "unreachable" without
 * the reason) and pg_run's and pg_run_prepared's `!s->timeout_ns` -> `s->timeout_ns` (158, 167: a
 * blocking call without a deadline). The timeout is 1.5 s, which a loaded machine's silence does not
 * reach; the statements sleep 8 s. */
static void test_pg_a_server_that_does_not_answer_in_time_is_dropped(void **state) {
  (void)state;
  struct store *st = open_db("slow"); /* makes the database */
  st->close(st);
  struct pg_store *s = store_on("slow", 1500);
  assert_int_equal(pg_exec(s, "SELECT 1", "reading"), GS_OK);
  assert_int_equal(pg_exec(s, "SELECT pg_sleep(8)", "sleeping"), GS_EIO);
  assert_non_null(strstr(gs_last_error(), "no answer from the server in 1.5 s"));
  assert_true(pg_conn_lost(s));
  assert_int_equal(s->down, 1);
  assert_int_equal(pg_exec(s, "SELECT 1", "again"), GS_EIO);
  assert_non_null(strstr(gs_last_error(), "unreachable (no answer from the server in 1.5 s"));
  drop_store(s);
  s = store_on("slow", 1500);
  PGresult *res = pg_run_prepare(s, "nap", "SELECT pg_sleep(8)");
  assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
  PQclear(res);
  assert_null(pg_run_prepared(s, "nap", 0, NULL, NULL, NULL));
  assert_true(pg_conn_lost(s));
  drop_store(s);
}

/* PostgreSQL only: the errors that mean the connection is gone (SQLSTATE class 08, and the
 * server's shutdowns 57P01-57P03) drop it and mark the store down, though libpq still calls the
 * socket fine; and a healthy connection is kept by a reconnection. Kills conn_broken's `||` -> `&&`
 * among the four (pg_util.c:68) and pg_reconnect's `if (!s->down && !pg_conn_lost(s))` -> never
 * (279: a new connection each time). */
static void test_pg_shutdown_errors_mark_the_store_down_and_a_live_one_is_kept(void **state) {
  (void)state;
  struct store *st = open_db("shutdown");
  st->close(st);
  static const char *const gone[] = {"08006", "57P01", "57P02", "57P03"};
  for (size_t i = 0; i < sizeof gone / sizeof *gone; i++) {
    struct pg_store *s = store_on("shutdown", 5000);
    char sql[200];
    snprintf(sql, sizeof sql, "DO $$ BEGIN RAISE EXCEPTION 'going away' USING ERRCODE = '%s'; END $$", gone[i]);
    PGresult *res = failing(s->conn, sql);
    assert_int_equal(pg_fail(s, res, "writing"), GS_EIO);
    PQclear(res);
    if (!s->down || !strstr(gs_last_error(), "unreachable (") || !strstr(gs_last_error(), "going away"))
      fail_msg("SQLSTATE %s: down %d, '%s'", gone[i], s->down, gs_last_error());
    assert_true(pg_conn_lost(s));
    drop_store(s);
  }
  struct pg_store *s = store_on("shutdown", 5000);
  int pid = PQbackendPID(s->conn);
  assert_int_equal(pg_reconnect(s, 1), GS_OK);
  assert_int_equal(PQbackendPID(s->conn), pid);
  drop_store(s);
}

/* PostgreSQL only: a run's end that the server refuses part of (a constraint added behind the store's
 * back) is an error, not an end that looks whole; a second end writes the rollups again in place.
 * Kills pg_write.c's seal `if (!r) return GS_EIO` -> skipped (line 403), copy_in's `if
 * (PQresultStatus(res) != PGRES_COMMAND_OK)` -> never (324: a refused COPY taken as written) and the
 * rollups' DELETE skipped by `!rc && (res = ...)` -> `||` (349: the old blocks kept beside the new). */
static void test_pg_a_refused_run_end_is_an_error_and_a_second_end_replaces(void **state) {
  (void)state;
  struct store *st = open_db("refused");
  struct store_run r;
  run_of_100hz(st, &r);
  snprintf(r.status, sizeof r.status, "finished");
  r.end_wall_ns = r.start_wall_ns + 30 * GS_NS_PER_S;
  exec_behind("refused", "ALTER TABLE chunks ADD CONSTRAINT refuse CHECK (false) NOT VALID");
  assert_int_not_equal(st->run_end(st, &r), 0);
  assert_true(pg_count("refused", "SELECT count(*) FROM open_chunks") > 0);
  exec_behind("refused", "ALTER TABLE chunks DROP CONSTRAINT refuse");
  exec_behind("refused", "ALTER TABLE rollup_blocks ADD CONSTRAINT refuse CHECK (false) NOT VALID");
  assert_int_not_equal(st->run_end(st, &r), 0);
  assert_int_equal(pg_count("refused", "SELECT count(*) FROM rollup_blocks"), 0);
  exec_behind("refused", "ALTER TABLE rollup_blocks DROP CONSTRAINT refuse");
  assert_int_equal(st->run_end(st, &r), 0);
  long long blocks = pg_count("refused", "SELECT count(*) FROM rollup_blocks");
  assert_true(blocks > 0);
  assert_int_equal(st->run_end(st, &r), 0);
  assert_int_equal(pg_count("refused", "SELECT count(*) FROM rollup_blocks"), blocks);
  assert_int_equal(pg_count("refused", "SELECT count(*) FROM open_chunks"), 0);
  st->close(st);
}

/* PostgreSQL only: agents that start at once on a server without their database all open it (one
 * creates it; the others' CREATE DATABASE fails with 42P04, or 23505 when both ran together, and is
 * taken as done); and a URL that names no database uses the user's name, as libpq does. Kills
 * create_database's `(!strcmp(state, "42P04") || !strcmp(state, "23505"))` -> `&&` (store_pg.c:143:
 * one agent of those that start together fails) and url_dbname's user fallback removed (118). */
static void test_pg_agents_starting_at_once_all_open_their_new_database(void **state) {
  (void)state;
  for (int round = 0; round < 3; round++) {
    char name[32], url[700];
    snprintf(name, sizeof name, "together%d", round);
    url_of(url, sizeof url, name);
    pid_t kids[6];
    for (int i = 0; i < 6; i++)
      if ((kids[i] = fork()) == 0) {
        struct store *st = store_open_mode(url, STORE_WRITE);
        _exit(st ? (st->close(st), 0) : 1);
      }
    int failed = 0;
    for (int i = 0; i < 6; i++) {
      int status;
      waitpid(kids[i], &status, 0);
      failed += !WIFEXITED(status) || WEXITSTATUS(status);
    }
    if (failed)
      fail_msg("%d of 6 agents starting at once could not open %s", failed, url);
  }
  char url[700];
  url_of(url, sizeof url, "x");
  char *slash = strrchr(url, '/');
  *slash = 0; /* postgresql://USER@HOST:PORT: the database is the user's name */
  struct store *st = store_open_mode(url, STORE_WRITE);
  if (!st)
    fail_msg("%s: %s", url, gs_last_error());
  st->close(st);
}

/* PostgreSQL only: a server nobody listens for is said in one line: libpq's first line, without its
 * hint lines or any control character. Kills pg_connect's `one[strcspn(one, "\n")] = 0` -> `= 1`
 * (store_pg.c:368: the newline made a \x01 and the hint kept). */
static void test_pg_an_unreachable_server_is_said_in_one_line(void **state) {
  (void)state;
  assert_null(store_open_mode("postgresql://gs@127.0.0.1:1/gone?connect_timeout=5", STORE_READ));
  const char *msg = gs_last_error();
  assert_non_null(strstr(msg, "cannot reach store"));
  for (const char *c = msg; *c; c++)
    if ((unsigned char)*c < 0x20)
      fail_msg("a control character (0x%02x) in '%s'", *c, msg);
}

/* Appends n points of series 0 (gpu.util_pct) at t0 + i * 100 ms, value = first + i, to run r. */
static int append_points(struct store *st, const struct store_run *r, int64_t t0, int first, int n) {
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  for (int i = 0; i < n; i++)
    gs_sink_put(s, id, t0 + i * 100000000LL, first + i);
  struct gs_batch *b = gs_sink_take(s);
  int rc = st->run_append(st, r, b);
  gs_batch_free(b);
  gs_sink_free(s);
  return rc;
}

/* The values of r's one series, in time order, checked to be 0, 1, ... n-1. */
static void check_values(struct store *st, const struct store_run *r, int n) {
  struct store_series *ser = NULL;
  size_t nser = 0;
  assert_int_equal(st->series_list(st, r->id, &ser, &nser), 0);
  assert_int_equal(nser, 1);
  int64_t *t = NULL;
  double *v = NULL;
  size_t np = 0;
  assert_int_equal(store_samples_load(st, ser[0].id, &t, &v, &np), 0);
  if ((int)np != n)
    fail_msg("%zu samples read back of %d written", np, n);
  for (int i = 0; i < n; i++)
    if (v[i] != i)
      fail_msg("sample %d reads %g", i, v[i]);
  free(t), free(v), free(ser);
}

/* The notes of run r, joined by " | ", into out. */
static void notes_of(struct store *st, const struct store_run *r, char *out, size_t n) {
  char **notes = NULL;
  size_t nn = 0;
  assert_int_equal(st->notes_read(st, r->id, &notes, &nn), 0);
  out[0] = 0;
  for (size_t i = 0; i < nn; i++)
    snprintf(out + strlen(out), n - strlen(out), "%s | ", notes[i]);
  store_notes_free(notes, nn);
}

/* PostgreSQL only: the server lost in the middle of a run (its backend terminated, and no server
 * where the store reconnects) — the appends go to the local spool, the next append that reaches the
 * server again replays it, and the run's end says the outage: every sample in order, once. Kills
 * pg_run.c's count_failure `if (s->down)` -> never (line 84: an outage counted as a refusal) and
 * pg_run_append's `if (rc) return rc` after the writable check -> skipped (94: a read-only store's
 * append spooled; see the read-only part). */
static void test_pg_an_outage_mid_run_is_spooled_and_replayed(void **state) {
  (void)state;
  char spool[] = "/tmp/gs-test-spool-XXXXXX";
  assert_non_null(mkdtemp(spool));
  setenv("GPUSCOPE_SPOOL_DIR", spool, 1);
  struct store *st = open_db("outage");
  struct pg_store *s = (struct pg_store *)st;
  struct store_run r;
  begin_run(st, &r);
  assert_int_equal(append_points(st, &r, 1000, 0, 10), 0);
  char url[sizeof s->url], sql[100];
  snprintf(url, sizeof url, "%s", s->url);
  snprintf(s->url, sizeof s->url, "postgresql://gs@127.0.0.1:1/gone?connect_timeout=5"); /* nobody there */
  snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d)", PQbackendPID(s->conn));
  pg_count("outage", sql);
  assert_int_equal(append_points(st, &r, 1000 + 10 * 100000000LL, 10, 10), 0); /* spooled: not an error */
  assert_int_equal(s->down, 1);
  assert_non_null(s->spool);
  s->next_try_ns = 0; /* the next append tries the server at once */
  assert_int_equal(append_points(st, &r, 1000 + 20 * 100000000LL, 20, 10), 0);
  assert_int_equal(s->down, 1);
  snprintf(s->url, sizeof s->url, "%s", url); /* the server is back */
  s->next_try_ns = 0;
  assert_int_equal(append_points(st, &r, 1000 + 30 * 100000000LL, 30, 10), 0);
  assert_int_equal(s->down, 0);
  assert_null(s->spool);
  snprintf(r.status, sizeof r.status, "finished");
  r.end_wall_ns = r.start_wall_ns + 4 * GS_NS_PER_S;
  assert_int_equal(st->run_end(st, &r), 0);
  char notes[2048];
  notes_of(st, &r, notes, sizeof notes);
  if (!strstr(notes, "unreachable 1 time during the run: 20 samples were spooled") || strstr(notes, "refused"))
    fail_msg("the run's notes: %s", notes);
  check_values(st, &r, 40);
  /* A second run ends while the server is away: it is kept whole in the spool, which says so (not
   * "refused": pg_run.c:126 `if (!s->down && s->replay_error[0])` -> always), and the next store
   * that reaches the server replays it. */
  struct store_run r2;
  begin_run(st, &r2);
  assert_int_equal(append_points(st, &r2, 1000, 0, 10), 0);
  snprintf(s->url, sizeof s->url, "postgresql://gs@127.0.0.1:1/gone?connect_timeout=5");
  snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d)", PQbackendPID(s->conn));
  pg_count("outage", sql);
  assert_int_equal(append_points(st, &r2, 1000 + 10 * 100000000LL, 10, 10), 0);
  snprintf(r2.status, sizeof r2.status, "finished");
  r2.end_wall_ns = r2.start_wall_ns + 2 * GS_NS_PER_S;
  assert_int_equal(st->run_end(st, &r2), 0);
  if (!strstr(st->stats.kept_elsewhere, "is unreachable: the run is kept whole in the local spool"))
    fail_msg("the end kept in the spool says: '%s'", st->stats.kept_elsewhere);
  st->close(st);
  st = open_db("outage"); /* the next run's store: it replays what the spool kept */
  struct store_run r3;
  memset(&r3, 0, sizeof r3);
  r3.agent_pid = getpid();
  r3.start_wall_ns = gs_wall_ns();
  assert_int_equal(st->run_begin(st, &r3), 0);
  check_values(st, &r2, 20);
  st->close(st);
  unsetenv("GPUSCOPE_SPOOL_DIR");
  assert_int_equal(rmdir(spool), 0); /* the spools went with their replays */
}

/* PostgreSQL only: a server that is there but refuses the run's end (a constraint added behind the
 * store's back) keeps the run whole in the spool, and says the server refused it, with why. Kills
 * pg_run_end's `if (!s->down)` -> `if (s->down)` (pg_run.c:160: the refusal's words not kept, the
 * end said "unreachable"). */
static void test_pg_a_refused_end_is_kept_in_the_spool_and_said(void **state) {
  (void)state;
  char spool[] = "/tmp/gs-test-spool-XXXXXX";
  assert_non_null(mkdtemp(spool));
  setenv("GPUSCOPE_SPOOL_DIR", spool, 1);
  struct store *st = open_db("refusing");
  struct store_run r;
  begin_run(st, &r);
  assert_int_equal(append_points(st, &r, 1000, 0, 10), 0);
  exec_behind("refusing", "ALTER TABLE runs ADD CONSTRAINT no_end CHECK (status <> 'finished') NOT VALID");
  snprintf(r.status, sizeof r.status, "finished");
  r.end_wall_ns = r.start_wall_ns + GS_NS_PER_S;
  assert_int_equal(st->run_end(st, &r), 0);
  if (!strstr(st->stats.kept_elsewhere, "because the server refused it") || !strstr(st->stats.kept_elsewhere, "no_end"))
    fail_msg("the refused end says: '%s'", st->stats.kept_elsewhere);
  st->close(st);
  exec_behind("refusing", "ALTER TABLE runs DROP CONSTRAINT no_end");
  st = open_db("refusing");
  struct store_run r2;
  memset(&r2, 0, sizeof r2);
  r2.agent_pid = getpid();
  r2.start_wall_ns = gs_wall_ns();
  assert_int_equal(st->run_begin(st, &r2), 0); /* replays the kept run */
  struct store_run got;
  assert_int_equal(st->run_get(st, r.id, &got), 0);
  assert_string_equal(got.status, "finished");
  check_values(st, &r, 10);
  st->close(st);
  unsetenv("GPUSCOPE_SPOOL_DIR");
  assert_int_equal(rmdir(spool), 0);
}

/* PostgreSQL only: an outage while the spool cannot be written either (its folder cannot be made)
 * keeps the appends in memory, every one of them, and writes them when the server is back. Kills
 * to_spool's `if ((rc = pg_spool_append(s, r, &s->w.pending.b)))` -> never (pg_run.c:66: what
 * memory held cleared though the spool did not take it). */
static void test_pg_an_outage_without_a_spool_keeps_the_samples_in_memory(void **state) {
  (void)state;
  setenv("GPUSCOPE_SPOOL_DIR", "/dev/null/spool", 1); /* not a folder, and never one */
  struct store *st = open_db("nospool");
  struct pg_store *s = (struct pg_store *)st;
  struct store_run r;
  begin_run(st, &r);
  assert_int_equal(append_points(st, &r, 1000, 0, 10), 0);
  char url[sizeof s->url], sql[100];
  snprintf(url, sizeof url, "%s", s->url);
  snprintf(s->url, sizeof s->url, "postgresql://gs@127.0.0.1:1/gone?connect_timeout=5");
  snprintf(sql, sizeof sql, "SELECT pg_terminate_backend(%d)", PQbackendPID(s->conn));
  pg_count("nospool", sql);
  assert_int_not_equal(append_points(st, &r, 1000 + 10 * 100000000LL, 10, 10), 0); /* kept in memory */
  s->next_try_ns = 0;
  assert_int_not_equal(append_points(st, &r, 1000 + 20 * 100000000LL, 20, 10), 0);
  assert_null(s->spool);
  snprintf(s->url, sizeof s->url, "%s", url);
  s->next_try_ns = 0;
  assert_int_equal(append_points(st, &r, 1000 + 30 * 100000000LL, 30, 10), 0);
  snprintf(r.status, sizeof r.status, "finished");
  r.end_wall_ns = r.start_wall_ns + 4 * GS_NS_PER_S;
  assert_int_equal(st->run_end(st, &r), 0);
  check_values(st, &r, 40);
  st->close(st);
  unsetenv("GPUSCOPE_SPOOL_DIR");
}

/* The one number sql answers on the PostgreSQL store called name, read behind the store's back. */
static long long pg_count(const char *name, const char *sql) {
  char url[700];
  url_of(url, sizeof url, name);
  PGconn *c = PQconnectdb(url);
  assert_int_equal(PQstatus(c), CONNECTION_OK);
  PGresult *res = PQexec(c, sql);
  if (PQresultStatus(res) != PGRES_TUPLES_OK)
    fail_msg("%s: %s", sql, PQerrorMessage(c));
  long long v = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
  PQclear(res);
  PQfinish(c);
  return v;
}

/* PostgreSQL only: a run's end is committed: its open chunks are sealed into chunks and its rollups
 * stored, as another connection sees them (the reads would compute both again, so only the tables
 * tell). Kills pg_write.c's run end `(rc = ...) || (rc = ...)` -> `&&` (the seal, or the COMMIT,
 * skipped). */
static void test_pg_run_end_seals_chunks_and_stores_rollups(void **state) {
  (void)state;
  struct store *st = open_db("sealed");
  struct store_run r;
  begin_run(st, &r);
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "nvml", "gpu.util_pct", "gpu=0", "%", GS_GAUGE);
  for (int i = 0; i < 1200; i++) /* 10 Hz for 2 min: the 10 s and 1 min levels are stored */
    gs_sink_put(s, id, 1000 + i * 100000000LL, i % 100);
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  gs_sink_free(s);
  assert_true(pg_count("sealed", "SELECT count(*) FROM open_chunks") > 0);
  snprintf(r.status, sizeof r.status, "finished");
  r.exit_code = 0;
  r.end_wall_ns = r.start_wall_ns + 120000000000LL;
  assert_int_equal(st->run_end(st, &r), 0);
  assert_int_equal(pg_count("sealed", "SELECT count(*) FROM open_chunks"), 0);
  assert_true(pg_count("sealed", "SELECT count(*) FROM chunks") > 0);
  assert_true(pg_count("sealed", "SELECT count(*) FROM rollup_blocks") > 0);
  st->close(st);
}

int main(void) {
  /* the PostgreSQL back end's calls go through the table pq_api.h fills on first use: fill it before
   * the tests call libpq themselves (a machine without libpq fails here, in one line) */
  char err[320];
  if (pq_api_load(err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pending_keeps_events_params_and_notes_of_failed_appends),
      cmocka_unit_test(test_pending_events_and_notes_are_bounded_and_counted),
      cmocka_unit_test(test_pg_url_is_shown_without_its_password),
      cmocka_unit_test(test_rollup_buckets_floor_times_before_the_start),
      cmocka_unit_test(test_write_summary_is_empty_without_failures_and_counts_them_otherwise),
      cmocka_unit_test(test_rollup_block_with_overlong_column_is_corrupt),
      cmocka_unit_test(test_group_record_names_its_hosts_and_runs),
      cmocka_unit_test(test_store_opens_a_bare_path_and_refuses_an_unknown_scheme),
      cmocka_unit_test(test_store_default_url_follows_the_environment),
      cmocka_unit_test(test_store_run_record_reads_back_field_by_field),
      cmocka_unit_test(test_store_events_params_and_notes_read_back_field_by_field),
      cmocka_unit_test(test_store_corrupt_chunk_is_an_error_on_every_back_end),
      cmocka_unit_test(test_store_append_records_the_heartbeat),
      cmocka_unit_test(test_store_live_run_of_another_host_is_running),
      cmocka_unit_test(test_store_points_at_or_before_the_last_are_stored_once),
      cmocka_unit_test(test_store_a_failed_read_is_an_error_not_an_empty_answer),
      cmocka_unit_test(test_store_note_times_and_the_finest_rollups_are_stored),
      cmocka_unit_test(test_store_edits_of_an_unknown_run_are_not_found),
      cmocka_unit_test(test_store_a_dead_agents_run_is_recorded_crashed),
      cmocka_unit_test(test_store_series_read_back_field_by_field),
  };
  /* What only PostgreSQL has: run by pg_unit_test_store_mutants, absent from the SQLite run. */
  const struct CMUnitTest pg_tests[] = {
      cmocka_unit_test(test_pg_errors_name_the_cause_and_tell_busy_from_failed),
      cmocka_unit_test(test_pg_run_end_seals_chunks_and_stores_rollups),
      cmocka_unit_test(test_pg_a_server_that_does_not_answer_in_time_is_dropped),
      cmocka_unit_test(test_pg_shutdown_errors_mark_the_store_down_and_a_live_one_is_kept),
      cmocka_unit_test(test_pg_a_refused_run_end_is_an_error_and_a_second_end_replaces),
      cmocka_unit_test(test_pg_agents_starting_at_once_all_open_their_new_database),
      cmocka_unit_test(test_pg_an_unreachable_server_is_said_in_one_line),
      cmocka_unit_test(test_pg_an_outage_mid_run_is_spooled_and_replayed),
      cmocka_unit_test(test_pg_an_outage_without_a_spool_keeps_the_samples_in_memory),
      cmocka_unit_test(test_pg_a_refused_end_is_kept_in_the_spool_and_said),
  };
  const char *url = getenv("GS_TEST_STORE_URL");
  if (url && !strncmp(url, "postgres", 8))
    return cmocka_run_group_tests(tests, setup, teardown) + cmocka_run_group_tests(pg_tests, setup, teardown);
  return cmocka_run_group_tests(tests, setup, teardown);
}
