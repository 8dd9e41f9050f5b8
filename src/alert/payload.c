/* alert/payload: an alert as the receivers read it — gpuscope's JSON object (webhooks in their
 * generic form, and the command's stdin) and Slack's incoming-webhook {"text": ...}. Every string is
 * the engine's or the run's (a run name is untrusted): JSON-escaped by core's one writer, and for
 * Slack's mrkdwn also &, < and > escaped, so a name cannot become a link or a mention. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alert/alert_int.h"
#include "core/core.h"

static void put_key(FILE *out, const char *k, const char *v) {
  fprintf(out, ",\"%s\":", k);
  gs_json_str(out, v);
}

void alert_payload_json(FILE *out, const struct alert_msg *m) {
  char at[32];
  time_t sec = (time_t)(m->wall_ns / GS_NS_PER_S);
  struct tm tm;
  gmtime_r(&sec, &tm);
  strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
  fputs("{\"source\":\"gpuscope\"", out);
  put_key(out, "state", m->state);
  put_key(out, "rule", m->rule);
  put_key(out, "key", m->key);
  put_key(out, "labels", m->labels);
  put_key(out, "spec", m->spec);
  put_key(out, "title", m->title);
  put_key(out, "text", m->text);
  put_key(out, "fix", m->fix);
  fputs(",\"value\":", out);
  gs_json_num(out, m->value);
  fputs(",\"cost_s\":", out);
  gs_json_num(out, m->cost_s);
  fputs(",\"speedup\":", out);
  gs_json_num(out, m->speedup);
  put_key(out, "at", at);
  fputs(",\"t_s\":", out);
  gs_json_num(out, m->t_s);
  fputs(",\"run\":{\"id\":", out);
  gs_json_str(out, m->run_id);
  put_key(out, "name", m->run_name);
  put_key(out, "host", m->host);
  fputs("}}\n", out);
}

/* s with mrkdwn's control characters escaped, into buf. */
static const char *slack_escape(const char *s, char *buf, size_t n) {
  size_t o = 0;
  for (; *s && o + 6 < n; s++) {
    const char *rep = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : NULL;
    if (rep)
      o += (size_t)snprintf(buf + o, n - o, "%s", rep);
    else
      buf[o++] = *s;
  }
  buf[o] = 0;
  return buf;
}

void alert_payload_slack(FILE *out, const struct alert_msg *m) {
  char title[768], text[3072], fix[8192], name[400], host[768], line[14000];
  snprintf(line, sizeof line, "*%s* %s — run %s on %s: %s%s%s", !strcmp(m->state, "firing") ? "FIRING" : "resolved",
           slack_escape(m->title, title, sizeof title),
           slack_escape(m->run_name[0] ? m->run_name : m->run_id, name, sizeof name),
           slack_escape(m->host, host, sizeof host), slack_escape(m->text, text, sizeof text),
           m->fix[0] ? "\nFix: " : "", slack_escape(m->fix, fix, sizeof fix));
  fputs("{\"text\":", out);
  gs_json_str(out, line);
  fputs("}\n", out);
}
