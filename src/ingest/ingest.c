/* ingest/ingest: the agent's end of the client channel. It owns the UNIX datagram socket (0600, in a
 * private 0700 directory), drains it without blocking when the run loop sees it readable, splits each
 * datagram into message lines, has ingest_parse_line() validate them, and routes the good ones into
 * the sink under the names ingest.h fixes. Bad messages are counted per kind, and the first of each
 * kind is logged to stderr and noted on the run; the counts are kept as run params. A per-run limit
 * on distinct client series, params and marks keeps a runaway client from growing the agent. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ingest/ingest.h"

#define MAX_DATAGRAMS_PER_POLL 1024
#define MAX_CLIENT_SERIES 1000 /* distinct metric and phase series */
#define MAX_PARAMS 10000       /* param messages per run */
#define MAX_MARKS 100000       /* mark messages per run */
#define RCVBUF_BYTES (1 << 20) /* room for bursts while the run loop samples */
#define COUNTS_EVERY_NS GS_NS_PER_S
/* Steps kept per second and rank. A real training loop makes 1 to a few hundred steps a second; a
 * client that reports far more (a step per sample, a loop in a benchmark) would grow the store and
 * every reader of the run without bound. The steps over the cap are counted, not stored, and the run
 * says so (param ingest.steps_over_cap, a note, the summary, the report). docs/protocol.md. */
#define MAX_STEPS_PER_S 1000
/* The same for each client metric series (a value per step is plenty): param ingest.metrics_over_cap. */
#define MAX_METRIC_POINTS_PER_S 1000
#define STEP_WINDOW_NS GS_NS_PER_S

enum { STEP_N, STEP_DATA, STEP_H2D, STEP_COMPUTE, STEP_TOTAL, STEP_SAMPLES, STEP_NSERIES };

struct ingest {
  int fd;
  int own_dir; /* the directory is ours to remove */
  char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
  char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
  int64_t open_ns;
  struct ingest_counts counts;
  uint64_t params, marks; /* accepted so far, for the limits */
  unsigned logged;        /* bit per kind (and one for limits): already logged once */
  int step_ids[STEP_NSERIES];
  int64_t last_step_ns; /* step points move strictly forward, all step series together */
  int64_t *last_ns;     /* by sink series id: the last metric point's time */
  size_t n_last;
  struct step_window *windows; /* by the sink id of a rank's step.n series: steps kept this second */
  size_t n_windows;
  uint64_t steps_over_cap, over_cap_written;
  uint64_t metrics_over_cap, metrics_over_cap_written;
  size_t client_series;      /* distinct client series created */
  uint64_t bad_written;      /* bad + limited, as last written as params */
  uint64_t dropped_written;  /* counts.client_dropped, as last written */
  uint64_t rejected_written; /* the sum of counts.client_rejected, as last written */
  int64_t counts_ns;         /* when the counts were last written */
  char buf[INGEST_MAX_DATAGRAM + 1];
};

#define LOGGED_LIMIT (1u << INGEST_NKINDS)

struct step_window {
  int64_t start; /* 0: none yet */
  uint32_t kept;
};

static struct ingest *ingest_new(char *err, size_t errlen) {
  struct ingest *in = calloc(1, sizeof *in);
  if (!in) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  in->fd = -1;
  in->open_ns = gs_mono_ns();
  for (int i = 0; i < STEP_NSERIES; i++)
    in->step_ids[i] = -1;
  return in;
}

static int bind_socket(struct ingest *in, char *err, size_t errlen) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(in->path) >= sizeof a.sun_path) {
    snprintf(err, errlen, "socket path too long: %s", in->path);
    return GS_EINVAL;
  }
  memcpy(a.sun_path, in->path, strlen(in->path) + 1);
  in->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (in->fd < 0 || bind(in->fd, (struct sockaddr *)&a, sizeof a)) {
    snprintf(err, errlen, "cannot bind %s: %s", in->path, strerror(errno));
    return GS_EIO;
  }
  /* chmod after bind: the directory (0700) already keeps others out in between. */
  if (chmod(in->path, 0600)) {
    snprintf(err, errlen, "cannot chmod %s: %s", in->path, strerror(errno));
    unlink(in->path);
    return GS_EIO;
  }
  int sz = RCVBUF_BYTES;
  (void)setsockopt(in->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz); /* best effort */
  return GS_OK;
}

/* Removes the socket directories that agents killed with SIGKILL left in base: ours (same owner,
 * 0700, named gpuscope-*), whose socket nobody reads any more (a datagram connect() is refused), or
 * empty for a minute (killed between mkdtemp and bind). A live agent's socket accepts the connect,
 * so it is never touched; anything else in a directory makes rmdir fail and keeps it. */
static void clean_stale_dirs(const char *base) {
  DIR *d = opendir(base);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, "gpuscope-", 9))
      continue;
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path) - 5], sock[sizeof dir + 5];
    struct stat st;
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", base, e->d_name) >= sizeof dir || lstat(dir, &st) ||
        !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0777) != 0700)
      continue;
    snprintf(sock, sizeof sock, "%s/sock", dir);
    struct stat ss;
    if (lstat(sock, &ss)) {
      if (errno == ENOENT && time(NULL) - st.st_mtime > 60)
        rmdir(dir);
      continue;
    }
    if (!S_ISSOCK(ss.st_mode))
      continue;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, sock, strlen(sock) + 1);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      continue;
    int dead = connect(fd, (struct sockaddr *)&a, sizeof a) && errno == ECONNREFUSED;
    close(fd);
    if (dead && !unlink(sock))
      rmdir(dir);
  }
  closedir(d);
}

struct ingest *ingest_open(char *err, size_t errlen) {
  struct ingest *in = ingest_new(err, errlen);
  if (!in)
    return NULL;
  const char *tmp = getenv("TMPDIR");
  /* A long TMPDIR would not fit sun_path (108 bytes): fall back to /tmp. */
  if (!tmp || !*tmp || strlen(tmp) > 64)
    tmp = "/tmp";
  clean_stale_dirs(tmp);
  snprintf(in->dir, sizeof in->dir, "%s/gpuscope-XXXXXX", tmp);
  if (!mkdtemp(in->dir)) {
    snprintf(err, errlen, "cannot create a directory in %s: %s", tmp, strerror(errno));
    goto fail;
  }
  in->own_dir = 1;
  chmod(in->dir, 0700);
  size_t dl = strlen(in->dir); /* <= 64 + 16 by the TMPDIR check, so "/sock" fits */
  memcpy(in->path, in->dir, dl);
  memcpy(in->path + dl, "/sock", sizeof "/sock");
  if (bind_socket(in, err, errlen))
    goto fail;
  return in;
fail:
  ingest_close(in);
  return NULL;
}

struct ingest *ingest_open_at(const char *path, char *err, size_t errlen) {
  struct ingest *in = ingest_new(err, errlen);
  if (!in)
    return NULL;
  if (strlen(path) >= sizeof in->path) {
    snprintf(err, errlen, "socket path too long: %s", path);
    goto fail;
  }
  snprintf(in->path, sizeof in->path, "%s", path);
  if (bind_socket(in, err, errlen)) {
    in->path[0] = 0; /* not ours: never unlink what we failed to bind */
    goto fail;
  }
  return in;
fail:
  ingest_close(in);
  return NULL;
}

const char *ingest_socket_path(const struct ingest *in) {
  return in ? in->path : "";
}

int ingest_fd(const struct ingest *in) {
  return in ? in->fd : -1;
}

void ingest_counts(const struct ingest *in, struct ingest_counts *out) {
  if (in)
    *out = in->counts;
  else
    memset(out, 0, sizeof *out);
}

static uint64_t total(const uint64_t *v) {
  uint64_t t = 0;
  for (int k = 0; k < INGEST_NKINDS; k++)
    t += v[k];
  return t;
}

/* Copies a slice into a NUL-terminated buffer of size cap (the parser bounds every slice). */
static const char *cstr(char *dst, size_t cap, struct ingest_str s) {
  size_t n = s.n < cap ? s.n : cap - 1;
  memcpy(dst, s.p, n);
  dst[n] = 0;
  return dst;
}

/* The line as a short, printable quote for a log line (non-printable bytes as \xHH). */
static const char *quote(char *dst, size_t cap, const char *s, size_t n) {
  size_t o = 0, i = 0;
  for (; i < n && o + 8 < cap; i++) { /* room for one \xHH, "..." and the NUL */
    unsigned char ch = (unsigned char)s[i];
    if (ch >= 0x20 && ch < 0x7f)
      dst[o++] = (char)ch;
    else
      o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", ch);
  }
  if (i < n)
    memcpy(dst + o, "...", 3), o += 3;
  dst[o] = 0;
  return dst;
}

static void log_once(struct ingest *in, struct gs_sink *sink, unsigned bit, const char *what, const char *why,
                     const char *line, size_t n) {
  if (in->logged & bit)
    return;
  in->logged |= bit;
  char q[200];
  quote(q, sizeof q, line, n);
  fprintf(stderr, "gpuscope: client: %s (%s): '%s'; further ones are only counted\n", what, why, q);
  gs_sink_note(sink, "client: %s (%s): '%s'", what, why, q);
}

static void reject(struct ingest *in, struct gs_sink *sink, const struct ingest_msg *m, const char *line, size_t n) {
  in->counts.bad[m->kind]++;
  char what[48];
  snprintf(what, sizeof what, "bad %s message", ingest_kind_name(m->kind));
  log_once(in, sink, 1u << m->kind, what, m->error, line, n);
}

static void limited(struct ingest *in, struct gs_sink *sink, const char *why, const char *line, size_t n) {
  in->counts.limited++;
  log_once(in, sink, LOGGED_LIMIT, "message dropped", why, line, n);
}

/* A series id for (source, name), created on first use within the per-run limit; -1 when over it. */
static int client_series(struct ingest *in, struct gs_sink *sink, const char *source, const char *name,
                         const char *labels, const char *unit) {
  int id = gs_sink_find(sink, source, name, labels);
  if (id >= 0)
    return id;
  if (in->client_series >= MAX_CLIENT_SERIES)
    return -1;
  id = gs_sink_series(sink, source, name, labels, unit, GS_GAUGE);
  if (id >= 0)
    in->client_series++;
  return id;
}

/* The last time put into series id (0 when none), growing the table as needed; NULL on ENOMEM. */
static int64_t *last_slot(struct ingest *in, int id) {
  if ((size_t)id >= in->n_last) {
    size_t n = in->n_last ? in->n_last : 64;
    while (n <= (size_t)id)
      n *= 2;
    int64_t *p = realloc(in->last_ns, n * sizeof *p);
    if (!p)
      return NULL;
    memset(p + in->n_last, 0, (n - in->n_last) * sizeof *p);
    in->last_ns = p;
    in->n_last = n;
  }
  return &in->last_ns[id];
}

/* Whether one more point of series id (a rank's step.n for steps) fits cap points in the second
 * (of message time) that its window started; counts the ones that do not in *over. */
static int rate_fits(struct ingest *in, int id, int64_t t, uint32_t cap, uint64_t *over) {
  if ((size_t)id >= in->n_windows) {
    size_t n = in->n_windows ? in->n_windows : 16;
    while (n <= (size_t)id)
      n *= 2;
    struct step_window *w = realloc(in->windows, n * sizeof *w);
    if (!w)
      return 1;
    memset(w + in->n_windows, 0, (n - in->n_windows) * sizeof *w);
    in->windows = w;
    in->n_windows = n;
  }
  struct step_window *w = &in->windows[id];
  if (!w->start || t - w->start >= STEP_WINDOW_NS)
    *w = (struct step_window){.start = t, .kept = 0};
  if (w->kept >= cap) {
    (*over)++;
    return 0;
  }
  w->kept++;
  return 1;
}

/* The message's time: its t= when it falls within this channel's life (same clock, so anything else
 * is a bug or another time namespace), else the arrival time. */
static int64_t msg_time(const struct ingest *in, const struct ingest_msg *m, int64_t now_ns) {
  if (!(m->has & INGEST_HAS_T))
    return now_ns;
  int64_t t = (int64_t)llround(m->t * GS_NS_PER_S);
  return t >= in->open_ns && t <= now_ns + GS_NS_PER_S ? t : now_ns;
}

static int put_metric(struct ingest *in, struct gs_sink *sink, const struct ingest_msg *m, int64_t now_ns,
                      const char *line, size_t n) {
  char name[INGEST_MAX_NAME + 1];
  cstr(name, sizeof name, m->name);
  int id = client_series(in, sink, "client", name, "", "");
  int sid = m->has & INGEST_HAS_STEP ? client_series(in, sink, "client.step", name, "", "count") : -2;
  int64_t *last = id >= 0 ? last_slot(in, id) : NULL;
  if (id < 0 || sid == -1 || !last) {
    limited(in, sink, "more than 1000 distinct client series", line, n);
    return 0;
  }
  /* The store keeps a series strictly moving forward: two values that arrive in one datagram get
   * one nanosecond apart rather than the second being lost. */
  int64_t t = msg_time(in, m, now_ns);
  if (t <= *last)
    t = *last + 1;
  if (!rate_fits(in, id, t, MAX_METRIC_POINTS_PER_S, &in->metrics_over_cap))
    return 1; /* valid and counted as received; not stored, and the run says how many */
  *last = t;
  gs_sink_put(sink, id, t, m->value);
  if (sid >= 0)
    gs_sink_put(sink, sid, t, (double)m->step);
  return 1;
}

static int put_step(struct ingest *in, struct gs_sink *sink, const struct ingest_msg *m, int64_t now_ns,
                    const char *line, size_t n) {
  static const char *const names[STEP_NSERIES] = {"step.n",         "step.data_s",  "step.h2d_s",
                                                  "step.compute_s", "step.total_s", "step.samples"};
  static const char *const units[STEP_NSERIES] = {"count", "s", "s", "s", "s", "count"};
  /* Rank 0 (or no rank) is the job's main loop, unlabelled, which the doctor reads; the other ranks
   * of a distributed job get the same series labelled rank=R, each moving forward on its own. */
  char labels[32] = "";
  if ((m->has & INGEST_HAS_RANK) && m->rank > 0)
    snprintf(labels, sizeof labels, "rank=%lld", (long long)m->rank);
  int ids[STEP_NSERIES];
  for (int i = 0; i < STEP_NSERIES; i++) {
    if (labels[0])
      ids[i] = client_series(in, sink, "client", names[i], labels, units[i]);
    else if (in->step_ids[i] < 0)
      ids[i] = in->step_ids[i] = gs_sink_series(sink, "client", names[i], "", units[i], GS_GAUGE);
    else
      ids[i] = in->step_ids[i];
    if (ids[i] < 0) {
      limited(in, sink, "more than 1000 distinct client series", line, n);
      return 0;
    }
  }
  int phase_ids[INGEST_MAX_PHASES];
  for (size_t i = 0; i < m->n_phases; i++) {
    char name[INGEST_MAX_NAME + 16], pn[INGEST_MAX_NAME + 1];
    snprintf(name, sizeof name, "step.%s_s", cstr(pn, sizeof pn, m->phases[i].name));
    if ((phase_ids[i] = client_series(in, sink, "client", name, labels, "s")) < 0) {
      limited(in, sink, "more than 1000 distinct client series", line, n);
      return 0;
    }
  }
  int64_t *last = labels[0] ? last_slot(in, ids[STEP_N]) : &in->last_step_ns;
  if (!last)
    return 0;
  int64_t t = msg_time(in, m, now_ns);
  if (t <= *last)
    t = *last + 1;
  if (!rate_fits(in, ids[STEP_N], t, MAX_STEPS_PER_S, &in->steps_over_cap))
    return 1; /* valid and counted as received; not stored, and the run says how many */
  *last = t;
  double sum = 0;
  int any = 0;
  gs_sink_put(sink, ids[STEP_N], t, (double)m->step);
  const struct {
    unsigned bit;
    int series;
    double v;
  } fixed[] = {{INGEST_HAS_DATA, STEP_DATA, m->data_s},
               {INGEST_HAS_H2D, STEP_H2D, m->h2d_s},
               {INGEST_HAS_COMPUTE, STEP_COMPUTE, m->compute_s}};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
    if (m->has & fixed[i].bit) {
      gs_sink_put(sink, ids[fixed[i].series], t, fixed[i].v);
      sum += fixed[i].v;
      any = 1;
    }
  for (size_t i = 0; i < m->n_phases; i++) {
    gs_sink_put(sink, phase_ids[i], t, m->phases[i].s);
    sum += m->phases[i].s;
    any = 1;
  }
  if (any)
    gs_sink_put(sink, ids[STEP_TOTAL], t, sum);
  if (m->has & INGEST_HAS_SAMPLES)
    gs_sink_put(sink, ids[STEP_SAMPLES], t, (double)m->samples);
  return 1;
}

/* Routes one valid message into the sink; returns 1 when it was stored, 0 when a limit dropped it. */
static int route(struct ingest *in, struct gs_sink *sink, const struct ingest_msg *m, int64_t now_ns, const char *line,
                 size_t n) {
  char name[INGEST_MAX_NAME + 1], text[INGEST_MAX_TEXT + 1];
  switch (m->kind) {
  case INGEST_METRIC:
    return put_metric(in, sink, m, now_ns, line, n);
  case INGEST_STEP:
    return put_step(in, sink, m, now_ns, line, n);
  case INGEST_PARAM:
    if (in->params >= MAX_PARAMS) {
      limited(in, sink, "more than 10000 params", line, n);
      return 0;
    }
    in->params++;
    gs_sink_param(sink, cstr(name, sizeof name, m->name), cstr(text, sizeof text, m->text));
    return 1;
  case INGEST_MARK:
    if (in->marks >= MAX_MARKS) {
      limited(in, sink, "more than 100000 marks", line, n);
      return 0;
    }
    in->marks++;
    gs_sink_event(sink, msg_time(in, m, now_ns), "mark", cstr(name, sizeof name, m->name),
                  m->has & INGEST_HAS_VALUE ? m->value : NAN, "", "");
    return 1;
  case INGEST_DROPPED:
    in->counts.client_dropped += (uint64_t)m->step;
    return 1;
  case INGEST_REJECTED:
    in->counts.client_rejected[m->cause] += (uint64_t)m->step;
    return 1;
  default:
    return 0;
  }
}

/* What the clients refused, in all. */
static uint64_t rejected_total(const struct ingest_counts *c) {
  uint64_t n = 0;
  for (int k = 0; k < INGEST_NCAUSES; k++)
    n += c->client_rejected[k];
  return n;
}

/* "value A, name B, step C, argument D": what the clients refused, by cause, into buf. */
static void rejected_text(const struct ingest_counts *c, char *buf, size_t n) {
  int o = 0;
  buf[0] = 0;
  for (int k = 0; k < INGEST_NCAUSES && o >= 0 && (size_t)o < n; k++)
    o += snprintf(buf + o, n - (size_t)o, "%s%s %llu", k ? ", " : "", ingest_cause_name((enum ingest_cause)k),
                  (unsigned long long)c->client_rejected[k]);
}

/* The params of what the clients refused: ingest.client_rejected (the text above) and one per cause. */
static void write_rejected(struct ingest *in, struct gs_sink *sink) {
  char key[48], num[24], by[128], val[160];
  for (int k = 0; k < INGEST_NCAUSES; k++) {
    snprintf(key, sizeof key, "ingest.client_rejected.%s", ingest_cause_name((enum ingest_cause)k));
    snprintf(num, sizeof num, "%llu", (unsigned long long)in->counts.client_rejected[k]);
    gs_sink_param(sink, key, num);
  }
  rejected_text(&in->counts, by, sizeof by);
  snprintf(val, sizeof val, "%llu (%s)", (unsigned long long)rejected_total(&in->counts), by);
  gs_sink_param(sink, "ingest.client_rejected", val);
  in->rejected_written = rejected_total(&in->counts);
}

/* Keeps the bad-message counts (and what the clients dropped or refused) on the run as params, at
 * most once a second while they change, so a run whose agent dies still has them. */
static void write_counts(struct ingest *in, struct gs_sink *sink, int64_t now_ns, int drained) {
  uint64_t bad = total(in->counts.bad) + in->counts.limited;
  if (rejected_total(&in->counts) != in->rejected_written && (drained || now_ns - in->counts_ns >= COUNTS_EVERY_NS))
    write_rejected(in, sink);
  if ((bad == in->bad_written && in->counts.client_dropped == in->dropped_written &&
       in->steps_over_cap == in->over_cap_written && in->metrics_over_cap == in->metrics_over_cap_written) ||
      (!drained && now_ns - in->counts_ns < COUNTS_EVERY_NS))
    return;
  char num[24];
  if (in->steps_over_cap != in->over_cap_written) {
    snprintf(num, sizeof num, "%llu", (unsigned long long)in->steps_over_cap);
    gs_sink_param(sink, "ingest.steps_over_cap", num);
    in->over_cap_written = in->steps_over_cap;
  }
  if (in->metrics_over_cap != in->metrics_over_cap_written) {
    snprintf(num, sizeof num, "%llu", (unsigned long long)in->metrics_over_cap);
    gs_sink_param(sink, "ingest.metrics_over_cap", num);
    in->metrics_over_cap_written = in->metrics_over_cap;
  }
  if (in->counts.client_dropped != in->dropped_written) {
    snprintf(num, sizeof num, "%llu", (unsigned long long)in->counts.client_dropped);
    gs_sink_param(sink, "ingest.client_dropped", num);
    in->dropped_written = in->counts.client_dropped;
  }
  if (bad != in->bad_written) {
    /* In this order: metric, param, step, mark, other, and dropped only when there were bad ones. */
    static const int order[] = {INGEST_METRIC, INGEST_PARAM,   INGEST_STEP,    INGEST_MARK,
                                INGEST_OTHER,  INGEST_DROPPED, INGEST_REJECTED};
    char key[32], val[200];
    int o = snprintf(val, sizeof val, "%llu (", (unsigned long long)total(in->counts.bad));
    for (size_t k = 0; k < sizeof order / sizeof *order; k++) {
      int kind = order[k];
      if ((kind == INGEST_DROPPED || kind == INGEST_REJECTED) && !in->counts.bad[kind])
        continue;
      o += snprintf(val + o, sizeof val - (size_t)o, "%s%s %llu", k ? ", " : "", ingest_kind_name(kind),
                    (unsigned long long)in->counts.bad[kind]);
      snprintf(key, sizeof key, "ingest.bad.%s", ingest_kind_name(kind));
      snprintf(num, sizeof num, "%llu", (unsigned long long)in->counts.bad[kind]);
      gs_sink_param(sink, key, num);
    }
    snprintf(val + o, sizeof val - (size_t)o, ")");
    gs_sink_param(sink, "ingest.bad_messages", val);
    if (in->counts.limited) {
      snprintf(num, sizeof num, "%llu", (unsigned long long)in->counts.limited);
      gs_sink_param(sink, "ingest.limited", num);
    }
    in->bad_written = bad;
  }
  in->counts_ns = now_ns;
}

int ingest_poll(struct ingest *in, struct gs_sink *sink, int64_t now_ns) {
  if (!in || !sink)
    return 0;
  int accepted = 0, drained = 0;
  for (int d = 0; d < MAX_DATAGRAMS_PER_POLL; d++) {
    ssize_t r = recv(in->fd, in->buf, sizeof in->buf - 1, MSG_DONTWAIT | MSG_TRUNC);
    if (r < 0) {
      drained = errno == EAGAIN || errno == EWOULDBLOCK;
      if (errno == EINTR)
        continue;
      break;
    }
    if (r > INGEST_MAX_DATAGRAM) {
      in->counts.bad[INGEST_OTHER]++;
      log_once(in, sink, 1u << INGEST_OTHER, "bad datagram", "longer than 4096 bytes", in->buf, 64);
      continue;
    }
    const char *p = in->buf, *end = in->buf + r;
    while (p < end) {
      const char *nl = memchr(p, '\n', (size_t)(end - p));
      const char *le = nl ? nl : end;
      size_t n = (size_t)(le - p);
      if (n) { /* empty lines (a trailing newline) are not messages */
        struct ingest_msg m;
        if (ingest_parse_line(p, n, &m))
          reject(in, sink, &m, p, n);
        else if (route(in, sink, &m, now_ns, p, n)) {
          in->counts.ok[m.kind]++;
          accepted++;
        }
      }
      p = le + 1;
    }
  }
  write_counts(in, sink, now_ns, drained);
  return accepted;
}

void ingest_finish(struct ingest *in, struct gs_sink *sink, int64_t now_ns) {
  if (!in || !sink)
    return;
  write_counts(in, sink, now_ns, 1);
  if (in->steps_over_cap)
    gs_sink_note(sink,
                 "client: %llu of %llu steps not stored: more than %d steps a second (per rank) are counted "
                 "only; step figures are built on the steps kept",
                 (unsigned long long)in->steps_over_cap, (unsigned long long)in->counts.ok[INGEST_STEP],
                 MAX_STEPS_PER_S);
  if (in->metrics_over_cap)
    gs_sink_note(sink, "client: %llu metric values not stored: more than %d a second in one series are counted only",
                 (unsigned long long)in->metrics_over_cap, MAX_METRIC_POINTS_PER_S);
  if (rejected_total(&in->counts)) {
    char val[160];
    rejected_text(&in->counts, val, sizeof val);
    gs_sink_note(sink, "client: the job's client refused %llu values it could not send, not stored (%s)",
                 (unsigned long long)rejected_total(&in->counts), val);
  }
  if (in->counts.client_dropped)
    gs_sink_note(sink,
                 "client: the job's client dropped %llu messages it could not send (socket full or agent busy); "
                 "%llu steps arrived, so step figures are built on part of the steps",
                 (unsigned long long)in->counts.client_dropped, (unsigned long long)in->counts.ok[INGEST_STEP]);
}

void ingest_summary(const struct ingest *in, FILE *out) {
  if (!in)
    return;
  const struct ingest_counts *c = &in->counts;
  uint64_t ok = total(c->ok), bad = total(c->bad);
  if (!ok && !bad) {
    fprintf(out, "  client: no messages (the job did not use the gpuscope client; see docs/protocol.md)\n");
    return;
  }
  fprintf(out, "  client: %llu messages (%llu steps, %llu metrics, %llu params, %llu marks)\n", (unsigned long long)ok,
          (unsigned long long)c->ok[INGEST_STEP], (unsigned long long)c->ok[INGEST_METRIC],
          (unsigned long long)c->ok[INGEST_PARAM], (unsigned long long)c->ok[INGEST_MARK]);
  if (bad)
    fprintf(out, "  client: %llu bad messages rejected (metric %llu, param %llu, step %llu, mark %llu, other %llu)\n",
            (unsigned long long)bad, (unsigned long long)c->bad[INGEST_METRIC],
            (unsigned long long)c->bad[INGEST_PARAM], (unsigned long long)c->bad[INGEST_STEP],
            (unsigned long long)c->bad[INGEST_MARK], (unsigned long long)c->bad[INGEST_OTHER]);
  if (c->limited)
    fprintf(out, "  client: %llu messages dropped by per-run limits\n", (unsigned long long)c->limited);
  if (in->steps_over_cap)
    fprintf(out, "  client: %llu steps not stored (over the cap of %d steps a second): step figures are partial\n",
            (unsigned long long)in->steps_over_cap, MAX_STEPS_PER_S);
  if (in->metrics_over_cap)
    fprintf(out, "  client: %llu metric values not stored (over the cap of %d a second per series)\n",
            (unsigned long long)in->metrics_over_cap, MAX_METRIC_POINTS_PER_S);
  if (c->client_dropped)
    fprintf(out,
            "  client: %llu messages dropped by the job's client (socket full or agent busy): step figures are "
            "partial\n",
            (unsigned long long)c->client_dropped);
  if (rejected_total(c)) {
    char val[160];
    rejected_text(c, val, sizeof val);
    fprintf(out, "  client: %llu values refused by the job's client, not stored (%s)\n",
            (unsigned long long)rejected_total(c), val);
  }
}

void ingest_close(struct ingest *in) {
  if (!in)
    return;
  if (in->fd >= 0)
    close(in->fd);
  if (in->path[0] && in->fd >= 0)
    unlink(in->path);
  if (in->own_dir)
    rmdir(in->dir);
  free(in->last_ns);
  free(in->windows);
  free(in);
}
