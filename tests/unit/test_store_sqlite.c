/* SQLite-file cases of the store, on real files in a temp folder: what is not ours is refused and
 * left byte for byte as it was (a foreign file, another application's database even with a meta
 * table, an empty file); reads never create a file or a folder and never migrate; a store on a
 * read-only folder can be read; a folder as a store is a clear error; a full disk (a file size
 * limit, RLIMIT_FSIZE) loses no samples, attaches none to the wrong run, names its cause, and the
 * run ends with its exit code once the store takes writes again; an old schema is migrated only
 * by a writer; a corrupt chunk is an error, not a crash. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "store/store.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs-test-store-sqlite-XXXXXX");
  if (!mkdtemp(dir))
    return -1;
  /* where a run's end that the store cannot take is kept (store_spool_dirs): this test's folder,
   * never the user's data, state or /tmp folders */
  char spool[300];
  snprintf(spool, sizeof spool, "%s/spool", dir);
  setenv("GPUSCOPE_SPOOL_DIR", spool, 1);
  setenv("XDG_STATE_HOME", dir, 1);
  setenv("TMPDIR", dir, 1);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
  return system(cmd) == 0 ? 0 : -1;
}

static void path_of(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", dir, name);
}

static struct store *open_mode(const char *name, enum store_mode mode) {
  char url[700];
  snprintf(url, sizeof url, "sqlite://%s/%s", dir, name);
  return store_open_mode(url, mode);
}

static struct store *open_db(const char *name) {
  return open_mode(name, STORE_WRITE);
}

/* FNV-1a of a file's bytes, and its size (-1 when it cannot be read). */
static uint64_t file_hash(const char *path, long *size) {
  uint64_t h = 1469598103934665603ULL;
  *size = -1;
  FILE *f = fopen(path, "rb");
  if (!f)
    return 0;
  int c;
  long n = 0;
  while ((c = fgetc(f)) != EOF)
    h = (h ^ (uint64_t)c) * 1099511628211ULL, n++;
  fclose(f);
  *size = n;
  return h;
}

static int file_exists(const char *path) {
  return access(path, F_OK) == 0;
}

static void begin(struct store *st, struct store_run *r, const char *name) {
  memset(r, 0, sizeof *r);
  snprintf(r->name, sizeof r->name, "%s", name);
  gethostname(r->host, sizeof r->host - 1);
  r->agent_pid = getpid();
  r->exit_code = -1;
  r->start_wall_ns = gs_wall_ns();
  r->mono_start_ns = 1000;
  assert_int_equal(st->run_begin(st, r), 0);
}

static const enum store_mode ALL_MODES[] = {STORE_READ, STORE_KEEP, STORE_WRITE, STORE_MIGRATE};
static const enum store_mode NOT_CREATING[] = {STORE_READ, STORE_KEEP, STORE_MIGRATE};

static void test_store_refuses_foreign_file_and_keeps_it(void **state) {
  (void)state;
  char path[400];
  snprintf(path, sizeof path, "%s/notes.db", dir);
  /* Text, then binary bytes, past one SQLite page: every byte must survive the refusal. */
  unsigned char want[5000];
  for (size_t i = 0; i < sizeof want; i++)
    want[i] = i < 34 ? (unsigned char)"my precious notes, not a database\n"[i] : (unsigned char)((i * 131 + 7) & 0xff);
  FILE *f = fopen(path, "wb");
  assert_int_equal(fwrite(want, 1, sizeof want, f), sizeof want);
  fclose(f);
  struct stat before, after;
  assert_int_equal(stat(path, &before), 0);
  assert_null(open_db("notes.db"));
  assert_non_null(strstr(gs_last_error(), "not a gpuscope store"));
  f = fopen(path, "rb");
  unsigned char got[sizeof want + 16];
  size_t n = fread(got, 1, sizeof got, f);
  fclose(f);
  assert_int_equal(n, sizeof want); /* not truncated, nothing appended */
  assert_memory_equal(got, want, sizeof want);
  assert_int_equal(stat(path, &after), 0);
  assert_true(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
  /* and no journal or WAL was left beside it */
  char side[420];
  for (int k = 0; k < 3; k++) {
    snprintf(side, sizeof side, "%s%s", path, (const char *[]){"-journal", "-wal", "-shm"}[k]);
    assert_int_not_equal(access(side, F_OK), 0);
  }
}

static void test_store_refuses_other_sqlite_database(void **state) {
  (void)state;
  char path[400];
  snprintf(path, sizeof path, "%s/other.db", dir);
  sqlite3 *db;
  sqlite3_open(path, &db);
  sqlite3_exec(db, "CREATE TABLE customers(id INTEGER)", NULL, NULL, NULL);
  sqlite3_close(db);
  assert_null(open_db("other.db"));
  assert_non_null(strstr(gs_last_error(), "not a gpuscope store"));
}

static void test_store_refuses_newer_schema(void **state) {
  (void)state;
  struct store *st = open_db("new.db");
  st->close(st);
  char path[400];
  snprintf(path, sizeof path, "%s/new.db", dir);
  sqlite3 *db;
  sqlite3_open(path, &db);
  sqlite3_exec(db, "UPDATE meta SET value = '99' WHERE key = 'schema_version'", NULL, NULL, NULL);
  sqlite3_close(db);
  assert_null(open_db("new.db"));
  assert_non_null(strstr(gs_last_error(), "newer"));
}

static int meta_version(const char *name) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  sqlite3 *db;
  sqlite3_stmt *q;
  int v = -1;
  sqlite3_open(path, &db);
  if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &q, NULL) == SQLITE_OK &&
      sqlite3_step(q) == SQLITE_ROW)
    v = sqlite3_column_int(q, 0);
  sqlite3_finalize(q);
  sqlite3_close(db);
  return v;
}

static void test_store_migrates_version_1_and_mixes_chunk_kinds(void **state) {
  (void)state;
  /* a version-1 store holds XOR chunks only (values that are no short decimal); opened by this
   * version it becomes version 2, keeps them readable and adds decimal chunks beside them */
  struct store *st = open_db("v1.db");
  struct store_run r;
  begin(st, &r, "old");
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "host", "v", "", "", GS_GAUGE);
  for (int i = 0; i < 10; i++)
    gs_sink_put(s, id, 1000 + i * 1000LL, i / 3.0);
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  st->close(st);
  char path[400];
  snprintf(path, sizeof path, "%s/v1.db", dir);
  sqlite3 *db;
  sqlite3_open(path, &db);
  sqlite3_exec(db, "UPDATE meta SET value = '1' WHERE key = 'schema_version'", NULL, NULL, NULL);
  sqlite3_close(db);
  assert_int_equal(meta_version("v1.db"), 1);

  st = open_db("v1.db");
  assert_non_null(st);
  assert_int_equal(meta_version("v1.db"), GS_STORE_SCHEMA_VERSION);
  struct store_run r2;
  begin(st, &r2, "new");
  int id2 = gs_sink_series(s, "nvml", "gpu.power_w", "gpu=0", "W", GS_GAUGE);
  for (int i = 0; i < 10; i++)
    gs_sink_put(s, id2, 1000 + i * 1000LL, 300 + i * 0.125);
  b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r2, b), 0);
  gs_batch_free(b);
  struct store_series *ser;
  size_t n, np;
  int64_t *t;
  double *v;
  assert_int_equal(st->series_list(st, r.id, &ser, &n), 0);
  assert_int_equal(store_samples_load(st, ser[0].id, &t, &v, &np), 0);
  assert_int_equal(np, 10);
  assert_true(v[9] == 9 / 3.0);
  free(t), free(v), free(ser);
  assert_int_equal(st->series_list(st, r2.id, &ser, &n), 0);
  assert_int_equal(store_samples_load(st, ser[0].id, &t, &v, &np), 0);
  assert_int_equal(np, 10);
  assert_true(v[9] == 300 + 9 * 0.125);
  free(t), free(v), free(ser);
  gs_sink_free(s);
  st->close(st);
}

static void test_store_steps_join_a_metric_by_time_and_only_its_own(void **state) {
  (void)state;
  /* the agent's layout (docs/protocol.md): a value logged with a step has a point of the same
   * time in "client.step"; one logged without has none there */
  struct store *st = open_db("steps.db");
  struct store_run r;
  begin(st, &r, "steps");
  struct gs_sink *s = gs_sink_new();
  int loss = gs_sink_series(s, "client", "loss", "", "", GS_GAUGE);
  int steps = gs_sink_series(s, "client.step", "loss", "", "count", GS_GAUGE);
  int acc = gs_sink_series(s, "client", "acc", "", "", GS_GAUGE);
  for (int i = 0; i < 6; i++) {
    gs_sink_put(s, loss, 1000 + i * 1000LL, 1.0 / (i + 1));
    if (i != 2) /* the third value came without a step */
      gs_sink_put(s, steps, 1000 + i * 1000LL, 10 * i);
    gs_sink_put(s, acc, 1000 + i * 1000LL, i);
  }
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  struct store_series *ser;
  size_t n;
  assert_int_equal(st->series_list(st, r.id, &ser, &n), 0);
  long li = store_series_find(ser, n, "client", "loss", ""), si = store_series_find(ser, n, "client.step", "loss", "");
  long ai = store_series_find(ser, n, "client", "acc", "");
  assert_true(li >= 0 && si >= 0 && ai >= 0);
  assert_true(store_series_is_steps(&ser[si]) && !store_series_is_steps(&ser[li]));
  struct store_steps k;
  assert_int_equal(store_steps_load(st, ser, n, &ser[li], INT64_MIN, INT64_MAX, &k), 0);
  assert_int_equal(k.p.n, 5);
  int64_t *t;
  double *v;
  size_t np;
  assert_int_equal(store_samples_load(st, ser[li].id, &t, &v, &np), 0); /* the times as the store gives them */
  assert_int_equal(np, 6);
  const int64_t want[] = {0, 10, -1, 30, 40, 50};
  for (size_t i = 0; i < np; i++)
    assert_int_equal(store_steps_at(&k, t[i]), want[i]);
  assert_int_equal(store_steps_at(&k, t[np - 1] + 1), -1);
  free(t), free(v);
  store_steps_done(&k);
  assert_int_equal(store_steps_load(st, ser, n, &ser[ai], INT64_MIN, INT64_MAX, &k), 0);
  assert_int_equal(k.p.n, 0); /* a metric logged without steps has none, not zeros */
  assert_int_equal(store_steps_at(&k, 0), -1);
  store_steps_done(&k);
  free(ser);
  gs_sink_free(s);
  st->close(st);
}

static void test_store_corrupt_chunk_is_an_error_not_a_crash(void **state) {
  (void)state;
  struct store *st = open_db("d.db");
  struct store_run r;
  begin(st, &r, "x");
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "host", "v", "", "", GS_GAUGE);
  for (int i = 0; i < 50; i++)
    gs_sink_put(s, id, 1000 + i * 1000LL, i * 0.1);
  struct gs_batch *b = gs_sink_take(s);
  assert_int_equal(st->run_append(st, &r, b), 0);
  gs_batch_free(b);
  gs_sink_free(s);
  st->close(st);
  char path[400];
  snprintf(path, sizeof path, "%s/d.db", dir);
  sqlite3 *db;
  sqlite3_open(path, &db);
  sqlite3_exec(db, "UPDATE chunks SET data = x'00', n = 50", NULL, NULL, NULL);
  sqlite3_close(db);
  st = open_db("d.db");
  struct store_series *ser;
  size_t n;
  assert_int_equal(st->series_list(st, r.id, &ser, &n), 0);
  int64_t *t;
  double *v;
  size_t np;
  assert_int_equal(store_samples_load(st, ser[0].id, &t, &v, &np), GS_ECORRUPT);
  free(ser);
  st->close(st);
}

static void test_store_reads_never_create_a_file_or_a_folder(void **state) {
  (void)state;
  char url[700], p[400], sub[400];
  path_of(p, sizeof p, "typo.db");
  path_of(sub, sizeof sub, "no/such/folder");
  for (size_t i = 0; i < sizeof NOT_CREATING / sizeof *NOT_CREATING; i++) {
    assert_null(open_mode("typo.db", NOT_CREATING[i]));
    assert_non_null(strstr(gs_last_error(), "no store at"));
    assert_int_equal(strchr(gs_last_error(), '\n'), NULL);
    assert_false(file_exists(p));
    snprintf(url, sizeof url, "sqlite://%s/x.db", sub);
    assert_null(store_open_mode(url, NOT_CREATING[i]));
    path_of(p, sizeof p, "no");
    assert_false(file_exists(p));
    path_of(p, sizeof p, "typo.db");
  }
}

/* Another application's database with a meta table that looks like ours (schema_version 1, in
 * rollback-journal mode): every mode refuses it, and its bytes, its journal mode and its folder
 * stay as they were. */
static void test_store_foreign_meta_table_is_never_migrated(void **state) {
  (void)state;
  static const char *apps[] = {NULL, "'notes'"};
  for (size_t a = 0; a < 2; a++) {
    char p[400], wal[420];
    path_of(p, sizeof p, "foreign.db");
    unlink(p);
    sqlite3 *db;
    sqlite3_open(p, &db);
    sqlite3_exec(db,
                 "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);"
                 "INSERT INTO meta VALUES('schema_version', '1'); CREATE TABLE runs(id TEXT)",
                 NULL, NULL, NULL);
    if (apps[a]) {
      char sql[100];
      snprintf(sql, sizeof sql, "INSERT INTO meta VALUES('app', %s)", apps[a]);
      sqlite3_exec(db, sql, NULL, NULL, NULL);
    }
    sqlite3_close(db);
    long size0, size1;
    uint64_t h0 = file_hash(p, &size0);
    for (size_t i = 0; i < sizeof ALL_MODES / sizeof *ALL_MODES; i++) {
      assert_null(open_mode("foreign.db", ALL_MODES[i]));
      assert_non_null(strstr(gs_last_error(), "not a gpuscope store"));
      uint64_t h1 = file_hash(p, &size1);
      assert_int_equal(size1, size0);
      assert_true(h1 == h0);
      snprintf(wal, sizeof wal, "%s-wal", p);
      assert_false(file_exists(wal));
    }
  }
}

static void test_store_empty_file_gets_no_schema_from_a_read(void **state) {
  (void)state;
  char p[400];
  path_of(p, sizeof p, "empty.db");
  FILE *f = fopen(p, "w");
  fclose(f);
  for (size_t i = 0; i < sizeof NOT_CREATING / sizeof *NOT_CREATING; i++) {
    assert_null(open_mode("empty.db", NOT_CREATING[i]));
    assert_non_null(strstr(gs_last_error(), "empty"));
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_size, 0);
  }
}

static void test_store_folder_is_a_clear_error(void **state) {
  (void)state;
  char p[400];
  path_of(p, sizeof p, "adir");
  mkdir(p, 0755);
  for (size_t i = 0; i < sizeof ALL_MODES / sizeof *ALL_MODES; i++) {
    assert_null(open_mode("adir", ALL_MODES[i]));
    assert_non_null(strstr(gs_last_error(), "is a folder, not a file"));
    assert_null(strstr(gs_last_error(), "unable to open"));
  }
}

static void test_store_read_never_migrates_an_old_store(void **state) {
  (void)state;
  struct store *st = open_db("old.db");
  struct store_run r, got;
  begin(st, &r, "old");
  st->close(st);
  char p[400];
  path_of(p, sizeof p, "old.db");
  sqlite3 *db;
  sqlite3_open(p, &db);
  sqlite3_exec(db, "UPDATE meta SET value = '1' WHERE key = 'schema_version'", NULL, NULL, NULL);
  sqlite3_close(db);
  long n0, n1;
  uint64_t h0 = file_hash(p, &n0);
  enum store_mode reads[] = {STORE_READ, STORE_KEEP};
  for (int i = 0; i < 2; i++) {
    st = open_mode("old.db", reads[i]);
    assert_non_null(st);
    assert_int_equal(st->schema_found, 1);
    assert_int_equal(st->run_get(st, "old", &got), 0);
    st->close(st);
    assert_true(file_hash(p, &n1) == h0 && n1 == n0);
    assert_int_equal(meta_version("old.db"), 1);
  }
  st = open_mode("old.db", STORE_MIGRATE);
  assert_non_null(st);
  assert_int_equal(st->schema_found, 1);
  st->close(st);
  assert_int_equal(meta_version("old.db"), GS_STORE_SCHEMA_VERSION);
}

/* Runs fn in a child that cannot write dir (as uid 65534, nobody, when we are root, who may write
 * any folder; the folder made read-only), so the store's folder is read-only as on a read-only
 * mount. Returns the child's exit status (77: it could not drop its rights). */
static int as_reader_of_readonly_dir(const char *sub, int (*fn)(const char *sub)) {
  char p[400];
  path_of(p, sizeof p, sub);
  chmod(dir, 0755);
  pid_t pid = fork();
  if (pid == 0) {
    if (geteuid() == 0 && (setgid(65534) || setuid(65534)))
      _exit(77);
    _exit(fn(sub));
  }
  int ws;
  waitpid(pid, &ws, 0);
  if (!WIFEXITED(ws))
    return 1;
  return WEXITSTATUS(ws);
}

static int read_ro_store(const char *sub) {
  char name[300];
  snprintf(name, sizeof name, "%s/s.db", sub);
  char test[400];
  path_of(test, sizeof test, sub);
  if (access(test, W_OK) == 0)
    return 10; /* the folder must not be writable for this test to mean anything */
  struct store_run got;
  enum store_mode reads[] = {STORE_READ, STORE_KEEP};
  for (int i = 0; i < 2; i++) {
    struct store *st = open_mode(name, reads[i]);
    if (!st) {
      fprintf(stderr, "open: %s\n", gs_last_error());
      return 11 + i;
    }
    if (st->run_get(st, "ro", &got) || strcmp(got.status, "finished")) {
      fprintf(stderr, "run_get: %s\n", gs_last_error());
      return 13;
    }
    struct store_series *ser;
    size_t n;
    int64_t *t;
    double *v;
    size_t np;
    if (st->series_list(st, got.id, &ser, &n) || n != 1 || store_samples_load(st, ser[0].id, &t, &v, &np) || np != 20)
      return 14;
    free(ser), free(t), free(v);
    st->close(st);
  }
  struct store *w = open_mode(name, STORE_WRITE);
  if (w || !strstr(gs_last_error(), "read-only"))
    return 15;
  return 0;
}

static void make_ro_store(const char *sub, int leave_wal) {
  char p[400], name[300];
  path_of(p, sizeof p, sub);
  mkdir(p, 0755);
  snprintf(name, sizeof name, "%s/s.db", sub);
  pid_t pid = fork();
  if (pid == 0) { /* a writer; with leave_wal it exits without closing, as a killed agent does */
    struct store *st = open_db(name);
    struct store_run r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "ro");
    r.start_wall_ns = gs_wall_ns();
    r.mono_start_ns = 0;
    if (!st || st->run_begin(st, &r))
      _exit(1);
    struct gs_sink *s = gs_sink_new();
    int id = gs_sink_series(s, "host", "v", "", "", GS_GAUGE);
    for (int i = 0; i < 20; i++)
      gs_sink_put(s, id, 1000 + i * 1000LL, i);
    struct gs_batch *b = gs_sink_take(s);
    snprintf(r.status, sizeof r.status, "finished");
    r.exit_code = 0;
    r.end_wall_ns = r.start_wall_ns + 1;
    if (st->run_append(st, &r, b) || st->run_end(st, &r))
      _exit(2);
    if (!leave_wal)
      st->close(st);
    _exit(0);
  }
  int ws;
  waitpid(pid, &ws, 0);
  assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  char f[500];
  snprintf(f, sizeof f, "%s/s.db-wal", p);
  assert_int_equal(file_exists(f), leave_wal);
  char cmd[1000];
  snprintf(cmd, sizeof cmd, "chmod 0444 '%s'/s.db*; chmod 0555 '%s'", p, p);
  assert_int_equal(system(cmd), 0);
}

static void test_store_reads_a_store_in_a_read_only_folder(void **state) {
  (void)state;
  make_ro_store("ro-clean", 0); /* WAL mode, no -wal/-shm: opened immutable */
  assert_int_equal(as_reader_of_readonly_dir("ro-clean", read_ro_store), 0);
  make_ro_store("ro-wal", 1); /* a -wal and -shm left by a killed writer: read through them */
  assert_int_equal(as_reader_of_readonly_dir("ro-wal", read_ro_store), 0);
}

/* ---- a full disk: a file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) in a child process ---- */

#define NSER 40
#define FAIL(code, ...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), (code))

static void put_points(struct gs_sink *s, const int *ids, int nids, int64_t *t, int n) {
  for (int k = 0; k < n; k++, *t += 1000000) /* 1 ms apart */
    for (int i = 0; i < nids; i++)
      gs_sink_put(s, ids[i], *t, (double)((*t / 1000000) % 97) + i * 0.5);
}

static int append(struct store *st, struct store_run *r, struct gs_sink *s) {
  struct gs_batch *b = gs_sink_take(s);
  int rc = st->run_append(st, r, b);
  gs_batch_free(b);
  return rc;
}

static int limit_files_to(off_t bytes) {
  struct rlimit rl;
  getrlimit(RLIMIT_FSIZE, &rl);
  rl.rlim_cur = bytes < 0 ? rl.rlim_max : (rlim_t)bytes;
  return setrlimit(RLIMIT_FSIZE, &rl);
}

static off_t wal_size(const char *name) {
  char p[420];
  snprintf(p, sizeof p, "%s/%s-wal", dir, name);
  struct stat sb;
  return stat(p, &sb) ? 0 : sb.st_size;
}

static int names_the_cause(const char *msg) {
  return (strstr(msg, "file size limit") || strstr(msg, "disk full")) && !strstr(msg, "rollback") &&
         !strstr(msg, "no transaction");
}

/* Every series of the run holds exactly want points (any number: SIZE_MAX), strictly forward in
 * time. */
static int check_series(struct store *st, const char *run_id, size_t nseries, size_t want) {
  struct store_series *ser;
  size_t n;
  if (st->series_list(st, run_id, &ser, &n))
    return FAIL(40, "series_list: %s", gs_last_error());
  int rc = n == nseries ? 0 : FAIL(41, "%zu series, want %zu", n, nseries);
  for (size_t i = 0; i < n && !rc; i++) {
    int64_t *t;
    double *v;
    size_t np;
    if (store_samples_load(st, ser[i].id, &t, &v, &np))
      rc = FAIL(42, "load: %s", gs_last_error());
    else if (want != SIZE_MAX && np != want)
      rc = FAIL(43, "series %s: %zu points, want %zu", ser[i].name, np, want);
    for (size_t k = 1; !rc && k < np; k++)
      if (t[k] <= t[k - 1])
        rc = FAIL(44, "series %s: time goes backwards at %zu", ser[i].name, k);
    if (!rc)
      free(t), free(v);
  }
  free(ser);
  return rc;
}

static int disk_full_child(void) {
  signal(SIGXFSZ, SIG_IGN);
  struct store *st = open_db("full.db");
  if (!st)
    return FAIL(20, "open: %s", gs_last_error());
  struct store_run r;
  memset(&r, 0, sizeof r);
  snprintf(r.name, sizeof r.name, "full");
  gethostname(r.host, sizeof r.host - 1);
  r.agent_pid = getpid();
  r.start_wall_ns = gs_wall_ns();
  r.mono_start_ns = 0;
  if (st->run_begin(st, &r))
    return FAIL(21, "begin: %s", gs_last_error());
  struct gs_sink *s = gs_sink_new();
  int ids[NSER + 1];
  char name[32];
  for (int i = 0; i < NSER; i++) {
    snprintf(name, sizeof name, "s%02d", i);
    ids[i] = gs_sink_series(s, "host", name, "", "", GS_GAUGE);
  }
  int64_t t = 1000000;
  put_points(s, ids, NSER, &t, 10);
  if (append(st, &r, s))
    return FAIL(22, "first append: %s", gs_last_error());
  limit_files_to(wal_size("full.db"));                             /* the disk is full from here */
  ids[NSER] = gs_sink_series(s, "host", "late", "", "", GS_GAUGE); /* first seen while full */
  put_points(s, ids, NSER + 1, &t, 2000);
  if (!append(st, &r, s))
    return FAIL(23, "an append beyond the file size limit succeeded");
  if (!names_the_cause(gs_last_error()))
    return FAIL(24, "the error does not name the cause: %s", gs_last_error());
  if (st->stats.failed_appends != 1 || st->stats.points_pending != 2000 * (NSER + 1))
    return FAIL(25, "stats: %lld failed, %lld pending", (long long)st->stats.failed_appends,
                (long long)st->stats.points_pending);
  put_points(s, ids, NSER + 1, &t, 500);
  if (!append(st, &r, s))
    return FAIL(26, "the second append beyond the limit succeeded");
  r.exit_code = 3;
  r.end_wall_ns = r.start_wall_ns + 5000000000LL;
  snprintf(r.status, sizeof r.status, "failed");
  if (!st->run_end(st, &r) || !names_the_cause(gs_last_error()))
    return FAIL(27, "run_end on a full disk: %s", gs_last_error());
  limit_files_to(-1); /* space again: the same run_end now goes through */
  if (st->run_end(st, &r))
    return FAIL(28, "run_end after the disk freed: %s", gs_last_error());
  gs_sink_free(s);
  st->close(st);

  /* Everything is there, under the right run, and the run has its exit code and a note. */
  st = open_mode("full.db", STORE_READ);
  struct store_run got;
  if (!st || st->run_get(st, r.id, &got))
    return FAIL(29, "reopen: %s", gs_last_error());
  if (strcmp(got.status, "failed") || got.exit_code != 3)
    return FAIL(30, "run is %s, exit %d", got.status, got.exit_code);
  int rc = check_series(st, r.id, NSER + 1, SIZE_MAX);
  struct store_series *ser;
  size_t n;
  st->series_list(st, r.id, &ser, &n);
  for (size_t i = 0; i < n && !rc; i++)
    if (ser[i].count != (strcmp(ser[i].name, "late") ? 2510 : 2500))
      rc = FAIL(31, "series %s holds %lld points", ser[i].name, (long long)ser[i].count);
  free(ser);
  char **notes;
  size_t nn;
  if (!rc && (st->notes_read(st, r.id, &notes, &nn) || nn != 1 || !strstr(notes[0], "nothing was lost")))
    rc = FAIL(32, "the run has no note of the failed writes");
  else if (!rc)
    store_notes_free(notes, nn);
  st->close(st);
  if (rc)
    return rc;

  /* The next run (a new agent) inherits nothing: each of its series holds its own one point. */
  st = open_db("full.db");
  struct store_run r2 = r;
  if (!st || st->run_begin(st, &r2))
    return FAIL(33, "second run: %s", gs_last_error());
  s = gs_sink_new();
  for (int i = 0; i < NSER + 1; i++) {
    snprintf(name, sizeof name, "n%02d", i);
    ids[i] = gs_sink_series(s, "host", name, "", "", GS_GAUGE);
  }
  t = 1000000;
  put_points(s, ids, NSER + 1, &t, 1);
  if (append(st, &r2, s))
    return FAIL(34, "second run append: %s", gs_last_error());
  rc = check_series(st, r2.id, NSER + 1, 1);
  gs_sink_free(s);
  st->close(st);
  return rc;
}

static int in_child(int (*fn)(void)) {
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0)
    _exit(fn());
  int ws;
  waitpid(pid, &ws, 0);
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

static void test_store_full_disk_keeps_samples_and_ends_the_run_later(void **state) {
  (void)state;
  assert_int_equal(in_child(disk_full_child), 0);
}

/* Past the bound, the newest points are dropped, counted, and said in the run's note. */
static int pending_bound_child(void) {
  signal(SIGXFSZ, SIG_IGN);
  struct store *st = open_db("bound.db");
  struct store_run r;
  memset(&r, 0, sizeof r);
  r.start_wall_ns = gs_wall_ns();
  if (!st || st->run_begin(st, &r))
    return FAIL(50, "open: %s", gs_last_error());
  struct gs_sink *s = gs_sink_new();
  int id = gs_sink_series(s, "host", "v", "", "", GS_GAUGE);
  int64_t t = 1000;
  put_points(s, &id, 1, &t, 1);
  if (append(st, &r, s))
    return FAIL(51, "append: %s", gs_last_error());
  limit_files_to(wal_size("bound.db"));
  put_points(s, &id, 1, &t, STORE_PENDING_MAX_POINTS + 5000);
  if (!append(st, &r, s))
    return FAIL(52, "append beyond the limit succeeded");
  if (st->stats.points_dropped != 5000 || st->stats.points_pending != STORE_PENDING_MAX_POINTS)
    return FAIL(53, "dropped %lld, pending %lld", (long long)st->stats.points_dropped,
                (long long)st->stats.points_pending);
  limit_files_to(-1);
  snprintf(r.status, sizeof r.status, "finished");
  r.exit_code = 0;
  if (st->run_end(st, &r))
    return FAIL(54, "run_end: %s", gs_last_error());
  char **notes;
  size_t nn;
  struct store_series *ser;
  size_t n;
  int rc = 0;
  if (st->notes_read(st, r.id, &notes, &nn) || nn != 1 || !strstr(notes[0], "did not keep 5000 samples"))
    rc = FAIL(55, "note: %s", nn ? notes[0] : "(none)");
  else if (st->series_list(st, r.id, &ser, &n) || n != 1 || ser[0].count != 1 + STORE_PENDING_MAX_POINTS)
    rc = FAIL(56, "series holds %lld points", n ? (long long)ser[0].count : -1LL);
  gs_sink_free(s);
  st->close(st);
  return rc;
}

static void test_store_pending_samples_are_bounded_and_counted(void **state) {
  (void)state;
  assert_int_equal(in_child(pending_bound_child), 0);
}

/* A store locked past the busy timeout (10 s) is an error that says so, never an empty list. */
static void test_store_locked_store_is_an_error_not_a_short_list(void **state) {
  (void)state;
  struct store *st = open_db("busy.db");
  struct store_run r;
  begin(st, &r, "busy");
  st->close(st);
  char p[400];
  path_of(p, sizeof p, "busy.db");
  sqlite3 *db;
  assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
  /* in rollback-journal mode a writer's exclusive lock keeps readers out (in WAL mode it would not) */
  assert_int_equal(sqlite3_exec(db, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL), SQLITE_OK);
  st = open_mode("busy.db", STORE_READ);
  assert_non_null(st);
  assert_int_equal(sqlite3_exec(db, "BEGIN EXCLUSIVE; UPDATE runs SET name = name", NULL, NULL, NULL), SQLITE_OK);
  struct store_run *runs = NULL;
  size_t n = 0;
  assert_int_equal(st->runs_list(st, &runs, &n), GS_EBUSY);
  assert_non_null(strstr(gs_last_error(), "locked"));
  sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_close(db);
  assert_int_equal(st->runs_list(st, &runs, &n), 0);
  assert_int_equal(n, 1);
  free(runs);
  st->close(st);
}

/* Opening a store that another handle of this process holds must not take that handle's locks away:
 * closing any descriptor of a file drops every POSIX lock the process holds on it, so the probe of
 * the file's first bytes reads through SQLite's VFS (store_sqlite.c, probe_read). A second process then
 * still cannot lock the range the first handle's read transaction holds. */
static void test_store_open_keeps_the_locks_of_other_handles(void **state) {
  (void)state;
  struct store *st = open_db("locks.db");
  struct store_run r;
  begin(st, &r, "locks");
  st->close(st);
  char p[400];
  path_of(p, sizeof p, "locks.db");
  sqlite3 *db;
  assert_int_equal(sqlite3_open(p, &db), SQLITE_OK);
  /* rollback-journal mode: a read transaction holds SHARED on the file's lock bytes */
  assert_int_equal(sqlite3_exec(db, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_exec(db, "BEGIN; SELECT count(*) FROM runs", NULL, NULL, NULL), SQLITE_OK);
  for (int i = 0; i < 2; i++) { /* twice: the second open reuses the probe's descriptor */
    struct store *other = open_mode("locks.db", STORE_READ);
    assert_non_null(other);
    other->close(other);
  }
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(p, O_RDWR);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0x40000002, .l_len = 510};
    _exit(fd >= 0 && fcntl(fd, F_SETLK, &fl) == 0 ? 1 : 0); /* 1: the lock was gone */
  }
  int ws;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  assert_true(WIFEXITED(ws));
  assert_int_equal(WEXITSTATUS(ws), 0);
  sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  sqlite3_close(db);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_store_refuses_foreign_file_and_keeps_it),
      cmocka_unit_test(test_store_refuses_other_sqlite_database),
      cmocka_unit_test(test_store_refuses_newer_schema),
      cmocka_unit_test(test_store_migrates_version_1_and_mixes_chunk_kinds),
      cmocka_unit_test(test_store_steps_join_a_metric_by_time_and_only_its_own),
      cmocka_unit_test(test_store_corrupt_chunk_is_an_error_not_a_crash),
      cmocka_unit_test(test_store_reads_never_create_a_file_or_a_folder),
      cmocka_unit_test(test_store_foreign_meta_table_is_never_migrated),
      cmocka_unit_test(test_store_empty_file_gets_no_schema_from_a_read),
      cmocka_unit_test(test_store_folder_is_a_clear_error),
      cmocka_unit_test(test_store_read_never_migrates_an_old_store),
      cmocka_unit_test(test_store_reads_a_store_in_a_read_only_folder),
      cmocka_unit_test(test_store_full_disk_keeps_samples_and_ends_the_run_later),
      cmocka_unit_test(test_store_pending_samples_are_bounded_and_counted),
      cmocka_unit_test(test_store_locked_store_is_an_error_not_a_short_list),
      cmocka_unit_test(test_store_open_keeps_the_locks_of_other_handles),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
