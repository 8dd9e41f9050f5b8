/* report/compare: `gpuscope compare RUN RUN...` — the runs side by side: throughput, median step,
 * data-wait share, GPU util and SM activity, memory peak, energy per sample, idle GPU-hours; each
 * run's speed-up over the first; the params that differ; the findings that appeared or disappeared
 * against the first run. Text here; the JSON form is in json.c, the HTML page is serve's (serve/page.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

#define COL 26 /* characters per run column in the text table */

int rp_has_rule(const struct report_run *r, const char *rule) {
  for (size_t i = 0; i < r->view.nfindings; i++)
    if (!strcmp(r->view.findings[i].rule, rule))
      return 1;
  return 0;
}

int report_param_is_internal(const char *key) {
  return !strncmp(key, "gpu.", 4) || !strncmp(key, "nvml.", 5) || !strncmp(key, "ingest.", 7) ||
         !strncmp(key, "group.", 6) || !strncmp(key, "log.", 4);
}

void report_params_differ(const struct runview *const *views, size_t n, void (*fn)(void *, const char *), void *user) {
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < views[i]->nparams; k++) {
      const char *key = views[i]->params[k].key ? views[i]->params[k].key : "";
      int seen_before = 0;
      for (size_t j = 0; j < i && !seen_before; j++)
        seen_before = runview_param(views[j], key) != NULL;
      /* a scheduler's job id and the cgroup path differ between any two runs: listed in each report,
       * never as "what changed" */
      if (seen_before || report_param_is_internal(key) || !strncmp(key, "sched.", 6) ||
          !strcmp(key, "container.cgroup") || !strcmp(key, "git.diff")) /* the diff's hash says it */
        continue;
      int differs = 0;
      const char *v0 = runview_param(views[0], key);
      for (size_t j = 1; j < n && !differs; j++) {
        const char *v = runview_param(views[j], key);
        differs = (!v0) != (!v) || (v0 && v && strcmp(v0, v));
      }
      if (differs)
        fn(user, key);
    }
}

void report_param_values_json(FILE *out, const struct runview *const *views, size_t n, const char *key) {
  fputc('[', out);
  for (size_t j = 0; j < n; j++) {
    const char *v = runview_param(views[j], key);
    if (j)
      fputc(',', out);
    if (v)
      gs_json_str(out, v);
    else
      fputs("null", out);
  }
  fputc(']', out);
}

void rp_differing_params(const struct report_run *runs, size_t n, void (*fn)(void *, const char *), void *user) {
  const struct runview **views = n ? malloc(n * sizeof *views) : NULL;
  if (!views)
    return; /* out of memory: no params listed */
  for (size_t i = 0; i < n; i++)
    views[i] = &runs[i].view;
  report_params_differ(views, n, fn, user);
  free(views);
}

/* ---- the rows ---- */

enum { ROW_THROUGHPUT, ROW_SPEEDUP, ROW_STEP, ROW_DATA, ROW_UTIL, ROW_SM, ROW_MEM, ROW_ENERGY, ROW_IDLE, ROWS };

static const char *ROW_NAMES[ROWS] = {
    "throughput (samples/s)", "speed-up vs first", "median step",   "data wait", "GPU util", "SM active",
    "GPU memory peak",        "energy per sample", "GPU-hours idle"};

static const char *cell(char *buf, size_t n, int row, const struct report_run *runs, size_t i) {
  const struct report_run *r = &runs[i];
  switch (row) {
  case ROW_THROUGHPUT:
    return rp_num(buf, n, r->steps.samples_per_s, 1, "");
  case ROW_SPEEDUP: {
    double s = runview_step_speedup(&runs[0].steps, &r->steps);
    if (!isfinite(s))
      return rp_num(buf, n, s, 2, "");
    snprintf(buf, n, "%.2fx", s);
    return buf;
  }
  case ROW_STEP:
    return rp_num(buf, n, r->steps.median_step_s * 1e3, 1, "ms");
  case ROW_DATA:
    return rp_pct(buf, n, r->steps.data_share);
  case ROW_UTIL:
    return rp_num(buf, n, r->gpu_util, 0, "%");
  case ROW_SM:
    return rp_num(buf, n, r->sm_active, 0, "%");
  case ROW_MEM:
    return rp_bytes(buf, n, r->gpu_mem_peak);
  case ROW_ENERGY:
    return rp_num(buf, n, r->energy_per_sample, 3, "J");
  default:
    return rp_num(buf, n, r->gpu_idle_hours, 4, "h");
  }
}

/* Rules of r that the first run lacks (appeared) or the first run's that r lacks (disappeared). */
static void rule_list(char *buf, size_t n, const struct report_run *r, const struct report_run *other) {
  size_t o = 0;
  buf[0] = 0;
  for (size_t k = 0; k < r->view.nfindings && o + 2 < n; k++) {
    char id[32];
    if (other && rp_has_rule(other, r->view.findings[k].rule))
      continue;
    o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? ", " : "", rp_ident(id, sizeof id, r->view.findings[k].rule));
  }
  if (o >= n)
    o = n - 1;
  if (!o)
    snprintf(buf, n, "—");
}

/* ---- text ---- */

static void text_cell(FILE *out, const char *s) {
  /* Pad by characters, not bytes ("—" is three bytes). */
  size_t chars = 0;
  for (const char *p = s; *p; p++)
    chars += ((unsigned char)*p & 0xc0) != 0x80;
  gs_term_text(out, s, 0);
  for (size_t i = chars; i < COL; i++)
    fputc(' ', out);
}

struct text_diff {
  FILE *out;
  const struct report_run *runs;
  size_t n;
  int any;
};

/* One origin param that differs: "  torch   2.3.0 → 2.4.0", the runs' values in their order. */
static void text_origin(void *user, const char *key) {
  struct text_diff *t = user;
  if (!t->any)
    fputs("\nwhere they came from (what differs)\n", t->out);
  t->any = 1;
  char k[64];
  snprintf(k, sizeof k, "  %s", report_origin_label(key));
  text_cell(t->out, k);
  for (size_t j = 0; j < t->n; j++) {
    const char *v = rp_param(&t->runs[j], key);
    fputs(j ? " → " : "", t->out);
    gs_term_text(t->out, v ? v : "—", 0);
  }
  fputc('\n', t->out);
}

static void text_param(void *user, const char *key) {
  struct text_diff *t = user;
  if (rp_param_is_origin(key))
    return; /* in "where they came from" */
  if (!t->any)
    fputs("\nparams that differ\n", t->out);
  t->any = 1;
  char k[64];
  snprintf(k, sizeof k, "  %s", key);
  text_cell(t->out, k);
  for (size_t j = 0; j < t->n; j++) {
    const char *v = rp_param(&t->runs[j], key);
    char val[COL];
    snprintf(val, sizeof val, "%s", v ? v : "—");
    text_cell(t->out, val);
  }
  fputc('\n', t->out);
}

/* ---- the job's own metrics (loss, accuracy, lr): last and best value per run ---- */

/* Lower is better for a metric whose name says it measures an error; higher for the rest
 * (accuracy, f1, reward, throughput). */
static int lower_is_better(const char *name) {
  static const char *words[] = {"loss", "err", "perplexity", "ppl", "mse", "mae", "rmse", "wer", "cer", "nll"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (strstr(name, words[i]))
      return 1;
  return 0;
}

int rp_job_metric(const struct report_run *r, const char *name, struct rp_metric *out) {
  memset(out, 0, sizeof *out);
  out->last = out->best = NAN;
  out->lower_better = lower_is_better(name);
  struct runview_stats st;
  if (runview_stats(&r->view, "client", name, "", INT64_MIN, INT64_MAX, &st) || !st.n)
    return 0;
  out->n = st.n;
  out->last = st.last;
  out->best = out->lower_better ? st.min : st.max;
  return 1;
}

void rp_job_metrics(const struct report_run *runs, size_t n, void (*fn)(void *user, const char *name), void *user) {
  size_t shown = 0;
  for (size_t i = 0; i < n; i++)
    for (size_t k = 0; k < runs[i].view.nseries && shown < RP_MAX_METRICS; k++) {
      const struct store_series *s = &runs[i].view.series[k];
      if (strcmp(s->source, "client") || s->labels[0] || !strncmp(s->name, "step.", 5) || !s->count)
        continue;
      int seen = 0;
      for (size_t j = 0; j <= i && !seen; j++)
        for (size_t m = 0; m < runs[j].view.nseries && !seen; m++) {
          const struct store_series *o = &runs[j].view.series[m];
          if ((j < i || m < k) && !strcmp(o->source, "client") && !o->labels[0] && !strcmp(o->name, s->name) &&
              o->count)
            seen = 1;
        }
      if (!seen) {
        fn(user, s->name);
        shown++;
      }
    }
}

static void text_metric(void *user, const char *name) {
  struct text_diff *t = user;
  if (!t->any)
    fputs("\njob metrics (last / best)\n", t->out);
  t->any = 1;
  char k[8 + sizeof t->runs->view.series->name]; /* the whole name: a long one widens its row */
  snprintf(k, sizeof k, "  %s", name);
  text_cell(t->out, k);
  for (size_t j = 0; j < t->n; j++) {
    struct rp_metric m;
    char val[COL] = "—";
    if (rp_job_metric(&t->runs[j], name, &m))
      snprintf(val, sizeof val, "%.4g / %.4g", m.last, m.best);
    text_cell(t->out, val);
  }
  fputc('\n', t->out);
}

int report_compare_text(FILE *out, const struct report_run *runs, size_t n, int color) {
  const char *bold = color ? "\033[1m" : "", *reset = color ? "\033[0m" : "";
  fprintf(out, "%sgpuscope compare%s: %zu runs, each against the first\n\n", bold, reset, n);
  text_cell(out, "");
  for (size_t i = 0; i < n; i++) {
    char head[COL];
    snprintf(head, sizeof head, "%.12s%s%.10s", runs[i].view.run.id, runs[i].view.run.name[0] ? " " : "",
             runs[i].view.run.name);
    text_cell(out, head);
  }
  fputc('\n', out);
  for (int row = 0; row < ROWS; row++) {
    text_cell(out, ROW_NAMES[row]);
    for (size_t i = 0; i < n; i++) {
      char b[COL];
      text_cell(out, cell(b, sizeof b, row, runs, i));
    }
    fputc('\n', out);
  }
  struct text_diff to = {out, runs, n, 0};
  rp_origin_differ(runs, n, text_origin, &to);
  struct text_diff td = {out, runs, n, 0};
  rp_differing_params(runs, n, text_param, &td);
  struct text_diff tm = {out, runs, n, 0};
  rp_job_metrics(runs, n, text_metric, &tm);
  fprintf(out, "\n%sfindings%s\n", bold, reset);
  for (size_t i = 0; i < n; i++) {
    char all[512], app[512], gone[512];
    rule_list(all, sizeof all, &runs[i], NULL);
    fprintf(out, "  %.12s: ", runs[i].view.run.id);
    gs_term_text(out, all, 0);
    if (i && (rp_has_rule(&runs[0], "insufficient_data") || rp_has_rule(&runs[i], "insufficient_data"))) {
      /* a run not judged (an imported one, a run with nothing measured) lost no finding, nor gained one */
      fprintf(out, "\n      appeared, disappeared: cannot tell (%s not judged: not enough measured)",
              rp_has_rule(&runs[i], "insufficient_data") ? "this run was" : "the first run was");
    } else if (i) {
      rule_list(app, sizeof app, &runs[i], &runs[0]);
      rule_list(gone, sizeof gone, &runs[0], &runs[i]);
      fputs("\n      appeared: ", out);
      gs_term_text(out, app, 0);
      fputs("; disappeared: ", out);
      gs_term_text(out, gone, 0);
    }
    fputc('\n', out);
  }
  return ferror(out) ? gs_fail(GS_EIO, "cannot write the comparison") : GS_OK;
}
