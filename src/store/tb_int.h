/* store/tb_int: the reader of TensorBoard event files, private to the store folder (tb_import.c
 * uses it, the libFuzzer target tests/fuzz/fuzz_tb_parse.c runs it). An event file
 * (events.out.tfevents.*) is a TFRecord file — records of a uint64 length, its masked CRC32C, the
 * data and its masked CRC32C — each record a serialized tensorboard.Event (src/store/proto/, decoded
 * by protobuf-c). The files come from elsewhere: pure functions, no I/O, no global state; every
 * refusal is a one-line reason that says at which byte offset. */
#ifndef GS_STORE_TB_INT_H
#define GS_STORE_TB_INT_H

#include <stddef.h>
#include <stdint.h>

enum {
  TB_MAX_RECORD = 64 << 20,   /* bytes of one record's data (an image summary is a few MiB) */
  TB_MAX_TAGS = 4096,         /* scalar tags of one run */
  TB_MAX_POINTS = 20000000,   /* scalar points of one run */
  TB_MAX_PARAMS = 1024,       /* hparams of one run */
  TB_MAX_TAG = 159,           /* bytes of a tag (a metric name's bound in an export file) */
  TB_MAX_VALUE = 1024 * 1024, /* bytes of one hparam's value */
};

/* What is counted and passed over: only scalars (and hparams) are imported. */
enum tb_kind { TB_IMAGE, TB_HISTOGRAM, TB_AUDIO, TB_TENSOR, TB_GRAPH, TB_OTHER, TB_KINDS };

struct tb_point {
  double wall;  /* Unix seconds, 0 .. 9e9 */
  int64_t step; /* the Event's step */
  double v;     /* finite: a value that is not (nan) is left out, missing is not zero */
  uint32_t tag; /* index into tb_run.tags */
};

/* One run's events, from one or several files (tb_parse_events appends). Zero it before the first
 * call; tb_run_done frees what it holds. */
struct tb_run {
  char **tags;    /* scalar tags in the order first seen (malloc'd, NUL-terminated) */
  char **plugins; /* each tag's plugin name as its first metadata said ("" when none yet) */
  size_t n_tags;
  size_t hint; /* where the next tag is looked for first: tags come in the same order each step */
  struct tb_point *pts;
  size_t n_pts, cap_pts;
  char **params; /* key, value, key, value...: hparams' session_start_info (numbers as %.17g, bools) */
  size_t n_params;
  int64_t events;
  int64_t other[TB_KINDS];   /* values (and graph events) passed over, by kind */
  double wall_min, wall_max; /* of every event; valid when events > 0 */
};

/* Masked CRC32C as TFRecord writes it: ((crc >> 15) | (crc << 17)) + 0xa282ead8. Can't fail. */
uint32_t tb_masked_crc32c(const uint8_t *p, size_t n);

/* Reads the records of one event file of n bytes (need not be NUL-terminated) into r. Returns 0,
 * or -1 with the reason in err ("offset N: why", N the offset of the record at fault); what r
 * holds then is still freed by tb_run_done, never imported. */
int tb_parse_events(struct tb_run *r, const uint8_t *buf, size_t n, char *err, size_t errlen);

/* Frees what r holds and zeroes it. r may be NULL. */
void tb_run_done(struct tb_run *r);

#endif
