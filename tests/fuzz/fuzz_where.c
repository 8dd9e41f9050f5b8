/* libFuzzer target for the runs' filter language (src/store/store_where.c), which parses what a
 * person types into `runs --where`, the serve API's where= and the web runs page:
 *  1. any bytes parse to a filter or to GS_EINVAL / GS_ENOMEM with a message, never a crash, a
 *     hang or a leak;
 *  2. a filter's SQL, in both dialects, is built from the file's own constants and placeholders
 *     only — every byte printable ASCII, however odd the input — and names as many parameters as
 *     it binds: no value is ever pasted into the text;
 *  3. evaluation in C over a run with some columns missing ends with 0 or 1.
 * Built with clang's -fsanitize=fuzzer,address,undefined by tests/fuzz/CMakeLists.txt. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#define REQUIRE(c)                                                                                                     \
  do {                                                                                                                 \
    if (!(c))                                                                                                          \
      abort();                                                                                                         \
  } while (0)

static char last_error[512];

int gs_fail(int code, const char *fmt, ...) {
  char buf[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  memcpy(last_error, buf, sizeof buf);
  return code;
}

const char *gs_last_error(void) {
  return last_error;
}

/* A run whose text columns hold "A100 vision 64", whose numbers are 64, and that lacks the rest. */
static size_t value(void *ctx, const struct store_field *f, const char **vals, size_t max) {
  (void)ctx;
  REQUIRE(max > 0);
  if (f->kind == STORE_FIELD_NUM) {
    vals[0] = f->needs ? "512.5" : "64";
    return f->needs & STORE_NEEDS_VIEW ? 0 : 1;
  }
  if (f->kind == STORE_FIELD_PARAM && strstr(f->key, "missing"))
    return 0;
  vals[0] = "A100 vision 64";
  if (f->kind == STORE_FIELD_GPU_NAME && max > 1) {
    vals[1] = "NVIDIA H100";
    return 2;
  }
  return 1;
}

/* Counts the distinct placeholders of a dialect in text and checks every byte is printable. */
static int placeholders(const char *text, char mark) {
  int max = 0;
  for (const char *p = text; *p; p++) {
    REQUIRE(*p >= 0x20 && *p < 0x7f);
    if (*p == mark && p[1] >= '1' && p[1] <= '9') {
      int k = atoi(p + 1);
      max = k > max ? k : max;
    }
  }
  return max;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s)
    return 0;
  memcpy(s, data, size);
  s[size] = 0;
  struct store_where *w = store_where_parse(s);
  if (!w) {
    REQUIRE(last_error[0]);
    free(s);
    return 0;
  }
  struct store_query q = {w, size & 1 ? 1764547200000000000LL : 0};
  for (int d = 0; d < 2; d++) {
    struct store_sql sql;
    if (store_query_sql(&q, d ? STORE_SQL_PG : STORE_SQL_SQLITE, &sql) == 0) {
      int n = placeholders(sql.text ? sql.text : "", d ? '$' : '?');
      REQUIRE(n == sql.nargs);
      for (int i = 0; i < sql.nargs; i++)
        REQUIRE(sql.args[i] != NULL);
      store_sql_done(&sql);
    }
  }
  int m = store_where_match(w, value, NULL);
  REQUIRE(m == 0 || m == 1);
  (void)store_where_pushed(w);
  (void)store_where_needs(w);
  store_where_free(w);
  double v;
  (void)store_where_number(s, &v);
  free(s);
  return 0;
}
