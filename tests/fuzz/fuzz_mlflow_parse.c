/* libFuzzer target for the readers of an MLflow file store's files (src/store/mlflow_parse.c), which
 * `gpuscope import mlruns/` runs on files from elsewhere: any bytes as a meta.yaml (through libyaml)
 * and as a metric file. Whatever comes out must keep their promises: a reason with an offset on
 * every refusal; on success keys and values NUL-terminated within their bounds and found by
 * ml_meta_get, and points finite, with a step of -1 or >= 0. Built with clang's
 * -fsanitize=fuzzer,address,undefined by tests/fuzz/CMakeLists.txt; seeds in corpus/mlflow_parse. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/mlflow_int.h"

#define REQUIRE(c)                                                                                                     \
  do {                                                                                                                 \
    if (!(c))                                                                                                          \
      abort();                                                                                                         \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct ml_meta m;
  char err[256];
  if (ml_parse_meta((const char *)data, size, &m, err, sizeof err)) {
    REQUIRE(!strncmp(err, "offset ", 7) && m.n == 0);
  } else {
    REQUIRE(m.n <= ML_MAX_KEYS);
    for (size_t i = 0; i < m.n; i++) {
      REQUIRE(strlen(m.kv[i].key) < sizeof m.kv[i].key && strlen(m.kv[i].val) < ML_MAX_VALUE);
      REQUIRE(ml_meta_get(&m, m.kv[i].key) != NULL);
    }
  }
  struct ml_point *p;
  size_t n;
  if (ml_parse_metric((const char *)data, size, &p, &n, err, sizeof err)) {
    REQUIRE(!strncmp(err, "offset ", 7) && n == 0);
    return 0;
  }
  REQUIRE(n == 0 || p);
  for (size_t i = 0; i < n; i++)
    REQUIRE(isfinite(p[i].v) && p[i].ts_ms >= 0 && p[i].step >= -1);
  free(p);
  return 0;
}
