/* Unit tests of the gs1 parser (src/ingest/ingest_parse.c) that the mutation pass (tests/mutation,
 * docs/mutation.md) found missing: each kills mutants that test_ingest_parse.c, the socket's and the
 * C client's tests let live, and says which. The edges of the rules: a reserved prefix alone, the
 * first and last code points of a range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <stdio.h>

#include <cmocka.h>

#include "ingest/ingest.h"

static int parse(const char *s, struct ingest_msg *m) {
  return ingest_parse_line(s, strlen(s), m);
}

/* The reserved prefixes are reserved as whole names too ("step." and "ingest." alone). Kills
 * str_starts' `t.n >= n` -> `t.n > n`. */
static void test_reserved_prefix_alone_is_rejected(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 metric step. 1", &m), GS_EINVAL);
  assert_non_null(strstr(m.error, "reserved"));
  assert_int_equal(parse("gs1 param ingest. v", &m), GS_EINVAL);
  assert_non_null(strstr(m.error, "reserved"));
  assert_int_equal(parse("gs1 metric step 1", &m), 0);
}

/* The surrogates U+D800..U+DFFF are refused up to the last one; the code points just outside them
 * are text. Kills `cp <= 0xdfff` -> `cp < 0xdfff` and -> `cp <= 0xe000`. */
static void test_surrogate_range_ends_are_exact(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 param k \xed\xbf\xbf", &m), GS_EINVAL); /* U+DFFF */
  assert_int_equal(parse("gs1 param k \xed\xa0\x80", &m), GS_EINVAL); /* U+D800 */
  assert_int_equal(parse("gs1 param k \xee\x80\x80", &m), 0);         /* U+E000 */
  assert_int_equal(m.text.n, 3);
  assert_int_equal(parse("gs1 param k \xed\x9f\xbf", &m), 0); /* U+D7FF */
}

/* Each UTF-8 length is read as its lead byte says: 2, 3 and 4 bytes are text, a 5-byte lead is not.
 * Kills printable_utf8's `else if ((c & 0xf0) == 0xe0)` -> `else if (1)` (a 4-byte character read as a
 * 3-byte one, and refused). */
static void test_every_utf8_length_is_read_by_its_lead_byte(void **state) {
  (void)state;
  struct ingest_msg m;
  assert_int_equal(parse("gs1 param k caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", &m), 0); /* é € 😀 */
  assert_int_equal(m.text.n, 14);
  assert_int_equal(parse("gs1 param k \xf4\x8f\xbf\xbf", &m), 0);         /* U+10FFFF, the last */
  assert_int_equal(parse("gs1 param k \xf4\x90\x80\x80", &m), GS_EINVAL); /* past U+10FFFF */
  assert_int_equal(parse("gs1 param k \xf8\x88\x80\x80\x80", &m), GS_EINVAL);
}

/* A kind's name for every kind, and "other" for one past the last (never a read past the table).
 * Kills ingest_kind_name's `k < INGEST_NKINDS` -> `<=`. */
static void test_kind_name_past_the_last_kind_is_other(void **state) {
  (void)state;
  assert_string_equal(ingest_kind_name(INGEST_DROPPED), "dropped");
  assert_string_equal(ingest_kind_name(INGEST_NKINDS), "other");
  assert_string_equal(ingest_kind_name((enum ingest_kind)(INGEST_NKINDS + 1)), "other");
}

/* Each limit the protocol states holds at its edge: a value of 1024 bytes is taken, 1025 not; a
 * time just under 1e9 s is taken, 1e9 not; a dropped count starts at 1; a number of 64 bytes is
 * read, 65 not; an empty name or value is refused. Kills the boundary mutants of those checks
 * (`>` -> `>=`, `<` -> `<=`, `t.n < 1` -> `< 0`, `return -1` -> `-0`). */
static void test_limits_hold_at_their_edges(void **state) {
  (void)state;
  struct ingest_msg m;
  char line[1200];
  char text[INGEST_MAX_TEXT + 2];
  memset(text, 'v', sizeof text);
  text[INGEST_MAX_TEXT] = 0;
  snprintf(line, sizeof line, "gs1 param k %s", text);
  assert_int_equal(parse(line, &m), 0);
  assert_int_equal(m.text.n, INGEST_MAX_TEXT);
  text[INGEST_MAX_TEXT] = 'v', text[INGEST_MAX_TEXT + 1] = 0;
  snprintf(line, sizeof line, "gs1 param k %s", text);
  assert_int_equal(parse(line, &m), GS_EINVAL);
  assert_int_equal(parse("gs1 metric x 1 t=999999999.5", &m), 0);
  assert_int_equal(parse("gs1 metric x 1 t=1000000000", &m), GS_EINVAL);
  assert_int_equal(parse("gs1 dropped 1", &m), 0); /* at least one message dropped */
  assert_int_equal(m.step, 1);
  assert_int_equal(parse("gs1 dropped 0", &m), GS_EINVAL);
  char num[70];
  memset(num, '1', sizeof num);
  num[64] = 0;
  snprintf(line, sizeof line, "gs1 metric x %s", num);
  assert_int_equal(parse(line, &m), 0);
  num[64] = '1', num[65] = 0;
  snprintf(line, sizeof line, "gs1 metric x %s", num);
  assert_int_equal(parse(line, &m), GS_EINVAL);
  assert_int_equal(parse("gs1 metric  1", &m), GS_EINVAL); /* an empty name */
  assert_int_equal(parse("gs1 metric x ", &m), GS_EINVAL); /* an empty value */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reserved_prefix_alone_is_rejected),
      cmocka_unit_test(test_surrogate_range_ends_are_exact),
      cmocka_unit_test(test_every_utf8_length_is_read_by_its_lead_byte),
      cmocka_unit_test(test_kind_name_past_the_last_kind_is_other),
      cmocka_unit_test(test_limits_hold_at_their_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
