/* collect/nvml_int: what the NVML collector's files share (collect/nvml*.c; nothing outside the
 * folder includes it) — the metric and call tables' indices, one GPU's and one MIG instance's
 * sampling state, the context of the sampling thread, and the helpers every file calls. The files
 * split along what they read: nvml.c the GPU's own readings, the thread, open and close;
 * nvml_mig.c MIG instances (listed, followed while they come and go, sampled); nvml_procs.c the
 * processes on a GPU; nvml_gpm.c GPM; nvml_dcgm.c the same activity series through DCGM on GPUs
 * without GPM; nvml_util.c (below them all) the sink writes, stamps and the verdict on a driver
 * call's answer. */
#ifndef GS_COLLECT_NVML_INT_H
#define GS_COLLECT_NVML_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "collect/collect.h"
#include "collect/dcgm_api.h"
#include "collect/nvml_api.h"
#include "core/core.h"

#define NS_PER_MS 1000000LL
#define GPM_MIN_GAP_NS (100 * NS_PER_MS) /* NVML wants GPM samples at least 100 ms apart */
#define GPM_MAX_WAIT_NS (5 * NS_PER_MS)  /* a gap this much short is waited out, not skipped */
#define CLOSE_WAIT_NS (2 * GS_NS_PER_S)  /* how long close() waits for a thread inside the driver */
#define PCIE_PERIOD_NS GS_NS_PER_S       /* nvmlDeviceGetPcieThroughput blocks ~20 ms: 1 Hz per GPU */
#define MIG_EVERY_MIN_NS GS_NS_PER_S     /* a MIG GPU's instances are re-listed every 10 ticks, 1-10 s */
#define MIG_EVERY_MAX_NS (10 * GS_NS_PER_S)
#define MIG_AGAIN_NS GS_NS_PER_S          /* an instance's errors ask for a re-list at once, at most once a second */
#define HEALTH_EVERY_NS (5 * GS_NS_PER_S) /* health counters change rarely: read every 5 s, not every tick */
#define XID_WINDOW_NS (300 * GS_NS_PER_S) /* DCGM_EXP_XID_ERRORS_COUNT's window (dcgm-exporter's 5 min) */
#define XID_CODES 16                      /* distinct Xid codes counted per GPU */
#define XID_RECENT 64                     /* Xids kept per GPU for the count window */

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
  /* health (nvml_health.c): read every HEALTH_EVERY_NS, Xids as they come */
  M_XID,       /* the last Xid code (DCGM_FI_DEV_XID_ERRORS) */
  M_XID_COUNT, /* Xids of one code in the last XID_WINDOW_NS (labels gpu=N,xid=C) */
  M_ECC_SBE_VOL,
  M_ECC_DBE_VOL,
  M_ECC_SBE_AGG,
  M_ECC_DBE_AGG,
  M_REMAP_CORR,
  M_REMAP_UNC,
  M_REMAP_PENDING,
  M_REMAP_FAILURE,
  M_RETIRED_SBE,
  M_RETIRED_DBE,
  M_RETIRED_PENDING,
  M_PCIE_REPLAY,
  M_NVLINK_REPLAY,
  M_NVLINK_RECOVERY,
  M_NVLINK_CRC_FLIT,
  M_NVLINK_CRC_DATA,
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
  C_EVENTS,
  C_ECC,
  C_REMAP,
  C_RETIRED,
  C_PCIE_REPLAY,
  C_NVLINK,
  C_COUNT
};

/* One process seen on a GPU: its series ids and the last timestamp written to each. */
struct proc_series {
  unsigned pid;
  int sid[2]; /* M_PROC_MEM, M_PROC_SM */
  int64_t last_t[2];
};

enum { N_GPM = 12 }; /* the GPM metrics read (gpm_table in nvml_gpm.c) */

enum { N_DCGM = 4 }; /* the profiling fields read through DCGM (dcgm_table in nvml_dcgm.c) */

/* One GPU's DCGM profiling readings (nvml_dcgm.c): its DCGM id, and what the tick's poll brought. */
struct gpu_dcgm {
  int on;                      /* in the watched group */
  unsigned id;                 /* DCGM's gpu id */
  double fresh[N_DCGM];        /* % from the last poll, not yet written; NAN: nothing new */
  int64_t ts[N_DCGM];          /* DCGM's timestamp (µs since 1970) of the newest value taken */
  unsigned char noted[N_DCGM]; /* a field DCGM does not give on this GPU was noted */
};

/* DCGM as the NVML collector uses it (nvml_dcgm.c): the library, the connection (an embedded host
 * engine or a running nv-hostengine), the group of the GPUs without GPM and the watched fields. */
struct nv_dcgm {
  struct dcgm_api api;
  dcgmHandle_t h;
  int embedded;          /* started in this process (dcgmStopEmbedded), else connected */
  dcgmGpuGrp_t group;    /* valid when have_group */
  dcgmFieldGrp_t fields; /* valid when have_fields */
  int have_group, have_fields, watching;
  int gone;       /* the connection broke: nothing more is read */
  int noted_poll; /* a failed poll was noted (retrying) */
  char how[160];  /* "embedded", "host engine 127.0.0.1" */
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

/* One GPU's health readings (nvml_health.c): when the counters are next read, its active NVLinks,
 * and the Xids the event set delivered, waiting for the GPU's own tick and counted over a window. */
struct health {
  int64_t next_ns;
  int links_listed;
  unsigned nlinks;
  unsigned char link[NVML_NVLINK_MAX_LINKS]; /* the links to read: active at the first reading */
  double last_xid;                           /* NAN until one came */
  struct {
    unsigned long long type; /* nvmlEventType* */
    unsigned code, gi, ci;
    int64_t t;
  } fresh[8]; /* delivered, not yet written */
  int nfresh;
  struct {
    unsigned code;
    int64_t t;
  } recent[XID_RECENT];
  int nrecent;
  unsigned codes[XID_CODES]; /* the codes seen: series gpu.xid_count{xid=C} each */
  int code_sid[XID_CODES];
  int64_t code_last_t[XID_CODES];
  int ncodes;
};

struct gpu {
  unsigned index;
  nvmlDevice_t dev;
  char label[24]; /* "gpu=N" */
  char name[96];
  char uuid[96], pci_bus_id[32];      /* NVML's, to find the GPU among DCGM's */
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

  struct health health;
  struct gpu_dcgm dcgm;
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
  double value; /* NAN but for an Xid (its code) */
  char name[40];
  char text[200];
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

  nvmlEventSet_t events; /* Xid and ECC events of every GPU (nvml_health.c); NULL when off */
  struct nv_dcgm *dcgm;  /* DCGM's profiling fields for GPUs without GPM (nvml_dcgm.c); NULL when off */
};

/* Evaluates a driver call unless it is switched off; true when it succeeded (g and c in scope). */
#define CALL(call, expr) (!g->off[call] && nv_ok(c, g, (call), (expr)))
#define RETURN_IF_LOST()                                                                                               \
  do {                                                                                                                 \
    if (g->lost)                                                                                                       \
      return;                                                                                                          \
  } while (0)

/* The collector's series, indexed by enum metric (collector_nvml.metrics). */
extern const struct gs_metric_desc nv_metrics[M_COUNT];

/* ---- nvml_util.c ---- */

/* Grows *p (capacity *cap elements of elem bytes) to hold need. Returns 0, or -1 with *p unchanged. */
int nv_grow(void **p, size_t *cap, size_t need, size_t elem);
/* The wall clock in µs, the driver's timestamps' clock. */
int64_t nv_wall_us(void);
/* Reads the monotonic and wall clocks as one instant: the wall read bracketed by two monotonic
 * reads, the tightest of three tries. Two plain reads can straddle a preemption (a loaded machine,
 * a sanitizer build), which would shift every driver sample of that poll by as much. The first try
 * always sets both outputs; a later one replaces it only when it is tighter. */
void nv_clock_pair(int64_t *mono, int64_t *wall_us_out);
/* Converts a driver timestamp (µs on the wall clock) to the sink's monotonic clock. */
int64_t nv_drv_to_mono(unsigned long long ts_us, int64_t now_mono, int64_t now_wall_us);
/* The timestamp for a value read now: the tick's scheduled time while the reading is on time, so
 * each series is exactly regular (one bit per timestamp in the store's delta-of-delta chunks) and
 * lines up with the run loop's other collectors; its read time when it is late (a loaded machine
 * woke the thread late, or a slow driver call pushed it past the tick), so a value is never put
 * earlier than it was read by more than late_ns(). Late readings are counted (nvml.late_readings). */
int64_t nv_stamp(struct nvml_ctx *c);
void nv_note(struct nvml_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Queues an event labelled labels (NULL: the GPU's own). */
void nv_event_on(struct nvml_ctx *c, int64_t t, const char *kind, const char *name, const char *text,
                 const char *labels);
/* Queues an event of the GPU being sampled. */
void nv_event(struct nvml_ctx *c, int64_t t, const char *kind, const char *name, const char *text);
/* Queues one value; drops non-finite values and values older than the series' last one. */
void nv_emit(struct nvml_ctx *c, struct gpu *g, enum metric m, int64_t t, double v);
/* Queues one value of MIG instance k (m one of M_MIG_*), as nv_emit() does. */
void nv_emit_mig(struct nvml_ctx *c, struct gpu *g, int k, enum metric m, int64_t t, double v);
/* Queues one value of process pid on g (its series made on first use), as nv_emit() does. */
void nv_emit_proc(struct nvml_ctx *c, struct gpu *g, enum metric m, unsigned pid, int64_t t, double v);
/* Ends GPU g's sampling (GPU_IS_LOST or unusable): a gpu_lost event and a note; the others go on. */
void nv_lose(struct nvml_ctx *c, struct gpu *g, nvmlReturn_t r);
/* Classifies the answer of one driver call on GPU g, or on its MIG instance mi when not NULL.
 * Returns 1 on success. NOT_SUPPORTED and NO_PERMISSION switch the call off for this GPU (or
 * instance) with a note; GPU_IS_LOST ends the GPU; on an instance, GPU_IS_LOST, NOT_FOUND and
 * INVALID_ARGUMENT ask for a re-list of the GPU's instances instead; anything else is noted once
 * and retried next tick. */
int nv_verdict(struct nvml_ctx *c, struct gpu *g, struct mig *mi, enum call call, nvmlReturn_t r);
/* nv_verdict on the GPU itself. */
int nv_ok(struct nvml_ctx *c, struct gpu *g, enum call call, nvmlReturn_t r);
/* The sink's id of metric m on g, its process proc or its MIG instance mig (-1: none), registered
 * on first use. */
int nv_series_id(struct nvml_ctx *c, struct gpu *g, enum metric m, int proc, int mig);
/* Writes what the last GPU produced into the sink, unless close() has given up on this thread
 * (then the sink may already be gone). */
/* Returns 1 when the points went into the sink, 0 when close() had begun and they were dropped. */
int nv_flush(struct nvml_ctx *c, struct gpu *g);
/* Reads dev's memory (used, free, total bytes into v): the _v2 call unless *v1_only, which is set
 * when the driver refuses _v2's version (an older driver: the unversioned call may still answer).
 * Returns the answer of the call that counted; FUNCTION_NOT_FOUND when no call is left. */
nvmlReturn_t nv_memory_read(const struct nvml_api *a, nvmlDevice_t dev, int *v1_only, double v[3]);
/* Puts the run param gpu.<gpu>.<key> = value. */
void nv_param(struct gs_sink *s, unsigned gpu, const char *key, const char *value);
/* "enabled", "disabled", "enabled (pending disable)", ...: the param gpu.N.mig_mode. Returns buf. */
const char *nv_mig_mode_text(int cur, int pending, char *buf, size_t n);
/* Calls this library lacks are off from the start (one note lists them for the whole run). */
void nv_calls_switch_off_missing(const struct nvml_api *a, struct gpu *g, int fam_gpm);

/* ---- nvml_gpm.c ---- */

/* GPM of GPU g (k < 0) or of its MIG instance k: each metric's average since the previous sample. */
void nv_gpm_tick(struct nvml_ctx *c, struct gpu *g, int k);
/* Prepares GPM sampling of a GPU (k < 0) or of its MIG instance k: the shared request and the two
 * samples it alternates between (GPM stays off, with a note, when the driver cannot allocate them).
 * Returns 0, or GS_ENOMEM. */
int nv_gpm_start(struct nvml_ctx *c, struct gpu *g, int k);

/* ---- nvml_dcgm.c ---- */

/* On the GPUs without GPM (not in MIG mode), watches DCGM's profiling fields at the sampling
 * interval: loads libdcgm.so.4 (absent: nothing changes, no note), connects to a running
 * nv-hostengine or starts one embedded ($GPUSCOPE_DCGM_HOST), finds the GPUs by UUID or PCI bus id.
 * A refusal (profiling busy beside Nsight, not supported) is one note and no series. Records the
 * params nvml.dcgm and gpu.N.sm_active_from, writes the notes into the sink. Returns 0, or
 * GS_ENOMEM. */
int nv_dcgm_start(struct nvml_ctx *c);
/* Takes DCGM's latest values of every watched GPU (one call per tick, before the GPUs), for each
 * GPU's nv_dcgm_tick. A connection that breaks ends DCGM's series with one note. */
void nv_dcgm_poll(struct nvml_ctx *c);
/* Queues the values the poll brought for g as its gpu.sm_active_pct, ... (the GPM series). */
void nv_dcgm_tick(struct nvml_ctx *c, struct gpu *g);
/* Unwatches, destroys the groups, stops or leaves the host engine and unloads DCGM when shutdown is
 * set; else only forgets it (a thread may still be inside the library). NULL c->dcgm: a no-op. */
void nv_dcgm_stop(struct nvml_ctx *c, int shutdown);

/* ---- nvml_mig.c ---- */

/* One MIG instance's tick: its GPM, then its memory. What a MIG device does not answer is off after
 * its first NOT_SUPPORTED, with one note, as on a GPU. */
void nv_mig_tick(struct nvml_ctx *c, struct gpu *g, int k);
/* Prepares the MIG instances nvml_api_facts listed on a GPU in MIG mode (mig_add). Returns 0, or
 * GS_ENOMEM. */
int nv_mig_start(struct nvml_ctx *c, struct gpu *g, const struct nvml_facts *f);
/* How often a MIG GPU's instances are re-listed: every 10 ticks, at least 1 s and at most 10 s apart. */
int64_t nv_mig_every(int64_t interval_ns);
/* On a GPU that has MIG mode: every nv_mig_every(), and at once (at most every MIG_AGAIN_NS) when
 * an instance's calls answered as if it were gone, re-reads the mode and the instance list and
 * follows them (mig_sync). An incomplete list changes nothing (one note); it is tried again. */
void nv_mig_follow(struct nvml_ctx *c, struct gpu *g);

/* ---- nvml_health.c ---- */

/* Creates the event set and registers every GPU for Xid and ECC events (a GPU that cannot is noted
 * once; its counters are still read), records each GPU's ECC mode as gpu.N.ecc_mode, and writes
 * the notes into the sink. */
void nv_health_start(struct nvml_ctx *c);
/* Takes what the event set holds now (nvmlEventSetWait_v2 with timeout 0: never blocks the tick)
 * and hands each Xid to its GPU, whose next nv_health_tick writes it. */
void nv_health_events(struct nvml_ctx *c);
/* Writes the Xid and ECC events the event set delivered for g (an event xid, gpu.xid,
 * gpu.xid_count): first in its tick, before any call that may find it lost, and for a GPU already
 * lost too (an Xid 79 comes as the GPU falls off the bus). Returns how many. */
int nv_health_xids(struct nvml_ctx *c, struct gpu *g);
/* Every HEALTH_EVERY_NS, GPU g's ECC, remapped rows, retired pages, PCIe replays and NVLink errors
 * (and gpu.xid, gpu.xid_count again once an Xid came, so /metrics keeps them fresh). */
void nv_health_tick(struct nvml_ctx *c, struct gpu *g);
/* Frees the event set (close, with the library still loaded). */
void nv_health_stop(struct nvml_ctx *c);

/* ---- nvml_procs.c ---- */

/* The processes on g this tick: each one's device memory and, from the driver's samples since the
 * last tick, its SM share; a process no longer listed gets no more points. */
void nv_procs_tick(struct nvml_ctx *c, struct gpu *g);

#endif
