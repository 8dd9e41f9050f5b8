/* libFuzzer target for the export file's reader (src/store/move_parse.c), which reads files from
 * elsewhere: any bytes, cut into lines, go through the line parser and the checker as `gpuscope
 * import` reads them. Whatever comes out must keep their promises: a reason on every refusal;
 * on success strings NUL-terminated at their length with no NUL inside, arrays within the bound,
 * integers where is_int says so, and the checker's state consistent. Built with clang's
 * -fsanitize=fuzzer,address,undefined by tests/fuzz/CMakeLists.txt; seeds in corpus/export_parse. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/move_int.h"

#define REQUIRE(c)                                                                                                     \
  do {                                                                                                                 \
    if (!(c))                                                                                                          \
      abort();                                                                                                         \
  } while (0)

static void check_line(const struct mv_line *l) {
  REQUIRE(l->n <= MV_MAX_FIELDS);
  for (size_t i = 0; i < l->n; i++) {
    const struct mv_field *f = &l->f[i];
    REQUIRE(f->key[0] && strlen(f->key) < sizeof f->key);
    REQUIRE(mv_get(l, f->key) == f); /* no key twice */
    if (f->type == MV_STR)
      REQUIRE(f->str && strlen(f->str) == f->len && f->len <= MV_MAX_STR);
    if (f->type == MV_NUM)
      REQUIRE(isfinite(f->num) && (!f->is_int || (double)f->i == f->num || fabs(f->num) > 9e15));
    if (f->type == MV_ARR) {
      REQUIRE(f->len <= MV_MAX_POINTS);
      for (size_t k = 0; k < f->len; k++)
        REQUIRE(isfinite(f->arr[k]));
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct mv_check c = {0};
  char err[512];
  const char *p = (const char *)data, *end = p + size;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    struct mv_line l;
    err[0] = 0;
    if (mv_parse(p, len, &l, err, sizeof err)) {
      REQUIRE(err[0]);
      REQUIRE(l.n == 0);
      break;
    }
    check_line(&l);
    const char *type = NULL;
    int64_t before = c.line_no;
    err[0] = 0;
    int rc = mv_check(&c, &l, &type, err, sizeof err);
    REQUIRE(c.line_no == before + 1);
    REQUIRE(rc == 0 || err[0]);
    REQUIRE(rc || type);
    REQUIRE(c.n_series <= c.cap_series && c.n_series <= MV_MAX_SERIES);
    mv_line_done(&l);
    if (rc)
      break;
    p = nl ? nl + 1 : end;
  }
  err[0] = 0;
  REQUIRE(mv_check_eof(&c, err, sizeof err) == 0 || err[0]);
  mv_check_done(&c);
  return 0;
}
