/* report/text: `gpuscope report RUN` on a terminal — the run's facts, the training loop's split,
 * each GPU's use, then the findings ranked by time lost, each with its cost, estimated speed-up,
 * evidence numbers and fix. Colour only when the caller says (a TTY without NO_COLOR). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "report/report_int.h"

struct style {
  const char *bold, *dim, *reset, *red, *yellow, *cyan, *green;
};

static struct style style_of(int color) {
  if (!color)
    return (struct style){"", "", "", "", "", "", ""};
  return (struct style){"\033[1m", "\033[2m", "\033[0m", "\033[31m", "\033[33m", "\033[36m", "\033[32m"};
}

static const char *severity_color(const struct style *s, const char *sev, const char *rule) {
  if (!strcmp(rule, "healthy"))
    return s->green;
  return !strcmp(sev, "high") ? s->red : !strcmp(sev, "medium") ? s->yellow : s->cyan;
}

struct ev_print {
  FILE *out;
  size_t col;
  const char *rule;
  int hidden; /* members left to --json (how the estimate was made) */
};

/* One evidence member a person reads (doctor_evidence_shown; the rest is counted and left to --json)
 * as key=value in the unit its key names, wrapping lines at about 100 columns. */
static void ev_member(void *user, const char *key, size_t klen, const char *val, size_t vlen) {
  struct ev_print *p = user;
  if (!doctor_evidence_shown(p->rule, key, klen)) {
    p->hidden++;
    return;
  }
  char k[64], v[160];
  snprintf(k, sizeof k, "%.*s", (int)(klen < 63 ? klen : 63), key);
  rp_ev_value(v, sizeof v, key, klen, val, vlen);
  size_t w = strlen(k) + strlen(v) + 2;
  if (p->col + w > 100) {
    fputs("\n              ", p->out);
    p->col = 14;
  }
  gs_term_text(p->out, k, 0);
  fputc('=', p->out);
  gs_term_text(p->out, v, 0);
  fputc(' ', p->out);
  p->col += w;
}

/* One line of a fix: prose is wrapped at about 100 columns, code (indented) is kept as it is. */
static void fix_line(FILE *out, const char *line) {
  if (line[0] == ' ' || strlen(line) <= 94) {
    fputs("      ", out);
    gs_term_text(out, line, 0);
    fputc('\n', out);
    return;
  }
  const char *p = line;
  while (*p) {
    size_t len = strlen(p);
    if (len > 94) {
      len = 94;
      while (len > 40 && p[len] != ' ')
        len--;
    }
    char part[128];
    snprintf(part, sizeof part, "%.*s", (int)len, p);
    fputs("      ", out);
    gs_term_text(out, part, 0);
    fputc('\n', out);
    p += len;
    while (*p == ' ')
      p++;
  }
}

static void print_finding(FILE *out, const struct style *s, size_t i, const struct store_finding *f) {
  char rule[32], sev[16];
  rp_ident(rule, sizeof rule, f->rule);
  rp_ident(sev, sizeof sev, f->severity);
  for (char *c = sev; *c; c++)
    *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
  fprintf(out, "\n %zu. %s%s%-6s%s %s%s%s — ", i + 1, s->bold, severity_color(s, f->severity, rule), sev, s->reset,
          s->bold, rule, s->reset);
  gs_term_text(out, f->title, 0);
  fputc('\n', out);
  if (!doctor_is_verdict(rule)) {
    fprintf(out, "    cost:     %.0f%% of the training time", (isfinite(f->share) ? f->share : 0) * 100);
    if (isfinite(f->lost_s) && f->lost_s > 0)
      fprintf(out, " (%.1f s)", f->lost_s);
    if (isfinite(f->speedup) && f->speedup >= 1.005)
      fprintf(out, "; estimated %.2fx faster if fixed", f->speedup);
    fputc('\n', out);
  }
  if (gs_json_object_valid(f->evidence)) {
    fputs("    evidence: ", out);
    struct ev_print p = {out, 14, rule, 0};
    gs_json_members(f->evidence, ev_member, &p);
    fputc('\n', out);
    if (p.hidden && !doctor_is_verdict(rule))
      fputs("    how this was estimated: the step model and its inputs are in `gpuscope report --json`\n", out);
  } else if (f->evidence[0]) {
    fputs("    evidence (not valid JSON): ", out);
    gs_term_text(out, f->evidence, 0);
    fputc('\n', out);
  }
  if (f->fix[0])
    fputs("    fix:\n", out);
  for (const char *p = f->fix; *p;) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    char line[1024];
    snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line - 1 ? len : sizeof line - 1), p);
    fix_line(out, line);
    p += len + (nl ? 1 : 0);
  }
}

/* A run an Xid ended (the doctor's gpu_xid, the whole run lost) says so on its first line: the
 * reader's first question is whether the code or the GPU failed. */
static void print_gpu_death(FILE *out, const struct report_run *r) {
  for (size_t i = 0; i < r->view.nfindings; i++) {
    const struct store_finding *f = &r->view.findings[i];
    if (!strcmp(f->rule, "gpu_xid") && f->share >= 1) {
      fputs(": ", out);
      gs_term_text(out, f->title, 0);
      return;
    }
  }
}

/* The run's identity: id, name, status, command, host, GPUs and the job's own parameters. */
static void print_header(FILE *out, const struct style *s, const struct report_run *r) {
  char dur[32], when[32], gpus[256];
  fprintf(out, "%sgpuscope report%s %s", s->bold, s->reset, r->view.run.id);
  if (r->view.run.name[0]) {
    fputs(" (", out);
    gs_term_text(out, r->view.run.name, 0);
    fputc(')', out);
  }
  rp_duration(dur, sizeof dur, r->view.duration_s);
  fprintf(out, " — ");
  gs_term_text(out, r->view.run.status, 0);
  char why[96];
  fprintf(out, "%s, %s, exit %d", rp_exit_why(why, sizeof why, &r->view), dur, r->view.run.exit_code);
  print_gpu_death(out, r);
  fputs("\n  command:  ", out);
  gs_term_text(out, r->view.run.command, 0);
  fputs("\n  host:     ", out);
  gs_term_text(out, r->view.run.host, 0);
  fprintf(out, ", started %s; GPUs: ", rp_when(r->view.run.start_wall_ns, when, sizeof when));
  gs_term_text(out, rp_gpus(r, gpus, sizeof gpus), 0);
  fputc('\n', out);
  rp_origin_text(out, r);
  int shown = 0;
  for (size_t i = 0; i < r->view.nparams; i++) {
    const char *k = r->view.params[i].key ? r->view.params[i].key : "";
    if (report_param_is_internal(k) || rp_param_is_origin(k))
      continue;
    fputs(shown++ ? " " : "  params:   ", out);
    gs_term_text(out, k, 0);
    fputc('=', out);
    gs_term_text(out, r->view.params[i].value, 0);
  }
  if (shown)
    fputc('\n', out);
}

/* The training loop's step figures, then the host's, the job's and every GPU's. */
static void print_training_loop(FILE *out, const struct style *s, const struct report_run *r) {
  char b1[64], b2[64], b3[64], b4[64];
  fprintf(out, "\n%straining loop%s\n", s->bold, s->reset);
  if (r->steps.steps) {
    fprintf(out, "  %zu steps, %s samples/s, median step %s\n", r->steps.steps,
            rp_num(b1, sizeof b1, r->steps.samples_per_s, 1, ""),
            rp_num(b2, sizeof b2, r->steps.median_step_s * 1e3, 1, "ms"));
    if (r->steps.steps_held < r->steps.steps)
      fprintf(out,
              "  (median step from %zu of the %zu steps, in %zu stretches spread over the run; counts, "
              "samples/s and shares from every step)\n",
              r->steps.steps_held, r->steps.steps, r->steps.stretches);
    fprintf(out, "  step time: data wait %s, host-to-device %s, compute %s\n",
            rp_pct(b1, sizeof b1, r->steps.data_share), rp_pct(b2, sizeof b2, r->steps.h2d_share),
            rp_pct(b3, sizeof b3, r->steps.compute_share));
  } else {
    fputs("  no step timings (the job did not use the gpuscope client: see docs/protocol.md)\n", out);
  }
  fprintf(out, "  host CPU mean %s; the job: CPU %s of one core, RSS peak %s\n",
          rp_num(b1, sizeof b1, r->host_cpu, 0, "%"), rp_num(b2, sizeof b2, r->job_cpu, 0, "%"),
          rp_bytes(b3, sizeof b3, r->job_rss_peak));
  for (int i = 0; i < r->ngpus; i++) {
    const struct report_gpu *g = &r->gpus[i];
    fprintf(out, "  GPU %d: util %s (min %s), SM active %s, tensor %s, memory peak %s of %s, power %s, temp max %s",
            g->index, rp_num(b1, sizeof b1, g->util, 0, "%"), rp_num(b2, sizeof b2, g->util_min, 0, "%"),
            rp_num(b3, sizeof b3, g->sm_active, 0, "%"), rp_num(b4, sizeof b4, g->tensor, 0, "%"),
            rp_bytes((char[32]){0}, 32, g->mem_peak), rp_bytes((char[32]){0}, 32, g->mem_total),
            rp_num((char[32]){0}, 32, g->power, 0, "W"), rp_num((char[32]){0}, 32, g->temp_max, 0, "C"));
    rp_gpu_owner(out, &r->view, g->index);
    fputc('\n', out);
  }
  if (r->ngpus)
    fprintf(out, "  GPU energy %s (%s per sample); idle GPU-hours %s of %s\n",
            rp_num(b1, sizeof b1, r->energy_j / 3.6e6, 4, "kWh"), rp_num(b2, sizeof b2, r->energy_per_sample, 3, "J"),
            rp_num(b3, sizeof b3, r->gpu_idle_hours, 3, ""), rp_num(b4, sizeof b4, r->gpu_hours, 3, ""));
}

static void print_gaps(FILE *out, const struct style *s, const struct report_run *r) {
  char gaps[32], *gap_text = NULL;
  size_t gap_len = 0;
  snprintf(gaps, sizeof gaps, "  %s!%s ", s->yellow, s->reset);
  FILE *g = open_memstream(&gap_text, &gap_len);
  int ngaps = g ? rp_data_gaps(g, gaps, r->view.params, r->view.nparams) : 0;
  if (g && !fclose(g) && ngaps)
    fprintf(out, "\n%sgaps in the data%s\n%s", s->bold, s->reset, gap_text);
  free(gap_text);
}

/* Why rules could not judge the run (doctor_not_judged), as notes, when no healthy verdict says it
 * already: each reason ("rule: why", "; " between them) whose rule has no finding of its own (whose
 * fix says it there). Returns how many it printed after the `printed` notes before it. */
static size_t print_not_judged(FILE *out, const struct report_run *r, size_t printed) {
  for (size_t i = 0; i < r->view.nfindings; i++)
    if (!strcmp(r->view.findings[i].rule, "healthy"))
      return 0;
  char buf[1024];
  size_t k = 0;
  doctor_not_judged(&r->view, buf, sizeof buf);
  for (char *p = buf, *next; p && *p; p = next) {
    next = strstr(p, "; ");
    if (next)
      *next = 0, next += 2;
    int own = 0;
    for (size_t i = 0; i < r->view.nfindings; i++) {
      size_t rl = strlen(r->view.findings[i].rule);
      own |= rl && !strncmp(p, r->view.findings[i].rule, rl) && p[rl] == ':';
    }
    if (own)
      continue;
    fputs(printed + k++ ? "\n  not judged: " : "\nnotes\n  not judged: ", out);
    gs_term_text(out, p, 0);
  }
  return k;
}

/* The findings ranked by time lost, their combined fix, then the run's notes. */
static void print_findings(FILE *out, const struct style *s, const struct report_run *r) {
  fprintf(out, "\n%sfindings%s, ranked by time lost%s\n", s->bold, s->reset, r->diagnosed ? " (diagnosed now)" : "");
  if (r->diag_rc) {
    fputs("  none: the diagnosis could not run: ", out);
    gs_term_text(out, r->diag_error, 0);
    fputc('\n', out);
  } else if (!r->view.nfindings) {
    fputs("  none stored for this run\n", out);
  }
  for (size_t i = 0; i < r->view.nfindings; i++)
    print_finding(out, s, i, &r->view.findings[i]);
  char comb[320];
  if (rp_combined_line(comb, sizeof comb, r->view.findings, r->view.nfindings)[0]) {
    fprintf(out, "\n %sTogether:%s\n", s->bold, s->reset);
    fix_line(out, comb);
  }
  for (size_t i = 0; i < r->view.nnotes; i++) {
    fputs(i ? "\n  " : "\nnotes\n  ", out);
    gs_term_text(out, r->view.notes[i], 0);
  }
  if (r->view.nnotes + (r->diag_rc ? 0 : print_not_judged(out, r, r->view.nnotes)))
    fputc('\n', out);
}

/* The last lines of a run that did not finish well, escaped for the terminal. */
static void print_log_tail(FILE *out, const struct style *s, const struct report_run *r) {
  if (!r->nlog_tail)
    return;
  fprintf(out, "\n%slast lines of its output%s (gpuscope log %s)\n", s->bold, s->reset, r->view.run.id);
  for (size_t i = 0; i < r->nlog_tail; i++) {
    fputs("  | ", out);
    gs_term_text(out, r->log_tail[i], 0);
    fputc('\n', out);
  }
}

int report_text(FILE *out, const struct report_run *r, int color) {
  struct style s = style_of(color);
  print_header(out, &s, r);
  print_log_tail(out, &s, r);
  print_training_loop(out, &s, r);
  print_gaps(out, &s, r);
  print_findings(out, &s, r);
  return ferror(out) ? gs_fail(GS_EIO, "cannot write the report") : GS_OK;
}
