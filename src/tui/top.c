/* tui/top: the live view's loop (tui.h) — finds the run to watch (named, the newest running one, or
 * the one `top -- CMD` starts through `gpuscope run`), re-reads it from the store every refresh,
 * asks the doctor for its top finding every few seconds, and redraws on data, keys and resizes. */
#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tui/tui_int.h"

#define FINDING_EVERY_NS (5 * GS_NS_PER_S) /* the doctor reads the whole run: not every refresh */
#define KEY_WAIT_MS 100
#define LAUNCH_WAIT_NS (15 * GS_NS_PER_S) /* how long `top -- CMD` waits for its run to appear */

static volatile sig_atomic_t tui_stop; /* SIGINT/SIGTERM/SIGHUP: quit like q (restores the terminal) */

static void on_stop(int sig) {
  (void)sig;
  tui_stop = 1;
}

/* The agent `top -- CMD` started: its pid, the tag its run carries, where the job's output goes. */
struct launched {
  pid_t pid;
  int status; /* as gpuscope run exits; -1 while it runs */
  char tag[64];
  char log[512];
};

static int launch_agent(const struct tui_opts *o, struct launched *l) {
  const char *tmp = getenv("TMPDIR");
  snprintf(l->log, sizeof l->log, "%s/gpuscope-top-XXXXXX.log", tmp && *tmp ? tmp : "/tmp");
  int fd = mkstemps(l->log, 4);
  if (fd < 0)
    return gs_fail(GS_EIO, "top: cannot create the job's log file %s: %s", l->log, strerror(errno));
  snprintf(l->tag, sizeof l->tag, "top.session=%d", (int)getpid());
  size_t n = 0;
  while (o->argv[n])
    n++;
  char **args = calloc(n + 10, sizeof *args);
  if (!args) {
    close(fd);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  size_t k = 0;
  args[k++] = "gpuscope";
  args[k++] = "run";
  args[k++] = "--tag";
  args[k++] = l->tag;
  if (o->store_url) {
    args[k++] = "--store";
    args[k++] = (char *)o->store_url;
  }
  args[k++] = "--";
  for (size_t i = 0; i < n; i++)
    args[k++] = o->argv[i];
  args[k] = NULL;
  l->status = -1;
  l->pid = fork();
  if (l->pid == 0) {
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in >= 0)
      dup2(in, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    execv(o->self_exe, args);
    fprintf(stderr, "gpuscope top: cannot run %s: %s\n", o->self_exe, strerror(errno));
    _exit(127);
  }
  int e = errno;
  free(args);
  close(fd);
  if (l->pid < 0)
    return gs_fail(GS_EIO, "top: cannot fork: %s", strerror(e));
  return GS_OK;
}

static void reap(struct launched *l) {
  int ws;
  if (l->pid > 0 && l->status < 0 && waitpid(l->pid, &ws, WNOHANG) == l->pid)
    l->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
}

/* The run to watch: the one named, the launched agent's (by its tag), or the newest running one. */
static int find_run(struct store *st, const struct tui_opts *o, struct launched *l, char *id, size_t n) {
  struct store_run r;
  if (o->run_ref && !l->pid) {
    int rc = st->run_get(st, o->run_ref, &r);
    if (!rc)
      snprintf(id, n, "%s", r.id);
    return rc;
  }
  int64_t until = gs_mono_ns() + (l->pid ? LAUNCH_WAIT_NS : 0);
  for (;;) {
    struct store_run *runs = NULL;
    size_t nr = 0;
    int rc = st->runs_list(st, &runs, &nr);
    if (rc)
      return rc;
    for (size_t i = 0; i < nr && !id[0]; i++) {
      if (l->pid ? !!strstr(runs[i].tags, l->tag) : !strcmp(runs[i].status, "running"))
        snprintf(id, n, "%s", runs[i].id);
    }
    free(runs);
    if (id[0])
      return GS_OK;
    if (l->pid)
      reap(l);
    if (!l->pid || l->status >= 0 || gs_mono_ns() > until)
      break;
    usleep(100000);
  }
  if (l->pid)
    return gs_fail(GS_EIO, "top: the job's run did not start (see %s)", l->log);
  return gs_fail(GS_ENOENT, "top: no running run in the store (name one: gpuscope top RUN)");
}

static int hist_width(void) {
  int w = COLS - 5;
  return w < 1 ? 1 : w > TOP_HIST ? TOP_HIST : w;
}

/* Loads a fresh snapshot into *cur, with a fresh finding when diagnose is set, else keeping the last
 * one; returns 0 or the load's error. */
static int reload(struct store *st, const char *id, const struct tui_ui *u, int diagnose, struct tui_snap *cur) {
  struct tui_snap next;
  int rc = tui_snap_load(st, id, (size_t)hist_width(), u->utf8, diagnose, &next);
  if (rc) {
    tui_snap_done(&next);
    return rc;
  }
  if (diagnose) {
    tui_snap_done(cur);
    *cur = next;
    return GS_OK;
  }
  next.have_finding = cur->have_finding;
  memcpy(next.rule, cur->rule, sizeof next.rule);
  memcpy(next.title, cur->title, sizeof next.title);
  memcpy(next.fix, cur->fix, sizeof next.fix);
  next.speedup = cur->speedup, next.share = cur->share;
  memcpy(next.roles, cur->roles, sizeof next.roles);
  next.nroles = cur->nroles;
  tui_snap_done(cur);
  *cur = next;
  return GS_OK;
}

/* Returns 1 when the key asks to quit. */
static int on_key(struct tui_ui *u, const struct tui_snap *s, int ch) {
  if (u->help && ch != KEY_RESIZE) {
    u->help = 0;
    return 0;
  }
  int page = LINES / 2 > 1 ? LINES / 2 : 1;
  switch (ch) {
  case 'q':
  case 'Q':
    return 1;
  case 'h':
  case 'H':
  case '?':
    u->help = 1;
    break;
  case 'g':
  case 'G':
    if (s->ngpus)
      u->gpu = (u->gpu + 1) % s->ngpus;
    break;
  case KEY_UP:
    u->scroll--;
    break;
  case KEY_DOWN:
    u->scroll++;
    break;
  case KEY_PPAGE:
    u->scroll -= page;
    break;
  case KEY_NPAGE:
    u->scroll += page;
    break;
  case KEY_HOME:
    u->scroll = 0;
    break;
  }
  if (u->scroll < 0)
    u->scroll = 0; /* the upper bound is the drawing's: it knows how many rows show */
  return 0;
}

static void screen_start(struct tui_ui *u) {
  initscr();
  cbreak();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  curs_set(0);
  timeout(KEY_WAIT_MS);
  tui_colors_init(u);
}

/* Reloads (diagnosing every FINDING_EVERY_NS, on the same load) and draws until a key or a signal
 * ends top; after the run ends, one last load with its diagnosis and the screen stays. */
static void tui_loop(struct store *st, const char *id, const struct tui_opts *o, struct tui_ui *u, struct tui_snap *cur,
                     struct launched *l) {
  int64_t refresh_ns = o->refresh_ns > 0 ? o->refresh_ns : GS_NS_PER_S;
  int64_t next_load = 0, next_finding = 0;
  int final_done = 0, dirty = 1;
  while (!tui_stop) {
    int64_t now = gs_mono_ns();
    reap(l);
    if (now >= next_load && !final_done) {
      int diagnose = now >= next_finding;
      next_load = now + refresh_ns;
      if (reload(st, id, u, diagnose, cur) == GS_OK) {
        dirty = 1;
        if (diagnose)
          next_finding = now + FINDING_EVERY_NS;
        if (!cur->running && diagnose)
          final_done = 1; /* the run ended and this load diagnosed it: the screen stays */
        else if (!cur->running)
          next_load = next_finding = 0; /* the run ended: one last load, with its diagnosis */
      }
    }
    if (dirty) {
      tui_draw(u, cur);
      dirty = 0;
    }
    int ch = getch();
    if (ch == ERR)
      continue;
    if (on_key(u, cur, ch))
      break;
    if (ch == KEY_RESIZE)
      next_load = 0; /* the history's width follows the terminal's */
    dirty = 1;
  }
}

/* Waits for the job top started, stopping it first if it still runs, and says where its output is. */
static void stop_job(struct launched *l, const char *id) {
  reap(l);
  if (l->status < 0) { /* quitting stops the job top started; its agent passes SIGTERM on */
    kill(l->pid, SIGTERM);
    int ws;
    if (waitpid(l->pid, &ws, 0) == l->pid)
      l->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : 1;
  }
  fprintf(stderr, "gpuscope: run %s; the job's output and the run's summary are in %s\n", id, l->log);
}

int tui_top(const struct tui_opts *o, int *job_status) {
  *job_status = 0;
  if (!isatty(0) || !isatty(1))
    return gs_fail(GS_EINVAL, "top: needs a terminal (stdin and stdout); for a report use 'gpuscope report'");
  setlocale(LC_ALL, "");
  struct tui_ui u = {.utf8 = !strcmp(nl_langinfo(CODESET), "UTF-8")};
  char def[1200];
  /* Only read, but for top -- CMD: that store is created (as `gpuscope run` would) before the run. */
  struct store *st = store_open_mode(o->store_url ? o->store_url : store_default_url(def, sizeof def),
                                     o->argv ? STORE_WRITE : STORE_READ);
  if (!st)
    return GS_EIO;
  struct launched l = {.pid = 0, .status = -1};
  int rc = o->argv ? launch_agent(o, &l) : GS_OK;
  char id[32] = "";
  if (!rc)
    rc = find_run(st, o, &l, id, sizeof id);
  struct tui_snap cur = {0};
  if (!rc)
    rc = tui_snap_load(st, id, TOP_HIST, u.utf8, 0, &cur); /* fail before taking the screen */
  if (rc) {
    if (l.pid > 0 && l.status < 0) {
      kill(l.pid, SIGTERM);
      waitpid(l.pid, NULL, 0);
    }
    tui_snap_done(&cur);
    st->close(st);
    return rc;
  }
  struct sigaction sa = {.sa_handler = on_stop}, old[3];
  int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; i++)
    sigaction(sigs[i], &sa, &old[i]);

  screen_start(&u);
  tui_loop(st, id, o, &u, &cur, &l);
  endwin();
  for (int i = 0; i < 3; i++)
    sigaction(sigs[i], &old[i], NULL);
  if (l.pid > 0) {
    stop_job(&l, id);
    *job_status = l.status;
  }
  tui_snap_done(&cur);
  st->close(st);
  return GS_OK;
}
