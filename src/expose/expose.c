/* expose: renders the sink's latest values as Prometheus / OpenMetrics text (see expose.h).
 * One pass over the sink under its lock copies (family, labels, value) rows; the rows are sorted by
 * family so each family's HELP and TYPE come once, then written. The DCGM table maps gpuscope's NVML
 * series to dcgm-exporter's fields with their units (MiB, mJ) and scales (PROF fields 0-1). */
#include "expose/expose.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/collect.h"
#include "serve/serve.h"

#define MIB (1024.0 * 1024.0)

/* A series not put for this long has no line (an exited process, a GPU that stopped answering). */
static int64_t stale_ns(int64_t interval_ns) {
  int64_t s = 5 * interval_ns;
  return s < 10 * GS_NS_PER_S ? 10 * GS_NS_PER_S : s;
}

/* dcgm-exporter's name for each of gpuscope's NVML series. The PCIe fields come from GPM where the
 * GPU has it (DCGM's PROF fields are profiler counters too), else from NVML's throughput reading. */
static const struct dcgm_map {
  const char *series, *dcgm, *type, *help;
  double scale;
  int fallback; /* 1: used only when the GPU has no series of the same dcgm name from GPM */
} DCGM[] = {
    {"gpu.util_pct", "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", 1, 0},
    {"gpu.mem_util_pct", "DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", 1, 0},
    {"gpu.mem_used_bytes", "DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", 1 / MIB, 0},
    {"gpu.mem_free_bytes", "DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", 1 / MIB, 0},
    {"gpu.power_w", "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", 1, 0},
    {"gpu.energy_j", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
     1000, 0},
    {"gpu.temp_c", "DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", 1, 0},
    {"gpu.sm_clock_mhz", "DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", 1, 0},
    {"gpu.mem_clock_mhz", "DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", 1, 0},
    {"gpu.throttle_reasons", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask).", 1,
     0},
    {"gpu.gr_active_pct", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
     0.01, 0},
    {"gpu.sm_active_pct", "DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned.",
     0.01, 0},
    {"gpu.sm_occupancy_pct", "DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM.",
     0.01, 0},
    {"gpu.tensor_active_pct", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
     "Ratio of cycles the tensor (HMMA) pipe is active.", 0.01, 0},
    {"gpu.dram_active_pct", "DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
     "Ratio of cycles the device memory interface is active sending or receiving data.", 0.01, 0},
    {"gpu.fp16_active_pct", "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "gauge", "Ratio of cycles the fp16 pipes are active.",
     0.01, 0},
    {"gpu.fp32_active_pct", "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "gauge", "Ratio of cycles the fp32 pipes are active.",
     0.01, 0},
    {"gpu.fp64_active_pct", "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "gauge", "Ratio of cycles the fp64 pipes are active.",
     0.01, 0},
    {"gpu.pcie_tx_gpm_bytes_s", "DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
     "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in "
     "bytes per second.",
     1, 0},
    {"gpu.pcie_rx_gpm_bytes_s", "DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
     "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes "
     "per second.",
     1, 0},
    {"gpu.pcie_tx_bytes_s", "DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", NULL, 1, 1},
    {"gpu.pcie_rx_bytes_s", "DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", NULL, 1, 1},
    {"gpu.nvlink_rx_bytes_s", "DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge", "The rate of data received over NVLink.", 1, 0},
    {"gpu.nvlink_tx_bytes_s", "DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge", "The rate of data transmitted over NVLink.", 1,
     0},
    /* health (collect/nvml_health.c); DCGM_EXP_XID_ERRORS_COUNT is health_row's */
    {"gpu.xid", "DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", 1, 0},
    {"gpu.ecc_sbe_volatile", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter",
     "Total number of single-bit volatile ECC errors.", 1, 0},
    {"gpu.ecc_dbe_volatile", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
     "Total number of double-bit volatile ECC errors.", 1, 0},
    {"gpu.ecc_sbe_aggregate", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter",
     "Total number of single-bit persistent ECC errors.", 1, 0},
    {"gpu.ecc_dbe_aggregate", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter",
     "Total number of double-bit persistent ECC errors.", 1, 0},
    {"gpu.remapped_rows_correctable", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
     "Number of remapped rows for correctable errors", 1, 0},
    {"gpu.remapped_rows_uncorrectable", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
     "Number of remapped rows for uncorrectable errors", 1, 0},
    {"gpu.remap_failure", "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", 1, 0},
    {"gpu.remap_pending", "DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether a row remap waits for a GPU reset", 1, 0},
    {"gpu.retired_pages_sbe", "DCGM_FI_DEV_RETIRED_SBE", "counter",
     "Total number of retired pages due to single-bit errors.", 1, 0},
    {"gpu.retired_pages_dbe", "DCGM_FI_DEV_RETIRED_DBE", "counter",
     "Total number of retired pages due to double-bit errors.", 1, 0},
    {"gpu.retired_pages_pending", "DCGM_FI_DEV_RETIRED_PENDING", "counter", "Total number of pages pending retirement.",
     1, 0},
    {"gpu.pcie_replays", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", 1, 0},
    {"gpu.nvlink_replay_errors", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter",
     "Total number of NVLink retries.", 1, 0},
    {"gpu.nvlink_recovery_errors", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter",
     "Total number of NVLink recovery errors.", 1, 0},
    {"gpu.nvlink_crc_flit_errors", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter",
     "Total number of NVLink flow-control CRC errors.", 1, 0},
    {"gpu.nvlink_crc_data_errors", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter",
     "Total number of NVLink data CRC errors.", 1, 0},
};
enum { NDCGM = sizeof DCGM / sizeof *DCGM };

/* AMD's device-metrics-exporter's names (ROCm/device-metrics-exporter, docs/configuration/
 * metricslist.md: the field names lower-cased, as it exposes them) for the series of an AMD GPU
 * (param gpu.N.vendor=amd), so AMD's Grafana dashboards read them unchanged (a series may feed
 * several families, as the power feeds gpu_package_power and gpu_power_usage); every one a gauge, as
 * the exporter declares them, but for the ECC totals, counters
 * (their _total names ask for it). A series without an entry keeps gpuscope's own name (never DCGM's). */
static const struct amd_map {
  const char *series, *fam, *type, *help, *label; /* label: a fixed label the exporter puts ("" none) */
  double scale;
} AMD[] = {
    {"gpu.util_pct", "gpu_gfx_activity", "gauge", "Graphics engine usage in Percentage (0-100)", "", 1},
    {"gpu.mem_util_pct", "gpu_umc_activity", "gauge", "Memory engine usage in Percentage (0-100)", "", 1},
    {"gpu.mem_used_bytes", "gpu_used_vram", "gauge", "Total VRAM memory used in MB.", "", 1 / MIB},
    {"gpu.mem_free_bytes", "gpu_free_vram", "gauge", "Total VRAM memory free in MB.", "", 1 / MIB},
    {"gpu.mem_total_bytes", "gpu_total_vram", "gauge", "Total VRAM available in MB.", "", 1 / MIB},
    {"gpu.power_w", "gpu_package_power", "gauge", "Current socket power in Watts", "", 1},
    {"gpu.power_w", "gpu_power_usage", "gauge", "GPU power usage in Watts", "", 1},
    /* the firmware's instantaneous bandwidth (GB/s in the metrics table) in the exporter's Mb/s */
    {"gpu.pcie_bw_bytes_s", "pcie_bandwidth", "gauge", "Current instantaneous bandwidth usage in Mb/s", "", 8e-6},
    {"gpu.energy_j", "gpu_energy_consumed", "gauge", "Accumulated energy consumed by the GPU in uJ", "", 1e6},
    {"gpu.temp_edge_c", "gpu_edge_temperature", "gauge", "Edge temperature value in Celsius.", "", 1},
    {"gpu.temp_junction_c", "gpu_junction_temperature", "gauge", "Hotspot (aka Junction) temperature value in Celsius.",
     "", 1},
    {"gpu.temp_mem_c", "gpu_memory_temperature", "gauge", "Current memory temperature in Celsius", "", 1},
    {"gpu.sm_clock_mhz", "gpu_clock", "gauge", "List of current GPU clock frequencies in MHz", "clock_type=\"system\"",
     1},
    {"gpu.ecc_sbe_volatile", "gpu_ecc_correct_total", "counter", "Total Correctable error count", "", 1},
    {"gpu.ecc_dbe_volatile", "gpu_ecc_uncorrect_total", "counter", "Total Uncorrectable error count", "", 1},
};
enum { NAMD = sizeof AMD / sizeof *AMD };

enum { MAX_GPUS = 64 };

/* One line of the exposition. */
struct row {
  char fam[96];
  const char *type, *help; /* static strings */
  char labels[640];        /* without braces; "" for none */
  double v;
  int order; /* the sink's series id, so lines keep a stable order inside a family */
  int fallback;
  int gpu;
  int gi;    /* a MIG instance's GPU-instance id, -1 for a whole GPU */
  int ratio; /* a percentage series exported as a ratio: its HELP says so */
};

struct gpu_labels {
  int known;
  int vendor_known, amd; /* amd: param gpu.N.vendor=amd (AMD's exporter's names and labels) */
  int amd_id;            /* its index among the AMD GPUs: the exporter's gpu_id */
  char text[512];        /* gpu="0",UUID="...",... */
  size_t head;           /* length of text up to modelName: a MIG instance's labels go after it */
  char work[640];        /* the workload's labels (workload_labels), as of the render at work_at */
  int64_t work_at;
};

struct expose {
  struct gs_sink *sink;
  struct expose_opts o;
  char host[256];
  char driver[64];
  struct gpu_labels gpus[MAX_GPUS];
  pthread_mutex_t mu;        /* rows, findings, the shared render */
  pthread_mutex_t render_mu; /* one render at a time: the scrapes of one tick wait for it and share it */
  struct row *rows;
  size_t nrows, caprows;
  int64_t now, stale;
  struct store_finding *findings;
  size_t nfindings;
  /* The render shared by the scrapes of one tick. */
  char *cache[2];
  size_t cache_len[2];
  int64_t cache_tick[2];
  struct serve_endpoint *ep;
};

struct expose *expose_new(struct gs_sink *sink, const struct expose_opts *o) {
  struct expose *m = calloc(1, sizeof *m);
  if (!m)
    return NULL;
  m->sink = sink;
  m->o = *o;
  if (!m->o.host_label || !*m->o.host_label)
    m->o.host_label = "hostname";
  if (m->o.interval_ns <= 0)
    m->o.interval_ns = GS_NS_PER_S;
  if (gethostname(m->host, sizeof m->host - 1))
    m->host[0] = 0;
  m->cache_tick[0] = m->cache_tick[1] = -1;
  pthread_mutex_init(&m->mu, NULL);
  pthread_mutex_init(&m->render_mu, NULL);
  return m;
}

void expose_free(struct expose *m) {
  if (!m)
    return;
  expose_stop_listen(m);
  free(m->rows);
  free(m->findings);
  free(m->cache[0]), free(m->cache[1]);
  pthread_mutex_destroy(&m->mu);
  pthread_mutex_destroy(&m->render_mu);
  free(m);
}

/* ---- text pieces ---- */

/* A label value as the exposition format wants it — the one sanitiser every label value goes
 * through (label_add): backslash, double quote and newline escaped; bytes that are not UTF-8 (a host
 * name or a GPU's model name is bytes from the kernel or the driver, not checked text) and other
 * control characters become U+FFFD, so promtool and Prometheus never reject the page for one label;
 * a character is never cut at the end of the buffer. Returns the new length (out NUL-terminated). */
static size_t esc(char *out, size_t n, size_t off, const char *v, size_t vlen) {
  for (size_t i = 0; i < vlen;) {
    uint32_t c;
    size_t k = gs_utf8_next(v + i, &c);
    if (!k)
      break;
    if (k > vlen - i) /* a sequence running past the value is not the value's */
      c = 0xfffd, k = 1;
    const char *put = v + i;
    size_t m = k;
    if (c == '\\' || c == '"')
      put = c == '"' ? "\\\"" : "\\\\", m = 2;
    else if (c == '\n')
      put = "\\n", m = 2;
    else if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == 0xfffd)
      put = "\xef\xbf\xbd", m = 3; /* U+FFFD */
    if (off + m + 1 > n)
      break;
    memcpy(out + off, put, m);
    off += m;
    i += k;
  }
  out[off] = 0;
  return off;
}

/* Appends name="value" (name made a valid label name) to a label list. */
static void label_add(char *out, size_t n, const char *name, size_t nlen, const char *v, size_t vlen) {
  size_t off = strlen(out);
  if (off + nlen + 8 >= n)
    return;
  if (off)
    out[off++] = ',';
  for (size_t i = 0; i < nlen; i++) {
    char c = name[i];
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (i && c >= '0' && c <= '9');
    out[off++] = ok ? c : '_';
  }
  out[off++] = '=';
  out[off++] = '"';
  off = esc(out, n - 1, off, v, vlen);
  if (off + 1 < n)
    out[off++] = '"', out[off] = 0;
}

/* "k=v,k2=v2" (the sink's labels) as Prometheus labels; "gpu=N" gives *gpu = N. */
static void labels_from_sink(char *out, size_t n, const char *labels, int *gpu) {
  *gpu = -1;
  for (const char *p = labels; *p;) {
    const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
    const char *eq = memchr(p, '=', (size_t)(end - p));
    if (eq && eq > p) {
      label_add(out, n, p, (size_t)(eq - p), eq + 1, (size_t)(end - eq - 1));
      if (eq - p == 3 && !strncmp(p, "gpu", 3))
        *gpu = atoi(eq + 1);
    }
    p = comma ? comma + 1 : end;
  }
}

/* Which GPUs are AMD's (param gpu.N.vendor, written with the GPU's other params at the collector's
 * open): read before each pass over the sink (whose lock the pass holds), until every GPU of
 * gpu.count has its vendor known. */
static void vendors_read(struct expose *m) {
  char v[32], key[64];
  if (!gs_sink_param_get(m->sink, "gpu.count", v, sizeof v))
    return;
  int n = atoi(v), amd = 0;
  for (int i = 0; i < n && i < MAX_GPUS; i++) {
    struct gpu_labels *g = &m->gpus[i];
    if (!g->vendor_known) {
      snprintf(key, sizeof key, "gpu.%d.vendor", i);
      g->amd = gs_sink_param_get(m->sink, key, v, sizeof v) && !strcmp(v, "amd");
      snprintf(key, sizeof key, "gpu.%d.name", i);
      g->vendor_known = g->amd || gs_sink_param_get(m->sink, key, v, sizeof v);
    }
    if (g->amd)
      g->amd_id = amd++;
  }
}

/* The labels AMD's exporter puts on every GPU line: gpu_id, gpu_uuid, serial_number, card_model,
 * hostname. The exporter's card_model is the board's part number where it has one, else the card
 * series (the marketing name); ROCm SMI gives no part number, so it is the name here: the exporter's
 * own fallback (docs/amd.md). */
static void amd_labels(struct expose *m, int gpu, struct gpu_labels *g) {
  static const char *const keys[][2] = {{"uuid", "gpu_uuid"}, {"serial", "serial_number"}, {"name", "card_model"}};
  char key[64], v[256];
  snprintf(v, sizeof v, "%d", g->amd_id);
  label_add(g->text, sizeof g->text, "gpu_id", 6, v, strlen(v));
  for (size_t i = 0; i < 3; i++) {
    snprintf(key, sizeof key, "gpu.%d.%s", gpu, keys[i][0]);
    if (gs_sink_param_get(m->sink, key, v, sizeof v))
      label_add(g->text, sizeof g->text, keys[i][1], strlen(keys[i][1]), v, strlen(v));
  }
  g->head = strlen(g->text);
  if (m->host[0])
    label_add(g->text, sizeof g->text, m->o.host_label, strlen(m->o.host_label), m->host, strlen(m->host));
  g->known = 1;
}

/* The labels dcgm-exporter puts on every GPU line, from the params the NVML collector recorded (an
 * AMD GPU's: amd_labels). */
static const char *gpu_labels(struct expose *m, int gpu) {
  if (gpu < 0 || gpu >= MAX_GPUS)
    return "";
  struct gpu_labels *g = &m->gpus[gpu];
  if (g->known)
    return g->text;
  if (g->amd) {
    g->text[0] = 0;
    amd_labels(m, gpu, g);
    return g->text;
  }
  char key[64], v[256], idx[16];
  g->text[0] = 0;
  snprintf(idx, sizeof idx, "%d", gpu);
  label_add(g->text, sizeof g->text, "gpu", 3, idx, strlen(idx));
  static const char *const keys[][2] = {{"uuid", "UUID"}, {"pci_bus_id", "pci_bus_id"}};
  for (size_t i = 0; i < 2; i++) {
    snprintf(key, sizeof key, "gpu.%d.%s", gpu, keys[i][0]);
    if (gs_sink_param_get(m->sink, key, v, sizeof v))
      label_add(g->text, sizeof g->text, keys[i][1], strlen(keys[i][1]), v, strlen(v));
  }
  snprintf(v, sizeof v, "nvidia%d", gpu);
  label_add(g->text, sizeof g->text, "device", 6, v, strlen(v));
  snprintf(key, sizeof key, "gpu.%d.name", gpu);
  if (gs_sink_param_get(m->sink, key, v, sizeof v))
    label_add(g->text, sizeof g->text, "modelName", 9, v, strlen(v));
  g->head = strlen(g->text);
  if (m->host[0])
    label_add(g->text, sizeof g->text, m->o.host_label, strlen(m->o.host_label), m->host, strlen(m->host));
  if (gs_sink_param_get(m->sink, "nvml.driver_version", v, sizeof v))
    label_add(g->text, sizeof g->text, "DCGM_FI_DRIVER_VERSION", 22, v, strlen(v));
  /* The params come with the collector's open: until then, try again next scrape. */
  snprintf(key, sizeof key, "gpu.%d.uuid", gpu);
  g->known = gs_sink_param_get(m->sink, key, v, sizeof v);
  return g->text;
}

/* The labels of the work on a GPU, as dcgm-exporter names them: hpc_job (Slurm), namespace, pod,
 * container (Kubernetes), from the params the owners collector keeps (collect/gpu_owners.c; "" when
 * the work is gone, so a finished job's labels leave the page). Read once per render. */
static const char *workload_labels(struct expose *m, int gpu) {
  static const char *const keys[] = {"hpc_job", "namespace", "pod", "container"};
  if (gpu < 0 || gpu >= MAX_GPUS)
    return "";
  struct gpu_labels *g = &m->gpus[gpu];
  if (g->work_at == m->now && m->now)
    return g->work;
  char key[64], v[256];
  g->work[0] = 0, g->work_at = m->now;
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
    snprintf(key, sizeof key, "gpu.%d.%s", gpu, keys[i]);
    if (gs_sink_param_get(m->sink, key, v, sizeof v) && v[0])
      label_add(g->work, sizeof g->work, keys[i], strlen(keys[i]), v, strlen(v));
  }
  return g->work;
}

/* gpuscope's own name for a series: gpuscope_ + the name with dots as underscores, a percentage as a
 * ratio (scale 0.01) and units spelled as Prometheus does. */
static double own_name(char *out, size_t n, const char *prefix, const char *name, size_t len) {
  double scale = 1;
  size_t off = (size_t)snprintf(out, n, "%s", prefix);
  char base[96];
  if (len >= sizeof base)
    len = sizeof base - 1;
  memcpy(base, name, len);
  base[len] = 0;
  static const struct {
    const char *suffix, *prom;
    double scale;
  } units[] = {{"_pct", "_ratio", 0.01},
               {"_bytes_s", "_bytes_per_second", 1},
               {"_ops_s", "_ops_per_second", 1},
               {"_s", "_seconds", 1},
               {"_mhz", "_hertz", 1e6},
               {"_w", "_watts", 1},
               {"_j", "_joules", 1},
               {"_c", "_celsius", 1}};
  const char *tail = "";
  for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
    size_t sl = strlen(units[i].suffix);
    if (len > sl && !strcmp(base + len - sl, units[i].suffix)) {
      base[len - sl] = 0;
      tail = units[i].prom;
      scale = units[i].scale;
      break;
    }
  }
  for (const char *p = base; *p && off + 1 < n; p++) {
    char c = *p;
    int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    out[off++] = ok ? c : '_';
  }
  out[off] = 0;
  snprintf(out + off, n - off, "%s", tail);
  return scale;
}

/* HELP text for a gpuscope series: the collector's description when it has one. */
static const char *own_help(const char *name, size_t len) {
  for (size_t c = 0; collect_registry[c]; c++)
    for (size_t i = 0; i < collect_registry[c]->n_metrics; i++) {
      const char *d = collect_registry[c]->metrics[i].name;
      if (strlen(d) == len && !strncmp(d, name, len))
        return collect_registry[c]->metrics[i].help;
    }
  return NULL;
}

/* v in the exported unit: a scale below 1 divides (80 % / 100 is 0.8 exactly, 80 * 0.01 is not). */
static double scaled(double v, double scale) {
  return scale < 1 ? v / (1 / scale) : v * scale;
}

static struct row *row_new(struct expose *m) {
  if (m->nrows == m->caprows) {
    size_t cap = m->caprows ? 2 * m->caprows : 256;
    struct row *r = realloc(m->rows, cap * sizeof *r);
    if (!r)
      return NULL;
    m->rows = r, m->caprows = cap;
  }
  struct row *r = &m->rows[m->nrows++];
  memset(r, 0, sizeof *r);
  r->gpu = r->gi = -1;
  return r;
}

/* A MIG instance's labels as dcgm-exporter writes them for a GPU-instance entity: its GPU's (gpu is
 * the GPU's index, UUID the GPU's UUID, ...), with GPU_I_PROFILE and GPU_I_ID after modelName. */
static const char *mig_labels(struct expose *m, int gpu, int gi, char *out, size_t n) {
  const char *gl = gpu_labels(m, gpu);
  size_t head = m->gpus[gpu].head;
  char key[64], v[64], id[16];
  snprintf(out, n, "%.*s", (int)head, gl);
  snprintf(key, sizeof key, "gpu.%d.mig.%d.profile", gpu, gi);
  if (gs_sink_param_get(m->sink, key, v, sizeof v))
    label_add(out, n, "GPU_I_PROFILE", 13, v, strlen(v));
  snprintf(id, sizeof id, "%d", gi);
  label_add(out, n, "GPU_I_ID", 8, id, strlen(id));
  size_t off = strlen(out);
  snprintf(out + off, n - off, "%s", gl + head);
  return out;
}

/* A MIG instance's series (mig.X, labels gpu=N,gi=G) under the DCGM name of the GPU's gpu.X, as
 * dcgm-exporter exports the fields DCGM measures per GPU instance. Returns 1 when mapped. */
static int mig_row(struct row *r, const char *name, size_t nlen, const char *labels, double v) {
  int gpu, gi, used = 0;
  if (sscanf(labels, "gpu=%d,gi=%d%n", &gpu, &gi, &used) != 2 || labels[used] || gpu < 0 || gpu >= MAX_GPUS)
    return 0;
  for (size_t i = 0; i < NDCGM; i++)
    if (!DCGM[i].fallback && strlen(DCGM[i].series) == nlen && !strncmp(DCGM[i].series + 4, name + 4, nlen - 4)) {
      snprintf(r->fam, sizeof r->fam, "%s", DCGM[i].dcgm);
      r->type = DCGM[i].type;
      r->help = DCGM[i].help;
      r->v = scaled(v, DCGM[i].scale);
      r->gpu = gpu;
      r->gi = gi;
      return 1;
    }
  return 0;
}

/* gpu.xid_count{gpu=N,xid=C} as dcgm-exporter's DCGM_EXP_XID_ERRORS_COUNT{xid="C"}: the Xids of one
 * code in the collector's 5-minute window. Returns 1 when r is that row. */
static int health_row(struct row *r, const char *name, size_t nlen, const char *labels, double v) {
  int gpu, used = 0;
  unsigned xid;
  if (nlen != 13 || strncmp(name, "gpu.xid_count", 13) || sscanf(labels, "gpu=%d,xid=%u%n", &gpu, &xid, &used) != 2 ||
      labels[used] || gpu < 0 || gpu >= MAX_GPUS)
    return 0;
  snprintf(r->fam, sizeof r->fam, "DCGM_EXP_XID_ERRORS_COUNT");
  r->type = "gauge";
  r->help = "Count of XID Errors within user-specified time window (see xid-count-window-size flag).";
  r->v = v;
  r->gpu = gpu;
  snprintf(r->labels, sizeof r->labels, "xid=\"%u\"", xid);
  return 1;
}

/* A series of an AMD GPU (labels exactly gpu=N) under AMD's exporter's name. Returns 1 when r is
 * that row, 2 when the series is an AMD GPU's without such a name (it keeps gpuscope's), 0 when it
 * is no AMD GPU's. */
static int amd_row(struct expose *m, struct row *r, const char *name, size_t nlen, const char *labels, double v) {
  char *end;
  long gpu = strncmp(labels, "gpu=", 4) ? -1 : strtol(labels + 4, &end, 10);
  if (gpu < 0 || gpu >= MAX_GPUS || *end || !m->gpus[gpu].amd)
    return 0;
  size_t ri = (size_t)(r - m->rows);
  int found = 0;
  for (size_t i = 0; i < NAMD; i++) {
    if (strlen(AMD[i].series) != nlen || strncmp(AMD[i].series, name, nlen))
      continue;
    struct row *x = found ? row_new(m) : &m->rows[ri];
    if (!x)
      break;
    r = &m->rows[ri]; /* row_new may have moved the rows */
    x->order = r->order;
    snprintf(x->fam, sizeof x->fam, "%s", AMD[i].fam);
    x->type = AMD[i].type;
    x->help = AMD[i].help;
    x->v = scaled(v, AMD[i].scale);
    x->gpu = (int)gpu;
    snprintf(x->labels, sizeof x->labels, "%s", AMD[i].label);
    found = 1;
  }
  return found ? 1 : 2;
}

/* ---- the pass over the sink (under the sink's lock: copies only) ---- */

struct step_last {
  double v[6]; /* n, data, h2d, compute, total, samples */
  int64_t t[6];
  char labels[128];
};

struct pass {
  struct expose *m;
  struct step_last steps[8]; /* rank 0 and 7 more */
  size_t nsteps;
};

static void step_note(struct pass *p, const char *name, size_t len, const char *labels, double v, int64_t t) {
  static const char *const names[6] = {"step.n",         "step.data_s",  "step.h2d_s",
                                       "step.compute_s", "step.total_s", "step.samples"};
  int k = -1;
  for (int i = 0; i < 6; i++)
    if (strlen(names[i]) == len && !strncmp(names[i], name, len))
      k = i;
  if (k < 0)
    return;
  size_t i = 0;
  while (i < p->nsteps && strcmp(p->steps[i].labels, labels))
    i++;
  if (i == p->nsteps) {
    if (p->nsteps == sizeof p->steps / sizeof *p->steps)
      return;
    memset(&p->steps[i], 0, sizeof p->steps[i]);
    for (int j = 0; j < 6; j++)
      p->steps[i].v[j] = NAN;
    snprintf(p->steps[i].labels, sizeof p->steps[i].labels, "%s", labels);
    p->nsteps++;
  }
  p->steps[i].v[k] = v;
  p->steps[i].t[k] = t;
}

static void each(void *user, int id, const char *source, size_t slen, const char *name, size_t nlen, const char *labels,
                 double v, int64_t t) {
  struct pass *p = user;
  struct expose *m = p->m;
  if (t > 0 && m->now - t > m->stale)
    return;
  if (slen == 6 && !strncmp(source, "client", 6)) {
    if (nlen > 5 && !strncmp(name, "step.", 5)) {
      step_note(p, name, nlen, labels, v, t);
      return;
    }
  }
  struct row *r = row_new(m);
  if (!r)
    return;
  r->order = id;
  r->v = v;
  int amd = slen == 4 && !strncmp(source, "nvml", 4) ? amd_row(m, r, name, nlen, labels, v) : 0;
  if (amd == 1)
    return;
  if (slen == 4 && !strncmp(source, "nvml", 4) && !amd) {
    if (nlen > 4 && !strncmp(name, "mig.", 4) && mig_row(r, name, nlen, labels, v))
      return;
    if (health_row(r, name, nlen, labels, v))
      return;
    for (size_t i = 0; i < NDCGM; i++)
      if (strlen(DCGM[i].series) == nlen && !strncmp(DCGM[i].series, name, nlen) && !strncmp(labels, "gpu=", 4) &&
          !strchr(labels, ',')) {
        snprintf(r->fam, sizeof r->fam, "%s", DCGM[i].dcgm);
        r->type = DCGM[i].type;
        r->help = DCGM[i].help;
        r->v = scaled(v, DCGM[i].scale);
        r->fallback = DCGM[i].fallback;
        r->gpu = strncmp(labels, "gpu=", 4) ? -1 : atoi(labels + 4);
        return;
      }
  }
  /* A client's own metric (gpuscope.log): its name is the user's, so it is a label. */
  if (slen == 6 && !strncmp(source, "client", 6)) {
    snprintf(r->fam, sizeof r->fam, "gpuscope_client_metric");
    r->type = "gauge";
    r->help = "the latest value the job logged (gpuscope.log), by name";
    label_add(r->labels, sizeof r->labels, "name", 4, name, nlen);
    int g;
    labels_from_sink(r->labels, sizeof r->labels, labels, &g);
    return;
  }
  double scale = own_name(r->fam, sizeof r->fam, "gpuscope_", name, nlen);
  r->v = scaled(v, scale);
  r->type = "gauge";
  r->help = own_help(name, nlen);
  r->ratio = scale < 1;
  int g;
  labels_from_sink(r->labels, sizeof r->labels, labels, &g);
}

static int row_cmp(const void *a, const void *b) {
  const struct row *x = a, *y = b;
  int c = strcmp(x->fam, y->fam);
  return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* A float as the exposition format spells it: integers without a fraction, others with 17 digits
 * at most (the shortest that reads back the same). */
static void put_value(FILE *out, double v) {
  char buf[40];
  if (v == floor(v) && fabs(v) < 1e15) {
    fprintf(out, "%.0f", v);
    return;
  }
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v)
    snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, out);
}

static void derived(struct expose *m, struct pass *p) {
  for (size_t i = 0; i < p->nsteps; i++) {
    struct step_last *s = &p->steps[i];
    double total = s->v[4];
    static const struct {
      int k;
      const char *fam, *help;
    } share[3] = {{1, "gpuscope_step_data_wait_ratio", "share of the latest step spent waiting for data"},
                  {2, "gpuscope_step_h2d_ratio", "share of the latest step spent copying to the GPU"},
                  {3, "gpuscope_step_compute_ratio", "share of the latest step spent computing"}};
    char lab[256] = "";
    int g;
    labels_from_sink(lab, sizeof lab, s->labels, &g);
    struct row *r;
    if (isfinite(total) && total > 0) {
      if ((r = row_new(m))) {
        snprintf(r->fam, sizeof r->fam, "gpuscope_step_seconds");
        r->type = "gauge", r->help = "duration of the latest step the job reported";
        r->v = total;
        snprintf(r->labels, sizeof r->labels, "%s", lab);
      }
      for (int j = 0; j < 3; j++)
        if (isfinite(s->v[share[j].k]) && s->t[share[j].k] == s->t[4] && (r = row_new(m))) {
          snprintf(r->fam, sizeof r->fam, "%s", share[j].fam);
          r->type = "gauge", r->help = share[j].help;
          r->v = s->v[share[j].k] / total;
          snprintf(r->labels, sizeof r->labels, "%s", lab);
        }
      if (isfinite(s->v[5]) && s->t[5] == s->t[4] && (r = row_new(m))) {
        snprintf(r->fam, sizeof r->fam, "gpuscope_samples_per_second");
        r->type = "gauge", r->help = "samples of the latest step over its duration";
        r->v = s->v[5] / total;
        snprintf(r->labels, sizeof r->labels, "%s", lab);
      }
    }
    if (isfinite(s->v[0]) && (r = row_new(m))) {
      snprintf(r->fam, sizeof r->fam, "gpuscope_step_number");
      r->type = "gauge", r->help = "the latest step number the job reported";
      r->v = s->v[0];
      snprintf(r->labels, sizeof r->labels, "%s", lab);
    }
  }
  for (size_t i = 0; i < m->nfindings; i++) {
    const struct store_finding *f = &m->findings[i];
    if (!isfinite(f->speedup))
      continue;
    struct row *r = row_new(m);
    if (!r)
      break;
    snprintf(r->fam, sizeof r->fam, "gpuscope_finding");
    r->type = "gauge";
    r->help = "a finding of the doctor: its estimated speed-up if fixed (1 = none), by rule";
    r->v = f->speedup;
    label_add(r->labels, sizeof r->labels, "rule", 4, f->rule, strlen(f->rule));
    label_add(r->labels, sizeof r->labels, "severity", 8, f->severity, strlen(f->severity));
    r->order = (int)i;
  }
}

int expose_write(struct expose *m, FILE *out, int openmetrics, int64_t now_ns) {
  pthread_mutex_lock(&m->mu);
  m->nrows = 0;
  m->now = now_ns;
  m->stale = stale_ns(m->o.interval_ns);
  struct pass p = {.m = m};
  vendors_read(m);
  gs_sink_each(m->sink, each, &p);
  derived(m, &p);
  /* GPM's PCIe wins over NVML's throughput for a GPU that has both. */
  for (size_t i = 0; i < m->nrows; i++) {
    struct row *r = &m->rows[i];
    if (!r->fallback)
      continue;
    for (size_t j = 0; j < m->nrows; j++)
      if (j != i && !m->rows[j].fallback && m->rows[j].gpu == r->gpu && m->rows[j].gi == r->gi &&
          !strcmp(m->rows[j].fam, r->fam)) {
        r->fam[0] = 0; /* dropped */
        break;
      }
  }
  if (m->nrows) /* rows is NULL before the first series */
    qsort(m->rows, m->nrows, sizeof *m->rows, row_cmp);
  const char *fam = "";
  for (size_t i = 0; i < m->nrows; i++) {
    struct row *r = &m->rows[i];
    if (!r->fam[0])
      continue;
    int is_counter = !strcmp(r->type, "counter");
    if (strcmp(fam, r->fam)) {
      fam = r->fam;
      const char *help = r->help;
      for (size_t j = i; !help && j < m->nrows && !strcmp(m->rows[j].fam, r->fam); j++)
        help = m->rows[j].help;
      if (help) {
        fprintf(out, "# HELP %s ", r->fam);
        for (const char *h = help; *h; h++)
          if (*h == '\\' || *h == '\n')
            fputs(*h == '\\' ? "\\\\" : "\\n", out);
          else
            fputc(*h, out);
        fputs(r->ratio ? " (as a ratio: 1 = 100 %)\n" : "\n", out);
      }
      /* OpenMetrics wants a counter's samples named _total: DCGM's names have no such suffix, and a
       * board queries them as they are, so there they are "unknown". */
      fprintf(out, "# TYPE %s %s\n", r->fam, openmetrics && is_counter ? "unknown" : r->type);
    }
    fputs(r->fam, out);
    char mig[640];
    const char *gl = r->gpu < 0  ? ""
                     : r->gi < 0 ? gpu_labels(m, r->gpu)
                                 : mig_labels(m, r->gpu, r->gi, mig, sizeof mig);
    const char *wl = r->gpu >= 0 && r->gi < 0 ? workload_labels(m, r->gpu) : "";
    if (*gl || r->labels[0])
      fprintf(out, "{%s%s%s%s%s}", gl, *gl && *wl ? "," : "", wl, (*gl || *wl) && r->labels[0] ? "," : "", r->labels);
    fputc(' ', out);
    put_value(out, r->v);
    fputc('\n', out);
  }
  if (openmetrics)
    fputs("# EOF\n", out);
  pthread_mutex_unlock(&m->mu);
  return ferror(out) ? GS_EIO : GS_OK;
}

void expose_set_findings(struct expose *m, const struct store_finding *f, size_t n) {
  struct store_finding *copy = n ? malloc(n * sizeof *copy) : NULL;
  if (n && !copy)
    return;
  if (n)
    memcpy(copy, f, n * sizeof *copy);
  pthread_mutex_lock(&m->mu);
  free(m->findings);
  m->findings = copy;
  m->nfindings = n;
  m->cache_tick[0] = m->cache_tick[1] = -1;
  pthread_mutex_unlock(&m->mu);
}

int expose_wants_openmetrics(const char *accept) {
  if (!accept)
    return 0;
  const char *om = strstr(accept, "application/openmetrics-text");
  if (!om)
    return 0;
  const char *txt = strstr(accept, "text/plain");
  return !txt || om < txt;
}

/* ---- the endpoint ---- */

/* Renders once per tick and format; every scrape of that tick gets a copy. */
static int scrape(void *user, const char *accept, char **body, size_t *len, const char **mime) {
  struct expose *m = user;
  int om = expose_wants_openmetrics(accept);
  int64_t now = gs_mono_ns(), tick = now / m->o.interval_ns;
  *mime =
      om ? "application/openmetrics-text; version=1.0.0; charset=utf-8" : "text/plain; version=0.0.4; charset=utf-8";
  pthread_mutex_lock(&m->render_mu);
  pthread_mutex_lock(&m->mu);
  int fresh = m->cache_tick[om] == tick && m->cache[om];
  pthread_mutex_unlock(&m->mu);
  if (!fresh) {
    char *b = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&b, &n);
    if (!out) {
      pthread_mutex_unlock(&m->render_mu);
      return GS_ENOMEM;
    }
    expose_write(m, out, om, now);
    fclose(out);
    pthread_mutex_lock(&m->mu);
    free(m->cache[om]);
    m->cache[om] = b, m->cache_len[om] = n, m->cache_tick[om] = tick;
    pthread_mutex_unlock(&m->mu);
  }
  pthread_mutex_lock(&m->mu);
  *len = m->cache_len[om];
  *body = malloc(*len ? *len : 1);
  if (*body)
    memcpy(*body, m->cache[om], *len);
  pthread_mutex_unlock(&m->mu);
  pthread_mutex_unlock(&m->render_mu);
  return *body ? GS_OK : GS_ENOMEM;
}

int expose_listen(struct expose *m, const char *listen, const char *token, int *port) {
  m->ep = serve_endpoint_start(listen ? listen : EXPOSE_DEFAULT_LISTEN, token, "/metrics", scrape, m, 1);
  if (!m->ep)
    return GS_EINVAL;
  if (port)
    *port = serve_endpoint_port(m->ep);
  return GS_OK;
}

int expose_url(const struct expose *m, char *out, size_t n) {
  if (!m->ep) {
    snprintf(out, n, "%s", "");
    return GS_EINVAL;
  }
  const char *host = serve_endpoint_host(m->ep);
  int v6 = strchr(host, ':') != NULL;
  snprintf(out, n, "http://%s%s%s:%d/metrics", v6 ? "[" : "", host, v6 ? "]" : "", serve_endpoint_port(m->ep));
  return GS_OK;
}

void expose_stop_listen(struct expose *m) {
  serve_endpoint_stop(m->ep);
  m->ep = NULL;
}
