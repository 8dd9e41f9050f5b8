/* collect/rocm: the AMD GPU collector. It loads ROCm SMI at run time (rocm_smi_api.c), records each
 * GPU's facts as the same run params NVML's GPUs get (gpu.N.name, uuid, pci_bus_id, mem_total_bytes)
 * plus gpu.N.vendor=amd, serial and gfx, and samples every GPU on the run loop's tick into the same
 * series the NVML collector writes: source "nvml" (the source name of every GPU series, whatever the
 * vendor, so the doctor, top, reports, tune and /metrics read AMD GPUs unchanged), labels "gpu=N"
 * and "gpu=N,pid=P", the metric descriptors of nvml_util.c. AMD GPUs are numbered after NVIDIA's:
 * this collector opens after collector_nvml and starts at its gpu.count. What ROCm SMI has no reading
 * for (SM activity, tensor activity) has no series at all: absent, never zero. Throttling comes from
 * the firmware's metrics table where its version has it, in NVML's reason bits (rc_metrics).
 *
 * ROCm SMI's reads are sysfs files (microseconds), not driver calls that can hang, so the collector
 * samples in sample() itself rather than from a thread of its own as NVML's does. A call answering
 * NOT_SUPPORTED, PERMISSION or NOT_YET_IMPLEMENTED is switched off for that GPU with one note; any
 * other error skips that reading this tick. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/nvml_int.h"
#include "collect/rocm_smi_api.h"

enum rcall {
  R_BUSY,
  R_MEM_BUSY,
  R_MEM,
  R_POWER,
  R_SOCKET_POWER,
  R_CAP,
  R_ENERGY,
  R_TEMP,
  R_CLOCK,
  R_PCIE,
  R_METRICS,
  R_COUNT
};
static const char *const rcall_what[R_COUNT] = {
    "busy percent", "memory busy percent", "memory usage", "average power",   "socket power",     "power cap",
    "energy",       "temperature",         "system clock", "PCIe throughput", "GPU metrics table"};

#define PROCS_MAX 64
#define ECC_EVERY 50 /* ticks between ECC reads (5 s at the default 100 ms): the counts change rarely */

/* AMD's three temperature sensors, each a series of its own beside gpu.temp_c (which the doctor and
 * the charts read: the edge where the GPU has one, else the junction): /metrics gives them AMD's
 * exporter's names. NVIDIA's GPUs have no such sensors: these are this collector's only series that
 * nvml_util.c's table lacks. */
static const int temp_sensor[3] = {RSMI_TEMP_TYPE_EDGE, RSMI_TEMP_TYPE_JUNCTION, RSMI_TEMP_TYPE_MEMORY};
static const struct gs_metric_desc amd_temps[3] = {
    {"gpu.temp_edge_c", "C", GS_GAUGE, "AMD: edge temperature"},
    {"gpu.temp_junction_c", "C", GS_GAUGE, "AMD: junction (hotspot) temperature"},
    {"gpu.temp_mem_c", "C", GS_GAUGE, "AMD: HBM temperature"},
};
/* The firmware's instantaneous PCIe bandwidth (gpu_metrics v1.4 and later: MI300), both directions
 * together: NVML's PCIe series are one direction each. */
static const struct gs_metric_desc amd_pcie_bw = {"gpu.pcie_bw_bytes_s", "B/s", GS_GAUGE,
                                                  "AMD: PCIe bandwidth in use, both directions (firmware metrics)"};

struct amd_gpu {
  uint32_t dv;  /* ROCm SMI's device index */
  unsigned gpu; /* gpuscope's index: after the NVIDIA GPUs */
  char label[24];
  char name[96];
  int sid[M_COUNT];
  int temp_sid[3], pcie_bw_sid;
  unsigned char temp_off[3], ecc_off;
  struct rocm_smi_metrics prev; /* the last metrics table read (its residencies), prev.layout 0: none */
  unsigned long long throttle_prev;
  int throttle_valid;
  unsigned char off[R_COUNT];
  struct {
    unsigned pid;
    int sid;
  } procs[PROCS_MAX];
  int nprocs;
};

struct rocm_ctx {
  struct rocm_smi_api api;
  struct gs_sink *sink;
  unsigned n;
  struct amd_gpu *g;
  unsigned long long ticks;
};

static int rc_off_code(rsmi_status_t r) {
  return r == RSMI_STATUS_NOT_SUPPORTED || r == RSMI_STATUS_PERMISSION || r == RSMI_STATUS_NOT_YET_IMPLEMENTED;
}

/* 1 when r is a reading; switches the call off for the GPU (with a note) when it never will be. */
static int rc_ok(struct rocm_ctx *c, struct amd_gpu *g, enum rcall call, rsmi_status_t r) {
  if (r == RSMI_STATUS_SUCCESS)
    return 1;
  if (rc_off_code(r)) {
    g->off[call] = 1;
    if (call != R_SOCKET_POWER) /* older libraries and MI200s answer average power instead */
      gs_sink_note(c->sink, "rocm: gpu%u: %s: %s", g->gpu, rcall_what[call], rocm_smi_api_strerror(&c->api, r));
  }
  return 0;
}

static void rc_put(struct rocm_ctx *c, struct amd_gpu *g, enum metric m, int64_t t, double v) {
  if (!isfinite(v))
    return;
  if (g->sid[m] < 0)
    g->sid[m] = gs_sink_series(c->sink, "nvml", nv_metrics[m].name, g->label, nv_metrics[m].unit, nv_metrics[m].kind);
  if (g->sid[m] >= 0)
    gs_sink_put(c->sink, g->sid[m], t, v);
}

/* Calls fn args when the library has fn and the call is on for g; 1 when it gave a reading. */
#define RCALL(call, fn, args) (!g->off[call] && c->api.fn && rc_ok(c, g, call, c->api.fn args))

static void rc_power(struct rocm_ctx *c, struct amd_gpu *g, int64_t t) {
  uint64_t u = 0, stamp = 0;
  float res = 0;
  /* MI300 reports its socket power; rsmi_dev_power_ave_get answers NOT_SUPPORTED there. */
  if (RCALL(R_SOCKET_POWER, rsmi_dev_current_socket_power_get, (g->dv, &u)))
    rc_put(c, g, M_POWER, t, (double)u / 1e6);
  else if ((g->off[R_SOCKET_POWER] || !c->api.rsmi_dev_current_socket_power_get) &&
           RCALL(R_POWER, rsmi_dev_power_ave_get, (g->dv, 0, &u)))
    rc_put(c, g, M_POWER, t, (double)u / 1e6);
  if (RCALL(R_CAP, rsmi_dev_power_cap_get, (g->dv, 0, &u)))
    rc_put(c, g, M_POWER_LIMIT, t, (double)u / 1e6);
  if (RCALL(R_ENERGY, rsmi_dev_energy_count_get, (g->dv, &u, &res, &stamp)) && res > 0)
    rc_put(c, g, M_ENERGY, t, (double)u * res / 1e6); /* counter x resolution: µJ */
}

/* The three sensors; gpu.temp_c is the edge where the GPU has one (MI200), else the junction (MI300
 * has no edge sensor). A sensor that answers NOT_SUPPORTED is not asked again. */
static void rc_temps(struct rocm_ctx *c, struct amd_gpu *g, int64_t t) {
  double v[3] = {NAN, NAN, NAN};
  if (!c->api.rsmi_dev_temp_metric_get)
    return;
  for (int k = 0; k < 3; k++) {
    int64_t mc;
    if (g->temp_off[k])
      continue;
    rsmi_status_t r = c->api.rsmi_dev_temp_metric_get(g->dv, (uint32_t)temp_sensor[k], RSMI_TEMP_CURRENT, &mc);
    g->temp_off[k] = rc_off_code(r);
    if (r != RSMI_STATUS_SUCCESS)
      continue;
    v[k] = mc / 1000.0;
    if (g->temp_sid[k] < 0)
      g->temp_sid[k] =
          gs_sink_series(c->sink, "nvml", amd_temps[k].name, g->label, amd_temps[k].unit, amd_temps[k].kind);
    if (g->temp_sid[k] >= 0)
      gs_sink_put(c->sink, g->temp_sid[k], t, v[k]);
  }
  rc_put(c, g, M_TEMP, t, isfinite(v[0]) ? v[0] : v[1]);
}

/* ECC (the UMC block: HBM) as gpu.ecc_sbe_volatile / gpu.ecc_dbe_volatile, every ECC_EVERY ticks. */
static void rc_ecc(struct rocm_ctx *c, struct amd_gpu *g, int64_t t) {
  rsmi_error_count_t ec;
  if (g->ecc_off || !c->api.rsmi_dev_ecc_count_get || c->ticks % ECC_EVERY)
    return;
  rsmi_status_t r = c->api.rsmi_dev_ecc_count_get(g->dv, RSMI_GPU_BLOCK_UMC, &ec);
  g->ecc_off = rc_off_code(r);
  if (r != RSMI_STATUS_SUCCESS)
    return;
  rc_put(c, g, M_ECC_SBE_VOL, t, (double)ec.correctable_err);
  rc_put(c, g, M_ECC_DBE_VOL, t, (double)ec.uncorrectable_err);
}

static void rc_readings(struct rocm_ctx *c, struct amd_gpu *g, int64_t t) {
  uint32_t p;
  uint64_t u, total, sent, recv, pkt;
  unsigned char freq[ROCM_SMI_FREQ_BUF];
  if (RCALL(R_BUSY, rsmi_dev_busy_percent_get, (g->dv, &p)))
    rc_put(c, g, M_UTIL, t, p);
  if (RCALL(R_MEM_BUSY, rsmi_dev_memory_busy_percent_get, (g->dv, &p)))
    rc_put(c, g, M_MEM_UTIL, t, p);
  if (RCALL(R_MEM, rsmi_dev_memory_usage_get, (g->dv, RSMI_MEM_TYPE_VRAM, &u)) &&
      c->api.rsmi_dev_memory_total_get(g->dv, RSMI_MEM_TYPE_VRAM, &total) == RSMI_STATUS_SUCCESS) {
    rc_put(c, g, M_MEM_USED, t, (double)u);
    rc_put(c, g, M_MEM_FREE, t, total >= u ? (double)(total - u) : NAN);
    rc_put(c, g, M_MEM_TOTAL, t, (double)total);
  }
  rc_power(c, g, t);
  rc_temps(c, g, t);
  memset(freq, 0, sizeof freq);
  if (RCALL(R_CLOCK, rsmi_dev_gpu_clk_freq_get, (g->dv, RSMI_CLK_TYPE_SYS, (rsmi_frequencies_t *)freq))) {
    double max, mhz = rocm_smi_api_clock_mhz(freq, &max);
    rc_put(c, g, M_SM_CLOCK, t, mhz >= 0 ? mhz : NAN);
    rc_put(c, g, M_SM_CLOCK_MAX, t, max > 0 ? max : NAN); /* what the throttled rule compares against */
  }
  /* Packets per second in each direction times the largest payload: the bound ROCm SMI gives. */
  if (RCALL(R_PCIE, rsmi_dev_pci_throughput_get, (g->dv, &sent, &recv, &pkt))) {
    rc_put(c, g, M_PCIE_TX, t, (double)sent * (double)pkt);
    rc_put(c, g, M_PCIE_RX, t, (double)recv * (double)pkt);
  }
}

/* gpu.throttle_reasons in NVML's bits, and throttle_start/stop events for each reason that changed,
 * as the NVML collector writes them (nvml.c's throttle_tick), so the doctor reads both vendors alike. */
static void rc_throttle(struct rocm_ctx *c, struct amd_gpu *g, int64_t t, unsigned long long mask) {
  rc_put(c, g, M_THROTTLE, t, (double)mask);
  unsigned long long changed = (g->throttle_valid ? g->throttle_prev : 0) ^ mask;
  for (int b = 0; b < 64 && changed; b++) {
    unsigned long long bit = 1ULL << b;
    if (!(changed & bit))
      continue;
    changed &= ~bit;
    const struct gs_clock_reason *r = gs_clock_reason_of_bit(bit);
    gs_sink_event(c->sink, t, (mask & bit) ? "throttle_start" : "throttle_stop", r ? r->name : "", NAN, g->label, "");
  }
  g->throttle_prev = mask;
  g->throttle_valid = 1;
}

/* The firmware's metrics table (rsmi_dev_gpu_metrics_info_get): throttling, from indep_throttle_status
 * (v1.3: MI200) or the residencies (v1.6: MI300); the PCIe bandwidth (v1.4 on); the activity averages
 * where the busy-percent calls give none. What the table's version lacks, or the firmware fills with
 * all ones, is not written. */
static void rc_metrics(struct rocm_ctx *c, struct amd_gpu *g, int64_t t) {
  unsigned char buf[ROCM_SMI_METRICS_BUF];
  struct rocm_smi_metrics m;
  if (g->off[R_METRICS] || !c->api.rsmi_dev_gpu_metrics_info_get)
    return;
  rocm_smi_api_metrics_prepare(buf);
  if (!RCALL(R_METRICS, rsmi_dev_gpu_metrics_info_get, (g->dv, (rsmi_gpu_metrics_t *)buf)))
    return;
  if (rocm_smi_api_metrics(buf, &m)) {
    g->off[R_METRICS] = 1;
    gs_sink_note(c->sink, "rocm: gpu%u: GPU metrics table of format %u: not read", g->gpu, buf[2]);
    return;
  }
  if (g->off[R_BUSY] || !c->api.rsmi_dev_busy_percent_get)
    rc_put(c, g, M_UTIL, t, m.gfx_pct);
  if (g->off[R_MEM_BUSY] || !c->api.rsmi_dev_memory_busy_percent_get)
    rc_put(c, g, M_MEM_UTIL, t, m.umc_pct);
  if (isfinite(m.pcie_gbs)) {
    if (g->pcie_bw_sid < 0)
      g->pcie_bw_sid = gs_sink_series(c->sink, "nvml", amd_pcie_bw.name, g->label, amd_pcie_bw.unit, amd_pcie_bw.kind);
    if (g->pcie_bw_sid >= 0)
      gs_sink_put(c->sink, g->pcie_bw_sid, t, m.pcie_gbs * 1e9);
  }
  long long mask = m.has_indep      ? (long long)rocm_smi_api_indep_reasons(m.indep)
                   : g->prev.layout ? rocm_smi_api_resid_reasons(&g->prev, &m)
                                    : -1;
  if (mask >= 0)
    rc_throttle(c, g, t, (unsigned long long)mask);
  g->prev = m;
}

/* gpu.proc_mem_bytes{gpu=N,pid=P}: each compute process's VRAM on each GPU it uses (ROCm SMI gives a
 * process's total; one on several GPUs is given an even share of it on each, docs/amd.md). */
static void rc_proc_put(struct rocm_ctx *c, struct amd_gpu *g, unsigned pid, int64_t t, double v) {
  int i;
  for (i = 0; i < g->nprocs && g->procs[i].pid != pid; i++)
    ;
  if (i == g->nprocs) {
    if (g->nprocs == PROCS_MAX)
      return;
    char lab[48];
    snprintf(lab, sizeof lab, "%s,pid=%u", g->label, pid);
    const struct gs_metric_desc *d = &nv_metrics[M_PROC_MEM];
    g->procs[i].pid = pid;
    g->procs[i].sid = gs_sink_series(c->sink, "nvml", d->name, lab, d->unit, d->kind);
    g->nprocs++;
  }
  if (g->procs[i].sid >= 0)
    gs_sink_put(c->sink, g->procs[i].sid, t, v);
}

static void rc_procs(struct rocm_ctx *c, int64_t t) {
  const struct rocm_smi_api *a = &c->api;
  rsmi_process_info_t procs[PROCS_MAX];
  uint32_t n = PROCS_MAX;
  if (!a->rsmi_compute_process_info_get || !a->rsmi_compute_process_gpus_get)
    return;
  rsmi_status_t r = a->rsmi_compute_process_info_get(procs, &n);
  if ((r != RSMI_STATUS_SUCCESS && r != RSMI_STATUS_INSUFFICIENT_SIZE) || n > PROCS_MAX)
    n = r == RSMI_STATUS_INSUFFICIENT_SIZE ? PROCS_MAX : 0;
  for (uint32_t i = 0; i < n; i++) {
    rsmi_process_info_t p = procs[i];
    uint32_t dv[16], nd = 16;
    if (a->rsmi_compute_process_info_by_pid_get)
      a->rsmi_compute_process_info_by_pid_get(procs[i].process_id, &p);
    if (a->rsmi_compute_process_gpus_get(p.process_id, dv, &nd) != RSMI_STATUS_SUCCESS || !nd || nd > 16)
      continue;
    for (uint32_t k = 0; k < nd; k++)
      for (unsigned j = 0; j < c->n; j++)
        if (c->g[j].dv == dv[k])
          rc_proc_put(c, &c->g[j], p.process_id, t, (double)p.vram_usage / nd);
  }
}

/* The params of one GPU (none for a fact ROCm SMI does not give). */
static void rc_facts(struct rocm_ctx *c, struct amd_gpu *g) {
  const struct rocm_smi_api *a = &c->api;
  char v[128];
  uint64_t u;
  nv_param(c->sink, g->gpu, "vendor", "amd");
  if (a->rsmi_dev_name_get(g->dv, g->name, sizeof g->name) == RSMI_STATUS_SUCCESS && g->name[0])
    nv_param(c->sink, g->gpu, "name", g->name);
  else
    snprintf(g->name, sizeof g->name, "AMD GPU");
  if (a->rsmi_dev_unique_id_get && a->rsmi_dev_unique_id_get(g->dv, &u) == RSMI_STATUS_SUCCESS) {
    snprintf(v, sizeof v, "0x%016llx", (unsigned long long)u);
    nv_param(c->sink, g->gpu, "uuid", v);
  }
  if (a->rsmi_dev_pci_id_get && a->rsmi_dev_pci_id_get(g->dv, &u) == RSMI_STATUS_SUCCESS) {
    snprintf(v, sizeof v, "%04x:%02x:%02x.%x", (unsigned)(u >> 32), (unsigned)(u >> 8) & 0xff,
             (unsigned)(u >> 3) & 0x1f, (unsigned)u & 7);
    nv_param(c->sink, g->gpu, "pci_bus_id", v);
  }
  if (a->rsmi_dev_serial_number_get && a->rsmi_dev_serial_number_get(g->dv, v, sizeof v) == RSMI_STATUS_SUCCESS && v[0])
    nv_param(c->sink, g->gpu, "serial", v);
  if (a->rsmi_dev_memory_total_get(g->dv, RSMI_MEM_TYPE_VRAM, &u) == RSMI_STATUS_SUCCESS) {
    snprintf(v, sizeof v, "%llu", (unsigned long long)u);
    nv_param(c->sink, g->gpu, "mem_total_bytes", v);
  }
  if (rocm_smi_api_cdna(g->name, v, sizeof v))
    nv_param(c->sink, g->gpu, "gfx", v);
}

static void rc_free(struct rocm_ctx *c) {
  if (!c)
    return;
  rocm_smi_api_close(&c->api);
  free(c->g);
  free(c);
}

/* Opens ROCm SMI and records the GPUs, numbered after the NVIDIA GPUs the NVML collector counted
 * (its gpu.count param, written in its open). Returns NULL with a reason when there is no library or
 * no GPU. */
static void *rocm_open(const struct collector_opts *opts, struct gs_sink *sink, char *err, size_t errlen) {
  (void)opts;
  struct rocm_ctx *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (rocm_smi_api_open(&c->api, NULL, err, errlen)) {
    const char *lib = getenv("GPUSCOPE_ROCM_SMI_LIB");
    if (!lib || !*lib) /* no AMD driver or library: nothing changes, not even a note */
      err[0] = 0;
    free(c);
    return NULL;
  }
  uint32_t n = 0;
  rsmi_status_t r = c->api.rsmi_num_monitor_devices(&n);
  if (r != RSMI_STATUS_SUCCESS || n == 0 || !(c->g = calloc(n, sizeof *c->g))) {
    snprintf(err, errlen, r != RSMI_STATUS_SUCCESS ? "rsmi_num_monitor_devices: %s" : "%s",
             r != RSMI_STATUS_SUCCESS ? rocm_smi_api_strerror(&c->api, r)
             : n                      ? "out of memory"
                                      : "no AMD GPU");
    rc_free(c);
    return NULL;
  }
  char v[32];
  unsigned first = gs_sink_param_get(sink, "gpu.count", v, sizeof v) ? (unsigned)strtoul(v, NULL, 10) : 0;
  c->sink = sink;
  c->n = n;
  snprintf(v, sizeof v, "%u", first + n);
  gs_sink_param(sink, "gpu.count", v);
  gs_sink_param(sink, "rocm.library", c->api.path);
  for (unsigned i = 0; i < n; i++) {
    struct amd_gpu *g = &c->g[i];
    g->dv = i;
    g->gpu = first + i;
    snprintf(g->label, sizeof g->label, "gpu=%u", g->gpu);
    for (int m = 0; m < M_COUNT; m++)
      g->sid[m] = -1;
    g->temp_sid[0] = g->temp_sid[1] = g->temp_sid[2] = g->pcie_bw_sid = -1;
    rc_facts(c, g);
  }
  return c;
}

static int rocm_sample(void *ctx, struct gs_sink *sink, int64_t now_ns) {
  struct rocm_ctx *c = ctx;
  (void)sink;
  for (unsigned i = 0; i < c->n; i++) {
    rc_readings(c, &c->g[i], now_ns);
    rc_metrics(c, &c->g[i], now_ns);
    rc_ecc(c, &c->g[i], now_ns);
  }
  rc_procs(c, now_ns);
  c->ticks++;
  return GS_COLLECT_OK;
}

static void rocm_summary(void *ctx, FILE *out) {
  struct rocm_ctx *c = ctx;
  if (c)
    fprintf(out, "AMD GPUs: %u \xc3\x97 %s (ROCm SMI, %s)\n", c->n, c->g[0].name, c->api.path);
}

static void rocm_close(void *ctx) {
  struct rocm_ctx *c = ctx;
  if (!c)
    return;
  char v[32];
  snprintf(v, sizeof v, "%llu", c->ticks);
  gs_sink_param(c->sink, "rocm.ticks", v);
  rc_free(c);
}

const struct collector collector_rocm = {
    .version = 1,
    .name = "rocm",
    .metrics = nv_metrics,
    .n_metrics = M_COUNT,
    .open = rocm_open,
    .sample = rocm_sample,
    .summary = rocm_summary,
    .close = rocm_close,
};
