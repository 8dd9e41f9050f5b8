/* collect: the collectors, one per source of signals (host procfs, the job's process tree, NVIDIA
 * GPUs through NVML). Each is a `struct collector` of function pointers listed in collect_registry;
 * the run loop opens them all, calls sample() once per tick (one wakeup for all of them) and closes
 * them at the end. Collectors write only into the sink; they never touch the store. */
#ifndef GS_COLLECT_H
#define GS_COLLECT_H

#include <stdio.h>
#include <sys/types.h>

#include "core/core.h"

/* What sample() returns: go on, skip this tick (try again next), or switch this collector off. */
enum { GS_COLLECT_OK = 0, GS_COLLECT_RETRY = 1, GS_COLLECT_DISABLE = 2 };

struct collector_opts {
  const char *root;     /* prefix for every procfs/sysfs path ("/" normally; tests use fixtures) */
  pid_t pid;            /* the job's root process (0: none, host only) */
  int64_t interval_ns;  /* the sampling interval */
  const char *nvml_lib; /* path of libnvidia-ml.so.1 to load (NULL: GPUSCOPE_NVML_LIB or default) */
  int subreaper;        /* the agent is the job's parent and a child subreaper: its orphans count */
  const char *labels;   /* proctree: labels of the tree's series ("pid=P,comm=C"; NULL: none) */
  int tree_only;        /* proctree: the tree's totals only, no per-process series */
};

struct collector {
  int version;                          /* 1 */
  const char *name;                     /* "host", "proctree", "nvml" */
  const struct gs_metric_desc *metrics; /* static description of what it emits */
  size_t n_metrics;
  /* Opens the collector. Returns its context, or NULL when the source is absent or unusable, with
   * a one-line reason in err (not an error for the run: the collector is simply off). */
  void *(*open)(const struct collector_opts *opts, struct gs_sink *sink, char *err, size_t errlen);
  /* Samples once at monotonic time now_ns into sink. Returns GS_COLLECT_OK/RETRY/DISABLE. */
  int (*sample)(void *ctx, struct gs_sink *sink, int64_t now_ns);
  /* Writes a few words for the end-of-run summary (may be NULL). */
  void (*summary)(void *ctx, FILE *out);
  /* Releases everything; must not block for long. ctx may be NULL. */
  void (*close)(void *ctx);
};

extern const struct collector collector_host;
extern const struct collector collector_proctree;
extern const struct collector collector_nvml;
/* The CPU side of every process NVML lists on a GPU (node mode: opts.pid 0): one proctree per GPU
 * process, at most GPUTREES_MAX, labelled pid= (the GPU process) and comm=. It reads NVML's
 * per-process series from the sink, so it samples after collector_nvml. */
extern const struct collector collector_gputrees;
#define GPUTREES_MAX 64

/* All collectors, in sampling order, NULL-terminated. */
extern const struct collector *const collect_registry[];

/* Helper for collectors: builds root + path into buf ("/" root gives path unchanged). */
const char *collect_path(const struct collector_opts *o, const char *path, char *buf, size_t n);

/* Counts the live descendants of pid (children, grandchildren...), reading every thread's children
 * list. Used at the end of a run to report what the job left behind. */
int collect_count_descendants(pid_t pid);
/* Lists the live descendants of pid (parents before their children) into *out, which the caller
 * frees (it may be NULL when there are none). Returns how many; 0 when none or out of memory. */
int collect_list_descendants(pid_t pid, pid_t **out);

/* ---- NVML specifics (collect/nvml*.c) ---- */

/* What `gpuscope devices` and the run's params say about one GPU. Text fields are "" and numbers
 * -1 when the driver cannot tell (missing is not zero). */
#define NVML_MAX_MIG 8 /* MIG instances listed per GPU (NVIDIA's GPUs have at most 7) */

/* One MIG instance (a GPU instance, through its first MIG device handle). */
struct nvml_mig_facts {
  unsigned slot;       /* its MIG device index under the GPU */
  unsigned gi, ci;     /* GPU-instance id (dcgm-exporter's GPU_I_ID), compute-instance id */
  char name[96];       /* "NVIDIA H100 80GB HBM3 MIG 1g.10gb" */
  char profile[32];    /* "1g.10gb": the name after " MIG ", "" when the name has none */
  char uuid[96];       /* "MIG-...", "" when unknown */
  long long mem_total; /* bytes, -1 when unknown */
};

struct nvml_facts {
  char name[96], uuid[96], pci_bus_id[32];
  int cc_major, cc_minor;                               /* -1 when unknown */
  long long mem_total;                                  /* bytes, -1 when unknown */
  int mig_current, mig_pending;                         /* 0/1, -1 when not supported */
  int fam_basic, fam_samples, fam_per_process, fam_gpm; /* metric families that answer */
  int n_mig;                                            /* MIG instances listed (MIG mode on) */
  int mig_unlisted;                                     /* MIG mode on but this library lacks the MIG device calls */
  struct nvml_mig_facts mig[NVML_MAX_MIG];
};

/* One GPU's health as `gpuscope devices` reads it now (collect/nvml_devices.c): every number -1
 * when the driver does not answer it (a consumer card has no ECC, a PCIe card no NVLink). */
struct nvml_health_now {
  long long ecc_sbe, ecc_dbe;      /* corrected / uncorrected ECC errors since the driver loaded */
  long long remap_corr, remap_unc; /* rows remapped */
  int remap_pending, remap_failure;
  long long retired_sbe, retired_dbe; /* retired pages (pre-Ampere) */
  int retired_pending;
  long long pcie_replays;
  long long nvlink_errors; /* replay + recovery + CRC errors, all active links */
  int unhealthy;           /* a remap pending or failed, a page retirement pending, uncorrected ECC, lost */
  char why[200];           /* what makes it unhealthy ("" when healthy) */
};

/* What `gpuscope devices` lists (report_devices prints it): the driver and every GPU NVML counts. */
struct nvml_devices {
  char driver[80]; /* the driver version, "" when unknown */
  unsigned n;
  struct nvml_device {
    struct nvml_facts facts; /* what was read before the device failed, when lost */
    int lost;                /* no handle, or the device was lost while its facts were read */
    struct nvml_health_now health;
  } * dev; /* n of them, by NVML index */
};

/* Loads NVML (lib: as collector_opts.nvml_lib), reads the driver version and each GPU's facts into
 * *d, a struct the caller owns, and releases NVML. Returns 0; GS_ENOENT with a message when no NVML
 * library could be loaded or it cannot count the GPUs (the caller prints it); or GS_ENOMEM.
 * collect_devices_done() releases what d holds (also after a failure), not d itself. */
int collect_devices_list(struct nvml_devices *d, const char *lib);
void collect_devices_done(struct nvml_devices *d);

#endif
