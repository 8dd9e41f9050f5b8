/* Unit tests of the Gorilla chunk codec: what goes in comes out, bit for bit, and a damaged chunk
 * is reported, never read past its end. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/chunk.h"
#include "store/store.h"

struct got {
  int64_t t[4096];
  double v[4096];
  size_t n;
};

static int collect(void *u, int64_t t, double v) {
  struct got *g = u;
  g->t[g->n] = t;
  g->v[g->n++] = v;
  return 0;
}

static void roundtrip(const int64_t *t, const double *v, size_t n) {
  struct chunk_enc e;
  chunk_enc_init(&e);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(chunk_enc_put(&e, t[i], v[i]), 0);
  struct got *g = calloc(1, sizeof *g);
  assert_int_equal(chunk_decode(e.buf, chunk_enc_bytes(&e), e.n, collect, g), 0);
  assert_int_equal(g->n, n);
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(g->t[i], t[i]);
    assert_memory_equal(&g->v[i], &v[i], sizeof(double));
  }
  free(g);
  chunk_enc_done(&e);
}

static void test_chunk_roundtrips_regular_gauge(void **state) {
  (void)state;
  int64_t t[1000];
  double v[1000];
  for (int i = 0; i < 1000; i++)
    t[i] = 100000000LL * i, v[i] = 40 + (i % 7) * 0.5;
  roundtrip(t, v, 1000);
}

static void test_chunk_roundtrips_jitter_and_extremes(void **state) {
  (void)state;
  int64_t t[64];
  double v[64];
  srand(7);
  int64_t now = -5000;
  for (int i = 0; i < 64; i++) {
    now += 1 + rand() % (i % 3 == 0 ? 2000000000 : 30000);
    t[i] = now;
    v[i] = i % 5 == 0 ? 0.0 : i % 5 == 1 ? -1e300 : i % 5 == 2 ? 1e-300 : (double)rand() / 3.0;
  }
  t[63] = t[62] + 9000000000000000000LL / 2; /* a huge gap still codes */
  roundtrip(t, v, 64);
}

static void test_chunk_constant_series_costs_about_two_bits_a_point(void **state) {
  (void)state;
  struct chunk_enc e;
  chunk_enc_init(&e);
  for (int i = 0; i < 1024; i++)
    chunk_enc_put(&e, 100000000LL * i, 42.0);
  assert_true(chunk_enc_bytes(&e) <= 16 + 8 + 1024 * 2 / 8 + 1); /* header, first delta, 2 bits a point */
  chunk_enc_done(&e);
}

static void test_chunk_truncated_is_corrupt(void **state) {
  (void)state;
  struct chunk_enc e;
  chunk_enc_init(&e);
  for (int i = 0; i < 100; i++)
    chunk_enc_put(&e, 1000LL * i * i, i * 1.5);
  struct got *g = calloc(1, sizeof *g);
  assert_int_equal(chunk_decode(e.buf, chunk_enc_bytes(&e) / 2, e.n, collect, g), GS_ECORRUPT);
  assert_true(g->n < 100);
  free(g);
  chunk_enc_done(&e);
}

static void test_chunk_garbage_never_reads_past_end(void **state) {
  (void)state;
  uint8_t buf[64];
  struct got *g = calloc(1, sizeof *g);
  srand(3);
  for (int round = 0; round < 2000; round++) {
    for (size_t i = 0; i < sizeof buf; i++)
      buf[i] = (uint8_t)rand();
    g->n = 0;
    int rc = chunk_decode(buf, 1 + (size_t)rand() % sizeof buf, 1 + (uint32_t)rand() % 4000, collect, g);
    assert_true(rc == 0 || rc == GS_ECORRUPT);
  }
  free(g);
}

static void test_chunk_decimals_roundtrip_through_every_scale(void **state) {
  (void)state;
  /* integers, then a tenth, then milliwatts, then a value that is no short decimal: the chunk
   * re-encodes itself three times and must still give back every point bit for bit */
  int64_t t[400];
  double v[400];
  for (int i = 0; i < 400; i++) {
    t[i] = 100000000LL * i;
    v[i] = i < 100   ? (double)(i % 17)
           : i < 200 ? (i % 31) / 10.0
           : i < 300 ? 300 + (i * 7919 % 5000) / 1000.0
                     : i / 3.0;
  }
  for (int n = 1; n <= 400; n += 57)
    roundtrip(t, v, (size_t)n);
  roundtrip(t, v, 400);
  double odd[] = {-0.0, 0.0, -1e15, 9007199254740993.0, 1e300, -2.5, 0.001, -0.001, 4503599627370496.5, 1e-3};
  int64_t tt[10];
  for (int i = 0; i < 10; i++)
    tt[i] = 1000LL * i;
  roundtrip(tt, odd, 10);
  double misfit[] = {-1.5e14, -9.988, 3}; /* milli-scale would overflow the first: floats instead */
  roundtrip(tt, misfit, 3);
}

static void test_chunk_milliwatt_power_costs_under_three_bytes(void **state) {
  (void)state;
  /* power read in mW and moving a few watts every 100 ms: XOR floats cost ~7 bytes a point */
  struct chunk_enc e;
  chunk_enc_init(&e);
  srand(11);
  int mw = 450000;
  for (int i = 0; i < 1000; i++) {
    mw += rand() % 6001 - 3000;
    assert_int_equal(chunk_enc_put(&e, 100000000LL * i, mw / 1000.0), 0);
  }
  assert_int_equal(e.mode, 3);
  assert_true(chunk_enc_bytes(&e) < 3 * 1000);
  chunk_enc_done(&e);
}

static void test_chunk_decimal_garbage_never_reads_past_end(void **state) {
  (void)state;
  uint8_t buf[64];
  struct got *g = calloc(1, sizeof *g);
  srand(5);
  for (int round = 0; round < 4000; round++) {
    for (size_t i = 0; i < sizeof buf; i++)
      buf[i] = (uint8_t)rand();
    buf[0] = (uint8_t)(0xD0 | (round & 3));
    g->n = 0;
    int rc = chunk_decode(buf, 1 + (size_t)rand() % sizeof buf, 1 + (uint32_t)rand() % 4000, collect, g);
    assert_true(rc == 0 || rc == GS_ECORRUPT);
  }
  free(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chunk_roundtrips_regular_gauge),
      cmocka_unit_test(test_chunk_roundtrips_jitter_and_extremes),
      cmocka_unit_test(test_chunk_constant_series_costs_about_two_bits_a_point),
      cmocka_unit_test(test_chunk_truncated_is_corrupt),
      cmocka_unit_test(test_chunk_garbage_never_reads_past_end),
      cmocka_unit_test(test_chunk_decimals_roundtrip_through_every_scale),
      cmocka_unit_test(test_chunk_milliwatt_power_costs_under_three_bytes),
      cmocka_unit_test(test_chunk_decimal_garbage_never_reads_past_end),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
