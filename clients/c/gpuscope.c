/* clients/c/gpuscope: the C client (include/gpuscope.h). Each call formats one gs1 line in the "C"
 * locale (a job that called setlocale must still send "0.25", not "0,25") and sends it as one
 * datagram with MSG_DONTWAIT; a send that fails for any reason is counted, never reported, never
 * retried. The socket and the agent's address are set up once per process by pthread_once — the
 * documented process-wide state of this library; everything else is on the caller's stack. Without
 * GPUSCOPE_SOCKET, a call looks (at most every LOOK_EVERY_NS, never waiting on another thread that
 * looks) for the socket of an agent `gpuscope attach` started on this process or one of its three
 * nearest ancestors (docs/protocol.md, "Attached runs"); the first one found is kept. */
#include "gpuscope.h"

#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_DATAGRAM 4096
#define MAX_VALUE 1024

#define LOOK_EVERY_NS 2000000000LL
#define ANCESTORS 3

static pthread_once_t client_once = PTHREAD_ONCE_INIT;
static int client_fd = -1;
static struct sockaddr_un client_addr;
/* client_fd and client_addr are written before client_ready is set (release) and read after it is
 * seen set (acquire), so a sender never sees half an address. */
static atomic_int client_ready;
static int client_looking; /* no GPUSCOPE_SOCKET: look for an attach socket */
static atomic_llong client_next_look_ns;
static pthread_mutex_t client_look_mu = PTHREAD_MUTEX_INITIALIZER;
static long long client_seen_mtime[2]; /* per socket directory, at the last look that found nothing */
static pid_t client_seen_pid;          /* whose looks those were (a forked child looks afresh) */
static locale_t client_c_locale;
static atomic_ullong client_dropped;
static atomic_ullong client_reported; /* of client_dropped, how many the agent was told ("gs1 dropped N") */
static long client_rank;              /* this process's rank in a distributed job; 0 when none */

/* The rank the usual launchers give each process: torchrun/accelerate (RANK), Slurm, Open MPI, MPICH. */
static long env_rank(void) {
  static const char *const vars[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    const char *v = getenv(vars[i]);
    char *end;
    if (!v || !*v)
      continue;
    long r = strtol(v, &end, 10);
    return !*end && r > 0 && r <= 65535 ? r : 0;
  }
  return 0;
}

static void client_init(void) {
  const char *path = getenv("GPUSCOPE_SOCKET"), *attach = getenv("GPUSCOPE_ATTACH");
  client_rank = env_rank();
  client_c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  if (!path || !*path) {
    client_looking = !attach || strcmp(attach, "0");
    return;
  }
  if (strlen(path) >= sizeof client_addr.sun_path)
    return;
  client_addr.sun_family = AF_UNIX;
  memcpy(client_addr.sun_path, path, strlen(path) + 1);
  client_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  atomic_store_explicit(&client_ready, client_fd >= 0, memory_order_release);
}

static long long client_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The attach socket directories: $XDG_RUNTIME_DIR/gpuscope (when absolute), /tmp/gpuscope-UID. */
static int client_dir(int i, char *buf, size_t n) {
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  int w = i == 0 ? (xdg && xdg[0] == '/' ? snprintf(buf, n, "%s/gpuscope", xdg) : -1)
                 : snprintf(buf, n, "/tmp/gpuscope-%u", (unsigned)getuid());
  return w > 0 && (size_t)w < n ? 0 : -1;
}

/* This process and its nearest ancestors, from /proc/PID/stat (stopping before init). */
static int client_lineage(pid_t *pids) {
  int n = 0;
  pids[n++] = getpid();
  while (n <= ANCESTORS) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pids[n - 1]);
    int fd = open(path, O_RDONLY | O_CLOEXEC); /* not fopen: the client never allocates */
    if (fd < 0)
      break;
    ssize_t r = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[r > 0 ? r : 0] = 0;
    const char *p = strrchr(buf, ')');
    long ppid = p ? strtol(p + 4, NULL, 10) : 0; /* ") S PPID" */
    if (ppid <= 1)
      break;
    pids[n++] = (pid_t)ppid;
  }
  return n;
}

/* Finds an attach socket for this process or an ancestor in a private directory of this user. One
 * lstat per directory; the candidates are stat'ed only when the directory changed. */
static int client_find(char *out, size_t n) {
  pid_t pids[ANCESTORS + 1];
  int npids = -1;
  if (client_seen_pid != getpid()) {
    client_seen_pid = getpid();
    client_seen_mtime[0] = client_seen_mtime[1] = 0;
  }
  for (int i = 0; i < 2; i++) {
    char dir[sizeof client_addr.sun_path];
    struct stat sb;
    if (client_dir(i, dir, sizeof dir) || lstat(dir, &sb) || !S_ISDIR(sb.st_mode) || sb.st_uid != getuid() ||
        (sb.st_mode & 077))
      continue;
    long long mtime = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
    if (mtime == client_seen_mtime[i])
      continue;
    if (npids < 0)
      npids = client_lineage(pids);
    for (int k = 0; k < npids; k++) {
      int w = snprintf(out, n, "%s/%d.sock", dir, (int)pids[k]);
      if (w > 0 && (size_t)w < n && !stat(out, &sb) && S_ISSOCK(sb.st_mode))
        return 1;
    }
    client_seen_mtime[i] = mtime;
  }
  return 0;
}

/* No GPUSCOPE_SOCKET: at most every LOOK_EVERY_NS, and never waiting for another thread's look,
 * looks for an attach socket. Returns 1 once the client has an agent. */
static int client_look(void) {
  long long now = client_mono_ns();
  if (now < atomic_load_explicit(&client_next_look_ns, memory_order_relaxed) || pthread_mutex_trylock(&client_look_mu))
    return 0;
  if (!atomic_load_explicit(&client_ready, memory_order_acquire) &&
      now >= atomic_load_explicit(&client_next_look_ns, memory_order_relaxed)) {
    atomic_store_explicit(&client_next_look_ns, now + LOOK_EVERY_NS, memory_order_relaxed);
    char path[sizeof client_addr.sun_path];
    int fd;
    if (client_find(path, sizeof path) && (fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) >= 0) {
      client_addr.sun_family = AF_UNIX;
      memcpy(client_addr.sun_path, path, strlen(path) + 1);
      client_fd = fd;
      atomic_store_explicit(&client_ready, 1, memory_order_release);
    }
  }
  pthread_mutex_unlock(&client_look_mu);
  return atomic_load_explicit(&client_ready, memory_order_acquire);
}

static int client_on(void) {
  pthread_once(&client_once, client_init);
  if (atomic_load_explicit(&client_ready, memory_order_acquire))
    return 1;
  return client_looking && client_look();
}

/* Formats a line in the C locale; returns its length, or -1 when it does not fit a datagram. */
__attribute__((format(printf, 3, 4))) static int client_format(char *buf, size_t cap, const char *fmt, ...) {
  locale_t old = client_c_locale ? uselocale(client_c_locale) : (locale_t)0;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
  if (old)
    uselocale(old);
  return n >= 0 && (size_t)n < cap ? n : -1;
}

static int client_sendto(const char *buf, int n) {
  return n >= 0 && n <= MAX_DATAGRAM &&
         sendto(client_fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&client_addr,
                sizeof client_addr) == n;
}

/* Tells the agent how many messages it missed since the last time (one more datagram, only after
 * drops), so a report built on part of the steps says so. A count is claimed before it is sent, so
 * two threads never report the same drops; a failed send gives the claim back. */
static void client_report_dropped(void) {
  unsigned long long d = atomic_load_explicit(&client_dropped, memory_order_relaxed);
  unsigned long long r = atomic_load_explicit(&client_reported, memory_order_relaxed);
  if (d <= r || !atomic_compare_exchange_strong(&client_reported, &r, d))
    return;
  char buf[64];
  if (!client_sendto(buf, client_format(buf, sizeof buf, "gs1 dropped %llu", d - r)))
    atomic_fetch_sub_explicit(&client_reported, d - r, memory_order_relaxed);
}

static void client_send(const char *buf, int n) {
  if (!client_sendto(buf, n))
    atomic_fetch_add_explicit(&client_dropped, 1, memory_order_relaxed);
  else if (atomic_load_explicit(&client_dropped, memory_order_relaxed) !=
           atomic_load_explicit(&client_reported, memory_order_relaxed))
    client_report_dropped();
}

/* At exit: one last try to report drops of the final burst (the process-wide socket stays open). */
__attribute__((destructor)) static void client_at_exit(void) {
  if (client_fd >= 0)
    client_report_dropped();
}

static double client_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void gpuscope_log(const char *name, double value, long long step) {
  if (!client_on())
    return;
  char buf[MAX_DATAGRAM + 1];
  int n = step >= 0
              ? client_format(buf, sizeof buf, "gs1 metric %s %.17g %lld t=%.6f", name ? name : "", value, step,
                              client_now_s())
              : client_format(buf, sizeof buf, "gs1 metric %s %.17g t=%.6f", name ? name : "", value, client_now_s());
  client_send(buf, n);
}

void gpuscope_param(const char *key, const char *value) {
  if (!client_on())
    return;
  char clean[MAX_VALUE + 1], buf[MAX_DATAGRAM + 1];
  size_t n = 0;
  value = value ? value : "";
  for (; value[n] && n < MAX_VALUE; n++) {
    unsigned char ch = (unsigned char)value[n];
    clean[n] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
  }
  if (value[n]) /* cut: step back to the start of a UTF-8 character */
    while (n > 0 && ((unsigned char)value[n] & 0xc0) == 0x80)
      n--;
  clean[n] = 0;
  client_send(buf, client_format(buf, sizeof buf, "gs1 param %s %s", key ? key : "", clean));
}

void gpuscope_step(long long n, double data_s, double h2d_s, double compute_s, long long samples) {
  if (!client_on())
    return;
  char buf[512], smp[32] = "", h2d[48] = "", rank[32] = "";
  if (samples >= 0)
    snprintf(smp, sizeof smp, " samples=%lld", samples);
  if (h2d_s >= 0 && client_format(h2d, sizeof h2d, " h2d=%.9f", h2d_s) < 0) /* < 0 or NAN: not measured */
    h2d[0] = 0;
  if (client_rank > 0)
    snprintf(rank, sizeof rank, " rank=%ld", client_rank);
  client_send(buf, client_format(buf, sizeof buf, "gs1 step %lld data=%.9f%s compute=%.9f%s%s t=%.6f", n, data_s, h2d,
                                 compute_s, smp, rank, client_now_s()));
}

void gpuscope_mark(const char *name, double value) {
  if (!client_on())
    return;
  char buf[MAX_DATAGRAM + 1];
  int n = isnan(value)
              ? client_format(buf, sizeof buf, "gs1 mark %s t=%.6f", name ? name : "", client_now_s())
              : client_format(buf, sizeof buf, "gs1 mark %s %.17g t=%.6f", name ? name : "", value, client_now_s());
  client_send(buf, n);
}

unsigned long long gpuscope_dropped(void) {
  return atomic_load_explicit(&client_dropped, memory_order_relaxed);
}

int gpuscope_enabled(void) {
  return client_on();
}
