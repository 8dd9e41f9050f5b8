/* collect/nvml_util: the NVML collector's helpers under every file: growing arrays, the clocks a
 * reading is stamped with (the tick's scheduled time, or the driver's own timestamp converted),
 * the pending points, events and notes of one GPU's tick and their flush into the sink, and the
 * verdict on a driver call's answer (switched off, retried, the GPU lost). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/nvml_int.h"

const struct gs_metric_desc nv_metrics[M_COUNT] = {
    [M_UTIL] = {"gpu.util_pct", "%", GS_GAUGE,
                "share of the driver's sample period in which a kernel ran (every driver sample)"},
    [M_MEM_UTIL] = {"gpu.mem_util_pct", "%", GS_GAUGE,
                    "share of the sample period in which device memory was read or written"},
    [M_MEM_USED] = {"gpu.mem_used_bytes", "B", GS_GAUGE, "device memory in use"},
    [M_MEM_FREE] = {"gpu.mem_free_bytes", "B", GS_GAUGE, "device memory free"},
    [M_MEM_TOTAL] = {"gpu.mem_total_bytes", "B", GS_GAUGE, "device memory in total"},
    [M_POWER] = {"gpu.power_w", "W", GS_GAUGE, "board power draw (a 1 s average on Ampere and newer)"},
    [M_POWER_LIMIT] = {"gpu.power_limit_w", "W", GS_GAUGE, "enforced power limit"},
    [M_ENERGY] = {"gpu.energy_j", "J", GS_COUNTER, "energy used since the driver loaded"},
    [M_TEMP] = {"gpu.temp_c", "C", GS_GAUGE, "GPU core temperature"},
    [M_SM_CLOCK] = {"gpu.sm_clock_mhz", "MHz", GS_GAUGE, "current SM clock"},
    [M_MEM_CLOCK] = {"gpu.mem_clock_mhz", "MHz", GS_GAUGE, "current memory clock"},
    [M_SM_CLOCK_MAX] = {"gpu.sm_clock_max_mhz", "MHz", GS_GAUGE, "highest SM clock the GPU allows"},
    [M_MEM_CLOCK_MAX] = {"gpu.mem_clock_max_mhz", "MHz", GS_GAUGE, "highest memory clock"},
    [M_THROTTLE] = {"gpu.throttle_reasons", "", GS_GAUGE,
                    "clock-event reason bitmask (0x1 idle, 0x4 power cap, 0x20/0x40 thermal, ...)"},
    [M_PCIE_TX] = {"gpu.pcie_tx_bytes_s", "B/s", GS_GAUGE, "PCIe bytes sent by the GPU (20 ms window, 1 Hz)"},
    [M_PCIE_RX] = {"gpu.pcie_rx_bytes_s", "B/s", GS_GAUGE, "PCIe bytes received by the GPU (20 ms window, 1 Hz)"},
    [M_FAN] = {"gpu.fan_pct", "%", GS_GAUGE, "fan speed, percent of its maximum"},
    [M_PSTATE] = {"gpu.pstate", "", GS_GAUGE, "performance state (0 fastest .. 15 slowest)"},
    [M_GR_ACTIVE] = {"gpu.gr_active_pct", "%", GS_GAUGE,
                     "GPM: share of time a graphics or compute context was active (graphics engine)"},
    [M_SM_ACTIVE] = {"gpu.sm_active_pct", "%", GS_GAUGE, "GPM: share of SMs busy, time-averaged"},
    [M_SM_OCCUPANCY] = {"gpu.sm_occupancy_pct", "%", GS_GAUGE, "GPM: resident warps over the maximum"},
    [M_TENSOR_ACTIVE] = {"gpu.tensor_active_pct", "%", GS_GAUGE, "GPM: any tensor-core pipe active"},
    [M_DRAM_ACTIVE] = {"gpu.dram_active_pct", "%", GS_GAUGE, "GPM: DRAM bandwidth used over peak"},
    [M_FP16_ACTIVE] = {"gpu.fp16_active_pct", "%", GS_GAUGE, "GPM: FP16 pipe active"},
    [M_FP32_ACTIVE] = {"gpu.fp32_active_pct", "%", GS_GAUGE, "GPM: FP32 pipe active"},
    [M_FP64_ACTIVE] = {"gpu.fp64_active_pct", "%", GS_GAUGE, "GPM: FP64 pipe active"},
    [M_PCIE_TX_GPM] = {"gpu.pcie_tx_gpm_bytes_s", "B/s", GS_GAUGE, "GPM: PCIe bytes sent, interval average"},
    [M_PCIE_RX_GPM] = {"gpu.pcie_rx_gpm_bytes_s", "B/s", GS_GAUGE, "GPM: PCIe bytes received, interval average"},
    [M_NVLINK_RX] = {"gpu.nvlink_rx_bytes_s", "B/s", GS_GAUGE, "GPM: NVLink bytes received, all links"},
    [M_NVLINK_TX] = {"gpu.nvlink_tx_bytes_s", "B/s", GS_GAUGE, "GPM: NVLink bytes sent, all links"},
    [M_XID] = {"gpu.xid", "", GS_GAUGE, "the last Xid code the driver reported (an event xid each)"},
    [M_XID_COUNT] = {"gpu.xid_count", "", GS_GAUGE, "Xids of one code in the last 5 minutes (labels xid)"},
    [M_ECC_SBE_VOL] = {"gpu.ecc_sbe_volatile", "", GS_COUNTER,
                       "corrected (single-bit) ECC errors since the driver loaded"},
    [M_ECC_DBE_VOL] = {"gpu.ecc_dbe_volatile", "", GS_COUNTER,
                       "uncorrected (double-bit) ECC errors since the driver loaded"},
    [M_ECC_SBE_AGG] = {"gpu.ecc_sbe_aggregate", "", GS_COUNTER, "corrected ECC errors over the GPU's life"},
    [M_ECC_DBE_AGG] = {"gpu.ecc_dbe_aggregate", "", GS_COUNTER, "uncorrected ECC errors over the GPU's life"},
    [M_REMAP_CORR] = {"gpu.remapped_rows_correctable", "", GS_GAUGE, "rows remapped for correctable errors"},
    [M_REMAP_UNC] = {"gpu.remapped_rows_uncorrectable", "", GS_GAUGE, "rows remapped for uncorrectable errors"},
    [M_REMAP_PENDING] = {"gpu.remap_pending", "", GS_GAUGE, "1: a row remap waits for a GPU reset"},
    [M_REMAP_FAILURE] = {"gpu.remap_failure", "", GS_GAUGE, "1: a row remap failed (the GPU needs service)"},
    [M_RETIRED_SBE] = {"gpu.retired_pages_sbe", "", GS_GAUGE, "pages retired for repeated single-bit errors"},
    [M_RETIRED_DBE] = {"gpu.retired_pages_dbe", "", GS_GAUGE, "pages retired for a double-bit error"},
    [M_RETIRED_PENDING] = {"gpu.retired_pages_pending", "", GS_GAUGE, "1: a page retirement waits for a reset"},
    [M_PCIE_REPLAY] = {"gpu.pcie_replays", "", GS_COUNTER, "PCIe replays (link-level retransmissions)"},
    [M_NVLINK_REPLAY] = {"gpu.nvlink_replay_errors", "", GS_COUNTER, "NVLink replay errors, all active links"},
    [M_NVLINK_RECOVERY] = {"gpu.nvlink_recovery_errors", "", GS_COUNTER, "NVLink recovery errors, all active links"},
    [M_NVLINK_CRC_FLIT] = {"gpu.nvlink_crc_flit_errors", "", GS_COUNTER, "NVLink flit CRC errors, all active links"},
    [M_NVLINK_CRC_DATA] = {"gpu.nvlink_crc_data_errors", "", GS_COUNTER, "NVLink data CRC errors, all active links"},
    [M_PROC_MEM] = {"gpu.proc_mem_bytes", "B", GS_GAUGE, "device memory used by one process (labels pid)"},
    [M_PROC_SM] = {"gpu.proc_sm_pct", "%", GS_GAUGE, "SM utilisation of one process (labels pid)"},
    [M_MIG_MEM_USED] = {"mig.mem_used_bytes", "B", GS_GAUGE, "MIG instance: its memory in use (labels gpu, gi)"},
    [M_MIG_MEM_FREE] = {"mig.mem_free_bytes", "B", GS_GAUGE, "MIG instance: its memory free"},
    [M_MIG_MEM_TOTAL] = {"mig.mem_total_bytes", "B", GS_GAUGE, "MIG instance: its memory in total"},
    [M_MIG_GR_ACTIVE] = {"mig.gr_active_pct", "%", GS_GAUGE, "MIG instance, GPM: graphics engine active"},
    [M_MIG_SM_ACTIVE] = {"mig.sm_active_pct", "%", GS_GAUGE, "MIG instance, GPM: share of its SMs busy"},
    [M_MIG_SM_OCCUPANCY] = {"mig.sm_occupancy_pct", "%", GS_GAUGE, "MIG instance, GPM: resident warps"},
    [M_MIG_TENSOR_ACTIVE] = {"mig.tensor_active_pct", "%", GS_GAUGE, "MIG instance, GPM: tensor pipes active"},
    [M_MIG_DRAM_ACTIVE] = {"mig.dram_active_pct", "%", GS_GAUGE, "MIG instance, GPM: DRAM bandwidth used"},
    [M_MIG_FP16_ACTIVE] = {"mig.fp16_active_pct", "%", GS_GAUGE, "MIG instance, GPM: FP16 pipe active"},
    [M_MIG_FP32_ACTIVE] = {"mig.fp32_active_pct", "%", GS_GAUGE, "MIG instance, GPM: FP32 pipe active"},
    [M_MIG_FP64_ACTIVE] = {"mig.fp64_active_pct", "%", GS_GAUGE, "MIG instance, GPM: FP64 pipe active"},
};

static const char *const call_what[C_COUNT] = {
    [C_UTIL] = "utilization",
    [C_SAMPLES_GPU] = "utilization samples",
    [C_SAMPLES_MEM] = "memory utilization samples",
    [C_MEMORY] = "memory info",
    [C_POWER] = "power usage",
    [C_POWER_LIMIT] = "power limit",
    [C_ENERGY] = "energy",
    [C_TEMP] = "temperature",
    [C_SM_CLOCK] = "SM clock",
    [C_MEM_CLOCK] = "memory clock",
    [C_THROTTLE] = "clock event reasons",
    [C_PCIE] = "PCIe throughput",
    [C_FAN] = "fan speed",
    [C_PSTATE] = "performance state",
    [C_PROCS] = "running processes",
    [C_PROC_UTIL] = "process utilization",
    [C_GPM] = "GPM",
    [C_MIG] = "MIG instances",
    [C_EVENTS] = "Xid events",
    [C_ECC] = "ECC errors",
    [C_REMAP] = "remapped rows",
    [C_RETIRED] = "retired pages",
    [C_PCIE_REPLAY] = "PCIe replays",
    [C_NVLINK] = "NVLink errors",
};

int nv_grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap)
    return 0;
  size_t c = *cap ? *cap * 2 : 16;
  while (c < need)
    c *= 2;
  void *q = realloc(*p, c * elem);
  if (!q)
    return -1;
  *p = q;
  *cap = c;
  return 0;
}

int64_t nv_wall_us(void) {
  return gs_wall_ns() / 1000;
}

/* Reads the monotonic and wall clocks as one instant: the wall read bracketed by two monotonic
 * reads, the tightest of three tries. Two plain reads can straddle a preemption (a loaded machine,
 * a sanitizer build), which would shift every driver sample of that poll by as much. The first try
 * always sets both outputs; a later one replaces it only when it is tighter. */
void nv_clock_pair(int64_t *mono, int64_t *wall_us_out) {
  int64_t best = INT64_MAX;
  for (int i = 0; i < 3 && best >= 20000; i++) { /* 20 µs: good enough, stop */
    int64_t a = gs_mono_ns(), w = gs_wall_ns(), b = gs_mono_ns();
    if (i == 0 || b - a < best) {
      best = b - a;
      *mono = a + (b - a) / 2;
      *wall_us_out = w / 1000;
    }
  }
}

/* Converts a driver timestamp (µs on the wall clock) to the sink's monotonic clock. */
int64_t nv_drv_to_mono(unsigned long long ts_us, int64_t now_mono, int64_t now_wall_us) {
  int64_t age_us = now_wall_us - (int64_t)ts_us;
  if (age_us < 0)
    age_us = 0;
  return now_mono - age_us * 1000;
}

/* A reading taken more than this after its tick's scheduled time is stamped with its read time:
 * 5 % of the interval, at least 1 ms (5 ms at the default 100 ms). */
static int64_t late_ns(const struct nvml_ctx *c) {
  int64_t l = c->interval_ns / 20;
  return l > 1000000 ? l : 1000000;
}

/* The timestamp for a value read now: the tick's scheduled time while the reading is on time, so
 * each series is exactly regular (one bit per timestamp in the store's delta-of-delta chunks) and
 * lines up with the run loop's other collectors; its read time when it is late (a loaded machine
 * woke the thread late, or a slow driver call pushed it past the tick), so a value is never put
 * earlier than it was read by more than late_ns(). Late readings are counted (nvml.late_readings). */
int64_t nv_stamp(struct nvml_ctx *c) {
  int64_t now = gs_mono_ns();
  if (now - c->tick_ns > late_ns(c)) {
    c->late++;
    return now;
  }
  return c->tick_ns;
}

void nv_note(struct nvml_ctx *c, const char *fmt, ...) {
  if (nv_grow((void **)&c->pn, &c->cap_pn, c->n_pn + 1, sizeof *c->pn))
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->pn[c->n_pn++].text, sizeof c->pn[0].text, fmt, ap);
  va_end(ap);
}

/* Queues an event labelled labels (NULL: the GPU's own). */
void nv_event_on(struct nvml_ctx *c, int64_t t, const char *kind, const char *name, const char *text,
                 const char *labels) {
  if (nv_grow((void **)&c->pe, &c->cap_pe, c->n_pe + 1, sizeof *c->pe))
    return;
  struct pend_event *e = &c->pe[c->n_pe++];
  e->t = t;
  e->kind = kind;
  e->value = NAN;
  snprintf(e->name, sizeof e->name, "%s", name ? name : "");
  snprintf(e->text, sizeof e->text, "%s", text ? text : "");
  snprintf(e->labels, sizeof e->labels, "%s", labels ? labels : "");
}

void nv_event(struct nvml_ctx *c, int64_t t, const char *kind, const char *name, const char *text) {
  nv_event_on(c, t, kind, name, text, NULL);
}

/* Queues one value; drops non-finite values and values older than the series' last one. */
void nv_emit(struct nvml_ctx *c, struct gpu *g, enum metric m, int64_t t, double v) {
  if (!isfinite(v) || t <= g->last_t[m])
    return;
  if (nv_grow((void **)&c->pp, &c->cap_pp, c->n_pp + 1, sizeof *c->pp))
    return;
  g->last_t[m] = t;
  c->pp[c->n_pp++] = (struct pend_point){.metric = m, .proc = -1, .mig = -1, .t = t, .v = v};
}

/* Queues one value of MIG instance k (m one of M_MIG_*), as nv_emit() does. */
void nv_emit_mig(struct nvml_ctx *c, struct gpu *g, int k, enum metric m, int64_t t, double v) {
  struct mig *mi = &g->migs[k];
  int j = m - M_MIG_FIRST;
  if (!isfinite(v) || t <= mi->last_t[j])
    return;
  if (nv_grow((void **)&c->pp, &c->cap_pp, c->n_pp + 1, sizeof *c->pp))
    return;
  mi->last_t[j] = t;
  c->pp[c->n_pp++] = (struct pend_point){.metric = m, .proc = -1, .mig = k, .t = t, .v = v};
}

void nv_emit_proc(struct nvml_ctx *c, struct gpu *g, enum metric m, unsigned pid, int64_t t, double v) {
  size_t i;
  int k = m == M_PROC_SM;
  for (i = 0; i < g->n_procs && g->procs[i].pid != pid; i++)
    ;
  if (i == g->n_procs) {
    if (nv_grow((void **)&g->procs, &g->cap_procs, g->n_procs + 1, sizeof *g->procs))
      return;
    g->procs[g->n_procs++] = (struct proc_series){.pid = pid, .sid = {-1, -1}, .last_t = {INT64_MIN, INT64_MIN}};
  }
  struct proc_series *p = &g->procs[i];
  if (!isfinite(v) || t <= p->last_t[k])
    return;
  if (nv_grow((void **)&c->pp, &c->cap_pp, c->n_pp + 1, sizeof *c->pp))
    return;
  p->last_t[k] = t;
  c->pp[c->n_pp++] = (struct pend_point){.metric = m, .proc = (int)i, .mig = -1, .t = t, .v = v};
}

void nv_lose(struct nvml_ctx *c, struct gpu *g, nvmlReturn_t r) {
  if (g->lost)
    return;
  g->lost = 1;
  atomic_fetch_add(&c->n_lost, 1);
  nv_event(c, nv_stamp(c), "gpu_lost", "", nvml_api_strerror(&c->api, r));
}

/* Classifies the answer of one driver call on GPU g, or on its MIG instance mi when not NULL.
 * Returns 1 on success. NOT_SUPPORTED and NO_PERMISSION switch the call off for this GPU (or
 * instance) with a note; GPU_IS_LOST ends the GPU; on an instance, GPU_IS_LOST, NOT_FOUND and
 * INVALID_ARGUMENT ask for a re-list of the GPU's instances instead; anything else is noted once
 * and retried next tick. */
int nv_verdict(struct nvml_ctx *c, struct gpu *g, struct mig *mi, enum call call, nvmlReturn_t r) {
  char who[48];
  if (mi)
    snprintf(who, sizeof who, "gpu%u mig %u", g->index, mi->gi);
  else
    snprintf(who, sizeof who, "gpu%u", g->index);
  if (mi && (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_GPU_IS_LOST ||
             r == NVML_ERROR_GPU_NOT_FOUND)) {
    /* Most likely the instance was destroyed: a re-list soon decides (and a lost GPU is seen there). */
    g->mig_relist = mi->suspect = 1;
    if (mi->kept_bad && !mi->noted[call]) {
      mi->noted[call] = 1;
      nv_note(c, "%s: %s: %s (still listed; retrying)", who, call_what[call], nvml_api_strerror(&c->api, r));
    }
    return 0;
  }
  switch (r) {
  case NVML_SUCCESS:
    return 1;
  case NVML_ERROR_NOT_SUPPORTED:
  case NVML_ERROR_NO_PERMISSION:
  case NVML_ERROR_FUNCTION_NOT_FOUND:
    (mi ? mi->off : g->off)[call] = 1;
    nv_note(c, "%s: %s: %s", who, call_what[call], nvml_api_strerror(&c->api, r));
    return 0;
  case NVML_ERROR_GPU_IS_LOST:
  case NVML_ERROR_GPU_NOT_FOUND:
    nv_lose(c, g, r);
    return 0;
  default:
    if (!(mi ? mi->noted : g->noted)[call]) {
      (mi ? mi->noted : g->noted)[call] = 1;
      nv_note(c, "%s: %s: %s (retrying)", who, call_what[call], nvml_api_strerror(&c->api, r));
    }
    return 0;
  }
}

int nv_ok(struct nvml_ctx *c, struct gpu *g, enum call call, nvmlReturn_t r) {
  return nv_verdict(c, g, NULL, call, r);
}

int nv_series_id(struct nvml_ctx *c, struct gpu *g, enum metric m, int proc, int mig) {
  int *slot = mig >= 0           ? &g->migs[mig].sid[m - M_MIG_FIRST]
              : m == M_XID_COUNT ? &g->health.code_sid[proc]
              : proc < 0         ? &g->sid[m]
                                 : &g->procs[proc].sid[m == M_PROC_SM];
  if (*slot < 0) {
    char labels[64];
    if (m == M_XID_COUNT)
      snprintf(labels, sizeof labels, "%s,xid=%u", g->label, g->health.codes[proc]);
    else if (mig >= 0)
      snprintf(labels, sizeof labels, "%s", g->migs[mig].label);
    else if (proc < 0)
      snprintf(labels, sizeof labels, "%s", g->label);
    else
      snprintf(labels, sizeof labels, "%s,pid=%u", g->label, g->procs[proc].pid);
    const struct gs_metric_desc *d = &nv_metrics[m];
    *slot = gs_sink_series(c->sink, "nvml", d->name, labels, d->unit, d->kind);
  }
  return *slot;
}

/* Writes what the last GPU produced into the sink, unless close() has given up on this thread
 * (then the sink may already be gone). */
/* Returns 1 when the points went into the sink, 0 when close() had begun and they were dropped. */
int nv_flush(struct nvml_ctx *c, struct gpu *g) {
  pthread_mutex_lock(&c->mu);
  int written = !atomic_load(&c->stop);
  if (written) {
    /* Ends first: a destroyed instance's points went in earlier, and a new one under its labels
     * (its id reused) may have points in this batch. */
    for (size_t i = 0; i < c->n_end; i++)
      gs_sink_end(c->sink, c->pend_end[i]);
    for (size_t i = 0; i < c->n_pp; i++) {
      struct pend_point *p = &c->pp[i];
      int sid = nv_series_id(c, g, p->metric, p->proc, p->mig);
      if (sid >= 0)
        gs_sink_put(c->sink, sid, p->t, p->v);
    }
    for (size_t i = 0; i < c->n_pe; i++) {
      struct pend_event *e = &c->pe[i];
      gs_sink_event(c->sink, e->t, e->kind, e->name, e->value, e->labels[0] ? e->labels : g->label, e->text);
    }
    for (size_t i = 0; i < c->n_pn; i++)
      gs_sink_note(c->sink, "%s", c->pn[i].text);
  }
  pthread_mutex_unlock(&c->mu);
  c->n_pp = c->n_pe = c->n_pn = c->n_end = 0;
  return written;
}

/* Reads dev's memory (used, free, total bytes into v): the _v2 call unless *v1_only, which is set
 * when the driver refuses _v2's version (an older driver: the unversioned call may still answer).
 * Returns the answer of the call that counted; FUNCTION_NOT_FOUND when no call is left. */
nvmlReturn_t nv_memory_read(const struct nvml_api *a, nvmlDevice_t dev, int *v1_only, double v[3]) {
  nvmlReturn_t r;
  if (a->have_memory_v2 && !*v1_only) {
    nvmlMemory_v2_t m = {.version = NVML_MEMORY_INFO_V2};
    r = a->nvmlDeviceGetMemoryInfo_v2(dev, &m);
    if (r == NVML_SUCCESS) {
      v[0] = (double)m.used, v[1] = (double)m.free, v[2] = (double)m.total;
      return r;
    }
    if (r != NVML_ERROR_ARGUMENT_VERSION_MISMATCH && r != NVML_ERROR_NOT_SUPPORTED &&
        r != NVML_ERROR_FUNCTION_NOT_FOUND && r != NVML_ERROR_INVALID_ARGUMENT)
      return r;
    *v1_only = 1;
  }
  if (!a->nvmlDeviceGetMemoryInfo)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  nvmlMemory_t m;
  r = a->nvmlDeviceGetMemoryInfo(dev, &m);
  if (r == NVML_SUCCESS)
    v[0] = (double)m.used, v[1] = (double)m.free, v[2] = (double)m.total;
  return r;
}

void nv_param(struct gs_sink *s, unsigned gpu, const char *key, const char *value) {
  char k[96];
  snprintf(k, sizeof k, "gpu.%u.%s", gpu, key);
  gs_sink_param(s, k, value);
}

/* "enabled", "disabled", "enabled (pending disable)", ...: the param gpu.N.mig_mode. Returns buf. */
const char *nv_mig_mode_text(int cur, int pending, char *buf, size_t n) {
  snprintf(buf, n, "%s%s", cur ? "enabled" : "disabled",
           pending == cur ? ""
           : pending      ? " (pending enable)"
                          : " (pending disable)");
  return buf;
}

/* Calls this library lacks are off from the start (one note lists them for the whole run). */
void nv_calls_switch_off_missing(const struct nvml_api *a, struct gpu *g, int fam_gpm) {
  g->off[C_UTIL] = !a->nvmlDeviceGetUtilizationRates;
  g->off[C_SAMPLES_GPU] = g->off[C_SAMPLES_MEM] = !a->nvmlDeviceGetSamples;
  g->off[C_MEMORY] = !a->nvmlDeviceGetMemoryInfo && !a->nvmlDeviceGetMemoryInfo_v2;
  g->off[C_POWER] = !a->nvmlDeviceGetPowerUsage;
  g->off[C_POWER_LIMIT] = !a->nvmlDeviceGetEnforcedPowerLimit;
  g->off[C_ENERGY] = !a->nvmlDeviceGetTotalEnergyConsumption;
  g->off[C_TEMP] = !a->nvmlDeviceGetTemperature && !a->nvmlDeviceGetTemperatureV;
  g->off[C_SM_CLOCK] = g->off[C_MEM_CLOCK] = !a->nvmlDeviceGetClockInfo;
  g->off[C_THROTTLE] = !a->nvmlDeviceGetCurrentClocksEventReasons;
  g->off[C_PCIE] = !a->nvmlDeviceGetPcieThroughput;
  g->off[C_FAN] = !a->nvmlDeviceGetFanSpeed;
  g->off[C_PSTATE] = !a->nvmlDeviceGetPerformanceState;
  g->off[C_PROCS] = !a->nvmlDeviceGetComputeRunningProcesses;
  g->off[C_PROC_UTIL] = !a->nvmlDeviceGetProcessUtilization;
  g->off[C_GPM] = !fam_gpm;
  g->off[C_EVENTS] = !a->nvmlDeviceRegisterEvents || !a->nvmlEventSetWait_v2;
  g->off[C_ECC] = !a->nvmlDeviceGetTotalEccErrors;
  g->off[C_REMAP] = !a->nvmlDeviceGetRemappedRows;
  g->off[C_RETIRED] = !a->nvmlDeviceGetRetiredPages;
  g->off[C_PCIE_REPLAY] = !a->nvmlDeviceGetPcieReplayCounter;
  g->off[C_NVLINK] = !a->nvmlDeviceGetNvLinkState || !a->nvmlDeviceGetNvLinkErrorCounter;
}
