/* serve/reply: what every answer is written with — a reply's buffer and its error form, and the JSON
 * members the API's answers share (a key, a string or number member, findings, seconds). The leaf of
 * serve's files: the HTTP layer (serve.c), the API (api.c), the chart reader (series.c), the live
 * stream (live.c) and the page (page.c) all use it, and it calls none of them. Store text is
 * untrusted: it goes out through core's JSON string writer; absent numbers are null. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "serve/mhd_api.h"
#include "serve/serve_int.h"

int serve_reply_begin(struct serve_reply *r) {
  memset(r, 0, sizeof *r);
  r->status = MHD_HTTP_OK;
  r->mime = "application/json";
  r->out = open_memstream(&r->body, &r->len);
  return r->out ? GS_OK : gs_fail(GS_ENOMEM, "out of memory");
}

void serve_reply_error(struct serve_reply *r, int status, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->status = status;
  r->mime = "application/json";
  if (r->out) /* what was written so far goes */
    fclose(r->out);
  free(r->body);
  r->body = NULL;
  r->len = 0;
  r->out = open_memstream(&r->body, &r->len);
  if (!r->out)
    return;
  fputs("{\"error\":", r->out);
  /* the message may quote the request (a run reference): escaped like any store text */
  gs_json_str(r->out, msg);
  fputs("}\n", r->out);
}

void serve_reply_end(struct serve_reply *r) {
  if (r->out) {
    fclose(r->out);
    r->out = NULL;
  }
}

/* ---- JSON members ---- */

double serve_sec(int64_t ns) {
  return (double)ns / GS_NS_PER_S;
}

void serve_json_key(FILE *out, const char *key) {
  gs_json_str(out, key);
  fputc(':', out);
}

void serve_json_kstr(FILE *out, const char *key, const char *v) {
  serve_json_key(out, key);
  gs_json_str(out, v);
  fputc(',', out);
}

void serve_json_knum(FILE *out, const char *key, double v) {
  serve_json_key(out, key);
  gs_json_num(out, v);
  fputc(',', out);
}

void serve_json_finding(FILE *out, const struct store_finding *f) {
  fputc('{', out);
  serve_json_kstr(out, "rule", f->rule);
  serve_json_kstr(out, "severity", f->severity);
  serve_json_knum(out, "share", f->share);
  serve_json_knum(out, "lost_s", f->lost_s);
  serve_json_knum(out, "speedup", f->speedup);
  serve_json_kstr(out, "title", f->title);
  serve_json_key(out, "evidence");
  if (gs_json_object_valid(f->evidence))
    fputs(f->evidence, out);
  else
    gs_json_str(out, f->evidence);
  fputc(',', out);
  serve_json_key(out, "fix");
  gs_json_str(out, f->fix);
  fputc('}', out);
}

void serve_json_findings(FILE *out, const struct store_finding *f, size_t n) {
  fputc('[', out);
  for (size_t i = 0; i < n; i++) {
    if (i)
      fputc(',', out);
    serve_json_finding(out, &f[i]);
  }
  fputc(']', out);
}
