/* core/text: the one writer of untrusted text (run names, commands, tags, labels, params, event and
 * note text, finding titles and evidence) for every output gpuscope prints — the read-back commands,
 * report, compare, check, serve's API and pages, top: JSON strings and numbers (util.c's
 * gs_json_str / gs_json_num), a checker that says whether stored evidence may be embedded as a JSON
 * object, HTML text, terminal text with escape sequences and control characters dropped and the
 * bidirectional controls shown as "<U+202E>", and RFC 4180 CSV fields. A leaf: every folder may use
 * it, so serve writes the same bytes as report without reaching into report's own files. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"

/* ---- a JSON checker (RFC 8259 grammar; no allocation) ---- */

static const char *ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
    p++;
  return p;
}

static const char *j_value(const char *p, int depth);

static const char *j_string(const char *p) {
  if (*p != '"')
    return NULL;
  for (p++; *p; p++) {
    unsigned char ch = (unsigned char)*p;
    if (ch == '"')
      return p + 1;
    if (ch < 0x20)
      return NULL;
    if (ch == '\\') {
      p++;
      if (*p == 'u') {
        for (int i = 1; i <= 4; i++)
          if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f') || (p[i] >= 'A' && p[i] <= 'F')))
            return NULL;
        p += 4;
      } else if (!*p || !strchr("\"\\/bfnrt", *p)) {
        return NULL;
      }
    } else if (ch >= 0x80) {
      uint32_t c;
      size_t k = gs_utf8_next(p, &c);
      if (c == 0xfffd && k == 1)
        return NULL;
      p += k - 1;
    }
  }
  return NULL;
}

static const char *j_number(const char *p) {
  if (*p == '-')
    p++;
  if (*p == '0')
    p++;
  else if (*p >= '1' && *p <= '9')
    while (*p >= '0' && *p <= '9')
      p++;
  else
    return NULL;
  if (*p == '.') {
    p++;
    if (!(*p >= '0' && *p <= '9'))
      return NULL;
    while (*p >= '0' && *p <= '9')
      p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-')
      p++;
    if (!(*p >= '0' && *p <= '9'))
      return NULL;
    while (*p >= '0' && *p <= '9')
      p++;
  }
  return p;
}

static const char *j_container(const char *p, int depth, char close) {
  if (depth > 32)
    return NULL;
  p = ws(p + 1);
  if (*p == close)
    return p + 1;
  for (;;) {
    if (close == '}') {
      if (!(p = j_string(p)))
        return NULL;
      p = ws(p);
      if (*p != ':')
        return NULL;
      p = ws(p + 1);
    }
    if (!(p = j_value(p, depth + 1)))
      return NULL;
    p = ws(p);
    if (*p == close)
      return p + 1;
    if (*p != ',')
      return NULL;
    p = ws(p + 1);
  }
}

static const char *j_value(const char *p, int depth) {
  p = ws(p);
  switch (*p) {
  case '{':
    return j_container(p, depth, '}');
  case '[':
    return j_container(p, depth, ']');
  case '"':
    return j_string(p);
  case 't':
    return strncmp(p, "true", 4) ? NULL : p + 4;
  case 'f':
    return strncmp(p, "false", 5) ? NULL : p + 5;
  case 'n':
    return strncmp(p, "null", 4) ? NULL : p + 4;
  default:
    return j_number(p);
  }
}

int gs_json_object_valid(const char *s) {
  if (!s)
    return 0;
  const char *p = ws(s);
  if (*p != '{')
    return 0;
  p = j_value(p, 0);
  return p && !*ws(p);
}

void gs_json_members(const char *obj, void (*fn)(void *, const char *, size_t, const char *, size_t), void *user) {
  if (!gs_json_object_valid(obj))
    return;
  const char *p = ws(ws(obj) + 1);
  while (*p == '"') {
    const char *kend = j_string(p);
    const char *v = ws(ws(kend) + 1);
    const char *vend = j_value(v, 1);
    fn(user, p + 1, (size_t)(kend - p - 2), v, (size_t)(vend - v));
    p = ws(vend);
    if (*p != ',')
      break;
    p = ws(p + 1);
  }
}

/* ---- HTML and terminal text ---- */

void gs_html_text(FILE *out, const char *s) {
  uint32_t c;
  size_t k;
  for (const char *p = s ? s : ""; (k = gs_utf8_next(p, &c)); p += k) {
    switch (c) {
    case '&':
      fputs("&amp;", out);
      break;
    case '<':
      fputs("&lt;", out);
      break;
    case '>':
      fputs("&gt;", out);
      break;
    case '"':
      fputs("&quot;", out);
      break;
    case '\'':
      fputs("&#39;", out);
      break;
    default:
      if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
        fputc(' ', out);
      else
        gs_utf8_put(out, c);
    }
  }
}

void gs_term_text(FILE *out, const char *s, int newlines) {
  uint32_t c;
  size_t k;
  for (const char *p = s ? s : ""; (k = gs_utf8_next(p, &c)); p += k) {
    if (c == '\n' && newlines)
      fputc('\n', out);
    else if (c == '\t' || c == '\n')
      fputc(' ', out);
    else if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0))
      continue; /* no escape sequences from the store reach the terminal */
    else if (gs_utf8_is_bidi(c))
      fprintf(out, "<U+%04X>", (unsigned)c);
    else
      gs_utf8_put(out, c);
  }
}

/* The bytes of code point c, as gs_term_text would write it to a terminal (0 bytes: dropped), into b
 * (room for 8). */
static size_t term_bytes(uint32_t c, char *b) {
  if (c == '\t' || c == '\n' || c == '\r')
    c = ' ';
  else if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0))
    return 0;
  else if (gs_utf8_is_bidi(c))
    return (size_t)snprintf(b, 9, "<U+%04X>", (unsigned)c);
  if (c < 0x80)
    return b[0] = (char)c, 1;
  if (c < 0x800)
    return b[0] = (char)(0xc0 | c >> 6), b[1] = (char)(0x80 | (c & 0x3f)), 2;
  if (c < 0x10000)
    return b[0] = (char)(0xe0 | c >> 12), b[1] = (char)(0x80 | (c >> 6 & 0x3f)), b[2] = (char)(0x80 | (c & 0x3f)), 3;
  b[0] = (char)(0xf0 | c >> 18), b[1] = (char)(0x80 | (c >> 12 & 0x3f)), b[2] = (char)(0x80 | (c >> 6 & 0x3f));
  b[3] = (char)(0x80 | (c & 0x3f));
  return 4;
}

const char *gs_term_copy(char *dst, size_t n, const char *s) {
  size_t o = 0, k;
  uint32_t c;
  if (!n)
    return dst;
  for (const char *p = s ? s : ""; (k = gs_utf8_next(p, &c)); p += k) {
    char b[9];
    size_t len = term_bytes(c, b);
    if (o + len + 1 > n)
      break; /* cut at a character, never inside one */
    memcpy(dst + o, b, len);
    o += len;
  }
  dst[o] = 0;
  return dst;
}

void gs_csv_field(FILE *out, const char *s) {
  fputc('"', out);
  uint32_t c;
  size_t k;
  for (const char *p = s ? s : ""; (k = gs_utf8_next(p, &c)); p += k) {
    char b[9];
    if (c == '"') {
      fputs("\"\"", out);
    } else if (c == '\n') {
      fputc('\n', out); /* legal inside quotes (RFC 4180); kept, so the value reads back whole */
    } else {
      size_t len = term_bytes(c, b);
      fwrite(b, 1, len, out);
    }
  }
  fputc('"', out);
}
