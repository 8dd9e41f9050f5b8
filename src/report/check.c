/* report/check: `gpuscope check`, the gate a CI job puts on a training run — budgets on its
 * throughput against a baseline run, its data wait, its GPU use and the findings it may not have —
 * judged on the same report figures `report` and `compare` print (the throughput is the run view's,
 * runview_throughput), with the speed-up's noise taken from the runs' own steps (core/stats.c, batch
 * means). A budget holds only when the measurement can tell: the speed-up's 95 % interval wholly at
 * or above the budget; wholly below breaks it; an interval that spans the budget is "cannot tell",
 * with how many steps would tell, and breaks the gate too. A figure the run did not measure breaks
 * its budget as "unknown", never passes it: a gate that cannot see is not a gate. Each broken budget
 * names the finding that explains it. Written as text, JSON or JUnit XML (what CI systems show). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "doctor/doctor.h"
#include "report/report_int.h"

static int every_step_counts_samples(const struct report_run *r) {
  for (size_t i = 0; i < r->view.nsteps; i++)
    if (!(isfinite(r->view.steps[i].samples) && r->view.steps[i].samples > 0))
      return 0;
  return r->view.nsteps > 0;
}

/* The first finding of r (they are ranked) whose rule is one of rules (comma-separated; NULL: any
 * but the verdicts: healthy, insufficient_data), or NULL. */
static const struct store_finding *explaining(const struct report_run *r, const char *rules) {
  for (size_t i = 0; i < r->view.nfindings; i++) {
    const char *id = r->view.findings[i].rule;
    if (!rules) {
      if (!doctor_is_verdict(id))
        return &r->view.findings[i];
      continue;
    }
    size_t n = strlen(id);
    for (const char *p = rules; (p = strstr(p, id)); p += n)
      if ((p == rules || p[-1] == ',') && (p[n] == ',' || !p[n]))
        return &r->view.findings[i];
  }
  return NULL;
}

static void explain(struct report_check_item *it, const struct store_finding *f) {
  if (!f)
    return;
  snprintf(it->rule, sizeof it->rule, "%s", f->rule);
  snprintf(it->title, sizeof it->title, "%s", f->title);
  it->finding_speedup = f->speedup;
}

static struct report_check_item *item_new(struct report_check *c, const char *name) {
  if (c->n >= sizeof c->items / sizeof c->items[0])
    return NULL;
  struct report_check_item *it = &c->items[c->n++];
  memset(it, 0, sizeof *it);
  snprintf(it->name, sizeof it->name, "%s", name);
  it->measured = it->limit = it->ci = it->finding_speedup = it->steps_needed = NAN;
  return it;
}

/* About how many steps of the run would make the speed-up s (±cs, from the run's relative half-width
 * ra over n steps and the baseline's rb) tell against the budget min, at the same spread per step: the
 * half-width shrinks as 1/sqrt(steps). NAN when no count would: s is the budget, or the baseline's own
 * spread is already wider than the gap. */
static double steps_to_tell(double s, double min, double ra, double rb, size_t n) {
  double d = fabs(s - min) / s;
  if (!(d * d > rb * rb) || !(ra > 0))
    return NAN;
  return ceil((double)n * ra * ra / (d * d - rb * rb));
}

/* The verdict on the speed-up's interval: it holds only when the whole interval is at or above the
 * budget, breaks when the whole is below, and otherwise cannot tell, saying how many steps would. */
static void speedup_verdict(struct report_check_item *it, const struct report_run *r, double ra, double rb) {
  double s = it->measured, lo = s - it->ci, hi = s + it->ci, min = it->limit;
  it->status = lo >= min ? REPORT_CHECK_OK : hi < min ? REPORT_CHECK_FAIL : REPORT_CHECK_CANNOT_TELL;
  if (it->status != REPORT_CHECK_CANNOT_TELL)
    return;
  it->steps_needed = steps_to_tell(s, min, ra, rb, r->view.nsteps);
  size_t k = strlen(it->why);
  if (isfinite(it->steps_needed))
    snprintf(it->why + k, sizeof it->why - k,
             "; cannot tell: %.3gx to %.3gx spans the budget; about %.0f steps of the run (it has %zu) would tell "
             "at this spread",
             lo, hi, it->steps_needed, r->view.nsteps);
  else
    snprintf(it->why + k, sizeof it->why - k,
             "; cannot tell: %.3gx to %.3gx spans the budget, and the baseline's own spread is too wide for "
             "any length of this run to tell: the baseline needs more steps",
             lo, hi);
}

static void check_speedup(struct report_check *c, const struct report_run *r, const struct report_run *base,
                          double min) {
  struct report_check_item *it = item_new(c, "min_speedup");
  if (!it)
    return;
  it->limit = min;
  int with_samples = every_step_counts_samples(r) && every_step_counts_samples(base);
  double a, ca, b, cb;
  int dof, bad_run = runview_throughput(&r->view, 0, r->view.nsteps, with_samples, &a, &ca, &dof);
  if (bad_run || runview_throughput(&base->view, 0, base->view.nsteps, with_samples, &b, &cb, &dof) || !(b > 0)) {
    it->status = REPORT_CHECK_UNKNOWN;
    snprintf(it->why, sizeof it->why, "%s has fewer than two timed steps: its throughput is unknown",
             bad_run ? "the run" : "the baseline");
    return;
  }
  it->measured = a / b;
  /* the ratio's half-width by the delta method; a run against itself is exactly 1x, without noise */
  int self = !strcmp(r->view.run.id, base->view.run.id);
  double ra = self ? 0 : ca / a, rb = self ? 0 : cb / b;
  it->ci = it->measured * sqrt(ra * ra + rb * rb);
  snprintf(it->why, sizeof it->why, "%s/s %.5g against the baseline's %.5g%s", with_samples ? "samples" : "steps", a, b,
           self ? " (the run is its own baseline)" : "");
  speedup_verdict(it, r, ra, rb);
  if (it->status == REPORT_CHECK_FAIL) {
    /* what the run has that the baseline did not: a finding that appeared, else its top one */
    for (size_t i = 0; i < r->view.nfindings && !it->rule[0]; i++) {
      const struct store_finding *f = &r->view.findings[i];
      if (doctor_is_verdict(f->rule))
        continue;
      int in_base = 0;
      for (size_t j = 0; j < base->view.nfindings; j++)
        in_base |= !strcmp(base->view.findings[j].rule, f->rule);
      if (!in_base)
        explain(it, f);
    }
    if (!it->rule[0])
      explain(it, explaining(r, NULL));
  }
}

static void check_share(struct report_check *c, const char *name, double measured, double limit, int is_max,
                        const char *what_missing, const char *rules, const struct report_run *r) {
  struct report_check_item *it = item_new(c, name);
  if (!it)
    return;
  it->limit = limit;
  it->measured = measured;
  if (!isfinite(measured)) {
    it->status = REPORT_CHECK_UNKNOWN;
    snprintf(it->why, sizeof it->why, "%s", what_missing);
    return;
  }
  it->status = (is_max ? measured > limit : measured < limit) ? REPORT_CHECK_FAIL : REPORT_CHECK_OK;
  if (it->status == REPORT_CHECK_FAIL)
    explain(it, explaining(r, rules));
}

/* GS_OK when every id of the comma-separated list names a rule of the doctor, else GS_EINVAL naming
 * the first that does not: a misspelt rule would never be found, and its budget would always hold. */
static int known_rules(const char *list) {
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ",");
    int known = 0;
    for (size_t i = 0; doctor_rule_id(i) && !known; i++)
      known = strlen(doctor_rule_id(i)) == n && !strncmp(doctor_rule_id(i), p, n);
    if (!known && n) {
      char all[512] = "";
      for (size_t i = 0, k = 0; doctor_rule_id(i) && k < sizeof all; i++)
        k += (size_t)snprintf(all + k, sizeof all - k, "%s%s", i ? ", " : "", doctor_rule_id(i));
      return gs_fail(GS_EINVAL, "--forbid: '%.*s' is not a rule of the doctor (%s)", (int)(n > 64 ? 64 : n), p, all);
    }
    p += n + (p[n] == ',');
  }
  return GS_OK;
}

int report_check_run(const struct report_run *r, const struct report_run *base, const struct report_budgets *b,
                     struct report_check *out) {
  memset(out, 0, sizeof *out);
  if (b->forbid[0] && known_rules(b->forbid))
    return GS_EINVAL;
  if (isfinite(b->min_speedup)) {
    if (!base)
      return gs_fail(GS_EINVAL, "--min-speedup needs --baseline RUN");
    check_speedup(out, r, base, b->min_speedup);
  }
  if (isfinite(b->max_data_wait))
    check_share(out, "max_data_wait", r->steps.data_share, b->max_data_wait, 1,
                "the job's steps did not time their data wait (the client's data= phase)",
                "input_bound,loader_workers,input_latency,storage_bound", r);
  if (isfinite(b->min_gpu_util))
    check_share(out, "min_gpu_util", isfinite(r->gpu_util) ? r->gpu_util / 100 : NAN, b->min_gpu_util, 0,
                "no GPU utilisation was measured in this run", NULL, r);
  if (b->forbid[0]) {
    char list[sizeof b->forbid];
    snprintf(list, sizeof list, "%s", b->forbid);
    char *save = NULL;
    for (char *rule = strtok_r(list, ",", &save); rule; rule = strtok_r(NULL, ",", &save)) {
      char name[80];
      snprintf(name, sizeof name, "forbid:%.60s", rule);
      struct report_check_item *it = item_new(out, name);
      if (!it)
        break;
      const struct store_finding *f = explaining(r, rule);
      it->status = f ? REPORT_CHECK_FAIL : REPORT_CHECK_OK;
      explain(it, f);
    }
  }
  if (!out->n)
    return gs_fail(GS_EINVAL, "no budget given (--min-speedup, --max-data-wait, --min-gpu-util, --forbid)");
  for (size_t i = 0; i < out->n; i++)
    out->broken += out->items[i].status != REPORT_CHECK_OK;
  return GS_OK;
}

static const char *status_word(int s) {
  return s == REPORT_CHECK_OK        ? "ok"
         : s == REPORT_CHECK_FAIL    ? "FAIL"
         : s == REPORT_CHECK_UNKNOWN ? "UNKNOWN"
                                     : "CANNOT TELL";
}

/* The status as JSON and JUnit write it: ok, fail, unknown, cannot_tell. */
static const char *status_id(int s) {
  return s == REPORT_CHECK_OK        ? "ok"
         : s == REPORT_CHECK_FAIL    ? "fail"
         : s == REPORT_CHECK_UNKNOWN ? "unknown"
                                     : "cannot_tell";
}

/* The budget and the figure in words: "speed-up vs baseline 0.91x (±0.02), budget >= 0.95x". */
static void item_figures(const struct report_check_item *it, char *buf, size_t n) {
  if (!strcmp(it->name, "min_speedup")) {
    char m[64] = "unknown";
    if (isfinite(it->measured))
      snprintf(m, sizeof m, "%.3fx (±%.3f)", it->measured, isfinite(it->ci) ? it->ci : 0);
    snprintf(buf, n, "speed-up vs baseline %s, budget >= %.3gx", m, it->limit);
  } else if (!strncmp(it->name, "forbid:", 7)) {
    snprintf(buf, n, "finding %s %s", it->name + 7, it->rule[0] ? "present" : "absent");
  } else {
    char m[32] = "unknown";
    if (isfinite(it->measured))
      snprintf(m, sizeof m, "%.1f %%", 100 * it->measured);
    int is_max = !strcmp(it->name, "max_data_wait");
    snprintf(buf, n, "%s %s, budget %s %.1f %%", is_max ? "data wait" : "GPU util", m,
             is_max ? "<=" : ">=", 100 * it->limit);
  }
}

int report_check_text(FILE *out, const struct report_run *r, const struct report_run *base,
                      const struct report_check *c) {
  fputs("gpuscope check: run ", out);
  gs_term_text(out, r->view.run.name[0] ? r->view.run.name : r->view.run.id, 0);
  if (base) {
    fputs(" against ", out);
    gs_term_text(out, base->view.run.name[0] ? base->view.run.name : base->view.run.id, 0);
    if (base->view.run.name[0])
      fprintf(out, " (run %s)", base->view.run.id); /* which of that name's runs the baseline is */
  }
  fputc('\n', out);
  for (size_t i = 0; i < c->n; i++) {
    const struct report_check_item *it = &c->items[i];
    char fig[256];
    item_figures(it, fig, sizeof fig);
    fprintf(out, "  %-7s %s", status_word(it->status), fig);
    if (it->status == REPORT_CHECK_UNKNOWN || it->status == REPORT_CHECK_CANNOT_TELL ||
        (it->why[0] && !strcmp(it->name, "min_speedup"))) {
      fputs(": ", out);
      gs_term_text(out, it->why, 0);
    }
    if (it->rule[0]) {
      fprintf(out, " — %s: ", it->rule);
      gs_term_text(out, it->title, 0);
      if (isfinite(it->finding_speedup) && it->finding_speedup > 1.0001)
        fprintf(out, " (~%.1fx if fixed)", it->finding_speedup);
    }
    fputc('\n', out);
  }
  fprintf(out, "%zu of %zu budgets hold%s\n", c->n - c->broken, c->n, c->broken ? "" : ": passed");
  return ferror(out) ? GS_EIO : GS_OK;
}

static void json_run(FILE *out, const struct report_run *r) {
  if (!r) {
    fputs("null", out);
    return;
  }
  fputs("{\"id\": ", out);
  gs_json_str(out, r->view.run.id);
  fputs(", \"name\": ", out);
  gs_json_str(out, r->view.run.name);
  fputc('}', out);
}

int report_check_json(FILE *out, const struct report_run *r, const struct report_run *base,
                      const struct report_check *c) {
  fputs("{\"run\": ", out);
  json_run(out, r);
  fputs(", \"baseline\": ", out);
  json_run(out, base);
  fprintf(out, ", \"passed\": %s, \"broken\": %zu, \"budgets\": [", c->broken ? "false" : "true", c->broken);
  for (size_t i = 0; i < c->n; i++) {
    const struct report_check_item *it = &c->items[i];
    fprintf(out, "%s{\"budget\": ", i ? ", " : "");
    gs_json_str(out, it->name);
    fputs(", \"status\": ", out);
    gs_json_str(out, status_id(it->status));
    fputs(", \"measured\": ", out);
    gs_json_num(out, it->measured);
    fputs(", \"ci\": ", out);
    gs_json_num(out, it->ci);
    fputs(", \"limit\": ", out);
    gs_json_num(out, it->limit);
    fputs(", \"steps_needed\": ", out);
    gs_json_num(out, it->steps_needed);
    fputs(", \"why\": ", out);
    gs_json_str(out, it->why);
    fputs(", \"explained_by\": ", out);
    if (it->rule[0]) {
      fputs("{\"rule\": ", out);
      gs_json_str(out, it->rule);
      fputs(", \"title\": ", out);
      gs_json_str(out, it->title);
      fputs(", \"speedup\": ", out);
      gs_json_num(out, it->finding_speedup);
      fputc('}', out);
    } else {
      fputs("null", out);
    }
    fputc('}', out);
  }
  fputs("]}\n", out);
  return ferror(out) ? GS_EIO : GS_OK;
}

/* s as XML character data or attribute text: & < > " ' escaped, control characters other than tab and
 * newline dropped (XML 1.0 cannot carry them), invalid UTF-8 replaced. */
static void xml_text(FILE *out, const char *s) {
  while (s && *s) {
    uint32_t cp;
    size_t n = gs_utf8_next(s, &cp);
    s += n ? n : 1;
    if (cp == '&')
      fputs("&amp;", out);
    else if (cp == '<')
      fputs("&lt;", out);
    else if (cp == '>')
      fputs("&gt;", out);
    else if (cp == '"')
      fputs("&quot;", out);
    else if (cp == '\'')
      fputs("&apos;", out);
    else if ((cp < 0x20 && cp != '\t' && cp != '\n') || cp == 0x7f || (cp >= 0x80 && cp < 0xa0) || cp == 0xfffe ||
             cp == 0xffff)
      continue;
    else
      gs_utf8_put(out, cp);
  }
}

/* One budget as a JUnit testcase: a broken one holds a <failure> (its figure missed the budget) or an
 * <error> (its figure was not measured, or its interval spans the budget: the gate could not judge), whose message is
 * the figures' line and whose text adds how it was measured, the finding that explains it and the baseline. */
static void junit_case(FILE *out, const struct report_run *base, const struct report_check_item *it) {
  char fig[256];
  item_figures(it, fig, sizeof fig);
  fputs("    <testcase classname=\"gpuscope.check\" name=\"", out);
  xml_text(out, it->name);
  if (it->status == REPORT_CHECK_OK) {
    fputs("\"/>\n", out);
    return;
  }
  const char *el = it->status == REPORT_CHECK_FAIL ? "failure" : "error";
  fprintf(out, "\">\n      <%s type=\"%s\" message=\"", el,
          it->status == REPORT_CHECK_FAIL ? "budget" : status_id(it->status));
  xml_text(out, fig);
  fputs("\">", out);
  xml_text(out, fig);
  if (it->why[0]) {
    fputs("\n", out);
    xml_text(out, it->why);
  }
  if (it->rule[0]) {
    fputs("\nexplained by ", out);
    xml_text(out, it->rule);
    fputs(": ", out);
    xml_text(out, it->title);
  }
  if (base) {
    fputs("\nbaseline: ", out);
    xml_text(out, base->view.run.name[0] ? base->view.run.name : base->view.run.id);
  }
  fprintf(out, "</%s>\n    </testcase>\n", el);
}

static void junit_property(FILE *out, const char *name, const char *value) {
  fprintf(out, "      <property name=\"%s\" value=\"", name);
  xml_text(out, value);
  fputs("\"/>\n", out);
}

int report_check_junit(FILE *out, const struct report_run *r, const struct report_run *base,
                       const struct report_check *c) {
  size_t failures = 0, errors = 0;
  for (size_t i = 0; i < c->n; i++)
    failures += c->items[i].status == REPORT_CHECK_FAIL,
        errors += c->items[i].status != REPORT_CHECK_OK && c->items[i].status != REPORT_CHECK_FAIL;
  fprintf(out,
          "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"%zu\" failures=\"%zu\" errors=\"%zu\">\n",
          c->n, failures, errors);
  fputs("  <testsuite name=\"gpuscope check ", out);
  xml_text(out, r->view.run.name[0] ? r->view.run.name : r->view.run.id);
  fprintf(out, "\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"0\"", c->n, failures, errors);
  /* when the run started (UTC, as JUnit's timestamp: no zone), where, and how long it ran */
  time_t t = (time_t)(r->view.run.start_wall_ns / 1000000000);
  struct tm tm;
  char when[32];
  if (r->view.run.start_wall_ns > 0 && gmtime_r(&t, &tm) && strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm))
    fprintf(out, " timestamp=\"%s\"", when);
  if (r->view.run.host[0]) {
    fputs(" hostname=\"", out);
    xml_text(out, r->view.run.host);
    fputc('"', out);
  }
  if (isfinite(r->view.duration_s) && r->view.duration_s >= 0)
    fprintf(out, " time=\"%.3f\"", r->view.duration_s);
  fputs(">\n    <properties>\n", out);
  junit_property(out, "run", r->view.run.id);
  if (base)
    junit_property(out, "baseline", base->view.run.id);
  fputs("    </properties>\n", out);
  for (size_t i = 0; i < c->n; i++)
    junit_case(out, base, &c->items[i]);
  fputs("  </testsuite>\n</testsuites>\n", out);
  return ferror(out) ? GS_EIO : GS_OK;
}
