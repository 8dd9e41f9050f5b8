/* libFuzzer target for the gs1 line parser: any bytes in, and whatever comes out must keep the
 * parser's promises — never read outside the line, a reason on every rejection, and on success only
 * slices inside the line, valid names, finite numbers and counts in range. Built with clang's
 * -fsanitize=fuzzer,address,undefined by tests/fuzz/CMakeLists.txt; the seed corpus is corpus/. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest.h"

#define REQUIRE(c)                                                                                                     \
  do {                                                                                                                 \
    if (!(c))                                                                                                          \
      abort();                                                                                                         \
  } while (0)

static void check_slice(const uint8_t *data, size_t size, struct ingest_str s, size_t max) {
  REQUIRE(s.n <= max);
  if (s.n)
    REQUIRE((const uint8_t *)s.p >= data && (const uint8_t *)s.p + s.n <= data + size);
}

static void check_name(const uint8_t *data, size_t size, struct ingest_str s) {
  check_slice(data, size, s, INGEST_MAX_NAME);
  REQUIRE(s.n >= 1);
  for (size_t i = 0; i < s.n; i++)
    REQUIRE(s.p[i] != ' ' && s.p[i] != '\n' && s.p[i] != '=' && (unsigned char)s.p[i] > 0x20);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A heap copy of exactly size bytes, so ASan catches a read one past the line. */
  char *line = malloc(size ? size : 1);
  if (!line)
    return 0;
  if (size)
    memcpy(line, data, size);
  struct ingest_msg m;
  int rc = ingest_parse_line(line, size, &m);
  const uint8_t *base = (const uint8_t *)line;
  REQUIRE(m.kind >= INGEST_OTHER && m.kind < INGEST_NKINDS);
  if (rc) {
    REQUIRE(rc == GS_EINVAL && m.error && *m.error);
  } else {
    REQUIRE(!m.error && m.kind != INGEST_OTHER);
    if (m.kind != INGEST_STEP && m.kind != INGEST_DROPPED && m.kind != INGEST_REJECTED)
      check_name(base, size, m.name);
    if (m.kind == INGEST_DROPPED || m.kind == INGEST_REJECTED)
      REQUIRE((m.has & INGEST_HAS_STEP) && m.step >= 1);
    if (m.kind == INGEST_REJECTED)
      REQUIRE(m.cause >= INGEST_CAUSE_VALUE && m.cause < INGEST_NCAUSES && strcmp(ingest_cause_name(m.cause), "?"));
    if (m.kind == INGEST_PARAM) {
      check_slice(base, size, m.text, INGEST_MAX_TEXT);
      for (size_t i = 0; i < m.text.n; i++)
        REQUIRE((unsigned char)m.text.p[i] >= 0x20 && m.text.p[i] != 0x7f);
    }
    if (m.has & INGEST_HAS_VALUE)
      REQUIRE(isfinite(m.value));
    if (m.has & INGEST_HAS_T)
      REQUIRE(m.t > 0 && m.t < 1e9);
    if (m.has & INGEST_HAS_STEP)
      REQUIRE(m.step >= 0 && m.step < 1000000000000000LL);
    if (m.kind == INGEST_STEP) {
      REQUIRE(m.has & INGEST_HAS_STEP);
      REQUIRE(m.n_phases <= INGEST_MAX_PHASES);
      REQUIRE(m.data_s >= 0 && m.h2d_s >= 0 && m.compute_s >= 0 && isfinite(m.data_s + m.h2d_s + m.compute_s));
      for (size_t i = 0; i < m.n_phases; i++) {
        check_name(base, size, m.phases[i].name);
        REQUIRE(m.phases[i].s >= 0 && isfinite(m.phases[i].s));
      }
      if (m.has & INGEST_HAS_SAMPLES)
        REQUIRE(m.samples >= 0);
      REQUIRE(m.rank >= 0 && m.rank <= INGEST_MAX_RANK && ((m.has & INGEST_HAS_RANK) || m.rank == 0));
      for (size_t i = 0; i < m.n_phases; i++)
        REQUIRE(!(m.phases[i].name.n == 4 && !memcmp(m.phases[i].name.p, "rank", 4)));
    }
    if (m.kind == INGEST_METRIC)
      REQUIRE(m.has & INGEST_HAS_VALUE);
  }
  free(line);
  return 0;
}
