/* report/export: the one writer of untrusted store text (run names, commands, tags, labels, params,
 * event and note text) for every output gpuscope prints — the read-back commands (`runs`, `show`,
 * `metrics`) as well as `report` and `compare`: JSON strings (core's gs_json_str, which rp_json_str
 * is too) and numbers,
 * terminal text with escape sequences and control characters dropped and the bidirectional controls
 * shown as "<U+202E>" (fmt.c's rp_text, and a copy into a buffer for padded table columns), and RFC
 * 4180 CSV fields. */
#include <stdio.h>
#include <string.h>

#include "report/report_int.h"

void report_json_str(FILE *out, const char *s) {
  gs_json_str(out, s);
}

void report_json_num(FILE *out, double v) {
  rp_json_num(out, v);
}

void report_term(FILE *out, const char *s) {
  rp_text(out, s, 0);
}

/* The bytes of code point c, as rp_text would write it to a terminal (0 bytes: dropped), into b
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

const char *report_term_copy(char *dst, size_t n, const char *s) {
  size_t o = 0, k;
  uint32_t c;
  if (!n)
    return dst;
  for (const char *p = s ? s : ""; (k = rp_utf8_next(p, &c)); p += k) {
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

void report_csv_field(FILE *out, const char *s) {
  fputc('"', out);
  uint32_t c;
  size_t k;
  for (const char *p = s ? s : ""; (k = rp_utf8_next(p, &c)); p += k) {
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
