/* bench/serve_gen: makes a long stored run for `gpuscope serve`'s API test and benchmark — G GPUs
 * sampled at HZ for a span, utilisation busy (97-100 %) except one short dip to 0 on GPU 0 at a
 * given time, fed through the store interface as the agent's writer does (st->run_append batches,
 * then st->run_end, which computes the rollups, and the doctor's findings stored as the agent stores
 * them at a run's end). The dip is what a downsampled chart must not lose.
 * usage: serve_gen --url URL [--days D | --hours H] [--gpus G] [--hz HZ] [--dip-at S] [--dip-ms MS]
 *                  [--name NAME] [--metrics N]
 * Prints the run id. */
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

int main(int argc, char **argv) {
  const char *url = NULL, *name = "serve-gen";
  double hours = 24 * 7, dip_at = -1, dip_ms = 200;
  int gpus = 1, hz = 10, metrics = 1;
  static const struct option opts[] = {{"url", required_argument, 0, 'u'},     {"days", required_argument, 0, 'd'},
                                       {"hours", required_argument, 0, 'H'},   {"gpus", required_argument, 0, 'g'},
                                       {"hz", required_argument, 0, 'z'},      {"dip-at", required_argument, 0, 'a'},
                                       {"dip-ms", required_argument, 0, 'm'},  {"name", required_argument, 0, 'n'},
                                       {"metrics", required_argument, 0, 'M'}, {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
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
    case 'a':
      dip_at = atof(optarg);
      break;
    case 'm':
      dip_ms = atof(optarg);
      break;
    case 'n':
      name = optarg;
      break;
    case 'M':
      metrics = atoi(optarg);
      break;
    default:
      fprintf(stderr, "usage: serve_gen --url URL [--days D | --hours H] [--gpus G] [--hz HZ] [--dip-at S] "
                      "[--dip-ms MS] [--name NAME] [--metrics 1..6]\n");
      return 2;
    }
  }
  if (!url || hours <= 0 || gpus < 1 || gpus > 64 || hz < 1 || hz > 1000 || metrics < 1 || metrics > 6) {
    fprintf(stderr, "serve_gen: bad arguments (--url is required)\n");
    return 2;
  }
  struct store *st = store_open(url);
  if (!st) {
    fprintf(stderr, "serve_gen: %s\n", gs_last_error());
    return 1;
  }
  const int64_t step = 1000000000LL / hz, ticks = (int64_t)llround(hours * 3600 * hz), mono0 = 1000000000000LL;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct store_run run = {.interval_ns = step, .exit_code = 0, .agent_pid = getpid(), .mono_start_ns = mono0};
  snprintf(run.name, sizeof run.name, "%s", name);
  snprintf(run.command, sizeof run.command, "serve_gen --hours %g --gpus %d --hz %d", hours, gpus, hz);
  run.start_wall_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec - (int64_t)(hours * 3600e9);
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
          double v;
          int dip = g == 0 && t >= dip0 && t < dip1;
          switch (m) {
          case 0:
            v = dip ? 0 : 97 + rnd(&rng) % 4;
            break;
          case 1:
            v = dip ? 200 : 640 + rnd(&rng) % 20;
            break;
          case 2:
            v = 70 + (k / (hz * 60)) % 5;
            break;
          case 3:
            v = 120.0 * 1073741824.0;
            break;
          case 4:
            v = dip ? 0 : 88 + rnd(&rng) % 5;
            break;
          default:
            v = 1980;
            break;
          }
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
