/* bench/resolution_probe: what a tracker that polls NVML's instant utilisation sees (issue 6d).
 * Loads an NVML library (the simulated one in the benchmark), then for SECONDS reads GPU 0's
 * nvmlDeviceGetUtilizationRates every 10 ms — the ground truth: each maximal stretch below 50 %
 * is a dip — and evaluates trackers polling every INTERVAL_MS at PHASES evenly spread start
 * offsets (a tracker's phase against the job's rhythm is arbitrary). A tracker "shows" a dip when
 * one of its polls falls inside it. Prints one line per interval:
 *   probe: interval 1000 ms: dips 30, shown min 0 mean 6.0 max 30 (20.0 %) over 100 phases
 * usage: resolution_probe LIB SECONDS INTERVAL_MS [INTERVAL_MS...]   (PHASES = 100) */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*init_fn)(void);
typedef int (*handle_fn)(unsigned, void **);
typedef struct {
  unsigned gpu, memory;
} util_t;
typedef int (*util_fn)(void *, util_t *);

enum { STEP_MS = 10, PHASES = 100, MAX_DIPS = 100000 };

static void sleep_until(struct timespec *t) {
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, NULL);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: resolution_probe LIB SECONDS INTERVAL_MS [INTERVAL_MS...]\n");
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "resolution_probe: %s\n", dlerror());
    return 1;
  }
  init_fn init = (init_fn)dlsym(lib, "nvmlInit_v2");
  handle_fn handle = (handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
  util_fn util = (util_fn)dlsym(lib, "nvmlDeviceGetUtilizationRates");
  void *dev = NULL;
  if (!init || !handle || !util || init() || handle(0, &dev)) {
    fprintf(stderr, "resolution_probe: cannot open GPU 0 through %s\n", argv[1]);
    return 1;
  }
  long steps = (long)(atof(argv[2]) * 1000 / STEP_MS);
  unsigned char *low = calloc((size_t)steps, 1);
  if (!low)
    return 1;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  for (long i = 0; i < steps; i++) { /* the ground truth, every 10 ms */
    util_t u;
    low[i] = util(dev, &u) == 0 && u.gpu < 50;
    next.tv_nsec += STEP_MS * 1000000L;
    if (next.tv_nsec >= 1000000000L)
      next.tv_nsec -= 1000000000L, next.tv_sec++;
    sleep_until(&next);
  }
  /* Dips: maximal runs of low steps that start and end inside the recording. */
  static long dip_a[MAX_DIPS], dip_b[MAX_DIPS];
  int ndips = 0;
  for (long i = 1; i < steps && ndips < MAX_DIPS; i++)
    if (low[i] && !low[i - 1]) {
      long j = i;
      while (j < steps && low[j])
        j++;
      if (j < steps)
        dip_a[ndips] = i, dip_b[ndips++] = j; /* [i, j) */
      i = j;
    }
  for (int a = 3; a < argc; a++) {
    long every = atol(argv[a]) / STEP_MS;
    if (every <= 0)
      continue;
    int mn = ndips, mx = 0;
    double sum = 0;
    for (int p = 0; p < PHASES; p++) { /* a tracker polling at steps phase, phase+every, ... */
      long phase = (long)p * every / PHASES;
      int shown = 0;
      for (int d = 0; d < ndips; d++) {
        long first = dip_a[d] <= phase ? phase : phase + (dip_a[d] - phase + every - 1) / every * every;
        shown += first < dip_b[d];
      }
      mn = shown < mn ? shown : mn;
      mx = shown > mx ? shown : mx;
      sum += shown;
    }
    printf("probe: interval %ld ms: dips %d, shown min %d mean %.1f max %d (%.1f %%) over %d phases\n", every * STEP_MS,
           ndips, mn, sum / PHASES, mx, ndips ? 100.0 * sum / PHASES / ndips : 0.0, PHASES);
  }
  free(low);
  return 0;
}
