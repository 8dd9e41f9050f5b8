/* agent/joblog: the job's output, passed through and kept (`run`, and `tune`'s trials). The job's
 * stdout and stderr are the agent's: a stream that is a terminal becomes one pseudo-terminal for the
 * job (both streams, when both are terminals: one stream, "tty"), so progress bars, colours and
 * `\r` work as they did, with the terminal's size and its changes (SIGWINCH, joblog_winch); a
 * stream that is not a terminal becomes a pipe ("out", "err"), so the job sees a pipe where it had
 * one. A pump thread of its own reads them and writes every byte at once, unchanged, where the
 * job's output would have gone, and only then copies it to a buffer: the job's output never waits
 * for the store, the sampling loop or the writer. The writer thread takes the buffer at each flush
 * (joblog_flush) and appends it to the store, so it is written in the agent's commit cycle.
 *
 * Bounded by --log-max (agent_opts.log_max): the store keeps the last log_max bytes of the run (the
 * tail; the agent trims the store's oldest chunks as new ones come), and the buffer holds at most
 * as much (a store slower than the job: its oldest chunks go, counted in log.dropped_bytes). The
 * pseudo-terminal's output processing is off (OPOST), so bytes reach the agent's terminal as the
 * job wrote them and that terminal does its own, as it would without gpuscope.
 *
 * Lines that matter become events on the run's timeline, at the time their first byte was read:
 * CUDA out of memory, NCCL errors and timeouts, `Killed`, and Python tracebacks (one event, from
 * its first line to its last). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "core/core.h"
#include "store/store.h"

#define JL_READ 65536           /* one read, and the most one chunk holds */
#define JL_MERGE_NS 250000000LL /* reads of one stream this close in time share a chunk */
#define JL_LINE 1024            /* a line is matched on its first JL_LINE bytes */

enum { JL_OUT, JL_ERR, JL_TTY };
static const char *const JL_NAMES[] = {"out", "err", "tty"};

struct jl_chunk {
  struct jl_chunk *next;
  int64_t seq, t; /* t: monotonic, absolute */
  int stream;     /* JL_OUT, JL_ERR or JL_TTY */
  size_t len;
  uint8_t data[JL_READ];
};

/* What the line matcher keeps of one source between reads. */
struct jl_lines {
  char line[JL_LINE + 1];
  size_t len;
  int64_t t;                  /* when the line's first byte was read */
  int in_tb;                  /* inside a traceback */
  char tb_first[JL_LINE + 1]; /* its first line */
  int64_t tb_t;
};

/* One descriptor the pump reads: the pty's master, or the read end of a stream's pipe. */
struct jl_src {
  int fd;
  int stream; /* stored as */
  int dest;   /* where its bytes go: 1 or 2 (-1 once writing there failed) */
  struct jl_lines lines;
};

struct joblog {
  int64_t max; /* bytes kept (the bound) */
  struct gs_sink *sink;
  int slave;   /* the pty's slave, the job's terminal (-1: no pty); open until the job started */
  int pw[2];   /* the write ends of the pipes of stdout, stderr (-1: that stream is on the pty) */
  int tty_src; /* the agent's terminal whose size the pty follows (-1: no pty) */
  struct jl_src src[2];
  int nsrc;
  int wake[2];
  pthread_t thread;
  int started;
  /* shared with the writer, under mu */
  pthread_mutex_t mu;
  int stop;
  struct jl_chunk *head, *tail;
  struct jl_chunk *spare;            /* chunks to reuse: a steady flood allocates nothing */
  size_t nspare, nalloc, nalloc_max; /* spare; allocated (live or spare); kept at most nalloc_max */
  int64_t buffered, seq, seen, dropped;
  /* the writer's own: the stored chunks (seq, bytes), oldest first, for the bound */
  int64_t (*kept)[2];
  size_t kept_head, kept_n, kept_cap;
  int64_t stored;
  char first_error[256];
};

static void jl_close(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* A pseudo-terminal for the job's terminal streams, set like the agent's terminal (fd) but with
 * output processing off, and of its size. Returns its master, or -1 with errno. */
static int jl_open_pty(struct joblog *j, int fd) {
  int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  char name[128];
  if (m < 0 || grantpt(m) || unlockpt(m) || ptsname_r(m, name, sizeof name)) {
    if (m >= 0)
      close(m);
    return -1;
  }
  int s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0) {
    close(m);
    return -1;
  }
  struct termios tio;
  if (tcgetattr(fd, &tio) == 0) {
    tio.c_oflag &= ~(tcflag_t)OPOST;
    tcsetattr(s, TCSANOW, &tio);
  }
  struct winsize ws;
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0)
    ioctl(s, TIOCSWINSZ, &ws);
  j->slave = s, j->tty_src = fd;
  return m;
}

static void jl_add_src(struct joblog *j, int fd, int stream, int dest) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  j->src[j->nsrc++] = (struct jl_src){.fd = fd, .stream = stream, .dest = dest};
}

/* A closed stdout or stderr of the agent becomes /dev/null first, so a pipe made below can never
 * take its number (and the pump write the job's output into its own pipe). */
static void jl_fill_std(void) {
  for (int fd = 1; fd <= 2; fd++)
    if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
      int n = open("/dev/null", O_WRONLY);
      if (n >= 0 && n != fd)
        dup2(n, fd), close(n);
    }
}

int joblog_open(struct joblog **out, int64_t max, struct gs_sink *sink, char *err, size_t errlen) {
  jl_fill_std();
  struct joblog *j = calloc(1, sizeof *j);
  if (!j)
    return gs_fail(GS_ENOMEM, "out of memory");
  *j = (struct joblog){.max = max,
                       .sink = sink,
                       .slave = -1,
                       .pw = {-1, -1},
                       .tty_src = -1,
                       .wake = {-1, -1},
                       .nalloc_max = (size_t)(max / JL_READ) + 4};
  pthread_mutex_init(&j->mu, NULL);
  int tty[2] = {isatty(1), isatty(2)}, m = -1;
  if ((tty[0] || tty[1]) && (m = jl_open_pty(j, tty[0] ? 1 : 2)) < 0)
    tty[0] = tty[1] = 0; /* no pseudo-terminal to be had: pipes (log.streams says so) */
  if (m >= 0)
    jl_add_src(j, m, JL_TTY, j->tty_src);
  char streams[16] = "";
  for (int i = 0; i < 2; i++) {
    int p[2];
    if (!tty[i] && pipe2(p, O_CLOEXEC)) {
      snprintf(err, errlen, "cannot make a pipe for the job's std%s: %s", i ? "err" : "out", strerror(errno));
      joblog_free(j);
      return GS_EIO;
    }
    if (!tty[i])
      j->pw[i] = p[1], jl_add_src(j, p[0], i, i + 1);
    snprintf(streams + strlen(streams), sizeof streams - strlen(streams), "%s%s", i ? "," : "",
             JL_NAMES[tty[i] ? JL_TTY : i]);
  }
  if (pipe2(j->wake, O_CLOEXEC | O_NONBLOCK)) {
    snprintf(err, errlen, "cannot make a pipe: %s", strerror(errno));
    joblog_free(j);
    return GS_EIO;
  }
  gs_sink_param(sink, "log.streams", streams);
  char v[32];
  snprintf(v, sizeof v, "%lld", (long long)max);
  gs_sink_param(sink, "log.max_bytes", v);
  *out = j;
  return GS_OK;
}

void joblog_child(const struct joblog *j) {
  /* every descriptor of ours is close-on-exec; dup2's copies are not */
  for (int i = 0; i < 2; i++)
    dup2(j->pw[i] >= 0 ? j->pw[i] : j->slave, i + 1);
}

/* ---- lines that matter ---- */

static void jl_event(struct joblog *j, int64_t t, const char *name, int stream, const char *text) {
  char labels[16];
  snprintf(labels, sizeof labels, "stream=%s", JL_NAMES[stream]);
  gs_sink_event(j->sink, t, "log", name, NAN, labels, text);
}

/* The event a line is, or NULL: the words the frameworks print (PyTorch's "CUDA out of memory",
 * NCCL's own "NCCL error" / "NCCL WARN" with a timeout or an error, the kernel OOM killer's
 * "Killed" as the shell says it). */
static const char *jl_line_event(const char *l) {
  if (!strpbrk(l, "CNOK")) /* one pass: every word below has one of these capitals */
    return NULL;
  if (strstr(l, "CUDA out of memory") || strstr(l, "OutOfMemoryError"))
    return "cuda_oom";
  if (strstr(l, "NCCL")) {
    if (strcasestr(l, "timeout") || strcasestr(l, "timed out"))
      return "nccl_timeout";
    if (strcasestr(l, "error") || strstr(l, "NCCL WARN"))
      return "nccl_error";
  }
  const char *p = l;
  while (*p == ' ' || *p == '\t')
    p++;
  if (!strncmp(p, "Killed", 6) && (!p[6] || p[6] == ' '))
    return "killed";
  return NULL;
}

/* A whole line of one source (without its end): events, and the traceback it starts, continues or
 * ends. A traceback's frames are indented; its first line that is not is the exception, its last. */
static void jl_line(struct joblog *j, struct jl_src *s) {
  struct jl_lines *L = &s->lines;
  L->line[L->len] = 0;
  const char *l = L->line;
  if (L->in_tb && l[0] != ' ' && l[0] != '\t' && l[0]) {
    char text[2 * JL_LINE + 8];
    snprintf(text, sizeof text, "%s … %s", L->tb_first, l);
    jl_event(j, L->tb_t, "traceback", s->stream, text);
    L->in_tb = 0;
  }
  if (l[0] == 'T' && !strncmp(l, "Traceback (most recent call last):", 34)) {
    L->in_tb = 1, L->tb_t = L->t;
    snprintf(L->tb_first, sizeof L->tb_first, "%s", l);
  }
  const char *ev =
      L->in_tb && (l[0] == ' ' || l[0] == '\t') ? NULL : jl_line_event(l); /* a frame's code: not an event */
  if (ev)
    jl_event(j, L->t, ev, s->stream, l);
}

/* Cuts what was read into lines (\n, and \r: a progress bar's redraw is a line of its own), with
 * memchr: the agent passes a flood of output at the speed of a copy. */
static void jl_scan(struct joblog *j, struct jl_src *s, const uint8_t *b, size_t n, int64_t t) {
  struct jl_lines *L = &s->lines;
  for (size_t i = 0; i < n;) {
    if (!L->len)
      L->t = t;
    const uint8_t *nl = memchr(b + i, '\n', n - i);
    size_t upto = nl ? (size_t)(nl - b) : n; /* a '\r' before the '\n' ends the line first */
    const uint8_t *cr = memchr(b + i, '\r', upto - i), *e = cr ? cr : nl;
    size_t seg = (e ? (size_t)(e - b) : n) - i, room = JL_LINE - L->len;
    memcpy(L->line + L->len, b + i, seg < room ? seg : room);
    L->len += seg < room ? seg : room;
    i += seg;
    if (e) {
      if (L->len)
        jl_line(j, s);
      L->len = 0;
      i++;
    }
  }
}

/* ---- the pump ---- */

/* A chunk from the spares, else a new one; NULL when out of memory. Under mu. */
static struct jl_chunk *jl_chunk_get(struct joblog *j) {
  struct jl_chunk *c = j->spare;
  if (!c) {
    if ((c = malloc(sizeof *c)))
      j->nalloc++;
    return c;
  }
  j->spare = c->next, j->nspare--;
  return c;
}

/* Back to the spares, or freed while more than nalloc_max chunks are allocated (the buffer's bound
 * worth: the chunks the writer holds during a flush come on top). Under mu. */
static void jl_chunk_put(struct joblog *j, struct jl_chunk *c) {
  if (j->nalloc > j->nalloc_max) {
    free(c);
    j->nalloc--;
    return;
  }
  c->next = j->spare, j->spare = c, j->nspare++;
}

/* Keeps a copy of what was read: merged into the last chunk when it is of the same stream, recent
 * and has room, else a new chunk; the oldest chunks go when the buffer is over the bound. */
static void jl_keep(struct joblog *j, int stream, const uint8_t *b, size_t n, int64_t t) {
  pthread_mutex_lock(&j->mu);
  j->seen += (int64_t)n;
  struct jl_chunk *c = j->tail;
  if (!c || c->stream != stream || t - c->t > JL_MERGE_NS || c->len + n > JL_READ) {
    c = jl_chunk_get(j);
    if (!c) {
      j->dropped += (int64_t)n;
      pthread_mutex_unlock(&j->mu);
      return;
    }
    *c = (struct jl_chunk){.seq = j->seq++, .t = t, .stream = stream};
    if (j->tail)
      j->tail->next = c;
    else
      j->head = c;
    j->tail = c;
  }
  memcpy(c->data + c->len, b, n);
  c->len += n;
  j->buffered += (int64_t)n;
  while (j->buffered > j->max && j->head && j->head != j->tail) {
    struct jl_chunk *old = j->head;
    j->head = old->next;
    j->buffered -= (int64_t)old->len;
    j->dropped += (int64_t)old->len;
    jl_chunk_put(j, old);
  }
  pthread_mutex_unlock(&j->mu);
}

/* Writes b where the job's output goes. A reader gone there (EPIPE) closes the source, so the job
 * gets its SIGPIPE as it would have; another failure stops the copy to there (the store still keeps it). */
static void jl_pass(struct jl_src *s, const uint8_t *b, size_t n) {
  while (n && s->dest >= 0) {
    ssize_t w = write(s->dest, b, n);
    if (w > 0) {
      b += w, n -= (size_t)w;
    } else if (w < 0 && errno == EAGAIN) {
      struct pollfd p = {.fd = s->dest, .events = POLLOUT};
      poll(&p, 1, -1);
    } else if (!(w < 0 && errno == EINTR)) {
      if (w < 0 && errno == EPIPE)
        jl_close(&s->fd);
      s->dest = -1;
    }
  }
}

/* Reads what one source holds. Returns 0 while it may hold more, -1 at its end (every writer gone). */
static int jl_read(struct joblog *j, struct jl_src *s) {
  static __thread uint8_t buf[JL_READ];
  for (;;) {
    ssize_t r = read(s->fd, buf, sizeof buf);
    if (r > 0) {
      int64_t t = gs_mono_ns();
      jl_pass(s, buf, (size_t)r);
      jl_scan(j, s, buf, (size_t)r, t);
      jl_keep(j, s->stream, buf, (size_t)r, t);
      if (s->fd < 0)
        return -1;
      continue;
    }
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && errno == EAGAIN)
      return 0;
    jl_close(&s->fd); /* EOF, or EIO from a pty whose every slave is closed */
    return -1;
  }
}

/* The job has ended: what it wrote last, until each source's end or, when something the job left
 * still holds one open, until it is silent for JL_DRAIN_MS (a pty passes its last bytes on a moment
 * after the writer's exit: a read at once can miss them). */
#define JL_DRAIN_MS 200
static void jl_drain(struct joblog *j) {
  for (;;) {
    struct pollfd p[2];
    int n = 0;
    for (int i = 0; i < j->nsrc; i++)
      p[n++] = (struct pollfd){.fd = j->src[i].fd, .events = POLLIN};
    int open = 0;
    for (int i = 0; i < j->nsrc; i++)
      open += j->src[i].fd >= 0;
    if (!open || poll(p, (nfds_t)n, JL_DRAIN_MS) <= 0)
      return;
    for (int i = 0; i < j->nsrc; i++)
      if (j->src[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)))
        jl_read(j, &j->src[i]);
  }
}

static void *jl_main(void *arg) {
  struct joblog *j = arg;
  for (;;) {
    struct pollfd p[3];
    int n = 0;
    for (int i = 0; i < j->nsrc; i++)
      p[n++] = (struct pollfd){.fd = j->src[i].fd, .events = POLLIN};
    p[n++] = (struct pollfd){.fd = j->wake[0], .events = POLLIN};
    if (poll(p, (nfds_t)n, -1) < 0 && errno != EINTR)
      break;
    for (int i = 0; i < j->nsrc; i++)
      if (j->src[i].fd >= 0 && (p[i].revents & (POLLIN | POLLHUP | POLLERR)))
        jl_read(j, &j->src[i]);
    pthread_mutex_lock(&j->mu);
    int stop = j->stop;
    pthread_mutex_unlock(&j->mu);
    int open = 0;
    for (int i = 0; i < j->nsrc; i++)
      open += j->src[i].fd >= 0;
    if (stop || !open)
      break;
  }
  jl_drain(j);
  return NULL;
}

int joblog_start(struct joblog *j) {
  jl_close(&j->slave);
  jl_close(&j->pw[0]);
  jl_close(&j->pw[1]);
  if (pthread_create(&j->thread, NULL, jl_main, j))
    return gs_fail(GS_EIO, "cannot start the thread that passes the job's output on");
  j->started = 1;
  return GS_OK;
}

void joblog_winch(struct joblog *j) {
  struct winsize ws;
  if (j && j->tty_src >= 0 && j->nsrc && j->src[0].stream == JL_TTY && j->src[0].fd >= 0 &&
      ioctl(j->tty_src, TIOCGWINSZ, &ws) == 0)
    ioctl(j->src[0].fd, TIOCSWINSZ, &ws);
}

int joblog_has_tty(const struct joblog *j) {
  return j && j->tty_src >= 0;
}

void joblog_stop(struct joblog *j) {
  if (!j || !j->started)
    return;
  pthread_mutex_lock(&j->mu);
  j->stop = 1;
  pthread_mutex_unlock(&j->mu);
  ssize_t w = write(j->wake[1], "x", 1);
  (void)w;
  pthread_join(j->thread, NULL);
  j->started = 0;
  char v[32];
  pthread_mutex_lock(&j->mu);
  int64_t seen = j->seen, dropped = j->dropped;
  pthread_mutex_unlock(&j->mu);
  snprintf(v, sizeof v, "%lld", (long long)seen);
  gs_sink_param(j->sink, "log.bytes", v);
  snprintf(v, sizeof v, "%lld", (long long)dropped);
  gs_sink_param(j->sink, "log.dropped_bytes", v);
}

/* ---- the writer's side: the buffer into the store, within the bound ---- */

/* Notes a stored chunk; returns the seq from which the store keeps the run's chunks (0: all). */
static int64_t jl_kept_push(struct joblog *j, int64_t seq, int64_t len) {
  if (j->kept_n == j->kept_cap) {
    size_t cap = j->kept_cap ? j->kept_cap * 2 : 1024;
    int64_t(*v)[2] = malloc(cap * sizeof *v);
    if (!v)
      return -1;
    for (size_t i = 0; i < j->kept_n; i++)
      memcpy(v[i], j->kept[(j->kept_head + i) % j->kept_cap], sizeof *v);
    free(j->kept);
    j->kept = v, j->kept_cap = cap, j->kept_head = 0;
  }
  int64_t *e = j->kept[(j->kept_head + j->kept_n++) % j->kept_cap];
  e[0] = seq, e[1] = len;
  j->stored += len;
  while (j->stored > j->max && j->kept_n > 1) {
    j->stored -= j->kept[j->kept_head][1];
    j->kept_head = (j->kept_head + 1) % j->kept_cap, j->kept_n--;
  }
  return j->kept[j->kept_head][0];
}

/* Forgets the last n stored chunks (their append failed). */
static void jl_kept_pop(struct joblog *j, size_t n) {
  while (n-- && j->kept_n)
    j->stored -= j->kept[(j->kept_head + --j->kept_n) % j->kept_cap][1];
}

void joblog_flush(struct joblog *j, struct store *st, const struct store_run *run) {
  if (!j || st->version < 5 || !st->log_append)
    return;
  pthread_mutex_lock(&j->mu);
  struct jl_chunk *list = j->head;
  j->head = j->tail = NULL;
  j->buffered = 0;
  pthread_mutex_unlock(&j->mu);
  size_t n = 0;
  for (struct jl_chunk *c = list; c; c = c->next)
    n++;
  struct store_log_chunk *v = n ? calloc(n, sizeof *v) : NULL;
  int64_t keep_from = 0, lost = 0;
  size_t k = 0;
  for (struct jl_chunk *c = list; c && v; c = c->next) {
    v[k] = (struct store_log_chunk){.seq = c->seq, .t = c->t - run->mono_start_ns, .data = c->data, .len = c->len};
    snprintf(v[k].stream, sizeof v[k].stream, "%s", JL_NAMES[c->stream]);
    if ((keep_from = jl_kept_push(j, c->seq, (int64_t)c->len)) < 0)
      break;
    k++;
  }
  for (struct jl_chunk *c = list; c; c = c->next)
    lost += (int64_t)c->len;
  size_t first = 0; /* chunks of this flush already past the bound are not written at all */
  while (first < k && v[first].seq < keep_from)
    first++;
  int rc = n && k < n ? gs_fail(GS_ENOMEM, "out of memory") : GS_OK;
  if (!rc && (k > first || keep_from > 0))
    rc = st->log_append(st, run, v + first, k - first, keep_from);
  if (rc) {
    if (!j->first_error[0])
      snprintf(j->first_error, sizeof j->first_error, "%s", gs_last_error());
    jl_kept_pop(j, k);
    pthread_mutex_lock(&j->mu);
    j->dropped += lost;
    pthread_mutex_unlock(&j->mu);
  }
  free(v);
  pthread_mutex_lock(&j->mu);
  while (list) {
    struct jl_chunk *next = list->next;
    jl_chunk_put(j, list);
    list = next;
  }
  pthread_mutex_unlock(&j->mu);
}

void joblog_end(struct joblog *j) {
  if (!j)
    return;
  char v[32];
  snprintf(v, sizeof v, "%lld", (long long)j->stored);
  gs_sink_param(j->sink, "log.kept_bytes", v);
  if (j->first_error[0])
    gs_sink_note(j->sink, "the store did not keep all of the job's output: %s", j->first_error);
}

void joblog_free(struct joblog *j) {
  if (!j)
    return;
  joblog_stop(j);
  jl_close(&j->slave);
  for (int i = 0; i < 2; i++)
    jl_close(&j->pw[i]);
  for (int i = 0; i < j->nsrc; i++)
    jl_close(&j->src[i].fd);
  jl_close(&j->wake[0]);
  jl_close(&j->wake[1]);
  for (struct jl_chunk *l = j->head; l;) {
    struct jl_chunk *next = l->next;
    free(l);
    l = next;
  }
  for (struct jl_chunk *l = j->spare; l;) {
    struct jl_chunk *next = l->next;
    free(l);
    l = next;
  }
  free(j->kept);
  pthread_mutex_destroy(&j->mu);
  free(j);
}
