/* libFuzzer target for the reader of TensorBoard event files (src/store/tb_parse.c, with the protobuf-c
 * code generated from src/store/proto/), which `gpuscope import logs/` runs on files from elsewhere.
 * Any bytes are read as an event file, and again framed as one record with its CRCs right, so that
 * the Event decoder behind the CRCs is reached. Whatever comes out must keep its promises: a reason
 * with an offset on every refusal; on success every point finite, of a known tag, at a wall time in
 * range, and tags and params NUL-terminated within their bounds. Built with clang's
 * -fsanitize=fuzzer,address,undefined by tests/fuzz/CMakeLists.txt; seeds in corpus/tb_parse. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/tb_int.h"

#define REQUIRE(c)                                                                                                     \
  do {                                                                                                                 \
    if (!(c))                                                                                                          \
      abort();                                                                                                         \
  } while (0)

static void check(const uint8_t *data, size_t size) {
  struct tb_run r = {0};
  char err[256];
  if (tb_parse_events(&r, data, size, err, sizeof err)) {
    REQUIRE(!strncmp(err, "offset ", 7));
  } else {
    REQUIRE(r.n_pts <= TB_MAX_POINTS && r.n_tags <= TB_MAX_TAGS && r.n_params <= TB_MAX_PARAMS);
    for (size_t i = 0; i < r.n_pts; i++)
      REQUIRE(isfinite(r.pts[i].v) && r.pts[i].tag < r.n_tags && r.pts[i].wall >= 0 && r.pts[i].wall <= 9e9);
    for (size_t i = 0; i < r.n_tags; i++)
      REQUIRE(strlen(r.tags[i]) <= TB_MAX_TAG && strlen(r.plugins[i]) <= 255);
    for (size_t i = 0; i < r.n_params; i++)
      REQUIRE(strlen(r.params[2 * i]) <= 255 && strlen(r.params[2 * i + 1]) <= TB_MAX_VALUE);
    REQUIRE(r.events == 0 || (r.wall_min <= r.wall_max && r.wall_min >= 0));
  }
  tb_run_done(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check(data, size);
  uint8_t *f = malloc(size + 16);
  if (!f)
    return 0;
  uint64_t len = size;
  for (int i = 0; i < 8; i++)
    f[i] = (uint8_t)(len >> (8 * i));
  uint32_t c = tb_masked_crc32c(f, 8), d = tb_masked_crc32c(data, size);
  for (int i = 0; i < 4; i++) {
    f[8 + i] = (uint8_t)(c >> (8 * i));
    f[12 + size + i] = (uint8_t)(d >> (8 * i));
  }
  if (size)
    memcpy(f + 12, data, size);
  check(f, size + 16);
  free(f);
  return 0;
}
