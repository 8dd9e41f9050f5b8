/* report/html: `gpuscope report RUN --html FILE` — one self-contained page (inline CSS and SVG; no
 * script, no fonts, no network) with the run's facts and params, the findings with their evidence and
 * fixes, and the charts: per-GPU utilisation, SM activity, memory, power and temperature with
 * throttling shaded, each CPU core as a heat map, the job's process-tree CPU, the step-time split over
 * time, and a timeline of idle gaps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "report/report_int.h"

#define HEAT_COLS 300 /* time buckets of the CPU heat map and the step chart */
#define MAX_CORES 64  /* rows of the heat map */
#define TOP_PROCS 6   /* processes drawn beside the tree's total */

void rp_html_begin(FILE *out, const char *title) {
  fputs("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>\n<title>", out);
  rp_html(out, title);
  fputs("</title>\n<style>\n"
        "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:980px;"
        "color:#222;padding:0 12px}\n"
        "h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}\n"
        "table{border-collapse:collapse;margin:6px 0}th,td{padding:3px 10px 3px 0;text-align:left;"
        "vertical-align:top}th{color:#555;font-weight:600}\n"
        "table.cmp td,table.cmp th{border-bottom:1px solid #eee;padding-right:18px}\n"
        "code,pre{font:12.5px/1.4 ui-monospace,Menlo,Consolas,monospace}\n"
        "pre{background:#f6f7f9;border:1px solid #e3e5e8;padding:10px;overflow-x:auto;white-space:pre-wrap}\n"
        ".finding{border-left:5px solid #999;padding:4px 12px;margin:14px 0;background:#fcfcfd}\n"
        ".high{border-color:#c62828}.medium{border-color:#ef8f00}.low{border-color:#1f77b4}"
        ".info{border-color:#2e7d32}\n"
        ".sev{font-weight:700;text-transform:uppercase;font-size:12px;margin-right:6px}\n"
        ".cost{color:#555}.app{color:#c62828}.gone{color:#2e7d32}\n"
        "svg.chart{display:block;max-width:100%;height:auto}figure{margin:10px 0}\n"
        ".plot{fill:#fff;stroke:#ccc}.grid{stroke:#eee}.ttl{font-size:13px;font-weight:600}\n"
        ".yl{font-size:10px;text-anchor:end;fill:#666}.xl{font-size:10px;text-anchor:middle;fill:#666}\n"
        ".lg,.lab{font-size:11px;fill:#333}\n"
        "</style></head><body>\n",
        out);
}

void rp_html_end(FILE *out) {
  fputs("<p class='cost'>Made by gpuscope. Missing data is drawn as a gap, never as zero.</p>\n</body></html>\n", out);
}

/* ---- facts and findings ---- */

static void row(FILE *out, const char *k, const char *v) {
  fprintf(out, "<tr><th>%s</th><td>", k);
  rp_html(out, v);
  fputs("</td></tr>\n", out);
}

static void facts(FILE *out, const struct report_run *r) {
  char b[256], dur[32];
  fputs("<table>\n", out);
  row(out, "status", r->run.status);
  rp_duration(dur, sizeof dur, r->duration_s);
  snprintf(b, sizeof b, "%s, exit %d", dur, r->run.exit_code);
  row(out, "duration", b);
  row(out, "command", r->run.command);
  row(out, "directory", r->run.cwd);
  row(out, "host", r->run.host);
  row(out, "user", r->run.user);
  row(out, "started", rp_when(r->run.start_wall_ns, b, sizeof b));
  row(out, "GPUs", rp_gpus(r, b, sizeof b));
  if (r->run.tags[0])
    row(out, "tags", r->run.tags);
  fputs("</table>\n", out);
  int any = 0;
  for (size_t i = 0; i < r->nparams; i++) {
    const char *k = r->params[i].key ? r->params[i].key : "";
    if (!any++)
      fputs("<h2>Params</h2>\n<table>\n", out);
    fputs("<tr><th>", out);
    rp_html(out, k);
    fputs("</th><td>", out);
    rp_html(out, r->params[i].value);
    fputs("</td></tr>\n", out);
  }
  if (any)
    fputs("</table>\n", out);
  char b1[64], b2[64], b3[64], b4[64];
  fputs("<h2>Figures</h2>\n<table>\n", out);
  snprintf(b, sizeof b, "%zu steps, %s samples/s, median step %s", r->steps.steps,
           rp_num(b1, sizeof b1, r->steps.samples_per_s, 1, ""),
           rp_num(b2, sizeof b2, r->steps.median_step_s * 1e3, 1, "ms"));
  row(out, "training loop", r->steps.steps ? b : "no step timings (the job did not use the gpuscope client)");
  snprintf(b, sizeof b, "data wait %s, host-to-device %s, compute %s", rp_pct(b1, sizeof b1, r->steps.data_share),
           rp_pct(b2, sizeof b2, r->steps.h2d_share), rp_pct(b3, sizeof b3, r->steps.compute_share));
  row(out, "step time", b);
  snprintf(b, sizeof b, "host CPU %s; job CPU %s of one core; job RSS peak %s",
           rp_num(b1, sizeof b1, r->host_cpu, 0, "%"), rp_num(b2, sizeof b2, r->job_cpu, 0, "%"),
           rp_bytes(b3, sizeof b3, r->job_rss_peak));
  row(out, "CPU", b);
  if (r->ngpus) {
    snprintf(b, sizeof b, "util %s, SM active %s, memory peak %s", rp_num(b1, sizeof b1, r->gpu_util, 0, "%"),
             rp_num(b2, sizeof b2, r->sm_active, 0, "%"), rp_bytes(b3, sizeof b3, r->gpu_mem_peak));
    row(out, "GPU", b);
    snprintf(b, sizeof b, "%s per sample; idle GPU-hours %s of %s", rp_num(b1, sizeof b1, r->energy_per_sample, 3, "J"),
             rp_num(b2, sizeof b2, r->gpu_idle_hours, 4, ""), rp_num(b4, sizeof b4, r->gpu_hours, 4, ""));
    row(out, "energy", b);
  }
  fputs("</table>\n", out);
}

static void ev_row(void *user, const char *key, size_t klen, const char *val, size_t vlen) {
  FILE *out = user;
  char k[128], v[512];
  snprintf(k, sizeof k, "%.*s", (int)(klen < 127 ? klen : 127), key);
  rp_ev_value(v, sizeof v, key, klen, val, vlen);
  fputs("<tr><th><code>", out);
  rp_html(out, k);
  fputs("</code></th><td><code>", out);
  rp_html(out, v);
  fputs("</code></td></tr>\n", out);
}

static void findings(FILE *out, const struct report_run *r) {
  fprintf(out, "<h2>Findings%s</h2>\n", r->diagnosed ? " (diagnosed now)" : "");
  if (!r->nfindings)
    fputs("<p>The diagnosis could not run on this run.</p>\n", out);
  for (size_t i = 0; i < r->nfindings; i++) {
    const struct store_finding *f = &r->findings[i];
    char sev[16], rule[32];
    rp_ident(sev, sizeof sev, f->severity);
    rp_ident(rule, sizeof rule, f->rule);
    fprintf(out, "<div class='finding %s'><p><span class='sev'>%s</span><b><code>%s</code></b> — ", sev, sev, rule);
    rp_html(out, f->title);
    fputs("</p>\n", out);
    if (strcmp(rule, "healthy")) {
      char lost[32] = "";
      if (isfinite(f->lost_s) && f->lost_s > 0)
        snprintf(lost, sizeof lost, " (%.1f s)", f->lost_s);
      fprintf(out, "<p class='cost'>costs %.0f%% of the run%s; estimated %.2fx faster if fixed</p>\n",
              (isfinite(f->share) ? f->share : 0) * 100, lost, isfinite(f->speedup) ? f->speedup : 1);
    }
    if (rp_json_object_valid(f->evidence)) {
      fputs("<table>\n", out);
      rp_json_members(f->evidence, ev_row, out);
      fputs("</table>\n", out);
    } else if (f->evidence[0]) {
      fputs("<p>evidence (not valid JSON): <code>", out);
      rp_html(out, f->evidence);
      fputs("</code></p>\n", out);
    }
    fputs("<pre>", out);
    rp_html(out, f->fix);
    fputs("</pre></div>\n", out);
  }
  char comb[320];
  if (rp_combined_line(comb, sizeof comb, r->findings, r->nfindings)[0]) {
    fputs("<p class='cost'><b>Together:</b> ", out);
    rp_html(out, comb);
    fputs("</p>\n", out);
  }
}

/* ---- charts ---- */

/* The span of time the charts show: the run, or the samples when the run has no end. */
static double run_span(const struct report_run *r) {
  if (isfinite(r->duration_s) && r->duration_s > 0)
    return r->duration_s;
  return 1;
}

/* Throttling as spans: from each throttle_start to its throttle_stop (same GPU and reason), or to the
 * end of the run when it never stopped. */
static void throttle_spans(struct rp_chart *c, const struct report_run *r, double end) {
  for (size_t i = 0; i < r->nevents; i++) {
    const struct store_event *e = &r->events[i];
    if (!strcmp(e->kind, "gpu_lost")) {
      char t[300];
      snprintf(t, sizeof t, "GPU lost (%s)", e->labels);
      rp_chart_mark(c, (double)e->t / 1e9, "#000", t);
    }
    /* Only the reasons the doctor counts as throttling (heat, power), from core's one table: a chart
     * that shaded SyncBoost or an applications-clocks setting would disagree with the finding. */
    const struct gs_clock_reason *why = gs_clock_reason_named(e->name);
    if (strcmp(e->kind, "throttle_start") || !why || !(why->flags & GS_REASON_THROTTLE))
      continue;
    double t1 = end;
    for (size_t j = i + 1; j < r->nevents; j++)
      if (!strcmp(r->events[j].kind, "throttle_stop") && !strcmp(r->events[j].name, e->name) &&
          !strcmp(r->events[j].labels, e->labels)) {
        t1 = (double)r->events[j].t / 1e9;
        break;
      }
    char title[400];
    snprintf(title, sizeof title, "%s %s: %.1f s to %.1f s", e->labels, e->name, (double)e->t / 1e9, t1);
    rp_chart_span(c, (double)e->t / 1e9, t1, "#d62728", title);
  }
}

static void gpu_chart(FILE *out, struct store *st, const struct report_run *r, const char *metric, const char *title,
                      const char *unit, double ymax_fixed, const char *limit_metric) {
  struct rp_points pts[64];
  int labels[64], n = 0;
  double ymax = ymax_fixed, limit = NAN;
  for (size_t i = 0; i < r->nseries && n < 64; i++) {
    const struct store_series *s = &r->series[i];
    int g = runview_gpu_label(s->labels);
    if (g < 0 || strcmp(s->source, "nvml") || strcmp(s->name, metric) || s->count <= 0)
      continue;
    if (rp_points_load(st, s, run_span(r), &pts[n]))
      continue;
    labels[n] = g;
    for (size_t k = 0; k < pts[n].n && !isfinite(ymax_fixed); k++)
      if (!(pts[n].mx[k] <= ymax))
        ymax = pts[n].mx[k];
    n++;
  }
  if (limit_metric)
    for (size_t i = 0; i < r->nseries; i++)
      if (!strcmp(r->series[i].name, limit_metric) && runview_gpu_label(r->series[i].labels) >= 0) {
        struct series_stats ls;
        if (!report_view_stats(&r->view, "nvml", limit_metric, r->series[i].labels, &ls) &&
            ls.n && !(ls.max <= limit))
          limit = ls.max;
      }
  if (n) {
    if (isfinite(limit) && !(limit <= ymax))
      ymax = limit;
    struct rp_chart c;
    rp_chart_begin(&c, out, title, 0, run_span(r), 0,
                   isfinite(ymax) && ymax > 0 ? ymax * (isfinite(ymax_fixed) ? 1 : 1.05) : 1, unit, 200);
    throttle_spans(&c, r, run_span(r));
    rp_chart_hline(&c, limit, "#555", "limit");
    for (int k = 0; k < n; k++) {
      char lab[32];
      snprintf(lab, sizeof lab, "GPU %d", labels[k]);
      rp_chart_series(&c, &pts[k], rp_color(labels[k]), lab);
    }
    rp_chart_end(&c);
  }
  for (int k = 0; k < n; k++)
    rp_points_free(&pts[k]);
}

/* Mean of p's points falling in each of ncol buckets over [0, span); NAN where none. An empty bucket
 * right after a filled one within three sample spacings holds its value (sampling jitter is not a
 * gap); a longer silence stays a gap. */
static void bucket_means(const struct rp_points *p, double span, double *out, int ncol) {
  int cnt[HEAT_COLS] = {0};
  for (int k = 0; k < ncol; k++)
    out[k] = 0;
  for (size_t i = 0; i < p->n; i++) {
    double x = p->t[i] / span * ncol;
    if (!(x >= 0 && x < ncol))
      continue;
    int b = (int)x;
    out[b] += p->mean[i];
    cnt[b]++;
  }
  double width = span / ncol;
  double h = p->step_s > 0 ? ceil(3 * p->step_s / width) : 0;
  int hold = h < ncol ? (int)h : ncol, since = hold + 1;
  for (int k = 0; k < ncol; k++) {
    if (cnt[k]) {
      out[k] /= cnt[k];
      since = 0;
    } else if (k && ++since <= hold && isfinite(out[k - 1])) {
      out[k] = out[k - 1];
    } else {
      out[k] = NAN;
    }
  }
}

/* Columns for a chart of n points: one per point or two, within [10, HEAT_COLS]. */
static int columns(size_t n) {
  return n < 10 ? 10 : n > HEAT_COLS ? HEAT_COLS : (int)n;
}

static void cpu_heatmap(FILE *out, struct store *st, const struct report_run *r) {
  int cores[MAX_CORES];
  size_t idx[MAX_CORES];
  int n = 0, more = 0;
  for (size_t i = 0; i < r->nseries; i++) {
    const struct store_series *s = &r->series[i];
    if (strcmp(s->source, "host") || strcmp(s->name, "host.cpu.busy_pct") || strncmp(s->labels, "cpu=", 4) ||
        !(s->labels[4] >= '0' && s->labels[4] <= '9'))
      continue;
    if (n == MAX_CORES) {
      more++;
      continue;
    }
    cores[n] = atoi(s->labels + 4);
    idx[n++] = i;
  }
  if (!n)
    return;
  double span = run_span(r);
  int rowh = n > 32 ? 6 : 12;
  struct rp_chart c;
  rp_chart_begin(&c, out, more ? "CPU busy per core (first 64 cores)" : "CPU busy per core", 0, span, 0, n, NULL,
                 40 + n * rowh);
  int ncol = columns((size_t)r->series[idx[0]].count);
  double cw = (double)(c.w - c.ml - c.mr) / ncol;
  double buckets[HEAT_COLS];
  for (int k = 0; k < n; k++) {
    struct rp_points p;
    if (rp_points_load(st, &r->series[idx[k]], span, &p))
      continue;
    bucket_means(&p, span, buckets, ncol);
    double y = c.mt + (double)k * (c.h - c.mt - c.mb) / n, h = (double)(c.h - c.mt - c.mb) / n;
    for (int b = 0; b < ncol; b++) {
      if (!isfinite(buckets[b]))
        continue; /* no sample: the background shows through */
      double v = fmin(fmax(buckets[b], 0), 100) / 100;
      fprintf(out, "<rect x='%.1f' y='%.1f' width='%.2f' height='%.1f' fill='hsl(%d,85%%,%d%%)'/>", c.ml + b * cw, y,
              cw + 0.3, h, (int)(55 - 55 * v), (int)(96 - 56 * v));
    }
    fprintf(out, "\n<text x='%d' y='%.1f' class='yl'>cpu %d</text>\n", c.ml - 4, y + h - 1, cores[k]);
    rp_points_free(&p);
  }
  fprintf(out,
          "<text x='%d' y='%d' class='lg'>light: idle</text><text x='%d' y='%d' class='lg'>dark red: 100%%</text>\n",
          c.w - c.mr + 10, c.mt + 10, c.w - c.mr + 10, c.mt + 26);
  rp_chart_end(&c);
}

struct busy {
  size_t series;
  double mean;
};

static int by_busy(const void *a, const void *b) {
  const struct busy *x = a, *y = b;
  return x->mean < y->mean ? 1 : x->mean > y->mean ? -1 : 0;
}

static void job_cpu(FILE *out, struct store *st, const struct report_run *r) {
  long ti = store_series_find(r->series, r->nseries, "proctree", "tree.cpu_pct", "");
  if (ti < 0 || r->series[ti].count <= 0)
    return;
  struct rp_points tree;
  if (rp_points_load(st, &r->series[ti], run_span(r), &tree))
    return;
  /* The busiest processes, by mean CPU. */
  struct busy *procs = calloc(r->nseries ? r->nseries : 1, sizeof *procs);
  size_t np = 0;
  for (size_t i = 0; procs && i < r->nseries; i++) {
    const struct store_series *s = &r->series[i];
    struct series_stats ss;
    if (strcmp(s->source, "proctree") || strcmp(s->name, "proc.cpu_pct") ||
        report_view_stats(&r->view, "proctree", "proc.cpu_pct", s->labels, &ss) || !ss.n)
      continue;
    procs[np++] = (struct busy){i, ss.mean};
  }
  if (np)
    qsort(procs, np, sizeof *procs, by_busy);
  double ymax = 100;
  for (size_t k = 0; k < tree.n; k++)
    if (tree.mx[k] > ymax)
      ymax = tree.mx[k];
  struct rp_chart c;
  rp_chart_begin(&c, out, "The job's CPU (100% = one core)", 0, run_span(r), 0, ymax * 1.05, "%", 200);
  rp_chart_series(&c, &tree, "#333", "whole job");
  for (size_t k = 0; k < np && k < TOP_PROCS; k++) {
    struct rp_points p;
    const struct store_series *s = &r->series[procs[k].series];
    if (rp_points_load(st, s, run_span(r), &p))
      continue;
    char lab[64], comm[32] = "";
    int pid = atoi(s->labels + (strncmp(s->labels, "pid=", 4) ? 0 : 4));
    for (size_t e = 0; e < r->nevents; e++)
      if (!strcmp(r->events[e].kind, "proc_start") && r->events[e].value == pid) {
        snprintf(comm, sizeof comm, " %.24s", r->events[e].name);
        break;
      }
    snprintf(lab, sizeof lab, "pid %d%s", pid, comm);
    rp_chart_series(&c, &p, rp_color((int)k), lab);
    rp_points_free(&p);
  }
  rp_chart_end(&c);
  free(procs);
  rp_points_free(&tree);
}

/* Bucketed mean of a client step series; *ok set when it had any point. */
static void step_buckets(struct store *st, const struct report_run *r, const char *name, double span, double *out,
                         int ncol, int *ok) {
  *ok = 0;
  for (int k = 0; k < HEAT_COLS; k++)
    out[k] = NAN;
  long i = store_series_find(r->series, r->nseries, "client", name, "");
  struct rp_points p;
  if (i < 0 || rp_points_load(st, &r->series[i], span, &p))
    return;
  bucket_means(&p, span, out, ncol);
  *ok = p.n > 0;
  rp_points_free(&p);
}

static void step_chart(FILE *out, struct store *st, const struct report_run *r) {
  double span = run_span(r), total[HEAT_COLS], layer[3][HEAT_COLS];
  int ok_total, ok[3];
  long ti = store_series_find(r->series, r->nseries, "client", "step.total_s", "");
  if (ti < 0)
    return;
  int ncol = columns((size_t)r->series[ti].count / 3);
  step_buckets(st, r, "step.total_s", span, total, ncol, &ok_total);
  if (!ok_total)
    return;
  step_buckets(st, r, "step.data_s", span, layer[0], ncol, &ok[0]);
  step_buckets(st, r, "step.h2d_s", span, layer[1], ncol, &ok[1]);
  step_buckets(st, r, "step.compute_s", span, layer[2], ncol, &ok[2]);
  double ymax = 0;
  for (int b = 0; b < ncol; b++) {
    if (isfinite(total[b]) && total[b] > ymax)
      ymax = total[b];
    /* What the phases do not account for is drawn as compute when compute itself is absent. */
    if (!ok[2] && isfinite(total[b]))
      layer[2][b] = total[b] - (isfinite(layer[0][b]) ? layer[0][b] : 0) - (isfinite(layer[1][b]) ? layer[1][b] : 0);
  }
  struct rp_chart c;
  rp_chart_begin(&c, out, "Step time: data wait, host-to-device, compute (mean per step)", 0, span, 0,
                 ymax > 0 ? ymax * 1.05 * 1e3 : 1, "ms", 200);
  static const char *names[3] = {"data wait", "host-to-device", "compute"},
                    *colors[3] = {"#d62728", "#ff7f0e", "#1f77b4"};
  double base[HEAT_COLS] = {0};
  double bw = span / ncol;
  for (int l = 0; l < 3; l++) {
    fprintf(out, "<path fill='%s' fill-opacity='0.75' stroke='none' d='", colors[l]);
    for (int a = 0; a < ncol;) {
      if (!isfinite(total[a]) || !isfinite(layer[l][a])) {
        a++;
        continue;
      }
      int b = a;
      while (b < ncol && isfinite(total[b]) && isfinite(layer[l][b]))
        b++;
      fprintf(out, "M%.1f %.1f", rp_chart_x(&c, a * bw), rp_chart_y(&c, base[a] * 1e3));
      for (int k = a; k < b; k++)
        fprintf(out, "L%.1f %.1fL%.1f %.1f", rp_chart_x(&c, k * bw),
                rp_chart_y(&c, (base[k] + fmax(layer[l][k], 0)) * 1e3), rp_chart_x(&c, (k + 1) * bw),
                rp_chart_y(&c, (base[k] + fmax(layer[l][k], 0)) * 1e3));
      for (int k = b; k-- > a;)
        fprintf(out, "L%.1f %.1fL%.1f %.1f", rp_chart_x(&c, (k + 1) * bw), rp_chart_y(&c, base[k] * 1e3),
                rp_chart_x(&c, k * bw), rp_chart_y(&c, base[k] * 1e3));
      fputc('Z', out);
      a = b;
    }
    fputs("'/>\n", out);
    for (int k = 0; k < ncol; k++)
      if (isfinite(layer[l][k]))
        base[k] += fmax(layer[l][k], 0);
    if (l == 1 && !ok[1])
      continue;
    int y = c.mt + 10 + 16 * c.legend++;
    fprintf(out, "<rect x='%d' y='%d' width='12' height='8' fill='%s'/><text x='%d' y='%d' class='lg'>%s</text>\n",
            c.w - c.mr + 10, y - 7, colors[l], c.w - c.mr + 26, y, names[l]);
  }
  for (size_t e = 0; e < r->nevents; e++)
    if (!strcmp(r->events[e].kind, "mark"))
      rp_chart_mark(&c, (double)r->events[e].t / 1e9, "#555", r->events[e].name);
  rp_chart_end(&c);
}

/* The training loop's row of the idle timeline: the gaps between the view's steps that the doctor
 * counts as stalls (doctor_is_stall against the median gap, as periodic_stall reads them), so the
 * chart marks exactly the stalls a finding counts. */
static void step_gaps(FILE *out, const struct rp_chart *c, const struct runview *v, double y, double rh) {
  size_t n = v->nsteps;
  if (n < 3)
    return;
  double *sorted = malloc((n - 1) * sizeof *sorted);
  if (!sorted)
    return;
  for (size_t k = 1; k < n; k++)
    sorted[k - 1] = ((double)v->steps[k].t - (double)v->steps[k - 1].t) / 1e9;
  qsort(sorted, n - 1, sizeof *sorted, rp_cmp_double);
  double med = sorted[(n - 1) / 2];
  free(sorted);
  for (size_t k = 1; k < n; k++) {
    double t0 = (double)v->steps[k - 1].t / 1e9, t1 = (double)v->steps[k].t / 1e9;
    if (!doctor_is_stall(t1 - t0, med))
      continue;
    fprintf(out,
            "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#ff7f0e'><title>no step for %.2f s"
            "</title></rect>\n",
            rp_chart_x(c, t0), y + 3, fmax(rp_chart_x(c, t1) - rp_chart_x(c, t0), 1), rh - 6, t1 - t0);
  }
}

/* One row per GPU (util below 10%) and one for the training loop (the gaps between steps the doctor
 * counts as stalls), with the job's marks: where the accelerator waited. */
static void idle_timeline(FILE *out, struct store *st, const struct report_run *r) {
  int gpus = 0;
  for (size_t i = 0; i < r->nseries; i++)
    gpus += !strcmp(r->series[i].name, "gpu.util_pct") && runview_gpu_label(r->series[i].labels) >= 0;
  long si = store_series_find(r->series, r->nseries, "client", "step.total_s", "");
  int rows = gpus + (si >= 0);
  if (!rows)
    return;
  double span = run_span(r);
  struct rp_chart c;
  rp_chart_begin(&c, out, "Idle gaps: GPU util below 10% (per GPU), long pauses between steps", 0, span, 0, rows, NULL,
                 44 + 22 * rows);
  double rh = (double)(c.h - c.mt - c.mb) / rows;
  int row_i = 0;
  for (size_t i = 0; i < r->nseries; i++) {
    const struct store_series *s = &r->series[i];
    int g = runview_gpu_label(s->labels);
    if (g < 0 || strcmp(s->name, "gpu.util_pct"))
      continue;
    struct rp_points p;
    double y = c.mt + row_i * rh;
    fprintf(out, "<text x='%d' y='%.1f' class='yl'>GPU %d</text>\n", c.ml - 4, y + rh / 2 + 4, g);
    row_i++;
    if (rp_points_load(st, s, span, &p))
      continue;
    double gap = p.step_s > 0 ? fmax(3 * p.step_s, 0.5) : INFINITY;
    for (size_t k = 0; k < p.n; k++) {
      if (p.mn[k] >= 10)
        continue;
      size_t e = k;
      while (e + 1 < p.n && p.mn[e + 1] < 10 && p.t[e + 1] - p.t[e] <= gap)
        e++;
      double t1 = e + 1 < p.n && p.t[e + 1] - p.t[e] <= gap ? p.t[e + 1] : p.t[e] + (p.step_s > 0 ? p.step_s : 0);
      double x0 = rp_chart_x(&c, p.t[k]), x1 = rp_chart_x(&c, t1);
      fprintf(out,
              "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#d62728'><title>idle %.1f s to %.1f "
              "s</title></rect>\n",
              x0, y + 3, fmax(x1 - x0, 1), rh - 6, p.t[k], t1);
      k = e;
    }
    rp_points_free(&p);
  }
  if (si >= 0) {
    double y = c.mt + row_i * rh;
    fprintf(out, "<text x='%d' y='%.1f' class='yl'>steps</text>\n", c.ml - 4, y + rh / 2 + 4);
    step_gaps(out, &c, &r->view, y, rh);
  }
  for (size_t e = 0; e < r->nevents; e++)
    if (!strcmp(r->events[e].kind, "mark"))
      rp_chart_mark(&c, (double)r->events[e].t / 1e9, "#555", r->events[e].name);
  rp_chart_end(&c);
}

int report_html(FILE *out, struct store *st, const struct report_run *r) {
  char title[200];
  snprintf(title, sizeof title, "gpuscope report %s %s", r->run.id, r->run.name);
  rp_html_begin(out, title);
  fputs("<h1>gpuscope report ", out);
  rp_html(out, r->run.id);
  if (r->run.name[0]) {
    fputs(" (", out);
    rp_html(out, r->run.name);
    fputc(')', out);
  }
  fputs("</h1>\n", out);
  facts(out, r);
  findings(out, r);
  fputs("<h2>Charts</h2>\n", out);
  gpu_chart(out, st, r, "gpu.util_pct", "GPU utilisation (throttling shaded)", "%", 100, NULL);
  gpu_chart(out, st, r, "gpu.sm_active_pct", "SM activity", "%", 100, NULL);
  gpu_chart(out, st, r, "gpu.mem_used_bytes", "GPU memory used (dashed: total)", "B", NAN, "gpu.mem_total_bytes");
  gpu_chart(out, st, r, "gpu.power_w", "Power (dashed: limit)", "W", NAN, "gpu.power_limit_w");
  gpu_chart(out, st, r, "gpu.temp_c", "Temperature (throttling shaded)", "C", NAN, NULL);
  cpu_heatmap(out, st, r);
  job_cpu(out, st, r);
  step_chart(out, st, r);
  idle_timeline(out, st, r);
  if (r->nnotes) {
    fputs("<h2>Notes</h2>\n<ul>\n", out);
    for (size_t i = 0; i < r->nnotes; i++) {
      fputs("<li>", out);
      rp_html(out, r->notes[i]);
      fputs("</li>\n", out);
    }
    fputs("</ul>\n", out);
  }
  rp_html_end(out);
  return ferror(out) ? gs_fail(GS_EIO, "cannot write the report") : GS_OK;
}
