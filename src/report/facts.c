/* report/facts: loads one run for a report or a comparison — one run view (runview.h: the run's
 * record, series, events, params, notes, findings and steps), the doctor run on that same view when
 * the run has no findings yet, and the headline figures read through it: throughput, step split, GPU
 * use, energy, idle GPU-hours. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor.h"
#include "report/report_int.h"

static double stat_mean(const struct report_run *r, const char *source, const char *name, const char *labels,
                        double *max, double *min) {
  struct runview_stats s;
  if (runview_stats(&r->view, source, name, labels, INT64_MIN, INT64_MAX, &s) || !s.n) {
    if (max)
      *max = NAN;
    if (min)
      *min = NAN;
    return NAN;
  }
  if (max)
    *max = s.max;
  if (min)
    *min = s.min;
  return s.mean;
}

/* Every GPU of the run: those with a util or memory series, and those the agent counted (gpu.count)
 * that gave no figure at all (every call failing), whose figures then all stay unknown. */
static int load_gpus(struct report_run *r) {
  int max = -1;
  for (size_t i = 0; i < r->view.nseries; i++) {
    int g = !strcmp(r->view.series[i].source, "nvml") ? runview_gpu_label(r->view.series[i].labels) : -1;
    if (g > max && r->view.series[i].count > 0)
      max = g;
  }
  double cnt = runview_param_num(&r->view, "gpu.count");
  int counted = cnt >= 1 && cnt <= 1024 ? (int)cnt : 0;
  if (counted - 1 > max)
    max = counted - 1;
  if (max < 0)
    return GS_OK;
  r->gpus = calloc((size_t)max + 1, sizeof *r->gpus);
  if (!r->gpus)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (int g = 0; g <= max; g++) {
    char lab[16], key[48];
    snprintf(lab, sizeof lab, "gpu=%d", g);
    if (g >= counted && runview_find(&r->view, "nvml", "gpu.util_pct", lab) < 0 &&
        runview_find(&r->view, "nvml", "gpu.mem_used_bytes", lab) < 0)
      continue;
    struct report_gpu *x = &r->gpus[r->ngpus++];
    x->index = g;
    snprintf(key, sizeof key, "gpu.%d.name", g);
    const char *name = rp_param(r, key);
    snprintf(x->name, sizeof x->name, "%s", name ? name : "");
    double dummy;
    x->util = stat_mean(r, "nvml", "gpu.util_pct", lab, &dummy, &x->util_min);
    x->sm_active = stat_mean(r, "nvml", "gpu.sm_active_pct", lab, NULL, NULL);
    x->tensor = stat_mean(r, "nvml", "gpu.tensor_active_pct", lab, NULL, NULL);
    stat_mean(r, "nvml", "gpu.mem_used_bytes", lab, &x->mem_peak, NULL);
    stat_mean(r, "nvml", "gpu.mem_total_bytes", lab, &x->mem_total, NULL);
    x->power = stat_mean(r, "nvml", "gpu.power_w", lab, NULL, NULL);
    stat_mean(r, "nvml", "gpu.power_limit_w", lab, &x->power_limit, NULL);
    stat_mean(r, "nvml", "gpu.temp_c", lab, &x->temp_max, NULL);
    struct runview_stats e;
    x->energy_j = NAN;
    if (!runview_stats(&r->view, "nvml", "gpu.energy_j", lab, INT64_MIN, INT64_MAX, &e) && e.n >= 2 &&
        e.last >= e.first)
      x->energy_j = e.last - e.first;
  }
  return GS_OK;
}

static void figures(struct report_run *r) {
  r->gpu_util = r->sm_active = r->gpu_mem_peak = r->energy_j = r->energy_per_sample = NAN;
  r->gpu_hours = r->gpu_idle_hours = NAN;
  double util = 0, sm = 0, energy = 0, idle = 0;
  int nu = 0, ns = 0, ne = 0;
  for (int i = 0; i < r->ngpus; i++) {
    const struct report_gpu *g = &r->gpus[i];
    if (isfinite(g->util)) {
      util += g->util, nu++;
      idle += (1 - fmin(fmax(g->util, 0), 100) / 100) * r->view.duration_s / 3600;
    }
    if (isfinite(g->sm_active))
      sm += g->sm_active, ns++;
    if (isfinite(g->energy_j))
      energy += g->energy_j, ne++;
    if (isfinite(g->mem_peak) && !(g->mem_peak <= r->gpu_mem_peak))
      r->gpu_mem_peak = g->mem_peak;
  }
  if (nu) {
    r->gpu_util = util / nu;
    r->gpu_idle_hours = isfinite(r->view.duration_s) ? idle : NAN;
  }
  if (ns)
    r->sm_active = sm / ns;
  if (ne) {
    r->energy_j = energy;
    if (r->steps.samples > 0)
      r->energy_per_sample = energy / r->steps.samples;
  }
  if (r->ngpus && isfinite(r->view.duration_s))
    r->gpu_hours = r->ngpus * r->view.duration_s / 3600;
  r->host_cpu = stat_mean(r, "host", "host.cpu.busy_pct", "cpu=total", NULL, NULL);
  r->job_cpu = stat_mean(r, "proctree", "tree.cpu_pct", "", NULL, NULL);
  stat_mean(r, "proctree", "tree.rss_bytes", "", &r->job_rss_peak, NULL);
}

/* Points the names every format reads at the view's (borrowed, freed with the view). */
/* A run that did not finish well (failed, killed, crashed) gets the last lines of its output: the
 * traceback, as a rule. A store that cannot read them leaves the report without (not a failed load). */
static int load_log_tail(struct report_run *r) {
  const char *st = r->view.run.status;
  if (strcmp(st, "failed") && strcmp(st, "killed") && strcmp(st, "crashed"))
    return GS_OK;
  if (report_log_tail(r->view.st, r->view.run.id, REPORT_LOG_TAIL_LINES, &r->log_tail, &r->nlog_tail))
    r->log_tail = NULL, r->nlog_tail = 0;
  return GS_OK;
}

int report_run_load(struct store *st, const char *ref, int rediagnose, struct report_run *r) {
  memset(r, 0, sizeof *r);
  int rc = runview_load(st, ref, &r->view);
  if (rc)
    return rc;
  struct runview *v = &r->view;
  if (!v->nfindings || rediagnose) {
    /* A store we may not write to still gets a report: the findings come back either way. */
    struct store_finding *f = NULL;
    size_t nf = 0;
    int drc = doctor_run_view(v, &f, &nf);
    if (drc && !f) {
      /* Not even the stored findings of a --diagnose: they are not what this gpuscope would say. */
      r->diag_rc = drc;
      snprintf(r->diag_error, sizeof r->diag_error, "%s", gs_last_error());
      nf = 0;
    } else if (drc) {
      snprintf(r->save_error, sizeof r->save_error, "%s", gs_last_error());
    }
    free(v->findings);
    v->findings = f, v->nfindings = nf;
    r->diagnosed = !r->diag_rc;
  }
  runview_step_figures(v, 0, v->nsteps, &r->steps);
  if ((rc = load_gpus(r)))
    return rc;
  figures(r);
  return load_log_tail(r);
}

void report_run_done(struct report_run *r) {
  for (size_t i = 0; i < r->nlog_tail; i++)
    free(r->log_tail[i]);
  free(r->log_tail);
  runview_done(&r->view);
  free(r->gpus);
  memset(r, 0, sizeof *r);
}
