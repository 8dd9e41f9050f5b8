/* doctor/rules_health: is a GPU sick. An Xid the driver reported during the run (an event xid, from
 * collect/nvml_health.c) is a finding of its own, first when the job died within DR_XID_DEATH_S of
 * it ("GPU 3 reported Xid 79 (fallen off the bus) 2 s before the job died: not the training code;
 * drain the node"); uncorrected ECC errors during the run are one too (gpu_ecc). The straggler rule
 * asks dr_gpu_sick_why whether its slow GPU has pending row remaps, a PCIe link that replays or
 * NVLink errors, and names that as the likely cause; another sick GPU the job used is gpu_health. docs/diagnosis.md,
 * "GPU health". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "doctor/doctor_int.h"

static int died(const struct dr_run *d) {
  const char *s = d->v->run.status;
  return !strcmp(s, "failed") || !strcmp(s, "crashed") || !strcmp(s, "killed");
}

/* The Xid to report: the last fatal one (core/xid.c) of the run, else the last of any code. */
static const struct store_event *xid_pick(const struct runview *v) {
  const struct store_event *best = NULL;
  int best_fatal = 0;
  for (size_t i = 0; i < v->nevents; i++) {
    const struct store_event *e = &v->events[i];
    if (strcmp(e->kind, "xid") || runview_gpu_label(e->labels) < 0)
      continue;
    const struct gs_xid *x = gs_xid_of((unsigned)atoi(e->name));
    int fatal = x && x->fatal;
    if (!best || fatal >= best_fatal)
      best = e, best_fatal = fatal;
  }
  return best;
}

static int xid_count(const struct runview *v) {
  int n = 0;
  for (size_t i = 0; i < v->nevents; i++)
    n += !strcmp(v->events[i].kind, "xid");
  return n;
}

/* The first clause of an action ("drain the node" of "drain the node; reboot it ..."). */
static void first_clause(const char *action, char *out, size_t n) {
  size_t k = strcspn(action, ";,");
  dr_printf(out, n, "%.*s", (int)k, action);
}

void dr_rule_xid(struct dr_run *d, struct dr_findings *fs) {
  const struct store_event *e = xid_pick(d->v);
  if (!e)
    return;
  int gpu = runview_gpu_label(e->labels);
  unsigned code = (unsigned)atoi(e->name);
  const struct gs_xid *x = gs_xid_of(code);
  double before_s = (double)(d->v->duration_ns - e->t) / GS_NS_PER_S;
  int killed_it = died(d) && d->v->duration_ns > 0 && before_s >= 0 && before_s <= DR_XID_DEATH_S;
  /* The job's death is the GPU's doing: the whole run is lost, and nothing else is worth saying first. */
  struct store_finding *f = dr_add(fs, d, "gpu_xid", killed_it ? 1 : DR_MIN_SHARE, 1);
  if (!f)
    return;
  if (killed_it || (x && x->fatal))
    dr_printf(f->severity, sizeof f->severity, "high");
  char what[96], act[96];
  if (x)
    dr_printf(what, sizeof what, "Xid %u (%s)", code, x->meaning);
  else
    dr_printf(what, sizeof what, "Xid %u", code);
  first_clause(x ? x->action : "look it up in NVIDIA's Xid catalogue", act, sizeof act);
  if (killed_it)
    dr_printf(f->title, sizeof f->title, "GPU %d reported %s %.0f s before the job died: not the training code; %s",
              gpu, what, before_s, act);
  else
    dr_printf(f->title, sizeof f->title, "GPU %d reported %s at %.0f s of the run; %s", gpu, what,
              (double)e->t / GS_NS_PER_S, act);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_int(&j, "gpu", gpu);
  dr_json_int(&j, "xid", code);
  dr_json_str(&j, "meaning", x ? x->meaning : "");
  dr_json_num(&j, "at_s", (double)e->t / GS_NS_PER_S);
  dr_json_num(&j, "before_end_s", before_s);
  dr_json_str(&j, "run_status", d->v->run.status);
  dr_json_int(&j, "xids", xid_count(d->v));
  dr_printf(f->fix, sizeof f->fix,
            "The NVIDIA driver reported %s on GPU %d%s. %s. NVIDIA documents for this code: %s. Until then, "
            "keep jobs off that GPU (drain the node in Slurm: scontrol update nodename=NODE state=drain "
            "reason=\"Xid %u\"; in Kubernetes: kubectl cordon NODE); gpuscope devices --health on the node "
            "tells when it is healthy again.",
            what, gpu, killed_it ? " shortly before the job died" : "",
            killed_it ? "The job's failure is the GPU's, not the training code's: rerun it elsewhere"
                      : "Jobs on that GPU may fail or give wrong results",
            x ? x->action : "see NVIDIA's Xid catalogue (docs.nvidia.com, XID Errors)", code);
}

/* Rise of a counter series of GPU gpu over the window (max - min), NAN when absent. */
static double rise(struct dr_run *d, const char *name, int gpu) {
  char lab[16];
  struct dr_stats s;
  snprintf(lab, sizeof lab, "gpu=%d", gpu);
  dr_stats_of(d, "nvml", name, lab, &s);
  return s.n ? s.max - s.min : NAN;
}

static double peak(struct dr_run *d, const char *name, int gpu) {
  char lab[16];
  struct dr_stats s;
  snprintf(lab, sizeof lab, "gpu=%d", gpu);
  dr_stats_of(d, "nvml", name, lab, &s);
  return s.n ? s.max : NAN;
}

void dr_rule_ecc(struct dr_run *d, struct dr_findings *fs) {
  for (int i = 0; i < d->ngpus; i++) {
    int g = d->gpus[i].index;
    double dbe = rise(d, "gpu.ecc_dbe_volatile", g);
    if (!(dbe > 0))
      continue;
    struct store_finding *f = dr_add(fs, d, "gpu_ecc", DR_MIN_SHARE, 1);
    if (!f)
      return;
    dr_printf(f->severity, sizeof f->severity, "high");
    dr_printf(f->title, sizeof f->title, "GPU %d had %.0f uncorrected ECC error%s during the run", g, dbe,
              dbe == 1 ? "" : "s");
    struct dr_json j;
    dr_json_begin(&j, f->evidence, sizeof f->evidence);
    dr_json_int(&j, "gpu", g);
    dr_json_num(&j, "uncorrected", dbe);
    dr_json_num(&j, "corrected", rise(d, "gpu.ecc_sbe_volatile", g));
    dr_json_num(&j, "remap_pending", peak(d, "gpu.remap_pending", g));
    dr_printf(f->fix, sizeof f->fix,
              "GPU %d's memory returned data it could not correct (%.0f uncorrected ECC errors): the job's "
              "results from that GPU may be wrong, and the driver usually ends the context (Xid 48, 94 or 95). "
              "Drain the node and reset the GPU (nvidia-smi -r) so a pending row remap takes effect; if the "
              "errors come back, run field diagnostics and RMA the board.",
              g, dbe);
  }
}

int dr_gpu_sick_why(struct dr_run *d, int gpu, char *why, size_t n) {
  double replays = rise(d, "gpu.pcie_replays", gpu);
  double nvl = 0;
  static const char *const nvlink[] = {"gpu.nvlink_replay_errors", "gpu.nvlink_recovery_errors",
                                       "gpu.nvlink_crc_flit_errors", "gpu.nvlink_crc_data_errors"};
  for (int k = 0; k < 4; k++)
    nvl += dr_fin(rise(d, nvlink[k], gpu), 0);
  if (peak(d, "gpu.remap_failure", gpu) >= 1)
    dr_printf(why, n, "a row remap failed on it (the GPU needs service)");
  else if (peak(d, "gpu.remap_pending", gpu) >= 1)
    dr_printf(why, n, "it has a row remap pending (the GPU needs a reset)");
  else if (replays >= DR_PCIE_REPLAYS)
    dr_printf(why, n, "its PCIe link replayed %.0f times during the run", replays);
  else if (nvl >= DR_NVLINK_ERRORS)
    dr_printf(why, n, "its NVLinks counted %.0f errors during the run", nvl);
  else
    return 0;
  return 1;
}

void dr_rule_sick(struct dr_run *d, struct dr_findings *fs) {
  for (int i = 0; i < d->ngpus; i++) {
    const struct dr_gpu *g = &d->gpus[i];
    char why[160];
    if (!g->used || i == d->strag_gpu || !dr_gpu_sick_why(d, g->index, why, sizeof why))
      continue; /* a straggler that is sick says so in its own finding */
    struct store_finding *f = dr_add(fs, d, "gpu_health", DR_MIN_SHARE, 1);
    if (!f)
      return;
    dr_printf(f->severity, sizeof f->severity, "medium");
    dr_printf(f->title, sizeof f->title, "GPU %d looks sick: %s", g->index, why);
    struct dr_json j;
    dr_json_begin(&j, f->evidence, sizeof f->evidence);
    dr_json_int(&j, "gpu", g->index);
    dr_json_str(&j, "health", why);
    dr_json_num(&j, "pcie_replays", rise(d, "gpu.pcie_replays", g->index));
    dr_json_num(&j, "remap_pending", peak(d, "gpu.remap_pending", g->index));
    dr_json_num(&j, "remap_failure", peak(d, "gpu.remap_failure", g->index));
    dr_printf(f->fix, sizeof f->fix,
              "GPU %d: %s. A GPU in that state runs slower or fails (replays cost link bandwidth, a pending remap "
              "waits for a reset), so its run's idle time is not the batch's or the host code's doing and no "
              "such advice is given. Drain the node and reset the GPU (nvidia-smi -r); reseat or replace the "
              "board if it comes back; gpuscope devices --health says when it is healthy.",
              g->index, why);
  }
}

/* Whether a finding of rule stays beside a sick GPU: a run an Xid ended keeps only the health
 * findings; a run with a sick GPU (dr_gpu_sick_why) loses the advice that reads the GPUs' idle time
 * as the batch's or the host code's doing. */
static int kept(const char *rule, int ended, int sick) {
  if (!strcmp(rule, "gpu_xid") || !strcmp(rule, "gpu_ecc"))
    return 1;
  if (!strcmp(rule, "gpu_health"))
    return !ended;
  if (ended)
    return 0;
  return !sick || (strcmp(rule, "batch_too_small") && strcmp(rule, "host_code_bound"));
}

void dr_health_overrules(struct dr_run *d, struct dr_findings *fs) {
  int ended = 0, sick = 0;
  for (size_t i = 0; i < fs->n; i++)
    ended |= !strcmp(fs->v[i].rule, "gpu_xid") && fs->v[i].share >= 1;
  char why[160];
  for (int i = 0; i < d->ngpus && !sick; i++)
    sick = d->gpus[i].used && dr_gpu_sick_why(d, d->gpus[i].index, why, sizeof why);
  size_t k = 0;
  for (size_t i = 0; i < fs->n; i++) {
    if (!kept(fs->v[i].rule, ended, sick))
      continue;
    fs->ch[k] = fs->ch[i];
    fs->v[k++] = fs->v[i];
  }
  fs->n = k;
}
