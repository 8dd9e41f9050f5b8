/* bench/store_bench: the store's cost for long GPU runs (issue 6c). Fabricates a run of G GPUs
 * sampled at HZ for a given span — realistic NVML-like values: utilisation in integer steps with
 * idle dips, slowly drifting temperature and power (mW resolution), memory and clocks that rarely
 * change, regular timestamps — and feeds it through the store interface exactly as the agent's
 * writer does (one gs_batch per flush period — the agent's: 10 ticks, at least 1 s and at most
 * 10 s (agent_flush_default), so 1 s at 10 Hz and 10 s at 1 Hz; --per-second for a batch every
 * second — st->run_append, then st->run_end). Reports:
 *   - ingest rate in points/s (wall and CPU), run_end (rollup) time,
 *   - bytes per point of the chunks table (pages on disk and encoded payload), per metric too,
 *   - the same span written as a plain one-row-per-sample table in the same database (how a
 *     simple tracker keeps samples), for comparison,
 *   - the time to draw the whole run as a 1,000-point chart: from rollups (rollups_read) and from
 *     raw chunks (samples_read), and the plain table's GROUP BY.
 * usage: store_bench [--url URL] [--days D | --hours H] [--gpus G] [--hz HZ] [--plain-hours H]
 *        store_bench --url URL --agents N [--seconds S]
 * The URL is the store's (sqlite:///path.db or postgresql://host/db, whose database is dropped and
 * made again); the plain table is measured when it is SQLite. With --agents, N processes write one
 * store at once, each as an agent does (8 GPUs x 6 metrics and 60 host series at 10 Hz, one append
 * per 1 s flush, paced in real time), and each reports its slowest flush: none may fall behind its
 * flush period. */
#include <getopt.h>
#include <libpq-fe.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "store/store.h"

enum { M_UTIL, M_MEM_UTIL, M_MEM_USED, M_TEMP, M_POWER, M_SM_CLOCK, N_METRICS };
static const char *const metric_names[N_METRICS] = {"gpu.util_pct", "gpu.mem_util_pct", "gpu.mem_used_bytes",
                                                    "gpu.temp_c",   "gpu.power_w",      "gpu.sm_clock_mhz"};
static const char *const metric_units[N_METRICS] = {"%", "%", "B", "C", "W", "MHz"};

struct gpu_state { /* the fabricated device, advanced one tick at a time */
  double temp, power_target, power;
  int util, mem_util;
  double mem_used;
  int sm_clock;
  uint64_t rng;
};

static double now_s(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t rnd(uint64_t *s) { /* xorshift64*: fixed seed, reproducible */
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return (uint32_t)((*s * 2685821657736338717ULL) >> 32);
}

static double urand(uint64_t *s) {
  return (double)rnd(s) / 4294967296.0;
}

/* One tick of GPU g at tick k (hz ticks per second): a training job that is busy, goes idle for a
 * few hundred ms every ~2 s (input stalls), and pauses for evaluation for 30 s every 20 minutes. */
static void gpu_tick(struct gpu_state *d, int g, int64_t k, int hz) {
  int64_t ms = k * 1000 / hz;
  int eval = (ms / 1000) % 1200 >= 1170;
  int dip = (ms % 2000) >= 1800 + 20 * (g % 3);
  int busy = !eval && !dip;
  d->util = busy ? (rnd(&d->rng) % 16 == 0 ? 99 : 100) : (eval ? 35 : 0);
  d->mem_util = busy ? 62 + (int)(rnd(&d->rng) % 3) : (eval ? 20 : 0);
  if (k % ((int64_t)hz * 600) == 0) /* the allocator grows now and then */
    d->mem_used = 118.0 * 1073741824.0 + (double)(rnd(&d->rng) % 64) * 2097152.0;
  d->power_target = busy ? 640 : (eval ? 330 : 210);
  /* the driver's 1 s power average: moves toward the target, read at mW resolution */
  d->power += (d->power_target - d->power) * 0.25 + (urand(&d->rng) - 0.5) * 2.0;
  d->power = round(d->power * 1000.0) / 1000.0;
  if (k % (hz * 20) == 0) /* temperature follows power slowly, integer degrees */
    d->temp += d->power > 500 ? (d->temp < 74 ? 1 : 0) : (d->temp > 45 ? -1 : 0);
  d->sm_clock = d->temp >= 74 && rnd(&d->rng) % 50 == 0 ? 1890 : 1980;
}

static double metric_value(const struct gpu_state *d, int m) {
  switch (m) {
  case M_UTIL:
    return d->util;
  case M_MEM_UTIL:
    return d->mem_util;
  case M_MEM_USED:
    return d->mem_used;
  case M_TEMP:
    return d->temp;
  case M_POWER:
    return d->power;
  default:
    return d->sm_clock;
  }
}

/* ---- the plain table: one row per sample ---- */

struct plain {
  sqlite3 *db;
  sqlite3_stmt *ins;
};

static int plain_open(struct plain *p, const char *path) {
  if (sqlite3_open(path, &p->db) != SQLITE_OK)
    return -1;
  sqlite3_busy_timeout(p->db, 10000);
  char *msg = NULL;
  if (sqlite3_exec(p->db,
                   "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
                   "DROP TABLE IF EXISTS bench_plain_samples;"
                   "CREATE TABLE bench_plain_samples(series_id INTEGER NOT NULL, t INTEGER NOT NULL,"
                   " v REAL NOT NULL, PRIMARY KEY(series_id, t)) WITHOUT ROWID",
                   NULL, NULL, &msg) != SQLITE_OK ||
      sqlite3_prepare_v2(p->db, "INSERT INTO bench_plain_samples VALUES(?,?,?)", -1, &p->ins, NULL) != SQLITE_OK) {
    fprintf(stderr, "store_bench: plain table: %s\n", msg ? msg : sqlite3_errmsg(p->db));
    sqlite3_free(msg);
    return -1;
  }
  return 0;
}

static int plain_append(struct plain *p, const struct gs_batch *b, int64_t t0) {
  if (sqlite3_exec(p->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return -1;
  for (size_t i = 0; i < b->n_points; i++) {
    sqlite3_reset(p->ins);
    sqlite3_bind_int64(p->ins, 1, b->points[i].series);
    sqlite3_bind_int64(p->ins, 2, b->points[i].t_ns - t0);
    sqlite3_bind_double(p->ins, 3, b->points[i].v);
    if (sqlite3_step(p->ins) != SQLITE_DONE)
      return -1;
  }
  return sqlite3_exec(p->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

/* Bytes in the pages of the named tables/indexes (dbstat), or -1 when dbstat is not compiled in. */
static double table_bytes(sqlite3 *db, const char *where) {
  char sql[512];
  snprintf(sql, sizeof sql, "SELECT sum(pgsize) FROM dbstat WHERE %s", where);
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return -1;
  double v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_double(st, 0) : -1;
  sqlite3_finalize(st);
  return v;
}

static double query_double(sqlite3 *db, const char *sql, const char *arg) {
  sqlite3_stmt *st;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    return NAN;
  if (arg)
    sqlite3_bind_text(st, 1, arg, -1, SQLITE_STATIC);
  double v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_double(st, 0) : NAN;
  sqlite3_finalize(st);
  return v;
}

/* ---- the 1,000-point chart ---- */

enum { CHART_POINTS = 1000 };

struct chart {
  int64_t t0, span;
  double mn[CHART_POINTS], mx[CHART_POINTS], sum[CHART_POINTS];
  int64_t n[CHART_POINTS];
};

static void chart_init(struct chart *c, int64_t t0, int64_t t1) {
  memset(c, 0, sizeof *c);
  c->t0 = t0;
  c->span = t1 - t0 + 1;
}

static void chart_add(struct chart *c, int64_t t, double mn, double mx, double mean, int64_t n) {
  int64_t i = (t - c->t0) * CHART_POINTS / c->span;
  if (i < 0 || i >= CHART_POINTS)
    return;
  if (!c->n[i] || mn < c->mn[i])
    c->mn[i] = mn;
  if (!c->n[i] || mx > c->mx[i])
    c->mx[i] = mx;
  c->sum[i] += mean * (double)n;
  c->n[i] += n;
}

static int chart_raw(void *u, int64_t t, double v) {
  chart_add(u, t, v, v, v, 1);
  return 0;
}

static int chart_buckets(const struct chart *c) {
  int k = 0;
  for (int i = 0; i < CHART_POINTS; i++)
    k += c->n[i] > 0;
  return k;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         (double)ru.ru_stime.tv_usec / 1e6;
}

/* ---- PostgreSQL ---- */

static int is_pg(const char *url) {
  return !strncmp(url, "postgresql://", 13) || !strncmp(url, "postgres://", 11);
}

/* Drops the URL's database (connected to the server's "postgres" database), so the store makes it
 * fresh. Returns 0 or -1 with a message. */
static int pg_fresh(const char *url) {
  char db[256] = "";
  PQconninfoOption *o = PQconninfoParse(url, NULL);
  for (PQconninfoOption *p = o; p && p->keyword; p++)
    if (!strcmp(p->keyword, "dbname") && p->val)
      snprintf(db, sizeof db, "%s", p->val);
  PQconninfoFree(o);
  const char *keys[] = {"dbname", "dbname", NULL}, *vals[] = {url, "postgres", NULL};
  PGconn *c = PQconnectdbParams(keys, vals, 1);
  int rc = -1;
  if (PQstatus(c) == CONNECTION_OK && db[0]) {
    char *id = PQescapeIdentifier(c, db, strlen(db)), sql[400];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s", id);
    PQfreemem(id);
    PGresult *r = PQexec(c, sql);
    rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -1;
    if (rc)
      fprintf(stderr, "store_bench: %s", PQresultErrorMessage(r));
    PQclear(r);
  } else
    fprintf(stderr, "store_bench: cannot reach the server: %s", PQerrorMessage(c));
  PQfinish(c);
  return rc;
}

static double pg_value(PGconn *c, const char *sql) {
  PGresult *r = PQexec(c, sql);
  double v = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)
                 ? strtod(PQgetvalue(r, 0, 0), NULL)
                 : NAN;
  PQclear(r);
  return v;
}

/* The sizes of a PostgreSQL store: chunks (table with its TOAST, without indexes), its indexes,
 * rollups, and the encoded payload, after a VACUUM (the open chunks rewritten each flush leave dead
 * row versions behind until autovacuum reclaims them). */
static void pg_sizes(const char *url, double *chunks, double *chunk_index, double *rollups, double *payload) {
  const char *keys[] = {"dbname", NULL}, *vals[] = {url, NULL};
  PGconn *c = PQconnectdbParams(keys, vals, 1);
  *chunks = *chunk_index = *rollups = *payload = NAN;
  if (PQstatus(c) == CONNECTION_OK) {
    PQclear(PQexec(c, "VACUUM chunks"));
    *chunks = pg_value(c, "SELECT pg_table_size('chunks')");
    *chunk_index = pg_value(c, "SELECT pg_indexes_size('chunks')");
    *rollups = pg_value(c, "SELECT pg_total_relation_size('rollup_blocks')");
    *payload = pg_value(c, "SELECT sum(octet_length(data)) FROM chunks");
  }
  PQfinish(c);
}

/* ---- N agents at once ---- */

/* One agent: its own run of 8 GPUs x 6 metrics and 60 host series at 10 Hz, one append per second
 * paced in real time for `seconds`; writes its slowest and mean append time (s) to fd. */
static int agent_child(const char *url, int seconds, int fd) {
  struct store *st = store_open(url);
  if (!st) {
    fprintf(stderr, "store_bench: agent: %s\n", gs_last_error());
    return 1;
  }
  enum { GPUS = 8, HOST = 60, HZ = 10 };
  int nseries = GPUS * N_METRICS + HOST;
  int64_t mono0 = 1000000000000LL;
  struct store_run run = {.interval_ns = 100000000LL, .agent_pid = getpid(), .mono_start_ns = mono0, .exit_code = 0};
  snprintf(run.name, sizeof run.name, "agent-%d", getpid());
  run.start_wall_ns = (int64_t)(now_s(CLOCK_REALTIME) * 1e9);
  if (st->run_begin(st, &run))
    return 1;
  struct gs_series_def *defs = calloc((size_t)nseries, sizeof *defs);
  char(*labels)[24] = calloc((size_t)nseries, sizeof *labels);
  struct gs_batch b = {.cap_points = (size_t)nseries * HZ};
  b.points = calloc(b.cap_points, sizeof *b.points);
  struct gpu_state dev[GPUS];
  if (!defs || !labels || !b.points)
    return 1;
  for (int i = 0; i < nseries; i++) {
    int gpu = i < GPUS * N_METRICS;
    snprintf(labels[i], sizeof labels[i], gpu ? "gpu=%d" : "cpu=%d", gpu ? i / N_METRICS : i - GPUS * N_METRICS);
    defs[i] = (struct gs_series_def){.id = i,
                                     .source = gpu ? "nvml" : "host",
                                     .name = gpu ? (char *)metric_names[i % N_METRICS] : "host.cpu.busy_pct",
                                     .labels = labels[i],
                                     .unit = gpu ? (char *)metric_units[i % N_METRICS] : "%",
                                     .kind = GS_GAUGE};
  }
  for (int g = 0; g < GPUS; g++)
    dev[g] = (struct gpu_state){.temp = 45,
                                .power = 210,
                                .mem_used = 118.0 * 1073741824.0,
                                .sm_clock = 1980,
                                .rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(g + 1 + getpid())};
  b.series = defs;
  b.n_series = (size_t)nseries;
  double worst = 0, total = 0, start = now_s(CLOCK_MONOTONIC);
  uint64_t rng = (uint64_t)getpid() * 0x2545F4914F6CDD1DULL;
  for (int sec = 0; sec < seconds; sec++) {
    b.n_points = 0;
    for (int64_t k = (int64_t)sec * HZ; k < (int64_t)(sec + 1) * HZ; k++) {
      for (int g = 0; g < GPUS; g++) {
        gpu_tick(&dev[g], g, k, HZ);
        for (int m = 0; m < N_METRICS; m++)
          b.points[b.n_points++] = (struct gs_point){
              .series = g * N_METRICS + m, .t_ns = mono0 + k * 100000000LL, .v = metric_value(&dev[g], m)};
      }
      for (int h = 0; h < HOST; h++)
        b.points[b.n_points++] = (struct gs_point){
            .series = GPUS * N_METRICS + h, .t_ns = mono0 + k * 100000000LL, .v = (double)(rnd(&rng) % 1000) / 10};
    }
    double t0 = now_s(CLOCK_MONOTONIC);
    if (st->run_append(st, &run, &b)) {
      fprintf(stderr, "store_bench: agent append: %s\n", gs_last_error());
      return 1;
    }
    double d = now_s(CLOCK_MONOTONIC) - t0;
    worst = d > worst ? d : worst;
    total += d;
    b.n_series = 0;
    double next = start + sec + 1, now = now_s(CLOCK_MONOTONIC);
    if (next > now)
      usleep((useconds_t)((next - now) * 1e6));
  }
  snprintf(run.status, sizeof run.status, "finished");
  run.end_wall_ns = run.start_wall_ns + (int64_t)seconds * 1000000000LL;
  double t0 = now_s(CLOCK_MONOTONIC);
  int rc = st->run_end(st, &run);
  double end = now_s(CLOCK_MONOTONIC) - t0;
  st->close(st);
  double out[3] = {worst, total / seconds, end};
  return rc || write(fd, out, sizeof out) != (ssize_t)sizeof out;
}

static int agents_mode(const char *url, int n, int seconds) {
  if (is_pg(url) && pg_fresh(url))
    return 1;
  struct store *st = store_open(url); /* the schema once, before the agents race for it */
  if (!st) {
    fprintf(stderr, "store_bench: %s\n", gs_last_error());
    return 1;
  }
  st->close(st);
  int fds[2];
  if (pipe(fds))
    return 1;
  printf("store_bench: %s, %d agents at once, each 8 GPUs x 6 metrics + 60 host series at 10 Hz (108 series,"
         " 1,080 points per 1 s flush) for %d s\n",
         url, n, seconds);
  fflush(stdout);
  for (int i = 0; i < n; i++)
    if (fork() == 0) {
      close(fds[0]);
      _exit(agent_child(url, seconds, fds[1]));
    }
  close(fds[1]);
  double worst = 0, mean = 0, end = 0;
  int ok = 0, failed = 0;
  for (int i = 0; i < n; i++) {
    int status;
    wait(&status);
    failed += !WIFEXITED(status) || WEXITSTATUS(status);
  }
  double r[3];
  while (read(fds[0], r, sizeof r) == (ssize_t)sizeof r) {
    worst = r[0] > worst ? r[0] : worst;
    mean += r[1];
    end = r[2] > end ? r[2] : end;
    ok++;
  }
  printf("agents  %d of %d finished; slowest flush %.1f ms, mean flush %.2f ms, slowest run_end %.1f ms"
         " (flush period 1000 ms)\n",
         ok, n, worst * 1e3, ok ? mean / ok * 1e3 : NAN, end * 1e3);
  printf("targets %d agents, none behind its flush period: %s\n", n,
         ok == n && !failed && worst < 1.0 ? "met" : "MISSED");
  return ok == n && !failed ? 0 : 1;
}

static void usage(FILE *out) {
  fprintf(out, "usage: store_bench [--url URL] [--days D | --hours H] [--gpus G] [--hz HZ] [--plain-hours H]\n"
               "  --url URL          the store (default sqlite:///tmp/gpuscope-store-bench.db, recreated)\n"
               "  --days D, --hours H  span of the fabricated run (default 7 days)\n"
               "  --gpus G           GPUs (default 8); --hz HZ samples per second (default 10)\n"
               "  --plain-hours H    span written to the one-row-per-sample table (default 1; 0 = skip)\n"
               "  --keep             do not delete the database afterwards\n"
               "  --per-second       one append per second of samples (default: the agent's flush period,\n"
               "                     10 ticks within 1-10 s)\n"
               "  --agents N         N agents writing the store at once instead (with --seconds S, default 60)\n");
}

int main(int argc, char **argv) {
  const char *url = "sqlite:///tmp/gpuscope-store-bench.db";
  double hours = 24 * 7, plain_hours = 1;
  int gpus = 8, hz = 10, keep = 0, agents = 0, seconds = 60, per_second = 0;
  static const struct option opts[] = {
      {"url", required_argument, 0, 'u'},    {"days", required_argument, 0, 'd'},
      {"hours", required_argument, 0, 'H'},  {"gpus", required_argument, 0, 'g'},
      {"hz", required_argument, 0, 'z'},     {"plain-hours", required_argument, 0, 'p'},
      {"keep", no_argument, 0, 'k'},         {"per-second", no_argument, 0, 'P'},
      {"agents", required_argument, 0, 'a'}, {"seconds", required_argument, 0, 's'},
      {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'u':
      url = optarg;
      break;
    case 'd':
      hours = atof(optarg) * 24;
      break;
    case 'H':
      hours = atof(optarg);
      break;
    case 'g':
      gpus = atoi(optarg);
      break;
    case 'z':
      hz = atoi(optarg);
      break;
    case 'p':
      plain_hours = atof(optarg);
      break;
    case 'k':
      keep = 1;
      break;
    case 'P':
      per_second = 1;
      break;
    case 'a':
      agents = atoi(optarg);
      break;
    case 's':
      seconds = atoi(optarg);
      break;
    case 'h':
      usage(stdout);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (hours <= 0 || gpus <= 0 || hz <= 0 || gpus > 64) {
    usage(stderr);
    return 2;
  }
  if (agents > 0)
    return agents_mode(url, agents, seconds > 0 ? seconds : 60);
  if (is_pg(url) && pg_fresh(url))
    return 1;
  const char *path = !strncmp(url, "sqlite://", 9) ? url + 9 : strstr(url, "://") ? NULL : url;
  if (path) { /* a fresh file each time */
    char p[1100];
    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path), unlink(p);
    snprintf(p, sizeof p, "%s-shm", path), unlink(p);
  }
  struct store *st = store_open(url);
  if (!st) {
    fprintf(stderr, "store_bench: %s\n", gs_last_error());
    return 1;
  }

  const int nseries = gpus * N_METRICS;
  const int64_t ticks = (int64_t)llround(hours * 3600 * hz), step_ns = 1000000000LL / hz;
  const int64_t mono0 = 1000000000000LL; /* the agent's monotonic start (any value) */
  struct store_run run = {.interval_ns = step_ns, .exit_code = 0, .agent_pid = getpid(), .mono_start_ns = mono0};
  snprintf(run.name, sizeof run.name, "store-bench");
  snprintf(run.command, sizeof run.command, "store_bench --hours %g --gpus %d --hz %d", hours, gpus, hz);
  run.start_wall_ns = (int64_t)(now_s(CLOCK_REALTIME) * 1e9);
  if (st->run_begin(st, &run)) {
    fprintf(stderr, "store_bench: %s\n", gs_last_error());
    return 1;
  }

  /* The batch is rebuilt in place each second: series definitions only in the first one. */
  struct gs_batch b = {0};
  struct gs_series_def *defs = calloc((size_t)nseries, sizeof *defs);
  char(*labels)[16] = calloc((size_t)gpus, sizeof *labels);
  /* ticks per append: the agent's flush period, or a second */
  const int64_t per_flush = per_second ? hz : agent_flush_default(step_ns) / step_ns;
  b.cap_points = (size_t)nseries * (size_t)per_flush;
  b.points = calloc(b.cap_points, sizeof *b.points);
  struct gpu_state *dev = calloc((size_t)gpus, sizeof *dev);
  if (!defs || !labels || !b.points || !dev)
    return 1;
  for (int g = 0; g < gpus; g++) {
    snprintf(labels[g], sizeof labels[g], "gpu=%d", g);
    dev[g] = (struct gpu_state){.temp = 45,
                                .power = 210,
                                .mem_used = 118.0 * 1073741824.0,
                                .sm_clock = 1980,
                                .rng = 0x9e3779b97f4a7c15ULL * (uint64_t)(g + 1)};
    for (int m = 0; m < N_METRICS; m++)
      defs[g * N_METRICS + m] = (struct gs_series_def){.id = g * N_METRICS + m,
                                                       .source = "nvml",
                                                       .name = (char *)metric_names[m],
                                                       .labels = labels[g],
                                                       .unit = (char *)metric_units[m],
                                                       .kind = GS_GAUGE};
  }
  b.series = defs;
  b.n_series = (size_t)nseries;

  struct plain plain = {0};
  int64_t plain_ticks = (int64_t)llround(plain_hours * 3600 * hz);
  if (plain_ticks > ticks)
    plain_ticks = ticks;
  if (!path || plain_ticks <= 0)
    plain_ticks = 0;
  if (plain_ticks && plain_open(&plain, path))
    plain_ticks = 0;

  printf("store_bench: %s, %d GPUs x %d metrics at %d Hz for %.1f h = %lld points (%lld batches of %g s%s)\n", url,
         gpus, N_METRICS, hz, hours, (long long)(ticks * nseries), (long long)((ticks + per_flush - 1) / per_flush),
         (double)per_flush / hz, per_second ? ", --per-second" : ": the agent's flush period");
  fflush(stdout);
  double wall = 0, cpu = 0, p_wall = 0, p_cpu = 0, wall_at_plain = 0, cpu_at_plain = 0;
  int64_t points = 0, p_points = 0, points_at_plain = 0;
  double next_report = now_s(CLOCK_MONOTONIC) + 30;
  for (int64_t k = 0; k < ticks;) {
    b.n_points = 0;
    int64_t end = k + per_flush < ticks ? k + per_flush : ticks;
    for (; k < end; k++)
      for (int g = 0; g < gpus; g++) {
        gpu_tick(&dev[g], g, k, hz);
        for (int m = 0; m < N_METRICS; m++)
          b.points[b.n_points++] = (struct gs_point){
              .series = g * N_METRICS + m, .t_ns = mono0 + k * step_ns, .v = metric_value(&dev[g], m)};
      }
    double w0 = now_s(CLOCK_MONOTONIC), c0 = cpu_s();
    if (st->run_append(st, &run, &b)) {
      fprintf(stderr, "store_bench: run_append: %s\n", gs_last_error());
      return 1;
    }
    double w1 = now_s(CLOCK_MONOTONIC), c1 = cpu_s();
    wall += w1 - w0, cpu += c1 - c0, points += (int64_t)b.n_points;
    b.n_series = 0;
    if (plain_ticks && k <= plain_ticks) {
      if (plain_append(&plain, &b, mono0)) {
        fprintf(stderr, "store_bench: plain insert: %s\n", sqlite3_errmsg(plain.db));
        return 1;
      }
      double w2 = now_s(CLOCK_MONOTONIC), c2 = cpu_s();
      p_wall += w2 - w1, p_cpu += c2 - c1, p_points += (int64_t)b.n_points;
      if (k >= plain_ticks)
        wall_at_plain = wall, cpu_at_plain = cpu, points_at_plain = points;
    }
    if (w1 > next_report) {
      fprintf(stderr, "  ... %.0f%% (%.2f M points/s so far)\n", 100.0 * (double)k / (double)ticks,
              (double)points / wall / 1e6);
      next_report = w1 + 30;
    }
  }
  run.end_wall_ns = run.start_wall_ns + ticks * step_ns;
  snprintf(run.status, sizeof run.status, "finished");
  double w0 = now_s(CLOCK_MONOTONIC), c0 = cpu_s();
  if (st->run_end(st, &run)) {
    fprintf(stderr, "store_bench: run_end: %s\n", gs_last_error());
    return 1;
  }
  double end_wall = now_s(CLOCK_MONOTONIC) - w0, end_cpu = cpu_s() - c0;

  /* ---- sizes ---- */
  sqlite3 *db = NULL;
  double chunk_pages = -1, chunk_payload = NAN, rollup_pages = -1, plain_pages = -1, file_bytes = NAN;
  double per_metric[N_METRICS];
  for (int m = 0; m < N_METRICS; m++)
    per_metric[m] = NAN;
  if (path && sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
    chunk_pages = table_bytes(db, "name = 'chunks'");
    rollup_pages = table_bytes(db, "name = 'rollups'");
    plain_pages = plain_ticks ? table_bytes(db, "name = 'bench_plain_samples'") : -1;
    chunk_payload = query_double(db, "SELECT sum(length(data)) FROM chunks", NULL);
    for (int m = 0; m < N_METRICS; m++)
      per_metric[m] = query_double(db,
                                   "SELECT sum(length(c.data)) * 1.0 / sum(c.n) FROM chunks c JOIN series s"
                                   " ON s.id = c.series_id WHERE s.name = ?",
                                   metric_names[m]);
    struct stat sb;
    if (stat(path, &sb) == 0)
      file_bytes = (double)sb.st_size;
  }

  double pg_chunks = NAN, pg_index = NAN, pg_rollups = NAN, pg_payload = NAN;
  if (is_pg(url))
    pg_sizes(url, &pg_chunks, &pg_index, &pg_rollups, &pg_payload);
  printf("ingest  gpuscope chunks: %.2f M points/s wall, %.2f M points/s per CPU-s (%.1f s wall, %.1f CPU-s for "
         "%lld points)\n",
         (double)points / wall / 1e6, (double)points / cpu / 1e6, wall, cpu, (long long)points);
  printf("run_end (rollups: status, 1 s/10 s/1 min levels): %.2f s wall, %.2f CPU-s\n", end_wall, end_cpu);
  if (chunk_pages >= 0)
    printf("size    gpuscope chunks: %.3f bytes/point on disk (table pages), %.3f bytes/point encoded; rollups "
           "%.3f bytes/point; file %.1f MiB%s\n",
           chunk_pages / (double)points, chunk_payload / (double)points, rollup_pages / (double)points,
           file_bytes / 1048576.0, plain_ticks ? " (with the plain table)" : "");
  else if (path)
    printf("size    file %.1f MiB = %.3f bytes/point (this SQLite has no dbstat)\n", file_bytes / 1048576.0,
           file_bytes / (double)points);
  if (isfinite(pg_chunks))
    printf("size    gpuscope chunks (PostgreSQL): %.3f bytes/point in the table (heap and TOAST, after VACUUM), "
           "%.3f with its index, %.3f encoded; rollups %.3f bytes/point\n",
           pg_chunks / (double)points, (pg_chunks + pg_index) / (double)points, pg_payload / (double)points,
           pg_rollups / (double)points);
  if (isfinite(per_metric[0])) {
    printf("size    per metric (encoded bytes/point):");
    for (int m = 0; m < N_METRICS; m++)
      printf(" %s %.3f%s", metric_names[m] + 4, per_metric[m], m + 1 < N_METRICS ? "," : "\n");
  }
  if (plain_ticks) {
    printf("ingest  plain table (%.1f h, %lld rows): %.2f M points/s wall, %.2f M points/s per CPU-s; gpuscope on "
           "the same span: %.2f M points/s wall, %.2f per CPU-s\n",
           (double)plain_ticks / hz / 3600, (long long)p_points, (double)p_points / p_wall / 1e6,
           (double)p_points / p_cpu / 1e6, (double)points_at_plain / wall_at_plain / 1e6,
           (double)points_at_plain / cpu_at_plain / 1e6);
    if (plain_pages >= 0)
      printf("size    plain table: %.2f bytes/point on disk (%.1fx gpuscope's chunks)\n",
             plain_pages / (double)p_points, (plain_pages / (double)p_points) / (chunk_pages / (double)points));
  }

  /* ---- the whole-run 1,000-point chart of one series ---- */
  struct store_series *ser = NULL;
  size_t nser = 0;
  if (st->series_list(st, run.id, &ser, &nser) || nser == 0) {
    fprintf(stderr, "store_bench: series_list: %s\n", gs_last_error());
    return 1;
  }
  long si = store_series_find(ser, nser, "nvml", "gpu.util_pct", "gpu=0");
  if (si < 0) {
    fprintf(stderr, "store_bench: series gpu.util_pct gpu=0 not found\n");
    return 1;
  }
  int64_t sid = ser[si].id, t_first = ser[si].t_first, t_last = ser[si].t_last;
  static const int64_t res[] = {60000000000LL, 10000000000LL, 1000000000LL};
  int64_t use_res = res[2];
  for (size_t r = 0; r < 3; r++) /* the coarsest rollup that still gives 1,000 buckets */
    if ((t_last - t_first) / res[r] >= CHART_POINTS) {
      use_res = res[r];
      break;
    }
  enum { REPS = 5 };
  double t_roll[REPS], t_raw[REPS], t_plain[REPS], t_raw_span[REPS];
  static struct chart ch;
  int buckets_roll = 0, buckets_raw = 0, buckets_plain = 0;
  size_t roll_rows = 0;
  for (int rep = 0; rep < REPS; rep++) {
    double q0 = now_s(CLOCK_MONOTONIC);
    int64_t *tt;
    double *mn, *mx, *mean;
    size_t n;
    if (st->rollups_read(st, sid, use_res, &tt, &mn, &mx, &mean, &n)) {
      fprintf(stderr, "store_bench: rollups_read: %s\n", gs_last_error());
      return 1;
    }
    chart_init(&ch, t_first, t_last);
    for (size_t i = 0; i < n; i++)
      chart_add(&ch, tt[i], mn[i], mx[i], mean[i], 1);
    free(tt), free(mn), free(mx), free(mean);
    t_roll[rep] = now_s(CLOCK_MONOTONIC) - q0;
    buckets_roll = chart_buckets(&ch);
    roll_rows = n;

    q0 = now_s(CLOCK_MONOTONIC);
    chart_init(&ch, t_first, t_last);
    if (st->samples_read(st, sid, INT64_MIN, INT64_MAX, chart_raw, &ch)) {
      fprintf(stderr, "store_bench: samples_read: %s\n", gs_last_error());
      return 1;
    }
    t_raw[rep] = now_s(CLOCK_MONOTONIC) - q0;
    buckets_raw = chart_buckets(&ch);

    if (plain_ticks && db) {
      q0 = now_s(CLOCK_MONOTONIC);
      sqlite3_stmt *q;
      int64_t span = plain_ticks * step_ns;
      if (sqlite3_prepare_v2(db,
                             "SELECT (t * 1000) / ?2, min(v), max(v), avg(v), count(*) FROM bench_plain_samples"
                             " WHERE series_id = 0 GROUP BY 1",
                             -1, &q, NULL) != SQLITE_OK) {
        fprintf(stderr, "store_bench: plain query: %s\n", sqlite3_errmsg(db));
        return 1;
      }
      sqlite3_bind_int64(q, 2, span);
      chart_init(&ch, 0, CHART_POINTS - 1);
      while (sqlite3_step(q) == SQLITE_ROW)
        chart_add(&ch, sqlite3_column_int64(q, 0), sqlite3_column_double(q, 1), sqlite3_column_double(q, 2),
                  sqlite3_column_double(q, 3), sqlite3_column_int64(q, 4));
      sqlite3_finalize(q);
      t_plain[rep] = now_s(CLOCK_MONOTONIC) - q0;
      buckets_plain = chart_buckets(&ch);
      q0 = now_s(CLOCK_MONOTONIC); /* gpuscope's raw chunks over the same span */
      chart_init(&ch, 0, span - 1);
      if (st->samples_read(st, sid, 0, span - 1, chart_raw, &ch)) {
        fprintf(stderr, "store_bench: samples_read: %s\n", gs_last_error());
        return 1;
      }
      t_raw_span[rep] = now_s(CLOCK_MONOTONIC) - q0;
    }
  }
  printf("query   1,000-point chart of gpu.util_pct gpu=0 over the whole run (%lld points): rollups_read %.2f ms "
         "(%zu rollup buckets at %lld s, %d buckets), raw samples_read %.1f ms (%d buckets); median of %d\n",
         (long long)ser[si].count, median(t_roll, REPS) * 1e3, roll_rows, (long long)(use_res / 1000000000LL),
         buckets_roll, median(t_raw, REPS) * 1e3, buckets_raw, REPS);
  if (plain_ticks && db)
    printf("query   the same chart over the plain table's %.1f h (%lld points of the series): plain GROUP BY %.1f ms "
           "(%d buckets), gpuscope raw samples_read %.2f ms\n",
           (double)plain_ticks / hz / 3600, (long long)plain_ticks, median(t_plain, REPS) * 1e3, buckets_plain,
           median(t_raw_span, REPS) * 1e3);
  double rate = (double)points / wall / 1e6, bpp = chunk_pages >= 0 ? chunk_pages / (double)points : NAN;
  const char *verdict = bpp < 2 ? "met" : isfinite(bpp) ? "MISSED" : "not measured";
  printf("targets ingest >= 1 M points/s: %s (%.2f); < 2 bytes/point (samples: chunk pages): %s (%.3f; with the "
         "rollups %.3f)\n",
         rate >= 1 ? "met" : "MISSED", rate, verdict, bpp, bpp + rollup_pages / (double)points);
  if (is_pg(url)) {
    double chart = median(t_roll, REPS) * 1e3;
    printf("targets (PostgreSQL) ingest >= 0.5 M points/s: %s (%.2f); 1,000-point chart < 20 ms: %s (%.2f ms); "
           "bytes/point %.3f, %.3f with the rollups (compare with SQLite's run: within 1.5x)\n",
           rate >= 0.5 ? "met" : "MISSED", rate, chart < 20 ? "met" : "MISSED", chart, pg_chunks / (double)points,
           (pg_chunks + pg_rollups) / (double)points);
  }
  free(ser);
  sqlite3_close(db);
  if (plain.db) {
    sqlite3_finalize(plain.ins);
    sqlite3_close(plain.db);
  }
  st->close(st);
  if (path && !keep) {
    char p[1100];
    unlink(path);
    snprintf(p, sizeof p, "%s-wal", path), unlink(p);
    snprintf(p, sizeof p, "%s-shm", path), unlink(p);
  }
  free(defs), free(labels), free(b.points), free(dev);
  return 0;
}
