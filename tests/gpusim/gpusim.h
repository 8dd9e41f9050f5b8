/* gpusim: the scenario model behind the simulated libnvidia-ml.so.1 (see README.md beside this for
 * the file format). A scenario is a list of devices; each has static facts, a timeline of segments
 * (values hold from a segment's start until the next one, optionally repeating with a period) and
 * faults (an error code or a sleep inside one call, over a time window). Time is seconds since the
 * first nvmlInit. gpusim_scn.c parses and evaluates; gpusim.c is the NVML surface. */
#ifndef GPUSIM_H
#define GPUSIM_H

#include <stddef.h>

/* Timeline quantities (names as written in `at` lines). */
enum sim_key {
  K_UTIL,      /* % */
  K_MEM_UTIL,  /* % */
  K_MEM_USED,  /* bytes */
  K_POWER,     /* W */
  K_TEMP,      /* C */
  K_SM_CLOCK,  /* MHz */
  K_MEM_CLOCK, /* MHz */
  K_THROTTLE,  /* bitmask */
  K_PCIE_TX,   /* bytes/s */
  K_PCIE_RX,   /* bytes/s */
  K_FAN,       /* % */
  K_PSTATE,    /* 0..15 */
  K_SM_ACTIVE, /* GPM, % */
  K_SM_OCC,    /* GPM, % */
  K_TENSOR,    /* GPM, % */
  K_DRAM,      /* GPM, % */
  K_FP16,      /* GPM, % */
  K_FP32,      /* GPM, % */
  K_FP64,      /* GPM, % */
  K_NVLINK_RX, /* GPM, bytes/s */
  K_NVLINK_TX, /* GPM, bytes/s */
  K_GR_ACTIVE, /* GPM, % (graphics/compute engine active; defaults to util when never set) */
  /* health counters: the value set plus the integral of the matching _per_s rate, where it has one */
  K_ECC_SBE,         /* corrected ECC errors, volatile */
  K_ECC_DBE,         /* uncorrected ECC errors, volatile */
  K_ECC_SBE_AGG,     /* aggregate = volatile + this (errors before the driver loaded) */
  K_ECC_DBE_AGG,     /* ... */
  K_REMAP_CORR,      /* rows remapped, correctable */
  K_REMAP_UNC,       /* rows remapped, uncorrectable */
  K_REMAP_PENDING,   /* 0/1 */
  K_REMAP_FAILURE,   /* 0/1 */
  K_RETIRED_SBE,     /* retired pages, multiple single-bit */
  K_RETIRED_DBE,     /* retired pages, double-bit */
  K_RETIRED_PENDING, /* 0/1 */
  K_PCIE_REPLAY,     /* PCIe replay counter */
  K_NVLINK_REPLAY,   /* NVLink error counters (link 0's; the other links' are 0) */
  K_NVLINK_RECOVERY,
  K_NVLINK_CRC_FLIT,
  K_NVLINK_CRC_DATA,
  K_ECC_SBE_RATE, /* per second, integrated into K_ECC_SBE */
  K_ECC_DBE_RATE,
  K_PCIE_REPLAY_RATE,
  K_NVLINK_REPLAY_RATE,
  K_NKEYS
};
extern const char *const sim_key_names[K_NKEYS];

/* Calls a fault can target ("all" = every call on the device). */
enum sim_call {
  SC_ALL,
  SC_NAME,
  SC_UUID,
  SC_PCI,
  SC_CC,
  SC_UTIL,
  SC_SAMPLES,
  SC_MEM,
  SC_POWER,
  SC_POWER_LIMIT,
  SC_ENERGY,
  SC_TEMP,     /* the sensor: both temperature calls */
  SC_TEMP_V,   /* nvmlDeviceGetTemperatureV only */
  SC_TEMP_OLD, /* the deprecated nvmlDeviceGetTemperature only */
  SC_CLOCK,
  SC_MAX_CLOCK,
  SC_THROTTLE,
  SC_PCIE,
  SC_FAN,
  SC_PSTATE,
  SC_PROCS,
  SC_PROC_UTIL,
  SC_MIG,     /* nvmlDeviceGetMigMode */
  SC_MIG_DEV, /* the MIG device calls: max count, handle by index, instance ids, parent */
  SC_GPM,
  SC_EVENTS, /* nvmlDeviceRegisterEvents */
  SC_ECC,    /* nvmlDeviceGetTotalEccErrors, nvmlDeviceGetEccMode */
  SC_REMAP,  /* nvmlDeviceGetRemappedRows */
  SC_RETIRED,
  SC_PCIE_REPLAY,
  SC_NVLINK, /* nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkErrorCounter */
  SC_NCALLS
};
extern const char *const sim_call_names[SC_NCALLS];

#define SIM_MAX_PROCS 16
#define SIM_MAX_MIG 7       /* MIG devices under one GPU at once (NVIDIA's A100/H100 maximum) */
#define SIM_MAX_MIG_DECL 16 /* mig_instance lines per GPU: instances created and destroyed over time */

struct sim_proc {
  int jobpid; /* the pid is "$JOBPID", resolved at each call */
  unsigned pid;
  unsigned long long mem; /* bytes */
  unsigned sm;            /* % */
};

struct sim_seg {
  double t;
  double v[K_NKEYS];
  unsigned char set[K_NKEYS];
  int procs_set;
  int nprocs;
  struct sim_proc procs[SIM_MAX_PROCS];
};

struct sim_fault {
  enum sim_call call;
  double from, until; /* [from, until) seconds */
  int code;           /* NVML return code, 0 with slow_ms */
  int slow_ms;        /* sleep this long inside the call */
};

/* An event the driver reports at a time: an Xid (`xid CODE at T`) or an ECC error (`ecc_event`). */
struct sim_event {
  double t;
  unsigned long long type; /* nvmlEventType* */
  unsigned data, gi, ci;   /* the Xid code; the MIG instance (0xFFFFFFFF: none) */
};
#define SIM_MAX_EVENTS 32

struct sim_dev {
  unsigned index;
  char name[96], uuid[96], pci[32];
  int cc_major, cc_minor;
  unsigned long long mem_total, mem_reserved;
  double power_limit_w;
  unsigned max_sm, max_mem;
  int gpm;       /* GPM supported */
  int mig;       /* -1 not supported, 0 off, 1 on (from time 0; see sim_mig_mode) */
  double mig_at; /* the MIG mode becomes mig_to from this time (INFINITY: never) */
  int mig_to;
  double sample_hz;
  int samples_when_idle;
  unsigned long long energy_start_mj;
  double period;           /* > 0: the timeline repeats */
  double lost_at, gone_at; /* INFINITY when never */
  unsigned gpm_unsupported[16];
  int n_gpm_unsupported;
  unsigned dcgm_unsupported[8]; /* DCGM field ids the simulated libdcgm answers "not supported" on this GPU */
  int n_dcgm_unsupported;
  struct sim_seg *segs;
  int nsegs, cap_segs;
  struct sim_fault *faults;
  int nfaults, cap_faults;
  /* MIG: a device in MIG mode holds its instances (`mig_instance` lines), each a sim_dev of its own
   * (its timeline from `in GI ...` lines) whose handle is a MIG device handle. */
  struct sim_dev *migs;
  int nmigs;
  struct sim_dev *parent; /* set on an instance (after loading): the GPU it is part of */
  unsigned gi, ci, slot;  /* an instance's GPU-instance id, compute-instance id, MIG device index */
  double from_at;         /* an instance exists from from_at until gone_at (seconds) */
  char profile[32];       /* an instance's profile name, "1g.10gb" */
  unsigned nvlinks;       /* active NVLinks (0: none, NVLink calls NOT_SUPPORTED) */
  struct sim_event events[SIM_MAX_EVENTS];
  int nevents;
  int amd;         /* `vendor amd`: a ROCm SMI device (librocm_smi64, rocmsim.c), not an NVML one */
  char serial[32]; /* `serial X`: rsmi_dev_serial_number_get (default derived from the index) */
  /* `gpu_metrics 1.N [unfilled]`: the firmware's metrics table rsmi_dev_gpu_metrics_info_get gives
   * (content revision N; unfilled: every field all ones, as a firmware that fills none); 0: none,
   * the call answers NOT_SUPPORTED */
  int metrics_content, metrics_unfilled;
};

struct sim_scn {
  char driver[80];
  int cuda; /* nvmlSystemGetCudaDriverVersion: 1000 x major + 10 x minor (12040 is 12.4); 0: not supported */
  unsigned ndev;
  struct sim_dev *dev;
  int dcgm_hostengine; /* `dcgm hostengine`: the simulated libdcgm's dcgmConnect_v2 succeeds */
  int dcgm_watch_code; /* `dcgm profiling ...`: what its dcgmWatchFields answers (0: DCGM_ST_OK) */
};

/* Parses the scenario file at path into *s. Returns 0, or -1 with "file:line: message" in err. */
int sim_scn_load(const char *path, struct sim_scn *s, char *err, size_t errlen);
void sim_scn_free(struct sim_scn *s);
/* Keeps only one vendor's devices (amd 1: the `vendor amd` ones, 0: the others), numbered from 0 in
 * the file's order: the NVML and ROCm SMI stand-ins each see their own GPUs of one scenario. */
void sim_scn_keep(struct sim_scn *s, int amd);

/* CLOCK_MONOTONIC in seconds. */
double sim_mono_s(void);
/* The scenario time of the DCGM and ROCm SMI stand-ins: the number $GPUSIM_CLOCK's file holds (0
 * when unreadable), else the seconds since t0_mono (a sim_mono_s reading at the library's init). */
double sim_clock_s(double t0_mono);

/* The segment in force at t seconds (never NULL after a successful load). */
const struct sim_seg *sim_seg_at(const struct sim_dev *d, double t);
/* The value of k at t. */
double sim_value(const struct sim_dev *d, enum sim_key k, double t);
/* The integral of k over [t0, t1] (value-seconds). */
double sim_integral(const struct sim_dev *d, enum sim_key k, double t0, double t1);
/* The time within [t0, t1] that k's value, as a bitmask, has any of bits set (seconds). */
double sim_integral_bits(const struct sim_dev *d, enum sim_key k, unsigned long long bits, double t0, double t1);
/* A health counter at t: the value set plus the integral of its rate key (K_NKEYS: none). */
double sim_counter(const struct sim_dev *d, enum sim_key k, double t);
/* Device d's MIG mode at t: -1 not supported, 0 off, 1 on. */
int sim_mig_mode(const struct sim_dev *d, double t);
/* Whether MIG instance x exists at t (created by then, not yet destroyed). */
int sim_mig_alive(const struct sim_dev *x, double t);

/* gpusim.c's helpers for gpusim_health.c (hidden: not exported from the library). */
struct nvmlDevice_st;
int gpusim_check(struct nvmlDevice_st *h, enum sim_call call, struct sim_dev **dp, double *t);
long long gpusim_thread_cpu(void);
void gpusim_account(long long cpu_t0);
double gpusim_now(void);
void gpusim_lock(int on);
struct sim_scn *gpusim_scn(void);

#endif
