/* serve/conns: what the server keeps of each open connection, for the limits libmicrohttpd (0.9.75)
 * does not have. A deadline for a request's headers, however slowly they trickle in: its idle
 * timeout counts only silence, so a client sending a byte every few seconds held a connection for
 * ever; here a reaper thread shuts down a connection that has not sent complete headers
 * SERVE_HEADER_TIMEOUT_S after it opened or after its previous answer. A per-address connection
 * limit whose slot is freed the moment the connection is (libmicrohttpd's own kept a closed
 * connection's slot until its next accept), and which leaves 127.0.0.1 and ::1 — every local
 * user's one address — to the total limit. And failed token attempts per address: past SERVE_TOKEN_FAILS in
 * SERVE_TOKEN_WINDOW_S, the address's tokens are not even looked at until the window ends (429). */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include "serve/mhd_api.h"
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>

#include "serve/serve_int.h"

enum { RECHECK_S = 1 }; /* a late connection the server has not read yet is looked at again */

/* An address as a key: the family's byte, then 4 or 16 bytes (an IPv4-mapped IPv6 address is its
 * IPv4 address); port left out. Returns the key's length, 0 for an address of another family. */
static size_t addr_key(const struct sockaddr *sa, unsigned char key[17]) {
  if (!sa)
    return 0;
  if (sa->sa_family == AF_INET) {
    key[0] = 4;
    memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return 5;
  }
  if (sa->sa_family == AF_INET6) {
    const unsigned char *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
    static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
    if (!memcmp(b, mapped, 12)) {
      key[0] = 4;
      memcpy(key + 1, b + 12, 4);
      return 5;
    }
    key[0] = 6;
    memcpy(key + 1, b, 16);
    return 17;
  }
  return 0;
}

/* 127.0.0.1 or ::1: the address every local user's connection comes from. (Another 127.x address is
 * one a client chose to bind: limited like any other.) */
static int key_local(const unsigned char *key, size_t n) {
  static const unsigned char v4lo[4] = {127, 0, 0, 1}, v6lo[16] = {[15] = 1};
  return (n == 5 && !memcmp(key + 1, v4lo, 4)) || (n == 17 && !memcmp(key + 1, v6lo, 16));
}

static double mono(void) {
  return (double)gs_mono_ns() / GS_NS_PER_S;
}

/* The reaper: sleeps until the first deadline of a connection waiting for headers (with none, until
 * one starts waiting: an idle server never wakes), then shuts down each one that is late. */
static void *reaper_main(void *arg) {
  struct serve_conns *k = arg;
  pthread_mutex_lock(&k->mu);
  while (!k->stop) {
    double now = mono(), next = INFINITY;
    for (struct serve_conn *c = k->head; c; c = c->next) {
      if (!c->waiting || c->reaped)
        continue;
      double due = c->since + SERVE_HEADER_TIMEOUT_S;
      int pending = 0;
      if (now < due) {
        next = due < next ? due : next;
        continue;
      }
      /* Bytes the server has not read yet are its own delay (a busy thread), not the client's. */
      if (!ioctl(c->fd, FIONREAD, &pending) && pending > 0) {
        next = now + RECHECK_S < next ? now + RECHECK_S : next;
        continue;
      }
      /* The connection is still libmicrohttpd's (its close is notified, under this lock, before the
       * descriptor is closed): it sees the end of the stream and closes it as any other. */
      shutdown(c->fd, SHUT_RDWR);
      c->reaped = 1;
      k->reaped++;
    }
    k->idle = !isfinite(next);
    if (k->idle) {
      pthread_cond_wait(&k->cv, &k->mu);
      continue;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double wake = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 + (next - now) + 0.01;
    ts.tv_sec = (time_t)wake;
    ts.tv_nsec = (long)((wake - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&k->cv, &k->mu, &ts);
  }
  pthread_mutex_unlock(&k->mu);
  return NULL;
}

/* A connection starts waiting for headers (under k->mu): an idle reaper must set its clock. */
static void reaper_wake(struct serve_conns *k) {
  if (k->idle) {
    k->idle = 0;
    pthread_cond_signal(&k->cv);
  }
}

int serve_conns_init(struct serve_conns *k) {
  memset(k, 0, sizeof *k);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_mutex_init(&k->mu, NULL);
  pthread_cond_init(&k->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (pthread_create(&k->reaper, NULL, reaper_main, k)) {
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    return gs_fail(GS_EIO, "cannot start a thread: %s", strerror(errno));
  }
  k->started = 1;
  return GS_OK;
}

void serve_conns_done(struct serve_conns *k) {
  if (!k->started)
    return;
  pthread_mutex_lock(&k->mu);
  k->stop = 1;
  pthread_cond_signal(&k->cv);
  pthread_mutex_unlock(&k->mu);
  pthread_join(k->reaper, NULL);
  while (k->head) { /* none once the daemon has stopped; freed all the same */
    struct serve_conn *c = k->head;
    k->head = c->next;
    free(c);
  }
  pthread_cond_destroy(&k->cv);
  pthread_mutex_destroy(&k->mu);
  k->started = 0;
}

enum MHD_Result serve_conns_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
  struct serve_conns *k = cls;
  unsigned char key[17];
  size_t n = addr_key(addr, key);
  (void)addrlen;
  if (!n)
    return MHD_NO;
  if (key_local(key, n))
    return MHD_YES; /* every local user comes from here: only the total limit applies */
  unsigned same = 0;
  pthread_mutex_lock(&k->mu);
  for (struct serve_conn *c = k->head; c; c = c->next)
    same += c->keylen == n && !memcmp(c->key, key, n);
  pthread_mutex_unlock(&k->mu);
  return same < SERVE_MAX_PER_IP ? MHD_YES : MHD_NO;
}

void serve_conns_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                        enum MHD_ConnectionNotificationCode toe) {
  struct serve_conns *k = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    struct serve_conn *c = calloc(1, sizeof *c);
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ad = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    *socket_context = c;
    if (!c || !fd)
      return; /* untracked: only the limits libmicrohttpd has apply to it */
    c->fd = fd->connect_fd;
    c->keylen = ad ? addr_key(ad->client_addr, c->key) : 0;
    c->waiting = 1;
    c->since = mono();
    pthread_mutex_lock(&k->mu);
    c->next = k->head;
    if (k->head)
      k->head->prev = c;
    k->head = c;
    k->n++;
    reaper_wake(k);
    pthread_mutex_unlock(&k->mu);
    return;
  }
  struct serve_conn *c = *socket_context;
  *socket_context = NULL;
  if (!c)
    return;
  pthread_mutex_lock(&k->mu);
  if (c->prev || k->head == c) {
    if (c->prev)
      c->prev->next = c->next;
    else
      k->head = c->next;
    if (c->next)
      c->next->prev = c->prev;
    k->n--;
  }
  pthread_mutex_unlock(&k->mu);
  free(c);
}

/* The connection's record, or NULL when untracked. */
static struct serve_conn *conn_of(struct MHD_Connection *connection) {
  const union MHD_ConnectionInfo *i = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return i ? i->socket_context : NULL;
}

void serve_conns_headers_done(struct serve_conns *k, struct MHD_Connection *connection) {
  struct serve_conn *c = conn_of(connection);
  if (!c)
    return;
  pthread_mutex_lock(&k->mu);
  c->waiting = 0;
  pthread_mutex_unlock(&k->mu);
}

void serve_conns_completed(void *cls, struct MHD_Connection *connection, void **con_cls,
                           enum MHD_RequestTerminationCode toe) {
  struct serve_conns *k = cls;
  struct serve_conn *c = conn_of(connection);
  (void)con_cls;
  (void)toe;
  if (!c)
    return;
  /* Kept alive, the connection now waits for its next request's headers: from now on. */
  pthread_mutex_lock(&k->mu);
  c->waiting = 1;
  c->since = mono();
  reaper_wake(k);
  pthread_mutex_unlock(&k->mu);
}

size_t serve_conns_count(struct serve_conns *k) {
  pthread_mutex_lock(&k->mu);
  size_t n = k->n;
  pthread_mutex_unlock(&k->mu);
  return n;
}

/* The failure record of the connection's address: found, or the slot of the oldest (reset). */
static struct serve_token_fails *fails_of(struct serve_conns *k, struct MHD_Connection *connection, double now) {
  const union MHD_ConnectionInfo *ad = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  unsigned char key[17];
  size_t n = ad ? addr_key(ad->client_addr, key) : 0;
  if (!n)
    return NULL;
  struct serve_token_fails *oldest = &k->fails[0];
  for (size_t i = 0; i < SERVE_TOKEN_FAIL_SLOTS; i++) {
    struct serve_token_fails *f = &k->fails[i];
    if (f->keylen == n && !memcmp(f->key, key, n)) {
      if (now - f->window_start >= SERVE_TOKEN_WINDOW_S) {
        f->window_start = now;
        f->count = 0;
      }
      return f;
    }
    if (f->window_start < oldest->window_start)
      oldest = &k->fails[i];
  }
  memset(oldest, 0, sizeof *oldest);
  memcpy(oldest->key, key, n);
  oldest->keylen = n;
  oldest->window_start = now;
  return oldest;
}

int serve_conns_token_blocked(struct serve_conns *k, struct MHD_Connection *connection) {
  double now = mono();
  int left = 0;
  pthread_mutex_lock(&k->mu);
  struct serve_token_fails *f = fails_of(k, connection, now);
  if (f && f->count >= SERVE_TOKEN_FAILS)
    left = (int)(f->window_start + SERVE_TOKEN_WINDOW_S - now) + 1;
  pthread_mutex_unlock(&k->mu);
  return left;
}

void serve_conns_token_failed(struct serve_conns *k, struct MHD_Connection *connection) {
  double now = mono();
  pthread_mutex_lock(&k->mu);
  struct serve_token_fails *f = fails_of(k, connection, now);
  if (f)
    f->count++;
  pthread_mutex_unlock(&k->mu);
}
