/* cli/cmd_search: `gpuscope runs --where EXPR --since AGE --sort [-]COLUMN --columns A,B,...` — the
 * options turned into a search (report_rows_find: the filter language of store_where.c, pushed down
 * to the store's SQL), and the columns printed as a table, JSON or CSV. A bad expression, column or
 * age is a usage error (exit 2) that names it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "report/report.h"

int cli_runs_search(struct store *st, const struct cli_search *o, struct report_row **rows, size_t *n) {
  struct store_where *w = NULL;
  struct store_field sort;
  struct report_search q = {0};
  if (o->where && !(w = store_where_parse(o->where)))
    return cli_error(GS_EXIT_USAGE, "--where: %s", gs_last_error());
  q.where = w;
  int rc = -1;
  if (o->since) {
    int64_t age;
    if (gs_parse_duration(o->since, &age))
      rc = cli_error(GS_EXIT_USAGE, "--since: %s (an age such as 7d, 12h)", gs_last_error());
    q.since_wall_ns = gs_wall_ns() - age;
  }
  if (rc < 0 && o->sort) {
    q.sort_desc = o->sort[0] == '-';
    if (store_field_lookup(o->sort + q.sort_desc, &sort))
      rc = cli_error(GS_EXIT_USAGE, "--sort: %s", gs_last_error());
    q.sort = &sort;
  }
  if (rc < 0 && report_rows_find(st, &q, rows, n))
    rc = cli_error(GS_EXIT_FAIL, "%s", gs_last_error());
  store_where_free(w);
  return rc < 0 ? GS_EXIT_OK : rc;
}

/* A column's value of row r as text for a terminal (or "-" when missing) into buf. */
static const char *cell(struct report_row *r, const struct store_field *f, char *buf, size_t n) {
  const char *v[1];
  if (!report_row_value(r, f, v, 1))
    return "-";
  if (f->kind != STORE_FIELD_NUM)
    return gs_term_copy(buf, n, v[0]);
  double x = strtod(v[0], NULL);
  if (!strcmp(f->name, "start")) {
    time_t t = (time_t)x;
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
  } else {
    snprintf(buf, n, "%.6g", x);
  }
  return buf;
}

static void print_table(struct report_row *rows, size_t n, const struct store_field *f, size_t nf) {
  enum { CELL = 48 };
  int *width = calloc(nf, sizeof *width);
  char buf[CELL * 4];
  for (size_t c = 0; width && c < nf; c++) {
    width[c] = (int)strlen(f[c].name);
    for (size_t i = 0; i < n; i++) {
      int w = (int)strlen(cell(&rows[i], &f[c], buf, CELL));
      width[c] = w > width[c] ? w : width[c];
    }
  }
  for (size_t c = 0; c < nf; c++) {
    char up[160];
    size_t k = 0;
    for (; f[c].name[k] && k + 1 < sizeof up; k++)
      up[k] = (char)(f[c].name[k] >= 'a' && f[c].name[k] <= 'z' ? f[c].name[k] - 32 : f[c].name[k]);
    up[k] = 0;
    printf("%-*s%s", c + 1 < nf && width ? width[c] : 0, up, c + 1 < nf ? "  " : "\n");
  }
  for (size_t i = 0; i < n; i++)
    for (size_t c = 0; c < nf; c++)
      printf("%-*s%s", c + 1 < nf && width ? width[c] : 0, cell(&rows[i], &f[c], buf, CELL), c + 1 < nf ? "  " : "\n");
  free(width);
}

static void print_json(struct report_row *rows, size_t n, const struct store_field *f, size_t nf) {
  printf("[");
  for (size_t i = 0; i < n; i++) {
    printf("%s\n ", i ? "," : "");
    report_row_json(stdout, &rows[i], f, nf);
  }
  printf("%s]\n", n ? "\n" : "");
}

static void print_csv(struct report_row *rows, size_t n, const struct store_field *f, size_t nf) {
  for (size_t c = 0; c < nf; c++) {
    gs_csv_field(stdout, f[c].name);
    putchar(c + 1 < nf ? ',' : '\n');
  }
  for (size_t i = 0; i < n; i++)
    for (size_t c = 0; c < nf; c++) {
      const char *v[1];
      if (report_row_value(&rows[i], &f[c], v, 1)) {
        if (f[c].kind == STORE_FIELD_NUM)
          fputs(v[0], stdout);
        else
          gs_csv_field(stdout, v[0]);
      }
      putchar(c + 1 < nf ? ',' : '\n');
    }
}

int cli_runs_columns(struct report_row *rows, size_t n, const char *columns, int json, int csv) {
  struct store_field *f;
  size_t nf;
  if (report_columns_parse(columns, &f, &nf))
    return cli_error(GS_EXIT_USAGE, "--columns: %s", gs_last_error());
  if (json)
    print_json(rows, n, f, nf);
  else if (csv)
    print_csv(rows, n, f, nf);
  else
    print_table(rows, n, f, nf);
  int failed = 0;
  for (size_t i = 0; i < n; i++)
    failed |= rows[i].failed;
  free(f);
  return failed ? cli_error(GS_EXIT_FAIL, "some columns could not be read: %s", gs_last_error()) : GS_EXIT_OK;
}
