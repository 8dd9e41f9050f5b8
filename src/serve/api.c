/* serve/api: the JSON API (docs/api.md) — the runs list, one run (its record, params, notes, series,
 * events, findings, step split and GPU table), series windows, findings and compare. Every answer is
 * built on a run view (views.c holds them; runs-list rows of finished runs are cached here too, since a
 * finished run no longer changes). Called under the server's store lock. Store text is untrusted: it
 * goes out through core's JSON string writer (reply.c's members); absent numbers are null. */
#include <math.h>
#include "serve/mhd_api.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctor/doctor.h"
#include "report/report.h"
#include "serve/serve_int.h"

enum { SPARK_POINTS = 40 };

/* The run's findings: the stored ones, else the doctor's diagnosis (kept with a cached view; else
 * *owned is set and the caller frees *f). *stored says which. Returns 0 or a GS_E code. */
static int findings_for(struct serve_cached_view *e, const struct runview *v, struct store_finding **f, size_t *nf,
                        int *owned, int *stored) {
  *owned = 0;
  *stored = v->nfindings > 0;
  if (*stored) {
    *f = v->findings;
    *nf = v->nfindings;
    return GS_OK;
  }
  if (e && e->diag_done) {
    *f = e->diag;
    *nf = e->ndiag;
    return GS_OK;
  }
  int rc = doctor_diagnose_view(v, INT64_MIN, INT64_MAX, f, nf);
  if (rc)
    return rc;
  if (e) {
    e->diag = *f;
    e->ndiag = *nf;
    e->diag_done = 1;
  } else
    *owned = 1;
  return GS_OK;
}

/* ---- headline figures of one run ---- */

/* Mean of a series' stats over the run (NAN absent); also its min and max when asked. */
static double stat(const struct runview *v, const char *name, const char *labels, double *min, double *max) {
  struct runview_stats st;
  runview_stats(v, NULL, name, labels, INT64_MIN, INT64_MAX, &st);
  if (min)
    *min = st.min;
  if (max)
    *max = st.max;
  return st.mean;
}

static int max_gpu(const struct runview *v) {
  int max = -1;
  for (size_t i = 0; i < v->nseries; i++) {
    int g = runview_gpu_label(v->series[i].labels);
    if (g > max && v->series[i].count > 0 && !strncmp(v->series[i].name, "gpu.", 4))
      max = g;
  }
  return max;
}

/* Share of a GPU's samples with clocks cut for heat or power; NAN when unknown (or too long to read). */
static double throttled_share(const struct runview *v, const char *labels) {
  long i = runview_find(v, NULL, "gpu.throttle_reasons", labels);
  if (i < 0 || v->series[i].count <= 0 || v->series[i].count > RUNVIEW_SLOW_POINTS)
    return NAN;
  int64_t *t;
  double *x;
  size_t n;
  if (runview_samples(v, v->series[i].id, INT64_MIN, INT64_MAX, &t, &x, &n) || !n)
    return NAN;
  unsigned long long mask = gs_clock_reasons_mask(GS_REASON_THROTTLE);
  size_t k = 0;
  for (size_t j = 0; j < n; j++)
    k += x[j] >= 0 && x[j] < 1.8e19 && ((unsigned long long)x[j] & mask) != 0;
  free(t);
  free(x);
  return (double)k / (double)n;
}

/* Mean GPU util over every GPU, as SPARK_POINTS bucket means (NAN where nothing was sampled): one
 * read per GPU, of its raw samples or, for a long series, its 1 min rollups. */
static void spark(const struct runview *v, double *out) {
  double sum[SPARK_POINTS] = {0};
  size_t cnt[SPARK_POINTS] = {0};
  for (int i = 0; i < SPARK_POINTS; i++)
    out[i] = NAN;
  int64_t end = 0;
  for (size_t i = 0; i < v->nseries; i++)
    if (v->series[i].count > 0 && v->series[i].t_last > end)
      end = v->series[i].t_last;
  if (end <= 0)
    return;
  for (size_t i = 0; i < v->nseries; i++) {
    const struct store_series *s = &v->series[i];
    if (strcmp(s->name, "gpu.util_pct") || s->count <= 0)
      continue;
    int64_t *t = NULL;
    double *x = NULL, *mn = NULL, *mx = NULL;
    size_t n = 0;
    int rc = s->count > RUNVIEW_QUICK_POINTS
                 ? v->st->rollups_read(v->st, s->id, RUNVIEW_SLOW_RES_NS, &t, &mn, &mx, &x, &n)
                 : runview_samples(v, s->id, INT64_MIN, INT64_MAX, &t, &x, &n);
    for (size_t k = 0; !rc && k < n; k++) {
      if (!isfinite(x[k]) || t[k] < 0)
        continue;
      int64_t b = t[k] / (end / SPARK_POINTS + 1);
      if (b >= SPARK_POINTS)
        b = SPARK_POINTS - 1;
      sum[b] += x[k];
      cnt[b]++;
    }
    free(t);
    free(x);
    free(mn);
    free(mx);
  }
  for (int i = 0; i < SPARK_POINTS; i++)
    if (cnt[i])
      out[i] = sum[i] / (double)cnt[i];
}

/* A wall-clock time in seconds since the epoch, to the millisecond (null when unknown). */
static void jwall(FILE *out, const char *key, int64_t ns) {
  serve_json_key(out, key);
  if (ns > 0)
    fprintf(out, "%.3f,", (double)ns / GS_NS_PER_S);
  else
    fputs("null,", out);
}

static void run_record(FILE *out, const struct store_run *run, double duration_s) {
  serve_json_kstr(out, "id", run->id);
  serve_json_kstr(out, "name", run->name);
  serve_json_kstr(out, "group", run->group);
  serve_json_kstr(out, "status", run->status);
  serve_json_kstr(out, "host", run->host);
  serve_json_kstr(out, "user", run->user);
  serve_json_kstr(out, "command", run->command);
  serve_json_kstr(out, "tags", run->tags);
  jwall(out, "start", run->start_wall_ns);
  jwall(out, "end", run->end_wall_ns);
  serve_json_knum(out, "duration_s", duration_s);
}

/* The top finding worth showing: the first that is not a verdict (healthy, insufficient_data), else
 * the first. */
static const struct store_finding *top_finding(const struct store_finding *f, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!doctor_is_verdict(f[i].rule))
      return &f[i];
  return n ? &f[0] : NULL;
}

/* A run's row: record, throughput, GPU use, top finding, sparkline. Without a trailing brace. */
static void summary_members(FILE *out, const struct runview *v, const struct store_finding *f, size_t nf) {
  struct runview_step_figures sf;
  runview_step_figures(v, 0, v->nsteps, &sf);
  run_record(out, &v->run, v->duration_s);
  serve_json_knum(out, "samples_per_s", sf.samples_per_s);
  serve_json_knum(out, "median_step_s", sf.median_step_s);
  serve_json_knum(out, "data_share", sf.data_share);
  serve_json_knum(out, "steps", (double)sf.steps);
  serve_json_knum(out, "gpus", (double)(max_gpu(v) + 1));
  serve_json_knum(out, "gpu_util", stat(v, "gpu.util_pct", NULL, NULL, NULL));
  serve_json_key(out, "top_finding");
  const struct store_finding *top = top_finding(f, nf);
  if (top)
    serve_json_finding(out, top);
  else
    fputs("null", out);
  fputc(',', out);
  double sp[SPARK_POINTS];
  spark(v, sp);
  serve_json_key(out, "spark");
  fputc('[', out);
  for (int i = 0; i < SPARK_POINTS; i++) {
    if (i)
      fputc(',', out);
    gs_json_num(out, sp[i]);
  }
  fputs("],", out);
}

/* ---- /api/runs ---- */

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / GS_NS_PER_S;
}

/* A running run's live findings for its row (the doctor over the run so far), kept for
 * SERVE_LIVE_LIST_S so a list polled every few seconds does not diagnose each time. Owned by s. */
static void live_for_list(struct serve *s, const char *id, struct store_finding **f, size_t *n) {
  double now = mono_s();
  struct serve_live_list *slot = NULL, *oldest = &s->live[0];
  for (size_t i = 0; i < SERVE_LIVE_LIST && !slot; i++) {
    if (!strcmp(s->live[i].id, id))
      slot = &s->live[i];
    else if (s->live[i].at < oldest->at)
      oldest = &s->live[i];
  }
  if (!slot) {
    slot = oldest;
    free(slot->f);
    memset(slot, 0, sizeof *slot);
    snprintf(slot->id, sizeof slot->id, "%s", id);
  }
  if (!slot->f || now - slot->at >= SERVE_LIVE_LIST_S) {
    struct store_finding *nf = NULL;
    size_t nn = 0;
    if (!doctor_diagnose_live_run(s->st, id, 0, &nf, &nn, NULL)) {
      free(slot->f);
      slot->f = nf;
      slot->n = nn;
    }
    slot->at = now;
  }
  *f = slot->f;
  *n = slot->n;
}

/* One run's summary for the list, kept in s's cache once the run has finished (until it is renamed
 * or tagged). */
static void runs_summary(struct serve *s, FILE *out, const struct store_run *run) {
  int finished = strcmp(run->status, "running") != 0;
  struct serve_cached_summary *c = NULL;
  for (size_t k = 0; finished && k < s->nsummaries && !c; k++)
    if (!strcmp(s->summaries[k].id, run->id) && s->summaries[k].end_wall_ns == run->end_wall_ns)
      c = &s->summaries[k];
  if (c && (strcmp(c->name, run->name) || strcmp(c->tags, run->tags))) { /* renamed or tagged since */
    free(c->json);
    *c = s->summaries[--s->nsummaries];
    c = NULL;
  }
  if (c) {
    fputs(c->json, out);
    return;
  }
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  struct runview v;
  memset(&v, 0, sizeof v);
  if (!m || runview_load(s->st, run->id, &v)) {
    if (m)
      fclose(m);
    free(buf);
    runview_done(&v);
    fputc('{', out);
    run_record(out, run, NAN);
    fputs("\"error\":", out);
    gs_json_str(out, gs_last_error());
    fputc('}', out);
    return;
  }
  struct store_finding *f = v.findings;
  size_t nf = v.nfindings;
  if (!finished && !nf)
    live_for_list(s, run->id, &f, &nf); /* a running run: its live diagnosis */
  fputc('{', m);
  summary_members(m, &v, f, nf);
  serve_json_knum(m, "findings", (double)v.nfindings);
  fprintf(m, "\"top_finding_live\":%s,", !finished && !v.nfindings && nf ? "true" : "false");
  fseek(m, -1, SEEK_CUR); /* the last comma */
  fputc('}', m);
  fclose(m);
  runview_done(&v);
  fwrite(buf, 1, len, out);
  if (finished && s->nsummaries < SERVE_SUMMARY_CACHE) {
    struct serve_cached_summary *ns = realloc(s->summaries, (s->nsummaries + 1) * sizeof *ns);
    if (ns) {
      s->summaries = ns;
      c = &ns[s->nsummaries++];
      snprintf(c->id, sizeof c->id, "%s", run->id);
      snprintf(c->name, sizeof c->name, "%s", run->name);
      snprintf(c->tags, sizeof c->tags, "%s", run->tags);
      c->end_wall_ns = run->end_wall_ns;
      c->json = buf;
      buf = NULL;
    }
  }
  free(buf);
}

/* One run's row of the list: its summary, and its notes as they are now (`gpuscope note` adds
 * some to a finished run; null when they cannot be read). */
static void runs_row(struct serve *s, FILE *out, const struct store_run *run) {
  runs_summary(s, out, run);
  char **notes = NULL;
  size_t n = 0;
  fseek(out, -1, SEEK_CUR); /* the row's closing brace */
  fputs(",\"notes\":", out);
  if (s->st->notes_read(s->st, run->id, &notes, &n)) {
    fputs("null}", out);
    return;
  }
  fputc('[', out);
  for (size_t i = 0; i < n; i++) {
    if (i)
      fputc(',', out);
    gs_json_str(out, notes[i]);
  }
  fputs("]}", out);
  store_notes_free(notes, n);
}

/* A search's argument: NULL when absent or empty (a form's empty field). */
static const char *search_arg(const struct serve_args *a, const char *key) {
  const char *v = a->get(a->user, key);
  return v && *v ? v : NULL;
}

/* The search's filter, age, sort and columns from the arguments into q, *w and *f; 0, or -1 with
 * the reply set (400 naming the argument). */
static int search_args(const struct serve_args *a, struct serve_reply *r, struct report_search *q,
                       struct store_where **w, struct store_field *sort, struct store_field **f, size_t *nf) {
  const char *where = search_arg(a, "where"), *since = search_arg(a, "since"), *by = search_arg(a, "sort"),
             *cols = search_arg(a, "columns");
  int64_t age;
  const char *bad = NULL;
  if (where && !(*w = store_where_parse(where)))
    bad = "where";
  else if (since && gs_parse_duration(since, &age))
    bad = "since";
  else if (by && store_field_lookup(by + (by[0] == '-'), sort))
    bad = "sort";
  else if (cols && report_columns_parse(cols, f, nf))
    bad = "columns";
  if (bad) {
    serve_reply_error(r, MHD_HTTP_BAD_REQUEST, "%s: %s", bad, gs_last_error());
    return -1;
  }
  *q = (struct report_search){.where = *w,
                              .since_wall_ns = since ? gs_wall_ns() - age : 0,
                              .sort = by ? sort : NULL,
                              .sort_desc = by && by[0] == '-'};
  return 0;
}

/* /api/runs?where=&since=&sort=&columns=: the runs a search finds, in its order, each row with the
 * columns asked under "columns". */
static void api_runs_search(struct serve *s, const struct serve_args *a, struct serve_reply *r) {
  struct report_search q;
  struct store_where *w = NULL;
  struct store_field sort, *f = NULL;
  size_t nf = 0, n = 0;
  struct report_row *rows = NULL;
  if (!search_args(a, r, &q, &w, &sort, &f, &nf)) {
    if (report_rows_find(s->st, &q, &rows, &n)) {
      serve_reply_error(r, 500, "%s", gs_last_error());
    } else {
      fputs("{\"runs\":[", r->out);
      for (size_t i = 0; i < n; i++) {
        if (i)
          fputc(',', r->out);
        runs_row(s, r->out, &rows[i].run);
        if (nf) {
          fseek(r->out, -1, SEEK_CUR); /* the row's closing brace */
          fputs(",\"columns\":", r->out);
          report_row_json(r->out, &rows[i], f, nf);
          fputc('}', r->out);
        }
      }
      fputs("]}\n", r->out);
      report_rows_free(rows, n);
    }
  }
  store_where_free(w);
  free(f);
}

static void api_runs(struct serve *s, const struct serve_args *a, struct serve_reply *r) {
  if (search_arg(a, "where") || search_arg(a, "since") || search_arg(a, "sort") || search_arg(a, "columns")) {
    api_runs_search(s, a, r);
    return;
  }
  struct store_run *runs;
  size_t n;
  int rc = s->st->runs_list(s->st, &runs, &n);
  if (rc) {
    serve_reply_error(r, 500, "%s", gs_last_error());
    return;
  }
  fputs("{\"runs\":[", r->out);
  for (size_t i = 0; i < n; i++) {
    if (i)
      fputc(',', r->out);
    runs_row(s, r->out, &runs[i]);
  }
  fputs("]}\n", r->out);
  free(runs);
}

/* ---- /api/runs/REF ---- */

/* One row per GPU with a util or memory series, and per GPU the agent counted (gpu.count) that gave
 * no figure at all: its figures null. */
static void gpu_table(FILE *out, const struct runview *v) {
  int max = max_gpu(v);
  double cnt = runview_param_num(v, "gpu.count");
  int counted = cnt >= 1 && cnt <= 1024 ? (int)cnt : 0;
  if (counted - 1 > max)
    max = counted - 1;
  fputc('[', out);
  int first = 1;
  for (int g = 0; g <= max; g++) {
    char lab[16], key[48];
    snprintf(lab, sizeof lab, "gpu=%d", g);
    if (g >= counted && runview_find(v, NULL, "gpu.util_pct", lab) < 0 &&
        runview_find(v, NULL, "gpu.mem_used_bytes", lab) < 0)
      continue;
    if (!first)
      fputc(',', out);
    first = 0;
    snprintf(key, sizeof key, "gpu.%d.name", g);
    const char *name = runview_param(v, key);
    double umin, mpeak, mtot, plim, tmax;
    fputc('{', out);
    serve_json_knum(out, "index", g);
    serve_json_kstr(out, "name", name ? name : "");
    serve_json_knum(out, "util", stat(v, "gpu.util_pct", lab, &umin, NULL));
    serve_json_knum(out, "util_min", umin);
    serve_json_knum(out, "sm_active", stat(v, "gpu.sm_active_pct", lab, NULL, NULL));
    serve_json_knum(out, "tensor_active", stat(v, "gpu.tensor_active_pct", lab, NULL, NULL));
    serve_json_knum(out, "dram_active", stat(v, "gpu.dram_active_pct", lab, NULL, NULL));
    stat(v, "gpu.mem_used_bytes", lab, NULL, &mpeak);
    stat(v, "gpu.mem_total_bytes", lab, NULL, &mtot);
    serve_json_knum(out, "mem_peak_bytes", mpeak);
    serve_json_knum(out, "mem_total_bytes", mtot);
    serve_json_knum(out, "power_w", stat(v, "gpu.power_w", lab, NULL, NULL));
    stat(v, "gpu.power_limit_w", lab, NULL, &plim);
    serve_json_knum(out, "power_limit_w", plim);
    stat(v, "gpu.temp_c", lab, NULL, &tmax);
    serve_json_knum(out, "temp_max_c", tmax);
    serve_json_key(out, "throttled_share");
    gs_json_num(out, throttled_share(v, lab));
    fputc('}', out);
  }
  fputc(']', out);
}

/* The members of the run answer's "series" array: each series' identity and extent. */
static void series_entries(FILE *out, const struct runview *v) {
  for (size_t i = 0; i < v->nseries; i++) {
    const struct store_series *x = &v->series[i];
    fputs(i ? ",{" : "{", out);
    serve_json_knum(out, "id", (double)x->id);
    serve_json_kstr(out, "source", x->source);
    serve_json_kstr(out, "name", x->name);
    serve_json_kstr(out, "labels", x->labels);
    serve_json_kstr(out, "unit", x->unit);
    serve_json_kstr(out, "kind", gs_kind_name(x->kind));
    serve_json_knum(out, "count", (double)x->count);
    serve_json_knum(out, "t_first", x->count > 0 ? serve_sec(x->t_first) : NAN);
    serve_json_key(out, "t_last");
    gs_json_num(out, x->count > 0 ? serve_sec(x->t_last) : NAN);
    fputc('}', out);
  }
}

/* The members of the run answer's "events" array. */
static void event_entries(FILE *out, const struct runview *v) {
  for (size_t i = 0; i < v->nevents; i++) {
    const struct store_event *e = &v->events[i];
    fputs(i ? ",{" : "{", out);
    serve_json_knum(out, "t", serve_sec(e->t));
    serve_json_kstr(out, "kind", e->kind);
    serve_json_kstr(out, "name", e->name);
    serve_json_kstr(out, "labels", e->labels);
    serve_json_kstr(out, "text", e->text);
    serve_json_key(out, "value");
    gs_json_num(out, e->value);
    fputc('}', out);
  }
}

static void api_run(struct serve *s, const char *ref, struct serve_reply *r) {
  const struct runview *v;
  struct serve_cached_view fresh, *e;
  if (serve_view_get(s, ref, r, &v, &fresh, &e))
    return;
  FILE *out = r->out;
  if (e && e->run_json) { /* a finished run's answer does not change */
    fwrite(e->run_json, 1, e->run_json_len, out);
    return;
  }
  struct store_finding *f = NULL;
  size_t nf = 0;
  int free_f = 0, stored = 1;
  char diag_error[320] = "";
  if (findings_for(e, v, &f, &nf, &free_f, &stored)) {
    /* the doctor failed: the page, with why there are no findings (findings null, never []) */
    snprintf(diag_error, sizeof diag_error, "%s", gs_last_error());
    f = NULL;
    nf = 0;
  }
  fputs("{\"run\":{", out);
  summary_members(out, v, f, nf);
  serve_json_knum(out, "exit_code", v->run.exit_code);
  serve_json_knum(out, "interval_s", v->run.interval_ns > 0 ? serve_sec(v->run.interval_ns) : NAN);
  serve_json_kstr(out, "cwd", v->run.cwd);
  fseek(out, -1, SEEK_CUR);
  fputs("},\"params\":{", out);
  for (size_t i = 0; i < v->nparams; i++) {
    if (i)
      fputc(',', out);
    serve_json_key(out, v->params[i].key ? v->params[i].key : "");
    gs_json_str(out, v->params[i].value);
  }
  fputs("},\"notes\":[", out);
  for (size_t i = 0; i < v->nnotes; i++) {
    if (i)
      fputc(',', out);
    gs_json_str(out, v->notes[i]);
  }
  fputs("],\"series\":[", out);
  series_entries(out, v);
  fputs("],\"events\":[", out);
  event_entries(out, v);
  fputs("],\"findings\":", out);
  if (diag_error[0]) {
    fputs("null,\"findings_error\":", out);
    gs_json_str(out, diag_error);
  } else {
    serve_json_findings(out, f, nf);
  }
  fprintf(out, ",\"findings_stored\":%s,\"steps\":{", stored ? "true" : "false");
  struct runview_step_figures sf;
  runview_step_figures(v, 0, v->nsteps, &sf);
  serve_json_knum(out, "n", (double)sf.steps);
  serve_json_knum(out, "samples_per_s", sf.samples_per_s);
  serve_json_knum(out, "median_step_s", sf.median_step_s);
  serve_json_knum(out, "data_share", sf.data_share);
  serve_json_knum(out, "h2d_share", sf.h2d_share);
  serve_json_key(out, "compute_share");
  gs_json_num(out, sf.compute_share);
  fputs("},\"host\":{", out);
  serve_json_knum(out, "cpu_busy_pct", stat(v, "host.cpu.busy_pct", "cpu=total", NULL, NULL));
  double rss;
  serve_json_knum(out, "job_cpu_pct", stat(v, "tree.cpu_pct", "", NULL, NULL));
  stat(v, "tree.rss_bytes", "", NULL, &rss);
  serve_json_key(out, "job_rss_peak_bytes");
  gs_json_num(out, rss);
  fputs("},\"gpus\":", out);
  gpu_table(out, v);
  fputs("}\n", out);
  if (free_f)
    free(f);
  if (e && !fflush(out) && (e->run_json = malloc(r->len ? r->len : 1))) {
    memcpy(e->run_json, r->body, r->len);
    e->run_json_len = r->len;
  }
  serve_cached_view_done(&fresh);
}

/* ---- /api/runs/REF/series ---- */

/* A number argument: seconds (from, to) or a count (points). Returns 0, 1 absent, -1 bad. */
static int num_arg(const struct serve_args *a, const char *key, double *out) {
  const char *s = a->get(a->user, key);
  if (!s)
    return 1;
  char *end;
  double v = strtod(s, &end);
  if (!*s || *end || !isfinite(v))
    return -1;
  *out = v;
  return 0;
}

static int64_t sec_to_ns(double s) {
  return (int64_t)llround(s * GS_NS_PER_S);
}

/* The ids of id=N[,N...], each once, in the order first asked. Returns how many (at most max), or -1
 * for a list that is not one or holds more than max distinct ids. Looks at nothing else. */
static long ids_parse(const char *list, long long *ids, size_t max) {
  size_t n = 0;
  for (const char *p = list;;) {
    char *end;
    long long id = strtoll(p, &end, 10);
    if (end == p || (*end && *end != ','))
      return -1;
    size_t i = 0;
    while (i < n && ids[i] != id)
      i++;
    if (i == n) {
      if (n == max)
        return -1;
      ids[n++] = id;
    }
    if (!*end)
      return (long)n;
    p = end + 1;
  }
}

static void api_series(struct serve *s, const char *ref, const struct serve_args *a, struct serve_reply *r) {
  double from = -INFINITY, to = INFINITY, points = SERVE_DEFAULT_POINTS;
  int f1 = num_arg(a, "from", &from), f2 = num_arg(a, "to", &to), f3 = num_arg(a, "points", &points);
  /* seconds beyond 1e9 (31 years) are no time in a run, and would not survive nanoseconds */
  if (f1 < 0 || f2 < 0 || f3 < 0 || from > to || fabs(f1 ? 0 : from) > 1e9 || fabs(f2 ? 0 : to) > 1e9 ||
      !(points >= 1 && points <= SERVE_MAX_POINTS)) {
    serve_reply_error(r, MHD_HTTP_BAD_REQUEST,
                      "from and to are seconds since the run's start (from <= to, at most 1e9 either way), "
                      "points 1..%d",
                      SERVE_MAX_POINTS);
    return;
  }
  const char *idlist = a->get(a->user, "id");
  const char *name = a->get(a->user, "name");
  const char *band_arg = a->get(a->user, "band");
  int band = !band_arg || strcmp(band_arg, "0");
  if (!idlist && !name) {
    serve_reply_error(r, MHD_HTTP_BAD_REQUEST, "series needs id=N[,N...] or name=NAME[&labels=L]");
    return;
  }
  /* Every limit before any work: the ids' count, then (once the view says which series they are)
   * the points of the whole answer. */
  long long ids[SERVE_MAX_IDS];
  long nids = idlist ? ids_parse(idlist, ids, SERVE_MAX_IDS) : 0;
  if (nids < 0) {
    serve_reply_error(r, MHD_HTTP_BAD_REQUEST, "id: a comma-separated list of at most %d series ids", SERVE_MAX_IDS);
    return;
  }
  const struct runview *v;
  struct serve_cached_view fresh, *e;
  if (serve_view_get(s, ref, r, &v, &fresh, &e))
    return;
  struct store_series *pick = malloc((v->nseries ? v->nseries : 1) * sizeof *pick);
  size_t k = 0;
  if (!pick) {
    serve_reply_error(r, 500, "out of memory");
    goto fail;
  }
  const char *labels = a->get(a->user, "labels");
  if (name) { /* a step is never a value: a metric's steps come with its points ("step") */
    for (size_t i = 0; i < v->nseries; i++)
      if (!strcmp(v->series[i].name, name) && (!labels || runview_labels_match(v, v->series[i].labels, labels)) &&
          !store_series_is_steps(&v->series[i]))
        pick[k++] = v->series[i];
  } else
    for (long j = 0; j < nids; j++) {
      size_t i = 0;
      while (i < v->nseries && v->series[i].id != ids[j])
        i++;
      if (i == v->nseries) {
        serve_reply_error(r, MHD_HTTP_NOT_FOUND, "no such series in run %s", v->run.id);
        goto fail;
      }
      pick[k++] = v->series[i];
    }
  if ((double)k * points > SERVE_MAX_ANSWER_POINTS) {
    serve_reply_error(r, MHD_HTTP_BAD_REQUEST,
                      "%zu series of %.0f points: at most %d points in one answer (ask fewer points or series)", k,
                      points, SERVE_MAX_ANSWER_POINTS);
    goto fail;
  }
  int64_t fa = isfinite(from) ? sec_to_ns(from) : INT64_MIN, ta = isfinite(to) ? sec_to_ns(to) : INT64_MAX;
  r->stream = serve_series_stream_new(s, e, &fresh, v, pick, k, fa, ta, (size_t)points, band);
  if (!r->stream)
    serve_reply_error(r, 500, "out of memory");
fail:
  free(pick);
  serve_cached_view_done(&fresh);
}

/* ---- /api/runs/REF/findings ---- */

static void api_findings(struct serve *s, const char *ref, const struct serve_args *a, struct serve_reply *r) {
  const struct runview *v;
  struct serve_cached_view fresh, *e;
  if (serve_view_get(s, ref, r, &v, &fresh, &e))
    return;
  const char *live = a->get(a->user, "live");
  int want_live = live && strcmp(live, "0");
  struct store_finding *f = NULL;
  size_t nf = 0;
  int free_f = 0, stored = 0;
  struct runview_window w = {.span_s = NAN};
  int rc = want_live ? doctor_diagnose_live(v, 0, &f, &nf, &w) : findings_for(e, v, &f, &nf, &free_f, &stored);
  if (want_live)
    free_f = 1;
  if (rc) {
    serve_reply_error(r, 500, "%s", gs_last_error());
    goto fail;
  }
  fprintf(r->out, "{\"run\":");
  gs_json_str(r->out, v->run.id);
  fprintf(r->out, ",\"stored\":%s,\"live\":%s,\"window_s\":", stored ? "true" : "false", want_live ? "true" : "false");
  gs_json_num(r->out, w.span_s);
  fputs(",\"findings\":", r->out);
  serve_json_findings(r->out, f, nf);
  fputs("}\n", r->out);
  if (free_f)
    free(f);
fail:
  serve_cached_view_done(&fresh);
}

/* ---- /api/compare?runs=A,B,... ---- */

struct cmp_run {
  struct runview v;
  struct store *group; /* a group's store (serve_view_load), else NULL */
  struct runview_step_figures sf;
  struct store_finding *f;
  size_t nf;
  int diagnosed;
};

/* A params_differ (origin_differ) entry: the key (and its label) and each run's value (null when absent). */
struct differ_ctx {
  FILE *out;
  const struct runview *const *views;
  size_t n;
  int k;
  int label; /* origin_differ: each entry names the key as people know it too */
};

static void differ_one(void *user, const char *key) {
  struct differ_ctx *c = user;
  fputs(c->k++ ? ",{" : "{", c->out);
  serve_json_key(c->out, "key");
  gs_json_str(c->out, key);
  if (c->label) {
    fputc(',', c->out);
    serve_json_key(c->out, "label");
    gs_json_str(c->out, report_origin_label(key));
  }
  fputs(",\"values\":", c->out);
  report_param_values_json(c->out, c->views, c->n, key);
  fputc('}', c->out);
}

static int has_rule(const struct cmp_run *x, const char *rule) {
  for (size_t i = 0; i < x->nf; i++)
    if (!strcmp(x->f[i].rule, rule))
      return 1;
  return 0;
}

/* Loads each run of the comma-separated list into runs[*n], counting it in *n before its load (so
 * the caller frees even a failed one); on a bad list or run, the error reply and -1. */
static int compare_load(struct serve *s, const char *list, struct cmp_run *runs, size_t *n, struct serve_reply *r) {
  for (const char *p = list; *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char ref[256];
    if (!len || len >= sizeof ref || *n == SERVE_MAX_COMPARE) {
      serve_reply_error(r, MHD_HTTP_BAD_REQUEST, "runs: at most %d references, comma-separated", SERVE_MAX_COMPARE);
      return -1;
    }
    memcpy(ref, p, len);
    ref[len] = 0;
    struct cmp_run *x = &runs[(*n)++];
    int rc = serve_view_load(s, ref, &x->v, &x->group);
    if (rc) {
      serve_reply_error(r,
                        rc == GS_ENOENT   ? MHD_HTTP_NOT_FOUND
                        : rc == GS_EAMBIG ? MHD_HTTP_CONFLICT
                                          : 500,
                        "%s", gs_last_error());
      return -1;
    }
    runview_step_figures(&x->v, 0, x->v.nsteps, &x->sf);
    x->f = x->v.findings;
    x->nf = x->v.nfindings;
    if (!x->nf && !doctor_diagnose_view(&x->v, INT64_MIN, INT64_MAX, &x->f, &x->nf))
      x->diagnosed = 1;
    p = e ? e + 1 : p + len;
  }
  return 0;
}

/* The members of the compare answer's "findings" array, one per rule in first-seen order. */
static void compare_findings(FILE *out, const struct cmp_run *runs, size_t n) {
  int k = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t q = 0; q < runs[i].nf; q++) {
      const struct store_finding *f = &runs[i].f[q];
      int seen = 0;
      for (size_t j = 0; j < i && !seen; j++)
        seen = has_rule(&runs[j], f->rule);
      for (size_t j = 0; j < q && !seen; j++)
        seen = !strcmp(runs[i].f[j].rule, f->rule);
      if (seen)
        continue;
      fputs(k++ ? ",{" : "{", out);
      serve_json_kstr(out, "rule", f->rule);
      serve_json_kstr(out, "title", f->title);
      fputs("\"in\":[", out);
      for (size_t j = 0; j < n; j++)
        fprintf(out, "%s%s", j ? "," : "", has_rule(&runs[j], f->rule) ? "true" : "false");
      fputs("],\"lost_s\":[", out);
      for (size_t j = 0; j < n; j++) {
        double lost = NAN;
        for (size_t m = 0; m < runs[j].nf; m++)
          if (!strcmp(runs[j].f[m].rule, f->rule))
            lost = runs[j].f[m].lost_s;
        if (j)
          fputc(',', out);
        gs_json_num(out, lost);
      }
      fputs("]}", out);
    }
}

static void api_compare(struct serve *s, const struct serve_args *a, struct serve_reply *r) {
  const char *list = a->get(a->user, "runs");
  if (!list || !*list) {
    serve_reply_error(r, MHD_HTTP_BAD_REQUEST, "compare needs runs=A,B[,...] (the first is the baseline)");
    return;
  }
  struct cmp_run *runs = calloc(SERVE_MAX_COMPARE, sizeof *runs);
  size_t n = 0;
  if (!runs) {
    serve_reply_error(r, 500, "out of memory");
    return;
  }
  if (compare_load(s, list, runs, &n, r))
    goto fail;
  FILE *out = r->out;
  fputs("{\"baseline\":", out);
  gs_json_str(out, runs[0].v.run.id);
  fputs(",\"runs\":[", out);
  for (size_t i = 0; i < n; i++) {
    fputs(i ? ",{" : "{", out);
    summary_members(out, &runs[i].v, runs[i].f, runs[i].nf);
    serve_json_knum(out, "h2d_share", runs[i].sf.h2d_share);
    serve_json_knum(out, "compute_share", runs[i].sf.compute_share);
    serve_json_knum(out, "sm_active", stat(&runs[i].v, "gpu.sm_active_pct", NULL, NULL, NULL));
    double peak;
    stat(&runs[i].v, "gpu.mem_used_bytes", NULL, NULL, &peak);
    serve_json_knum(out, "gpu_mem_peak_bytes", peak);
    serve_json_knum(out, "host_cpu_pct", stat(&runs[i].v, "host.cpu.busy_pct", "cpu=total", NULL, NULL));
    serve_json_key(out, "speedup");
    gs_json_num(out, runview_step_speedup(&runs[0].sf, &runs[i].sf));
    fputc('}', out);
  }
  /* Params whose value differs between the runs (absent counts as a value), in first-seen order. */
  fputs("],\"params_differ\":[", out);
  const struct runview *views[SERVE_MAX_COMPARE];
  for (size_t i = 0; i < n; i++)
    views[i] = &runs[i].v;
  struct differ_ctx dc = {.out = out, .views = views, .n = n};
  report_params_differ(views, n, differ_one, &dc);
  /* Where the runs came from, where it differs: git, Python, torch, the driver (report/origin.c). */
  fputs("],\"origin_differ\":[", out);
  struct differ_ctx oc = {.out = out, .views = views, .n = n, .label = 1};
  report_origin_differ(views, n, differ_one, &oc);
  /* Every rule any run has: in which runs, and its time lost in each. */
  fputs("],\"findings\":[", out);
  compare_findings(out, runs, n);
  fputs("]}\n", out);
fail:
  for (size_t i = 0; i < n; i++) {
    if (runs[i].diagnosed)
      free(runs[i].f);
    runview_done(&runs[i].v);
    if (runs[i].group)
      runs[i].group->close(runs[i].group);
  }
  free(runs);
}

/* ---- routing ---- */

void serve_api(struct serve *s, const char *path, const struct serve_args *a, struct serve_reply *r) {
  if (!strcmp(path, "runs")) {
    api_runs(s, a, r);
    return;
  }
  if (!strcmp(path, "compare")) {
    api_compare(s, a, r);
    return;
  }
  if (!strncmp(path, "runs/", 5) && path[5]) {
    char ref[256];
    const char *p = path + 5, *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len >= sizeof ref || !len) {
      serve_reply_error(r, MHD_HTTP_BAD_REQUEST, "bad run reference");
      return;
    }
    memcpy(ref, p, len);
    ref[len] = 0;
    if (!e) {
      api_run(s, ref, r);
      return;
    }
    if (!strcmp(e, "/series")) {
      api_series(s, ref, a, r);
      return;
    }
    if (!strcmp(e, "/findings")) {
      api_findings(s, ref, a, r);
      return;
    }
    if (!strcmp(e, "/log")) {
      int status = 500;
      if (serve_log_json(s->st, ref, a->get(a->user, "from"), a->get(a->user, "tail"), r->out, &status))
        serve_reply_error(r, status, "%s", gs_last_error());
      return;
    }
  }
  serve_reply_error(r, MHD_HTTP_NOT_FOUND, "no such API: /api/%s (see docs/api.md)", path);
}
