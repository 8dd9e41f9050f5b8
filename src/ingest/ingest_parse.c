/* ingest/ingest_parse: the gs1 line parser — a pure function from the bytes of one message line to a
 * validated struct ingest_msg, or a reason why the line is bad. It allocates nothing, keeps no state
 * and never reads past the n bytes it is given, so it is fuzzed on its own (tests/fuzz) and the
 * socket side (ingest.c) only routes what it returns. The grammar is the one in docs/protocol.md;
 * every rule there has its check here, in the same order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/ingest.h"

#define MAX_NUMBER 64 /* bytes in a number token */
#define MAX_COUNT 15  /* digits in a count: below 1e15, exact as a double */
#define MAX_T 1e9     /* seconds of CLOCK_MONOTONIC: fits int64 nanoseconds with room */

struct cursor {
  const char *p, *end;
};

static int fail(struct ingest_msg *m, const char *why) {
  m->error = why;
  return GS_EINVAL;
}

static int str_is(struct ingest_str t, const char *lit) {
  size_t n = strlen(lit);
  return t.n == n && !memcmp(t.p, lit, n);
}

static int str_starts(struct ingest_str t, const char *lit) {
  size_t n = strlen(lit);
  return t.n >= n && !memcmp(t.p, lit, n);
}

/* The next token: bytes up to a space or the end of the line (possibly empty). */
static struct ingest_str next_token(struct cursor *c) {
  const char *b = c->p;
  while (c->p < c->end && *c->p != ' ')
    c->p++;
  return (struct ingest_str){b, (size_t)(c->p - b)};
}

/* Consumes the single space before another field; 0 at the end of the line. */
static int more(struct cursor *c) {
  if (c->p >= c->end)
    return 0;
  c->p++; /* next_token stopped on a space */
  return 1;
}

static int is_name_char(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
         ch == '/' || ch == '-';
}

static int valid_name(struct ingest_str t) {
  if (t.n < 1 || t.n > INGEST_MAX_NAME)
    return 0;
  for (size_t i = 0; i < t.n; i++)
    if (!is_name_char((unsigned char)t.p[i]))
      return 0;
  return 1;
}

static int is_digit(char ch) {
  return ch >= '0' && ch <= '9';
}

/* A decimal number: [+-] digits [. digits] [e [+-] digits], at least one digit before the exponent,
 * finite once converted. The syntax is checked here so strtod only converts (no hex, inf, nan). */
static int parse_number(struct ingest_str t, double *out) {
  size_t i = 0, n = t.n, digits = 0;
  if (n == 0 || n > MAX_NUMBER)
    return -1;
  if (t.p[i] == '+' || t.p[i] == '-')
    i++;
  for (; i < n && is_digit(t.p[i]); i++)
    digits++;
  if (i < n && t.p[i] == '.')
    for (i++; i < n && is_digit(t.p[i]); i++)
      digits++;
  if (!digits)
    return -1;
  if (i < n && (t.p[i] == 'e' || t.p[i] == 'E')) {
    i++;
    if (i < n && (t.p[i] == '+' || t.p[i] == '-'))
      i++;
    size_t e0 = i;
    for (; i < n && is_digit(t.p[i]); i++)
      ;
    if (i == e0)
      return -1;
  }
  if (i != n)
    return -1;
  char buf[MAX_NUMBER + 1], *end;
  memcpy(buf, t.p, n);
  buf[n] = 0;
  double v = strtod(buf, &end);
  if (end != buf + n || !isfinite(v)) /* a decimal comma locale would stop strtod early */
    return -1;
  *out = v;
  return 0;
}

/* A count: 1 to 15 decimal digits, no sign. */
static int parse_count(struct ingest_str t, int64_t *out) {
  if (t.n < 1 || t.n > MAX_COUNT)
    return -1;
  int64_t v = 0;
  for (size_t i = 0; i < t.n; i++) {
    if (!is_digit(t.p[i]))
      return -1;
    v = v * 10 + (t.p[i] - '0');
  }
  *out = v;
  return 0;
}

/* Printable UTF-8: no C0 or C1 control characters, no DEL, no overlong forms, no surrogates. */
static int printable_utf8(struct ingest_str t) {
  const unsigned char *s = (const unsigned char *)t.p;
  for (size_t i = 0; i < t.n;) {
    unsigned c = s[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f)
        return 0;
      i++;
      continue;
    }
    size_t len;
    uint32_t cp, min;
    if ((c & 0xe0) == 0xc0)
      len = 2, cp = c & 0x1f, min = 0x80;
    else if ((c & 0xf0) == 0xe0)
      len = 3, cp = c & 0x0f, min = 0x800;
    else if ((c & 0xf8) == 0xf0)
      len = 4, cp = c & 0x07, min = 0x10000;
    else
      return 0;
    if (t.n - i < len)
      return 0;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80)
        return 0;
      cp = cp << 6 | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f)
      return 0;
    i += len;
  }
  return 1;
}

/* "t=SECONDS" with 0 < SECONDS < 1e9. */
static int parse_t(struct ingest_str tok, struct ingest_msg *m) {
  struct ingest_str v = {tok.p + 2, tok.n - 2};
  if (parse_number(v, &m->t) || !(m->t > 0 && m->t < MAX_T))
    return fail(m, "t= is not a time in seconds (0 < t < 1e9)");
  m->has |= INGEST_HAS_T;
  return 0;
}

/* metric NAME VALUE [STEP] [t=T] */
static int parse_metric(struct cursor *c, struct ingest_msg *m) {
  if (!more(c))
    return fail(m, "no metric name");
  m->name = next_token(c);
  if (!valid_name(m->name))
    return fail(m, "bad name (1-128 of A-Z a-z 0-9 _ . / -)");
  if (str_starts(m->name, "step."))
    return fail(m, "metric names starting with 'step.' are reserved for step messages");
  if (!more(c))
    return fail(m, "no value");
  if (parse_number(next_token(c), &m->value))
    return fail(m, "value is not a finite decimal number");
  m->has |= INGEST_HAS_VALUE;
  if (!more(c))
    return 0;
  struct ingest_str tok = next_token(c);
  if (!str_starts(tok, "t=")) {
    if (parse_count(tok, &m->step))
      return fail(m, "step is not a count (0-999999999999999)");
    m->has |= INGEST_HAS_STEP;
    if (!more(c))
      return 0;
    tok = next_token(c);
    if (!str_starts(tok, "t="))
      return fail(m, "unexpected field after the step");
  }
  if (parse_t(tok, m))
    return GS_EINVAL;
  return more(c) ? fail(m, "unexpected field after t=") : 0;
}

/* mark NAME [VALUE] [t=T] */
static int parse_mark(struct cursor *c, struct ingest_msg *m) {
  if (!more(c))
    return fail(m, "no mark name");
  m->name = next_token(c);
  if (!valid_name(m->name))
    return fail(m, "bad name (1-128 of A-Z a-z 0-9 _ . / -)");
  if (!more(c))
    return 0;
  struct ingest_str tok = next_token(c);
  if (!str_starts(tok, "t=")) {
    if (parse_number(tok, &m->value))
      return fail(m, "value is not a finite decimal number");
    m->has |= INGEST_HAS_VALUE;
    if (!more(c))
      return 0;
    tok = next_token(c);
    if (!str_starts(tok, "t="))
      return fail(m, "unexpected field after the value");
  }
  if (parse_t(tok, m))
    return GS_EINVAL;
  return more(c) ? fail(m, "unexpected field after t=") : 0;
}

/* param KEY [SP TEXT] — TEXT is the rest of the line. */
static int parse_param(struct cursor *c, struct ingest_msg *m) {
  if (!more(c))
    return fail(m, "no param key");
  m->name = next_token(c);
  if (!valid_name(m->name))
    return fail(m, "bad key (1-128 of A-Z a-z 0-9 _ . / -)");
  if (str_starts(m->name, "ingest."))
    return fail(m, "param keys starting with 'ingest.' are reserved for the agent");
  m->text = (struct ingest_str){c->p, 0};
  if (more(c))
    m->text = (struct ingest_str){c->p, (size_t)(c->end - c->p)};
  if (m->text.n > INGEST_MAX_TEXT)
    return fail(m, "value longer than 1024 bytes");
  if (!printable_utf8(m->text))
    return fail(m, "value is not printable UTF-8");
  return 0;
}

/* Sets a fixed step field once; -1 when it was already set. */
static int set_once(struct ingest_msg *m, unsigned bit) {
  if (m->has & bit)
    return -1;
  m->has |= bit;
  return 0;
}

/* step N *(SP KEY=VALUE) */
static int parse_step(struct cursor *c, struct ingest_msg *m) {
  if (!more(c))
    return fail(m, "no step number");
  if (parse_count(next_token(c), &m->step))
    return fail(m, "step number is not a count (0-999999999999999)");
  m->has |= INGEST_HAS_STEP;
  while (more(c)) {
    struct ingest_str tok = next_token(c);
    const char *eq = memchr(tok.p, '=', tok.n);
    if (!eq)
      return fail(m, "step field is not KEY=VALUE");
    struct ingest_str key = {tok.p, (size_t)(eq - tok.p)}, val = {eq + 1, (size_t)(tok.p + tok.n - eq - 1)};
    if (!valid_name(key))
      return fail(m, "bad step field name (1-128 of A-Z a-z 0-9 _ . / -)");
    if (str_is(key, "samples")) {
      if (set_once(m, INGEST_HAS_SAMPLES))
        return fail(m, "step field given twice");
      if (parse_count(val, &m->samples))
        return fail(m, "samples is not a count (0-999999999999999)");
      continue;
    }
    if (str_is(key, "t")) {
      if (m->has & INGEST_HAS_T)
        return fail(m, "step field given twice");
      if (parse_t(tok, m))
        return GS_EINVAL;
      continue;
    }
    if (str_is(key, "rank")) {
      if (set_once(m, INGEST_HAS_RANK))
        return fail(m, "step field given twice");
      if (parse_count(val, &m->rank) || m->rank > INGEST_MAX_RANK)
        return fail(m, "rank is not a count (0-65535)");
      continue;
    }
    if (str_is(key, "total") || str_is(key, "n"))
      return fail(m, "step field name is reserved (total, n)");
    double s;
    if (parse_number(val, &s) || !(s >= 0))
      return fail(m, "phase duration is not a finite number of seconds >= 0");
    if (str_is(key, "data") || str_is(key, "h2d") || str_is(key, "compute")) {
      unsigned bit = key.p[0] == 'd' ? INGEST_HAS_DATA : key.p[0] == 'h' ? INGEST_HAS_H2D : INGEST_HAS_COMPUTE;
      if (set_once(m, bit))
        return fail(m, "step field given twice");
      *(bit == INGEST_HAS_DATA ? &m->data_s : bit == INGEST_HAS_H2D ? &m->h2d_s : &m->compute_s) = s;
      continue;
    }
    for (size_t i = 0; i < m->n_phases; i++)
      if (m->phases[i].name.n == key.n && !memcmp(m->phases[i].name.p, key.p, key.n))
        return fail(m, "step field given twice");
    if (m->n_phases == INGEST_MAX_PHASES)
      return fail(m, "more than 16 named phases in one step");
    m->phases[m->n_phases++] = (struct ingest_phase){key, s};
  }
  return 0;
}

/* The count N >= 1 that ends a dropped or rejected message; bad: why, when it is not one. */
static int parse_delta(struct cursor *c, struct ingest_msg *m, const char *bad) {
  if (!more(c))
    return fail(m, "no count");
  if (parse_count(next_token(c), &m->step) || m->step < 1)
    return fail(m, bad);
  m->has |= INGEST_HAS_STEP;
  return more(c) ? fail(m, "unexpected field after the count") : 0;
}

/* dropped N — N >= 1 messages the client could not send since its last dropped message */
static int parse_dropped(struct cursor *c, struct ingest_msg *m) {
  return parse_delta(c, m, "dropped count is not a count (1-999999999999999)");
}

/* rejected CAUSE N — N >= 1 values the client refused for CAUSE since its last rejected message */
static int parse_rejected(struct cursor *c, struct ingest_msg *m) {
  if (!more(c))
    return fail(m, "no cause");
  struct ingest_str w = next_token(c);
  int k = 0;
  while (k < INGEST_NCAUSES && !str_is(w, ingest_cause_name((enum ingest_cause)k)))
    k++;
  if (k == INGEST_NCAUSES)
    return fail(m, "unknown cause (value, name, step, argument)");
  m->cause = (enum ingest_cause)k;
  return parse_delta(c, m, "rejected count is not a count (1-999999999999999)");
}

int ingest_parse_line(const char *s, size_t n, struct ingest_msg *m) {
  memset(m, 0, sizeof *m);
  m->kind = INGEST_OTHER;
  struct cursor c = {s, s + n};
  struct ingest_str v = next_token(&c);
  if (!str_is(v, "gs1"))
    return fail(m, str_starts(v, "gs") ? "unsupported protocol version (this agent speaks gs1)" : "not a gs1 message");
  if (!more(&c))
    return fail(m, "no message kind");
  struct ingest_str k = next_token(&c);
  if (str_is(k, "metric")) {
    m->kind = INGEST_METRIC;
    return parse_metric(&c, m);
  }
  if (str_is(k, "step")) {
    m->kind = INGEST_STEP;
    return parse_step(&c, m);
  }
  if (str_is(k, "param")) {
    m->kind = INGEST_PARAM;
    return parse_param(&c, m);
  }
  if (str_is(k, "mark")) {
    m->kind = INGEST_MARK;
    return parse_mark(&c, m);
  }
  if (str_is(k, "dropped")) {
    m->kind = INGEST_DROPPED;
    return parse_dropped(&c, m);
  }
  if (str_is(k, "rejected")) {
    m->kind = INGEST_REJECTED;
    return parse_rejected(&c, m);
  }
  return fail(m, "unknown message kind");
}

const char *ingest_kind_name(enum ingest_kind k) {
  static const char *const names[] = {"other", "metric", "param", "step", "mark", "dropped", "rejected"};
  return k >= INGEST_OTHER && k < INGEST_NKINDS ? names[k] : "other";
}

const char *ingest_cause_name(enum ingest_cause c) {
  static const char *const names[] = {"value", "name", "step", "argument"};
  return c >= INGEST_CAUSE_VALUE && c < INGEST_NCAUSES ? names[c] : "?";
}
