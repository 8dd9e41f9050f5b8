/* doctor/finding: the small helpers every rule uses to write a finding — the list it appends to, the
 * severity that follows from the share of run time lost, and a JSON object builder for the evidence
 * that never overflows its fixed field and always leaves a valid object behind. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "doctor/doctor_int.h"

/* Evidence units by the key's ending, first match wins (so _bytes_s before _s). */
static const struct {
  const char *suffix, *unit;
} EVIDENCE_UNITS[] = {
    {"_bytes_s", "bytes_s"},
    {"_bytes", "bytes"},
    {"bytes_per_worker", "bytes"},
    {"_share", "share"},
    {"_estimate", "share"},
    {"_pct", "pct"},
    {"_s_per_batch", "s"},
    {"_s", "s"},
    {"_cores", "cores"},
    {"_cores_min", "cores"},
    {"_cores_max", "cores"},
    {"_mhz", "mhz"},
    {"_w", "w"},
    {"_c", "c"},
    {"_j", "j"},
    {"_hours", "h"},
    {"_speedup", "x"},
    {"speedup_by_workers", "x"},
    {"_ratio", "x"},
    {"_scale", "x"},
    {"slower_by", "x"},
};

const char *doctor_evidence_unit(const char *key, size_t klen) {
  if ((klen == 7 && !memcmp(key, "speedup", 7)))
    return "x";
  for (size_t i = 0; i < sizeof EVIDENCE_UNITS / sizeof *EVIDENCE_UNITS; i++) {
    size_t sl = strlen(EVIDENCE_UNITS[i].suffix);
    if (klen >= sl && !memcmp(key + klen - sl, EVIDENCE_UNITS[i].suffix, sl))
      return EVIDENCE_UNITS[i].unit;
  }
  return "";
}

/* What a person reads of each rule's evidence: the figures that carry the finding, in units (the
 * title and the fix say why). The other members are how it was estimated (the step model and its
 * change, the model's sentence, its intermediate figures): the web page folds them under "how this
 * was estimated" and the text report leaves them to --json. A rule missing here shows everything. */
static const struct {
  const char *rule, *keys; /* keys: space-separated */
} EVIDENCE_SHOWN[] = {
    {"input_bound", "data_wait_share data_wait_s step_s loader_cpu_cores_min loader_cpu_cores_max usable_cores"},
    {"loader_workers", "num_workers recommended_workers data_wait_s step_s usable_cores memory_room_bytes"},
    {"input_latency", "data_wait_share data_wait_s step_s loader_cpu_cores_max num_workers recommended_workers"},
    {"io_bound", "dstate_share iowait_pct psi_io_some_pct job_read_bytes_s data_wait_share"},
    {"host_code_bound", "gpu_util_pct data_wait_share main_process_cpu_cores job_cpu_cores usable_cores step_s"},
    {"periodic_stall", "stalls period_s mean_stall_s marks source steps_sampled"},
    {"batch_too_small", "mem_used_peak_bytes mem_total_bytes gpu_util_pct sm_active_pct batch_size recommended_batch"},
    {"mixed_precision", "gpu compute_capability precision tensor_active_pct gpu_util_pct"},
    {"pageable_copies", "pcie_rx_bytes_s h2d_share pin_memory"},
    {"throttled", "gpu throttled_share reasons sm_clock_throttled_mhz sm_clock_otherwise_mhz temp_max_c"},
    {"straggler", "gpu host_gpu rank signal value others_median slower_by data_wait_s others_data_wait_s"},
    {"underused_gpus", "gpus idle busy idle_gpu_hours"},
    {"healthy", "gpu_util_pct data_wait_share step_s steps steps_sampled job_cpu_cores host_cpu_pct"},
    {"insufficient_data", "missing gpus steps window_s"},
};

int doctor_evidence_shown(const char *rule, const char *key, size_t klen) {
  if (klen == 4 && !memcmp(key, "host", 4))
    return 1; /* a group's node, named first (dr_name_node) */
  for (size_t i = 0; i < sizeof EVIDENCE_SHOWN / sizeof *EVIDENCE_SHOWN; i++) {
    if (strcmp(rule, EVIDENCE_SHOWN[i].rule))
      continue;
    for (const char *p = EVIDENCE_SHOWN[i].keys; *p;) {
      size_t n = strcspn(p, " ");
      if (n == klen && !memcmp(p, key, n))
        return 1;
      p += n + (p[n] == ' ');
    }
    return 0;
  }
  return 1;
}

double dr_fin(double v, double dflt) {
  return isfinite(v) ? v : dflt;
}

double dr_median(double *v, size_t n) {
  if (!n)
    return NAN;
  qsort(v, n, sizeof *v, runview_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void dr_printf(char *dst, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(dst, cap, fmt, ap);
  va_end(ap);
  if (n < 0 && cap)
    dst[0] = 0;
}

void dr_not_judged(struct dr_run *d, const char *fmt, ...) {
  size_t len = strlen(d->not_judged);
  if (len && len + 2 < sizeof d->not_judged)
    memcpy(d->not_judged + len, "; ", 3), len += 2;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(d->not_judged + len, sizeof d->not_judged - len, fmt, ap);
  va_end(ap);
  if (n < 0)
    d->not_judged[len] = 0;
}

const char *dr_fmt(char *dst, size_t cap, double v, int decimals, const char *unit) {
  if (!isfinite(v))
    dr_printf(dst, cap, "—");
  else
    dr_printf(dst, cap, "%.*f%s%s", decimals, v, unit && *unit ? " " : "", unit ? unit : "");
  return dst;
}

void dr_json_begin(struct dr_json *j, char *buf, size_t cap) {
  j->buf = buf;
  j->cap = cap;
  j->members = 0;
  j->len = 0;
  if (cap >= 3) {
    buf[0] = '{', buf[1] = '}', buf[2] = 0;
    j->len = 1; /* members are written over the closing brace, which is put back each time */
  } else if (cap) {
    buf[0] = 0;
  }
}

/* Appends `"key":` + value text when it fits with the closing brace. */
static void member(struct dr_json *j, const char *key, const char *value) {
  char head[160];
  size_t hn = 0;
  if (j->members)
    head[hn++] = ',';
  head[hn++] = '"';
  for (const char *k = key; *k && hn < sizeof head - 4; k++)
    if (*k != '"' && *k != '\\' && (unsigned char)*k >= 0x20)
      head[hn++] = *k;
  head[hn++] = '"';
  head[hn++] = ':';
  size_t vn = strlen(value);
  if (j->cap < 3 || j->len + hn + vn + 2 > j->cap)
    return;
  memcpy(j->buf + j->len, head, hn);
  memcpy(j->buf + j->len + hn, value, vn);
  j->len += hn + vn;
  j->buf[j->len] = '}';
  j->buf[j->len + 1] = 0;
  j->members++;
}

void dr_json_num(struct dr_json *j, const char *key, double v) {
  char num[40];
  if (!isfinite(v))
    snprintf(num, sizeof num, "null");
  else if (fabs(v) >= 1e15 || v == floor(v))
    snprintf(num, sizeof num, "%.17g", v);
  else
    snprintf(num, sizeof num, "%.6g", v);
  member(j, key, num);
}

void dr_json_int(struct dr_json *j, const char *key, long long v) {
  char num[32];
  snprintf(num, sizeof num, "%lld", v);
  member(j, key, num);
}

void dr_name_node(const struct dr_run *d, struct store_finding *f) {
  if (!d->host[0])
    return;
  size_t len = strlen(f->title);
  if (d->host_rank)
    dr_printf(f->title + len, sizeof f->title - len, " (host %s, rank %d)", d->host, d->host_rank);
  else
    dr_printf(f->title + len, sizeof f->title - len, " (host %s)", d->host);
  char head[400];
  struct dr_json j;
  dr_json_begin(&j, head, sizeof head);
  dr_json_str(&j, "host", d->host);
  if (d->host_rank)
    dr_json_int(&j, "rank", d->host_rank);
  size_t hl = strlen(head), el = strlen(f->evidence);
  if (f->evidence[0] != '{' || hl + el + 1 > sizeof f->evidence)
    return;
  /* {"host":"H"} + {...} -> {"host":"H",...} */
  char out[sizeof f->evidence];
  int more = el > 2;
  dr_printf(out, sizeof out, "%.*s%s%s", (int)(hl - 1), head, more ? "," : "}", more ? f->evidence + 1 : "");
  memcpy(f->evidence, out, sizeof out);
}

/* A string value, escaped and cut to its field on a character boundary: a job's names may hold any
 * bytes, and the evidence must stay valid JSON whatever they are (invalid UTF-8 becomes U+FFFD). */
void dr_json_str(struct dr_json *j, const char *key, const char *s) {
  char out[512];
  size_t o = 0, k;
  uint32_t c;
  out[o++] = '"';
  for (const char *p = s ? s : ""; (k = gs_utf8_next(p, &c)); p += k) {
    char enc[8];
    size_t n;
    if (c == '"' || c == '\\')
      n = (size_t)snprintf(enc, sizeof enc, "\\%c", (char)c);
    else if (c < 0x20 || c == 0x7f)
      n = (size_t)snprintf(enc, sizeof enc, "\\u%04x", (unsigned)c);
    else if (c == 0xfffd && k == 1)
      n = (size_t)snprintf(enc, sizeof enc, "\\ufffd");
    else
      memcpy(enc, p, k), n = k;
    if (o + n + 2 > sizeof out)
      break; /* the next character does not fit whole: the string ends before it */
    memcpy(out + o, enc, n);
    o += n;
  }
  out[o++] = '"';
  out[o] = 0;
  member(j, key, out);
}

void dr_json_raw(struct dr_json *j, const char *key, const char *json) {
  member(j, key, json);
}

int dr_has(const struct dr_findings *fs, const char *rule) {
  for (size_t i = 0; i < fs->n; i++)
    if (!strcmp(fs->v[i].rule, rule))
      return 1;
  return 0;
}

struct store_finding *dr_add(struct dr_findings *fs, const struct dr_run *d, const char *rule, double share,
                             double speedup) {
  if (fs->n == fs->cap) {
    size_t cap = fs->cap ? fs->cap * 2 : 8;
    struct store_finding *v = realloc(fs->v, cap * sizeof *v);
    if (v)
      fs->v = v;
    struct dr_change_req *ch = v ? realloc(fs->ch, cap * sizeof *ch) : NULL;
    if (!ch) {
      fs->oom = 1;
      return NULL;
    }
    fs->ch = ch;
    fs->cap = cap;
  }
  fs->ch[fs->n] = (struct dr_change_req){.kind = DR_CH_NONE, .term = DR_TERM_HOST, .min_speedup = 1};
  struct store_finding *f = &fs->v[fs->n++];
  memset(f, 0, sizeof *f);
  dr_printf(f->rule, sizeof f->rule, "%s", rule);
  dr_set_estimate(f, d, share, speedup);
  dr_printf(f->evidence, sizeof f->evidence, "{}");
  return f;
}

void dr_set_estimate(struct store_finding *f, const struct dr_run *d, double share, double speedup) {
  f->share = isfinite(share) ? fmin(fmax(share, 0), 1) : 0;
  f->speedup = isfinite(speedup) && speedup >= 1 ? speedup : 1;
  f->lost_s = isfinite(d->window_s) ? f->share * d->window_s : NAN; /* unknown window: unknown time */
  dr_printf(f->severity, sizeof f->severity, "%s",
            f->share >= DR_SEVERITY_HIGH     ? "high"
            : f->share >= DR_SEVERITY_MEDIUM ? "medium"
            : f->share > 0                   ? "low"
                                             : "info");
}
