/* alert/command: `--alert-cmd CMD` — the alert handed to a program of the user's: `/bin/sh -c CMD`
 * with the alert as JSON on its stdin and in GPUSCOPE_ALERT_* variables. Started with posix_spawn
 * from the delivery thread (no fork of a threaded agent), waited for through a pidfd within the
 * timeout, then killed. The run loop reaps every child it is sent SIGCHLD for (it is the job's
 * subreaper), so this command's status may be gone when it is looked for: it then counts as sent. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alert/alert_int.h"
#include "core/core.h"

extern char **environ;

#define CMD_ENV_MAX 12

/* The agent's environment without its client socket (the command is not the job), plus the alert. */
static char **command_env(const struct alert_msg *m, char own[CMD_ENV_MAX][1100]) {
  size_t n = 0;
  while (environ[n])
    n++;
  char **env = calloc(n + CMD_ENV_MAX + 1, sizeof *env);
  if (!env)
    return NULL;
  size_t o = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "GPUSCOPE_SOCKET=", 16) && strncmp(environ[i], "GPUSCOPE_ALERT_", 15))
      env[o++] = environ[i];
  char num[3][32];
  snprintf(num[0], sizeof num[0], "%.17g", m->value);
  snprintf(num[1], sizeof num[1], "%.17g", m->cost_s);
  snprintf(num[2], sizeof num[2], "%.17g", m->speedup);
  const char *kv[][2] = {{"STATE", m->state},
                         {"RULE", m->rule},
                         {"KEY", m->key},
                         {"LABELS", m->labels},
                         {"TITLE", m->title},
                         {"TEXT", m->text},
                         {"RUN_ID", m->run_id},
                         {"RUN_NAME", m->run_name},
                         {"HOST", m->host},
                         {"VALUE", isfinite(m->value) ? num[0] : ""},
                         {"COST_S", isfinite(m->cost_s) ? num[1] : ""},
                         {"SPEEDUP", isfinite(m->speedup) ? num[2] : ""}};
  for (size_t i = 0; i < CMD_ENV_MAX; i++) {
    snprintf(own[i], sizeof own[i], "GPUSCOPE_ALERT_%s=%.1060s", kv[i][0], kv[i][1]);
    env[o++] = own[i];
  }
  return env;
}

/* Writes json to fd until done, the deadline, or the command closes its stdin. */
static void feed(int fd, const char *json, int64_t deadline) {
  size_t len = strlen(json), off = 0;
  while (off < len) {
    int64_t left = deadline - gs_mono_ns();
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    if (left <= 0 || poll(&pf, 1, (int)(left / 1000000) + 1) <= 0)
      return;
    ssize_t w = write(fd, json + off, len - off);
    if (w < 0 && errno != EAGAIN && errno != EINTR)
      return;
    if (w > 0)
      off += (size_t)w;
  }
}

/* Waits for pid within deadline (SIGKILL after it). Returns its wait status, or -1 when it was reaped
 * by someone else (the run loop), or -2 when it was killed for the timeout. */
static int await(pid_t pid, int64_t deadline, const volatile int *abort) {
  int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
  int killed = 0;
  for (;;) {
    siginfo_t si = {0};
    int r = waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      break; /* ECHILD: reaped by the run loop */
    }
    if (si.si_pid == pid) {
      if (pfd >= 0)
        close(pfd);
      if (killed)
        return -2;
      return si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8 : si.si_status & 0x7f;
    }
    if (!killed && (gs_mono_ns() >= deadline || *abort)) {
      if (pfd >= 0)
        syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
      killed = 1;
    }
    struct pollfd pf = {.fd = pfd, .events = POLLIN};
    if (pfd >= 0)
      poll(&pf, 1, 100);
    else
      poll(NULL, 0, 20); /* a kernel without pidfd_open: look again shortly */
  }
  if (pfd >= 0)
    close(pfd);
  return killed ? -2 : -1;
}

int alert_command_run(const char *cmd, const struct alert_msg *m, const char *json, int64_t timeout_ns,
                      const volatile int *abort, char *err, size_t errlen) {
  char own[CMD_ENV_MAX][1100];
  int in[2];
  if (pipe2(in, O_CLOEXEC))
    return snprintf(err, errlen, "alert command: pipe: %s", strerror(errno)), ALERT_FAIL;
  char **env = command_env(m, own);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  /* The agent blocks the signals it reads through its signalfd and ignores SIGPIPE: the command gets
   * an empty mask and the default dispositions. */
  posix_spawnattr_t at;
  posix_spawnattr_init(&at);
  sigset_t none, dfl;
  sigemptyset(&none);
  sigfillset(&dfl);
  sigdelset(&dfl, SIGKILL);
  sigdelset(&dfl, SIGSTOP);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &dfl);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
  pid_t pid;
  int e = env ? posix_spawn(&pid, "/bin/sh", &fa, &at, argv, env) : ENOMEM;
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);
  free(env);
  close(in[0]);
  if (e) {
    close(in[1]);
    return snprintf(err, errlen, "alert command: cannot start /bin/sh: %s", strerror(e)), ALERT_FAIL;
  }
  fcntl(in[1], F_SETFL, O_NONBLOCK);
  int64_t deadline = gs_mono_ns() + timeout_ns;
  feed(in[1], json, deadline);
  close(in[1]);
  int ws = await(pid, deadline, abort);
  if (ws == -1 || ws == 0)
    return ALERT_SENT;
  if (ws == -2)
    return snprintf(err, errlen, "alert command: still running after %.1f s: killed", (double)timeout_ns / GS_NS_PER_S),
           ALERT_FAIL;
  if (ws & 0x7f)
    return snprintf(err, errlen, "alert command: killed by signal %d", ws & 0x7f), ALERT_FAIL;
  return snprintf(err, errlen, "alert command: exit %d", (ws >> 8) & 0xff), ALERT_FAIL;
}
