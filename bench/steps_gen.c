/* bench/steps_gen: makes a stored run of many training steps, as the agent stores the client's steps
 * (source "client", step.n / data_s / compute_s / total_s / samples, one point each per step, same
 * timestamp), fed through the store interface in batches and ended with st->run_end (rollups). For
 * the report's memory test (tests/integration/test_report_memory.py) and bench/: a run longer than the
 * run view holds (RUNVIEW_MAX_STEPS). Every step takes STEP_MS (DATA_SHARE of it data wait, default a
 * third) and carries 32 samples; every STALL_EVERY-th is followed by a STALL_MS pause.
 * usage: steps_gen --url URL --steps N [--step-ms MS] [--stall-every K] [--stall-ms MS] [--name NAME]
 *                  [--data-share F]
 * Prints the run id. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

int main(int argc, char **argv) {
  const char *url = NULL, *name = "steps-gen";
  long long steps = 0, stall_every = 0;
  double step_ms = 1, stall_ms = 0, data_share = 1.0 / 3;
  static const struct option opts[] = {
      {"url", required_argument, 0, 'u'},        {"steps", required_argument, 0, 's'},
      {"step-ms", required_argument, 0, 'm'},    {"stall-every", required_argument, 0, 'e'},
      {"stall-ms", required_argument, 0, 'p'},   {"name", required_argument, 0, 'n'},
      {"data-share", required_argument, 0, 'd'}, {0, 0, 0, 0}};
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (c) {
    case 'u':
      url = optarg;
      break;
    case 's':
      steps = atoll(optarg);
      break;
    case 'm':
      step_ms = atof(optarg);
      break;
    case 'e':
      stall_every = atoll(optarg);
      break;
    case 'p':
      stall_ms = atof(optarg);
      break;
    case 'n':
      name = optarg;
      break;
    case 'd':
      data_share = atof(optarg);
      break;
    default:
      fprintf(stderr, "usage: steps_gen --url URL --steps N [--step-ms MS] [--stall-every K] [--stall-ms MS] "
                      "[--name NAME] [--data-share F]\n");
      return 2;
    }
  }
  if (!url || steps < 1 || !(step_ms > 0) || stall_every < 0 || stall_ms < 0 || !(data_share >= 0 && data_share <= 1)) {
    fprintf(stderr, "steps_gen: bad arguments (--url and --steps are required)\n");
    return 2;
  }
  struct store *st = store_open(url);
  if (!st) {
    fprintf(stderr, "steps_gen: %s\n", gs_last_error());
    return 1;
  }
  static const char *const names[] = {"step.n", "step.data_s", "step.compute_s", "step.total_s", "step.samples"};
  static const char *const units[] = {"count", "s", "s", "s", "count"};
  enum { NS = 5 };
  const int64_t mono0 = 1000000000000LL, step_ns = (int64_t)llround(step_ms * 1e6),
                stall_ns = (int64_t)llround(stall_ms * 1e6);
  struct gs_series_def defs[NS];
  for (int i = 0; i < NS; i++)
    defs[i] = (struct gs_series_def){.id = i,
                                     .source = "client",
                                     .name = (char *)names[i],
                                     .labels = "",
                                     .unit = (char *)units[i],
                                     .kind = GS_GAUGE};
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct store_run run = {.interval_ns = 1000000000LL, .exit_code = 0, .agent_pid = getpid(), .mono_start_ns = mono0};
  snprintf(run.name, sizeof run.name, "%s", name);
  snprintf(run.command, sizeof run.command, "steps_gen --steps %lld", steps);
  int64_t span = steps * step_ns + (stall_every ? steps / stall_every * stall_ns : 0);
  run.start_wall_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec - span;
  if (st->run_begin(st, &run)) {
    fprintf(stderr, "steps_gen: %s\n", gs_last_error());
    return 1;
  }
  const size_t per_batch = 100000;
  struct gs_batch b = {.series = defs, .n_series = NS, .cap_points = per_batch * NS};
  if (!(b.points = malloc(b.cap_points * sizeof *b.points)))
    return 1;
  int64_t t = 0;
  for (long long k = 0; k < steps;) {
    b.n_points = 0;
    for (long long e = k + (long long)per_batch; k < e && k < steps; k++) {
      t += step_ns;
      double total = step_ns / 1e9, data = total * data_share;
      double v[NS] = {(double)k, data, total - data, total, 32};
      for (int i = 0; i < NS; i++)
        b.points[b.n_points++] = (struct gs_point){.series = i, .t_ns = mono0 + t, .v = v[i]};
      if (stall_every && (k + 1) % stall_every == 0)
        t += stall_ns;
    }
    if (st->run_append(st, &run, &b)) {
      fprintf(stderr, "steps_gen: %s\n", gs_last_error());
      return 1;
    }
    b.n_series = 0; /* definitions go with the first batch only */
  }
  snprintf(run.status, sizeof run.status, "finished");
  run.end_wall_ns = run.start_wall_ns + t;
  if (st->run_end(st, &run)) {
    fprintf(stderr, "steps_gen: %s\n", gs_last_error());
    return 1;
  }
  printf("%s\n", run.id);
  st->close(st);
  free(b.points);
  return 0;
}
