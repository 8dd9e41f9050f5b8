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
/* AMD GPUs through ROCm SMI (collect/rocm.c): the same series as NVML's (source "nvml"), numbered
 * after the NVIDIA GPUs, param gpu.N.vendor=amd; opens after collector_nvml. docs/amd.md. */
extern const struct collector collector_rocm;
/* The CPU side of every process NVML lists on a GPU (node mode: opts.pid 0): one proctree per GPU
 * process, at most GPUTREES_MAX, labelled pid= (the GPU process) and comm=. It reads NVML's
 * per-process series from the sink, so it samples after collector_nvml. */
extern const struct collector collector_gputrees;
#define GPUTREES_MAX 64
/* Whose work is on each GPU (collect/gpu_owners.c; samples after collector_nvml). Node mode: the
 * series gpu_proc.owner per GPU process (pid, nspid, runtime, container, pod_uid, hpc_job) and the
 * params gpu.N.hpc_job / namespace / pod / container. A run in a PID namespace of its own: a note
 * when NVML lists pids from outside it. Off for a run on the host. */
extern const struct collector collector_gpuowners;

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

/* ---- cgroups and the other per-process files (collect/proc_pid_cgroup.c): the one reader of
 * /proc/PID/cgroup and /proc/self/mountinfo, behind the root prefix (NULL or "/": the real one) ---- */

/* The controllers gpuscope reads, each found on its own hierarchy. */
enum { COLLECT_CG_CPU, COLLECT_CG_CPUACCT, COLLECT_CG_MEMORY, COLLECT_CG_CPUSET, COLLECT_CG_N };
/* The host's layout as the process sees it: no cgroup found, all on v2, all on v1, or v1
 * controllers beside a v2 hierarchy (v2 mounted at /sys/fs/cgroup/unified with no controllers). */
enum { COLLECT_CG_NONE, COLLECT_CG_V2, COLLECT_CG_V1, COLLECT_CG_HYBRID };
#define COLLECT_CG_DIR_MAX 640
/* v1 writes "no memory limit" as the largest page-aligned counter (9223372036854771712). */
#define COLLECT_CG_V1_UNLIMITED 4611686018427387904.0 /* 2^62: no real limit is that large */

struct collect_cgroup {
  char dir[COLLECT_CG_N][COLLECT_CG_DIR_MAX]; /* each controller's folder ("/sys/fs/cgroup/memory/job"),
                                                 without the root prefix; "" when not found */
  int v1[COLLECT_CG_N];                       /* 1: on a cgroup v1 hierarchy, 0: on the unified one */
  char path[COLLECT_CG_N][512];               /* each one's cgroup path (its /proc/PID/cgroup line) */
  char v2_path[512];                          /* the "0::" line's path, "" when none */
  int layout;                                 /* COLLECT_CG_NONE / V2 / V1 / HYBRID */
};

/* Finds pid's cgroup folder for each controller (pid 0: this process): its line of /proc/PID/cgroup
 * and its hierarchy's mount in /proc/self/mountinfo (without a mountinfo, the usual places under
 * /sys/fs/cgroup). Fills *cg (the caller's). Returns 0, or -1 when /proc/PID/cgroup is unreadable. */
int collect_cgroup_find(const char *root, pid_t pid, struct collect_cgroup *cg);
/* "none", "v2", "v1", "hybrid". Never NULL. */
const char *collect_cgroup_layout_name(int layout);
/* This process's cgroup path into buf: the v2 path, or where v2 says only "/" (v1, hybrid) the
 * memory hierarchy's. Returns 0, or -1 when there is none or it does not fit. */
int collect_cgroup_path(const char *root, char *buf, size_t n);

/* A cgroup's memory limit, peak and OOM kills, from the layout's own files. */
struct collect_oom {
  long long kills;      /* OOM kills so far (v2 memory.events oom_kill, v1 memory.oom_control); -1 unknown */
  long long limit_hits; /* times usage reached the limit (v2 memory.events max, v1 memory.failcnt); -1 unknown */
  double limit_bytes;   /* memory.max / memory.limit_in_bytes; NAN when none or unknown */
  double peak_bytes;    /* memory.peak (kernel 5.19 on) / memory.max_usage_in_bytes; NAN when unknown */
};
/* Reads pid's (0: this process's) memory cgroup into *o. Returns 0, or -1 when no memory cgroup
 * was found (then *o says unknown throughout). Can't fail otherwise. */
int collect_cgroup_oom(const char *root, pid_t pid, struct collect_oom *o);

/* Reads /proc/PID/FILE (pid <= 0: /proc/FILE) under the root: up to n-1 bytes into buf,
 * NUL-terminated (NULs inside, as in environ and cmdline, are kept). Returns the bytes read, or -1
 * with errno set when it cannot be opened or read. */
ssize_t collect_proc_read(const char *root, pid_t pid, const char *file, char *buf, size_t n);
/* The running gpuscope binary, to start again (top -- CMD). */
#define COLLECT_SELF_EXE "/proc/self/exe"
/* This boot's id (/proc/sys/kernel/random/boot_id) into buf, "" when unknown. Can't fail. */
void collect_boot_id(char *buf, size_t n);

/* ---- who a process belongs to (collect/proc_pid_owner.c) ---- */

/* A process's container, pod and Slurm job as its cgroup paths name them; "" for each one unknown. */
struct collect_owner {
  char runtime[16];   /* "docker", "containerd", "cri-o", "podman"; "" when the path does not say */
  char container[72]; /* the container id (64 hex) */
  char pod_uid[40];   /* the Kubernetes pod's UID (8-4-4-4-12) */
  char hpc_job[24];   /* the Slurm job id */
  long nspid;         /* its pid inside its own PID namespace (the last NSpid); -1 unknown */
  int ns_levels;      /* PID namespaces it is in (1: only the host's); 0 unknown */
};
/* Reads what one cgroup path says into *o, filling only fields still empty and keeping the others.
 * Paths as the kernel writes them; any bytes are safe (each field is checked for its shape). */
void collect_owner_parse(const char *path, struct collect_owner *o);
/* Fills *o (the caller's) from /proc/PID/cgroup (every line) and /proc/PID/status under the root.
 * Returns 0, or -1 when the process's cgroup file cannot be read (gone, or another namespace's). */
int collect_owner_of(const char *root, pid_t pid, struct collect_owner *o);

/* A pod's names, from the kubelet's log folders. */
struct collect_pod {
  char ns[64], pod[256], container[64];
};
/* Finds pod uid's namespace and name (/var/log/pods/NAMESPACE_POD_UID under the root, or under
 * $GPUSCOPE_KUBELET_LOGS where a DaemonSet mounted the node's /var/log) and, with a container id
 * cid (NULL: none), the container's name (/var/log/containers/POD_NS_NAME-CID.log).
 * Returns 0 (container "" when not found), or -1 when the pod's folder is not there. */
int collect_k8s_pod(const char *root, const char *uid, const char *cid, struct collect_pod *pod);
/* A GPU a pod holds, from the kubelet's pod-resources API (collect/kubelet_podres.c). */
struct collect_podres_gpu {
  char uuid[96]; /* the device id: GPU-... or MIG-... */
  char ns[64], pod[256], container[64];
};
/* Calls PodResourcesLister.List (pod-resources v1) on the kubelet's socket sock, waiting at most
 * timeout_ms for each answer, and lists the nvidia.com/ devices pods hold into out (max of them).
 * Returns how many, or -1 with a one-line reason in err. */
int collect_podres_list(const char *sock, int timeout_ms, struct collect_podres_gpu *out, int max, char *err,
                        size_t errlen);
/* Decodes a ListPodResourcesResponse (protobuf; any bytes are safe) into out. Returns how many
 * devices, or -1 when it is malformed. */
int collect_podres_decode(const uint8_t *msg, size_t len, struct collect_podres_gpu *out, int max);

/* Inside a pod: its namespace, from the service account's mounted file
 * (/var/run/secrets/kubernetes.io/serviceaccount/namespace under the root) into buf. Returns 0, or
 * -1 when there is none or it is not a Kubernetes name. */
int collect_k8s_own_namespace(const char *root, char *buf, size_t n);
/* The Slurm job(s) on GPU gpu from dcgm-exporter's mapping folder (DCGM_HPC_JOB_MAPPING_DIR: a file
 * per GPU index, one job id a line, written by the prolog): the ids joined with ',' into buf.
 * Returns 0, or -1 when there is no such file or it names no job. */
int collect_hpc_job_file(const char *dir, int gpu, char *buf, size_t n);

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
  /* An AMD GPU (collect/rocm_devices.c, listed after the NVIDIA ones): vendor "amd", its power cap,
   * serial number and gfx target ("gfx942"); NVIDIA's: vendor "", power_cap_w -1. */
  char vendor[8], serial[32], gfx[16];
  double power_cap_w; /* W, -1 when unknown */
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

/* What `gpuscope devices` lists (report_devices prints it): the driver and every GPU NVML counts,
 * then the AMD GPUs ROCm SMI counts (n_amd of the n, the last ones). */
struct nvml_devices {
  char driver[80]; /* the driver version, "" when unknown */
  unsigned n, n_amd;
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
/* Appends the AMD GPUs ROCm SMI counts to d (collect/rocm_devices.c; the library: $GPUSCOPE_ROCM_SMI_LIB
 * or librocm_smi64.so). Returns how many, 0 when there is no library or no GPU; -1 out of memory. */
int collect_devices_append_amd(struct nvml_devices *d);
void collect_devices_done(struct nvml_devices *d);

#endif
