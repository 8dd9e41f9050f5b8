/* serve/reply: what every answer is written with — a reply's buffer and its error form, and the JSON
 * members the API's answers share (a key, a string or number member, findings, seconds). The leaf of
 * serve's files: the HTTP layer (serve.c), the API (api.c), the chart reader (series.c), the live
 * stream (live.c) and the page (page.c) all use it, and it calls none of them. Store text is
 * untrusted: it goes out through core's JSON string writer; absent numbers are null. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
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

struct units_ctx {
  FILE *out;
  int k;
  const char *rule;
};

/* "key" for one evidence member that tells how the estimate was made (doctor_evidence_shown 0). */
static void estimate_member(void *user, const char *key, size_t klen, const char *val, size_t vlen) {
  struct units_ctx *c = user;
  (void)val, (void)vlen;
  if (doctor_evidence_shown(c->rule, key, klen))
    return;
  fputs(c->k++ ? ",\"" : "\"", c->out);
  fwrite(key, 1, klen, c->out);
  fputc('"', c->out);
}

/* "key":"unit" for one evidence member; the key as the stored evidence spells it (a valid JSON
 * string's content: written back between quotes unchanged). */
static void unit_member(void *user, const char *key, size_t klen, const char *val, size_t vlen) {
  struct units_ctx *c = user;
  (void)val, (void)vlen;
  fputs(c->k++ ? ",\"" : "\"", c->out);
  fwrite(key, 1, klen, c->out);
  fputs("\":", c->out);
  gs_json_str(c->out, doctor_evidence_unit(key, klen));
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
  int object = gs_json_object_valid(f->evidence);
  if (object)
    fputs(f->evidence, out);
  else
    gs_json_str(out, f->evidence);
  /* each evidence member's unit (doctor_evidence_unit, the one table): the page formats by it */
  fputs(",\"evidence_units\":{", out);
  struct units_ctx uc = {out, 0, f->rule};
  if (object)
    gs_json_members(f->evidence, unit_member, &uc);
  /* the members that tell how the estimate was made: the page folds them under a summary */
  fputs("},\"evidence_estimate\":[", out);
  uc.k = 0;
  if (object)
    gs_json_members(f->evidence, estimate_member, &uc);
  fputs("],", out);
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
