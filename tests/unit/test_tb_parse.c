/* Unit tests of the TensorBoard event file reader (store/tb_parse.c): TFRecord framing and its masked
 * CRC32C, scalars as torch's add_scalar and TF2's tf.summary.scalar write them, hparams, what is
 * counted and passed over, and the offsets of what is refused. The records are encoded here by
 * protobuf's wire rules, by hand. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store/tb_int.h"

struct buf {
  uint8_t b[4096];
  size_t n;
};

static void put(struct buf *o, const void *p, size_t n) {
  assert_true(o->n + n <= sizeof o->b);
  memcpy(o->b + o->n, p, n);
  o->n += n;
}

static void varint(struct buf *o, uint64_t v) {
  do {
    uint8_t c = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    put(o, &c, 1);
    v >>= 7;
  } while (v);
}

static void f_bytes(struct buf *o, int field, const void *p, size_t n) {
  varint(o, (uint64_t)field << 3 | 2);
  varint(o, n);
  put(o, p, n);
}

static void f_str(struct buf *o, int field, const char *s) {
  f_bytes(o, field, s, strlen(s));
}

static void f_double(struct buf *o, int field, double x) {
  varint(o, (uint64_t)field << 3 | 1);
  put(o, &x, 8); /* little-endian hosts, as gpuscope's are */
}

static void f_float(struct buf *o, int field, float x) {
  varint(o, (uint64_t)field << 3 | 5);
  put(o, &x, 4);
}

/* An Event (wall_time 1, step 2) holding value (a Summary.Value's bytes) in its summary (5, value 1). */
static void event(struct buf *o, double wall, int64_t step, const struct buf *value) {
  struct buf s = {.n = 0};
  f_bytes(&s, 1, value->b, value->n);
  f_double(o, 1, wall);
  varint(o, 2 << 3);
  varint(o, (uint64_t)step);
  f_bytes(o, 5, s.b, s.n);
}

/* data framed as one TFRecord appended to file. */
static void record(struct buf *file, const struct buf *data) {
  uint64_t len = data->n;
  uint8_t hdr[8];
  memcpy(hdr, &len, 8);
  uint32_t c = tb_masked_crc32c(hdr, 8), d = tb_masked_crc32c(data->b, data->n);
  put(file, hdr, 8);
  put(file, &c, 4);
  put(file, data->b, data->n);
  put(file, &d, 4);
}

/* A file: file_version "brain.Event:2", then loss = 0.5 at step 3 (simple_value), then a TF2 scalar
 * acc = 0.25 at step 4 (a 0-d DT_FLOAT tensor, float_val, the scalars plugin), then an image. */
static void sample_file(struct buf *file) {
  struct buf e = {.n = 0}, v = {.n = 0}, t = {.n = 0}, md = {.n = 0}, pd = {.n = 0};
  f_double(&e, 1, 1796000000.5);
  f_str(&e, 3, "brain.Event:2");
  record(file, &e);
  f_str(&v, 1, "loss");
  f_float(&v, 2, 0.5f);
  e.n = 0;
  event(&e, 1796000001.0, 3, &v);
  record(file, &e);
  varint(&t, 1 << 3); /* dtype DT_FLOAT */
  varint(&t, 1);
  f_bytes(&t, 2, "", 0); /* tensor_shape: no dims */
  float acc = 0.25f;
  f_bytes(&t, 5, &acc, 4); /* float_val, packed */
  f_str(&pd, 1, "scalars");
  f_bytes(&md, 1, pd.b, pd.n);
  v.n = 0;
  f_str(&v, 1, "acc");
  f_bytes(&v, 9, md.b, md.n);
  f_bytes(&v, 8, t.b, t.n);
  e.n = 0;
  event(&e, 1796000002.0, 4, &v);
  record(file, &e);
  v.n = 0;
  f_str(&v, 1, "sample");
  f_bytes(&v, 4, "", 0); /* an Image */
  e.n = 0;
  event(&e, 1796000003.0, 4, &v);
  record(file, &e);
}

static void test_masked_crc32c_is_tfrecords(void **state) {
  (void)state;
  uint32_t crc = 0xe3069283u; /* CRC32C("123456789"), the check value of RFC 3720's polynomial */
  assert_int_equal(tb_masked_crc32c((const uint8_t *)"123456789", 9), ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

static void test_scalars_of_torch_and_tf2_with_step_and_wall_time(void **state) {
  (void)state;
  struct buf f = {.n = 0};
  struct tb_run r = {0};
  char err[256];
  sample_file(&f);
  assert_int_equal(tb_parse_events(&r, f.b, f.n, err, sizeof err), 0);
  assert_int_equal(r.events, 4);
  assert_int_equal(r.n_tags, 2);
  assert_string_equal(r.tags[0], "loss");
  assert_string_equal(r.tags[1], "acc");
  assert_string_equal(r.plugins[1], "scalars");
  assert_int_equal(r.n_pts, 2);
  assert_true(r.pts[0].v == 0.5 && r.pts[0].step == 3 && r.pts[0].wall == 1796000001.0 && r.pts[0].tag == 0);
  assert_true(r.pts[1].v == 0.25 && r.pts[1].step == 4 && r.pts[1].tag == 1);
  assert_true(r.wall_min == 1796000000.5 && r.wall_max == 1796000003.0);
  assert_int_equal(r.other[TB_IMAGE], 1); /* counted, not imported */
  tb_run_done(&r);
}

static void test_hparams_session_start_info_become_params(void **state) {
  (void)state;
  struct buf val = {.n = 0}, ent = {.n = 0}, ssi = {.n = 0}, pdata = {.n = 0}, pd = {.n = 0}, md = {.n = 0};
  struct buf v = {.n = 0}, e = {.n = 0}, f = {.n = 0};
  f_double(&val, 2, 0.001); /* google.protobuf.Value number_value */
  f_str(&ent, 1, "lr");
  f_bytes(&ent, 2, val.b, val.n);
  f_bytes(&ssi, 1, ent.b, ent.n);
  f_bytes(&pdata, 3, ssi.b, ssi.n); /* HParamsPluginData.session_start_info */
  f_str(&pd, 1, "hparams");
  f_bytes(&pd, 2, pdata.b, pdata.n);
  f_bytes(&md, 1, pd.b, pd.n);
  f_str(&v, 1, "_hparams_/session_start_info");
  f_bytes(&v, 9, md.b, md.n);
  event(&e, 1796000000.0, 0, &v);
  record(&f, &e);
  struct tb_run r = {0};
  char err[256];
  assert_int_equal(tb_parse_events(&r, f.b, f.n, err, sizeof err), 0);
  assert_int_equal(r.n_params, 1);
  assert_string_equal(r.params[0], "lr");
  assert_string_equal(r.params[1], "0.001");
  assert_int_equal(r.n_pts, 0);
  tb_run_done(&r);
}

static void test_a_file_cut_short_says_the_record_offset(void **state) {
  (void)state;
  struct buf f = {.n = 0};
  sample_file(&f);
  size_t first = 12 + f.b[0] + 4; /* the second record's offset (a length under 256) */
  char err[256], want[64];
  snprintf(want, sizeof want, "offset %zu: a record cut short", first);
  for (size_t cut = first + 1; cut < first + 12 + f.b[first] + 4; cut += 5) {
    struct tb_run r = {0};
    assert_int_equal(tb_parse_events(&r, f.b, cut, err, sizeof err), -1);
    assert_true(!strncmp(err, want, strlen(want)));
    tb_run_done(&r);
  }
}

static void test_a_changed_byte_fails_a_crc(void **state) {
  (void)state;
  struct buf f = {.n = 0};
  sample_file(&f);
  size_t first = 12 + f.b[0] + 4;
  char err[256], want[80];
  struct tb_run r = {0};
  f.b[first + 13] ^= 1; /* the second record's data */
  snprintf(want, sizeof want, "offset %zu: the record's data fails its CRC (a damaged file)", first);
  assert_int_equal(tb_parse_events(&r, f.b, f.n, err, sizeof err), -1);
  assert_string_equal(err, want);
  tb_run_done(&r);
  f.b[first + 13] ^= 1;
  f.b[first + 1] ^= 1; /* its length */
  snprintf(want, sizeof want, "offset %zu: the record's length fails its CRC (a damaged file)", first);
  assert_int_equal(tb_parse_events(&r, f.b, f.n, err, sizeof err), -1);
  assert_string_equal(err, want);
  tb_run_done(&r);
}

static void test_a_record_that_is_not_an_event_is_refused(void **state) {
  (void)state;
  struct buf d = {.n = 0}, f = {.n = 0};
  put(&d, "\x0a\xff\x01", 3); /* a field 1 of length 255 in 1 byte: not protobuf */
  record(&f, &d);
  struct tb_run r = {0};
  char err[256];
  assert_int_equal(tb_parse_events(&r, f.b, f.n, err, sizeof err), -1);
  assert_non_null(strstr(err, "offset 0: the record is not a TensorBoard Event"));
  tb_run_done(&r);
  assert_int_equal(tb_parse_events(&r, f.b, 0, err, sizeof err), 0); /* an empty file: no events */
  assert_int_equal(r.events, 0);
}

/* A Summary.Value of a tensor: tag, optional plugin metadata, dtype DT_FLOAT, dims (0: none), one float. */
static void tensor_value(struct buf *v, const char *tag, const char *plugin, int dims, float x) {
  struct buf t = {.n = 0}, shape = {.n = 0}, dim = {.n = 0}, md = {.n = 0}, pd = {.n = 0};
  varint(&dim, 1 << 3); /* Dim.size */
  varint(&dim, 1);
  for (int i = 0; i < dims; i++)
    f_bytes(&shape, 2, dim.b, dim.n);
  varint(&t, 1 << 3);
  varint(&t, 1);
  f_bytes(&t, 2, shape.b, shape.n);
  f_bytes(&t, 5, &x, 4);
  f_str(v, 1, tag);
  if (plugin) {
    f_str(&pd, 1, plugin);
    f_bytes(&md, 1, pd.b, pd.n);
    f_bytes(v, 9, md.b, md.n);
  }
  f_bytes(v, 8, t.b, t.n);
}

static void test_what_is_not_a_finite_scalar_is_counted_or_left_out(void **state) {
  (void)state;
  struct buf f = {.n = 0}, v = {.n = 0}, e = {.n = 0};
  tensor_value(&v, "w", "scalars", 1, 1.0f); /* rank 1: not a scalar */
  event(&e, 1796000000.0, 1, &v);
  record(&f, &e);
  v.n = e.n = 0;
  tensor_value(&v, "pr", "pr_curves", 0, 1.0f); /* 0-d, but another plugin's */
  event(&e, 1796000000.0, 1, &v);
  record(&f, &e);
  v.n = e.n = 0;
  tensor_value(&v, "pr", NULL, 0, 2.0f); /* its tag's next value, without metadata: still that plugin's */
  event(&e, 1796000000.0, 2, &v);
  record(&f, &e);
  v.n = e.n = 0;
  f_str(&v, 1, "loss");
  f_float(&v, 2, (float)NAN); /* missing is not zero */
  event(&e, 1796000000.0, 3, &v);
  record(&f, &e);
  struct tb_run r = {0};
  char err[256];
  assert_int_equal(tb_parse_events(&r, f.b, f.n, err, sizeof err), 0);
  assert_int_equal(r.n_pts, 0);
  assert_int_equal(r.other[TB_TENSOR], 3);
  assert_int_equal(r.events, 4);
  tb_run_done(&r);
}

static void test_a_wall_time_that_is_not_a_time_is_refused(void **state) {
  (void)state;
  struct buf f = {.n = 0}, e = {.n = 0};
  f_double(&e, 1, -1.0);
  f_str(&e, 3, "brain.Event:2");
  record(&f, &e);
  struct tb_run r = {0};
  char err[256];
  assert_int_equal(tb_parse_events(&r, f.b, f.n, err, sizeof err), -1);
  assert_non_null(strstr(err, "offset 0: an event's wall_time is not a time"));
  tb_run_done(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_masked_crc32c_is_tfrecords),
      cmocka_unit_test(test_scalars_of_torch_and_tf2_with_step_and_wall_time),
      cmocka_unit_test(test_hparams_session_start_info_become_params),
      cmocka_unit_test(test_a_file_cut_short_says_the_record_offset),
      cmocka_unit_test(test_a_changed_byte_fails_a_crc),
      cmocka_unit_test(test_a_record_that_is_not_an_event_is_refused),
      cmocka_unit_test(test_what_is_not_a_finite_scalar_is_counted_or_left_out),
      cmocka_unit_test(test_a_wall_time_that_is_not_a_time_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
