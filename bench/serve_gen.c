/* bench/serve_gen: makes a long stored run for `gpuscope serve`'s API test and benchmark — G GPUs
 * sampled at HZ for a span, utilisation busy (97-100 %) except one short dip to 0 on GPU 0 at a
 * given time, fed through the store interface as the agent's writer does (st->run_append batches,
 * then st->run_end, which computes the rollups, and the doctor's findings stored as the agent stores
 * them at a run's end). The dip is what a downsampled chart must not lose.
 * usage: serve_gen --url URL [--days D | --hours H] [--gpus G] [--hz HZ] [--dip-at S] [--dip-ms MS]
 *                  [--name NAME] [--metrics N] [--group NAME] [--host HOST] [--start S]
 * (--group and --host: a node's run of a group; --start: its wall-clock start, seconds since the
 * epoch, so the same run can be made in two stores.) Prints the run id. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "doctor/doctor.h"
#include "store/store.h"

static const char *const names[] = {"gpu.util_pct",       "gpu.power_w",       "gpu.temp_c",
                                    "gpu.mem_used_bytes", "gpu.sm_active_pct", "gpu.sm_clock_mhz"};
static const char *const units[] = {"%", "W", "C", "B", "%", "MHz"};

static uint32_t rnd(uint64_t *s) {
  *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
  return (uint32_t)((*s * 2685821657736338717ULL) >> 32);
}

/* Metric m's value at tick k (GPU 0 in its dip or not). */
static double value(int m, int dip, int64_t k, int hz, uint64_t *rng) {
  switch (m) {
  case 0:
    return dip ? 0 : 97 + rnd(rng) % 4;
  case 1:
    return dip ? 200 : 640 + rnd(rng) % 20;
  case 2:
    return 70 + (k / (hz * 60)) % 5;
  case 3:
    return 120.0 * 1073741824.0;
  case 4:
    return dip ? 0 : 88 + rnd(rng) % 5;
  default:
    return 1980;
  }
}

struct gen_opts {
  const char *url, *name, *group, *host;
  double hours, dip_at, dip_ms, start; /* start: wall-clock seconds, < 0: so that the run ends now */
  int gpus, hz, metrics;
};

/* Parses the options into o; returns -1 to go on, else the exit code. */
static int parse_opts(int argc, char **argv, struct gen_opts *o) {
  static const struct option opts[] = {{"url", required_argument, 0, 'u'},
                                       {"days", required_argument, 0, 'd'},
                                       {"hours", required_argument, 0, 'H'},
                                       {"gpus", required_argument, 0, 'g'},
                                       {"hz", required_argument, 0, 'z'},
                                       {"dip-at", required_argument, 0, 'a'},
                                       {"dip-ms", required_argument, 0, 'm'},
                                       {"name", required_argument, 0, 'n'},
                                       {"metrics", required_argument, 0, 'M'},
                                       {"group", required_argument, 0, 'G'},
                                       {"host", required_argument, 0, 'h'},
                                       {"start", required_argument, 0, 's'},
                                       {0, 0, 0, 0}};
  *o = (struct gen_opts){.name = "serve-gen",
                         .hours = 24 * 7,
                         .dip_at = -1,
                         .dip_ms = 200,
                         .start = -1,
                         .gpus = 1,
                         .hz = 10,
                         .metrics = 1};
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'u':
      o->url = optarg;
      break;
    case 'd':
      o->hours = atof(optarg) * 24;
      break;
    case 'H':
      o->hours = atof(optarg);
      break;
    case 'g':
      o->gpus = atoi(optarg);
      break;
    case 'z':
      o->hz = atoi(optarg);
      break;
    case 'a':
      o->dip_at = atof(optarg);
      break;
    case 'm':
      o->dip_ms = atof(optarg);
      break;
    case 'n':
      o->name = optarg;
      break;
    case 'M':
      o->metrics = atoi(optarg);
      break;
    case 'G':
      o->group = optarg;
      break;
    case 'h':
      o->host = optarg;
      break;
    case 's':
      o->start = atof(optarg);
      break;
    default:
      fprintf(stderr, "usage: serve_gen --url URL [--days D | --hours H] [--gpus G] [--hz HZ] [--dip-at S] "
                      "[--dip-ms MS] [--name NAME] [--metrics 1..6] [--group NAME] [--host HOST] [--start S]\n");
      return 2;
    }
  }
  if (!o->url || o->hours <= 0 || o->gpus < 1 || o->gpus > 64 || o->hz < 1 || o->hz > 1000 || o->metrics < 1 ||
      o->metrics > 6) {
    fprintf(stderr, "serve_gen: bad arguments (--url is required)\n");
    return 2;
  }
  return -1;
}

/* The run's record: ending now unless o->start says when it started. */
static void run_record(const struct gen_opts *o, int64_t step, int64_t mono0, struct store_run *run) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  *run = (struct store_run){.interval_ns = step, .exit_code = 0, .agent_pid = getpid(), .mono_start_ns = mono0};
  snprintf(run->name, sizeof run->name, "%s", o->name);
  snprintf(run->group, sizeof run->group, "%s", o->group ? o->group : "");
  if (o->host)
    snprintf(run->host, sizeof run->host, "%s", o->host);
  snprintf(run->command, sizeof run->command, "serve_gen --hours %g --gpus %d --hz %d", o->hours, o->gpus, o->hz);
  run->start_wall_ns = o->start >= 0 ? (int64_t)llround(o->start * 1e9)
                                     : (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec - (int64_t)(o->hours * 3600e9);
}

int main(int argc, char **argv) {
  struct gen_opts o;
  int prc = parse_opts(argc, argv, &o);
  if (prc >= 0)
    return prc;
  double hours = o.hours, dip_at = o.dip_at, dip_ms = o.dip_ms;
  int gpus = o.gpus, hz = o.hz, metrics = o.metrics;
  struct store *st = store_open(o.url);
  if (!st) {
    fprintf(stderr, "serve_gen: %s\n", gs_last_error());
    return 1;
  }
  const int64_t step = 1000000000LL / hz, ticks = (int64_t)llround(hours * 3600 * hz), mono0 = 1000000000000LL;
  struct store_run run;
  run_record(&o, step, mono0, &run);
  if (st->run_begin(st, &run)) {
    fprintf(stderr, "serve_gen: %s\n", gs_last_error());
    return 1;
  }
  int ns = gpus * metrics;
  struct gs_series_def *defs = calloc((size_t)ns, sizeof *defs);
  char(*labels)[16] = calloc((size_t)gpus, sizeof *labels);
  const int64_t per_batch = (int64_t)hz * 600; /* ten minutes of samples a batch */
  struct gs_batch b = {0};
  b.cap_points = (size_t)(per_batch * ns);
  b.points = malloc(b.cap_points * sizeof *b.points);
  if (!defs || !labels || !b.points)
    return 1;
  for (int g = 0; g < gpus; g++) {
    snprintf(labels[g], sizeof labels[g], "gpu=%d", g);
    for (int m = 0; m < metrics; m++)
      defs[g * metrics + m] = (struct gs_series_def){.id = g * metrics + m,
                                                     .source = "nvml",
                                                     .name = (char *)names[m],
                                                     .labels = labels[g],
                                                     .unit = (char *)units[m],
                                                     .kind = GS_GAUGE};
  }
  b.series = defs;
  b.n_series = (size_t)ns;
  int64_t dip0 = dip_at >= 0 ? (int64_t)llround(dip_at * 1e9) : -1, dip1 = dip0 + (int64_t)llround(dip_ms * 1e6);
  uint64_t rng = 0x9e3779b97f4a7c15ULL;
  for (int64_t k = 0; k < ticks;) {
    b.n_points = 0;
    for (int64_t e = k + per_batch; k < e && k < ticks; k++) {
      int64_t t = k * step;
      for (int g = 0; g < gpus; g++)
        for (int m = 0; m < metrics; m++) {
          int dip = g == 0 && t >= dip0 && t < dip1;
          double v = value(m, dip, k, hz, &rng);
          b.points[b.n_points++] = (struct gs_point){.series = g * metrics + m, .t_ns = mono0 + t, .v = v};
        }
    }
    if (st->run_append(st, &run, &b)) {
      fprintf(stderr, "serve_gen: %s\n", gs_last_error());
      return 1;
    }
    b.n_series = 0; /* definitions go with the first batch only */
  }
  snprintf(run.status, sizeof run.status, "finished");
  run.end_wall_ns = run.start_wall_ns + ticks * step;
  if (st->run_end(st, &run)) {
    fprintf(stderr, "serve_gen: %s\n", gs_last_error());
    return 1;
  }
  size_t nf = 0;
  if (doctor_run(st, run.id, NULL, &nf)) {
    fprintf(stderr, "serve_gen: doctor: %s\n", gs_last_error());
    return 1;
  }
  printf("%s\n", run.id);
  st->close(st);
  free(b.points);
  free(defs);
  free(labels);
  return 0;
}
