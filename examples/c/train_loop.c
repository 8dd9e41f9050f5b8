/* examples/c/train_loop: a stand-in for a C or C++ training loop that reports to gpuscope. Each
 * "step" waits for a batch (a short sleep: the data loader) and computes (a busy loop), and says so
 * with gpuscope_step(); it logs a loss every 10 steps and marks each epoch.
 *
 *     gpuscope run -- build/clients/c/gpuscope_example_c [steps]
 *
 * Without gpuscope (no GPUSCOPE_SOCKET) it runs the same and every gpuscope_* call is a no-op. */
#include <gpuscope.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  long steps = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
  gpuscope_param("framework", "c-example");
  gpuscope_param("batch_size", "32");
  volatile double acc = 0;
  for (long i = 0; i < steps; i++) {
    if (i % 50 == 0)
      gpuscope_mark("epoch", (double)(i / 50));
    double t0 = now_s();
    struct timespec wait = {0, 2000000}; /* 2 ms "data loading" */
    nanosleep(&wait, NULL);
    double t1 = now_s();
    for (int k = 0; k < 200000; k++) /* "compute" */
      acc += sin((double)k);
    double t2 = now_s();
    gpuscope_step(i, t1 - t0, -1, t2 - t1, 32); /* no host-to-device copy here: -1, not measured */
    if (i % 10 == 0)
      gpuscope_log("loss", 1.0 / (double)(i + 1), i);
  }
  printf("%ld steps (checksum %.3f), %llu messages dropped\n", steps, acc, gpuscope_dropped());
  return 0;
}
