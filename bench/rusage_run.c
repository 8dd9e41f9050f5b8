/* bench/rusage_run: runs a command and reports its exact resource use. Started from Python, a
 * program's ru_maxrss would include the Python parent's memory (Linux keeps the pre-exec address
 * space's peak in the process's rusage), so the benchmarks start agents through this small program:
 * it forks, the child execs the command (recording only this tiny program's peak), and wait4()
 * gives the command's own CPU time and peak RSS. SIGTERM, SIGINT and SIGHUP are passed on.
 * usage: rusage_run OUTFILE CMD [ARGS...]   (OUTFILE gets "cpu_s=... utime_s=... stime_s=...
 * maxrss_kib=... status=..."; exits with the command's status, 128+N when killed by signal N) */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile pid_t child;

static void forward(int sig) {
  if (child > 0)
    kill(child, sig);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: rusage_run OUTFILE CMD [ARGS...]\n");
    return 2;
  }
  struct sigaction sa = {.sa_handler = forward};
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGTERM, SIGINT, SIGHUP};
  for (int i = 0; i < 3; i++)
    sigaction(sigs[i], &sa, NULL);
  child = fork();
  if (child < 0) {
    perror("rusage_run: fork");
    return 1;
  }
  if (child == 0) {
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    for (int i = 0; i < 3; i++)
      sigaction(sigs[i], &dfl, NULL);
    execvp(argv[2], argv + 2);
    perror("rusage_run: exec");
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  while (wait4(child, &status, 0, &ru) < 0)
    if (errno != EINTR)
      return 1;
  double u = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
         s = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  FILE *f = fopen(argv[1], "w");
  if (f) {
    fprintf(f, "cpu_s=%.6f utime_s=%.6f stime_s=%.6f maxrss_kib=%ld status=%d\n", u + s, u, s, ru.ru_maxrss, code);
    fclose(f);
  }
  return code;
}
