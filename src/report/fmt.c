/* report/fmt: formatting numbers that may be absent, evidence values in their units, and the few
 * facts of a run every format prints. Untrusted store text goes out through core's writers
 * (core/text.c: JSON, HTML, terminal, CSV). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctor/doctor.h"
#include "report/report_int.h"

const char *rp_ident(char *dst, size_t n, const char *s) {
  size_t o = 0;
  for (const char *p = s ? s : ""; *p && o + 1 < n; p++)
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' ||
        *p == '-')
      dst[o++] = *p;
  if (!o && n > 1)
    dst[o++] = '?';
  if (n)
    dst[o] = 0;
  return dst;
}

/* ---- numbers ---- */

const char *rp_num(char *buf, size_t n, double v, int decimals, const char *unit) {
  if (!isfinite(v))
    snprintf(buf, n, "—");
  else
    snprintf(buf, n, "%.*f%s%s", decimals, v, unit && *unit && *unit != '%' ? " " : "", unit ? unit : "");
  return buf;
}

const char *rp_pct(char *buf, size_t n, double share) {
  if (!isfinite(share))
    snprintf(buf, n, "—");
  else
    snprintf(buf, n, "%.0f%%", share * 100);
  return buf;
}

const char *rp_bytes(char *buf, size_t n, double v) {
  if (!isfinite(v)) {
    snprintf(buf, n, "—");
    return buf;
  }
  return gs_fmt_bytes(v, buf, n);
}

const char *rp_exit_why(char *buf, size_t n, const struct runview *v) {
  char lim[32] = "", peak[32] = "";
  double l = runview_param_num(v, "exit.oom_limit_bytes"), p = runview_param_num(v, "exit.mem_peak_bytes");
  buf[0] = 0;
  if (runview_param_bool(v, "exit.oom_killed") != 1)
    return buf;
  if (isfinite(l))
    gs_fmt_limit(l, lim, sizeof lim);
  if (isfinite(p))
    gs_fmt_bytes(p, peak, sizeof peak);
  snprintf(buf, n, ", OOM-killed%s%s%s%s%s", lim[0] ? " at " : "", lim, peak[0] ? " (peak " : "", peak,
           peak[0] ? ")" : "");
  return buf;
}

const char *rp_duration(char *buf, size_t n, double seconds) {
  if (!isfinite(seconds) || seconds <= 0 || seconds > 9e9) {
    snprintf(buf, n, "—");
    return buf;
  }
  return gs_fmt_duration((int64_t)(seconds * GS_NS_PER_S), buf, n);
}

struct speedups {
  char *buf;
  size_t n, o;
};

/* One member of a {"N": speed-up} object as "N: 1.33x". */
static void speedup_member(void *user, const char *key, size_t klen, const char *val, size_t vlen) {
  struct speedups *s = user;
  char v[64];
  snprintf(v, sizeof v, "%.*s", (int)(vlen < 63 ? vlen : 63), val);
  char *end;
  double x = strtod(v, &end);
  if (s->o + 1 >= s->n)
    return;
  int w = end != v && !*end && isfinite(x)
              ? snprintf(s->buf + s->o, s->n - s->o, "%s%.*s: %.2fx", s->o ? ", " : "", (int)klen, key, x)
              : snprintf(s->buf + s->o, s->n - s->o, "%s%.*s: —", s->o ? ", " : "", (int)klen, key);
  if (w > 0)
    s->o = s->o + (size_t)w < s->n ? s->o + (size_t)w : s->n - 1;
}

const char *rp_ev_value(char *buf, size_t n, const char *key, size_t klen, const char *val, size_t vlen) {
  char raw[512];
  snprintf(raw, sizeof raw, "%.*s", (int)(vlen < sizeof raw - 1 ? vlen : sizeof raw - 1), val);
  if (!n)
    return buf;
  buf[0] = 0;
  if (!strcmp(raw, "null")) {
    snprintf(buf, n, "—");
    return buf;
  }
  if (raw[0] == '{' && klen >= 7 && !memcmp(key, "speedup", 7)) {
    struct speedups sp = {buf, n, 0};
    gs_json_members(raw, speedup_member, &sp);
    if (sp.o)
      return buf;
  }
  if (raw[0] == '"' && vlen >= 2 && raw[strlen(raw) - 1] == '"') {
    snprintf(buf, n, "%.*s", (int)(strlen(raw) - 2), raw + 1);
    return buf;
  }
  char *end;
  double v = strtod(raw, &end);
  if (end == raw || *end || !isfinite(v)) {
    snprintf(buf, n, "%s", raw);
    return buf;
  }
  const char *u = doctor_evidence_unit(key, klen);
  if (!strcmp(u, "share"))
    snprintf(buf, n, "%.*f%%", fabs(v) < 0.1 ? 1 : 0, v * 100);
  else if (!strcmp(u, "pct"))
    snprintf(buf, n, "%.0f%%", v);
  else if (!strcmp(u, "bytes_s"))
    snprintf(buf, n, fabs(v) >= 1e9 ? "%.2f GB/s" : "%.0f MB/s", fabs(v) >= 1e9 ? v / 1e9 : v / 1e6);
  else if (!strcmp(u, "bytes"))
    rp_bytes(buf, n, v);
  else if (!strcmp(u, "s"))
    snprintf(buf, n, fabs(v) < 1 ? "%.1f ms" : "%.2f s", fabs(v) < 1 ? v * 1e3 : v);
  else if (!strcmp(u, "cores"))
    snprintf(buf, n, "%.2f cores", v);
  else if (!strcmp(u, "mhz"))
    snprintf(buf, n, "%.0f MHz", v);
  else if (!strcmp(u, "w"))
    snprintf(buf, n, "%.0f W", v);
  else if (!strcmp(u, "c"))
    snprintf(buf, n, "%.0f °C", v);
  else if (!strcmp(u, "j"))
    snprintf(buf, n, "%.0f J", v);
  else if (!strcmp(u, "x"))
    snprintf(buf, n, "%.2fx", v);
  else if (!strcmp(u, "h"))
    snprintf(buf, n, "%.2f h", v);
  else if (v == floor(v) && fabs(v) < 1e15)
    snprintf(buf, n, "%.0f", v);
  else
    snprintf(buf, n, "%.3g", v);
  return buf;
}

const char *rp_combined_line(char *buf, size_t n, const struct store_finding *f, size_t nf) {
  struct doctor_combined c;
  doctor_combine(f, nf, &c);
  if (c.findings < 2) {
    if (n)
      buf[0] = 0;
    return buf;
  }
  snprintf(buf, n,
           "these %d findings share the same step time, so their gains do not add%s: fixing all: ~%.1fx "
           "(one step model: stalls, data wait, copies, straggler wait, GPU work, host idle; every fix applied "
           "to the same step)",
           c.findings, c.overlapping ? " (some change the same part)" : "", c.speedup);
  return buf;
}

const char *rp_param(const struct report_run *r, const char *key) {
  return runview_param(&r->view, key);
}

/* Whose GPU g's use is, where a run in a container had to infer it (NVML listed host pids). */
void rp_gpu_owner(FILE *out, const struct runview *v, int g) {
  char key[48];
  snprintf(key, sizeof key, "gpu.%d.owner", g);
  const char *owner = runview_param(v, key);
  snprintf(key, sizeof key, "gpu.%d.owner_how", g);
  const char *how = runview_param(v, key);
  if (!owner || (strcmp(owner, "job") && strcmp(owner, "unknown")))
    return;
  fputs(!strcmp(owner, "job") ? "; the job's (" : "; not tied to the job (", out);
  gs_term_text(out, how && *how ? how : "no reason recorded", 0);
  fputc(')', out);
}

const char *rp_gpus(const struct report_run *r, char *buf, size_t n) {
  if (!r->ngpus) {
    snprintf(buf, n, "none");
    return buf;
  }
  int same = 1;
  for (int i = 1; i < r->ngpus; i++)
    same &= !strcmp(r->gpus[i].name, r->gpus[0].name);
  if (same)
    snprintf(buf, n, "%d x %s", r->ngpus, r->gpus[0].name[0] ? r->gpus[0].name : "GPU");
  else {
    size_t o = (size_t)snprintf(buf, n, "%d GPUs:", r->ngpus);
    for (int i = 0; i < r->ngpus && o < n; i++)
      o += (size_t)snprintf(buf + o, n - o, "%s %s", i ? "," : "", r->gpus[i].name[0] ? r->gpus[i].name : "—");
  }
  return buf;
}

const char *rp_when(int64_t wall_ns, char *buf, size_t n) {
  time_t t = (time_t)(wall_ns / GS_NS_PER_S);
  struct tm tm;
  if (wall_ns <= 0 || !localtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm))
    snprintf(buf, n, "—");
  return buf;
}
