/* report/json: `gpuscope report RUN --json` and `compare --json` — the run's facts, params, headline
 * figures, GPUs and findings (evidence as an object when it is valid JSON, else as the raw text
 * under "evidence_text") as one JSON document for tools and tests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "report/report_int.h"

static void key(FILE *out, const char *k, int *first) {
  if (!*first)
    fputc(',', out);
  *first = 0;
  fprintf(out, "\n  ");
  gs_json_str(out, k);
  fputs(": ", out);
}

static void kv_num(FILE *out, const char *k, double v, int *first) {
  if (!*first)
    fputc(',', out);
  *first = 0;
  gs_json_str(out, k);
  fputc(':', out);
  gs_json_num(out, v);
}

static void kv_str(FILE *out, const char *k, const char *v, int *first) {
  if (!*first)
    fputc(',', out);
  *first = 0;
  gs_json_str(out, k);
  fputc(':', out);
  gs_json_str(out, v);
}

static void run_object(FILE *out, const struct report_run *r) {
  int f = 1;
  fputc('{', out);
  kv_str(out, "id", r->view.run.id, &f);
  kv_str(out, "name", r->view.run.name, &f);
  kv_str(out, "group", r->view.run.group, &f);
  kv_str(out, "status", r->view.run.status, &f);
  kv_str(out, "command", r->view.run.command, &f);
  kv_str(out, "cwd", r->view.run.cwd, &f);
  kv_str(out, "host", r->view.run.host, &f);
  kv_str(out, "user", r->view.run.user, &f);
  kv_str(out, "tags", r->view.run.tags, &f);
  kv_num(out, "start_wall_ns", (double)r->view.run.start_wall_ns, &f);
  kv_num(out, "end_wall_ns", r->view.run.end_wall_ns ? (double)r->view.run.end_wall_ns : NAN, &f);
  kv_num(out, "duration_s", r->view.duration_s, &f);
  kv_num(out, "exit_code", r->view.run.exit_code, &f);
  fputc('}', out);
}

static void params_object(FILE *out, const struct report_run *r) {
  int f = 1;
  fputc('{', out);
  for (size_t i = 0; i < r->view.nparams; i++)
    kv_str(out, r->view.params[i].key ? r->view.params[i].key : "", r->view.params[i].value, &f);
  fputc('}', out);
}

static void figures_object(FILE *out, const struct report_run *r) {
  int f = 1;
  fputc('{', out);
  kv_num(out, "steps", (double)r->steps.steps, &f);
  kv_num(out, "samples", r->steps.steps ? r->steps.samples : NAN, &f);
  kv_num(out, "samples_per_s", r->steps.samples_per_s, &f);
  kv_num(out, "median_step_s", r->steps.median_step_s, &f);
  /* The steps the median is taken over: all of them, or evenly spread stretches of a long run's. */
  kv_num(out, "steps_held", (double)r->steps.steps_held, &f);
  kv_num(out, "step_stretches", (double)r->steps.stretches, &f);
  kv_num(out, "data_share", r->steps.data_share, &f);
  kv_num(out, "h2d_share", r->steps.h2d_share, &f);
  kv_num(out, "compute_share", r->steps.compute_share, &f);
  kv_num(out, "gpus", r->ngpus, &f);
  kv_num(out, "gpu_util_pct", r->gpu_util, &f);
  kv_num(out, "sm_active_pct", r->sm_active, &f);
  kv_num(out, "gpu_mem_peak_bytes", r->gpu_mem_peak, &f);
  kv_num(out, "energy_j", r->energy_j, &f);
  kv_num(out, "energy_per_sample_j", r->energy_per_sample, &f);
  kv_num(out, "gpu_hours", r->gpu_hours, &f);
  kv_num(out, "gpu_idle_hours", r->gpu_idle_hours, &f);
  kv_num(out, "host_cpu_pct", r->host_cpu, &f);
  kv_num(out, "job_cpu_pct", r->job_cpu, &f);
  kv_num(out, "job_rss_peak_bytes", r->job_rss_peak, &f);
  fputc('}', out);
}

static void gpus_array(FILE *out, const struct report_run *r) {
  fputc('[', out);
  for (int i = 0; i < r->ngpus; i++) {
    const struct report_gpu *g = &r->gpus[i];
    int f = 1;
    fputs(i ? ",{" : "{", out);
    kv_num(out, "index", g->index, &f);
    kv_str(out, "name", g->name, &f);
    kv_num(out, "util_pct", g->util, &f);
    kv_num(out, "util_min_pct", g->util_min, &f);
    kv_num(out, "sm_active_pct", g->sm_active, &f);
    kv_num(out, "tensor_active_pct", g->tensor, &f);
    kv_num(out, "mem_peak_bytes", g->mem_peak, &f);
    kv_num(out, "mem_total_bytes", g->mem_total, &f);
    kv_num(out, "power_w", g->power, &f);
    kv_num(out, "power_limit_w", g->power_limit, &f);
    kv_num(out, "temp_max_c", g->temp_max, &f);
    kv_num(out, "energy_j", g->energy_j, &f);
    fputc('}', out);
  }
  fputc(']', out);
}

/* One finding; shared with compare. */
static void finding_object(FILE *out, const struct store_finding *x) {
  int f = 1;
  fputc('{', out);
  kv_str(out, "rule", x->rule, &f);
  kv_str(out, "severity", x->severity, &f);
  kv_num(out, "share", x->share, &f);
  kv_num(out, "lost_s", x->lost_s, &f);
  kv_num(out, "speedup", x->speedup, &f);
  kv_str(out, "title", x->title, &f);
  if (gs_json_object_valid(x->evidence)) {
    fputs(",\"evidence\":", out);
    fputs(x->evidence, out);
  } else {
    fputs(",\"evidence\":{}", out);
    kv_str(out, "evidence_text", x->evidence, &f);
  }
  kv_str(out, "fix", x->fix, &f);
  fputc('}', out);
}

static void findings_array(FILE *out, const struct report_run *r) {
  fputc('[', out);
  for (size_t i = 0; i < r->view.nfindings; i++) {
    fputs(i ? ",\n    " : "\n    ", out);
    finding_object(out, &r->view.findings[i]);
  }
  fputc(']', out);
}

int report_json(FILE *out, const struct report_run *r) {
  int first = 1;
  fputc('{', out);
  key(out, "run", &first);
  run_object(out, r);
  key(out, "params", &first);
  params_object(out, r);
  key(out, "figures", &first);
  figures_object(out, r);
  key(out, "gpus", &first);
  gpus_array(out, r);
  key(out, "diagnosed_now", &first);
  fputs(r->diagnosed ? "true" : "false", out);
  /* A diagnosis that failed: "error" says why and findings is null, never an empty list. */
  if (r->diag_rc) {
    key(out, "error", &first);
    gs_json_str(out, r->diag_error);
  }
  key(out, "findings", &first);
  if (r->diag_rc)
    fputs("null", out);
  else
    findings_array(out, r);
  /* The findings' gains combined by one step-time model (doctor_combine); null with fewer than two. */
  key(out, "combined", &first);
  struct doctor_combined c;
  doctor_combine(r->view.findings, r->view.nfindings, &c);
  if (c.findings < 2) {
    fputs("null", out);
  } else {
    int f = 1;
    fputc('{', out);
    kv_num(out, "findings", c.findings, &f);
    fputs(c.overlapping ? ",\"overlapping\":true" : ",\"overlapping\":false", out);
    kv_num(out, "share", c.share, &f);
    kv_num(out, "speedup", c.speedup, &f);
    kv_str(out, "model",
           "T = stalls + step; step = data wait + h2d + straggler wait + GPU work + host idle (loading in "
           "workers overlapping the rest); every finding's change applied to the same T: T / T'",
           &f);
    fputc('}', out);
  }
  key(out, "notes", &first);
  fputc('[', out);
  for (size_t i = 0; i < r->view.nnotes; i++) {
    if (i)
      fputc(',', out);
    gs_json_str(out, r->view.notes[i]);
  }
  fputc(']', out);
  key(out, "log_tail", &first); /* the last lines of a failed, killed or crashed run's output */
  fputc('[', out);
  for (size_t i = 0; i < r->nlog_tail; i++) {
    if (i)
      fputc(',', out);
    gs_json_str(out, r->log_tail[i]);
  }
  fputs("]\n}\n", out);
  return ferror(out) ? gs_fail(GS_EIO, "cannot write the report") : GS_OK;
}

/* ---- compare ---- */

static void rules_array(FILE *out, const struct report_run *r, const struct report_run *other, int missing_in_other) {
  int f = 1;
  fputc('[', out);
  for (size_t k = 0; k < r->view.nfindings; k++)
    if (!other || (missing_in_other && !rp_has_rule(other, r->view.findings[k].rule))) {
      fputs(f ? "" : ",", out), f = 0;
      gs_json_str(out, r->view.findings[k].rule);
    }
  fputc(']', out);
}

struct param_diff {
  FILE *out;
  const struct report_run *runs;
  size_t n;
  int first;
  const struct runview **views; /* the runs' views, for report_param_values_json */
};

static void param_diff(void *user, const char *key) {
  struct param_diff *p = user;
  fputs(p->first ? "\n  " : ",\n  ", p->out);
  p->first = 0;
  gs_json_str(p->out, key);
  fputs(": ", p->out);
  report_param_values_json(p->out, p->views, p->n, key);
}

/* One job metric across the runs: {"better": "lower"|"higher", "runs": [{"n", "last", "best"}, ...]},
 * null for a run that did not log it. */
static void metric_json(void *user, const char *name) {
  struct param_diff *d = user;
  if (!d->first)
    fputc(',', d->out);
  d->first = 0;
  fputs("\n  ", d->out);
  gs_json_str(d->out, name);
  struct rp_metric m;
  rp_job_metric(&d->runs[0], name, &m);
  fprintf(d->out, ": {\"better\": \"%s\", \"runs\": [", m.lower_better ? "lower" : "higher");
  for (size_t i = 0; i < d->n; i++) {
    if (i)
      fputc(',', d->out);
    if (!rp_job_metric(&d->runs[i], name, &m)) {
      fputs("null", d->out);
      continue;
    }
    fprintf(d->out, "{\"n\": %zu, \"last\": ", m.n);
    gs_json_num(d->out, m.last);
    fputs(", \"best\": ", d->out);
    gs_json_num(d->out, m.best);
    fputc('}', d->out);
  }
  fputs("]}", d->out);
}

int report_compare_json(FILE *out, const struct report_run *runs, size_t n) {
  fputs("{\"runs\": [", out);
  for (size_t i = 0; i < n; i++) {
    const struct report_run *r = &runs[i];
    fputs(i ? ",\n  {" : "\n  {", out);
    fputs("\"run\":", out);
    run_object(out, r);
    fputs(",\"figures\":", out);
    figures_object(out, r);
    fputs(",\"speedup_vs_first\":", out);
    gs_json_num(out, runview_step_speedup(&runs[0].steps, &r->steps));
    fputs(",\"rules\":", out);
    rules_array(out, r, NULL, 0);
    fputs(",\"appeared\":", out);
    if (i)
      rules_array(out, r, &runs[0], 1);
    else
      fputs("[]", out);
    fputs(",\"disappeared\":", out);
    if (i)
      rules_array(out, &runs[0], r, 1);
    else
      fputs("[]", out);
    fputs(",\"findings\":[", out);
    for (size_t k = 0; k < r->view.nfindings; k++) {
      if (k)
        fputc(',', out);
      finding_object(out, &r->view.findings[k]);
    }
    fputs("]}", out);
  }
  fputs("\n],\n\"params_differing\": {", out);
  const struct runview **views = n ? malloc(n * sizeof *views) : NULL;
  for (size_t i = 0; i < n && views; i++)
    views[i] = &runs[i].view;
  struct param_diff pd = {out, runs, n, 1, views};
  if (views) /* out of memory: no params listed */
    rp_differing_params(runs, n, param_diff, &pd);
  fputs("},\n\"origin_differing\": {", out);
  struct param_diff od = {out, runs, n, 1, views};
  if (views)
    rp_origin_differ(runs, n, param_diff, &od);
  free(views);
  fputs("},\n\"job_metrics\": {", out);
  struct param_diff md = {out, runs, n, 1, NULL};
  rp_job_metrics(runs, n, metric_json, &md);
  fputs("}\n}\n", out);
  return ferror(out) ? gs_fail(GS_EIO, "cannot write the comparison") : GS_OK;
}
