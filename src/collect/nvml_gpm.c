/* collect/nvml_gpm: GPM (Hopper and newer) for a whole GPU and for a MIG instance: two samples at
 * least GPM_MIN_GAP_NS apart, the metrics between them (gpm_table), each switched off alone when
 * the GPU does not have it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/nvml_int.h"

#define MIB 1048576.0
/* Each GPM metric read: the whole GPU's series, and a MIG instance's (M_COUNT: not read for one). */
static const struct {
  unsigned id;
  enum metric metric, mig;
  double scale;
} gpm_table[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, M_GR_ACTIVE, M_MIG_GR_ACTIVE, 1},
    {NVML_GPM_METRIC_SM_UTIL, M_SM_ACTIVE, M_MIG_SM_ACTIVE, 1},
    {NVML_GPM_METRIC_SM_OCCUPANCY, M_SM_OCCUPANCY, M_MIG_SM_OCCUPANCY, 1},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, M_TENSOR_ACTIVE, M_MIG_TENSOR_ACTIVE, 1},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, M_DRAM_ACTIVE, M_MIG_DRAM_ACTIVE, 1},
    {NVML_GPM_METRIC_FP16_UTIL, M_FP16_ACTIVE, M_MIG_FP16_ACTIVE, 1},
    {NVML_GPM_METRIC_FP32_UTIL, M_FP32_ACTIVE, M_MIG_FP32_ACTIVE, 1},
    {NVML_GPM_METRIC_FP64_UTIL, M_FP64_ACTIVE, M_MIG_FP64_ACTIVE, 1},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, M_PCIE_TX_GPM, M_COUNT, MIB},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, M_PCIE_RX_GPM, M_COUNT, MIB},
    {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, M_NVLINK_RX, M_COUNT, MIB},
    {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, M_NVLINK_TX, M_COUNT, MIB},
};
_Static_assert(sizeof gpm_table / sizeof gpm_table[0] == N_GPM, "N_GPM (nvml_int.h) counts gpm_table");

/* Takes a GPM sample of GPU g (k < 0) or of its MIG instance k, waiting out a gap a few ms short of
 * the 100 ms NVML wants. Returns 1 when st->s[0] (first sample) or st->s[1] now holds a new one. */
static int gpm_take(struct nvml_ctx *c, struct gpu *g, int k, struct gpm_state *st) {
  struct mig *mi = k >= 0 ? &g->migs[k] : NULL;
  int64_t short_by = st->have ? GPM_MIN_GAP_NS - (gs_mono_ns() - st->t) : 0;
  if (short_by > GPM_MAX_WAIT_NS)
    return 0;
  if (short_by > 0) {
    /* At a 100 ms interval the gap is 100 ms give or take the wakeup jitter: wait out those few
     * milliseconds rather than lose every other GPM reading. */
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)short_by};
    while (nanosleep(&ts, &ts))
      ;
  }
  nvmlGpmSample_t s = st->s[st->have];
  nvmlReturn_t r = mi ? c->api.nvmlGpmMigSampleGet(g->dev, mi->gi, s) : c->api.nvmlGpmSampleGet(g->dev, s);
  return nv_verdict(c, g, mi, C_GPM, r);
}

/* GPM of GPU g (k < 0) or of its MIG instance k: each metric's average since the previous sample. */
void nv_gpm_tick(struct nvml_ctx *c, struct gpu *g, int k) {
  struct mig *mi = k >= 0 ? &g->migs[k] : NULL;
  struct gpm_state *st = mi ? &mi->gpm : &g->gpm;
  if (!st->on || (mi ? mi->off : g->off)[C_GPM] || !gpm_take(c, g, k, st))
    return;
  int64_t t = gs_mono_ns();
  if (!st->have) {
    st->have = 1;
    st->t = t;
    return;
  }
  nvmlGpmMetricsGet_t *q = g->gpm_req;
  size_t which[N_GPM], n = 0;
  memset(q, 0, offsetof(nvmlGpmMetricsGet_t, metrics) + N_GPM * sizeof q->metrics[0]);
  q->version = NVML_GPM_METRICS_GET_VERSION;
  q->sample1 = st->s[0];
  q->sample2 = st->s[1];
  for (size_t i = 0; i < N_GPM; i++)
    if (!mi || gpm_table[i].mig != M_COUNT)
      which[n] = i, q->metrics[n++].metricId = gpm_table[i].id;
  q->numMetrics = (unsigned)n;
  nvmlReturn_t r = c->api.nvmlGpmMetricsGet(q);
  /* The newer sample becomes the older one either way. */
  nvmlGpmSample_t tmp = st->s[0];
  st->s[0] = st->s[1];
  st->s[1] = tmp;
  st->t = t;
  if (!nv_verdict(c, g, mi, C_GPM, r))
    return;
  int64_t ts = nv_stamp(c);
  for (size_t j = 0; j < n; j++) {
    size_t i = which[j];
    nvmlGpmMetric_t *m = &q->metrics[j];
    enum metric em = mi ? gpm_table[i].mig : gpm_table[i].metric;
    if (m->nvmlReturn == NVML_SUCCESS) {
      if (mi)
        nv_emit_mig(c, g, k, em, ts, m->value * gpm_table[i].scale);
      else
        nv_emit(c, g, em, ts, m->value * gpm_table[i].scale);
    } else if (!st->noted[i]) {
      st->noted[i] = 1;
      if (mi)
        nv_note(c, "gpu%u mig %u: GPM %s: %s", g->index, mi->gi, nv_metrics[em].name,
                nvml_api_strerror(&c->api, m->nvmlReturn));
      else
        nv_note(c, "gpu%u: GPM %s: %s", g->index, nv_metrics[em].name, nvml_api_strerror(&c->api, m->nvmlReturn));
    }
  }
}

/* Prepares GPM sampling of a GPU (k < 0) or of its MIG instance k: the shared request and the two
 * samples it alternates between (GPM stays off, with a note, when the driver cannot allocate them).
 * Returns 0, or GS_ENOMEM. */
int nv_gpm_start(struct nvml_ctx *c, struct gpu *g, int k) {
  const struct nvml_api *a = &c->api;
  struct gpm_state *st = k < 0 ? &g->gpm : &g->migs[k].gpm;
  if (!g->gpm_req && !(g->gpm_req = calloc(1, sizeof *g->gpm_req)))
    return GS_ENOMEM;
  if (a->nvmlGpmSampleAlloc(&st->s[0]) != NVML_SUCCESS || a->nvmlGpmSampleAlloc(&st->s[1]) != NVML_SUCCESS) {
    if (k < 0)
      nv_note(c, "gpu%u: GPM: cannot allocate samples", g->index);
    else
      nv_note(c, "gpu%u mig %u: GPM: cannot allocate samples", g->index, g->migs[k].gi);
    (k < 0 ? g->off : g->migs[k].off)[C_GPM] = 1;
  } else {
    st->on = 1;
  }
  return 0;
}
