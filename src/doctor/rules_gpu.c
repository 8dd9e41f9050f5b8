/* doctor/rules_gpu: the rules that need NVIDIA GPUs — memory left unused (batch_too_small), tensor
 * cores left idle (mixed_precision), copies from pageable memory (pageable_copies), clocks cut by
 * heat or power (throttled), one GPU behind the others (straggler), and GPUs that do no work
 * (underused_gpus). Each reads only the GPUs the job used, within the analysis window. Thresholds
 * and models: docs/diagnosis.md. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_int.h"

static double mem_total(const struct dr_gpu *g) {
  return g->mem_total.n && g->mem_total.max > 0 ? g->mem_total.max : NAN;
}

/* ---- batch_too_small ---- */

/* The used GPU whose memory peaks fullest, with that peak's share of its memory in *ratio; NULL when
 * no used GPU measured both. */
static const struct dr_gpu *fullest_gpu(const struct dr_run *d, double *ratio) {
  const struct dr_gpu *worst = NULL;
  *ratio = NAN;
  for (int i = 0; i < d->ngpus; i++) {
    const struct dr_gpu *g = &d->gpus[i];
    double tot = mem_total(g);
    if (!g->used || !g->mem_used.n || !isfinite(tot))
      continue;
    double r = g->mem_used.max / tot;
    if (!worst || r > *ratio)
      worst = g, *ratio = r;
  }
  return worst;
}

/* Is the command's token at p (len bytes, ending at a space or the end) the batch size, given as
 * "--batch 32", "--batch-size=32", "batch_size=32" or "-b 32"? */
static int batch_token(const char *cmd, const char *p, size_t len) {
  if (!(p[len] == ' ' || !p[len]) || p == cmd || !(p[-1] == ' ' || p[-1] == '='))
    return 0;
  /* the name before it, [b, e): the token before the space, or the same token before '=' */
  const char *e = p - 1, *b = e;
  while (b > cmd && b[-1] != ' ')
    b--;
  size_t n = (size_t)(e - b);
  if (n == 2 && !strncmp(b, "-b", 2))
    return 1;
  for (const char *q = b; q + 5 <= e; q++)
    if (!strncasecmp(q, "batch", 5))
      return 1;
  return 0;
}

/* The job's command as a tune template: its batch size's value replaced by {batch_size} (the first
 * that batch_token recognises) and its own braces doubled (tune's literal braces). Returns 1 when
 * the batch was found and the whole command fits in buf, else 0 (buf then holds no command). */
static int batch_template(const char *cmd, double batch, char *buf, size_t n) {
  char num[32];
  snprintf(num, sizeof num, "%.0f", batch);
  size_t nl = strlen(num), o = 0;
  int found = 0;
  buf[0] = 0;
  for (const char *p = cmd; *p; p++) {
    const char *put = p[0] == '{' ? "{{" : p[0] == '}' ? "}}" : NULL;
    char one[2] = {p[0], 0};
    if (!found && isfinite(batch) && !strncmp(p, num, nl) && batch_token(cmd, p, nl))
      put = "{batch_size}", found = 1, p += nl - 1;
    const char *add = put ? put : one;
    size_t al = strlen(add);
    if (o + al + 1 > n)
      return buf[0] = 0, 0;
    memcpy(buf + o, add, al + 1), o += al;
  }
  if (!found)
    buf[0] = 0;
  return found;
}

/* The command that measures what the GPU-side share of a bigger batch is worth where SM activity is
 * not measured: two `gpuscope tune` trials, the job's batch and k times it. */
static void batch_tune_command(const struct dr_run *d, int k, char *buf, size_t n) {
  char tpl[600];
  const char *cmd = d->v->run.command;
  int known = isfinite(d->batch_size) && d->batch_size > 0;
  int fits = known && batch_template(cmd, d->batch_size, tpl, sizeof tpl);
  if (known)
    dr_printf(buf, n, "gpuscope tune --param batch_size=%.0f,%.0f -- %s", d->batch_size, d->batch_size * k,
              fits ? tpl : "CMD   # CMD: the job's command, with {batch_size} where it sets its batch size");
  else
    dr_printf(buf, n,
              "gpuscope tune --param batch_size=B,%dB -- CMD   # B: the job's batch size (it did not report "
              "it); CMD: its command, with {batch_size} where it sets it",
              k);
}

/* Why a GPU has no SM activity: an NVIDIA GPU without GPM or DCGM, or an AMD GPU (ROCm SMI has no
 * such reading: docs/amd.md). */
static const char *no_sm_why(const struct dr_gpu *g) {
  return g->amd ? "ROCm SMI gives none" : "no GPM, no DCGM profiling";
}

/* The fix's first paragraph: what was measured, and — where SM activity is not — that the estimate
 * counts only the host overhead. */
static void batch_reason(const struct dr_gpu *g, int k, const char *nb, char *buf, size_t n) {
  char used[32], tot[32], mu[32], util[32];
  gs_fmt_bytes(g->mem_used.max, used, sizeof used);
  gs_fmt_bytes(mem_total(g), tot, sizeof tot);
  dr_fmt(util, sizeof util, g->util.mean, 0, "%");
  if (g->sm_active.n)
    dr_printf(buf, n,
              "GPU %d peaks at %s of %s, and with SM activity at %.0f%% (util %s) the GPU is under-filled. "
              "Raise the batch from %s (memory allows about %dx, counting all used memory as batch-dependent, "
              "so it is a safe figure).",
              g->index, used, tot, g->sm_active.mean, util, nb, k);
  else
    dr_printf(buf, n,
              "GPU %d peaks at %s of %s. It has no SM activity readings (%s), so how "
              "much of its busy time a bigger batch would fill is unknown: the estimate counts only the "
              "measured host overhead per step (memory-controller util %s is not a fill). Raise the batch "
              "from %s (memory allows about %dx, counting all used memory as batch-dependent); it may gain "
              "more than estimated.",
              g->index, used, tot, no_sm_why(g), dr_fmt(mu, sizeof mu, g->mem_util.mean, 0, "%"), nb, k);
}

static void batch_evidence(const struct dr_run *d, const struct dr_gpu *g, double ratio, int k, char *ev, size_t n) {
  struct dr_json j;
  dr_json_begin(&j, ev, n);
  dr_json_int(&j, "gpu", g->index);
  dr_json_num(&j, "mem_used_peak_bytes", g->mem_used.max);
  dr_json_num(&j, "mem_total_bytes", mem_total(g));
  dr_json_num(&j, "mem_used_share", ratio);
  dr_json_num(&j, "sm_active_pct", g->sm_active.mean);
  dr_json_num(&j, "mem_util_pct", g->mem_util.mean);
  dr_json_num(&j, "gpu_util_pct", g->util.mean);
  dr_json_str(&j, "fill_signal", g->sm_active.n ? "sm_active" : "unknown");
  dr_json_num(&j, "batch_size", d->batch_size);
  dr_json_int(&j, "batch_scale", k);
  dr_json_num(&j, "recommended_batch", isfinite(d->batch_size) ? d->batch_size * k : NAN);
  dr_json_str(&j, "model",
              g->sm_active.n ? "a k-times batch pays per-step overhead 1/k as often: the host idle term and the "
                               "unfilled share of GPU work (1 - SM activity / util) shrink by k"
                             : "a k-times batch pays the measured host overhead per step 1/k as often; the GPU's "
                               "unfilled share is unknown without SM activity and counted as none");
}

void dr_rule_batch(struct dr_run *d, struct dr_findings *fs) {
  double ratio;
  const struct dr_gpu *worst = fullest_gpu(d, &ratio);
  if (!worst || !(ratio < DR_BATCH_MEM_FREE) || !(ratio > 0))
    return;
  /* A GPU that waits for its input is not filled by a bigger batch: each step's data cost grows with
   * it, and the idle time is the data wait's, not per-step overhead. */
  if (d->data_share >= DR_INPUT_SHARE)
    return;
  int k = 1;
  while (k * 2 <= DR_BATCH_MAX_SCALE && (k * 2) * ratio <= DR_BATCH_MEM_FIT)
    k *= 2;
  if (k < 2)
    return;
  char nb[48], code[200], tune[800];
  if (!worst->sm_active.n) {
    /* Said whether or not the host overhead alone makes a finding: the rest is for a trial to tell. */
    batch_tune_command(d, k, tune, sizeof tune);
    dr_not_judged(d,
                  "batch_too_small: GPU %d uses %.0f%% of its memory but has no SM activity readings (%s), so "
                  "the GPU-side fill of a bigger batch is unknown (judged on the host overhead alone). Measure it: %s",
                  worst->index, ratio * 100, no_sm_why(worst), tune);
  }
  struct store_finding *f = dr_add(fs, d, "batch_too_small", 0, 1);
  if (!f)
    return;
  /* The step model decides the figure (and drops the finding below DR_BATCH_MIN_SPEEDUP): without SM
   * activity its fill is 1, so only the host term shrinks. */
  dr_set_change(fs, f, DR_CH_BATCH, DR_TERM_HOST, k, DR_BATCH_MIN_SPEEDUP);
  if (isfinite(d->batch_size) && d->batch_size > 0)
    dr_printf(nb, sizeof nb, "%.0f to %.0f", d->batch_size, d->batch_size * k);
  else
    dr_printf(nb, sizeof nb, "%dx its current size", k);
  /* The snippet uses the job's batch size when it said it, else names it (never a made-up number). */
  if (isfinite(d->batch_size) && d->batch_size > 0)
    dr_printf(code, sizeof code, "  new_bs = %.0f\n  lr = base_lr * new_bs / %.0f\n", d->batch_size * k, d->batch_size);
  else
    dr_printf(code, sizeof code,
              "  new_bs = %d * batch_size   # batch_size: the current one (the job did not report it)\n"
              "  lr = base_lr * %d\n",
              k, k);
  dr_printf(f->title, sizeof f->title, "Batch too small: GPU memory peaks at %.0f%%; a %dx batch fits", ratio * 100, k);
  batch_evidence(d, worst, ratio, k, f->evidence, sizeof f->evidence);
  char why[800], measure[900] = "";
  batch_reason(worst, k, nb, why, sizeof why);
  if (!worst->sm_active.n)
    dr_printf(measure, sizeof measure, "Measure the GPU-side fill with two trials:\n  %s\n", tune);
  dr_printf(f->fix, sizeof f->fix,
            "%s Scale the learning rate with the batch (linear scaling with a few epochs of warm-up; LARS/LAMB "
            "for very large batches) and check that the model still converges to the same accuracy; or keep "
            "the batch and use the room for a larger model.\n"
            "%s"
            "PyTorch:\n"
            "%s"
            "  loader = torch.utils.data.DataLoader(ds, batch_size=new_bs, shuffle=True, num_workers=W)\n"
            "  opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)\n"
            "Keras:\n"
            "  model.compile(optimizer=keras.optimizers.SGD(learning_rate=base_lr * %d), loss=...)\n"
            "  model.fit(ds.batch(new_bs), ...)",
            why, measure, code, k);
}

/* ---- mixed_precision ---- */

/* A precision param that says nothing: as good as none. */
static int precision_unknown(const char *p) {
  static const char *names[] = {"", "unknown", "none", "null", "auto"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcasecmp(p, names[i]))
      return 1;
  return 0;
}

static int precision_is_fp32(const char *p) {
  static const char *names[] = {"fp32", "float32", "32", "32-true", "torch.float32", "full", "single", "float"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcasecmp(p, names[i]))
      return 1;
  return 0;
}

/* The finding's title, evidence and fix; an AMD GPU's matrix cores and gfx target stand where an
 * NVIDIA GPU's tensor cores and compute capability do (the PyTorch code is the same on ROCm). */
static void mp_explain(struct store_finding *f, struct dr_run *d, const struct dr_gpu *g, int tensor_idle,
                       double busy_pct) {
  char what[48], id[48];
  if (g->amd) {
    dr_printf(what, sizeof what, "a CDNA %d (%s) GPU", g->cdna, g->gfx);
    dr_printf(id, sizeof id, "CDNA %d, %s", g->cdna, g->gfx);
  } else {
    dr_printf(what, sizeof what, "a compute capability %.1f GPU", g->cc);
    dr_printf(id, sizeof id, "compute capability %.1f", g->cc);
  }
  dr_printf(f->title, sizeof f->title, "Mixed precision: %s on %s",
            tensor_idle ? "tensor cores idle" : "the job trains in fp32", what);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_int(&j, "gpu", g->index);
  if (g->amd)
    dr_json_str(&j, "gfx", g->gfx);
  else
    dr_json_num(&j, "compute_capability", g->cc);
  dr_json_str(&j, "precision", d->precision);
  dr_json_num(&j, "tensor_active_pct", g->tensor.mean);
  dr_json_num(&j, "sm_active_pct", g->sm_active.mean);
  dr_json_num(&j, "gpu_util_pct", d->used_util);
  dr_json_num(&j, "busy_pct_used", busy_pct);
  dr_json_num(&j, "gain_of_busy_time", DR_MP_GAIN);
  dr_json_str(&j, "model",
              "AMP scales the GPU work term by 0.6 (2x on tensor-core math, less on memory-bound "
              "kernels): speed-up = T / (T - 0.4 * GPU work)");
  dr_printf(f->fix, sizeof f->fix,
            "GPU %d (%s, %s) has %s, but %s. Train with automatic mixed "
            "precision: bf16 where supported (%s: no loss scaling), fp16 with a gradient "
            "scaler otherwise. Keep the loss and the optimizer state in fp32 (autocast does).\n"
            "PyTorch:\n"
            "  with torch.autocast('cuda', dtype=torch.bfloat16):\n"
            "      loss = loss_fn(model(x), y)\n"
            "  loss.backward(); opt.step()\n"
            "  # fp16 instead: scaler = torch.cuda.amp.GradScaler()\n"
            "  #   scaler.scale(loss).backward(); scaler.step(opt); scaler.update()\n"
            "  torch.backends.cuda.matmul.allow_tf32 = True   # for what stays fp32\n"
            "Keras:\n"
            "  keras.mixed_precision.set_global_policy('mixed_bfloat16')  # or 'mixed_float16'",
            g->index,
            g->name[0] ? g->name
            : g->amd   ? "AMD"
                       : "NVIDIA",
            id, g->amd ? "matrix cores (MFMA)" : "tensor cores",
            tensor_idle ? "they stayed idle while the GPU was busy (tensor activity below 5%)"
                        : "the job reports fp32 training",
            g->amd ? "every CDNA GPU" : "CC >= 8.0");
}

void dr_rule_mixed_precision(struct dr_run *d, struct dr_findings *fs) {
  int fp32 = precision_is_fp32(d->precision), unknown = precision_unknown(d->precision);
  if (!unknown && !fp32)
    return; /* the job says it already runs in reduced precision */
  const struct dr_gpu *g = NULL;
  for (int i = 0; i < d->ngpus && !g; i++)
    if (d->gpus[i].used && (d->gpus[i].cc >= DR_MP_CC || d->gpus[i].cdna))
      g = &d->gpus[i];
  if (!g)
    return;
  /* Tensor pipes idle mean something only while the SMs work: by GPM where it exists, else util. */
  int busy = g->sm_active.n ? g->sm_active.mean >= DR_MP_SM_BUSY : g->util.n && g->util.mean >= DR_MP_UTIL_BUSY;
  int tensor_idle = g->tensor.n && g->tensor.mean < DR_MP_TENSOR_IDLE && busy;
  if (!fp32 && !g->tensor.n)
    /* Without GPM (V100, A100, L4, T4) the precision is the only way to tell: the report says so. */
    dr_not_judged(d,
                  "mixed_precision: the job's precision is unknown (no precision param) and GPU %d has no "
                  "%s, so whether it trains in fp32 cannot be told",
                  g->index,
                  g->amd ? "matrix-core readings (ROCm SMI gives none)"
                         : "tensor-pipe readings (no GPM, no DCGM profiling)");
  if (!fp32 && !tensor_idle)
    return;
  /* The model scales with the GPU's busy time: util, else SM activity; with neither it has no figure. */
  double busy_pct = isfinite(d->used_util) ? d->used_util : g->sm_active.n ? g->sm_active.mean : NAN;
  if (!isfinite(busy_pct))
    return;
  double u = fmin(fmax(busy_pct, 0) / 100, 1);
  double share = DR_MP_GAIN * u;
  struct store_finding *f = dr_add(fs, d, "mixed_precision", share, 1 / (1 - share));
  if (!f)
    return;
  dr_set_change(fs, f, DR_CH_FACTOR, DR_TERM_GPU, 1 - DR_MP_GAIN, 1);
  mp_explain(f, d, g, tensor_idle, busy_pct);
}

/* ---- pageable_copies ---- */

void dr_rule_pageable(struct dr_run *d, struct dr_findings *fs) {
  if (!(d->pin_memory == 0) || !d->ngpus)
    return;
  double rx = 0;
  int n = 0;
  for (int i = 0; i < d->ngpus; i++)
    if (d->gpus[i].used && d->gpus[i].pcie_rx.n)
      rx += d->gpus[i].pcie_rx.mean, n++;
  rx = n ? rx / n : NAN;
  int heavy = (isfinite(rx) && rx >= DR_PCIE_RX_HEAVY) || d->h2d_share >= DR_H2D_SHARE_HEAVY;
  if (!heavy)
    return;
  double copy =
      isfinite(d->h2d_share) && d->h2d_share > 0 ? d->h2d_share : fmin(rx / DR_PAGEABLE_BW, DR_PAGEABLE_COPY_MAX);
  double share = copy * DR_PINNED_GAIN;
  struct store_finding *f = dr_add(fs, d, "pageable_copies", share, 1 / (1 - share));
  if (!f)
    return;
  dr_set_change(fs, f, DR_CH_FACTOR, DR_TERM_H2D, 1 - DR_PINNED_GAIN, 1);
  char rate[80];
  if (isfinite(rx))
    dr_printf(rate, sizeof rate, "%.1f GB/s host-to-device", rx / 1e9);
  else
    dr_printf(rate, sizeof rate, "host-to-device copies %.0f%% of the step (PCIe rate not measured)",
              d->h2d_share * 100);
  dr_printf(f->title, sizeof f->title, "Pageable copies: %s with pin_memory off", rate);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_num(&j, "pcie_rx_bytes_s", rx);
  dr_json_num(&j, "h2d_share", d->h2d_share);
  dr_json_num(&j, "copy_share_estimate", copy);
  dr_json_str(&j, "pin_memory", "false");
  dr_json_num(&j, "pageable_bw_assumed_bytes_s", DR_PAGEABLE_BW);
  dr_json_str(&j, "model",
              "the h2d term = the h2d phase (else PCIe RX / 6 GB/s pageable bandwidth, of what the GPU's work "
              "leaves of the step); pinned, non-blocking copies halve it: speed-up = T / (T - h2d / 2)");
  dr_printf(f->fix, sizeof f->fix,
            "The GPU receives %s from pageable memory (pin_memory is off): the driver stages "
            "every batch through a bounce buffer, at about half the bandwidth, and the copy cannot overlap "
            "compute. Pin the loader's batches and copy asynchronously.\n"
            "PyTorch:\n"
            "  loader = torch.utils.data.DataLoader(ds, batch_size=B, num_workers=W, pin_memory=True)\n"
            "  x = x.to('cuda', non_blocking=True); y = y.to('cuda', non_blocking=True)\n"
            "Keras / tf.data:\n"
            "  ds = ds.prefetch(tf.data.AUTOTUNE)  # tf.data copies from its own host buffers\n"
            "  ds = ds.apply(tf.data.experimental.prefetch_to_device('/gpu:0'))",
            rate);
}

/* ---- throttled ---- */

void dr_rule_throttled(struct dr_run *d, struct dr_findings *fs) {
  const struct dr_gpu *worst = NULL;
  double worst_lost = -1, worst_ratio = NAN;
  for (int i = 0; i < d->ngpus; i++) {
    const struct dr_gpu *g = &d->gpus[i];
    if (!g->used || !(g->throttle_share >= DR_THROTTLE_SHARE))
      continue;
    double ref = isfinite(g->clock_unthrottled) ? g->clock_unthrottled : g->sm_clock_max.max;
    double ratio = isfinite(g->throttle_clock) && ref > 0 ? fmin(g->throttle_clock / ref, 1) : NAN;
    /* Work rate follows the SM clock while the GPU is busy; without the clocks or the util there is
     * no figure to give, and the rule does not fire for this GPU. */
    double busy = isfinite(g->throttle_util) ? g->throttle_util : g->util.n ? g->util.mean : NAN;
    if (!isfinite(ratio) || !isfinite(busy))
      continue;
    double lost = g->throttle_share * (1 - ratio) * busy / 100;
    if (lost > worst_lost)
      worst = g, worst_lost = lost, worst_ratio = ratio;
  }
  if (!worst)
    return;
  char reasons[160] = "";
  size_t len = 0;
  int thermal = 0, power = 0;
  /* The heat and power reasons seen, in NVML's order (core's one table). */
  for (size_t r = 0; r < gs_clock_reasons_n; r++) {
    const struct gs_clock_reason *why = &gs_clock_reasons[r];
    if (!(why->flags & GS_REASON_THROTTLE) || !(worst->throttle_mask & why->bit))
      continue;
    len += (size_t)snprintf(reasons + len, sizeof reasons - len, "%s%s", len ? ", " : "", why->name);
    thermal |= !!(why->flags & GS_REASON_HEAT);
    power |= !!(why->flags & GS_REASON_POWER);
  }
  struct store_finding *f = dr_add(fs, d, "throttled", worst_lost, 1 / (1 - fmin(worst_lost, DR_MAX_LOST)));
  if (!f)
    return;
  dr_set_change(fs, f, DR_CH_REMOVE, DR_TERM_GPU, worst_lost, 1);
  dr_printf(f->title, sizeof f->title, "Throttled: GPU %d clocks cut %.0f%% of the time (%s)", worst->index,
            worst->throttle_share * 100, reasons);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_int(&j, "gpu", worst->index);
  dr_json_num(&j, "throttled_share", worst->throttle_share);
  dr_json_str(&j, "reasons", reasons);
  dr_json_num(&j, "sm_clock_throttled_mhz", worst->throttle_clock);
  dr_json_num(&j, "sm_clock_otherwise_mhz", worst->clock_unthrottled);
  dr_json_num(&j, "sm_clock_max_mhz", worst->sm_clock_max.max);
  dr_json_num(&j, "clock_ratio", worst_ratio);
  dr_json_num(&j, "temp_max_c", worst->temp.max);
  dr_json_num(&j, "power_mean_w", worst->power.mean);
  dr_json_num(&j, "power_limit_w", worst->power_limit.max);
  dr_json_num(&j, "util_throttled_pct", worst->throttle_util);
  dr_json_str(&j, "model",
              "the GPU work term loses throttled share * (1 - clock ratio) * util while throttled of the window "
              "(work follows the SM clock)");
  char clk[40], ref[40], temp[24], pw[24], pl[24];
  dr_fmt(clk, sizeof clk, worst->throttle_clock, 0, "MHz");
  dr_fmt(ref, sizeof ref, dr_fin(worst->clock_unthrottled, worst->sm_clock_max.max), 0, "MHz");
  dr_fmt(temp, sizeof temp, worst->temp.max, 0, "C");
  dr_fmt(pw, sizeof pw, worst->power.mean, 0, "");
  dr_fmt(pl, sizeof pl, worst->power_limit.max, 0, "W");
  dr_printf(f->fix, sizeof f->fix,
            "GPU %d ran with its clocks cut by %s for %.0f%% of the run (SM clock %s while throttled vs "
            "%s otherwise; peak temperature %s, power %s of %s). No code change fixes this. %s "
            "Check with: nvidia-smi -q -d PERFORMANCE,TEMPERATURE,POWER. In a multi-GPU job every rank waits "
            "for this GPU.",
            worst->index, reasons, worst->throttle_share * 100, clk, ref, temp, pw, pl,
            thermal ? "Thermal: improve airflow and fan curves, check inlet temperature, dust, blocked slots and "
                      "hot neighbours; ask the operator to look at the chassis."
            : power ? "Power: the board reached its enforced limit; raise it where the board allows "
                      "(nvidia-smi -pl WATTS, as root) or accept the cap."
                    : "Hardware slowdown: check the power supply and the board's health with the operator.");
}

/* ---- straggler ---- */

/* Median of the used GPUs' values except GPU `skip` (NAN when none). */
static double median_others(const struct dr_run *d, int skip, double (*get)(const struct dr_gpu *)) {
  double v[DR_MAX_GPUS];
  size_t n = 0;
  for (int i = 0; i < d->ngpus; i++)
    if (i != skip && d->gpus[i].used && isfinite(get(&d->gpus[i])))
      v[n++] = get(&d->gpus[i]);
  return dr_median(v, n);
}

static double get_util(const struct dr_gpu *g) {
  return g->util.n ? g->util.mean : NAN;
}
static double get_sm(const struct dr_gpu *g) {
  return g->sm_active.n ? g->sm_active.mean : NAN;
}
static double get_clock(const struct dr_gpu *g) {
  return g->sm_clock.n ? g->sm_clock.mean : NAN;
}

/* The rank of a distributed job whose loop waits for data longer than the others: in synchronous
 * data parallel every other rank waits for it at the gradient all-reduce (inside its "compute"),
 * so the whole job loses that rank's extra wait each step. Returns 1 when it found one. */
static int rank_has_data(const struct dr_rank *r) {
  return r->nsteps >= DR_MIN_STEPS && isfinite(r->data_mean);
}

/* In a group of runs (store_group_open: the nodes of one job read as one), the host that GPU or
 * rank n is on, from the group's params; NULL for a single run. */
static const char *group_host(const struct dr_run *d, const char *what, int n) {
  char key[64];
  snprintf(key, sizeof key, "group.%s.%d.host", what, n);
  return runview_param(d->v, key);
}

/* Names the host of a straggling GPU or rank of a group in the finding's title and evidence. */
static void name_host(const struct dr_run *d, struct store_finding *f, struct dr_json *j, const char *what, int n) {
  const char *host = group_host(d, what, n);
  if (!host)
    return;
  char key[64];
  snprintf(key, sizeof key, "group.%s.%d.local", what, n);
  const char *local = runview_param(d->v, key); /* a GPU's own number on its host */
  snprintf(key, sizeof key, "group.%s.%d.rank", what, n);
  const char *rank = runview_param(d->v, key); /* the rank whose process uses that GPU */
  size_t len = strlen(f->title);
  if (local && rank)
    dr_printf(f->title + len, sizeof f->title - len, " (GPU %s of host %s, rank %s)", local, host, rank);
  else if (local)
    dr_printf(f->title + len, sizeof f->title - len, " (GPU %s of host %s)", local, host);
  else
    dr_printf(f->title + len, sizeof f->title - len, " (host %s)", host);
  dr_json_str(j, "host", host);
  if (local)
    dr_json_int(j, "host_gpu", atoi(local));
  if (rank)
    dr_json_int(j, "gpu_rank", atoi(rank));
}

/* In a group, does GPU n wait for the straggling rank (on rank_host)? The rank's own GPU where the
 * per-process GPU data names the rank of each (group.gpu.N.rank), else every GPU on its host. */
static int waits_for_rank(const struct dr_run *d, int n, int rank, const char *rank_host) {
  char key[64];
  snprintf(key, sizeof key, "group.gpu.%d.rank", n);
  const char *r = runview_param(d->v, key), *host = group_host(d, "gpu", n);
  if (r)
    return atoi(r) == rank;
  return host && !strcmp(host, rank_host);
}

static int rank_straggler(struct dr_run *d, struct dr_findings *fs, int *rank) {
  if (d->nranks < 2)
    return 0;
  double total[DR_MAX_RANKS];
  size_t nd = 0, nt = 0;
  for (size_t i = 0; i < d->nranks; i++) {
    nd += rank_has_data(&d->ranks[i]);
    if (d->ranks[i].nsteps >= DR_MIN_STEPS && isfinite(d->ranks[i].total_mean))
      total[nt++] = d->ranks[i].total_mean;
  }
  if (nd < 2 || !nt)
    return 0;
  double step = dr_median(total, nt);
  const struct dr_rank *who = NULL;
  double excess = 0, others = NAN;
  for (size_t i = 0; i < d->nranks; i++) {
    const struct dr_rank *r = &d->ranks[i];
    if (!rank_has_data(r))
      continue;
    double v[DR_MAX_RANKS];
    size_t n = 0;
    for (size_t k = 0; k < d->nranks; k++)
      if (k != i && rank_has_data(&d->ranks[k]))
        v[n++] = d->ranks[k].data_mean;
    double med = dr_median(v, n), x = r->data_mean - med;
    if (x >= DR_RANK_DATA_MIN_S && step > 0 && x >= DR_RANK_DATA_SHARE * step && x > excess)
      who = r, excess = x, others = med;
  }
  if (!who)
    return 0;
  double lost = fmin(excess / step, DR_MAX_LOST);
  struct store_finding *f = dr_add(fs, d, "straggler", lost, 1 / (1 - lost));
  if (!f)
    return 1;
  /* The others wait for it inside their compute (the straggler term); where the loop's figures are
   * the straggling rank's own (a group's focus node), its data wait comes down to the others'. */
  if (d->host[0] && d->host_rank == who->rank && who->data_mean > 0) {
    dr_set_change(fs, f, DR_CH_FACTOR, DR_TERM_DATA, others / who->data_mean, 1);
  } else {
    d->strag_lost = fmax(dr_fin(d->strag_lost, 0), lost);
    dr_set_change(fs, f, DR_CH_FACTOR, DR_TERM_STRAGGLER, 0, 1);
  }
  dr_printf(f->title, sizeof f->title,
            "Straggler: rank %d waits %.0f ms per step for data, the other%s %.0f ms — %s for it", who->rank,
            who->data_mean * 1e3, d->nranks > 2 ? "s" : "", others * 1e3, d->nranks > 2 ? "they wait" : "it waits");
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_int(&j, "rank", who->rank);
  *rank = who->rank;
  name_host(d, f, &j, "rank", who->rank);
  dr_json_num(&j, "data_wait_s", who->data_mean);
  dr_json_num(&j, "others_data_wait_s", others);
  dr_json_num(&j, "step_s", step);
  dr_json_int(&j, "ranks", (long long)d->nranks);
  dr_json_int(&j, "steps", (long long)who->nsteps);
  dr_json_str(&j, "model",
              "synchronous data parallel: every rank waits at the all-reduce for the slowest; the straggler "
              "term = (its data wait - the others' median) / median step, which its fix removes");
  dr_printf(f->fix, sizeof f->fix,
            "Rank %d spends %.0f ms more per step waiting for its next batch than the median of the others "
            "(%.0f vs %.0f ms of a %.0f ms step); the other ranks spend that time waiting for it in the gradient "
            "all-reduce, so the whole job runs at its pace (~%.0f%% of each step). Find what differs on that "
            "rank: its shard of the data (larger samples, slower files, an uneven split), its node's disk, CPU "
            "or page cache, or fewer loader workers there. Balance the shards, give its loader more workers, "
            "or stage its data locally.\n"
            "PyTorch:\n"
            "  sampler = torch.utils.data.DistributedSampler(ds, shuffle=True, drop_last=True)  # even shards\n"
            "  loader = DataLoader(ds, sampler=sampler, num_workers=8, pin_memory=True, persistent_workers=True)\n"
            "  # compare ranks: gpuscope show RUN --metric step.data_s --csv  (labels rank=N)",
            who->rank, excess * 1e3, who->data_mean * 1e3, others * 1e3, step * 1e3, lost * 100);
  return 1;
}

/* A straggling GPU that looks sick (rules_health.c) has that named as the likely cause. */
static void straggler_sick(struct dr_run *d, struct store_finding *f, struct dr_json *j, int gpu) {
  char why[160];
  if (!dr_gpu_sick_why(d, gpu, why, sizeof why))
    return;
  size_t len = strlen(f->title);
  dr_printf(f->title + len, sizeof f->title - len, " — %s: the likely cause", why);
  dr_json_str(j, "health", why);
  len = strlen(f->fix);
  dr_printf(f->fix + len, sizeof f->fix - len,
            "\nHere the GPU itself is the likely cause: %s. Drain the node and reset the GPU (nvidia-smi -r), "
            "reseat or replace the board if it comes back, and check gpuscope devices --health.",
            why);
}

/* The straggler's fix, with the vendor's tools (NVIDIA's, or AMD's: docs/amd.md). */
static void straggler_fix(struct store_finding *f, const struct dr_run *d, const struct dr_gpu *g, const char *what,
                          double mine, double others, double lost, int by_clock) {
  dr_printf(f->fix, sizeof f->fix,
            "GPU %d is %.0f%% slower than the median of the other %d GPUs by %s (%.0f vs %.0f). In synchronous "
            "data parallel every step waits for the slowest rank, so the whole job runs at its pace. %s Check "
            "its rank's input (uneven shards, a slower local disk), its PCIe link (%s), NUMA placement (bind "
            "each rank to the CPUs near its GPU), and its clocks and temperature; give it less work or exclude "
            "the GPU (%s) if it is faulty.\n"
            "PyTorch:\n"
            "  sampler = torch.utils.data.DistributedSampler(ds, shuffle=True, drop_last=True)  # even shards\n"
            "  # per rank, near its GPU: numactl --cpunodebind=NODE --membind=NODE python train.py\n"
            "Keras:\n"
            "  strategy = tf.distribute.MirroredStrategy(devices=['/gpu:0', '/gpu:1', ...])  # leave it out",
            g->index, lost * 100, d->nused - 1, what, mine, others,
            by_clock ? "Its clocks are lower: look for heat or power limits on that board."
                     : "It does less work per second: its rank is fed or scheduled more slowly.",
            g->amd ? "lspci -vv: its LnkSta against LnkCap" : "nvidia-smi -q | grep -A2 'Link Width'",
            g->amd ? "HIP_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES");
}

void dr_rule_straggler(struct dr_run *d, struct dr_findings *fs) {
  /* One run: a straggling rank explains its GPU's lower activity, so one finding. A group: a node's
   * GPU can hold the job back as well as another node's loader; both are named, and the GPUs on the
   * straggling rank's host are left out (they wait for its data). */
  int rank = -1, by_rank = rank_straggler(d, fs, &rank);
  const char *rank_host = by_rank ? group_host(d, "rank", rank) : NULL;
  if ((by_rank && !rank_host) || d->nused < 2)
    return;
  int all_sm = 1;
  for (int i = 0; i < d->ngpus; i++)
    if (d->gpus[i].used && !d->gpus[i].sm_active.n)
      all_sm = 0;
  double (*act)(const struct dr_gpu *) = all_sm ? get_sm : get_util;
  int who = -1, by_clock = 0;
  double lost = 0, mine = NAN, others = NAN;
  for (int i = 0; i < d->ngpus; i++) {
    const struct dr_gpu *g = &d->gpus[i];
    if (!g->used || (rank_host && waits_for_rank(d, g->index, rank, rank_host)))
      continue;
    double a = act(g), med = median_others(d, i, act);
    if (isfinite(a) && isfinite(med) && med > 0 && med - a >= DR_STRAGGLER_POINTS && (med - a) / med > lost)
      who = i, lost = (med - a) / med, mine = a, others = med, by_clock = 0;
    double c = get_clock(g), cmed = median_others(d, i, get_clock);
    if (isfinite(c) && isfinite(cmed) && cmed > 0 && c < (1 - DR_STRAGGLER_CLOCK) * cmed && 1 - c / cmed > lost)
      who = i, lost = 1 - c / cmed, mine = c, others = cmed, by_clock = 1;
  }
  if (who < 0)
    return;
  const struct dr_gpu *g = &d->gpus[who];
  struct store_finding *f = dr_add(fs, d, "straggler", lost, 1 / (1 - fmin(lost, DR_MAX_LOST)));
  if (!f)
    return;
  /* Slower clocks: its kernels take longer, so its fix shortens the GPU work term by its pace to the
   * median's. Less activity at the same clocks: it is fed or scheduled slowly, and the others wait
   * for it (the straggler term, of what GPU work and copies leave), its own util the GPU work. */
  d->strag_gpu = who;
  if (by_clock) {
    dr_set_change(fs, f, DR_CH_FACTOR, DR_TERM_GPU, 1 - lost, 1);
  } else {
    d->strag_lost = fmax(dr_fin(d->strag_lost, 0), lost);
    dr_set_change(fs, f, DR_CH_FACTOR, DR_TERM_STRAGGLER, 0, 1);
  }
  const char *what = by_clock ? "SM clock" : all_sm ? "SM activity" : "utilisation";
  if (by_clock)
    dr_printf(f->title, sizeof f->title, "Straggler: GPU %d runs at %.0f MHz vs %.0f MHz on the others", g->index, mine,
              others);
  else
    dr_printf(f->title, sizeof f->title, "Straggler: GPU %d is %.0f points behind the others (%s %.0f%% vs %.0f%%)",
              g->index, others - mine, what, mine, others);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_int(&j, "gpu", g->index);
  dr_json_str(&j, "signal", what);
  dr_json_num(&j, "value", mine);
  dr_json_num(&j, "others_median", others);
  dr_json_num(&j, "slower_by", lost);
  dr_json_int(&j, "gpus_used", d->nused);
  dr_json_num(&j, "temp_max_c", g->temp.max);
  dr_json_num(&j, "throttled_share", g->throttle_share);
  name_host(d, f, &j, "gpu", g->index);
  dr_json_str(&j, "model",
              "synchronous data parallel runs at the slowest rank's pace (waiting ranks spin in collectives and "
              "look busy): the straggler term = (others - it) / others of what its GPU work leaves of the step; "
              "its fix brings its pace to the median");
  straggler_fix(f, d, g, what, mine, others, lost, by_clock);
  straggler_sick(d, f, &j, g->index);
}

/* ---- underused_gpus ---- */

void dr_rule_underused(struct dr_run *d, struct dr_findings *fs) {
  int idle = 0, busy = 0, known = 0;
  char list[256] = "";
  size_t len = 0;
  for (int i = 0; i < d->ngpus; i++) {
    const struct dr_gpu *g = &d->gpus[i];
    if (!g->util.n)
      continue;
    known++;
    if (g->util.mean < DR_IDLE_GPU_UTIL) {
      idle++;
      if (len + 8 < sizeof list)
        len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? ", " : "", g->index);
    } else if (g->util.mean >= DR_BUSY_GPU_UTIL) {
      busy++;
    }
  }
  if (!idle)
    return;
  int none_used = !busy && known == idle && d->nsteps >= DR_MIN_STEPS; /* the job trains, but not on a GPU */
  if (!(busy && idle) && !none_used)
    return;
  double share = (double)idle / known;
  /* The idle GPUs join the ones that work (busy or not) at DR_SCALING_EFFICIENCY each. */
  int working = known - idle;
  double speedup = busy && working > 0 ? (working + DR_SCALING_EFFICIENCY * idle) / working : 1;
  struct store_finding *f = dr_add(fs, d, "underused_gpus", share, speedup > 1 ? speedup : 1);
  if (!f)
    return;
  if (none_used)
    dr_printf(f->title, sizeof f->title, "Unused GPU%s: the job trains but GPU %s stayed idle", known > 1 ? "s" : "",
              list);
  else
    dr_printf(f->title, sizeof f->title, "Underused GPUs: %d of %d GPUs idle (GPU %s)", idle, known, list);
  struct dr_json j;
  dr_json_begin(&j, f->evidence, sizeof f->evidence);
  dr_json_int(&j, "gpus", known);
  dr_json_int(&j, "idle", idle);
  dr_json_int(&j, "busy", busy);
  dr_json_str(&j, "idle_gpus", list);
  dr_json_num(&j, "idle_gpu_hours", share * known * d->window_s / 3600);
  dr_json_int(&j, "working", working);
  dr_json_str(&j, "model",
              "the idle GPUs join the working ones by data parallel at 90% scaling efficiency each: speed-up = "
              "(working + 0.9 * idle) / working (more GPUs, not a shorter step: outside the step model)");
  dr_printf(f->fix, sizeof f->fix,
            "%s Either spread the work over every GPU with data parallelism, or ask for fewer GPUs so the idle "
            "ones serve other jobs.\n"
            "PyTorch:\n"
            "  torchrun --nproc_per_node=%d train.py\n"
            "  # in train.py:\n"
            "  torch.distributed.init_process_group('nccl'); rank = int(os.environ['LOCAL_RANK'])\n"
            "  model = torch.nn.parallel.DistributedDataParallel(model.to(rank), device_ids=[rank])\n"
            "  loader = DataLoader(ds, sampler=torch.utils.data.DistributedSampler(ds), batch_size=B)\n"
            "Keras:\n"
            "  strategy = tf.distribute.MirroredStrategy()\n"
            "  with strategy.scope(): model = build_model(); model.compile(...)",
            none_used ? "The job trained (it sent steps) but no GPU did any work: it runs on the CPU. Move the "
                        "model and each batch to the GPU (model.to('cuda'); x = x.to('cuda'))."
                      : "Some GPUs of this run did no work while others were busy.",
            known);
}
