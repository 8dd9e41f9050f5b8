/* bench/collect_bench: the CPU cost of one tick of each procfs collector, without the run loop's
 * sleeps — for comparing two builds of a collector (A/B) with less noise than a timed run, and for
 * seeing which collector a tick's cost goes to. Watches a child `sleep` as the job (so proctree
 * reads the same files as under `gpuscope run`), calls every collector's sample() back to back,
 * and prints the median over blocks of each collector's thread CPU time per tick.
 * usage: collect_bench [TICKS]   (default 20000) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collect/collect.h"

enum { BLOCK = 500, MAX_BLOCKS = 1000 };

static double thread_cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  long ticks = argc > 1 ? atol(argv[1]) : 20000;
  if (ticks < BLOCK)
    ticks = BLOCK;
  pid_t job = fork();
  if (job == 0) {
    execlp("sleep", "sleep", "3600", (char *)NULL);
    _exit(127);
  }
  usleep(50000);
  struct gs_sink *sink = gs_sink_new();
  const struct collector *cols[] = {&collector_host, &collector_proctree};
  enum { NC = sizeof cols / sizeof *cols };
  void *ctx[NC];
  struct collector_opts o = {.root = "/", .pid = job, .interval_ns = 100000000LL, .subreaper = 1};
  for (int c = 0; c < NC; c++) {
    char err[256] = "";
    if (!(ctx[c] = cols[c]->open(&o, sink, err, sizeof err))) {
      fprintf(stderr, "collect_bench: %s: %s\n", cols[c]->name, err);
      return 1;
    }
  }
  long nblocks = ticks / BLOCK;
  if (nblocks > MAX_BLOCKS)
    nblocks = MAX_BLOCKS;
  static double per[NC][MAX_BLOCKS];
  int64_t t = 1000000000LL;
  for (long bl = 0; bl < nblocks; bl++) {
    double sum[NC] = {0};
    for (int i = 0; i < BLOCK; i++, t += 100000000LL) {
      for (int c = 0; c < NC; c++) {
        double a = thread_cpu_us();
        cols[c]->sample(ctx[c], sink, t);
        sum[c] += thread_cpu_us() - a;
      }
      if (i % 10 == 9) /* the writer takes a batch each second */
        gs_batch_free(gs_sink_take(sink));
    }
    for (int c = 0; c < NC; c++)
      per[c][bl] = sum[c] / BLOCK;
  }
  double total = 0;
  printf("collect_bench: %ld ticks back to back, thread CPU per tick (median of %ld blocks of %d):", nblocks * BLOCK,
         nblocks, BLOCK);
  for (int c = 0; c < NC; c++) {
    qsort(per[c], (size_t)nblocks, sizeof per[c][0], cmp_double);
    double med = per[c][nblocks / 2];
    total += med;
    printf(" %s %.1f us,", cols[c]->name, med);
    cols[c]->close(ctx[c]);
  }
  printf(" total %.1f us\n", total);
  gs_sink_free(sink);
  kill(job, SIGTERM);
  waitpid(job, NULL, 0);
  return 0;
}
