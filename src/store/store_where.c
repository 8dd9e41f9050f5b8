/* store/store_where: the runs' one filter language — its columns, its parser, its evaluation in C
 * and its translation into each back end's SQL. `runs --where`, serve's /api/runs and the web runs
 * page all hand the text to store_where_parse(); a back end's runs_find turns what SQL can decide
 * into a WHERE clause (store_query_sql: every value a bound parameter), and the caller decides the
 * rest with store_where_match() over the columns only C computes (throughput, top finding). Both
 * follow SQL's three-valued logic, so a missing value never matches a comparison and the two agree
 * (docs/runs.md "Search"). The file is pure (libc and gs_fail), so the fuzzer builds it alone.
 *
 * Grammar (precedence low to high):
 *   expr   := and ("or" and)*
 *   and    := unary ("and" unary)*
 *   unary  := "not" unary | "(" expr ")" | column op value   (not and parentheses: 32 deep at most)
 *   op     := = | != | < | <= | > | >= | ~
 *   value  := a bare word (letters, digits, . _ - + : / @ %) | 'text' | "text" (a quote doubled
 *             inside), a bare word that reads as a number (store_where_number) being one */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

/* ---- columns ---- */

enum field_id {
  F_ID,
  F_NAME,
  F_GROUP,
  F_HOST,
  F_USER,
  F_COMMAND,
  F_CWD,
  F_TAGS,
  F_STATUS,
  F_START,
  F_DURATION,
  F_EXIT,
  F_PARAM,
  F_TAG,
  F_GPU_NAME,
  F_SAMPLES_PER_S,
  F_STEPS,
  F_MEDIAN_STEP,
  F_DATA_SHARE,
  F_GPU_UTIL,
  F_TOP_FINDING,
};

struct field_def {
  const char *name;
  int id, kind, needs, pushable;
  const char *column; /* the runs table's column of a pushable text column */
};

static const struct field_def FIELDS[] = {
    {"id", F_ID, STORE_FIELD_TEXT, 0, 1, "id"},
    {"name", F_NAME, STORE_FIELD_TEXT, 0, 1, "name"},
    {"group", F_GROUP, STORE_FIELD_TEXT, 0, 1, "grp"},
    {"host", F_HOST, STORE_FIELD_TEXT, 0, 1, "host"},
    {"user", F_USER, STORE_FIELD_TEXT, 0, 1, "\"user\""},
    {"command", F_COMMAND, STORE_FIELD_TEXT, 0, 1, "command"},
    {"cwd", F_CWD, STORE_FIELD_TEXT, 0, 1, "cwd"},
    {"tags", F_TAGS, STORE_FIELD_TEXT, 0, 1, "tags"},
    /* a "running" run whose agent died reads as crashed: decided in C (store_settle_crashed) */
    {"status", F_STATUS, STORE_FIELD_TEXT, 0, 0, NULL},
    {"start", F_START, STORE_FIELD_NUM, 0, 1, NULL},
    {"duration_s", F_DURATION, STORE_FIELD_NUM, 0, 1, NULL},
    {"exit_code", F_EXIT, STORE_FIELD_NUM, 0, 1, NULL},
    {"gpu.name", F_GPU_NAME, STORE_FIELD_GPU_NAME, STORE_NEEDS_PARAMS, 1, NULL},
    {"samples_per_s", F_SAMPLES_PER_S, STORE_FIELD_NUM, STORE_NEEDS_VIEW, 0, NULL},
    {"steps", F_STEPS, STORE_FIELD_NUM, STORE_NEEDS_VIEW, 0, NULL},
    {"median_step_s", F_MEDIAN_STEP, STORE_FIELD_NUM, STORE_NEEDS_VIEW, 0, NULL},
    {"data_share", F_DATA_SHARE, STORE_FIELD_NUM, STORE_NEEDS_VIEW, 0, NULL},
    {"gpu_util", F_GPU_UTIL, STORE_FIELD_NUM, STORE_NEEDS_VIEW, 0, NULL},
    {"top_finding", F_TOP_FINDING, STORE_FIELD_TEXT, STORE_NEEDS_FINDINGS, 0, NULL},
};
enum { N_FIELDS = sizeof FIELDS / sizeof FIELDS[0] };

const char STORE_FIELD_NAMES[] = "id, name, group, host, user, command, cwd, tags, status, start, duration_s,"
                                 " exit_code, gpu.name, samples_per_s, steps, median_step_s, data_share, gpu_util,"
                                 " top_finding, param.KEY, tag.KEY";

/* A params key as the language spells one: what follows "param." or "tag.". */
static int key_ok(const char *k) {
  if (!*k)
    return 0;
  for (const char *p = k; *p; p++)
    if (!isalnum((unsigned char)*p) && !strchr("._-:/@%+", *p))
      return 0;
  return 1;
}

int store_field_lookup(const char *name, struct store_field *f) {
  memset(f, 0, sizeof *f);
  if (strlen(name) >= sizeof f->name - 4)
    return gs_fail(GS_EINVAL, "column name too long (%zu bytes)", strlen(name));
  snprintf(f->name, sizeof f->name, "%s", name);
  int param = !strncmp(name, "param.", 6), tag = !strncmp(name, "tag.", 4);
  if (param || tag) {
    const char *k = name + (param ? 6 : 4);
    if (!key_ok(k))
      return gs_fail(GS_EINVAL, "column '%s' names no key (param.KEY, tag.KEY: letters, digits, . _ - : / @ %% +)",
                     name);
    f->id = param ? F_PARAM : F_TAG;
    f->kind = STORE_FIELD_PARAM;
    f->needs = STORE_NEEDS_PARAMS;
    f->pushable = 1;
    snprintf(f->key, sizeof f->key, "%s%s", param ? "" : "tag.", k);
    return GS_OK;
  }
  for (size_t i = 0; i < N_FIELDS; i++)
    if (!strcmp(FIELDS[i].name, name)) {
      f->id = FIELDS[i].id;
      f->kind = FIELDS[i].kind;
      f->needs = FIELDS[i].needs;
      f->pushable = FIELDS[i].pushable;
      return GS_OK;
    }
  return gs_fail(GS_EINVAL, "unknown column '%s' (columns: %s)", name, STORE_FIELD_NAMES);
}

int store_where_number(const char *s, double *v) {
  const char *p = s;
  if (*p == '-' || *p == '+')
    p++;
  size_t before = strspn(p, "0123456789");
  p += before;
  size_t after = 0;
  if (*p == '.') {
    after = strspn(p + 1, "0123456789");
    p += 1 + after;
  }
  if (before + after == 0 || before > 30 || after > 30)
    return 0;
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '-' || *p == '+')
      p++;
    size_t ex = strspn(p, "0123456789");
    if (ex == 0 || ex > 2)
      return 0;
    p += ex;
  }
  if (*p)
    return 0;
  if (v)
    *v = strtod(s, NULL);
  return 1;
}

/* ---- the tree ---- */

enum node_type { N_AND, N_OR, N_NOT, N_CMP };
enum cmp_op { OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_SUB };
static const char *const OP_TEXT[] = {"=", "!=", "<", "<=", ">", ">=", "~"};

struct node {
  int type, l, r; /* children (indices) of and / or / not */
  int op;
  struct store_field f;
  char *lit;
  int lit_num;
  double num;
};

/* The SQL of a filter nests about as deep as the filter (chains are flat, not not is dropped), and
 * SQLite's parser stack holds 100 levels: WHERE_MAX_DEPTH (of not and parentheses) keeps the
 * deepest filter's SQL within it, on both back ends (test_runs_where runs filters at the limits). */
enum { WHERE_MAX_CMPS = 256, WHERE_MAX_NODES = 1024, WHERE_MAX_DEPTH = 32, WHERE_MAX_LEN = 8192 };

struct store_where {
  struct node *n;
  int len, cap, root, ncmp;
};

struct parser {
  const char *s, *p;
  struct store_where *w;
  int depth;
};

void store_where_free(struct store_where *w) {
  if (!w)
    return;
  for (int i = 0; i < w->len; i++)
    free(w->n[i].lit);
  free(w->n);
  free(w);
}

static int at(const struct parser *ps) {
  return (int)(ps->p - ps->s) + 1;
}

static void skip_space(struct parser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')
    ps->p++;
}

static int word_char(char c) {
  return isalnum((unsigned char)c) || strchr("._-+:/@%", c);
}

/* The bare word at ps->p (not consumed): its length, 0 when none. */
static size_t word_len(const struct parser *ps) {
  size_t n = 0;
  while (ps->p[n] && word_char(ps->p[n]))
    n++;
  return n;
}

/* Whether the next token is the keyword kw (a whole word, any case); consumes it when it is. */
static int keyword(struct parser *ps, const char *kw) {
  skip_space(ps);
  size_t n = word_len(ps), k = strlen(kw);
  if (n != k || strncasecmp(ps->p, kw, k))
    return 0;
  ps->p += k;
  return 1;
}

/* What is at ps->p, for a message: the next token, cut. */
static const char *token_here(const struct parser *ps, char *buf, size_t n) {
  if (!*ps->p)
    return "the end";
  size_t len = word_len(ps);
  if (!len)
    len = 1;
  if (len > 40)
    len = 40;
  snprintf(buf, n, "'%.*s'", (int)len, ps->p);
  for (char *c = buf; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f)
      *c = '?';
  return buf;
}

static int bad(const struct parser *ps, const char *what) {
  char tok[64];
  return gs_fail(GS_EINVAL, "at character %d: %s, got %s", at(ps), what, token_here(ps, tok, sizeof tok));
}

static int new_node(struct parser *ps, int type) {
  struct store_where *w = ps->w;
  if (w->len >= WHERE_MAX_NODES)
    return gs_fail(GS_EINVAL, "at character %d: the filter has more than %d parts", at(ps), WHERE_MAX_NODES);
  if (type == N_CMP && ++w->ncmp > WHERE_MAX_CMPS)
    return gs_fail(GS_EINVAL, "at character %d: the filter has more than %d comparisons", at(ps), WHERE_MAX_CMPS);
  if (w->len == w->cap) {
    int cap = w->cap ? w->cap * 2 : 16;
    struct node *n = realloc(w->n, (size_t)cap * sizeof *n);
    if (!n)
      return gs_fail(GS_ENOMEM, "out of memory");
    w->n = n, w->cap = cap;
  }
  memset(&w->n[w->len], 0, sizeof w->n[w->len]);
  w->n[w->len].type = type;
  w->n[w->len].l = w->n[w->len].r = -1;
  return w->len++;
}

/* A quoted value at ps->p (its quote first) into a malloc'd *out. */
static int quoted(struct parser *ps, char **out) {
  char q = *ps->p;
  const char *start = ps->p++;
  size_t cap = strlen(ps->p) + 1, o = 0;
  char *buf = malloc(cap);
  if (!buf)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (;;) {
    if (!*ps->p) {
      free(buf);
      ps->p = start;
      return gs_fail(GS_EINVAL, "at character %d: the quote %c is never closed", at(ps), q);
    }
    if (*ps->p == q) {
      if (ps->p[1] != q)
        break;
      ps->p++; /* a doubled quote is one quote */
    }
    buf[o++] = *ps->p++;
  }
  ps->p++;
  buf[o] = 0;
  *out = buf;
  return GS_OK;
}

static int parse_op(struct parser *ps, int *op) {
  skip_space(ps);
  static const char *const ops[] = {"<=", ">=", "!=", "=", "<", ">", "~"};
  static const int ids[] = {OP_LE, OP_GE, OP_NE, OP_EQ, OP_LT, OP_GT, OP_SUB};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strncmp(ps->p, ops[i], strlen(ops[i]))) {
      *op = ids[i];
      ps->p += strlen(ops[i]);
      return GS_OK;
    }
  return bad(ps, "expected an operator (= != < <= > >= ~)");
}

/* The value after an operator into node k. */
static int parse_value(struct parser *ps, int k) {
  skip_space(ps);
  struct node *n = &ps->w->n[k];
  if (*ps->p == '\'' || *ps->p == '"')
    return quoted(ps, &n->lit);
  size_t len = word_len(ps);
  if (!len)
    return bad(ps, "expected a value (a word, a number or 'quoted text')");
  if (!(n->lit = strndup(ps->p, len)))
    return gs_fail(GS_ENOMEM, "out of memory");
  ps->p += len;
  n->lit_num = store_where_number(n->lit, &n->num);
  return GS_OK;
}

/* Refuses what a column cannot be compared with. */
static int check_cmp(struct parser *ps, const struct node *n, int at_op) {
  if (n->f.kind == STORE_FIELD_NUM && n->op == OP_SUB)
    return gs_fail(GS_EINVAL, "at character %d: column '%s' is a number; ~ wants a text column", at_op, n->f.name);
  if (n->f.kind == STORE_FIELD_NUM && !n->lit_num) {
    char lit[48]; /* the value, cut, its control characters shown as '?': the message goes to a terminal */
    snprintf(lit, sizeof lit, "%s", n->lit);
    for (char *c = lit; *c; c++)
      if ((unsigned char)*c < 0x20 || *c == 0x7f)
        *c = '?';
    return gs_fail(GS_EINVAL, "at character %d: column '%s' is a number and '%s' is not one", at_op, n->f.name, lit);
  }
  (void)ps;
  return GS_OK;
}

static int parse_cmp(struct parser *ps) {
  skip_space(ps);
  size_t len = word_len(ps);
  if (!len)
    return bad(ps, "expected a column (name, param.KEY, tag.KEY, samples_per_s, ...)");
  char name[200];
  if (len >= sizeof name)
    return gs_fail(GS_EINVAL, "at character %d: column name too long", at(ps));
  memcpy(name, ps->p, len);
  name[len] = 0;
  int k = new_node(ps, N_CMP);
  if (k < 0)
    return k;
  struct store_field f;
  if (store_field_lookup(name, &f)) {
    char why[512];
    snprintf(why, sizeof why, "%s", gs_last_error());
    return gs_fail(GS_EINVAL, "at character %d: %s", at(ps), why);
  }
  ps->p += len;
  int op = OP_EQ, rc = parse_op(ps, &op);
  if (rc)
    return rc;
  int at_op = at(ps);
  if ((rc = parse_value(ps, k)))
    return rc;
  struct node *n = &ps->w->n[k];
  n->f = f;
  n->op = op;
  if ((rc = check_cmp(ps, n, at_op)))
    return rc;
  return k;
}

static int parse_or(struct parser *ps);

static int parse_unary(struct parser *ps) {
  if (++ps->depth > WHERE_MAX_DEPTH)
    return gs_fail(GS_EINVAL, "at character %d: nested more than %d deep", at(ps), WHERE_MAX_DEPTH);
  int k;
  skip_space(ps);
  if (keyword(ps, "not")) {
    int c = parse_unary(ps);
    if (c < 0)
      return c;
    if ((k = new_node(ps, N_NOT)) < 0)
      return k;
    ps->w->n[k].l = c;
  } else if (*ps->p == '(') {
    ps->p++;
    if ((k = parse_or(ps)) < 0)
      return k;
    skip_space(ps);
    if (*ps->p != ')')
      return bad(ps, "expected ')'");
    ps->p++;
  } else {
    k = parse_cmp(ps);
  }
  ps->depth--;
  return k;
}

/* A chain of `sub (kw sub)*` as nodes of type. */
static int parse_chain(struct parser *ps, const char *kw, int type, int (*sub)(struct parser *)) {
  int l = sub(ps);
  while (l >= 0 && keyword(ps, kw)) {
    int r = sub(ps);
    if (r < 0)
      return r;
    int k = new_node(ps, type);
    if (k < 0)
      return k;
    ps->w->n[k].l = l, ps->w->n[k].r = r;
    l = k;
  }
  return l;
}

static int parse_and(struct parser *ps) {
  return parse_chain(ps, "and", N_AND, parse_unary);
}

static int parse_or(struct parser *ps) {
  return parse_chain(ps, "or", N_OR, parse_and);
}

struct store_where *store_where_parse(const char *expr) {
  if (!expr || !*expr) {
    gs_fail(GS_EINVAL, "the filter is empty");
    return NULL;
  }
  if (strlen(expr) > WHERE_MAX_LEN) {
    gs_fail(GS_EINVAL, "the filter is %zu bytes long; at most %d", strlen(expr), WHERE_MAX_LEN);
    return NULL;
  }
  struct store_where *w = calloc(1, sizeof *w);
  if (!w) {
    gs_fail(GS_ENOMEM, "out of memory");
    return NULL;
  }
  struct parser ps = {expr, expr, w, 0};
  int root = parse_or(&ps);
  if (root >= 0) {
    skip_space(&ps);
    if (*ps.p)
      root = bad(&ps, "expected 'and', 'or' or the end");
  }
  if (root < 0) {
    store_where_free(w);
    return NULL;
  }
  w->root = root;
  return w;
}

int store_where_pushed(const struct store_where *w) {
  for (int i = 0; w && i < w->len; i++)
    if (w->n[i].type == N_CMP && !w->n[i].f.pushable)
      return 0;
  return 1;
}

int store_where_needs(const struct store_where *w) {
  int needs = 0;
  for (int i = 0; w && i < w->len; i++)
    if (w->n[i].type == N_CMP)
      needs |= w->n[i].f.needs;
  return needs;
}

/* ---- evaluation in C: 1 true, 0 false, -1 unknown ---- */

enum { T_FALSE = 0, T_TRUE = 1, T_UNKNOWN = -1 };

static int cmp_result(int op, int c) {
  switch (op) {
  case OP_EQ:
    return c == 0;
  case OP_NE:
    return c != 0;
  case OP_LT:
    return c < 0;
  case OP_LE:
    return c <= 0;
  case OP_GT:
    return c > 0;
  default:
    return c >= 0;
  }
}

/* One value against a comparison. */
static int cmp_value(const struct node *n, const char *v) {
  if (n->op == OP_SUB)
    return strstr(v, n->lit) != NULL;
  double x;
  if (n->f.kind == STORE_FIELD_NUM) {
    char *end;
    x = strtod(v, &end);
    if (end == v || *end || !isfinite(x))
      return T_UNKNOWN;
  } else if (n->f.kind == STORE_FIELD_PARAM && n->lit_num) {
    if (!store_where_number(v, &x))
      return T_UNKNOWN;
  } else {
    return cmp_result(n->op, strcmp(v, n->lit));
  }
  return cmp_result(n->op, x < n->num ? -1 : x > n->num);
}

static int eval(const struct store_where *w, int k, store_value_fn fn, void *ctx) {
  const struct node *n = &w->n[k];
  if (n->type == N_NOT) {
    int a = eval(w, n->l, fn, ctx);
    return a == T_UNKNOWN ? a : !a;
  }
  if (n->type == N_AND || n->type == N_OR) {
    int a = eval(w, n->l, fn, ctx), b = eval(w, n->r, fn, ctx);
    int stop = n->type == N_AND ? T_FALSE : T_TRUE;
    if (a == stop || b == stop)
      return stop;
    return a == T_UNKNOWN || b == T_UNKNOWN ? T_UNKNOWN : !stop;
  }
  const char *vals[64];
  size_t nv = fn(ctx, &n->f, vals, sizeof vals / sizeof *vals);
  int r = nv ? T_FALSE : T_UNKNOWN;
  for (size_t i = 0; i < nv; i++) {
    int c = cmp_value(n, vals[i]);
    if (c == T_TRUE)
      return T_TRUE;
    if (c == T_UNKNOWN)
      r = T_UNKNOWN;
  }
  return r;
}

int store_where_match(const struct store_where *w, store_value_fn fn, void *ctx) {
  return !w || eval(w, w->root, fn, ctx) == T_TRUE;
}

/* ---- SQL ---- */

static void put(struct store_sql *q, const char *s) {
  size_t n = strlen(s);
  if (q->oom)
    return;
  if (q->len + n + 1 > q->cap) {
    size_t cap = q->cap ? q->cap : 256;
    while (q->len + n + 1 > cap)
      cap *= 2;
    char *t = realloc(q->text, cap);
    if (!t) {
      q->oom = 1;
      return;
    }
    q->text = t, q->cap = cap;
  }
  memcpy(q->text + q->len, s, n + 1);
  q->len += n;
}

/* Adds a parameter and writes its placeholder, with the dialect's cast ("", "real", "bigint"),
 * into ph. */
static void placeholder(struct store_sql *q, enum store_sql_dialect d, const char *value, const char *cast, char *ph,
                        size_t nph) {
  *ph = 0;
  if (q->oom)
    return;
  if (q->nargs == q->cap_args) {
    int cap = q->cap_args ? q->cap_args * 2 : 8;
    const char **a = realloc(q->args, (size_t)cap * sizeof *a);
    if (!a) {
      q->oom = 1;
      return;
    }
    q->args = a, q->cap_args = cap;
  }
  q->args[q->nargs++] = value;
  if (d == STORE_SQL_PG)
    snprintf(ph, nph, "$%d%s%s", q->nargs, *cast ? "::" : "", !strcmp(cast, "real") ? "double precision" : cast);
  else if (*cast)
    snprintf(ph, nph, "CAST(?%d AS %s)", q->nargs, !strcmp(cast, "real") ? "REAL" : "INTEGER");
  else
    snprintf(ph, nph, "?%d", q->nargs);
}

/* Adds a parameter and writes its placeholder into the text. */
static void arg(struct store_sql *q, enum store_sql_dialect d, const char *value, const char *cast) {
  char ph[64];
  placeholder(q, d, value, cast, ph, sizeof ph);
  put(q, ph);
}

/* The SQL of a number column's value (NULL when unknown). */
static const char *num_sql(int id, enum store_sql_dialect d) {
  int pg = d == STORE_SQL_PG;
  switch (id) {
  case F_START:
    return pg ? "(start_wall_ns::double precision / 1e9)" : "(start_wall_ns / 1e9)";
  case F_DURATION:
    return pg ? "(CASE WHEN end_wall_ns > 0 THEN (end_wall_ns - start_wall_ns)::double precision / 1e9 END)"
              : "(CASE WHEN end_wall_ns > 0 THEN (end_wall_ns - start_wall_ns) / 1e9 END)";
  default:
    return "(CASE WHEN exit_code >= 0 THEN exit_code END)";
  }
}

#define PG_NUMBER_RE "'^[-+]?([0-9]{1,30}([.][0-9]{0,30})?|[.][0-9]{1,30})([eE][-+]?[0-9]{1,2})?$'"

/* `x OP value` for the text (or number, num) x, with value as a parameter. */
static void cmp_sql(struct store_sql *q, enum store_sql_dialect d, const struct node *n, const char *x, int num) {
  int pg = d == STORE_SQL_PG;
  if (n->op == OP_SUB) {
    put(q, pg ? "strpos(" : "instr(");
    put(q, x);
    put(q, ", ");
    arg(q, d, n->lit, "");
    put(q, ") > 0");
    return;
  }
  if (num && n->f.kind == STORE_FIELD_PARAM) { /* a param's text that reads as a number, else NULL */
    if (pg) {
      put(q, "(CASE WHEN ");
      put(q, x);
      put(q, " ~ " PG_NUMBER_RE " THEN (");
      put(q, x);
      put(q, ")::double precision END)");
    } else {
      put(q, "gs_num(");
      put(q, x);
      put(q, ")");
    }
  } else {
    put(q, x);
    if (pg && !num)
      put(q, " COLLATE \"C\"");
  }
  put(q, " ");
  put(q, OP_TEXT[n->op] /* a constant of this file */);
  put(q, " ");
  arg(q, d, n->lit, num ? "real" : "");
}

static void leaf_sql(struct store_sql *q, enum store_sql_dialect d, const struct node *n) {
  const struct field_def *def = NULL;
  for (size_t i = 0; i < N_FIELDS; i++)
    if (FIELDS[i].id == n->f.id)
      def = &FIELDS[i];
  if (n->f.kind == STORE_FIELD_NUM) {
    cmp_sql(q, d, n, num_sql(n->f.id, d), 1);
  } else if (n->f.kind == STORE_FIELD_TEXT && def && def->column) {
    char col[64];
    snprintf(col, sizeof col, "coalesce(%s, '')", def->column); /* C reads a NULL as "" */
    cmp_sql(q, d, n, col, 0);
  } else if (n->f.kind == STORE_FIELD_PARAM) {
    /* the value, or NULL when the run has no such param: a scalar subquery keeps three-valued logic
     * (an EXISTS would make `not param.x = 1` true for a run without x) */
    char ph[64], x[160];
    placeholder(q, d, n->f.key, "", ph, sizeof ph);
    snprintf(x, sizeof x, "(SELECT p.value FROM params p WHERE p.run_id = runs.id AND p.key = %s)", ph);
    cmp_sql(q, d, n, x, n->lit_num && n->op != OP_SUB);
  } else { /* every GPU's name: NULL when the run has none */
    const char *key = d == STORE_SQL_PG ? "p.key ~ '^gpu[.][0-9]+[.]name$'" : "p.key GLOB 'gpu.[0-9]*.name'";
    put(q, "(CASE WHEN EXISTS(SELECT 1 FROM params p WHERE p.run_id = runs.id AND ");
    put(q, key);
    put(q, ") THEN EXISTS(SELECT 1 FROM params p WHERE p.run_id = runs.id AND ");
    put(q, key);
    put(q, " AND ");
    cmp_sql(q, d, n, "p.value", 0);
    put(q, ") END)");
  }
}

/* Whether the subtree at k is pushable whole. */
static int pushable(const struct store_where *w, int k) {
  const struct node *n = &w->n[k];
  if (n->type == N_CMP)
    return n->f.pushable;
  return pushable(w, n->l) && (n->r < 0 || pushable(w, n->r));
}

static int node_sql(struct store_sql *q, enum store_sql_dialect d, const struct store_where *w, int k);

/* Writes the parts of the chain of and (or or) nodes at k — a chain flattened, so that a long
 * `a or b or c ...` nests no deeper in the SQL than in the filter (SQLite's parser has a small
 * stack) — each in parentheses, joined by sep; counts the parts written in *parts. A part SQL
 * cannot decide is left out (only and-chains have such parts: an or is pushed whole or not). */
static void chain_sql(struct store_sql *q, enum store_sql_dialect d, const struct store_where *w, int k, int type,
                      const char *sep, int *parts) {
  const struct node *n = &w->n[k];
  if (n->type == type) {
    chain_sql(q, d, w, n->l, type, sep, parts);
    chain_sql(q, d, w, n->r, type, sep, parts);
    return;
  }
  size_t mark = q->len;
  /* a comparison or a NOT (...) binds tighter than AND and OR: only a chain of the other kind
   * needs parentheses (each level of them costs SQLite's parser stack) */
  int paren = n->type == N_AND || n->type == N_OR;
  if (*parts)
    put(q, sep);
  if (paren)
    put(q, "(");
  if (node_sql(q, d, w, k)) {
    if (paren)
      put(q, ")");
    ++*parts;
  } else if (!q->oom) {
    q->len = mark;
    q->text[mark] = 0;
  }
}

/* Writes the SQL of subtree k, as much of it as SQL decides (a superset); returns 0 when nothing
 * was written (no condition). */
static int node_sql(struct store_sql *q, enum store_sql_dialect d, const struct store_where *w, int k) {
  const struct node *n = &w->n[k];
  if (n->type == N_CMP) {
    if (!n->f.pushable)
      return 0;
    leaf_sql(q, d, n);
    return 1;
  }
  if (n->type == N_NOT && w->n[n->l].type == N_NOT) /* not not x is x, unknown included: no nesting */
    return node_sql(q, d, w, w->n[n->l].l);
  if (n->type == N_NOT) {
    if (!pushable(w, k))
      return 0;
    put(q, "NOT (");
    node_sql(q, d, w, n->l);
    put(q, ")");
    return 1;
  }
  if (n->type == N_OR && !pushable(w, k))
    return 0;
  int parts = 0;
  chain_sql(q, d, w, k, n->type, n->type == N_OR ? " OR " : " AND ", &parts);
  return parts > 0;
}

int store_query_sql(const struct store_query *q, enum store_sql_dialect d, struct store_sql *sql) {
  memset(sql, 0, sizeof *sql);
  put(sql, "");
  int any = 0;
  if (q && q->since_wall_ns > 0) {
    snprintf(sql->since, sizeof sql->since, "%lld", (long long)q->since_wall_ns);
    put(sql, " WHERE start_wall_ns >= ");
    arg(sql, d, sql->since, "bigint");
    any = 1;
  }
  if (q && q->where) {
    size_t mark = sql->len;
    put(sql, any ? " AND (" : " WHERE (");
    if (node_sql(sql, d, q->where, q->where->root))
      put(sql, ")");
    else if (!sql->oom) {
      sql->len = mark;
      sql->text[mark] = 0;
    }
  }
  if (sql->oom) {
    store_sql_done(sql);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  return GS_OK;
}

void store_sql_done(struct store_sql *sql) {
  free(sql->text);
  free(sql->args);
  memset(sql, 0, sizeof *sql);
}
