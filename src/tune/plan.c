/* tune/plan: the tune's parameters — parsing `--param name=v1,v2`, checking the command's {name}
 * placeholders against them before anything runs, filling a configuration into the command. The
 * noise model ranking uses (the ratio estimator's confidence, ties) is core's (core/stats.c), which
 * `gpuscope check` shares. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tune/tune.h"

static int valid_name(const char *s, size_t n) {
  if (!n || n >= TUNE_MAX_NAME || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
      return 0;
  return 1;
}

static int find_param(const struct tune_opts *o, const char *s, size_t n) {
  for (int i = 0; i < o->nparams; i++)
    if (strlen(o->params[i].name) == n && !memcmp(o->params[i].name, s, n))
      return i;
  return -1;
}

int tune_param_add(struct tune_opts *o, const char *spec) {
  const char *eq = strchr(spec, '=');
  if (!eq || !valid_name(spec, (size_t)(eq - spec)))
    return gs_fail(GS_EINVAL, "--param wants NAME=V1,V2,... with NAME of letters, digits and _, got '%s'", spec);
  if (find_param(o, spec, (size_t)(eq - spec)) >= 0)
    return gs_fail(GS_EINVAL, "--param %.*s given twice", (int)(eq - spec), spec);
  if (o->nparams >= TUNE_MAX_PARAMS)
    return gs_fail(GS_EINVAL, "at most %d --param", TUNE_MAX_PARAMS);
  struct tune_param *p = &o->params[o->nparams];
  memset(p, 0, sizeof *p);
  memcpy(p->name, spec, (size_t)(eq - spec));
  for (const char *v = eq + 1;;) {
    const char *c = strchr(v, ',');
    size_t n = c ? (size_t)(c - v) : strlen(v);
    if (!n)
      goto bad;
    for (int i = 0; i < p->nvalues; i++)
      if (strlen(p->values[i]) == n && !memcmp(p->values[i], v, n)) {
        gs_fail(GS_EINVAL, "--param %s: value '%.*s' given twice", p->name, (int)n, v);
        goto fail;
      }
    if (p->nvalues >= TUNE_MAX_VALUES) {
      gs_fail(GS_EINVAL, "--param %s: at most %d values", p->name, TUNE_MAX_VALUES);
      goto fail;
    }
    if (!(p->values[p->nvalues] = strndup(v, n))) {
      gs_fail(GS_ENOMEM, "out of memory");
      goto fail;
    }
    p->nvalues++;
    if (!c)
      break;
    v = c + 1;
  }
  o->nparams++;
  return 0;
bad:
  gs_fail(GS_EINVAL, "--param %s: empty value in '%s'", p->name, spec);
fail:
  for (int i = 0; i < p->nvalues; i++)
    free(p->values[i]);
  memset(p, 0, sizeof *p);
  return GS_EINVAL;
}

/* The placeholders tune computes, with --lr-base: {lr} and {warmup} (walk passes them as these). */
#define PH_LR (-2)
#define PH_WARMUP (-3)

/* Walks one argument's placeholders: calls fn for each {name} (param >= 0, or PH_LR / PH_WARMUP; -1
 * for literal text); returns GS_EINVAL on an unclosed brace, a bad name or an unknown parameter. */
typedef void (*piece_fn)(void *user, const char *s, size_t n, int param);

#define PH_NONE (-4)  /* no such placeholder */
#define PH_NEEDS (-5) /* {lr} or {warmup} without --lr-base (message set) */

/* PH_LR or PH_WARMUP for {lr} / {warmup} with --lr-base; without it PH_NEEDS with a message; PH_NONE
 * for any other name. */
static int builtin(const struct tune_opts *o, const char *s, size_t n) {
  int lr = n == 2 && !memcmp(s, "lr", 2), warm = n == 6 && !memcmp(s, "warmup", 6);
  if (!lr && !warm)
    return PH_NONE;
  if (!(o->lr_base > 0))
    return gs_fail(GS_EINVAL, "{%.*s} is computed from --lr-base RATE@BATCH: give it", (int)n, s), PH_NEEDS;
  return lr ? PH_LR : PH_WARMUP;
}

static int walk(const struct tune_opts *o, const char *arg, piece_fn fn, void *user) {
  const char *p = arg;
  while (*p) {
    if ((p[0] == '{' && p[1] == '{') || (p[0] == '}' && p[1] == '}')) {
      fn(user, p, 1, -1);
      p += 2;
    } else if (*p == '{') {
      const char *e = strchr(p + 1, '}');
      if (!e)
        return gs_fail(GS_EINVAL, "unclosed '{' in argument '%s' (write {{ for a literal brace)", arg);
      int i = find_param(o, p + 1, (size_t)(e - p - 1));
      if (i < 0)
        i = builtin(o, p + 1, (size_t)(e - p - 1));
      if (i == PH_NEEDS)
        return GS_EINVAL;
      if (i == PH_NONE)
        return gs_fail(GS_EINVAL, "unknown placeholder {%.*s} in '%s' (no --param %.*s)", (int)(e - p - 1), p + 1, arg,
                       (int)(e - p - 1), p + 1);
      fn(user, NULL, 0, i);
      p = e + 1;
    } else if (*p == '}') {
      return gs_fail(GS_EINVAL, "unmatched '}' in argument '%s' (write }} for a literal brace)", arg);
    } else {
      size_t n = strcspn(p, "{}");
      fn(user, p, n, -1);
      p += n;
    }
  }
  return 0;
}

/* user: TUNE_MAX_PARAMS flags, then {lr}'s and {warmup}'s. */
/* --lr-base's needs: a command that uses {lr}, no --param of that name, a batch to scale by. */
static int lr_check(const struct tune_opts *o, int lr_used) {
  if (!(o->lr_base > 0))
    return 0;
  if (find_param(o, "lr", 2) >= 0 || find_param(o, "warmup", 6) >= 0)
    return gs_fail(GS_EINVAL, "--lr-base computes {lr} and {warmup}: no --param may be named lr or warmup");
  if (!lr_used)
    return gs_fail(GS_EINVAL, "--lr-base is given but the command has no {lr}");
  if (o->lr_rule != TUNE_LR_NONE && tune_batch_param(o) < 0)
    return gs_fail(GS_EINVAL, "--lr-rule scales by the batch: no --param is a batch size (batch, bs, ...batch_size)");
  return 0;
}

static void mark_used(void *user, const char *s, size_t n, int param) {
  (void)s, (void)n;
  if (param >= 0)
    ((int *)user)[param] = 1;
  else if (param == PH_LR || param == PH_WARMUP)
    ((int *)user)[TUNE_MAX_PARAMS + (param == PH_WARMUP)] = 1;
}

int tune_validate(const struct tune_opts *o) {
  if (!o->nparams)
    return gs_fail(GS_EINVAL, "no --param given: nothing to tune");
  int used[TUNE_MAX_PARAMS + 2] = {0};
  for (int a = 0; o->argv[a]; a++) {
    int rc = walk(o, o->argv[a], mark_used, used);
    if (rc)
      return rc;
  }
  int rc = lr_check(o, used[TUNE_MAX_PARAMS]);
  if (rc)
    return rc;
  double total = 1;
  for (int i = 0; i < o->nparams; i++) {
    if (!used[i])
      return gs_fail(GS_EINVAL, "--param %s is not used: the command has no {%s}", o->params[i].name,
                     o->params[i].name);
    total *= o->params[i].nvalues;
  }
  if (total > TUNE_MAX_CONFIGS)
    return gs_fail(GS_EINVAL, "%.0f configurations is too many (at most %d): fewer values, or fewer --param", total,
                   TUNE_MAX_CONFIGS);
  return 0;
}

struct fill {
  const struct tune_opts *o;
  const int *config;
  char *buf;
  size_t len, cap;
  int oom;
};

static void put(void *user, const char *s, size_t n, int param) {
  struct fill *f = user;
  char num[48];
  if (param >= 0) {
    s = f->o->params[param].values[f->config[param]];
    n = strlen(s);
  } else if (param == PH_LR || param == PH_WARMUP) {
    double lr;
    long warm;
    tune_lr_for(f->o, f->config, &lr, &warm);
    if (param == PH_LR)
      snprintf(num, sizeof num, "%.6g", lr);
    else
      snprintf(num, sizeof num, "%ld", warm);
    s = num, n = strlen(num);
  }
  if (f->len + n + 1 > f->cap) {
    size_t cap = (f->len + n + 1) * 2;
    char *b = realloc(f->buf, cap);
    if (!b) {
      f->oom = 1;
      return;
    }
    f->buf = b, f->cap = cap;
  }
  memcpy(f->buf + f->len, s, n);
  f->len += n;
  f->buf[f->len] = 0;
}

char **tune_substitute(const struct tune_opts *o, const int *config) {
  size_t n = 0;
  while (o->argv[n])
    n++;
  char **out = calloc(n + 1, sizeof *out);
  if (!out)
    return NULL;
  for (size_t a = 0; a < n; a++) {
    struct fill f = {.o = o, .config = config};
    put(&f, "", 0, -1);
    if (walk(o, o->argv[a], put, &f) || f.oom) {
      free(f.buf);
      tune_argv_free(out);
      return NULL;
    }
    out[a] = f.buf;
  }
  return out;
}

void tune_argv_free(char **argv) {
  if (!argv)
    return;
  for (size_t i = 0; argv[i]; i++)
    free(argv[i]);
  free(argv);
}

int tune_batch_param(const struct tune_opts *o) {
  for (int i = 0; i < o->nparams; i++) {
    const char *n = o->params[i].name;
    size_t l = strlen(n);
    if (!strcmp(n, "batch") || !strcmp(n, "bs") || (l >= 10 && !strcmp(n + l - 10, "batch_size")))
      return i;
  }
  return -1;
}

void tune_lr_for(const struct tune_opts *o, const int *config, double *lr, long *warmup) {
  *lr = NAN, *warmup = -1;
  if (!(o->lr_base > 0))
    return;
  *lr = o->lr_base, *warmup = 0;
  int b = tune_batch_param(o);
  if (b < 0 || o->lr_rule == TUNE_LR_NONE || !(o->lr_batch > 0))
    return;
  char *end;
  double batch = strtod(o->params[b].values[config[b]], &end);
  if (*end || !(batch > 0))
    return; /* a batch that is not a number: the base rate, as said in docs/tune.md */
  double k = batch / o->lr_batch;
  *lr = o->lr_base * (o->lr_rule == TUNE_LR_SQRT ? sqrt(k) : k);
  if (k > 1 && o->lr_warmup > 0)
    *warmup = (long)ceil(o->lr_warmup / batch);
}

void tune_opts_done(struct tune_opts *o) {
  for (int i = 0; i < o->nparams; i++)
    for (int v = 0; v < o->params[i].nvalues; v++)
      free(o->params[i].values[v]);
  o->nparams = 0;
}

const char *tune_verdict_name(enum tune_verdict v) {
  static const char *names[] = {"", "baseline", "same", "better", "worse", "unknown"};
  return (unsigned)v < sizeof names / sizeof *names ? names[v] : "?";
}

const char *tune_status_name(enum tune_status s) {
  static const char *names[] = {"pending", "ok", "oom", "failed", "skipped", "interrupted", "not_run"};
  return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}
