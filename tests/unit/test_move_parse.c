/* Unit tests of the export file's reader (src/store/move_parse.c): the line parser's decoding
 * (escapes, surrogate pairs, integers past 2^53 kept exact, 17-digit doubles read back as written)
 * and one refusal for each rule of the checker (docs/export.md "Bad files"). The fuzzer
 * (tests/fuzz/fuzz_export_parse.c) covers the rest; test_move.py drives the whole commands. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "store/move_int.h"

static int parse(const char *s, struct mv_line *l, char *err) {
  return mv_parse(s, strlen(s), l, err, 256);
}

static void test_strings_decode_escapes_and_surrogate_pairs(void **state) {
  (void)state;
  struct mv_line l;
  char err[256];
  assert_int_equal(parse("{\"a\":\"x\\n\\t\\\"\\\\\\/\\u00e9\\ud83d\\ude00\"}", &l, err), 0);
  assert_string_equal(mv_str(&l, "a"), "x\n\t\"\\/\xc3\xa9\xf0\x9f\x98\x80");
  assert_int_equal(mv_get(&l, "a")->len, 12);
  mv_line_done(&l);
  /* upper-case hex digits are as good as lower-case (mutation: move_parse.c:47 'A' + 10 -> - 10) */
  assert_int_equal(parse("{\"a\":\"\\u00C9\\u00c9\\u2E3a\"}", &l, err), 0);
  assert_string_equal(mv_str(&l, "a"), "\xc3\x89\xc3\x89\xe2\xb8\xba");
  mv_line_done(&l);
}

static void test_integers_stay_exact_and_doubles_read_back(void **state) {
  (void)state;
  struct mv_line l;
  char err[256];
  char line[256];
  double v = 0.1 + 0.2;
  snprintf(line, sizeof line, "{\"t\":1796171297745012615,\"v\":%.17g,\"a\":[-0,9007199254740993,3],\"n\":null}", v);
  assert_int_equal(parse(line, &l, err), 0);
  assert_int_equal(mv_int(&l, "t", 0), 1796171297745012615LL);
  assert_true(mv_num(&l, "v") == v);
  const struct mv_field *a = mv_get(&l, "a");
  assert_true(a->type == MV_ARR && a->is_int && a->len == 3);
  assert_int_equal(a->arr_i[1], 9007199254740993LL);
  assert_true(isnan(mv_num(&l, "n")));
  mv_line_done(&l);
}

static void test_bad_json_is_refused_with_a_reason(void **state) {
  (void)state;
  static const char *const bad[] = {
      "",
      "[1]",
      "{\"a\":1",
      "{\"a\":1}x",
      "{\"a\":1,\"a\":2}",
      "{\"a\":\"\\ud800\"}",
      "{\"a\":01}",
      "{\"a\":1e999}",
      "{\"a\":\"\\u0000\"}",
      "{\"a\":[[1]]}",
      "{\"a\":\"x\ty\"}",
      "{\"a\":nul}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    struct mv_line l;
    char err[256] = "";
    assert_int_equal(parse(bad[i], &l, err), -1);
    assert_true(err[0]);
    assert_int_equal(l.n, 0);
  }
}

/* Feeds lines to a checker; returns the index of the first refused one (-1: none) with its reason. */
static int check_lines(const char *const *lines, size_t n, char *err, int *eof) {
  struct mv_check c = {0};
  int at = -1;
  for (size_t i = 0; i < n && at < 0; i++) {
    struct mv_line l;
    const char *type;
    if (parse(lines[i], &l, err) || (mv_check(&c, &l, &type, err, 256) && (mv_line_done(&l), 1)))
      at = (int)i;
    else
      mv_line_done(&l);
  }
  *eof = mv_check_eof(&c, at < 0 ? err : (char[256]){0}, 256);
  mv_check_done(&c);
  return at;
}

#define HDR "{\"type\":\"header\",\"format\":\"gpuscope-export\",\"version\":1,\"sections\":\"run,series,points\"}"
#define RUN                                                                                                            \
  "{\"type\":\"run\",\"id\":\"abc\",\"name\":\"n\",\"group\":\"\",\"status\":\"finished\",\"command\":\"c\","          \
  "\"cwd\":\"/\",\"host\":\"h\",\"user\":\"u\",\"tags\":\"\",\"start_wall_ns\":1,\"end_wall_ns\":2,"                   \
  "\"interval_ns\":3,\"exit_code\":0}"
#define SER                                                                                                            \
  "{\"type\":\"series\",\"run\":\"abc\",\"id\":0,\"source\":\"s\",\"name\":\"x\",\"labels\":\"\",\"unit\":\"\","       \
  "\"kind\":\"gauge\"}"
#define PTS(t) "{\"type\":\"points\",\"run\":\"abc\",\"series\":0,\"t\":[" t "],\"v\":[1,2]}"

static void test_a_whole_file_passes(void **state) {
  (void)state;
  const char *lines[] = {HDR,
                         RUN,
                         SER,
                         PTS("1,2"),
                         PTS("3,4"),
                         "{\"type\":\"run_end\",\"run\":\"abc\",\"lines\":5}",
                         "{\"type\":\"end\",\"runs\":1}"};
  char err[256] = "";
  int eof;
  assert_int_equal(check_lines(lines, 7, err, &eof), -1);
  assert_int_equal(eof, 0);
}

static void test_every_rule_refuses_its_line(void **state) {
  (void)state;
  const char *end = "{\"type\":\"run_end\",\"run\":\"abc\",\"lines\":4}";
  struct {
    const char *lines[6];
    size_t n;
    int at;
    const char *why;
  } cases[] = {
      {{RUN}, 1, 0, "no header"},
      {{"{\"type\":\"header\",\"format\":\"gpuscope-export\",\"version\":2,\"sections\":\"run\"}"}, 1, 0, "upgrade"},
      {{"{\"type\":\"header\",\"format\":\"gpuscope-export\",\"version\":1,\"sections\":\"run,telemetry\"}"},
       1,
       0,
       "'telemetry'"},
      {{HDR, SER}, 2, 1, "outside a run"},
      {{HDR, RUN, PTS("1,2")}, 3, 2, "not declared"},
      {{HDR, RUN, SER, PTS("2,1")}, 4, 3, "back in time"},
      {{HDR, RUN, SER, PTS("1,2"), PTS("2,3")}, 5, 4, "back in time"},
      {{HDR, RUN, SER, "{\"type\":\"points\",\"run\":\"abc\",\"series\":0,\"t\":[1],\"v\":[1,2]}"}, 4, 3, "as many"},
      {{HDR, RUN, SER, PTS("1,2"), "{\"type\":\"run_end\",\"run\":\"abc\",\"lines\":3}"}, 5, 4, "counts 3 lines"},
      {{HDR, RUN, SER, PTS("1,2"), end, "{\"type\":\"end\",\"runs\":2}"}, 6, 5, "counts 2 runs"},
      {{HDR, RUN, "{\"type\":\"note\",\"run\":\"other\",\"text\":\"x\"}"}, 3, 2, "inside run abc"},
      {{HDR, RUN, "{\"type\":\"note\",\"run\":\"abc\",\"text\":\"x\",\"extra\":1}"}, 3, 2, "does not know"},
      {{HDR, RUN, "{\"type\":\"note\",\"run\":\"abc\"}"}, 3, 2, "without its field 'text'"},
      {{HDR, RUN, "{\"type\":\"telemetry\",\"run\":\"abc\"}"}, 3, 2, "type 'telemetry'"},
      {{HDR, RUN, RUN}, 3, 2, "without its run_end"},
      /* a series' run id is held to 31 bytes like every run id (mutation: move_parse.c:372 31 -> 32) */
      {{HDR, RUN,
        "{\"type\":\"series\",\"run\":\"0123456789abcdef0123456789abcdef\",\"id\":0,\"source\":\"s\","
        "\"name\":\"x\",\"labels\":\"\",\"unit\":\"\",\"kind\":\"gauge\"}"},
       3,
       2,
       "'run' is over 31 bytes"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char err[256] = "";
    int eof;
    int at = check_lines(cases[i].lines, cases[i].n, err, &eof);
    if (at != cases[i].at || !strstr(err, cases[i].why))
      fail_msg("case %zu: refused at %d (want %d): '%s' (want '%s')", i, at, cases[i].at, err, cases[i].why);
  }
}

static void test_a_file_that_stops_early_is_truncated(void **state) {
  (void)state;
  const char *lines[] = {HDR, RUN, SER};
  char err[256] = "";
  int eof;
  assert_int_equal(check_lines(lines, 3, err, &eof), -1);
  assert_int_equal(eof, -1);
  assert_non_null(strstr(err, "inside run abc"));
  assert_non_null(strstr(err, "truncated"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strings_decode_escapes_and_surrogate_pairs),
      cmocka_unit_test(test_integers_stay_exact_and_doubles_read_back),
      cmocka_unit_test(test_bad_json_is_refused_with_a_reason),
      cmocka_unit_test(test_a_whole_file_passes),
      cmocka_unit_test(test_every_rule_refuses_its_line),
      cmocka_unit_test(test_a_file_that_stops_early_is_truncated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
