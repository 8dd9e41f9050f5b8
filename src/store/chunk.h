/* store/chunk: the chunk codec (chunk.c) — how a series' samples are kept: Gorilla's delta-of-delta
 * timestamps with XOR-compressed doubles, or delta-coded integers for exact decimals. Private to
 * store/ (the back ends, the writer, the rollups) and the codec's own tests (tests/unit/test_chunk.c,
 * tests/fuzz/fuzz_chunk.c); nothing else reads chunks, so it is not in store.h. */
#ifndef GS_STORE_CHUNK_H
#define GS_STORE_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

enum { CHUNK_MODE_NONE = -1, CHUNK_MODE_DEC_MAX = 3, CHUNK_MODE_XOR = 4 };

struct chunk_enc {
  int mode;       /* CHUNK_MODE_NONE before the first point; 0..3: decimal i / 10^mode; CHUNK_MODE_XOR */
  int64_t i_prev; /* last integer of a decimal chunk */
  uint8_t *buf;
  size_t cap, bits;
  uint32_t n;
  int64_t t0, t_prev, d_prev;
  uint64_t v_prev;
  int lead, trail; /* window of the previous XOR (-1: none yet) */
};

/* Starts an empty encoder; chunk_enc_done frees it. */
void chunk_enc_init(struct chunk_enc *e);
void chunk_enc_done(struct chunk_enc *e);
/* Appends a point (t must not go backwards). Returns 0 or GS_ENOMEM. A value that does not fit the
 * chunk's decimal scale re-encodes the chunk, so chunk_enc_bytes() may grow by more than a point. */
int chunk_enc_put(struct chunk_enc *e, int64_t t, double v);
/* The encoded bytes so far: (e->bits + 7) / 8 bytes of e->buf; a valid chunk at any moment. */
size_t chunk_enc_bytes(const struct chunk_enc *e);

/* Decodes n points of a chunk, calling fn for each; returns 0, GS_ECORRUPT on a truncated or bad
 * chunk, or 1 when fn asked to stop. */
int chunk_decode(const uint8_t *buf, size_t len, uint32_t n, store_sample_fn fn, void *user);

#endif
