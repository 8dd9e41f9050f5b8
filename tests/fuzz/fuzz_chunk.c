/* libFuzzer target for the chunk codec (src/store/chunk.c), which reads blobs from store files:
 *  1. any bytes decoded as a chunk of any point count must return 0 or GS_ECORRUPT without reading
 *     outside the blob;
 *  2. the same bytes read as a series of points (time steps and values chosen to hit every decimal
 *     scale, scale upgrades and the switch to XOR floats) must come back bit for bit after encoding.
 * Built with clang's -fsanitize=fuzzer,address,undefined by tests/fuzz/CMakeLists.txt. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/chunk.h"
#include "store/store.h"

#define REQUIRE(c)                                                                                                     \
  do {                                                                                                                 \
    if (!(c))                                                                                                          \
      abort();                                                                                                         \
  } while (0)

struct check {
  const int64_t *t;
  const double *v;
  size_t n, i;
};

static int count(void *u, int64_t t, double v) {
  (void)t, (void)v;
  ++*(size_t *)u;
  return 0;
}

static int same(void *u, int64_t t, double v) {
  struct check *c = u;
  REQUIRE(c->i < c->n && t == c->t[c->i] && !memcmp(&v, &c->v[c->i], sizeof v));
  c->i++;
  return 0;
}

/* A value from 3 input bytes: small integers, milli-, centi- and deci-decimals, or raw doubles. */
static double value_of(const uint8_t *p, const uint8_t *raw, size_t nraw) {
  int64_t x = (int64_t)(int8_t)p[1] * 256 + p[2];
  switch (p[0] % 7) {
  case 0:
    return (double)x;
  case 1:
    return (double)x / 10;
  case 2:
    return (double)x / 100;
  case 3:
    return (double)x / 1000;
  case 4:
    return (double)x * 1e12;
  case 5:
    return -0.0;
  default: {
    double d = 0;
    if (nraw >= sizeof d)
      memcpy(&d, raw, sizeof d);
    return d;
  }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *blob = malloc(size ? size : 1); /* exact size: ASan sees a read past the end */
  if (!blob)
    return 0;
  if (size)
    memcpy(blob, data, size);
  size_t got = 0;
  uint32_t n = size >= 2 ? (uint32_t)(data[0] | data[1] << 8) : 1;
  int rc = chunk_decode(size > 2 ? blob + 2 : blob, size > 2 ? size - 2 : size, n, count, &got);
  REQUIRE(rc == 0 || rc == GS_ECORRUPT);
  REQUIRE(got <= n);
  free(blob);

  enum { MAXP = 512 };
  int64_t t[MAXP];
  double v[MAXP];
  size_t np = 0;
  int64_t now = 0;
  for (size_t off = 0; off + 4 <= size && np < MAXP; off += 4) {
    now += data[off] < 200 ? 100000000 : (int64_t)data[off] * 7919;
    t[np] = now;
    v[np++] = value_of(data + off + 1, data + off, size - off);
  }
  struct chunk_enc e;
  chunk_enc_init(&e);
  for (size_t i = 0; i < np; i++)
    REQUIRE(chunk_enc_put(&e, t[i], v[i]) == 0);
  struct check c = {.t = t, .v = v, .n = np};
  REQUIRE(chunk_decode(e.buf, chunk_enc_bytes(&e), e.n, same, &c) == 0 && c.i == np);
  chunk_enc_done(&e);
  return 0;
}
