/* Copied from the project lead's /work/shared/bench/procfs_floor.c (gpuscope shared notes), unchanged below this
 * comment, so CI — which has only the repository — can build the floor the benchmarks compare with.
 * Kept as written (clang-format off) so it stays easy to diff against the original. */
/* clang-format off */
/* The floor for host sampling: read the same procfs files a monitor must read, every
 * interval, and do nothing else. Its CPU cost is the physical limit a monitor can approach.
 * usage: procfs_floor INTERVAL_MS SECONDS [PID]   (PID: also read stat/status/io of PID's children) */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
static char buf[1 << 16];
static long slurp(const char *p) {
  int fd = open(p, O_RDONLY);
  if (fd < 0) return -1;
  long n = read(fd, buf, sizeof buf);
  close(fd);
  return n;
}
static void tree(int pid) { /* the pid itself and its children via /proc/PID/task/PID/children */
  char p[128];
  const char *f[] = {"stat", "status", "io"};
  for (int i = 0; i < 3; i++) { snprintf(p, sizeof p, "/proc/%d/%s", pid, f[i]); slurp(p); }
  snprintf(p, sizeof p, "/proc/%d/task/%d/children", pid, pid);
  long n = slurp(p);
  if (n <= 0) return;
  char kids[4096]; memcpy(kids, buf, n < 4095 ? n : 4095); kids[n < 4095 ? n : 4095] = 0;
  for (char *s = strtok(kids, " \n"); s; s = strtok(NULL, " \n")) tree(atoi(s));
}
int main(int argc, char **argv) {
  if (argc < 3) return 2;
  long ms = atol(argv[1]); double secs = atof(argv[2]); int pid = argc > 3 ? atoi(argv[3]) : 0;
  const char *files[] = {"/proc/stat", "/proc/meminfo", "/proc/diskstats", "/proc/net/dev", "/proc/loadavg",
                         "/proc/pressure/cpu", "/proc/pressure/memory", "/proc/pressure/io",
                         "/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/memory.current"};
  enum { NF = sizeof files / sizeof *files };
  int fds[NF];
  for (size_t i = 0; i < NF; i++) fds[i] = open(files[i], O_RDONLY); /* kept open: pread each tick */
  long ticks = (long)(secs * 1000 / ms);
  struct timespec next; clock_gettime(CLOCK_MONOTONIC, &next);
  for (long t = 0; t < ticks; t++) {
    for (size_t i = 0; i < NF; i++) if (fds[i] >= 0) pread(fds[i], buf, sizeof buf, 0);
    if (pid) tree(pid);
    next.tv_nsec += ms * 1000000L;
    while (next.tv_nsec >= 1000000000L) { next.tv_nsec -= 1000000000L; next.tv_sec++; }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
  }
  struct rusage ru; getrusage(RUSAGE_SELF, &ru);
  double cpu = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  printf("floor: %ld ticks at %ld ms: %.3f CPU-s, %.2f CPU-s per hour, %.1f us per tick, maxrss %ld KiB\n",
         ticks, ms, cpu, cpu * 3600 / secs, cpu * 1e6 / ticks, ru.ru_maxrss);
  return 0;
}
