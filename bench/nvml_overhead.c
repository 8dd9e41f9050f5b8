/* bench/nvml_overhead: what the NVML collector costs the agent. It opens collector_nvml on the
 * simulated library (8 GPUs from tests/gpusim/scenarios/dips.scn by default), lets its thread sample
 * for SECONDS at INTERVAL_MS while a writer thread drains the sink once a second (as the run loop's
 * writer does), and prints the process's CPU time as a share of one core, minus the CPU time spent
 * inside the simulated library itself (gpusim_cpu_ns: a real driver's cost is the driver's, and
 * the simulator's is not the agent's either way).
 * usage: nvml_overhead_bench [SECONDS [INTERVAL_MS]]  (env: GPUSCOPE_NVML_LIB, GPUSIM_SCENARIO) */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "collect/collect.h"
#include "core/core.h"

struct drain {
  struct gs_sink *sink;
  atomic_int stop;
  long long points, series;
};

static void *drain_main(void *arg) {
  struct drain *d = arg;
  while (!atomic_load(&d->stop)) {
    struct timespec ts = {.tv_sec = 1};
    nanosleep(&ts, NULL);
    struct gs_batch *b = gs_sink_take(d->sink);
    if (b) {
      d->points += (long long)b->n_points;
      d->series += (long long)b->n_series;
      gs_batch_free(b);
    }
  }
  return NULL;
}

static int64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 20;
  int interval_ms = argc > 2 ? atoi(argv[2]) : 100;
  const char *lib = getenv("GPUSCOPE_NVML_LIB");
  if (!lib || !getenv("GPUSIM_SCENARIO") || secs <= 0 || interval_ms <= 0) {
    fprintf(stderr, "usage: GPUSCOPE_NVML_LIB=.../libnvidia-ml.so.1 GPUSIM_SCENARIO=FILE %s [SECONDS [INTERVAL_MS]]\n",
            argv[0]);
    return 2;
  }
  /* Our own reference keeps the simulator mapped after the collector dlclose()s it. */
  void *sim = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  long long (*sim_cpu)(void) = sim ? (long long (*)(void))dlsym(sim, "gpusim_cpu_ns") : NULL;
  long long (*sim_calls)(void) = sim ? (long long (*)(void))dlsym(sim, "gpusim_calls") : NULL;
  if (!sim_cpu || !sim_calls) {
    fprintf(stderr, "nvml_overhead: %s is not the simulator (no gpusim_cpu_ns)\n", lib);
    return 1;
  }
  struct drain d = {.sink = gs_sink_new()};
  if (!d.sink)
    return 1;
  struct collector_opts o = {.root = "/", .interval_ns = interval_ms * 1000000LL};
  char err[256] = "";
  int64_t c0 = cpu_ns(), s0 = sim_cpu(), n0 = sim_calls();
  void *ctx = collector_nvml.open(&o, d.sink, err, sizeof err);
  if (!ctx) {
    fprintf(stderr, "nvml_overhead: collector off: %s\n", err);
    return 1;
  }
  int64_t c1 = cpu_ns(), s1 = sim_cpu();
  pthread_t th;
  pthread_create(&th, NULL, drain_main, &d);
  int64_t w0 = gs_mono_ns();
  struct timespec ts = {.tv_sec = (time_t)secs, .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9)};
  nanosleep(&ts, NULL);
  int64_t w1 = gs_mono_ns(), c2 = cpu_ns(), s2 = sim_cpu(), n2 = sim_calls();
  collector_nvml.summary(ctx, stdout);
  collector_nvml.close(ctx);
  atomic_store(&d.stop, 1);
  pthread_join(th, NULL);
  gs_batch_free(gs_sink_take(d.sink));

  double wall = (double)(w1 - w0) / 1e9;
  double agent = (double)((c2 - c1) - (s2 - s1)) / 1e9; /* steady state, simulator excluded */
  double simulated = (double)(s2 - s1) / 1e9;
  printf("interval %d ms, %.1f s, %lld NVML calls, %lld points stored (%.0f/s)\n", interval_ms, wall,
         (long long)(n2 - n0), d.points, (double)d.points / wall);
  printf("open: %.1f ms CPU (%.1f ms of it in the simulated library)\n", (double)(c1 - c0) / 1e6,
         (double)(s1 - s0) / 1e6);
  printf("inside the simulated library: %.3f s CPU (excluded)\n", simulated);
  printf("NVML collector CPU: %.3f %% of one core (%.1f ms per second; %.1f us per GPU tick)\n", 100 * agent / wall,
         1000 * agent / wall, 1e6 * agent / (wall * 1000.0 / interval_ms * 8));
  gs_sink_free(d.sink);
  dlclose(sim);
  return 0;
}
