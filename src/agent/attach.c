/* agent/attach: the parts of the run loop that differ when gpuscope watches a process it did not
 * start (`gpuscope attach PID`): finding out that the process exited (it is not our child, so it
 * cannot be waited for), describing it, and the per-process client socket that clients find on
 * their own (docs/protocol.md, "Attached runs"). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "collect/collect.h"
#include "core/core.h"

/* The start time (field 22) of /proc/PID/stat, or 0 when the process is gone. */
static unsigned long long proc_start_time(pid_t pid) {
  char buf[1024];
  if (collect_proc_read(NULL, pid, "stat", buf, sizeof buf) <= 0)
    return 0;
  const char *p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
  if (!p)
    return 0;
  p += 2; /* ") " then field 3, the state */
  if (*p == 'Z' || *p == 'X')
    return 0; /* a zombie has exited: only its parent has not reaped it yet */
  for (int field = 3; field < 22 && *p; field++) {
    while (*p && *p != ' ')
      p++;
    while (*p == ' ')
      p++;
  }
  return strtoull(p, NULL, 10);
}

int agent_attach_open(pid_t pid, struct agent_attach_target *t) {
  t->pid = pid;
  t->pidfd = -1;
  t->start = 0;
  if (pid < 1)
    return gs_fail(GS_EINVAL, "attach: %d is not a process id", (int)pid);
  if (pid == getpid())
    return gs_fail(GS_EINVAL, "attach: %d is gpuscope itself", (int)pid);
  if (!(t->start = proc_start_time(pid)))
    return gs_fail(GS_ENOENT, "attach: no process %d", (int)pid);
  char path[64], kids[64];
  snprintf(path, sizeof path, "task/%d/children", (int)pid);
  if (collect_proc_read(NULL, pid, path, kids, sizeof kids) < 0)
    return gs_fail(GS_EINVAL, "attach: cannot watch process %d: %s", (int)pid, strerror(errno));
#ifdef SYS_pidfd_open
  t->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  if (t->pidfd >= 0)
    fcntl(t->pidfd, F_SETFD, FD_CLOEXEC);
#endif
  /* The pid could have been reused between the check and pidfd_open: check again behind the fd. */
  if (proc_start_time(pid) != t->start) {
    agent_attach_done(t);
    return gs_fail(GS_ENOENT, "attach: process %d exited", (int)pid);
  }
  return GS_OK;
}

int agent_attach_gone(const struct agent_attach_target *t) {
  return proc_start_time(t->pid) != t->start;
}

void agent_attach_done(struct agent_attach_target *t) {
  if (t->pidfd >= 0)
    close(t->pidfd);
  t->pidfd = -1;
}

void agent_attach_command(pid_t pid, char *buf, size_t n) {
  if (n < 2) {
    if (n)
      buf[0] = 0;
    return;
  }
  ssize_t r = collect_proc_read(NULL, pid, "cmdline", buf, n);
  if (r <= 0) {
    buf[0] = 0;
    return;
  }
  while (r > 0 && buf[r - 1] == 0)
    r--;
  for (ssize_t i = 0; i < r; i++)
    if (buf[i] == 0)
      buf[i] = ' ';
    else if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
      buf[i] = '?';
  buf[r] = 0;
}

/* The directory of the attach sockets: $XDG_RUNTIME_DIR/gpuscope when XDG_RUNTIME_DIR is set and
 * absolute, else /tmp/gpuscope-UID. */
static int attach_dir(char *buf, size_t n) {
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  int w = xdg && xdg[0] == '/' ? snprintf(buf, n, "%s/gpuscope", xdg)
                               : snprintf(buf, n, "/tmp/gpuscope-%u", (unsigned)getuid());
  return w > 0 && (size_t)w < n ? 0 : -1;
}

const char *agent_attach_socket_path(pid_t pid, char *buf, size_t n) {
  char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
  if (attach_dir(dir, sizeof dir))
    return NULL;
  int w = snprintf(buf, n, "%s/%d.sock", dir, (int)pid);
  return w > 0 && (size_t)w < n && (size_t)w < sizeof dir ? buf : NULL;
}

/* Creates the socket directory (0700) or checks the one there: a real directory of ours that no one
 * else may enter, since under /tmp anyone could have made it first. */
static int attach_dir_make(const char *dir, char *err, size_t errlen) {
  if (mkdir(dir, 0700) && errno != EEXIST) {
    snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
    return GS_EIO;
  }
  struct stat sb;
  if (lstat(dir, &sb) || !S_ISDIR(sb.st_mode) || sb.st_uid != getuid() || (sb.st_mode & 077)) {
    snprintf(err, errlen, "%s is not a private directory of this user (want mode 0700, owner uid %u)", dir,
             (unsigned)getuid());
    return GS_EIO;
  }
  return GS_OK;
}

/* 1 when an agent reads the datagram socket at path: connect() succeeds only while one is bound. */
static int socket_in_use(const char *path) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path)
    return 0;
  memcpy(a.sun_path, path, strlen(path) + 1);
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return 0;
  int used = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
  close(fd);
  return used;
}

int agent_attach_ingest_open(pid_t pid, struct ingest **out, char *err, size_t errlen) {
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)], dir[sizeof path];
  *out = NULL;
  if (!agent_attach_socket_path(pid, path, sizeof path) || attach_dir(dir, sizeof dir)) {
    snprintf(err, errlen, "the attach socket path does not fit a socket address (XDG_RUNTIME_DIR too long)");
    return GS_EINVAL;
  }
  int rc = attach_dir_make(dir, err, errlen);
  if (rc)
    return rc;
  struct stat sb;
  if (!lstat(path, &sb)) {
    if (S_ISSOCK(sb.st_mode) && socket_in_use(path)) {
      snprintf(err, errlen, "process %d is watched already (another gpuscope reads %s)", (int)pid, path);
      return GS_EBUSY;
    }
    unlink(path); /* left by an agent that died */
  }
  if (!(*out = ingest_open_at(path, err, errlen)))
    return GS_EIO;
  return GS_OK;
}
