/* report/rows: the runs a search finds, with the columns a person asked for — what `runs --where
 * --sort --columns` prints and serve's /api/runs?where=&sort=&columns= answers. The store's runs_find
 * selects by SQL what SQL can decide (store_where.c); here every other column is read for the runs it
 * kept — params, the top stored finding, the training loop's throughput from a run view, each only
 * when the filter, the sort or the columns name one — and the filter decided, then the rows sorted.
 * One reader of the columns for both commands, so the CLI and the API agree. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "report/report.h"

/* Reads what f needs for row r (once). 0 or a GS_E code. */
static int row_load(struct report_row *r, int needs) {
  int rc = GS_OK;
  if ((needs & STORE_NEEDS_PARAMS) && !(r->loaded & STORE_NEEDS_PARAMS)) {
    if ((rc = r->st->params_read(r->st, r->run.id, &r->params, &r->nparams)))
      return rc;
    r->loaded |= STORE_NEEDS_PARAMS;
  }
  if ((needs & STORE_NEEDS_FINDINGS) && !(r->loaded & STORE_NEEDS_FINDINGS)) {
    struct store_finding *f = NULL;
    size_t n = 0;
    if ((rc = r->st->findings_read(r->st, r->run.id, &f, &n)))
      return rc;
    const struct store_finding *top = NULL;
    for (size_t i = 0; i < n && !top; i++)
      if (!doctor_is_verdict(f[i].rule))
        top = &f[i];
    if (!top && n)
      top = &f[0];
    if (top)
      snprintf(r->top_finding, sizeof r->top_finding, "%s", top->rule);
    free(f);
    r->loaded |= STORE_NEEDS_FINDINGS;
  }
  if ((needs & STORE_NEEDS_VIEW) && !(r->loaded & STORE_NEEDS_VIEW)) {
    struct runview v;
    r->samples_per_s = r->steps = r->median_step_s = r->data_share = r->gpu_util = NAN;
    if ((rc = runview_load(r->st, r->run.id, &v))) {
      runview_done(&v);
      return rc;
    }
    struct runview_step_figures ss;
    struct runview_stats g;
    runview_step_figures(&v, 0, v.nsteps, &ss); /* the figures report and serve show */
    r->samples_per_s = ss.samples_per_s;
    r->steps = ss.steps ? (double)ss.steps : NAN;
    r->median_step_s = ss.median_step_s;
    r->data_share = ss.data_share;
    if (!(rc = runview_stats(&v, NULL, "gpu.util_pct", NULL, INT64_MIN, INT64_MAX, &g)) && g.n)
      r->gpu_util = g.mean;
    runview_done(&v);
    if (rc)
      return rc;
    r->loaded |= STORE_NEEDS_VIEW;
  }
  return GS_OK;
}

/* A number as a value (none when not finite). */
static size_t num(struct report_row *r, double x, const char **vals) {
  if (!isfinite(x))
    return 0;
  snprintf(r->buf, sizeof r->buf, "%.17g", x);
  vals[0] = r->buf;
  return 1;
}

static size_t text(const char *s, const char **vals) {
  vals[0] = s;
  return 1;
}

/* Every params value of keys gpu.N.name. */
static size_t gpu_names(const struct report_row *r, const char **vals, size_t max) {
  size_t k = 0;
  for (size_t i = 0; i < r->nparams && k < max; i++) {
    const char *key = r->params[i].key, *p = key + 4;
    if (strncmp(key, "gpu.", 4) || *p < '0' || *p > '9')
      continue;
    while (*p >= '0' && *p <= '9')
      p++;
    if (!strcmp(p, ".name"))
      vals[k++] = r->params[i].value;
  }
  return k;
}

size_t report_row_value(void *row, const struct store_field *f, const char **vals, size_t max) {
  struct report_row *r = row;
  if (!max || row_load(r, f->needs)) {
    r->failed = 1; /* a read that failed is said once, by report_rows_find */
    return 0;
  }
  const struct store_run *x = &r->run;
  if (f->kind == STORE_FIELD_PARAM) {
    for (size_t i = 0; i < r->nparams; i++)
      if (!strcmp(r->params[i].key, f->key))
        return text(r->params[i].value, vals);
    return 0;
  }
  if (f->kind == STORE_FIELD_GPU_NAME)
    return gpu_names(r, vals, max);
  if (!strcmp(f->name, "id"))
    return text(x->id, vals);
  if (!strcmp(f->name, "name"))
    return text(x->name, vals);
  if (!strcmp(f->name, "group"))
    return text(x->group, vals);
  if (!strcmp(f->name, "host"))
    return text(x->host, vals);
  if (!strcmp(f->name, "user"))
    return text(x->user, vals);
  if (!strcmp(f->name, "command"))
    return text(x->command, vals);
  if (!strcmp(f->name, "cwd"))
    return text(x->cwd, vals);
  if (!strcmp(f->name, "tags"))
    return text(x->tags, vals);
  if (!strcmp(f->name, "status"))
    return text(x->status, vals);
  if (!strcmp(f->name, "top_finding"))
    return r->top_finding[0] ? text(r->top_finding, vals) : 0;
  if (!strcmp(f->name, "start"))
    return num(r, (double)x->start_wall_ns / GS_NS_PER_S, vals);
  if (!strcmp(f->name, "duration_s"))
    return num(r, x->end_wall_ns > 0 ? (double)(x->end_wall_ns - x->start_wall_ns) / GS_NS_PER_S : NAN, vals);
  if (!strcmp(f->name, "exit_code"))
    return num(r, x->exit_code >= 0 ? x->exit_code : NAN, vals);
  if (!strcmp(f->name, "samples_per_s"))
    return num(r, r->samples_per_s, vals);
  if (!strcmp(f->name, "steps"))
    return num(r, r->steps, vals);
  if (!strcmp(f->name, "median_step_s"))
    return num(r, r->median_step_s, vals);
  if (!strcmp(f->name, "data_share"))
    return num(r, r->data_share, vals);
  if (!strcmp(f->name, "gpu_util"))
    return num(r, r->gpu_util, vals);
  return 0;
}

void report_row_json(FILE *out, struct report_row *r, const struct store_field *f, size_t nf) {
  fputc('{', out);
  for (size_t c = 0; c < nf; c++) {
    const char *v[1];
    if (c)
      fputs(", ", out);
    gs_json_str(out, f[c].name);
    fputs(": ", out);
    if (!report_row_value(r, &f[c], v, 1))
      fputs("null", out);
    else if (f[c].kind == STORE_FIELD_NUM)
      gs_json_num(out, strtod(v[0], NULL));
    else
      gs_json_str(out, v[0]);
  }
  fputc('}', out);
}

int report_columns_parse(const char *list, struct store_field **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (!list || !*list)
    return gs_fail(GS_EINVAL, "no columns named");
  char *copy = strdup(list), *save = NULL;
  size_t cap = 1;
  for (const char *p = list; *p; p++)
    cap += *p == ',';
  struct store_field *f = calloc(cap, sizeof *f);
  if (!copy || !f) {
    free(copy), free(f);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  size_t k = 0;
  int rc = GS_OK;
  for (char *c = strtok_r(copy, ",", &save); c && !rc; c = strtok_r(NULL, ",", &save))
    rc = store_field_lookup(c, &f[k++]);
  free(copy);
  if (!rc && !k)
    rc = gs_fail(GS_EINVAL, "no columns named");
  if (rc) {
    free(f);
    return rc;
  }
  *out = f;
  *n = k;
  return GS_OK;
}

static void row_clear(struct report_row *r) {
  store_kv_free(r->params, r->nparams);
  r->params = NULL;
  r->nparams = 0;
}

/* GS_EIO naming the run whose columns could not be read (the read's message kept). */
static int row_failed(const struct report_row *r) {
  char why[512];
  snprintf(why, sizeof why, "%s", gs_last_error());
  return gs_fail(GS_EIO, "cannot read run %s: %s", r->run.id, why);
}

/* Orders two rows by the sort column: numbers as numbers (a param's too when both read as one),
 * else text; a missing value last whichever the direction. */
static int row_cmp(struct report_row *a, struct report_row *b, const struct store_field *f, int desc) {
  const char *va[1], *vb[1];
  char ta[64];
  size_t na = report_row_value(a, f, va, 1);
  if (na && va[0] == a->buf) { /* b's value may reuse a buffer: keep a's */
    snprintf(ta, sizeof ta, "%s", va[0]);
    va[0] = ta;
  }
  size_t nb = report_row_value(b, f, vb, 1);
  if (!na || !nb)
    return !na - !nb;
  double x, y;
  int c;
  if (f->kind == STORE_FIELD_NUM || (store_where_number(va[0], &x) && store_where_number(vb[0], &y))) {
    x = strtod(va[0], NULL), y = strtod(vb[0], NULL);
    c = x < y ? -1 : x > y;
  } else {
    c = strcmp(va[0], vb[0]);
  }
  return desc ? -c : c;
}

/* Insertion of each row into its place: stable, and the row reader needs no global state. */
static void rows_sort(struct report_row *rows, size_t n, const struct store_field *f, int desc) {
  for (size_t i = 1; i < n; i++) {
    struct report_row x = rows[i];
    size_t j = i;
    while (j > 0 && row_cmp(&rows[j - 1], &x, f, desc) > 0) {
      rows[j] = rows[j - 1];
      j--;
    }
    rows[j] = x;
  }
}

int report_rows_find(struct store *st, const struct report_search *q, struct report_row **rows, size_t *n) {
  *rows = NULL;
  *n = 0;
  if (st->version < 6 || !st->runs_find)
    return gs_fail(GS_EINVAL, "this store cannot be searched (a group of runs)");
  struct store_run *runs = NULL;
  size_t nr = 0;
  struct store_query sq = {q->where, q->since_wall_ns};
  int rc = st->runs_find(st, &sq, &runs, &nr);
  if (rc)
    return rc;
  struct report_row *r = calloc(nr ? nr : 1, sizeof *r);
  if (!r) {
    free(runs);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  size_t k = 0;
  int decide = q->where && !store_where_pushed(q->where);
  for (size_t i = 0; i < nr && !rc; i++) {
    r[k] = (struct report_row){.run = runs[i], .st = st};
    int match = !decide || store_where_match(q->where, report_row_value, &r[k]);
    if (r[k].failed)
      rc = row_failed(&r[k]);
    if (!match || rc)
      row_clear(&r[k]);
    else
      k++;
  }
  free(runs);
  if (!rc && q->sort) {
    rows_sort(r, k, q->sort, q->sort_desc);
    for (size_t i = 0; i < k && !rc; i++)
      if (r[i].failed)
        rc = row_failed(&r[i]);
  }
  if (rc) {
    report_rows_free(r, k);
    return rc;
  }
  *rows = r;
  *n = k;
  return GS_OK;
}

void report_rows_free(struct report_row *rows, size_t n) {
  for (size_t i = 0; rows && i < n; i++)
    row_clear(&rows[i]);
  free(rows);
}
