/* tune/report: the tune's result for people (a table sorted by the metric, the winner or the tie,
 * the speed-up over the baseline, the learning-rate note, the doctor's findings for the winner) and
 * for programs (--json). Unknown figures are "—" and null, never 0. Text from the command line and
 * the job's output is escaped for the terminal. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "store/store.h"
#include "tune/tune_int.h"

static const char *fnum(double v, const char *fmt, char *buf, size_t n) {
  if (!isfinite(v))
    return "—";
  snprintf(buf, n, fmt, v);
  return buf;
}

static const char *fbytes(double v, char *buf, size_t n) {
  return isfinite(v) ? gs_fmt_bytes(v, buf, n) : "—";
}

void tune_clean(char *s) {
  size_t n = strlen(s) + 1;
  char *out = malloc(n);
  if (!out) { /* no room for a copy: every byte that is not printable ASCII becomes '?' in place */
    for (char *p = s; *p; p++)
      if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
        *p = '?';
    return;
  }
  memcpy(s, gs_term_escape(s, 1, out, n), n); /* never longer than its input */
  free(out);
}

static void clean(char *s) {
  tune_clean(s);
}

/* Prints s left-aligned in width columns (UTF-8 aware: "—" and "±" are one column each). */
static void col(FILE *out, const char *s, int width) {
  int w = 0;
  for (const char *p = s; *p; p++)
    if (((unsigned char)*p & 0xC0) != 0x80)
      w++;
  fputs(s, out);
  for (; w < width; w++)
    fputc(' ', out);
  fputc(' ', out);
}

static const char *metric_name(const struct tune_opts *o) {
  return o->metric == TUNE_STEPS_PER_S ? "steps_per_s" : "samples_per_s";
}

/* Trials in table order: measured ones by the metric (highest first), then the others in plan order. */
static int *table_order(const struct tune_result *r) {
  int *idx = malloc((r->n + 1) * sizeof *idx);
  if (!idx)
    return NULL;
  for (size_t i = 0; i < r->n; i++)
    idx[i] = (int)i;
  for (size_t i = 1; i < r->n; i++)
    for (size_t j = i; j > 0; j--) {
      const struct tune_trial *a = &r->trials[idx[j - 1]], *b = &r->trials[idx[j]];
      double x = a->status == TUNE_OK ? a->rate : NAN, y = b->status == TUNE_OK ? b->rate : NAN;
      int swap = isfinite(y) && (!isfinite(x) || y > x);
      if (!swap)
        break;
      int t = idx[j];
      idx[j] = idx[j - 1];
      idx[j - 1] = t;
    }
  return idx;
}

static int batch_value(const struct tune_opts *o, const struct tune_trial *t, double *v) {
  int b = tune_batch_param(o);
  if (b < 0)
    return 0;
  char *end;
  *v = strtod(o->params[b].values[t->config[b]], &end);
  return *end == 0;
}

/* The learning-rate note when the recommended batch differs from the baseline's ("" when not). */
static void lr_note(const struct tune_opts *o, const struct tune_result *r, char *buf, size_t n) {
  buf[0] = 0;
  double b0, b1;
  if (r->recommended < 0 || !r->n || !batch_value(o, &r->trials[0], &b0) ||
      !batch_value(o, &r->trials[r->recommended], &b1) || b0 == b1 || !(b0 > 0))
    return;
  const struct tune_trial *w = &r->trials[r->recommended];
  if (o->lr_base > 0 && o->lr_rule != TUNE_LR_NONE) {
    snprintf(buf, n,
             "the trials' {lr} followed the batch (%s rule from %g at batch %g): %g at batch %g, %ld warm-up steps",
             o->lr_rule == TUNE_LR_SQRT ? "square-root" : "linear", o->lr_base, o->lr_batch, w->lr, b1, w->lr_warmup);
    return;
  }
  snprintf(buf, n,
           "the batch changed from %g to %g: scale the learning rate by %.3gx (linear scaling rule) with a "
           "warm-up of a few epochs; past a few thousand samples per batch consider LARS/LAMB",
           b0, b1, b1 / b0);
}

/* The columns of the options that add them: the rate ({lr}), the quality and its verdict, the GPU
 * and cores a trial had side by side. */
static void print_extra_head(FILE *out, const struct tune_opts *o) {
  char q[160];
  if (o->lr_base > 0)
    col(out, "lr", 10);
  if (o->quality[0]) {
    snprintf(q, sizeof q, "%.100s%s", o->quality, o->quality_max ? " (max)" : "");
    clean(q);
    col(out, q, 26);
  }
  if (o->ngpus)
    col(out, "device", 8), col(out, "cores", 7);
}

static void print_extra(FILE *out, const struct tune_opts *o, const struct tune_trial *t) {
  char a[48], q[96], g[sizeof t->gpu];
  if (o->lr_base > 0)
    col(out, fnum(t->lr, "%.4g", a, sizeof a), 10);
  if (o->quality[0]) {
    if (isfinite(t->quality) && isfinite(t->quality_ci))
      snprintf(q, sizeof q, "%.4g ± %.2g %s", t->quality, t->quality_ci, tune_verdict_name(t->verdict));
    else if (isfinite(t->quality))
      snprintf(q, sizeof q, "%.4g %s", t->quality, tune_verdict_name(t->verdict));
    else
      snprintf(q, sizeof q, "— %s", tune_verdict_name(t->verdict));
    col(out, q, 26);
  }
  if (o->ngpus) {
    snprintf(g, sizeof g, "%s", t->gpu[0] ? t->gpu : "—");
    clean(g);
    col(out, g, 8), col(out, t->cpus[0] ? t->cpus : "—", 7);
  }
}

/* The table's header and one row per trial, in table order idx. */
static void print_rows(FILE *out, const struct tune_opts *o, const struct tune_result *r, const int *idx) {
  const char *head[] = {
      " #",       "configuration", o->metric == TUNE_STEPS_PER_S ? "steps/s ± 95% CI" : "samples/s ± 95% CI",
      "step",     "data",          "GPU",
      "peak mem", "J/sample",      "steps"};
  const int widths[] = {3, 34, 22, 9, 5, 5, 10, 9, 6};
  for (size_t i = 0; i < sizeof head / sizeof *head; i++)
    col(out, head[i], widths[i]);
  print_extra_head(out, o);
  fputs("status\n", out);
  for (size_t i = 0; i < r->n; i++) {
    const struct tune_trial *t = &r->trials[idx[i]];
    char label[512], rate[64], a[32], b[32], c[32], d[32], e[32], f[32], steps[32];
    tune_config_label(o, t->config, label, sizeof label);
    clean(label);
    if (t->status == TUNE_OK && isfinite(t->rate))
      snprintf(rate, sizeof rate, "%.1f ± %.1f", t->rate, t->ci);
    else
      snprintf(rate, sizeof rate, "—");
    if (t->steps_run || t->status == TUNE_OK)
      snprintf(steps, sizeof steps, "%ld", t->steps_run);
    else
      snprintf(steps, sizeof steps, "—");
    char num[16];
    snprintf(num, sizeof num, " %02d", idx[i] + 1);
    col(out, num, 3);
    col(out, label, 34);
    col(out, rate, 22);
    col(out, isfinite(t->step_s) ? (snprintf(a, sizeof a, "%.1f ms", t->step_s * 1e3), a) : "—", 9);
    col(out, fnum(t->data_share * 100, "%.0f%%", b, sizeof b), 5);
    col(out, fnum(t->gpu_util, "%.0f%%", c, sizeof c), 5);
    col(out, fbytes(t->peak_mem, d, sizeof d), 10);
    col(out, fnum(t->energy_per_sample, "%.3g", e, sizeof e), 9);
    col(out, steps, 6);
    print_extra(out, o, t);
    fprintf(out, "%s%s%s%s\n", tune_status_name(t->status),
            o->strategy == TUNE_HALVING ? (snprintf(f, sizeof f, " r%d", t->rung), f) : "",
            idx[i] == r->winner ? "  winner"
            : t->tied           ? "  tie"
                                : "",
            t->margin_ok == 0 ? "  (peak > 90% of limit)" : "");
  }
}

/* The reason for each trial that is not ok, with the end of its log when it failed, and what tune had
 * to kill after any trial. */
static void print_failures(FILE *out, const struct tune_result *r) {
  int printed = 0;
  for (size_t i = 0; i < r->n; i++) {
    const struct tune_trial *t = &r->trials[i];
    if ((t->status == TUNE_OK || !t->reason[0]) && !t->cleanup[0])
      continue;
    if (!printed++)
      fputc('\n', out);
    char reason[300], tail[1100], cleanup[sizeof t->cleanup];
    snprintf(cleanup, sizeof cleanup, "%s", t->cleanup);
    clean(cleanup);
    if (t->status == TUNE_OK || !t->reason[0]) {
      fprintf(out, " %02zu %s: %s\n", i + 1, tune_status_name(t->status), cleanup);
      continue;
    }
    snprintf(reason, sizeof reason, "%s", t->reason);
    clean(reason);
    fprintf(out, " %02zu %s: %s%s%s\n", i + 1, tune_status_name(t->status), reason, cleanup[0] ? "; " : "", cleanup);
    if (t->status == TUNE_FAILED && t->tail[0]) {
      snprintf(tail, sizeof tail, "%s", t->tail);
      for (char *line = strtok(tail, "\n"); line; line = strtok(NULL, "\n")) {
        clean(line);
        fprintf(out, "      | %s\n", line);
      }
    }
  }
}

/* The doctor strategy's steps: each trial's estimated and measured gain over the one it came from. */
static void print_doctor_steps(FILE *out, const struct tune_opts *o, const struct tune_result *r) {
  for (size_t i = 0; i < r->n; i++) {
    const struct tune_trial *t = &r->trials[i];
    if (t->prev < 0)
      continue;
    const struct tune_trial *p = &r->trials[t->prev];
    char m[32], label[512], asked[48] = "";
    tune_config_label(o, t->config, label, sizeof label);
    clean(label);
    if (isfinite(t->est_target))
      snprintf(asked, sizeof asked, ", asked for %g", t->est_target);
    fprintf(out, "doctor step: %02d -> %02zu by %s (%s%s): estimated %.2fx, measured %s\n", t->prev + 1, i + 1,
            t->est_rule, label, asked, t->estimate,
            t->status == TUNE_OK ? fnum(t->rate / p->rate, "%.2fx", m, sizeof m) : tune_status_name(t->status));
  }
  if (r->stop_reason[0])
    fprintf(out, "doctor stopped: %s\n", r->stop_reason);
}

/* How quality was judged: at which point, and which configurations it ruled out. */
static void print_quality(FILE *out, const struct tune_opts *o, const struct tune_result *r) {
  if (!o->quality[0])
    return;
  char metric[sizeof o->quality], note[sizeof r->quality_note];
  snprintf(metric, sizeof metric, "%s", o->quality);
  snprintf(note, sizeof note, "%s", r->quality_note);
  clean(metric), clean(note);
  if (note[0]) {
    fprintf(out, "quality (%s): %s\n", metric, note);
    return;
  }
  fprintf(out, "quality (%s, %s is better): read at %.6g %s, the mean of the last %.0f%% before it", metric,
          o->quality_max ? "higher" : "lower", r->quality_point, o->quality_at == TUNE_AT_TIME ? "s" : "samples",
          100 * TUNE_QUALITY_TAIL);
  if (isfinite(o->quality_tol))
    fprintf(out, "; tolerance %.4g%s", o->quality_tol_rel ? 100 * o->quality_tol : o->quality_tol,
            o->quality_tol_rel ? "% of the baseline's" : "");
  fputc('\n', out);
  for (size_t i = 0; i < r->n; i++) {
    const struct tune_trial *t = &r->trials[i];
    if (t->verdict == TUNE_Q_WORSE)
      fprintf(out, "  %02zu is worse than the baseline: %.4g against %.4g (cannot win)\n", i + 1, t->quality,
              r->trials[0].quality);
    else if (t->verdict == TUNE_Q_UNKNOWN)
      fprintf(out, "  %02zu: quality unknown (no %s at %.6g %s; cannot be judged as good)\n", i + 1, metric,
              r->quality_point, o->quality_at == TUNE_AT_TIME ? "s" : "samples");
  }
}

/* The winner (or the tie), its speed-up, memory margin, learning-rate note and the doctor's findings. */
static void print_winner(FILE *out, const struct tune_opts *o, const struct tune_result *r, struct store *st) {
  if (r->best < 0) {
    fprintf(out, "no configuration was measured: no winner\n");
  } else {
    char label[512];
    const struct tune_trial *w = &r->trials[r->recommended];
    tune_config_label(o, w->config, label, sizeof label);
    clean(label);
    if (r->winner >= 0) {
      fprintf(out, "winner: %02d %s — %.1f ± %.1f %s", r->winner + 1, label, w->rate, w->ci,
              o->metric == TUNE_STEPS_PER_S ? "steps/s" : "samples/s");
    } else {
      fprintf(out, "tie within noise:");
      for (size_t i = 0; i < r->n; i++)
        if (r->trials[i].tied)
          fprintf(out, " %02zu", i + 1);
      fprintf(out, "; recommended %02d %s (first of the tied in plan order) — %.1f ± %.1f", r->recommended + 1, label,
              w->rate, w->ci);
    }
    const struct tune_trial *base = r->n ? &r->trials[0] : NULL;
    if (base && base->status == TUNE_OK && isfinite(base->rate) && base->rate > 0)
      fprintf(out, "; %.2fx the baseline (01)\n", w->rate / base->rate);
    else
      fprintf(out, "; speed-up over the baseline unknown (01 was not measured)\n");
    if (w->margin_ok < 0)
      fprintf(out, "memory margin: unknown (no peak or no limit measured)\n");
    else
      fprintf(out, "memory margin: peak %.0f%% of the limit (at most %.0f%% kept)\n", 100 * w->peak_mem / w->mem_limit,
              100 * TUNE_MARGIN);
    char note[400];
    lr_note(o, r, note, sizeof note);
    if (note[0])
      fprintf(out, "learning rate: %s\n", note);
    print_quality(out, o, r);
    struct store_finding *f = NULL;
    size_t nf = 0;
    if (st && w->run_id[0] && !st->findings_read(st, w->run_id, &f, &nf)) {
      fprintf(out, "findings for %02d (gpuscope report %s):\n", r->recommended + 1, w->run_id);
      for (size_t i = 0; i < nf; i++) {
        clean(f[i].title);
        fprintf(out, "  %-16s %s\n", f[i].rule, f[i].title);
      }
    }
    free(f);
  }
}

void tune_print_table(FILE *out, const struct tune_opts *o, const struct tune_result *r, struct store *st) {
  static const char *strategies[] = {"grid", "halving", "doctor"};
  char name[sizeof o->name];
  snprintf(name, sizeof name, "%s", o->name);
  clean(name);
  fprintf(out, "gpuscope tune %s — %s, %zu trials, %ld trial-steps (%ld steps run)%s\n\n", name,
          strategies[o->strategy], r->n, r->trial_steps, r->steps_run,
          r->interrupted ? (r->signo == SIGTERM  ? " (interrupted by SIGTERM: the table so far)"
                            : r->signo == SIGHUP ? " (interrupted by SIGHUP: the table so far)"
                                                 : " (interrupted: the table so far)")
                         : "");
  int *idx = table_order(r);
  if (!idx)
    return;
  print_rows(out, o, r, idx);
  print_failures(out, r);
  fputc('\n', out);
  if (o->strategy == TUNE_DOCTOR)
    print_doctor_steps(out, o, r);
  print_winner(out, o, r, st);
  free(idx);
}

static void jkey(FILE *out, const char *k) {
  gs_json_str(out, k);
  fputc(':', out);
}

/* The "params" object's members: each parameter and the values it was given. */
static void json_params(FILE *out, const struct tune_opts *o) {
  for (int i = 0; i < o->nparams; i++) {
    if (i)
      fputc(',', out);
    jkey(out, o->params[i].name);
    fputc('[', out);
    for (int v = 0; v < o->params[i].nvalues; v++)
      fputs(v ? "," : "", out), gs_json_str(out, o->params[i].values[v]);
    fputc(']', out);
  }
}

static void jstr_or_null(FILE *out, const char *k, const char *v) {
  jkey(out, k), v &&v[0] ? gs_json_str(out, v) : (void)fputs("null", out);
  fputc(',', out);
}

/* The trial's members of the options added for quality, learning rate, equal data and GPUs. */
static void json_trial_new(FILE *out, const struct tune_trial *t) {
  const char *keys[] = {"lr", "samples_seen", "window_s", "quality", "quality_ci95"};
  double vals[] = {t->lr, t->samples_seen, t->window_s, t->quality, t->quality_ci};
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
    jkey(out, keys[k]), gs_json_num(out, vals[k]), fputc(',', out);
  jkey(out, "lr_warmup_steps");
  t->lr_warmup >= 0 ? (void)fprintf(out, "%ld,", t->lr_warmup) : (void)fputs("null,", out);
  fprintf(out, "\"quality_points\":%d,", t->quality_points);
  jstr_or_null(out, "verdict", t->verdict ? tune_verdict_name(t->verdict) : NULL);
  jstr_or_null(out, "gpu", t->gpu);
  jstr_or_null(out, "cpus", t->cpus);
  fprintf(out, "\"resumed\":%s,", t->resumed ? "true" : "false");
}

/* The sweep's members of those options: quality (null without --quality), lr, samples, gpus. */
static void json_sweep_new(FILE *out, const struct tune_opts *o, const struct tune_result *r) {
  jkey(out, "quality");
  if (o->quality[0]) {
    fputc('{', out), jkey(out, "metric"), gs_json_str(out, o->quality);
    fprintf(out, ",\"better\":\"%s\",\"at\":\"%s\",", o->quality_max ? "max" : "min",
            o->quality_at == TUNE_AT_TIME ? "time" : "samples");
    jkey(out, "point"), gs_json_num(out, r->quality_point);
    fputc(',', out), jkey(out, "tol"), gs_json_num(out, o->quality_tol);
    fprintf(out, ",\"tol_relative\":%s,", o->quality_tol_rel ? "true" : "false");
    jkey(out, "note"), r->quality_note[0] ? gs_json_str(out, r->quality_note) : (void)fputs("null", out);
    fputs("},", out);
  } else {
    fputs("null,", out);
  }
  jkey(out, "lr");
  if (o->lr_base > 0) {
    static const char *rules[] = {"none", "linear", "sqrt"};
    fputs("{\"base\":", out), gs_json_num(out, o->lr_base), fputs(",\"batch\":", out), gs_json_num(out, o->lr_batch);
    fprintf(out, ",\"rule\":\"%s\",\"warmup_samples\":", rules[o->lr_rule]);
    gs_json_num(out, o->lr_warmup), fputs("},", out);
  } else {
    fputs("null,", out);
  }
  jkey(out, "samples"), gs_json_num(out, o->samples > 0 ? o->samples : NAN);
  fputs(",\"gpus\":[", out);
  for (int i = 0; i < o->ngpus; i++)
    fputs(i ? "," : "", out), gs_json_str(out, o->gpus[i]);
  fprintf(out, "],\"resumed\":%s,", o->resume ? "true" : "false");
}

/* Trial i's object, numbered i + 1, after a comma unless it is the first (unknown figures are null). */
static void json_trial(FILE *out, const struct tune_opts *o, const struct tune_trial *t, size_t i) {
  fprintf(out, "%s{\"trial\":%zu,\"config\":{", i ? "," : "", i + 1);
  for (int p = 0; p < o->nparams; p++) {
    if (p)
      fputc(',', out);
    jkey(out, o->params[p].name), gs_json_str(out, o->params[p].values[t->config[p]]);
  }
  fputs("},", out);
  jkey(out, "status"), gs_json_str(out, tune_status_name(t->status));
  fputc(',', out), jkey(out, "reason"), t->reason[0] ? gs_json_str(out, t->reason) : (void)fputs("null", out);
  fputc(',', out), jkey(out, "cleanup"), t->cleanup[0] ? gs_json_str(out, t->cleanup) : (void)fputs("null", out);
  fputc(',', out), jkey(out, "run_id"), t->run_id[0] ? gs_json_str(out, t->run_id) : (void)fputs("null", out);
  fputc(',', out), jkey(out, "run_name"), t->run_name[0] ? gs_json_str(out, t->run_name) : (void)fputs("null", out);
  fprintf(out, ",\"rung\":%d,\"target_steps\":%ld,\"steps_run\":%ld,\"steps_measured\":%ld,", t->rung, t->target_steps,
          t->steps_run, t->steps_measured);
  if (t->exit_status >= 0)
    fprintf(out, "\"exit_status\":%d,", t->exit_status);
  else
    fputs("\"exit_status\":null,", out);
  fprintf(out, "\"dof\":%d,", t->dof);
  const char *keys[] = {"rate",         "ci95",           "step_s",          "data_wait_share",
                        "gpu_util_pct", "peak_mem_bytes", "mem_limit_bytes", "energy_per_sample_j",
                        "estimate",     "estimate_target"};
  double vals[] = {t->status == TUNE_OK ? t->rate : NAN,
                   t->status == TUNE_OK ? t->ci : NAN,
                   t->step_s,
                   t->data_share,
                   t->gpu_util,
                   t->peak_mem,
                   t->mem_limit,
                   t->energy_per_sample,
                   t->estimate,
                   t->est_target};
  for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
    jkey(out, keys[k]), gs_json_num(out, vals[k]), fputc(',', out);
  jkey(out, "margin_ok"), fputs(t->margin_ok < 0 ? "null" : t->margin_ok ? "true" : "false", out);
  fputc(',', out), jkey(out, "estimate_rule"),
      t->est_rule[0] ? gs_json_str(out, t->est_rule) : (void)fputs("null", out);
  fprintf(out, ",\"from_trial\":");
  if (t->prev >= 0)
    fprintf(out, "%d", t->prev + 1);
  else
    fputs("null", out);
  fprintf(out, ",\"tied\":%s,", t->tied ? "true" : "false");
  json_trial_new(out, t);
  jkey(out, "stderr_tail");
  fputc('[', out);
  if (t->tail[0]) {
    char tail[1100];
    snprintf(tail, sizeof tail, "%s", t->tail);
    int first = 1;
    for (char *line = strtok(tail, "\n"); line; line = strtok(NULL, "\n"))
      fputs(first ? "" : ",", out), gs_json_str(out, line), first = 0;
  }
  fputs("]}", out);
}

/* The doctor's findings for the recommended trial, or null when there is none or they cannot be read. */
static void json_findings(FILE *out, const struct tune_result *r, struct store *st) {
  struct store_finding *f = NULL;
  size_t nf = 0;
  if (st && r->recommended >= 0 && !st->findings_read(st, r->trials[r->recommended].run_id, &f, &nf)) {
    fputc('[', out);
    for (size_t i = 0; i < nf; i++) {
      fputs(i ? ",{" : "{", out);
      jkey(out, "rule"), gs_json_str(out, f[i].rule);
      fputc(',', out), jkey(out, "title"), gs_json_str(out, f[i].title);
      fputc(',', out), jkey(out, "speedup"), gs_json_num(out, f[i].speedup);
      fputc('}', out);
    }
    fputc(']', out);
  } else {
    fputs("null", out);
  }
  free(f);
}

void tune_print_json(FILE *out, const struct tune_opts *o, const struct tune_result *r, struct store *st) {
  static const char *strategies[] = {"grid", "halving", "doctor"};
  fputc('{', out);
  jkey(out, "name"), gs_json_str(out, o->name);
  fputc(',', out), jkey(out, "strategy"), gs_json_str(out, strategies[o->strategy]);
  fputc(',', out), jkey(out, "metric"), gs_json_str(out, metric_name(o));
  fprintf(out, ",\"steps\":%ld,\"warmup\":%ld,", o->steps, o->warmup);
  jkey(out, "seconds"), gs_json_num(out, o->seconds > 0 ? o->seconds : NAN);
  fprintf(out, ",\"trial_steps\":%ld,\"steps_run\":%ld,\"interrupted\":%s,\"budget_out\":%s,", r->trial_steps,
          r->steps_run, r->interrupted ? "true" : "false", r->budget_out ? "true" : "false");
  jkey(out, "stopped_by"), r->interrupted && r->signo > 0 ? gs_json_str(out, r->signo == SIGINT    ? "SIGINT"
                                                                             : r->signo == SIGTERM ? "SIGTERM"
                                                                                                   : "SIGHUP")
                                                          : (void)fputs("null", out);
  fputc(',', out);
  json_sweep_new(out, o, r);
  fputs("\"params\":{", out);
  json_params(out, o);
  fputs("},\"trials\":[", out);
  for (size_t i = 0; i < r->n; i++)
    json_trial(out, o, &r->trials[i], i);
  fputs("],", out);
  fprintf(out, "\"best\":"), r->best >= 0 ? (void)fprintf(out, "%d", r->best + 1) : (void)fputs("null", out);
  fprintf(out, ",\"winner\":"), r->winner >= 0 ? (void)fprintf(out, "%d", r->winner + 1) : (void)fputs("null", out);
  fprintf(out, ",\"recommended\":"),
      r->recommended >= 0 ? (void)fprintf(out, "%d", r->recommended + 1) : (void)fputs("null", out);
  fputs(",\"tied\":[", out);
  int first = 1;
  for (size_t i = 0; i < r->n; i++)
    if (r->trials[i].tied)
      fprintf(out, "%s%zu", first ? "" : ",", i + 1), first = 0;
  fputs("],", out);
  double speedup = NAN;
  if (r->recommended >= 0 && r->n && r->trials[0].status == TUNE_OK && r->trials[0].rate > 0)
    speedup = r->trials[r->recommended].rate / r->trials[0].rate;
  jkey(out, "speedup_vs_baseline"), gs_json_num(out, speedup);
  char note[400];
  lr_note(o, r, note, sizeof note);
  fputc(',', out), jkey(out, "lr_note"), note[0] ? gs_json_str(out, note) : (void)fputs("null", out);
  fputc(',', out), jkey(out, "stop_reason"),
      r->stop_reason[0] ? gs_json_str(out, r->stop_reason) : (void)fputs("null", out);
  fputs(",\"findings\":", out);
  json_findings(out, r, st);
  fputs("}\n", out);
}
