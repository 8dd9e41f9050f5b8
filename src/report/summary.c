/* report/summary: the few lines `gpuscope run` prints when the job ends — how long, how busy the
 * host, the job and each GPU were, what the training loop reported, and last the doctor's top
 * findings (the full evidence and fixes are in `gpuscope report`). The run is read once, as a run
 * view (runview.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "report/report_int.h"

#define SUMMARY_FINDINGS 3 /* findings the summary lists */

/* How many GPUs the run had: the agent's gpu.count param, else one past the highest "gpu=N" label of
 * an nvml series (a run written before the param existed). A GPU that reported nothing (no util on a
 * MIG GPU, a lost GPU) still counts, so every GPU gets its line and its unknowns show as "—". */
static int summary_gpu_count(const struct runview *v) {
  double n = runview_param_num(v, "gpu.count");
  if (n >= 1 && n <= 1024)
    return (int)n;
  int max = -1;
  for (size_t i = 0; i < v->nseries; i++) {
    const char *lab = v->series[i].labels;
    char *end;
    long g = strcmp(v->series[i].source, "nvml") || strncmp(lab, "gpu=", 4) ? -1 : strtol(lab + 4, &end, 10);
    if (g > max && g < 1024 && end > lab + 4 && (*end == ',' || !*end))
      max = (int)g;
  }
  return max + 1;
}

/* The last block: the doctor's top findings, one line each, or the word that the run is healthy. */
static void print_findings(FILE *out, const struct runview *v) {
  const struct store_finding *f = v->findings;
  size_t nf = v->nfindings;
  const struct store_run *run = &v->run;
  if (!nf)
    return;
  if (nf == 1 && doctor_is_verdict(f[0].rule)) {
    fputs("  diagnosis: ", out);
    gs_term_text(out, f[0].title, 0);
    fputc('\n', out);
    return;
  }
  fprintf(out, "  diagnosis (evidence and fixes: gpuscope report %s):\n", run->id);
  for (size_t i = 0; i < nf && i < SUMMARY_FINDINGS; i++) {
    char cost[32], gain[32], rule[32];
    snprintf(cost, sizeof cost, "%.0f%% lost", f[i].share * 100);
    if (f[i].speedup >= 1.01)
      snprintf(gain, sizeof gain, "~%.1fx if fixed", f[i].speedup);
    else
      gain[0] = 0;
    fprintf(out, "    %zu. %-16s %-12s %-15s ", i + 1, rp_ident(rule, sizeof rule, f[i].rule), cost, gain);
    gs_term_text(out, f[i].title, 0);
    fputc('\n', out);
  }
  if (nf > SUMMARY_FINDINGS)
    fprintf(out, "    ... and %zu more\n", nf - SUMMARY_FINDINGS);
  char comb[320];
  if (rp_combined_line(comb, sizeof comb, f, nf)[0]) {
    fputs("    ", out);
    gs_term_text(out, comb, 0);
    fputc('\n', out);
  }
}

int report_summary(FILE *out, const struct runview *v) {
  const struct store_run run = v->run;
  char dur[32], b1[32], b2[32];
  double span = run.end_wall_ns > 0 ? ((double)run.end_wall_ns - (double)run.start_wall_ns) / GS_NS_PER_S : NAN;
  rp_duration(dur, sizeof dur, span);
  fprintf(out, "gpuscope: run %s", run.id);
  if (run.name[0]) {
    fputs(" (", out);
    gs_term_text(out, run.name, 0);
    fputc(')', out);
  }
  fputs(" — ", out);
  gs_term_text(out, run.status, 0);
  char why[96];
  fprintf(out, "%s, %s (exit %d)\n", rp_exit_why(why, sizeof why, v), dur, run.exit_code);
  struct runview_stats cpu, cg, tree, rss, mem;
  runview_stats(v, "host", "host.cpu.busy_pct", "cpu=total", INT64_MIN, INT64_MAX, &cpu);
  runview_stats(v, "host", "host.cgroup.cpu_used_pct_of_limit", "", INT64_MIN, INT64_MAX, &cg);
  runview_stats(v, "proctree", "tree.cpu_pct", "", INT64_MIN, INT64_MAX, &tree);
  runview_stats(v, "proctree", "tree.rss_bytes", "", INT64_MIN, INT64_MAX, &rss);
  runview_stats(v, "host", "host.mem.used_bytes", "", INT64_MIN, INT64_MAX, &mem);
  if (cpu.n) {
    fprintf(out, "  host CPU: mean %.0f%%, peak %.0f%%", cpu.mean, cpu.max);
    if (cg.n)
      fprintf(out, " (of the cgroup quota: mean %.0f%%, peak %.0f%%)", cg.mean, cg.max);
    if (mem.n)
      fprintf(out, "; memory used peak %s", gs_fmt_bytes(mem.max, b1, sizeof b1));
    fputc('\n', out);
  }
  if (tree.n)
    fprintf(out, "  job: CPU mean %.0f%% (100%% = one core), peak %.0f%%; RSS peak %s\n", tree.mean, tree.max,
            gs_fmt_bytes(rss.max, b2, sizeof b2));
  int ngpus = summary_gpu_count(v);
  for (int g = 0; g < ngpus; g++) {
    char lab[16], key[48], u1[16], u2[16];
    snprintf(lab, sizeof lab, "gpu=%d", g);
    struct runview_stats util, mu, sm;
    runview_stats(v, "nvml", "gpu.util_pct", lab, INT64_MIN, INT64_MAX, &util);
    runview_stats(v, "nvml", "gpu.mem_used_bytes", lab, INT64_MIN, INT64_MAX, &mu);
    runview_stats(v, "nvml", "gpu.sm_active_pct", lab, INT64_MIN, INT64_MAX, &sm);
    snprintf(key, sizeof key, "gpu.%d.mig_mode", g);
    const char *mig = runview_param(v, key);
    fprintf(out, "  GPU %d: util mean %s, min %s", g, rp_num(u1, sizeof u1, util.n ? util.mean : NAN, 0, "%"),
            rp_num(u2, sizeof u2, util.n ? util.min : NAN, 0, "%"));
    if (!util.n && mig && !strncmp(mig, "enabled", 7))
      fputs(" (MIG mode: the driver gives no whole-GPU util)", out);
    if (sm.n)
      fprintf(out, "; SM active mean %.0f%%", sm.mean);
    fprintf(out, "; memory peak %s", rp_bytes(b1, sizeof b1, mu.n ? mu.max : NAN));
    rp_gpu_owner(out, v, g);
    fputc('\n', out);
  }
  struct runview_step_figures steps;
  runview_step_figures(v, 0, v->nsteps, &steps);
  if (steps.steps) {
    fprintf(out, "  steps: %zu, %s samples/s, median step %s", steps.steps,
            rp_num(b1, sizeof b1, steps.samples_per_s, 1, ""),
            rp_num(b2, sizeof b2, steps.median_step_s * 1e3, 1, "ms"));
    if (isfinite(steps.data_share))
      fprintf(out, ", waiting for data %.0f%% of step time", steps.data_share * 100);
    fputc('\n', out);
  }
  rp_data_gaps(out, "  ! ", v->params, v->nparams);
  print_findings(out, v);
  return fflush(out) || ferror(out) ? gs_fail(GS_EIO, "cannot write the run's summary") : GS_OK;
}
