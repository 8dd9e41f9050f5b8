/* Unit tests of the agent (src/agent/): the flush policy (ten ticks, within one to ten seconds), the
 * job's status as a shell would give it (exit code, 128+signal, 127 not found, 126 not executable)
 * and as the store keeps it, and the attach path's checks on the process it is asked to watch (not
 * itself, not a missing pid; its exit seen; its command line with control characters replaced).
 * The jobs are real processes run through agent_run into a real SQLite file. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "core/core.h"
#include "store/store.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/gs-test-agent-XXXXXX");
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* ---- the flush policy ---- */

static void test_flush_period_is_ten_ticks_within_one_to_ten_seconds(void **state) {
  (void)state;
  assert_int_equal(agent_flush_default(GS_NS_PER_S / 10), GS_NS_PER_S);      /* 10 x 100 ms */
  assert_int_equal(agent_flush_default(GS_NS_PER_S / 2), 5 * GS_NS_PER_S);   /* 10 x 500 ms */
  assert_int_equal(agent_flush_default(GS_NS_PER_S / 100), GS_NS_PER_S);     /* at least 1 s */
  assert_int_equal(agent_flush_default(5 * GS_NS_PER_S), 10 * GS_NS_PER_S);  /* at most 10 s */
  assert_int_equal(agent_flush_default(60 * GS_NS_PER_S), 10 * GS_NS_PER_S); /* ... whatever the tick */
}

/* ---- the job's status ---- */

/* Runs argv under the agent into its own store file; returns the job's status and the exit code the
 * store kept for the run. */
static int run_job(const char *name, char *const *argv, int *stored_exit) {
  char url[400];
  snprintf(url, sizeof url, "sqlite://%s/%s.db", dir, name);
  struct agent_opts o = {.argv = argv,
                         .name = name,
                         .tags = "",
                         .interval_ns = GS_NS_PER_S / 10,
                         .store_url = url,
                         .root = "/",
                         .quiet = 1};
  int status = -1;
  if (agent_run(&o, &status))
    fail_msg("agent_run %s: %s", name, gs_last_error());
  struct store *st = store_open_mode(url, STORE_READ);
  assert_non_null(st);
  struct store_run r;
  assert_int_equal(st->run_get(st, "last", &r), 0);
  *stored_exit = r.exit_code;
  st->close(st);
  return status;
}

static void test_job_status_is_what_a_shell_says(void **state) {
  (void)state;
  int stored;
  char *exits[] = {"/bin/sh", "-c", "exit 3", NULL};
  assert_int_equal(run_job("exit3", exits, &stored), 3);
  assert_int_equal(stored, 3);
  char *killed[] = {"/bin/sh", "-c", "kill -9 $$", NULL};
  assert_int_equal(run_job("killed", killed, &stored), 128 + SIGKILL);
  char *missing[] = {"/nonexistent/gpuscope-no-such-program", NULL};
  assert_int_equal(run_job("missing", missing, &stored), 127);
  char path[400];
  snprintf(path, sizeof path, "%s/not-executable", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("#!/bin/sh\nexit 0\n", f);
  fclose(f);
  chmod(path, 0644);
  char *noexec[] = {path, NULL};
  assert_int_equal(run_job("noexec", noexec, &stored), 126);
}

/* A store that cannot be opened is an error before the job starts: the job never runs. */
static void test_a_store_that_cannot_open_starts_no_job(void **state) {
  (void)state;
  char marker[400], script[600], plain[400], url[500];
  snprintf(marker, sizeof marker, "%s/ran", dir);
  snprintf(script, sizeof script, "touch '%s'", marker);
  snprintf(plain, sizeof plain, "%s/plain", dir); /* a file where the store's folder would go */
  FILE *f = fopen(plain, "w");
  assert_non_null(f);
  fclose(f);
  snprintf(url, sizeof url, "sqlite://%s/x.db", plain);
  char *argv[] = {"/bin/sh", "-c", script, NULL};
  struct agent_opts o = {.argv = argv, .tags = "", .interval_ns = GS_NS_PER_S / 10, .store_url = url, .quiet = 1};
  int status = -1;
  assert_int_equal(agent_run(&o, &status), GS_ESTORE);
  assert_int_equal(status, 1);
  assert_int_equal(access(marker, F_OK), -1);
}

/* ---- attach: the process to watch ---- */

static void test_attach_refuses_itself_and_missing_processes(void **state) {
  (void)state;
  struct agent_attach_target t;
  assert_int_equal(agent_attach_open(getpid(), &t), GS_EINVAL);
  assert_int_equal(agent_attach_open(0, &t), GS_EINVAL);
  assert_int_equal(agent_attach_open(-5, &t), GS_EINVAL);
  pid_t gone = fork();
  assert_true(gone >= 0);
  if (!gone)
    _exit(0);
  assert_int_equal(waitpid(gone, NULL, 0), gone);
  assert_int_equal(agent_attach_open(gone, &t), GS_ENOENT);
  assert_non_null(strstr(gs_last_error(), "no process"));
}

/* Waits (bounded: the limit only ends a hang) until pid's command line starts with prefix. */
static void wait_for_exec(pid_t pid, const char *prefix, char *buf, size_t n) {
  struct timespec pause = {0, 5 * 1000 * 1000};
  for (int i = 0; i < 2000; i++) {
    agent_attach_command(pid, buf, n);
    if (!strncmp(buf, prefix, strlen(prefix)))
      return;
    nanosleep(&pause, NULL);
  }
  fail_msg("process %d never ran %s (command line: %s)", (int)pid, prefix, buf);
}

static void test_attach_watches_a_process_until_it_exits(void **state) {
  (void)state;
  pid_t child = fork();
  assert_true(child >= 0);
  if (!child) {
    setpgid(0, 0); /* its own group: the kill below takes whatever it started */
    execl("/bin/sh", "sh", "-c", "exec sleep 60", (char *)NULL);
    _exit(127);
  }
  char cmd[256];
  wait_for_exec(child, "sleep", cmd, sizeof cmd);
  struct agent_attach_target t;
  assert_int_equal(agent_attach_open(child, &t), 0);
  assert_int_equal(agent_attach_gone(&t), 0);
  kill(-child, SIGKILL);
  assert_int_equal(waitpid(child, NULL, 0), child);
  if (t.pidfd >= 0) { /* the pidfd is readable once the process has exited */
    struct pollfd p = {.fd = t.pidfd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
  }
  assert_int_equal(agent_attach_gone(&t), 1);
  agent_attach_done(&t);
  assert_int_equal(t.pidfd, -1);
}

static void test_attach_command_replaces_control_characters(void **state) {
  (void)state;
  pid_t child = fork();
  assert_true(child >= 0);
  if (!child) {
    setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", "sleep 60; :", "a\x1b[31mb\x7f", (char *)NULL);
    _exit(127);
  }
  char cmd[256];
  wait_for_exec(child, "sh ", cmd, sizeof cmd);
  kill(-child, SIGKILL);
  waitpid(child, NULL, 0);
  assert_string_equal(cmd, "sh -c sleep 60; : a?[31mb?");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flush_period_is_ten_ticks_within_one_to_ten_seconds),
      cmocka_unit_test(test_job_status_is_what_a_shell_says),
      cmocka_unit_test(test_a_store_that_cannot_open_starts_no_job),
      cmocka_unit_test(test_attach_refuses_itself_and_missing_processes),
      cmocka_unit_test(test_attach_watches_a_process_until_it_exits),
      cmocka_unit_test(test_attach_command_replaces_control_characters),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
