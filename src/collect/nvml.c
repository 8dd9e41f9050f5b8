/* collect/nvml: the NVIDIA GPU collector. It loads NVML at run time (nvml_api.c), records each GPU's
 * static facts as run params, then samples every GPU from its own thread at the run's interval and
 * writes series (source "nvml", labels "gpu=N" or "gpu=N,pid=P"), throttle and GPU-lost events and
 * one-line notes into the thread-safe sink. The run loop's sample() call only returns: a driver call
 * that takes seconds (it happens: persistence mode off, a GPU falling off the bus) then stalls this
 * thread alone, never the host and process-tree collectors, and close() gives the thread two
 * seconds before it leaves it behind.
 *
 * Where the driver keeps a sample buffer (nvmlDeviceGetSamples), every driver sample is stored with
 * its own timestamp, so a dip shorter than the agent's interval still shows. Hopper and newer add
 * GPM (SM, tensor, DRAM activity), read from two samples taken at least 100 ms apart. A call that
 * answers NOT_SUPPORTED or NO_PERMISSION is switched off for that GPU with one note; GPU_IS_LOST
 * ends that GPU's sampling with a "gpu_lost" event while the others go on. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/collect.h"
#include "collect/nvml_api.h"
#include "core/core.h"

#define NS_PER_MS 1000000LL
#define GPM_MIN_GAP_NS (100 * NS_PER_MS) /* NVML wants GPM samples at least 100 ms apart */
#define GPM_MAX_WAIT_NS (5 * NS_PER_MS)  /* a gap this much short is waited out, not skipped */
#define CLOSE_WAIT_NS (2 * GS_NS_PER_S)  /* how long close() waits for a thread inside the driver */
#define PCIE_PERIOD_NS GS_NS_PER_S       /* nvmlDeviceGetPcieThroughput blocks ~20 ms: 1 Hz per GPU */
#define MIG_EVERY_MIN_NS GS_NS_PER_S     /* a MIG GPU's instances are re-listed every 10 ticks, 1-10 s */
#define MIG_EVERY_MAX_NS (10 * GS_NS_PER_S)
#define MIG_AGAIN_NS GS_NS_PER_S /* an instance's errors ask for a re-list at once, at most once a second */

enum metric {
  M_UTIL,
  M_MEM_UTIL,
  M_MEM_USED,
  M_MEM_FREE,
  M_MEM_TOTAL,
  M_POWER,
  M_POWER_LIMIT,
  M_ENERGY,
  M_TEMP,
  M_SM_CLOCK,
  M_MEM_CLOCK,
  M_SM_CLOCK_MAX,
  M_MEM_CLOCK_MAX,
  M_THROTTLE,
  M_PCIE_TX,
  M_PCIE_RX,
  M_FAN,
  M_PSTATE,
  M_GR_ACTIVE,
  M_SM_ACTIVE,
  M_SM_OCCUPANCY,
  M_TENSOR_ACTIVE,
  M_DRAM_ACTIVE,
  M_FP16_ACTIVE,
  M_FP32_ACTIVE,
  M_FP64_ACTIVE,
  M_PCIE_TX_GPM,
  M_PCIE_RX_GPM,
  M_NVLINK_RX,
  M_NVLINK_TX,
  M_PROC_MEM,
  M_PROC_SM,
  /* one MIG instance's (labels gpu=N,gi=G) */
  M_MIG_MEM_USED,
  M_MIG_MEM_FREE,
  M_MIG_MEM_TOTAL,
  M_MIG_GR_ACTIVE,
  M_MIG_SM_ACTIVE,
  M_MIG_SM_OCCUPANCY,
  M_MIG_TENSOR_ACTIVE,
  M_MIG_DRAM_ACTIVE,
  M_MIG_FP16_ACTIVE,
  M_MIG_FP32_ACTIVE,
  M_MIG_FP64_ACTIVE,
  M_COUNT
};
#define M_MIG_FIRST M_MIG_MEM_USED
#define N_MIG_METRICS (M_COUNT - M_MIG_FIRST)

static const struct gs_metric_desc nvml_metrics[M_COUNT] = {
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
#define N_GPM (sizeof gpm_table / sizeof gpm_table[0])

/* The unit that NOT_SUPPORTED / NO_PERMISSION switches off: one driver call (or pair of calls). */
enum call {
  C_UTIL,
  C_SAMPLES_GPU,
  C_SAMPLES_MEM,
  C_MEMORY,
  C_POWER,
  C_POWER_LIMIT,
  C_ENERGY,
  C_TEMP,
  C_SM_CLOCK,
  C_MEM_CLOCK,
  C_THROTTLE,
  C_PCIE,
  C_FAN,
  C_PSTATE,
  C_PROCS,
  C_PROC_UTIL,
  C_GPM,
  C_MIG, /* the GPU's MIG mode and instance list (re-read while the agent runs) */
  C_COUNT
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
};

/* One process seen on a GPU: its series ids and the last timestamp written to each. */
struct proc_series {
  unsigned pid;
  int sid[2]; /* M_PROC_MEM, M_PROC_SM */
  int64_t last_t[2];
};

/* GPM sampling of one GPU or one MIG instance: the previous sample and the one being taken. */
struct gpm_state {
  int on;
  nvmlGpmSample_t s[2]; /* [0] older, [1] the one being taken */
  int have;             /* s[0] holds a sample */
  int64_t t;            /* when s[0] was taken */
  unsigned char noted[N_GPM];
};

/* One MIG instance of a GPU in MIG mode (a GPU instance, through its first MIG device handle). Its
 * GPU-instance id, profile and UUID say which instance it is: an id reused with another profile (or,
 * on a real driver, a new UUID) is a new instance. */
struct mig {
  unsigned gi, slot;
  nvmlDevice_t dev;
  char label[40]; /* "gpu=N,gi=G" */
  char profile[32], uuid[96];
  int suspect;  /* a call answered as if the instance were gone: the next re-list decides */
  int kept_bad; /* it was suspect and the re-list still listed it: its errors are noted */
  unsigned char off[C_COUNT], noted[C_COUNT];
  int mem_v1_only;
  int sid[N_MIG_METRICS];
  int64_t last_t[N_MIG_METRICS];
  struct gpm_state gpm;
};

struct gpu {
  unsigned index;
  nvmlDevice_t dev;
  char label[24]; /* "gpu=N" */
  char name[96];
  int lost;                           /* lost or never usable: not sampled */
  unsigned char off[C_COUNT];         /* switched off (NOT_SUPPORTED, NO_PERMISSION, missing symbol) */
  unsigned char noted[C_COUNT];       /* a transient error was noted already */
  int sid[M_COUNT];                   /* series ids, -1 until first written */
  int64_t last_t[M_COUNT];            /* last timestamp written per series: keeps each series in order */
  double sm_clock_max, mem_clock_max; /* NAN when unknown */
  int mem_v1_only;                    /* the _v2 memory call refused its version */
  int temp_old_only;                  /* nvmlDeviceGetTemperatureV refused its version */

  /* utilisation sample buffers: [0] GPU, [1] memory */
  unsigned long long seen_us[2]; /* newest driver timestamp consumed */
  int64_t newest_ns[2];          /* its monotonic time; 0 when none yet */
  int64_t gap_ns[2];             /* the driver's sample period as last observed */
  nvmlSample_t *sbuf;
  unsigned sbuf_cap;

  unsigned long long throttle_prev;
  int throttle_valid;

  /* GPM; the request is shared by the GPU and its MIG instances */
  struct gpm_state gpm;
  nvmlGpmMetricsGet_t *gpm_req;

  /* MIG instances (MIG mode on): listed at open, re-listed every mig_every() and soon after an
   * instance's calls answer as if it were gone (mig_follow) */
  struct mig *migs; /* NVML_MAX_MIG of them, allocated with the first */
  int n_migs;
  int mig_mode, mig_pending; /* 0/1; mig_mode -1: MIG not supported, nothing to follow */
  int fam_gpm;               /* GPM supported at open (calls switched back on after a mode change) */
  int mig_relist;            /* an instance asked for a re-list */
  int64_t mig_next_ns;       /* the next periodic re-list */
  int64_t mig_again_ns;      /* the last re-list an instance asked for */

  /* processes */
  unsigned char *pbuf; /* raw entries, api.proc_stride bytes each */
  unsigned *pids;
  unsigned pcap, n_pids;
  nvmlProcessUtilizationSample_t *ubuf;
  unsigned ucap;
  unsigned long long pu_seen_us;
  struct proc_series *procs;
  size_t n_procs, cap_procs;
};

/* What one GPU's tick produced, written into the sink in one go (see flush()). */
struct pend_point {
  enum metric metric;
  int proc; /* index into gpu.procs, or -1 */
  int mig;  /* index into gpu.migs, or -1 */
  int64_t t;
  double v;
};
struct pend_event {
  int64_t t;
  const char *kind;
  char name[40];
  char text[64];
  char labels[40]; /* "" for the GPU's own */
};
struct pend_note {
  char text[200];
};

struct nvml_ctx {
  struct nvml_api api;
  struct gs_sink *sink;
  int64_t interval_ns;
  unsigned pcie_every; /* ticks between PCIe reads of one GPU */
  char driver[80];
  unsigned n_gpus;
  struct gpu *gpus;
  atomic_int n_lost;
  int64_t tick_ns;                /* scheduled time of the tick being sampled (thread-owned) */
  unsigned long long ticks, late; /* ticks sampled, readings stamped late (thread-owned; read after join) */
  atomic_llong phase_ns;          /* the run loop's first tick time, from sample(): the grid to follow */
  int phased;                     /* sample() has handed it over (run-loop thread only) */

  /* the sampling thread; mu guards stop/exited/detached and every write into the sink */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int sync_ready, thread_started;
  atomic_int stop;
  int exited, detached;

  /* owned by whoever samples (open(), then the thread) */
  struct pend_point *pp;
  size_t n_pp, cap_pp;
  struct pend_event *pe;
  size_t n_pe, cap_pe;
  struct pend_note *pn;
  size_t n_pn, cap_pn;
  int *pend_end; /* series whose latest value ends (a destroyed instance's) */
  size_t n_end, cap_end;
};

/* ---- small helpers ---- */

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
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

static int64_t wall_us(void) {
  return gs_wall_ns() / 1000;
}

/* Reads the monotonic and wall clocks as one instant: the wall read bracketed by two monotonic
 * reads, the tightest of three tries. Two plain reads can straddle a preemption (a loaded machine,
 * a sanitizer build), which would shift every driver sample of that poll by as much. The first try
 * always sets both outputs; a later one replaces it only when it is tighter. */
static void clock_pair(int64_t *mono, int64_t *wall_us_out) {
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
static int64_t drv_to_mono(unsigned long long ts_us, int64_t now_mono, int64_t now_wall_us) {
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
static int64_t stamp(struct nvml_ctx *c) {
  int64_t now = gs_mono_ns();
  if (now - c->tick_ns > late_ns(c)) {
    c->late++;
    return now;
  }
  return c->tick_ns;
}

static void note(struct nvml_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct nvml_ctx *c, const char *fmt, ...) {
  if (grow((void **)&c->pn, &c->cap_pn, c->n_pn + 1, sizeof *c->pn))
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->pn[c->n_pn++].text, sizeof c->pn[0].text, fmt, ap);
  va_end(ap);
}

/* Queues an event labelled labels (NULL: the GPU's own). */
static void event_on(struct nvml_ctx *c, int64_t t, const char *kind, const char *name, const char *text,
                     const char *labels) {
  if (grow((void **)&c->pe, &c->cap_pe, c->n_pe + 1, sizeof *c->pe))
    return;
  struct pend_event *e = &c->pe[c->n_pe++];
  e->t = t;
  e->kind = kind;
  snprintf(e->name, sizeof e->name, "%s", name ? name : "");
  snprintf(e->text, sizeof e->text, "%s", text ? text : "");
  snprintf(e->labels, sizeof e->labels, "%s", labels ? labels : "");
}

static void event(struct nvml_ctx *c, int64_t t, const char *kind, const char *name, const char *text) {
  event_on(c, t, kind, name, text, NULL);
}

/* Queues one value; drops non-finite values and values older than the series' last one. */
static void emit(struct nvml_ctx *c, struct gpu *g, enum metric m, int64_t t, double v) {
  if (!isfinite(v) || t <= g->last_t[m])
    return;
  if (grow((void **)&c->pp, &c->cap_pp, c->n_pp + 1, sizeof *c->pp))
    return;
  g->last_t[m] = t;
  c->pp[c->n_pp++] = (struct pend_point){.metric = m, .proc = -1, .mig = -1, .t = t, .v = v};
}

/* Queues one value of MIG instance k (m one of M_MIG_*), as emit() does. */
static void emit_mig(struct nvml_ctx *c, struct gpu *g, int k, enum metric m, int64_t t, double v) {
  struct mig *mi = &g->migs[k];
  int j = m - M_MIG_FIRST;
  if (!isfinite(v) || t <= mi->last_t[j])
    return;
  if (grow((void **)&c->pp, &c->cap_pp, c->n_pp + 1, sizeof *c->pp))
    return;
  mi->last_t[j] = t;
  c->pp[c->n_pp++] = (struct pend_point){.metric = m, .proc = -1, .mig = k, .t = t, .v = v};
}

static void emit_proc(struct nvml_ctx *c, struct gpu *g, enum metric m, unsigned pid, int64_t t, double v) {
  size_t i;
  int k = m == M_PROC_SM;
  for (i = 0; i < g->n_procs && g->procs[i].pid != pid; i++)
    ;
  if (i == g->n_procs) {
    if (grow((void **)&g->procs, &g->cap_procs, g->n_procs + 1, sizeof *g->procs))
      return;
    g->procs[g->n_procs++] = (struct proc_series){.pid = pid, .sid = {-1, -1}, .last_t = {INT64_MIN, INT64_MIN}};
  }
  struct proc_series *p = &g->procs[i];
  if (!isfinite(v) || t <= p->last_t[k])
    return;
  if (grow((void **)&c->pp, &c->cap_pp, c->n_pp + 1, sizeof *c->pp))
    return;
  p->last_t[k] = t;
  c->pp[c->n_pp++] = (struct pend_point){.metric = m, .proc = (int)i, .mig = -1, .t = t, .v = v};
}

static void lose(struct nvml_ctx *c, struct gpu *g, nvmlReturn_t r) {
  if (g->lost)
    return;
  g->lost = 1;
  atomic_fetch_add(&c->n_lost, 1);
  event(c, stamp(c), "gpu_lost", "", nvml_api_strerror(&c->api, r));
}

/* Classifies the answer of one driver call on GPU g, or on its MIG instance mi when not NULL.
 * Returns 1 on success. NOT_SUPPORTED and NO_PERMISSION switch the call off for this GPU (or
 * instance) with a note; GPU_IS_LOST ends the GPU; on an instance, GPU_IS_LOST, NOT_FOUND and
 * INVALID_ARGUMENT ask for a re-list of the GPU's instances instead; anything else is noted once
 * and retried next tick. */
static int verdict(struct nvml_ctx *c, struct gpu *g, struct mig *mi, enum call call, nvmlReturn_t r) {
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
      note(c, "%s: %s: %s (still listed; retrying)", who, call_what[call], nvml_api_strerror(&c->api, r));
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
    note(c, "%s: %s: %s", who, call_what[call], nvml_api_strerror(&c->api, r));
    return 0;
  case NVML_ERROR_GPU_IS_LOST:
  case NVML_ERROR_GPU_NOT_FOUND:
    lose(c, g, r);
    return 0;
  default:
    if (!(mi ? mi->noted : g->noted)[call]) {
      (mi ? mi->noted : g->noted)[call] = 1;
      note(c, "%s: %s: %s (retrying)", who, call_what[call], nvml_api_strerror(&c->api, r));
    }
    return 0;
  }
}

static int ok(struct nvml_ctx *c, struct gpu *g, enum call call, nvmlReturn_t r) {
  return verdict(c, g, NULL, call, r);
}

/* Evaluates a driver call unless it is switched off; true when it succeeded. */
#define CALL(call, expr) (!g->off[call] && ok(c, g, (call), (expr)))
#define RETURN_IF_LOST()                                                                                               \
  do {                                                                                                                 \
    if (g->lost)                                                                                                       \
      return;                                                                                                          \
  } while (0)

static int series_id(struct nvml_ctx *c, struct gpu *g, enum metric m, int proc, int mig) {
  int *slot = mig >= 0   ? &g->migs[mig].sid[m - M_MIG_FIRST]
              : proc < 0 ? &g->sid[m]
                         : &g->procs[proc].sid[m == M_PROC_SM];
  if (*slot < 0) {
    char labels[64];
    if (mig >= 0)
      snprintf(labels, sizeof labels, "%s", g->migs[mig].label);
    else if (proc < 0)
      snprintf(labels, sizeof labels, "%s", g->label);
    else
      snprintf(labels, sizeof labels, "%s,pid=%u", g->label, g->procs[proc].pid);
    const struct gs_metric_desc *d = &nvml_metrics[m];
    *slot = gs_sink_series(c->sink, "nvml", d->name, labels, d->unit, d->kind);
  }
  return *slot;
}

/* Writes what the last GPU produced into the sink, unless close() has given up on this thread
 * (then the sink may already be gone). */
/* Returns 1 when the points went into the sink, 0 when close() had begun and they were dropped. */
static int flush(struct nvml_ctx *c, struct gpu *g) {
  pthread_mutex_lock(&c->mu);
  int written = !atomic_load(&c->stop);
  if (written) {
    /* Ends first: a destroyed instance's points went in earlier, and a new one under its labels
     * (its id reused) may have points in this batch. */
    for (size_t i = 0; i < c->n_end; i++)
      gs_sink_end(c->sink, c->pend_end[i]);
    for (size_t i = 0; i < c->n_pp; i++) {
      struct pend_point *p = &c->pp[i];
      int sid = series_id(c, g, p->metric, p->proc, p->mig);
      if (sid >= 0)
        gs_sink_put(c->sink, sid, p->t, p->v);
    }
    for (size_t i = 0; i < c->n_pe; i++) {
      struct pend_event *e = &c->pe[i];
      gs_sink_event(c->sink, e->t, e->kind, e->name, NAN, e->labels[0] ? e->labels : g->label, e->text);
    }
    for (size_t i = 0; i < c->n_pn; i++)
      gs_sink_note(c->sink, "%s", c->pn[i].text);
  }
  pthread_mutex_unlock(&c->mu);
  c->n_pp = c->n_pe = c->n_pn = c->n_end = 0;
  return written;
}

/* ---- one GPU, one tick ---- */

static void mig_follow(struct nvml_ctx *c, struct gpu *g);

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
  return verdict(c, g, mi, C_GPM, r);
}

/* GPM of GPU g (k < 0) or of its MIG instance k: each metric's average since the previous sample. */
static void gpm_tick(struct nvml_ctx *c, struct gpu *g, int k) {
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
  if (!verdict(c, g, mi, C_GPM, r))
    return;
  int64_t ts = stamp(c);
  for (size_t j = 0; j < n; j++) {
    size_t i = which[j];
    nvmlGpmMetric_t *m = &q->metrics[j];
    enum metric em = mi ? gpm_table[i].mig : gpm_table[i].metric;
    if (m->nvmlReturn == NVML_SUCCESS) {
      if (mi)
        emit_mig(c, g, k, em, ts, m->value * gpm_table[i].scale);
      else
        emit(c, g, em, ts, m->value * gpm_table[i].scale);
    } else if (!st->noted[i]) {
      st->noted[i] = 1;
      if (mi)
        note(c, "gpu%u mig %u: GPM %s: %s", g->index, mi->gi, nvml_metrics[em].name,
             nvml_api_strerror(&c->api, m->nvmlReturn));
      else
        note(c, "gpu%u: GPM %s: %s", g->index, nvml_metrics[em].name, nvml_api_strerror(&c->api, m->nvmlReturn));
    }
  }
}

static double sample_value(unsigned vt, nvmlValue_t v) {
  switch (vt) {
  case NVML_VALUE_TYPE_DOUBLE:
    return v.dVal;
  case NVML_VALUE_TYPE_UNSIGNED_INT:
    return v.uiVal;
  case NVML_VALUE_TYPE_UNSIGNED_LONG:
    return (double)v.ulVal;
  case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
    return (double)v.ullVal;
  case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
    return (double)v.sllVal;
  case NVML_VALUE_TYPE_SIGNED_INT:
    return v.siVal;
  case NVML_VALUE_TYPE_UNSIGNED_SHORT:
    return v.usVal;
  default:
    return NAN;
  }
}

/* Reads the driver's utilisation sample buffer (which 0: GPU, 1: memory) since the last sample
 * seen and stores each sample at its own time. Returns how many were new, or -1 when the buffer
 * cannot be read (then the caller falls back to nvmlDeviceGetUtilizationRates). */
static int samples_tick(struct nvml_ctx *c, struct gpu *g, int which) {
  enum call call = which ? C_SAMPLES_MEM : C_SAMPLES_GPU;
  unsigned type = which ? NVML_MEMORY_UTILIZATION_SAMPLES : NVML_GPU_UTILIZATION_SAMPLES;
  enum metric metric = which ? M_MEM_UTIL : M_UTIL;
  unsigned vt = 0, n = 0;
  nvmlReturn_t r;
  if (g->off[call])
    return -1;
  if (!g->sbuf_cap) {
    r = c->api.nvmlDeviceGetSamples(g->dev, type, g->seen_us[which], &vt, &n, NULL);
    if (r == NVML_ERROR_NOT_FOUND)
      return 0;
    if (!ok(c, g, call, r))
      return -1;
    n = n < 64 ? 64 : n > 4096 ? 4096 : n;
    nvmlSample_t *b = calloc(n, sizeof *b);
    if (!b)
      return -1;
    g->sbuf = b;
    g->sbuf_cap = n;
  }
  n = g->sbuf_cap;
  r = c->api.nvmlDeviceGetSamples(g->dev, type, g->seen_us[which], &vt, &n, g->sbuf);
  if (r == NVML_ERROR_NOT_FOUND)
    return 0;
  if (r == NVML_ERROR_INSUFFICIENT_SIZE && g->sbuf_cap < 4096) {
    /* More than a buffer-full since last time: read the oldest next tick with a bigger buffer. */
    free(g->sbuf);
    g->sbuf = NULL;
    g->sbuf_cap = 0;
    return -1;
  }
  if (!ok(c, g, call, r))
    return -1;
  if (n > g->sbuf_cap)
    n = g->sbuf_cap;
  int64_t now, now_wall;
  clock_pair(&now, &now_wall);
  unsigned long long newest = g->seen_us[which];
  int got = 0;
  for (unsigned i = 0; i < n; i++) {
    unsigned long long ts = g->sbuf[i].timeStamp;
    double v = sample_value(vt, g->sbuf[i].sampleValue);
    if (ts <= g->seen_us[which] || !(v >= 0 && v <= 100))
      continue;
    int64_t t = drv_to_mono(ts, now, now_wall);
    emit(c, g, metric, t, v);
    if (ts > newest) {
      if (newest > g->seen_us[which] || got) {
        int64_t gap = (int64_t)(ts - newest) * 1000;
        g->gap_ns[which] = gap < 20 * NS_PER_MS ? 20 * NS_PER_MS : gap > GS_NS_PER_S ? GS_NS_PER_S : gap;
      }
      newest = ts;
      g->newest_ns[which] = t;
    }
    got++;
  }
  g->seen_us[which] = newest;
  return got;
}

/* gpu.util_pct and gpu.mem_util_pct: every driver sample when the buffer has them; otherwise (no
 * buffer, or no new sample for two driver periods: an idle GPU stops sampling) the current
 * nvmlDeviceGetUtilizationRates. Falling back on every empty read would interleave two sources
 * whenever the agent ticks faster than the driver samples. */
static void util_tick(struct nvml_ctx *c, struct gpu *g) {
  int need[2];
  int64_t now = gs_mono_ns();
  for (int w = 0; w < 2; w++) {
    int got = samples_tick(c, g, w);
    RETURN_IF_LOST();
    need[w] = got < 0 || (got == 0 && (!g->newest_ns[w] || now - g->newest_ns[w] > 2 * g->gap_ns[w] + c->interval_ns));
  }
  if (!need[0] && !need[1])
    return;
  nvmlUtilization_t u;
  if (CALL(C_UTIL, c->api.nvmlDeviceGetUtilizationRates(g->dev, &u))) {
    int64_t t = stamp(c);
    if (need[0])
      emit(c, g, M_UTIL, t, u.gpu);
    if (need[1])
      emit(c, g, M_MEM_UTIL, t, u.memory);
  }
}

/* Reads dev's memory (used, free, total bytes into v): the _v2 call unless *v1_only, which is set
 * when the driver refuses _v2's version (an older driver: the unversioned call may still answer).
 * Returns the answer of the call that counted; FUNCTION_NOT_FOUND when no call is left. */
static nvmlReturn_t memory_read(const struct nvml_api *a, nvmlDevice_t dev, int *v1_only, double v[3]) {
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

/* Reads dev's GPU temperature (degrees C): nvmlDeviceGetTemperatureV (NVML 13 deprecates the old
 * call) unless *old_only, which is set when that call refuses its version or its argument (a driver
 * exporting the name without this struct), as memory_read does; the deprecated
 * nvmlDeviceGetTemperature is the fallback. Returns the answer of the call that counted;
 * FUNCTION_NOT_FOUND when no call is left. */
static nvmlReturn_t temp_read(const struct nvml_api *a, nvmlDevice_t dev, int *old_only, double *celsius) {
  nvmlReturn_t r;
  if (a->nvmlDeviceGetTemperatureV && !*old_only) {
    nvmlTemperature_t tv = {.version = nvmlTemperature_v1, .sensorType = NVML_TEMPERATURE_GPU};
    r = a->nvmlDeviceGetTemperatureV(dev, &tv);
    if (r == NVML_SUCCESS) {
      *celsius = tv.temperature;
      return r;
    }
    if (r != NVML_ERROR_ARGUMENT_VERSION_MISMATCH && r != NVML_ERROR_NOT_SUPPORTED &&
        r != NVML_ERROR_FUNCTION_NOT_FOUND && r != NVML_ERROR_INVALID_ARGUMENT)
      return r;
    *old_only = 1;
  }
  if (!a->nvmlDeviceGetTemperature)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  unsigned u;
  r = a->nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &u);
  if (r == NVML_SUCCESS)
    *celsius = u;
  return r;
}

static void temp_tick(struct nvml_ctx *c, struct gpu *g) {
  double v = NAN;
  if (g->off[C_TEMP])
    return;
  nvmlReturn_t r = temp_read(&c->api, g->dev, &g->temp_old_only, &v);
  if (r == NVML_ERROR_FUNCTION_NOT_FOUND && !c->api.nvmlDeviceGetTemperature) {
    g->off[C_TEMP] = 1; /* no call left: the library's note lists what it lacks */
    return;
  }
  if (ok(c, g, C_TEMP, r))
    emit(c, g, M_TEMP, stamp(c), v);
}

static void memory_tick(struct nvml_ctx *c, struct gpu *g) {
  double v[3];
  if (g->off[C_MEMORY])
    return;
  nvmlReturn_t r = memory_read(&c->api, g->dev, &g->mem_v1_only, v);
  if (r == NVML_ERROR_FUNCTION_NOT_FOUND && !c->api.nvmlDeviceGetMemoryInfo) {
    g->off[C_MEMORY] = 1; /* the library has no call left: its note lists what it lacks */
    return;
  }
  if (!ok(c, g, C_MEMORY, r))
    return;
  int64_t t = stamp(c);
  emit(c, g, M_MEM_USED, t, v[0]);
  emit(c, g, M_MEM_FREE, t, v[1]);
  emit(c, g, M_MEM_TOTAL, t, v[2]);
}

/* One MIG instance's tick: its GPM, then its memory. What a MIG device does not answer is off after
 * its first NOT_SUPPORTED, with one note, as on a GPU. */
static void mig_tick(struct nvml_ctx *c, struct gpu *g, int k) {
  struct mig *mi = &g->migs[k];
  double v[3];
  gpm_tick(c, g, k);
  if (g->lost || mi->off[C_MEMORY])
    return;
  nvmlReturn_t r = memory_read(&c->api, mi->dev, &mi->mem_v1_only, v);
  if (!verdict(c, g, mi, C_MEMORY, r))
    return;
  int64_t t = stamp(c);
  emit_mig(c, g, k, M_MIG_MEM_USED, t, v[0]);
  emit_mig(c, g, k, M_MIG_MEM_FREE, t, v[1]);
  emit_mig(c, g, k, M_MIG_MEM_TOTAL, t, v[2]);
}

static void throttle_tick(struct nvml_ctx *c, struct gpu *g) {
  unsigned long long mask;
  if (!CALL(C_THROTTLE, c->api.nvmlDeviceGetCurrentClocksEventReasons(g->dev, &mask)))
    return;
  int64_t t = stamp(c);
  emit(c, g, M_THROTTLE, t, (double)mask);
  /* GpuIdle is not a slowdown of work: it stays in the bitmask but makes no events. */
  unsigned long long changed = ((g->throttle_valid ? g->throttle_prev : 0) ^ mask) & ~NVML_CLOCKS_EVENT_REASON_GPU_IDLE;
  for (int b = 0; b < 64 && changed; b++) {
    unsigned long long bit = 1ULL << b;
    if (!(changed & bit))
      continue;
    changed &= ~bit;
    char name[40];
    const struct gs_clock_reason *r = gs_clock_reason_of_bit(bit);
    if (r)
      snprintf(name, sizeof name, "%s", r->name);
    else
      snprintf(name, sizeof name, "Reason0x%llx", bit);
    event(c, t, (mask & bit) ? "throttle_start" : "throttle_stop", name, "");
  }
  g->throttle_prev = mask;
  g->throttle_valid = 1;
}

static int pid_listed(const struct gpu *g, unsigned pid) {
  for (unsigned i = 0; i < g->n_pids; i++)
    if (g->pids[i] == pid)
      return 1;
  return 0;
}

static int procs_grow(struct gpu *g, unsigned want, size_t stride) {
  unsigned char *b = realloc(g->pbuf, (size_t)want * stride);
  if (!b)
    return -1;
  g->pbuf = b;
  unsigned *p = realloc(g->pids, want * sizeof *p);
  if (!p)
    return -1;
  g->pids = p;
  g->pcap = want;
  return 0;
}

static void procs_tick(struct nvml_ctx *c, struct gpu *g) {
  size_t stride = c->api.proc_stride;
  unsigned n = g->pcap;
  nvmlReturn_t r;
  if (g->off[C_PROCS])
    return;
  r = c->api.nvmlDeviceGetComputeRunningProcesses(g->dev, &n, g->pcap ? (nvmlProcessInfo_t *)g->pbuf : NULL);
  if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
    if (procs_grow(g, 2 * n + 5, stride))
      return;
    n = g->pcap;
    r = c->api.nvmlDeviceGetComputeRunningProcesses(g->dev, &n, (nvmlProcessInfo_t *)g->pbuf);
  }
  if (!ok(c, g, C_PROCS, r))
    return;
  if (n > g->pcap)
    n = g->pcap;
  int64_t t = stamp(c);
  g->n_pids = 0;
  for (unsigned i = 0; i < n; i++) {
    unsigned pid;
    unsigned long long mem;
    memcpy(&pid, g->pbuf + i * stride, sizeof pid);
    memcpy(&mem, g->pbuf + i * stride + offsetof(nvmlProcessInfo_t, usedGpuMemory), sizeof mem);
    g->pids[g->n_pids++] = pid;
    if (mem != NVML_VALUE_NOT_AVAILABLE_ULL)
      emit_proc(c, g, M_PROC_MEM, pid, t, (double)mem);
  }

  if (g->off[C_PROC_UTIL] || !g->n_pids)
    return;
  unsigned m = 0;
  r = c->api.nvmlDeviceGetProcessUtilization(g->dev, NULL, &m, g->pu_seen_us);
  if (r == NVML_ERROR_NOT_FOUND || (r == NVML_SUCCESS && m == 0))
    return;
  if (r != NVML_ERROR_INSUFFICIENT_SIZE && !ok(c, g, C_PROC_UTIL, r))
    return;
  if (m > g->ucap) {
    unsigned want = m + 8;
    nvmlProcessUtilizationSample_t *u = realloc(g->ubuf, want * sizeof *u);
    if (!u)
      return;
    g->ubuf = u;
    g->ucap = want;
  }
  m = g->ucap;
  r = c->api.nvmlDeviceGetProcessUtilization(g->dev, g->ubuf, &m, g->pu_seen_us);
  if (r == NVML_ERROR_NOT_FOUND || !ok(c, g, C_PROC_UTIL, r))
    return;
  if (m > g->ucap)
    m = g->ucap;
  int64_t now, now_wall;
  clock_pair(&now, &now_wall);
  unsigned long long newest = g->pu_seen_us;
  /* The driver's buffer can hold stale or garbage entries: keep only new ones, in range, of a
   * process that is on this GPU now. */
  for (unsigned i = 0; i < m; i++) {
    nvmlProcessUtilizationSample_t *s = &g->ubuf[i];
    if (s->timeStamp <= g->pu_seen_us || s->smUtil > 100 || !pid_listed(g, s->pid))
      continue;
    emit_proc(c, g, M_PROC_SM, s->pid, drv_to_mono(s->timeStamp, now, now_wall), s->smUtil);
    if (s->timeStamp > newest)
      newest = s->timeStamp;
  }
  g->pu_seen_us = newest;
}

static void gpu_tick(struct nvml_ctx *c, struct gpu *g, uint64_t tick) {
  const struct nvml_api *a = &c->api;
  nvmlDevice_t d = g->dev;
  unsigned u;
  unsigned long long ull;

  gpm_tick(c, g, -1); /* first, so the 100 ms spacing of GPM samples jitters least */
  RETURN_IF_LOST();
  util_tick(c, g);
  RETURN_IF_LOST();
  memory_tick(c, g);
  RETURN_IF_LOST();
  if (CALL(C_POWER, a->nvmlDeviceGetPowerUsage(d, &u)))
    emit(c, g, M_POWER, stamp(c), u / 1000.0);
  RETURN_IF_LOST();
  if (CALL(C_POWER_LIMIT, a->nvmlDeviceGetEnforcedPowerLimit(d, &u)))
    emit(c, g, M_POWER_LIMIT, stamp(c), u / 1000.0);
  RETURN_IF_LOST();
  if (CALL(C_ENERGY, a->nvmlDeviceGetTotalEnergyConsumption(d, &ull)))
    emit(c, g, M_ENERGY, stamp(c), ull / 1000.0);
  RETURN_IF_LOST();
  temp_tick(c, g);
  RETURN_IF_LOST();
  if (CALL(C_SM_CLOCK, a->nvmlDeviceGetClockInfo(d, NVML_CLOCK_SM, &u)))
    emit(c, g, M_SM_CLOCK, stamp(c), u);
  RETURN_IF_LOST();
  if (CALL(C_MEM_CLOCK, a->nvmlDeviceGetClockInfo(d, NVML_CLOCK_MEM, &u)))
    emit(c, g, M_MEM_CLOCK, stamp(c), u);
  RETURN_IF_LOST();
  int64_t t = stamp(c);
  emit(c, g, M_SM_CLOCK_MAX, t, g->sm_clock_max); /* NAN (unknown) is dropped */
  emit(c, g, M_MEM_CLOCK_MAX, t, g->mem_clock_max);
  throttle_tick(c, g);
  RETURN_IF_LOST();
  /* Each PCIe read blocks ~20 ms in the driver: read one GPU per tick, each about once a second. */
  if ((tick + g->index) % c->pcie_every == 0) {
    if (CALL(C_PCIE, a->nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_TX_BYTES, &u)))
      emit(c, g, M_PCIE_TX, stamp(c), u * 1024.0);
    RETURN_IF_LOST();
    if (CALL(C_PCIE, a->nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_RX_BYTES, &u)))
      emit(c, g, M_PCIE_RX, stamp(c), u * 1024.0);
    RETURN_IF_LOST();
  }
  if (CALL(C_FAN, a->nvmlDeviceGetFanSpeed(d, &u)))
    emit(c, g, M_FAN, stamp(c), u);
  RETURN_IF_LOST();
  if (CALL(C_PSTATE, a->nvmlDeviceGetPerformanceState(d, &u)) && u <= 15) /* 32 = unknown */
    emit(c, g, M_PSTATE, stamp(c), u);
  RETURN_IF_LOST();
  procs_tick(c, g);
  RETURN_IF_LOST();
  mig_follow(c, g);
  for (int k = 0; k < g->n_migs && !g->lost; k++)
    mig_tick(c, g, k);
}

/* ---- the thread ---- */

static struct timespec abs_ts(int64_t ns) {
  return (struct timespec){.tv_sec = ns / GS_NS_PER_S, .tv_nsec = ns % GS_NS_PER_S};
}

static void ctx_free(struct nvml_ctx *c, int shutdown);

/* The first time phase + k * step (k any integer) that is not before t. */
static int64_t grid_at_or_after(int64_t t, int64_t phase, int64_t step) {
  int64_t d = t - phase;
  return phase + (d >= 0 ? (d + step - 1) / step : -(-d / step)) * step;
}

static void *nvml_thread(void *arg) {
  struct nvml_ctx *c = arg;
  uint64_t tick = 0;
  int64_t next = gs_mono_ns();
  pthread_mutex_lock(&c->mu);
  while (!atomic_load(&c->stop)) {
    while (!atomic_load(&c->stop) && gs_mono_ns() < next) {
      struct timespec ts = abs_ts(next);
      pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    if (atomic_load(&c->stop))
      break;
    pthread_mutex_unlock(&c->mu);
    c->tick_ns = next;
    unsigned i;
    int written = 1;
    for (i = 0; i < c->n_gpus && !atomic_load(&c->stop); i++) {
      struct gpu *g = &c->gpus[i];
      if (g->lost)
        continue;
      gpu_tick(c, g, tick);
      written &= flush(c, g);
    }
    tick++;
    c->ticks += i == c->n_gpus && written; /* a tick close() cut short is not counted */
    /* Keep the schedule; after an overrun (a slow driver call) skip the ticks that were missed. */
    next += c->interval_ns;
    int64_t now = gs_mono_ns(), phase = atomic_exchange(&c->phase_ns, 0);
    if (phase) /* move onto the run loop's grid, so a tick's GPU and host values share a time */
      next = grid_at_or_after(next, phase, c->interval_ns);
    if (next <= now)
      next += ((now - next) / c->interval_ns + 1) * c->interval_ns;
    pthread_mutex_lock(&c->mu);
  }
  c->exited = 1;
  pthread_cond_broadcast(&c->cv);
  int detached = c->detached;
  pthread_mutex_unlock(&c->mu);
  if (detached)
    ctx_free(c, 0); /* close() has returned long ago; leave the library mapped */
  return NULL;
}

/* ---- open / close ---- */

static void ctx_free(struct nvml_ctx *c, int shutdown) {
  if (!c)
    return;
  for (unsigned i = 0; c->gpus && i < c->n_gpus; i++) {
    struct gpu *g = &c->gpus[i];
    for (int m = -1; shutdown && m < g->n_migs; m++) {
      struct gpm_state *st = m < 0 ? &g->gpm : &g->migs[m].gpm;
      for (int k = 0; k < 2; k++)
        if (st->s[k])
          c->api.nvmlGpmSampleFree(st->s[k]);
    }
    free(g->migs);
    free(g->sbuf), free(g->gpm_req), free(g->pbuf), free(g->pids), free(g->ubuf), free(g->procs);
  }
  free(c->gpus);
  free(c->pp), free(c->pe), free(c->pn), free(c->pend_end);
  nvml_api_close(&c->api, shutdown);
  if (c->sync_ready) {
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
  }
  free(c);
}

static void param(struct gs_sink *s, unsigned gpu, const char *key, const char *value) {
  char k[96];
  snprintf(k, sizeof k, "gpu.%u.%s", gpu, key);
  gs_sink_param(s, k, value);
}

/* "enabled", "disabled", "enabled (pending disable)", ...: the param gpu.N.mig_mode. Returns buf. */
static const char *mig_mode_text(int cur, int pending, char *buf, size_t n) {
  snprintf(buf, n, "%s%s", cur ? "enabled" : "disabled",
           pending == cur ? ""
           : pending      ? " (pending enable)"
                          : " (pending disable)");
  return buf;
}

/* Records what NVML says about GPU index as the run's params gpu.N.* (none for a fact it does not
 * give: missing is not zero). */
static void gpu_record_facts(struct nvml_ctx *c, unsigned index, const struct nvml_facts *f) {
  char v[64];
  if (f->name[0])
    param(c->sink, index, "name", f->name);
  if (f->uuid[0])
    param(c->sink, index, "uuid", f->uuid);
  if (f->pci_bus_id[0])
    param(c->sink, index, "pci_bus_id", f->pci_bus_id);
  if (f->cc_major >= 0) {
    snprintf(v, sizeof v, "%d.%d", f->cc_major, f->cc_minor);
    param(c->sink, index, "cc", v);
  }
  if (f->mem_total >= 0) {
    snprintf(v, sizeof v, "%lld", f->mem_total);
    param(c->sink, index, "mem_total_bytes", v);
  }
  if (f->mig_current >= 0)
    param(c->sink, index, "mig_mode", mig_mode_text(f->mig_current, f->mig_pending, v, sizeof v));
}

/* Calls this library lacks are off from the start (one note lists them for the whole run). */
static void gpu_switch_off_missing_calls(const struct nvml_api *a, struct gpu *g, int fam_gpm) {
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
}

/* Reads the GPU's max SM and memory clocks (NAN when NVML cannot tell, with a note). Returns 0, or
 * -1 when the GPU was lost meanwhile (already marked lost). */
static int gpu_read_max_clocks(struct nvml_ctx *c, struct gpu *g) {
  const struct nvml_api *a = &c->api;
  static const struct {
    unsigned type;
    const char *what;
  } mc[2] = {{NVML_CLOCK_SM, "max SM clock"}, {NVML_CLOCK_MEM, "max memory clock"}};
  if (!a->nvmlDeviceGetMaxClockInfo)
    return 0;
  for (int k = 0; k < 2; k++) {
    unsigned mhz;
    nvmlReturn_t r = a->nvmlDeviceGetMaxClockInfo(g->dev, mc[k].type, &mhz);
    if (r == NVML_SUCCESS)
      *(k ? &g->mem_clock_max : &g->sm_clock_max) = mhz;
    else if (r == NVML_ERROR_GPU_IS_LOST)
      return lose(c, g, r), -1;
    else
      note(c, "gpu%u: %s: %s", g->index, mc[k].what, nvml_api_strerror(a, r));
  }
  return 0;
}

/* Prepares GPM sampling of a GPU (k < 0) or of its MIG instance k: the shared request and the two
 * samples it alternates between (GPM stays off, with a note, when the driver cannot allocate them).
 * Returns 0, or GS_ENOMEM. */
static int gpu_start_gpm(struct nvml_ctx *c, struct gpu *g, int k) {
  const struct nvml_api *a = &c->api;
  struct gpm_state *st = k < 0 ? &g->gpm : &g->migs[k].gpm;
  if (!g->gpm_req && !(g->gpm_req = calloc(1, sizeof *g->gpm_req)))
    return GS_ENOMEM;
  if (a->nvmlGpmSampleAlloc(&st->s[0]) != NVML_SUCCESS || a->nvmlGpmSampleAlloc(&st->s[1]) != NVML_SUCCESS) {
    if (k < 0)
      note(c, "gpu%u: GPM: cannot allocate samples", g->index);
    else
      note(c, "gpu%u mig %u: GPM: cannot allocate samples", g->index, g->migs[k].gi);
    (k < 0 ? g->off : g->migs[k].off)[C_GPM] = 1;
  } else {
    st->on = 1;
  }
  return 0;
}

/* Records one MIG instance's facts as params gpu.N.mig.G.* (none for a fact the driver does not give). */
static void mig_record_facts(struct nvml_ctx *c, unsigned index, const struct nvml_mig_facts *m) {
  char k[48], v[64];
  static const char *const keys[3] = {"profile", "name", "uuid"};
  const char *vals[3] = {m->profile, m->name, m->uuid};
  for (int i = 0; i < 3; i++) {
    snprintf(k, sizeof k, "mig.%u.%s", m->gi, keys[i]);
    if (vals[i][0])
      param(c->sink, index, k, vals[i]);
  }
  snprintf(k, sizeof k, "mig.%u.ci", m->gi);
  snprintf(v, sizeof v, "%u", m->ci);
  param(c->sink, index, k, v);
  if (m->mem_total >= 0) {
    snprintf(k, sizeof k, "mig.%u.mem_total_bytes", m->gi);
    snprintf(v, sizeof v, "%lld", m->mem_total);
    param(c->sink, index, k, v);
  }
}

/* Writes the param gpu.N.mig.instances ("1,9": the GPU-instance ids; "" when none is left). */
static void mig_record_list(struct nvml_ctx *c, struct gpu *g) {
  char list[NVML_MAX_MIG * 12] = "";
  for (int k = 0; k < g->n_migs; k++) {
    size_t len = strlen(list);
    snprintf(list + len, sizeof list - len, "%s%u", len ? "," : "", g->migs[k].gi);
  }
  param(c->sink, g->index, "mig.instances", list);
}

/* Adds one MIG instance of g (listed by nvml_api_facts or nvml_api_mig_list): its handle, labels
 * gpu=N,gi=G, params, and GPM where this library has nvmlGpmMigSampleGet. Only memory and GPM are
 * read from a MIG device; its other calls are off. With announce (an instance created while the
 * agent runs), an event mig_instance_created at t. Returns 0 (also when its handle cannot be had:
 * the next re-list tries again), or GS_ENOMEM. */
static int mig_add(struct nvml_ctx *c, struct gpu *g, const struct nvml_mig_facts *m, int announce, int64_t t) {
  const struct nvml_api *a = &c->api;
  if (g->n_migs == NVML_MAX_MIG || (!g->migs && !(g->migs = calloc(NVML_MAX_MIG, sizeof *g->migs))))
    return g->migs ? 0 : GS_ENOMEM;
  struct mig *mi = &g->migs[g->n_migs];
  memset(mi, 0, sizeof *mi);
  if (!(mi->dev = nvml_api_mig_handle(a, g->dev, m->slot)))
    return 0;
  mi->gi = m->gi, mi->slot = m->slot;
  snprintf(mi->profile, sizeof mi->profile, "%s", m->profile);
  snprintf(mi->uuid, sizeof mi->uuid, "%s", m->uuid);
  snprintf(mi->label, sizeof mi->label, "gpu=%u,gi=%u", g->index, mi->gi);
  for (int j = 0; j < N_MIG_METRICS; j++)
    mi->sid[j] = -1, mi->last_t[j] = INT64_MIN;
  memset(mi->off, 1, sizeof mi->off);
  mi->off[C_MEMORY] = !a->nvmlDeviceGetMemoryInfo && !a->nvmlDeviceGetMemoryInfo_v2;
  mi->off[C_GPM] = !a->nvmlGpmMigSampleGet || !a->nvmlGpmMetricsGet || !a->nvmlGpmSampleAlloc;
  mig_record_facts(c, g->index, m);
  g->n_migs++;
  if (announce) {
    char text[64];
    snprintf(text, sizeof text, "MIG instance GI %u (%.20s) created", mi->gi, mi->profile[0] ? mi->profile : "?");
    event_on(c, t, "mig_instance_created", mi->profile, text, mi->label);
  }
  return !mi->off[C_GPM] ? gpu_start_gpm(c, g, g->n_migs - 1) : 0;
}

/* Prepares the MIG instances nvml_api_facts listed on a GPU in MIG mode (mig_add). Returns 0, or
 * GS_ENOMEM. */
static int gpu_start_migs(struct nvml_ctx *c, struct gpu *g, const struct nvml_facts *f) {
  if (f->mig_unlisted)
    note(c, "gpu%u: MIG instances not listed: this driver's library lacks the MIG device calls", g->index);
  for (int i = 0; i < f->n_mig; i++)
    if (mig_add(c, g, &f->mig[i], 0, 0))
      return GS_ENOMEM;
  if (g->n_migs)
    mig_record_list(c, g);
  return 0;
}

/* ---- MIG instances that come and go while the agent runs ---- */

/* How often a MIG GPU's instances are re-listed: every 10 ticks, at least 1 s and at most 10 s apart. */
static int64_t mig_every(int64_t interval_ns) {
  int64_t e = 10 * interval_ns;
  return e < MIG_EVERY_MIN_NS ? MIG_EVERY_MIN_NS : e > MIG_EVERY_MAX_NS ? MIG_EVERY_MAX_NS : e;
}

/* Ends instance k of g: its series lose their latest value (no /metrics line; the points stay), an
 * event mig_instance_destroyed at t, and its GPM samples are freed. The instances after it move down. */
static void mig_gone(struct nvml_ctx *c, struct gpu *g, int k, int64_t t) {
  struct mig *mi = &g->migs[k];
  for (int j = 0; j < N_MIG_METRICS; j++)
    if (mi->sid[j] >= 0 && !grow((void **)&c->pend_end, &c->cap_end, c->n_end + 1, sizeof *c->pend_end))
      c->pend_end[c->n_end++] = mi->sid[j];
  char text[64];
  snprintf(text, sizeof text, "MIG instance GI %u (%.20s) destroyed", mi->gi, mi->profile[0] ? mi->profile : "?");
  event_on(c, t, "mig_instance_destroyed", mi->profile, text, mi->label);
  for (int s = 0; s < 2; s++)
    if (mi->gpm.s[s])
      c->api.nvmlGpmSampleFree(mi->gpm.s[s]);
  memmove(mi, mi + 1, (size_t)(g->n_migs - k - 1) * sizeof *mi);
  g->n_migs--;
}

static int mig_same(const struct mig *mi, const struct nvml_mig_facts *m) {
  return mi->gi == m->gi && !strcmp(mi->profile, m->profile) && !strcmp(mi->uuid, m->uuid);
}

/* Brings g's instances in line with a complete list f: the ones not listed are gone, the listed
 * ones not known are new (an id reused with another profile is both). */
static void mig_sync(struct nvml_ctx *c, struct gpu *g, const struct nvml_facts *f) {
  int64_t t = stamp(c);
  int changed = 0, i;
  for (int k = g->n_migs - 1; k >= 0; k--) {
    struct mig *mi = &g->migs[k];
    for (i = 0; i < f->n_mig && !mig_same(mi, &f->mig[i]); i++)
      ;
    if (i == f->n_mig) {
      mig_gone(c, g, k, t);
      changed = 1;
    } else {
      mi->kept_bad = mi->suspect, mi->suspect = 0;
      mi->slot = f->mig[i].slot;
    }
  }
  for (i = 0; i < f->n_mig; i++) {
    int k;
    for (k = 0; k < g->n_migs && !mig_same(&g->migs[k], &f->mig[i]); k++)
      ;
    if (k == g->n_migs) {
      int n = g->n_migs;
      if (mig_add(c, g, &f->mig[i], 1, t))
        break;
      changed |= g->n_migs > n;
    }
  }
  if (changed)
    mig_record_list(c, g);
}

/* Re-reads g's MIG mode; a change is the param gpu.N.mig_mode again and, when the current mode
 * changed, an event mig_mode. Leaving MIG mode switches the GPU's own calls back on (those MIG mode
 * refused; one that the GPU refuses for another reason is noted once more). Returns 0, or -1 when
 * the GPU was lost. */
static int mig_mode_reread(struct nvml_ctx *c, struct gpu *g) {
  unsigned cur, pend;
  char v[48];
  nvmlReturn_t r =
      c->api.nvmlDeviceGetMigMode ? c->api.nvmlDeviceGetMigMode(g->dev, &cur, &pend) : NVML_ERROR_FUNCTION_NOT_FOUND;
  if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_GPU_NOT_FOUND)
    return lose(c, g, r), -1;
  if (r != NVML_SUCCESS) {
    if (!g->noted[C_MIG])
      note(c, "gpu%u: MIG mode: %s (retrying)", g->index, nvml_api_strerror(&c->api, r));
    g->noted[C_MIG] = 1;
    return 0; /* the mode last read holds */
  }
  int was = g->mig_mode;
  if ((int)(cur != 0) == was && (int)(pend != 0) == g->mig_pending)
    return 0;
  g->mig_mode = cur != 0, g->mig_pending = pend != 0;
  param(c->sink, g->index, "mig_mode", mig_mode_text(g->mig_mode, g->mig_pending, v, sizeof v));
  if (was != g->mig_mode)
    event(c, stamp(c), "mig_mode", v, g->mig_mode ? "MIG mode enabled" : "MIG mode disabled");
  if (was == 1 && !g->mig_mode) {
    /* What MIG mode refused answers again; the driver's samples from before are not this mode's. */
    gpu_switch_off_missing_calls(&c->api, g, g->fam_gpm);
    g->seen_us[0] = g->seen_us[1] = g->pu_seen_us = (unsigned long long)wall_us();
  }
  return 0;
}

/* On a GPU that has MIG mode: every mig_every(), and at once (at most every MIG_AGAIN_NS) when
 * an instance's calls answered as if it were gone, re-reads the mode and the instance list and
 * follows them (mig_sync). An incomplete list changes nothing (one note); it is tried again. */
static void mig_follow(struct nvml_ctx *c, struct gpu *g) {
  int64_t now = gs_mono_ns();
  if (g->mig_mode < 0 || (now < g->mig_next_ns && (!g->mig_relist || now - g->mig_again_ns < MIG_AGAIN_NS)))
    return;
  if (g->mig_relist)
    g->mig_again_ns = now;
  g->mig_relist = 0;
  g->mig_next_ns = now + mig_every(c->interval_ns);
  if (mig_mode_reread(c, g))
    return;
  struct nvml_facts f;
  f.n_mig = 0;
  if (g->mig_mode == 1) {
    nvmlReturn_t why, r = nvml_api_mig_list(&c->api, g->dev, &f, &why);
    if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_GPU_NOT_FOUND) {
      lose(c, g, r);
      return;
    }
    if (r == NVML_ERROR_FUNCTION_NOT_FOUND)
      return; /* no MIG device calls: noted at open */
    if (r != NVML_SUCCESS || (r = why) != NVML_SUCCESS) {
      if (!g->noted[C_MIG])
        note(c, "gpu%u: MIG instances: %s (retrying)", g->index, nvml_api_strerror(&c->api, r));
      g->noted[C_MIG] = 1;
      return;
    }
  }
  mig_sync(c, g, &f);
}

/* Finds one GPU's handle and static facts, records them as params and prepares its buffers.
 * Returns 0, or GS_ENOMEM. A GPU that cannot be used is marked lost with a note or event. */
static int gpu_init(struct nvml_ctx *c, struct gpu *g, unsigned index) {
  const struct nvml_api *a = &c->api;
  g->index = index;
  snprintf(g->label, sizeof g->label, "gpu=%u", index);
  g->sm_clock_max = g->mem_clock_max = NAN;
  for (int m = 0; m < M_COUNT; m++)
    g->sid[m] = -1, g->last_t[m] = INT64_MIN;
  g->gap_ns[0] = g->gap_ns[1] = GS_NS_PER_S;
  /* Start after "now": samples from before the run belong to someone else's story. */
  g->seen_us[0] = g->seen_us[1] = g->pu_seen_us = (unsigned long long)wall_us();

  nvmlReturn_t r = a->nvmlDeviceGetHandleByIndex(index, &g->dev);
  if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_GPU_NOT_FOUND) {
    lose(c, g, r);
    return 0;
  }
  if (r != NVML_SUCCESS) {
    g->lost = 1;
    note(c, "gpu%u: nvmlDeviceGetHandleByIndex: %s (not sampled)", index, nvml_api_strerror(a, r));
    return 0;
  }
  struct nvml_facts f;
  r = nvml_api_facts(a, g->dev, &f);
  if (r != NVML_SUCCESS) {
    lose(c, g, r);
    return 0;
  }
  snprintf(g->name, sizeof g->name, "%s", f.name[0] ? f.name : "unknown GPU");
  gpu_record_facts(c, index, &f);
  g->fam_gpm = f.fam_gpm;
  g->mig_mode = f.mig_current, g->mig_pending = f.mig_pending;
  g->mig_next_ns = gs_mono_ns() + mig_every(c->interval_ns);
  gpu_switch_off_missing_calls(a, g, f.fam_gpm);
  if (gpu_read_max_clocks(c, g))
    return 0;
  if (f.fam_gpm && gpu_start_gpm(c, g, -1))
    return GS_ENOMEM;
  return gpu_start_migs(c, g, &f);
}

/* The driver's version and the newest CUDA it runs (nvidia-smi's "CUDA Version": 12040 is 12.4) as
 * run params; either left out when the driver does not say. */
static void driver_params(struct nvml_ctx *c, struct gs_sink *sink) {
  if (c->driver[0])
    gs_sink_param(sink, "nvml.driver_version", c->driver);
  int cuda = 0;
  if (c->api.nvmlSystemGetCudaDriverVersion && c->api.nvmlSystemGetCudaDriverVersion(&cuda) == NVML_SUCCESS &&
      cuda > 0) {
    char v[32];
    snprintf(v, sizeof v, "%d.%d", cuda / 1000, cuda % 1000 / 10);
    gs_sink_param(sink, "nvml.cuda_driver_version", v);
  }
}

static void *nvml_open(const struct collector_opts *opts, struct gs_sink *sink, char *err, size_t errlen) {
  struct nvml_ctx *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (nvml_api_open(&c->api, opts ? opts->nvml_lib : NULL, err, errlen)) {
    free(c);
    return NULL;
  }
  c->sink = sink;
  c->interval_ns = opts && opts->interval_ns > 0 ? opts->interval_ns : 100 * NS_PER_MS;
  c->pcie_every = (unsigned)((PCIE_PERIOD_NS + c->interval_ns - 1) / c->interval_ns);
  if (!c->pcie_every)
    c->pcie_every = 1;

  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int bad = pthread_mutex_init(&c->mu, NULL) | pthread_cond_init(&c->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (bad) {
    snprintf(err, errlen, "cannot create a lock");
    goto fail;
  }
  c->sync_ready = 1;

  if (!c->api.nvmlSystemGetDriverVersion ||
      c->api.nvmlSystemGetDriverVersion(c->driver, sizeof c->driver) != NVML_SUCCESS)
    c->driver[0] = 0;
  c->driver[sizeof c->driver - 1] = 0;
  unsigned n = 0;
  nvmlReturn_t r = c->api.nvmlDeviceGetCount(&n);
  if (r != NVML_SUCCESS) {
    snprintf(err, errlen, "nvmlDeviceGetCount: %s", nvml_api_strerror(&c->api, r));
    goto fail;
  }
  if (n == 0) {
    snprintf(err, errlen, "no NVIDIA GPU (the driver reports none)");
    goto fail;
  }
  c->gpus = calloc(n, sizeof *c->gpus);
  if (!c->gpus) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  c->n_gpus = n;
  c->tick_ns = gs_mono_ns();
  char v[512];
  snprintf(v, sizeof v, "%u", n);
  gs_sink_param(sink, "gpu.count", v);
  driver_params(c, sink);
  if (*nvml_api_missing(&c->api, v, sizeof v))
    gs_sink_note(sink, "nvml: this driver's library lacks %s; those metrics are off", v);
  for (unsigned i = 0; i < n; i++) {
    if (gpu_init(c, &c->gpus[i], i)) {
      snprintf(err, errlen, "out of memory");
      goto fail;
    }
    flush(c, &c->gpus[i]);
  }

  /* The thread takes no signals: the run loop's handlers (forwarding to the job) stay on it. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int e = pthread_create(&c->thread, NULL, nvml_thread, c);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) {
    snprintf(err, errlen, "cannot start the NVML thread");
    goto fail;
  }
  c->thread_started = 1;
  return c;

fail:
  ctx_free(c, 1);
  return NULL;
}

/* The thread samples on its own clock, so the run loop's tick only hands over its first scheduled
 * time (the grid the thread then follows) and returns: nothing here can wait on the driver. */
static int nvml_sample(void *ctx, struct gs_sink *sink, int64_t now_ns) {
  struct nvml_ctx *c = ctx;
  (void)sink;
  if (c && !c->phased) {
    c->phased = 1;
    atomic_store(&c->phase_ns, now_ns);
  }
  return GS_COLLECT_OK;
}

static void nvml_summary(void *ctx, FILE *out) {
  struct nvml_ctx *c = ctx;
  if (!c) {
    fprintf(out, "GPUs: none\n");
    return;
  }
  unsigned gpm = 0, same = 1;
  for (unsigned i = 0; i < c->n_gpus; i++) {
    gpm += (unsigned)c->gpus[i].gpm.on;
    same &= !strcmp(c->gpus[i].name, c->gpus[0].name);
  }
  if (same)
    fprintf(out, "GPUs: %u \xc3\x97 %s", c->n_gpus, c->gpus[0].name);
  else
    fprintf(out, "GPUs: %u (%s, ...)", c->n_gpus, c->gpus[0].name);
  fprintf(out, " (NVML %s, ", c->driver[0] ? c->driver : "?");
  if (gpm == c->n_gpus)
    fprintf(out, "GPM on");
  else if (gpm == 0)
    fprintf(out, "GPM off");
  else
    fprintf(out, "GPM on %u of %u", gpm, c->n_gpus);
  int lost = atomic_load(&c->n_lost);
  if (lost)
    fprintf(out, ", %d lost", lost);
  fprintf(out, ")\n");
}

/* Stops the thread. When it is stuck inside the driver for more than CLOSE_WAIT_NS, it is left
 * behind: it frees the context itself if the call ever returns, writes nothing more into the sink
 * (stop is set under mu, and every write checks it under mu), and the library stays mapped. */
static void nvml_close(void *ctx) {
  struct nvml_ctx *c = ctx;
  if (!c)
    return;
  if (!c->thread_started) {
    ctx_free(c, 1);
    return;
  }
  pthread_mutex_lock(&c->mu);
  atomic_store(&c->stop, 1);
  pthread_cond_broadcast(&c->cv);
  int64_t deadline = gs_mono_ns() + CLOSE_WAIT_NS;
  while (!c->exited && gs_mono_ns() < deadline) {
    struct timespec ts = abs_ts(deadline);
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
  }
  int exited = c->exited;
  pthread_t th = c->thread;
  if (!exited)
    c->detached = 1;
  pthread_mutex_unlock(&c->mu);
  if (!exited) {
    pthread_detach(th);
    return;
  }
  pthread_join(th, NULL);
  /* What the thread did, for the run's record (and the tests, which count rather than time). */
  char v[32];
  snprintf(v, sizeof v, "%llu", c->ticks);
  gs_sink_param(c->sink, "nvml.ticks", v);
  snprintf(v, sizeof v, "%llu", c->late);
  gs_sink_param(c->sink, "nvml.late_readings", v);
  ctx_free(c, 1);
}

const struct collector collector_nvml = {
    .version = 1,
    .name = "nvml",
    .metrics = nvml_metrics,
    .n_metrics = M_COUNT,
    .open = nvml_open,
    .sample = nvml_sample,
    .summary = nvml_summary,
    .close = nvml_close,
};
