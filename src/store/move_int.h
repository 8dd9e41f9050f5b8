/* store/move_int: the export file's reader, private to the store folder (store_move.c uses it, the
 * libFuzzer target tests/fuzz/fuzz_export_parse.c runs it). An export file (docs/export.md) is JSON
 * Lines: one flat JSON object a line, each with a "type". mv_parse reads one line into fields
 * (strings, numbers, null, booleans, arrays of numbers: all an export line holds); mv_check follows
 * the lines in order and refuses anything out of place — a line of an unknown type, a field missing
 * or too long for the store, points of a series not declared or going back in time, a run's line
 * count or the file's run count that does not match its end line. Pure: no store, no I/O, no global
 * state; every refusal is a one-line reason in err. */
#ifndef GS_STORE_MOVE_INT_H
#define GS_STORE_MOVE_INT_H

#include <stddef.h>
#include <stdint.h>

enum {
  MV_FORMAT_VERSION = 1,           /* the "version" this gpuscope writes and reads */
  MV_MAX_LINE = 8 * 1024 * 1024,   /* bytes of one line, newline included (a kept 1 MiB diff, escaped) */
  MV_MAX_FIELDS = 24,              /* fields of one object */
  MV_MAX_POINTS = 4096,            /* numbers in one array (a points line) */
  MV_MAX_SERIES = 1000000,         /* series of one run */
  MV_MAX_STR = 2 * 1024 * 1024 - 1 /* bytes of one string (a kept git diff is a param) */
};

enum mv_type { MV_NULL, MV_BOOL, MV_NUM, MV_STR, MV_ARR };

struct mv_field {
  char key[32];
  enum mv_type type;
  char *str;      /* MV_STR: malloc'd, NUL-terminated, no NUL inside; len bytes */
  size_t len;     /* MV_STR: bytes; MV_ARR: numbers */
  double num;     /* MV_NUM; MV_BOOL: 0 or 1 */
  int64_t i;      /* MV_NUM written as an integer that fits int64 (is_int) */
  int is_int;     /* MV_NUM: written without fraction or exponent and in range; MV_ARR: every element so */
  double *arr;    /* MV_ARR: len numbers, malloc'd (NULL when empty) */
  int64_t *arr_i; /* MV_ARR with is_int: the same as integers, malloc'd */
};

struct mv_line {
  struct mv_field f[MV_MAX_FIELDS];
  size_t n;
};

/* Parses one line (len bytes, without its newline; need not be NUL-terminated) into l. Returns 0,
 * or -1 with the reason in err (l then holds nothing to free). On success the caller frees l with
 * mv_line_done. */
int mv_parse(const char *s, size_t len, struct mv_line *l, char *err, size_t errlen);
void mv_line_done(struct mv_line *l);
/* The field named key, or NULL. */
const struct mv_field *mv_get(const struct mv_line *l, const char *key);
/* The string field key ("" when absent or not a string: mv_check has made sure of those it needs). */
const char *mv_str(const struct mv_line *l, const char *key);
/* The integer field key, or def when absent. */
int64_t mv_int(const struct mv_line *l, const char *key, int64_t def);
/* The number field key, or NAN when absent or null. */
double mv_num(const struct mv_line *l, const char *key);

/* Where mv_check is in a file: zero it before the first line, mv_check_done after the last. */
struct mv_check {
  int64_t line_no;   /* lines read */
  int state;         /* 0 before the header, 1 between runs, 2 in a run, 3 after the end line */
  int64_t runs;      /* runs begun */
  int64_t run_lines; /* lines of the run in progress, its run line included */
  char run_id[32];   /* the run in progress */
  int64_t *last_t;   /* per series of the run: its last point's time (INT64_MIN: none yet) */
  size_t n_series, cap_series;
};

/* Checks the next line of the file against what came before. Returns 0, or -1 with the reason in
 * err (the caller says which line: c->line_no). Returns the line's type in *type (a static string:
 * "header", "run", "param", ...). */
int mv_check(struct mv_check *c, const struct mv_line *l, const char **type, char *err, size_t errlen);
/* The file has ended: 0 when its end line came, else -1 with the reason. */
int mv_check_eof(const struct mv_check *c, char *err, size_t errlen);
void mv_check_done(struct mv_check *c);

#endif
