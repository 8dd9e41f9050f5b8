/* core/util: errors, clocks and the small parsers and formatters every subsystem shares. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/core.h"

static _Thread_local char last_error[512];

int gs_grow_columns(size_t *cap, size_t first_cap, size_t k, void *const cols[], const size_t size[]) {
  size_t want = *cap ? *cap * 2 : first_cap;
  int ok = want > *cap;
  for (size_t i = 0; i < k && ok; i++) {
    /* through memcpy: cols[i] points at a typed pointer (int64_t *, double *), not at a void * */
    void *old, *grown;
    memcpy(&old, cols[i], sizeof old);
    grown = want <= SIZE_MAX / size[i] ? realloc(old, want * size[i]) : NULL;
    if (grown)
      memcpy(cols[i], &grown, sizeof grown);
    ok = grown != NULL;
  }
  if (!ok)
    return -1;
  *cap = want;
  return 0;
}

const char *gs_last_error(void) {
  return last_error;
}

int gs_fail(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return code;
}

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * GS_NS_PER_S + ts.tv_nsec;
}

int64_t gs_mono_ns(void) {
  return clock_ns(CLOCK_MONOTONIC);
}
int64_t gs_wall_ns(void) {
  return clock_ns(CLOCK_REALTIME);
}

int64_t gs_tick_after(int64_t next, int64_t now, int64_t interval) {
  next += interval;
  if (next <= now)
    next += ((now - next) / interval + 1) * interval;
  return next;
}

int gs_parse_duration(const char *s, int64_t *ns) {
  if (!s || !*s)
    return gs_fail(GS_EINVAL, "empty duration");
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno || !isfinite(v) || v < 0 || isspace((unsigned char)*s))
    return gs_fail(GS_EINVAL, "'%s' is not a duration (try 100ms, 0.5s, 2s)", s);
  double mult;
  if (!*end || !strcmp(end, "s"))
    mult = (double)GS_NS_PER_S;
  else if (!strcmp(end, "ms"))
    mult = 1e6;
  else if (!strcmp(end, "us"))
    mult = 1e3;
  else if (!strcmp(end, "ns"))
    mult = 1;
  else if (!strcmp(end, "m") || !strcmp(end, "min"))
    mult = 60e9;
  else if (!strcmp(end, "h"))
    mult = 3600e9;
  else if (!strcmp(end, "d"))
    mult = 86400e9;
  else
    return gs_fail(GS_EINVAL, "'%s': unknown unit '%s' (use ms, s, m, h or d)", s, end);
  double r = v * mult;
  if (r > 9e18)
    return gs_fail(GS_EINVAL, "'%s' is too long", s);
  *ns = (int64_t)llround(r);
  return GS_OK;
}

const char *gs_fmt_duration(int64_t ns, char *buf, size_t n) {
  double s = (double)ns / GS_NS_PER_S;
  if (s < 0)
    s = 0;
  if (s < 60)
    snprintf(buf, n, "%.1f s", s);
  else if (s < 3600)
    snprintf(buf, n, "%d m %02d s", (int)(s / 60), (int)s % 60);
  else
    snprintf(buf, n, "%d h %02d m", (int)(s / 3600), (int)(s / 60) % 60);
  return buf;
}

const char *gs_fmt_bytes(double b, char *buf, size_t n) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (fabs(b) >= 1024 && u < 5) {
    b /= 1024;
    u++;
  }
  if (u == 0)
    snprintf(buf, n, "%.0f B", b);
  else
    snprintf(buf, n, "%.1f %s", b, units[u]);
  return buf;
}

const char *gs_fmt_limit(double b, char *buf, size_t n) {
  static const double unit[] = {1024.0 * 1024 * 1024, 1024.0 * 1024};
  static const char *const name[] = {"GiB", "MiB"};
  for (int u = 0; u < 2; u++)
    if (b >= unit[u] && b / unit[u] == floor(b / unit[u])) {
      snprintf(buf, n, "%.0f %s", b / unit[u], name[u]);
      return buf;
    }
  return gs_fmt_bytes(b, buf, n);
}

const char *gs_kind_name(enum gs_kind k) {
  switch (k) {
  case GS_GAUGE:
    return "gauge";
  case GS_COUNTER:
    return "counter";
  case GS_EVENT:
    return "event";
  }
  return "gauge";
}

size_t gs_utf8_next(const char *s, uint32_t *cp) {
  const unsigned char *p = (const unsigned char *)s;
  if (!p[0])
    return 0;
  if (p[0] < 0x80) {
    *cp = p[0];
    return 1;
  }
  size_t len = p[0] >= 0xf0 && p[0] <= 0xf4   ? 4
               : p[0] >= 0xe0 && p[0] <= 0xef ? 3
               : p[0] >= 0xc2 && p[0] < 0xe0  ? 2
                                              : 0;
  uint32_t c = len == 4 ? p[0] & 0x07u : len == 3 ? p[0] & 0x0fu : p[0] & 0x1fu;
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80) {
      len = 0;
      break;
    }
    c = c << 6 | (p[i] & 0x3fu);
  }
  /* Overlong forms, surrogates and values past U+10FFFF are invalid. */
  if (!len || (len == 3 && c < 0x800) || (len == 4 && (c < 0x10000 || c > 0x10ffff)) || (c >= 0xd800 && c < 0xe000)) {
    *cp = 0xfffd;
    return 1;
  }
  *cp = c;
  return len;
}

void gs_utf8_put(void *out_file, uint32_t c) {
  FILE *out = out_file;
  if (c < 0x80)
    fputc((int)c, out);
  else if (c < 0x800)
    fputc((int)(0xc0 | c >> 6), out), fputc((int)(0x80 | (c & 0x3f)), out);
  else if (c < 0x10000)
    fputc((int)(0xe0 | c >> 12), out), fputc((int)(0x80 | (c >> 6 & 0x3f)), out), fputc((int)(0x80 | (c & 0x3f)), out);
  else
    fputc((int)(0xf0 | c >> 18), out), fputc((int)(0x80 | (c >> 12 & 0x3f)), out),
        fputc((int)(0x80 | (c >> 6 & 0x3f)), out), fputc((int)(0x80 | (c & 0x3f)), out);
}

void gs_json_str(void *out_file, const char *s) {
  FILE *out = out_file;
  fputc('"', out);
  uint32_t c;
  size_t k;
  for (const char *p = s ? s : ""; (k = gs_utf8_next(p, &c)); p += k) {
    if (c == '"' || c == '\\')
      fputc('\\', out), fputc((int)c, out);
    else if (c == '\n')
      fputs("\\n", out);
    else if (c == '\t')
      fputs("\\t", out);
    else if (c < 0x20 || c == 0x7f)
      fprintf(out, "\\u%04x", (unsigned)c);
    else
      gs_utf8_put(out, c);
  }
  fputc('"', out);
}

void gs_json_num(void *out_file, double v) {
  FILE *out = out_file;
  if (isfinite(v))
    fprintf(out, "%.15g", v);
  else
    fputs("null", out);
}

int gs_utf8_is_bidi(uint32_t cp) {
  return (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

char *gs_term_escape(const char *in, int utf8, char *out, size_t n) {
  size_t o = 0;
  const unsigned char *s = (const unsigned char *)(in ? in : "");
  while (*s && o + 1 < n) {
    unsigned c = *s;
    if (c >= 0x20 && c < 0x7f) {
      out[o++] = (char)c, s++;
      continue;
    }
    size_t len = !utf8 ? 0 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    unsigned cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    size_t k = 1;
    for (; len && k < len && (s[k] & 0xc0) == 0x80; k++)
      cp = cp << 6 | (s[k] & 0x3f);
    int good = len && k == len &&
               cp >= (len == 2   ? 0x80u
                      : len == 3 ? 0x800u
                                 : 0x10000u) &&
               cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) && !(cp >= 0x80 && cp <= 0x9f);
    int bidi = good && gs_utf8_is_bidi(cp);
    if (bidi) {
      out[o++] = '?', s += len; /* a bidirectional control: one '?' for the character */
    } else if (good && o + len < n) {
      memcpy(out + o, s, len);
      o += len, s += len;
    } else if (good) {
      break; /* no room for the whole character */
    } else {
      out[o++] = '?', s++;
    }
  }
  if (n)
    out[o] = 0;
  return out;
}
