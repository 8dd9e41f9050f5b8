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

const char *gs_last_error(void) { return last_error; }

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
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t gs_mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
int64_t gs_wall_ns(void) { return clock_ns(CLOCK_REALTIME); }

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
    mult = 1e9;
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
  else
    return gs_fail(GS_EINVAL, "'%s': unknown unit '%s' (use ms, s, m or h)", s, end);
  double r = v * mult;
  if (r > 9e18)
    return gs_fail(GS_EINVAL, "'%s' is too long", s);
  *ns = (int64_t)llround(r);
  return GS_OK;
}

const char *gs_fmt_duration(int64_t ns, char *buf, size_t n) {
  double s = ns / 1e9;
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

void gs_json_str(void *out_file, const char *s) {
  FILE *out = out_file;
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    switch (*p) {
    case '"':
      fputs("\\\"", out);
      break;
    case '\\':
      fputs("\\\\", out);
      break;
    case '\n':
      fputs("\\n", out);
      break;
    case '\t':
      fputs("\\t", out);
      break;
    case '\r':
      fputs("\\r", out);
      break;
    default:
      if (*p < 0x20)
        fprintf(out, "\\u%04x", *p);
      else
        fputc(*p, out);
    }
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
