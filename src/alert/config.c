/* alert/config: what a run's alerts are — rules as `--alert` writes them, the settings the flags and
 * the XDG file share (alert_config_set), and that file read by libinih (alert_config_load) with each
 * error naming its file and line. Plain data; the engine (engine.c) copies it. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "alert/alert.h"
#include "core/core.h"

void alert_config_init(struct alert_config *c) {
  memset(c, 0, sizeof *c);
  c->every_ns = 5 * GS_NS_PER_S;
  c->timeout_ns = 10 * GS_NS_PER_S;
  c->retries = 3;
  c->queue = 64;
  c->rate_per_min = 30;
}

int alert_config_active(const struct alert_config *c) {
  return c->nrules > 0; /* without a destination the alerts are the run's events alone */
}

int alert_config_default_rules(struct alert_config *c) {
  if (c->nrules || (!c->nhooks && !c->command[0]))
    return 0;
  char err[64];
  alert_rule_parse("exit", &c->rules[c->nrules++], err, sizeof err); /* can't fail: known rules */
  alert_rule_parse("hang", &c->rules[c->nrules++], err, sizeof err);
  alert_rule_parse("job", &c->rules[c->nrules++], err, sizeof err);
  return 1;
}

struct rule_name {
  const char *name;
  enum alert_kind kind;
  char op;          /* '<', '>' or 0 (takes no figure) */
  double threshold; /* default */
  double for_s;     /* default */
};

static const struct rule_name RULES[] = {
    {"gpu_idle", ALERT_GPU_IDLE, '<', 5, 60},
    {"finding", ALERT_FINDING, 0, 0, 0},
    {"hang", ALERT_HANG, 0, 0, 120},
    {"exit", ALERT_EXIT, 0, 0, 0},
    {"throttle", ALERT_THROTTLE, '>', 10, 60},
    {"gpu_mem", ALERT_GPU_MEM, '>', 95, 10},
    {"straggler", ALERT_STRAGGLER, 0, 0, 0},
    {"xid", ALERT_XID, 0, 0, 300},
    {"ecc", ALERT_ECC, 0, 0, 300},
    {"row_remap", ALERT_ROW_REMAP, 0, 0, 0},
    {"nvlink", ALERT_NVLINK, 0, 0, 300},
    {"job", ALERT_JOB, 0, 0, 0},
};

static const char *const SEVERITIES[] = {"info", "low", "medium", "high"};
static const char *const LEVELS[] = {"info", "warn", "error"}; /* W&B's AlertLevel, lower-cased */

/* A plain decimal at v — digits with at most one point, no sign, exponent, hex ("0x10" is not 16),
 * inf or nan — into *out, *end past it. GS_OK, or GS_EINVAL when v does not start with one. */
static int decimal(const char *v, double *out, const char **end) {
  size_t k = strspn(v, "0123456789."), dots = 0;
  for (size_t i = 0; i < k; i++)
    dots += v[i] == '.';
  if (!k || dots > 1 || (k == 1 && v[0] == '.'))
    return GS_EINVAL;
  if (v[k] && strchr("xXeEpP", v[k]) && isalnum((unsigned char)v[k + 1]))
    return GS_EINVAL; /* 0x10, 1e3, 0x1p4: a figure written otherwise than a person reads it */
  char *e;
  *out = strtod(v, &e);
  if (e != v + k)
    return GS_EINVAL;
  *end = v + k;
  return GS_OK;
}

static int rule_option(struct alert_rule *r, const char *kv, char *err, size_t errlen) {
  const char *eq = strchr(kv, '=');
  size_t klen = eq ? (size_t)(eq - kv) : strlen(kv);
  const char *v = eq ? eq + 1 : "";
  if (!eq || !*v)
    return snprintf(err, errlen, "alert '%s': '%s' is not KEY=VALUE", r->spec, kv), GS_EINVAL;
  if (klen == 3 && !strncmp(kv, "for", 3)) {
    if (r->kind == ALERT_EXIT || r->kind == ALERT_JOB || gs_parse_duration(v, &r->for_ns) || r->for_ns < 0)
      return snprintf(err, errlen, "alert '%s': for= wants a duration such as 30s or 2m%s", r->spec,
                      r->kind == ALERT_EXIT || r->kind == ALERT_JOB ? " (and this rule takes none)" : ""),
             GS_EINVAL;
  } else if (klen == 5 && !strncmp(kv, "level", 5) && r->kind == ALERT_JOB) {
    r->severity = -1;
    for (int i = 0; i < 3; i++)
      if (!strcasecmp(v, LEVELS[i]))
        r->severity = i;
    if (r->severity < 0)
      return snprintf(err, errlen, "alert '%s': level= is info, warn or error", r->spec), GS_EINVAL;
  } else if (klen == 4 && !strncmp(kv, "gain", 4) && (r->kind == ALERT_FINDING || r->kind == ALERT_STRAGGLER)) {
    const char *end;
    if (decimal(v, &r->gain, &end) || (*end && strcmp(end, "x")) || !isfinite(r->gain) || r->gain < 1)
      return snprintf(err, errlen, "alert '%s': gain= wants a speed-up of at least 1, such as 1.2", r->spec), GS_EINVAL;
  } else if (klen == 4 && !strncmp(kv, "rate", 4) && r->kind == ALERT_ECC) {
    const char *end;
    if (decimal(v, &r->rate, &end) || (*end && strcmp(end, "/min")) || !isfinite(r->rate) || r->rate <= 0)
      return snprintf(err, errlen, "alert '%s': rate= wants corrected errors per minute, such as 10", r->spec),
             GS_EINVAL;
  } else if (klen == 8 && !strncmp(kv, "severity", 8) && (r->kind == ALERT_FINDING || r->kind == ALERT_STRAGGLER)) {
    r->severity = -1;
    for (int i = 0; i < 4; i++)
      if (!strcmp(v, SEVERITIES[i]))
        r->severity = i;
    if (r->severity < 0)
      return snprintf(err, errlen, "alert '%s': severity= is info, low, medium or high", r->spec), GS_EINVAL;
  } else {
    return snprintf(err, errlen, "alert '%s': unknown option '%.*s'", r->spec, (int)klen, kv), GS_EINVAL;
  }
  return GS_OK;
}

/* The figure after the rule's name: "<10%" or ">95" (a percentage either way). */
static int rule_figure(struct alert_rule *r, const struct rule_name *rn, const char *p, const char **rest, char *err,
                       size_t errlen) {
  if (*p != '<' && *p != '>') {
    *rest = p;
    return GS_OK;
  }
  const char *end;
  if (!rn->op || *p != rn->op)
    return snprintf(err, errlen, "alert '%s': %s %s", r->spec, rn->name,
                    rn->op ? (rn->op == '<' ? "takes '<' (below)" : "takes '>' (above)") : "takes no figure"),
           GS_EINVAL;
  if (decimal(p + 1, &r->threshold, &end) || !isfinite(r->threshold) || r->threshold < 0 || r->threshold > 100)
    return snprintf(err, errlen, "alert '%s': the figure after %c is a percentage 0..100", r->spec, *p), GS_EINVAL;
  /* below 0 % or above 100 % is never true: a rule that can never fire is a mistake, not a rule */
  if ((*p == '<' && r->threshold <= 0) || (*p == '>' && r->threshold >= 100))
    return snprintf(err, errlen, "alert '%s': %s%c%g can never fire (a share is never %s %g %%)", r->spec, rn->name, *p,
                    r->threshold, *p == '<' ? "below" : "above", r->threshold),
           GS_EINVAL;
  if (*end == '%')
    end++;
  *rest = end;
  return GS_OK;
}

int alert_rule_parse(const char *spec, struct alert_rule *r, char *err, size_t errlen) {
  memset(r, 0, sizeof *r);
  if (strlen(spec) >= sizeof r->spec)
    return snprintf(err, errlen, "alert rule of %zu bytes: at most %zu", strlen(spec), sizeof r->spec - 1), GS_EINVAL;
  snprintf(r->spec, sizeof r->spec, "%s", spec);
  size_t nlen = strcspn(spec, "<>:");
  const struct rule_name *rn = NULL;
  for (size_t i = 0; i < sizeof RULES / sizeof *RULES; i++)
    if (strlen(RULES[i].name) == nlen && !strncmp(spec, RULES[i].name, nlen))
      rn = &RULES[i];
  if (!rn)
    return snprintf(err, errlen,
                    "alert '%s': unknown rule (gpu_idle, finding, hang, exit, throttle, gpu_mem, straggler, xid, ecc, "
                    "row_remap, nvlink)",
                    spec),
           GS_EINVAL;
  r->kind = rn->kind;
  r->threshold = rn->threshold;
  r->for_ns = (int64_t)(rn->for_s * GS_NS_PER_S);
  r->gain = r->kind == ALERT_FINDING ? 1.1 : 1.0;
  const char *p;
  if (rule_figure(r, rn, spec + nlen, &p, err, errlen))
    return GS_EINVAL;
  if (*p && *p != ':')
    return snprintf(err, errlen, "alert '%s': unexpected '%s'", spec, p), GS_EINVAL;
  if (*p == ':') {
    char opts[128];
    snprintf(opts, sizeof opts, "%s", p + 1);
    for (char *save = NULL, *kv = strtok_r(opts, ",", &save); kv; kv = strtok_r(NULL, ",", &save))
      if (rule_option(r, kv, err, errlen))
        return GS_EINVAL;
  }
  return GS_OK;
}

static int set_duration(int64_t *out, const char *key, const char *v, int64_t lo, int64_t hi, char *err,
                        size_t errlen) {
  int64_t ns;
  if (gs_parse_duration(v, &ns) || ns < lo || ns > hi)
    return snprintf(err, errlen, "%s wants a duration from %g s to %g s, not '%s'", key, (double)lo / GS_NS_PER_S,
                    (double)hi / GS_NS_PER_S, v),
           GS_EINVAL;
  *out = ns;
  return GS_OK;
}

static int set_count(int *out, const char *key, const char *v, long lo, long hi, char *err, size_t errlen) {
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  if (end == v || *end || errno || n < lo || n > hi)
    return snprintf(err, errlen, "%s wants a whole number from %ld to %ld, not '%s'", key, lo, hi, v), GS_EINVAL;
  *out = (int)n;
  return GS_OK;
}

static int add_hook(struct alert_config *c, const char *url, int slack, char *err, size_t errlen) {
  if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8))
    return snprintf(err, errlen, "a webhook is an http:// or https:// URL, not '%s'", url), GS_EINVAL;
  const char *host = strstr(url, "://") + 3;
  size_t hn = strcspn(host, "/?#");
  const char *at = memchr(host, '@', hn); /* user:password@host */
  if (at)
    hn -= (size_t)(at + 1 - host), host = at + 1;
  if (!hn || host[0] == ':')
    return snprintf(err, errlen, "the webhook '%s' names no host (http://HOST[:PORT]/PATH)", url), GS_EINVAL;
  for (const char *q = url; *q; q++)
    if ((unsigned char)*q <= ' ' || *q == 0x7f)
      return snprintf(err, errlen, "the webhook '%s' holds a space or a control character", url), GS_EINVAL;
  if (c->nhooks >= ALERT_MAX_HOOKS || strlen(url) >= sizeof c->hooks[0])
    return snprintf(err, errlen, "at most %d webhooks of %zu bytes each", ALERT_MAX_HOOKS, sizeof c->hooks[0] - 1),
           GS_EINVAL;
  snprintf(c->hooks[c->nhooks], sizeof c->hooks[0], "%s", url);
  c->hook_slack[c->nhooks++] = slack;
  return GS_OK;
}

int alert_config_set(struct alert_config *c, const char *key, const char *v, char *err, size_t errlen) {
  if (!strcmp(key, "rule")) {
    if (c->nrules >= ALERT_MAX_RULES)
      return snprintf(err, errlen, "at most %d alert rules", ALERT_MAX_RULES), GS_EINVAL;
    if (alert_rule_parse(v, &c->rules[c->nrules], err, errlen))
      return GS_EINVAL;
    /* the same rule twice (whatever its spelling: the parsed rule, before its text) sends every alert twice */
    for (size_t i = 0; i < c->nrules; i++)
      if (!memcmp(&c->rules[i], &c->rules[c->nrules], offsetof(struct alert_rule, spec)))
        return snprintf(err, errlen, "alert '%s': the same rule as '%s' given before (each alert would go twice)", v,
                        c->rules[i].spec),
               GS_EINVAL;
    c->nrules++;
    return GS_OK;
  }
  if (!strcmp(key, "webhook") || !strcmp(key, "slack"))
    return add_hook(c, v, key[0] == 's', err, errlen);
  if (!strcmp(key, "command")) {
    if (strlen(v) >= sizeof c->command)
      return snprintf(err, errlen, "command is at most %zu bytes", sizeof c->command - 1), GS_EINVAL;
    snprintf(c->command, sizeof c->command, "%s", v);
    return GS_OK;
  }
  if (!strcmp(key, "every"))
    return set_duration(&c->every_ns, key, v, GS_NS_PER_S / 10, 3600 * GS_NS_PER_S, err, errlen);
  if (!strcmp(key, "timeout"))
    return set_duration(&c->timeout_ns, key, v, GS_NS_PER_S / 10, 300 * GS_NS_PER_S, err, errlen);
  if (!strcmp(key, "retries"))
    return set_count(&c->retries, key, v, 0, 10, err, errlen);
  if (!strcmp(key, "queue"))
    return set_count(&c->queue, key, v, 1, 4096, err, errlen);
  if (!strcmp(key, "rate"))
    return set_count(&c->rate_per_min, key, v, 1, 10000, err, errlen);
  return snprintf(err, errlen,
                  "unknown setting '%s' (rule, webhook, slack, command, every, timeout, retries, queue, rate)", key),
         GS_EINVAL;
}

/* libinih reads through this, so the handler knows the line it is given (the library's own count is
 * returned only for the first error, without what was wrong). */
struct ini_read {
  FILE *f;
  const char *path;
  struct alert_config *c;
  int line, err_line;
  char err[512];
};

static char *ini_reader_fn(char *str, int num, void *stream) {
  struct ini_read *r = stream;
  char *s = fgets(str, num, r->f);
  if (!s)
    return NULL;
  r->line++;
  size_t len = strlen(s);
  if (len == (size_t)num - 1 && s[len - 1] != '\n' && !feof(r->f)) {
    if (!r->err_line)
      r->err_line = r->line, snprintf(r->err, sizeof r->err, "the line is longer than %d bytes", num - 2);
    int ch;
    while ((ch = fgetc(r->f)) != EOF && ch != '\n')
      ; /* the rest of the long line */
  }
  return s;
}

static int ini_handler_fn(void *user, const char *section, const char *name, const char *value) {
  struct ini_read *r = user;
  char err[400] = "";
  if (r->err_line == r->line)
    return 0; /* the line was cut (too long): its value is not what the file says */
  if (!*section)
    snprintf(err, sizeof err, "settings go in the section [alerts] (no section before this line)");
  else if (strcmp(section, "alerts"))
    snprintf(err, sizeof err, "settings go in the section [alerts], not [%s]", section);
  else
    alert_config_set(r->c, name, value, err, sizeof err);
  if (!err[0])
    return 1;
  if (!r->err_line)
    r->err_line = r->line, snprintf(r->err, sizeof r->err, "%s", err);
  return 0;
}

int alert_config_load(struct alert_config *c, const char *path, char *err, size_t errlen) {
  struct ini_read r = {.path = path, .c = c};
  if (!(r.f = fopen(path, "r"))) {
    if (errno == ENOENT)
      return 1;
    return snprintf(err, errlen, "%s: %s", path, strerror(errno)), GS_EIO;
  }
  int line = ini_parse_stream(ini_reader_fn, &r, ini_handler_fn, &r);
  int bad = ferror(r.f);
  fclose(r.f);
  if (bad)
    return snprintf(err, errlen, "%s: cannot be read", path), GS_EIO;
  if (line < 0)
    return snprintf(err, errlen, "%s: out of memory", path), GS_ENOMEM;
  if (!line && !r.err_line)
    return GS_OK;
  if (r.err_line && (!line || r.err_line <= line))
    snprintf(err, errlen, "%s:%d: %s", path, r.err_line, r.err);
  else
    snprintf(err, errlen, "%s:%d: not a 'key = value' line, a [section] or a comment", path, line);
  return GS_EINVAL;
}

const char *alert_config_default_path(char *buf, size_t n) {
  const char *x = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
  int w;
  if (x && *x == '/')
    w = snprintf(buf, n, "%s/gpuscope/alerts.ini", x);
  else if (home && *home)
    w = snprintf(buf, n, "%s/.config/gpuscope/alerts.ini", home);
  else
    return NULL;
  return w > 0 && (size_t)w < n ? buf : NULL;
}
