/* collect/kubelet_podres: which pod holds each GPU, from the kubelet's pod-resources API (v1
 * PodResourcesLister.List over /var/lib/kubelet/pod-resources/kubelet.sock), the source
 * dcgm-exporter uses: it knows a GPU's pod even while no process runs on it.
 *
 * gRPC is HTTP/2 over the socket; one unary call on a local socket needs little of either, so this
 * file speaks it itself — the connection preface, SETTINGS (a 16 MiB window, acknowledged both
 * ways), one HEADERS frame of literal HPACK fields, one DATA frame with the empty request — and reads
 * the response's DATA frames until the stream ends, answering PINGs, ignoring the headers. gRPC's
 * C library would do the same behind a call/op ABI this file would have to declare by hand. The
 * response (a protobuf ListPodResourcesResponse) is decoded here too, every length checked against
 * what is left; tests/fuzz/fuzz_podres.c runs the decoder. Only nvidia.com/ devices are kept. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "collect/collect.h"

enum { PODRES_MAX_BYTES = 16 << 20, H2_WINDOW = 16 << 20 };

/* ---- protobuf, the fields of api.proto (k8s.io/kubelet/pkg/apis/podresources/v1) it reads ---- */

struct pb {
  const uint8_t *p, *end;
};

static int pb_varint(struct pb *b, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
    uint8_t c = *b->p++;
    *v |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80))
      return 0;
  }
  return -1;
}

/* The next field: its number, and for a length-delimited one its bytes in *sub. Other wire types are
 * skipped (sub empty). Returns 1, 0 at the end, -1 when malformed. */
static int pb_next(struct pb *b, uint64_t *field, struct pb *sub) {
  uint64_t key, v;
  if (b->p >= b->end)
    return 0;
  if (pb_varint(b, &key))
    return -1;
  *field = key >> 3;
  sub->p = sub->end = b->p;
  switch (key & 7) {
  case 0:
    return pb_varint(b, &v) ? -1 : 1;
  case 1:
    return (size_t)(b->end - b->p) < 8 ? -1 : (b->p += 8, 1);
  case 5:
    return (size_t)(b->end - b->p) < 4 ? -1 : (b->p += 4, 1);
  case 2:
    if (pb_varint(b, &v) || v > (uint64_t)(b->end - b->p))
      return -1;
    sub->p = b->p, sub->end = b->p + v;
    b->p += v;
    return 1;
  default:
    return -1;
  }
}

/* A string field into out when it fits and every byte is one of allowed; else "" (0). */
static int pb_str(const struct pb *s, char *out, size_t n, const char *allowed) {
  size_t l = (size_t)(s->end - s->p);
  out[0] = 0;
  if (l == 0 || l >= n)
    return 0;
  for (size_t i = 0; i < l; i++)
    if (!s->p[i] || !strchr(allowed, s->p[i]))
      return 0;
  memcpy(out, s->p, l), out[l] = 0;
  return 1;
}

#define K8S_CHARS "abcdefghijklmnopqrstuvwxyz0123456789.-"
#define ID_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./:"

/* ContainerDevices {1 resource_name, 2 repeated device_ids}: the nvidia.com/ ones into out. */
static int pb_devices(struct pb d, const struct collect_podres_gpu *base, struct collect_podres_gpu *out, int n,
                      int max) {
  struct pb f, scan = d;
  uint64_t field;
  char res[128] = "";
  int r;
  while ((r = pb_next(&scan, &field, &f)) == 1)
    if (field == 1)
      pb_str(&f, res, sizeof res, ID_CHARS);
  if (r < 0)
    return -1;
  if (strncmp(res, "nvidia.com/", 11))
    return n;
  while ((r = pb_next(&d, &field, &f)) == 1)
    if (field == 2 && n < max) {
      out[n] = *base;
      if (pb_str(&f, out[n].uuid, sizeof out[n].uuid, ID_CHARS))
        n++;
    }
  return r < 0 ? -1 : n;
}

/* PodResources {1 name, 2 namespace, 3 repeated ContainerResources {1 name, 2 repeated devices}}. */
static int pb_pod(struct pb pod, struct collect_podres_gpu *out, int n, int max) {
  struct collect_podres_gpu base;
  struct pb f, c, cf, scan = pod;
  uint64_t field, cfield;
  int r;
  memset(&base, 0, sizeof base);
  while ((r = pb_next(&scan, &field, &f)) == 1) /* the names first: fields may come in any order */
    if (field == 1)
      pb_str(&f, base.pod, sizeof base.pod, K8S_CHARS);
    else if (field == 2)
      pb_str(&f, base.ns, sizeof base.ns, K8S_CHARS);
  if (r < 0 || !base.pod[0] || !base.ns[0])
    return r < 0 ? -1 : n;
  while ((r = pb_next(&pod, &field, &c)) == 1) {
    if (field != 3)
      continue;
    struct collect_podres_gpu ctr = base;
    struct pb cscan = c;
    int cr;
    while ((cr = pb_next(&cscan, &cfield, &cf)) == 1)
      if (cfield == 1)
        pb_str(&cf, ctr.container, sizeof ctr.container, K8S_CHARS);
    if (cr < 0)
      return -1;
    while ((cr = pb_next(&c, &cfield, &cf)) == 1)
      if (cfield == 2 && (n = pb_devices(cf, &ctr, out, n, max)) < 0)
        return -1;
    if (cr < 0)
      return -1;
  }
  return r < 0 ? -1 : n;
}

int collect_podres_decode(const uint8_t *msg, size_t len, struct collect_podres_gpu *out, int max) {
  struct pb b = {msg, msg + len}, f;
  uint64_t field;
  int n = 0, r;
  while ((r = pb_next(&b, &field, &f)) == 1)
    if (field == 1 && (n = pb_pod(f, out, n, max)) < 0)
      return -1;
  return r < 0 ? -1 : n;
}

/* ---- HTTP/2 (RFC 9113), the client side of one unary gRPC call ---- */

struct h2 {
  int fd;
  int timeout_ms;
  uint8_t *data; /* the stream's DATA so far */
  size_t n;
};

static int send_all(struct h2 *c, const void *buf, size_t n) {
  const uint8_t *p = buf;
  while (n) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w, n -= (size_t)w;
  }
  return 0;
}

static int send_frame(struct h2 *c, int type, int flags, uint32_t stream, const void *payload, size_t len) {
  uint8_t h[9] = {(uint8_t)(len >> 16),    (uint8_t)(len >> 8),    (uint8_t)len,
                  (uint8_t)type,           (uint8_t)flags,         (uint8_t)(stream >> 24 & 0x7f),
                  (uint8_t)(stream >> 16), (uint8_t)(stream >> 8), (uint8_t)stream};
  return send_all(c, h, 9) || (len && send_all(c, payload, len)) ? -1 : 0;
}

static int recv_all(struct h2 *c, uint8_t *buf, size_t n) {
  while (n) {
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int pr = poll(&pfd, 1, c->timeout_ms);
    if (pr < 0 && errno == EINTR)
      continue;
    if (pr <= 0)
      return -1; /* the kubelet did not answer in time */
    ssize_t r = recv(c->fd, buf, n, 0);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    buf += r, n -= (size_t)r;
  }
  return 0;
}

/* One HPACK literal field without indexing, new name (no Huffman): every name and value < 127. */
static size_t hpack(uint8_t *out, size_t off, const char *name, const char *value) {
  size_t nl = strlen(name), vl = strlen(value);
  out[off++] = 0, out[off++] = (uint8_t)nl;
  memcpy(out + off, name, nl), off += nl;
  out[off++] = (uint8_t)vl;
  memcpy(out + off, value, vl), off += vl;
  return off;
}

/* The request: preface, SETTINGS, the window, HEADERS, the empty message. */
static int h2_request(struct h2 *c) {
  static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
  uint8_t set[12] = {0,
                     2,
                     0,
                     0,
                     0,
                     0, /* ENABLE_PUSH 0 */
                     0,
                     4,
                     H2_WINDOW >> 24,
                     H2_WINDOW >> 16 & 0xff,
                     H2_WINDOW >> 8 & 0xff,
                     H2_WINDOW & 0xff};
  uint32_t inc = H2_WINDOW - 65535;
  uint8_t win[4] = {(uint8_t)(inc >> 24), (uint8_t)(inc >> 16), (uint8_t)(inc >> 8), (uint8_t)inc};
  uint8_t hdr[256], msg[5] = {0, 0, 0, 0, 0}; /* not compressed, 0 bytes: ListPodResourcesRequest {} */
  size_t n = 0;
  n = hpack(hdr, n, ":method", "POST");
  n = hpack(hdr, n, ":scheme", "http");
  n = hpack(hdr, n, ":path", "/v1.PodResourcesLister/List");
  n = hpack(hdr, n, ":authority", "localhost");
  n = hpack(hdr, n, "content-type", "application/grpc");
  n = hpack(hdr, n, "te", "trailers");
  return send_all(c, preface, sizeof preface - 1) || send_frame(c, 4, 0, 0, set, sizeof set) ||
                 send_frame(c, 8, 0, 0, win, sizeof win) || send_frame(c, 1, 4, 1, hdr, n) ||
                 send_frame(c, 0, 1, 1, msg, sizeof msg)
             ? -1
             : 0;
}

/* Reads frames until stream 1 ends; its DATA into c->data. 0, or -1 on an error or a reset. */
static int h2_response(struct h2 *c) {
  uint8_t h[9], *payload = NULL;
  for (;;) {
    if (recv_all(c, h, 9))
      goto fail;
    size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
    int type = h[3], flags = h[4];
    uint32_t stream = ((uint32_t)h[5] & 0x7f) << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8];
    if (len > (1 << 24) || c->n + len > PODRES_MAX_BYTES)
      goto fail;
    free(payload);
    if (!(payload = malloc(len ? len : 1)) || recv_all(c, payload, len))
      goto fail;
    if (type == 4 && !(flags & 1) && send_frame(c, 4, 1, 0, NULL, 0)) /* SETTINGS: acknowledged */
      goto fail;
    if (type == 6 && !(flags & 1) && len == 8 && send_frame(c, 6, 1, 0, payload, 8)) /* PING */
      goto fail;
    if ((type == 3 && stream == 1) || type == 7) /* RST_STREAM, GOAWAY */
      goto fail;
    if (type == 0 && stream == 1) {
      size_t pad = flags & 8 && len ? (size_t)payload[0] + 1 : 0;
      if (pad > len)
        goto fail;
      uint8_t *d = realloc(c->data, c->n + len - pad + 1);
      if (!d)
        goto fail;
      c->data = d;
      memcpy(c->data + c->n, payload + (pad ? 1 : 0), len - pad);
      c->n += len - pad;
    }
    if ((type == 0 || type == 1) && stream == 1 && flags & 1) /* END_STREAM */
      break;
  }
  free(payload);
  return 0;
fail:
  free(payload);
  return -1;
}

int collect_podres_list(const char *sock, int timeout_ms, struct collect_podres_gpu *out, int max, char *err,
                        size_t errlen) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  struct h2 c = {.fd = -1, .timeout_ms = timeout_ms};
  int n = -1;
  if (strlen(sock) >= sizeof a.sun_path) {
    snprintf(err, errlen, "%s: path too long", sock);
    return -1;
  }
  memcpy(a.sun_path, sock, strlen(sock) + 1);
  if ((c.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 || connect(c.fd, (struct sockaddr *)&a, sizeof a)) {
    snprintf(err, errlen, "%s: %s", sock, strerror(errno));
    goto done;
  }
  if (h2_request(&c) || h2_response(&c)) {
    snprintf(err, errlen, "%s: no answer to PodResourcesLister.List", sock);
    goto done;
  }
  /* one gRPC message: 1 byte "compressed" (0: we asked for no encoding), 4 bytes of length */
  uint32_t ml =
      c.n >= 5 ? (uint32_t)c.data[1] << 24 | (uint32_t)c.data[2] << 16 | (uint32_t)c.data[3] << 8 | c.data[4] : 0;
  if (c.n < 5 || c.data[0] || ml > c.n - 5 || (n = collect_podres_decode(c.data + 5, ml, out, max)) < 0)
    snprintf(err, errlen, "%s: the kubelet's answer is not a ListPodResourcesResponse", sock), n = -1;
done:
  if (c.fd >= 0)
    close(c.fd);
  free(c.data);
  return n;
}
