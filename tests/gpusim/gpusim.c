/* gpusim/gpusim: a simulated libnvidia-ml.so.1 for tests and benchmarks. It exports the NVML entry
 * points gpuscope uses (versioned and unversioned names; built with -DGPUSIM_LEGACY it exports only
 * the names an old driver had) and answers them from the scenario file named by $GPUSIM_SCENARIO,
 * with time counted from the first nvmlInit. Faults from the scenario make a call fail or sleep.
 *
 * It also keeps account of its own CPU time (each entry point measures its thread's CPU clock), so
 * a benchmark can subtract the simulator from the agent's cost: gpusim_cpu_ns(), and the file named
 * by $GPUSIM_CPU_FILE, written at the last nvmlShutdown and at exit. */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collect/nvml_api.h"
#include "gpusim.h"

#define EXPORT __attribute__((visibility("default")))
#define SAMPLE_BUFFER 120 /* driver samples kept per device and type (20 s at 6 Hz) */

static struct {
  pthread_mutex_t mu;
  int refs;
  struct sim_scn scn;
  int64_t t0_mono_ns, t0_wall_us;
  atomic_llong cpu_ns;
  atomic_llong calls;
  atomic_int in_slow;
  _Atomic double clock_s; /* the last time read from $GPUSIM_CLOCK's file (clock_file_s) */
  /* $JOBPID cache */
  pthread_mutex_t pid_mu;
  unsigned jobpid;
  int64_t jobpid_at;
} G = {.mu = PTHREAD_MUTEX_INITIALIZER, .pid_mu = PTHREAD_MUTEX_INITIALIZER};

struct sim_gpm_sample {
  unsigned magic;
  int dev;
  int gi; /* -1: the whole device (nvmlGpmSampleGet); else a GPU instance (nvmlGpmMigSampleGet) */
  double t;
};
#define GPM_MAGIC 0x6770756du

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The scenario time of a test-driven clock: the number (seconds) that $GPUSIM_CLOCK's file holds
 * now, re-read at every call, so a test moves the scenario forward when it has seen what it waited
 * for instead of racing the wall clock; the last good value while the file is missing, empty or
 * half-written (0 before the first). Only the timeline lookups read it: driver sample timestamps
 * still count from the real time 0. */
static double clock_file_s(const char *path) {
  char buf[64];
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return atomic_load(&G.clock_s);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  char *end;
  double t = n > 0 ? (buf[n] = 0, strtod(buf, &end)) : 0;
  if (n > 0 && end != buf && isfinite(t) && t >= 0)
    atomic_store(&G.clock_s, t);
  return atomic_load(&G.clock_s);
}

static double now_s(void) {
  const char *clock = getenv("GPUSIM_CLOCK");
  if (clock && *clock)
    return clock_file_s(clock);
  return (double)(clock_ns(CLOCK_MONOTONIC) - G.t0_mono_ns) / 1e9;
}

/* Every exported call runs inside ACCT so its CPU time is counted as the simulator's. */
#define ACCT(expr)                                                                                                     \
  do {                                                                                                                 \
    int64_t t0_ = clock_ns(CLOCK_THREAD_CPUTIME_ID);                                                                   \
    nvmlReturn_t r_ = (expr);                                                                                          \
    atomic_fetch_add(&G.cpu_ns, clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0_);                                              \
    atomic_fetch_add(&G.calls, 1);                                                                                     \
    return r_;                                                                                                         \
  } while (0)

static void write_cpu_file(void) {
  const char *path = getenv("GPUSIM_CPU_FILE");
  if (!path || !*path)
    return;
  FILE *f = fopen(path, "w");
  if (!f)
    return;
  fprintf(f, "%lld %lld\n", (long long)atomic_load(&G.cpu_ns), (long long)atomic_load(&G.calls));
  fclose(f);
}

__attribute__((destructor)) static void gpusim_fini(void) {
  write_cpu_file();
}

/* ---- control symbols for tests and benchmarks (not NVML) ---- */

/* CPU nanoseconds spent inside the simulator's entry points so far, all threads. */
EXPORT long long gpusim_cpu_ns(void) {
  return atomic_load(&G.cpu_ns);
}
/* Number of NVML calls answered so far. */
EXPORT long long gpusim_calls(void) {
  return atomic_load(&G.calls);
}
/* CLOCK_MONOTONIC nanoseconds of the first nvmlInit (the scenario's time 0); 0 when not initialised. */
EXPORT long long gpusim_t0_mono_ns(void) {
  return G.refs ? G.t0_mono_ns : 0;
}
/* How many threads are sleeping inside a `slow` fault right now. */
EXPORT int gpusim_in_slow_call(void) {
  return atomic_load(&G.in_slow);
}

/* ---- helpers ---- */

static int in_array(const struct sim_dev *d, const struct sim_dev *a, int n) {
  uintptr_t p = (uintptr_t)d, lo = (uintptr_t)a, hi = (uintptr_t)(a + n);
  return a && p >= lo && p < hi && (p - lo) % sizeof *a == 0;
}

/* The device (or MIG instance) a handle names, NULL when it names none. */
static struct sim_dev *dev_of(nvmlDevice_t h) {
  struct sim_dev *d = (struct sim_dev *)h;
  if (!G.refs || !d)
    return NULL;
  if (in_array(d, G.scn.dev, (int)G.scn.ndev))
    return d;
  for (unsigned i = 0; i < G.scn.ndev; i++)
    if (in_array(d, G.scn.dev[i].migs, G.scn.dev[i].nmigs))
      return sim_mig_mode(&G.scn.dev[i], now_s()) == 1 ? d : NULL; /* a MIG handle is valid while MIG is on */
  return NULL;
}

#ifndef GPUSIM_LEGACY
/* The instance of GPU d with GPU-instance id gi that exists at t, NULL when none. */
static struct sim_dev *mig_of(struct sim_dev *d, unsigned gi, double t) {
  for (int i = 0; i < d->nmigs; i++)
    if (d->migs[i].gi == gi && sim_mig_alive(&d->migs[i], t))
      return &d->migs[i];
  return NULL;
}
#endif

/* What a MIG device handle answers, as on a real driver: its name, UUID, memory, processes and the
 * MIG calls. Everything else (utilisation, power, clocks, ...) is NOT_SUPPORTED. */
static int mig_handle_answers(enum sim_call call) {
  return call == SC_NAME || call == SC_UUID || call == SC_MEM || call == SC_PROCS || call == SC_MIG_DEV;
}

static nvmlReturn_t fault_code(const struct sim_dev *d, enum sim_call call, double now) {
  for (int i = 0; i < d->nfaults; i++) {
    const struct sim_fault *f = &d->faults[i];
    if (f->code && (f->call == call || f->call == SC_ALL) && now >= f->from && now < f->until)
      return f->code;
  }
  return NVML_SUCCESS;
}

static void sleep_ms(int ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  atomic_fetch_add(&G.in_slow, 1);
  while (nanosleep(&ts, &ts))
    ;
  atomic_fetch_sub(&G.in_slow, 1);
}

/* Applies the device's faults to one call at this moment: sleeps for `slow` faults, returns the
 * code of a failing one, GPU_IS_LOST after `lost`/`gone`. Sets *t to the time the call answers. */
static nvmlReturn_t check(nvmlDevice_t h, enum sim_call call, struct sim_dev **dp, double *t) {
  struct sim_dev *d = dev_of(h);
  if (!G.refs)
    return NVML_ERROR_UNINITIALIZED;
  if (!d)
    return NVML_ERROR_INVALID_ARGUMENT;
  double now = now_s();
  for (int i = 0; i < d->nfaults; i++) {
    struct sim_fault *f = &d->faults[i];
    if (f->slow_ms && (f->call == call || f->call == SC_ALL) && now >= f->from && now < f->until)
      sleep_ms(f->slow_ms);
  }
  now = now_s();
  const struct sim_dev *gpu = d->parent ? d->parent : d;
  if (now >= gpu->lost_at || now >= gpu->gone_at)
    return NVML_ERROR_GPU_IS_LOST;
  if (d->parent && !sim_mig_alive(d, now))
    return NVML_ERROR_INVALID_ARGUMENT; /* the handle of an instance not (or no longer) there */
  if (d->parent && now >= d->lost_at)
    return NVML_ERROR_GPU_IS_LOST;
  if (d->parent && !mig_handle_answers(call))
    return NVML_ERROR_NOT_SUPPORTED;
  nvmlReturn_t r = fault_code(d, call, now);
  if (r == NVML_SUCCESS && d->parent)
    r = fault_code(d->parent, call, now);
  if (r != NVML_SUCCESS)
    return r;
  *dp = d;
  *t = now;
  return NVML_SUCCESS;
}

#define CHECK(h, call)                                                                                                 \
  struct sim_dev *d = NULL;                                                                                            \
  double t = 0;                                                                                                        \
  nvmlReturn_t rc_ = check((h), (call), &d, &t);                                                                       \
  if (rc_ != NVML_SUCCESS)                                                                                             \
    return rc_;

/* The lowest-numbered child of this process: what `gpuscope run` forked (the job). */
static unsigned first_child(void) {
  DIR *dir = opendir("/proc");
  if (!dir)
    return 0;
  unsigned best = 0;
  pid_t self = getpid();
  struct dirent *e;
  while ((e = readdir(dir))) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9')
      continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')');
    int ppid;
    char state;
    if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == self) {
      unsigned pid = (unsigned)strtoul(e->d_name, NULL, 10);
      if (!best || pid < best)
        best = pid;
    }
  }
  closedir(dir);
  return best;
}

/* $JOBPID: $GPUSIM_JOBPID when set, else this process's first child (looked up at most twice a
 * second); 0 when there is none. */
static unsigned jobpid(void) {
  const char *e = getenv("GPUSIM_JOBPID");
  if (e && *e)
    return (unsigned)strtoul(e, NULL, 10);
  int64_t now = clock_ns(CLOCK_MONOTONIC);
  pthread_mutex_lock(&G.pid_mu);
  if (!G.jobpid || now - G.jobpid_at > 500000000LL) {
    G.jobpid = first_child();
    G.jobpid_at = now;
  }
  unsigned p = G.jobpid;
  pthread_mutex_unlock(&G.pid_mu);
  return p;
}

/* The processes in force at t with $JOBPID resolved; returns how many. */
static int procs_at(const struct sim_dev *d, double t, struct sim_proc *out) {
  const struct sim_seg *g = sim_seg_at(d, t);
  int n = 0;
  for (int i = 0; i < g->nprocs; i++) {
    out[n] = g->procs[i];
    if (out[n].jobpid && !(out[n].pid = jobpid()))
      continue;
    n++;
  }
  return n;
}

#ifndef GPUSIM_LEGACY
static unsigned long long wall_us_at(double t) {
  return (unsigned long long)(G.t0_wall_us + llround(t * 1e6));
}
#endif

/* ---- init / system ---- */

static nvmlReturn_t init_impl(void) {
  pthread_mutex_lock(&G.mu);
  nvmlReturn_t r = NVML_SUCCESS;
  if (G.refs == 0) {
    const char *path = getenv("GPUSIM_SCENARIO");
    char err[512];
    if (!path || !*path) {
      r = NVML_ERROR_DRIVER_NOT_LOADED;
    } else if (sim_scn_load(path, &G.scn, err, sizeof err)) {
      fprintf(stderr, "gpusim: %s\n", err);
      r = NVML_ERROR_UNKNOWN;
    } else {
      sim_scn_keep(&G.scn, 0); /* `vendor amd` devices are the ROCm SMI stand-in's */
      /* one instant on both clocks: the wall read between two monotonic reads, the tightest of
       * three tries, so a preemption cannot shift every driver timestamp against the tests' grid */
      int64_t best = INT64_MAX;
      for (int i = 0; i < 3 && best > 20000; i++) {
        int64_t a = clock_ns(CLOCK_MONOTONIC), w = clock_ns(CLOCK_REALTIME), b = clock_ns(CLOCK_MONOTONIC);
        if (b - a < best)
          best = b - a, G.t0_mono_ns = a + (b - a) / 2, G.t0_wall_us = w / 1000;
      }
    }
  }
  if (r == NVML_SUCCESS)
    G.refs++;
  pthread_mutex_unlock(&G.mu);
  return r;
}

static nvmlReturn_t shutdown_impl(void) {
  pthread_mutex_lock(&G.mu);
  nvmlReturn_t r = NVML_SUCCESS;
  if (G.refs == 0)
    r = NVML_ERROR_UNINITIALIZED;
  else if (--G.refs == 0)
    sim_scn_free(&G.scn);
  pthread_mutex_unlock(&G.mu);
  if (r == NVML_SUCCESS && G.refs == 0)
    write_cpu_file();
  return r;
}

#ifndef GPUSIM_LEGACY
EXPORT nvmlReturn_t nvmlInit_v2(void) {
  ACCT(init_impl());
}
#endif
EXPORT nvmlReturn_t nvmlInit(void) {
  ACCT(init_impl());
}
EXPORT nvmlReturn_t nvmlShutdown(void) {
  ACCT(shutdown_impl());
}

EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
  case NVML_SUCCESS:
    return "Success";
  case NVML_ERROR_UNINITIALIZED:
    return "Uninitialized";
  case NVML_ERROR_INVALID_ARGUMENT:
    return "Invalid Argument";
  case NVML_ERROR_NOT_SUPPORTED:
    return "Not Supported";
  case NVML_ERROR_NO_PERMISSION:
    return "Insufficient Permissions";
  case NVML_ERROR_ALREADY_INITIALIZED:
    return "Already Initialized";
  case NVML_ERROR_NOT_FOUND:
    return "Not Found";
  case NVML_ERROR_INSUFFICIENT_SIZE:
    return "Insufficient Size";
  case NVML_ERROR_DRIVER_NOT_LOADED:
    return "Driver Not Loaded";
  case NVML_ERROR_TIMEOUT:
    return "Timeout";
  case NVML_ERROR_GPU_IS_LOST:
    return "GPU is lost";
  case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
    return "Argument Version Mismatch";
  case NVML_ERROR_NO_DATA:
    return "No data";
  case NVML_ERROR_GPU_NOT_FOUND:
    return "GPU not found";
  default:
    return "Unknown Error";
  }
}

static nvmlReturn_t driver_impl(char *buf, unsigned len) {
  if (!G.refs)
    return NVML_ERROR_UNINITIALIZED;
  if (!buf || strlen(G.scn.driver) + 1 > len)
    return NVML_ERROR_INSUFFICIENT_SIZE;
  snprintf(buf, len, "%s", G.scn.driver);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned len) {
  ACCT(driver_impl(buf, len));
}

static nvmlReturn_t cuda_impl(int *v) {
  if (!G.refs)
    return NVML_ERROR_UNINITIALIZED;
  if (!v)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!G.scn.cuda)
    return NVML_ERROR_NOT_SUPPORTED;
  *v = G.scn.cuda;
  return NVML_SUCCESS;
}
/* The CUDA version the driver supports (what nvidia-smi's "CUDA Version" says). */
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
  ACCT(cuda_impl(v));
}
#ifndef GPUSIM_LEGACY
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
  ACCT(cuda_impl(v));
}
#endif

/* Devices that are `gone` no longer count, and the indices of the later ones shift down. */
static nvmlReturn_t count_impl(unsigned *n) {
  if (!G.refs)
    return NVML_ERROR_UNINITIALIZED;
  if (!n)
    return NVML_ERROR_INVALID_ARGUMENT;
  double t = now_s();
  unsigned c = 0;
  for (unsigned i = 0; i < G.scn.ndev; i++)
    c += t < G.scn.dev[i].gone_at;
  *n = c;
  return NVML_SUCCESS;
}

static nvmlReturn_t handle_impl(unsigned index, nvmlDevice_t *h) {
  if (!G.refs)
    return NVML_ERROR_UNINITIALIZED;
  if (!h)
    return NVML_ERROR_INVALID_ARGUMENT;
  double t = now_s();
  for (unsigned i = 0; i < G.scn.ndev; i++) {
    if (t >= G.scn.dev[i].gone_at)
      continue;
    if (index-- == 0) {
      *h = (nvmlDevice_t)&G.scn.dev[i];
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_INVALID_ARGUMENT;
}

#ifndef GPUSIM_LEGACY
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) {
  ACCT(count_impl(n));
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *h) {
  ACCT(handle_impl(i, h));
}
#endif
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned *n) {
  ACCT(count_impl(n));
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned i, nvmlDevice_t *h) {
  ACCT(handle_impl(i, h));
}

/* ---- static facts ---- */

static nvmlReturn_t str_out(const char *s, char *buf, unsigned len) {
  if (!buf || strlen(s) + 1 > len)
    return NVML_ERROR_INSUFFICIENT_SIZE;
  snprintf(buf, len, "%s", s);
  return NVML_SUCCESS;
}

static nvmlReturn_t name_impl(nvmlDevice_t h, char *buf, unsigned len) {
  CHECK(h, SC_NAME);
  return str_out(d->name, buf, len);
}
static nvmlReturn_t uuid_impl(nvmlDevice_t h, char *buf, unsigned len) {
  CHECK(h, SC_UUID);
  return str_out(d->uuid, buf, len);
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *buf, unsigned len) {
  ACCT(name_impl(h, buf, len));
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *buf, unsigned len) {
  ACCT(uuid_impl(h, buf, len));
}

static nvmlReturn_t pci_impl(nvmlDevice_t h, nvmlPciInfo_t *p) {
  CHECK(h, SC_PCI);
  if (!p)
    return NVML_ERROR_INVALID_ARGUMENT;
  memset(p, 0, sizeof *p);
  unsigned dom = 0, bus = 0, dv = 0, fn = 0;
  sscanf(d->pci, "%x:%x:%x.%x", &dom, &bus, &dv, &fn);
  p->domain = dom, p->bus = bus, p->device = dv;
  p->pciDeviceId = 0x233510de;
  snprintf(p->busId, sizeof p->busId, "%s", d->pci);
  snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "%04x:%02x:%02x.%x", dom & 0xffff, bus & 0xff, dv & 0xff, fn & 0xf);
  return NVML_SUCCESS;
}
#ifndef GPUSIM_LEGACY
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t h, nvmlPciInfo_t *p) {
  ACCT(pci_impl(h, p));
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t h, nvmlPciInfo_t *p) {
  ACCT(pci_impl(h, p));
}
#endif
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t h, nvmlPciInfo_t *p) {
  ACCT(pci_impl(h, p));
}

static nvmlReturn_t cc_impl(nvmlDevice_t h, int *ma, int *mi) {
  CHECK(h, SC_CC);
  if (!ma || !mi)
    return NVML_ERROR_INVALID_ARGUMENT;
  *ma = d->cc_major, *mi = d->cc_minor;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t h, int *ma, int *mi) {
  ACCT(cc_impl(h, ma, mi));
}

#ifndef GPUSIM_LEGACY
static nvmlReturn_t mig_impl(nvmlDevice_t h, unsigned *cur, unsigned *pend) {
  CHECK(h, SC_MIG);
  if (sim_mig_mode(d, t) < 0)
    return NVML_ERROR_NOT_SUPPORTED;
  if (!cur || !pend)
    return NVML_ERROR_INVALID_ARGUMENT;
  *cur = *pend = (unsigned)sim_mig_mode(d, t);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned *cur, unsigned *pend) {
  ACCT(mig_impl(h, cur, pend));
}
#endif

#if !defined(GPUSIM_LEGACY) && !defined(GPUSIM_NO_MIG_DEVICES)
/* MIG device handles, as NVML's documentation describes them: up to SIM_MAX_MIG under a GPU in MIG
 * mode (0 when MIG is off or unsupported), an index without an instance NOT_FOUND. */
static nvmlReturn_t mig_count_impl(nvmlDevice_t h, unsigned *n) {
  CHECK(h, SC_MIG_DEV);
  if (!n || d->parent)
    return NVML_ERROR_INVALID_ARGUMENT;
  *n = sim_mig_mode(d, t) == 1 ? SIM_MAX_MIG : 0;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t h, unsigned *n) {
  ACCT(mig_count_impl(h, n));
}

static nvmlReturn_t mig_handle_impl(nvmlDevice_t h, unsigned index, nvmlDevice_t *out) {
  CHECK(h, SC_MIG_DEV);
  if (!out || d->parent || index >= SIM_MAX_MIG)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (sim_mig_mode(d, t) != 1)
    return NVML_ERROR_NOT_SUPPORTED;
  for (int i = 0; i < d->nmigs; i++)
    if (d->migs[i].slot == index && sim_mig_alive(&d->migs[i], t)) {
      *out = (nvmlDevice_t)&d->migs[i];
      return NVML_SUCCESS;
    }
  return NVML_ERROR_NOT_FOUND;
}
EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t h, unsigned index, nvmlDevice_t *out) {
  ACCT(mig_handle_impl(h, index, out));
}

static nvmlReturn_t is_mig_impl(nvmlDevice_t h, unsigned *is) {
  CHECK(h, SC_MIG_DEV);
  if (!is)
    return NVML_ERROR_INVALID_ARGUMENT;
  *is = d->parent != NULL;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t h, unsigned *is) {
  ACCT(is_mig_impl(h, is));
}

/* which 0: the GPU-instance id, 1: the compute-instance id; NOT_SUPPORTED on a GPU's own handle. */
static nvmlReturn_t instance_id_impl(nvmlDevice_t h, int which, unsigned *id) {
  CHECK(h, SC_MIG_DEV);
  if (!id)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->parent)
    return NVML_ERROR_NOT_SUPPORTED;
  *id = which ? d->ci : d->gi;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t h, unsigned *id) {
  ACCT(instance_id_impl(h, 0, id));
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t h, unsigned *id) {
  ACCT(instance_id_impl(h, 1, id));
}

static nvmlReturn_t mig_parent_impl(nvmlDevice_t h, nvmlDevice_t *out) {
  CHECK(h, SC_MIG_DEV);
  if (!out || !d->parent)
    return NVML_ERROR_INVALID_ARGUMENT;
  *out = (nvmlDevice_t)d->parent;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t h, nvmlDevice_t *out) {
  ACCT(mig_parent_impl(h, out));
}
#endif

static nvmlReturn_t max_clock_impl(nvmlDevice_t h, unsigned type, unsigned *mhz) {
  CHECK(h, SC_MAX_CLOCK);
  if (!mhz)
    return NVML_ERROR_INVALID_ARGUMENT;
  *mhz = type == NVML_CLOCK_MEM ? d->max_mem : d->max_sm;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t h, unsigned type, unsigned *mhz) {
  ACCT(max_clock_impl(h, type, mhz));
}

/* ---- per-tick values ---- */

/* A call that answers one unsigned: the scenario's value of key now, times scale, rounded. */
static nvmlReturn_t unsigned_impl(nvmlDevice_t h, enum sim_call call, enum sim_key key, double scale, unsigned *out) {
  CHECK(h, call);
  if (!out)
    return NVML_ERROR_INVALID_ARGUMENT;
  *out = (unsigned)llround(sim_value(d, key, t) * scale);
  return NVML_SUCCESS;
}

static nvmlReturn_t util_impl(nvmlDevice_t h, nvmlUtilization_t *u) {
  CHECK(h, SC_UTIL);
  if (sim_mig_mode(d, t) == 1)
    return NVML_ERROR_NOT_SUPPORTED;
  if (!u)
    return NVML_ERROR_INVALID_ARGUMENT;
  u->gpu = (unsigned)llround(sim_value(d, K_UTIL, t));
  u->memory = (unsigned)llround(sim_value(d, K_MEM_UTIL, t));
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t *u) {
  ACCT(util_impl(h, u));
}

static void mem_values(const struct sim_dev *d, double t, unsigned long long *used) {
  double u = sim_value(d, K_MEM_USED, t);
  double cap = (double)(d->mem_total - d->mem_reserved);
  *used = (unsigned long long)(u < 0 ? 0 : u > cap ? cap : u);
}

static nvmlReturn_t mem_impl(nvmlDevice_t h, nvmlMemory_t *m) {
  CHECK(h, SC_MEM);
  if (!m)
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned long long used;
  mem_values(d, t, &used);
  m->total = d->mem_total;
  m->used = used + d->mem_reserved; /* the old call counts reserved memory as used */
  m->free = m->total - m->used;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m) {
  ACCT(mem_impl(h, m));
}

#ifndef GPUSIM_LEGACY
static nvmlReturn_t mem2_impl(nvmlDevice_t h, nvmlMemory_v2_t *m) {
  CHECK(h, SC_MEM);
  if (!m)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (m->version != NVML_MEMORY_INFO_V2)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  unsigned long long used;
  mem_values(d, t, &used);
  m->total = d->mem_total;
  m->reserved = d->mem_reserved;
  m->used = used;
  m->free = m->total - m->reserved - m->used;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t *m) {
  ACCT(mem2_impl(h, m));
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t h, unsigned *mw) {
  ACCT(unsigned_impl(h, SC_POWER, K_POWER, 1000, mw));
}

static nvmlReturn_t limit_impl(nvmlDevice_t h, unsigned *mw) {
  CHECK(h, SC_POWER_LIMIT);
  if (!mw)
    return NVML_ERROR_INVALID_ARGUMENT;
  *mw = (unsigned)llround(d->power_limit_w * 1000);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t h, unsigned *mw) {
  ACCT(limit_impl(h, mw));
}

#ifndef GPUSIM_LEGACY
static nvmlReturn_t energy_impl(nvmlDevice_t h, unsigned long long *mj) {
  CHECK(h, SC_ENERGY);
  if (!mj)
    return NVML_ERROR_INVALID_ARGUMENT;
  *mj = d->energy_start_mj + (unsigned long long)llround(sim_integral(d, K_POWER, 0, t) * 1000);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t h, unsigned long long *mj) {
  ACCT(energy_impl(h, mj));
}
#endif

/* The fault only one temperature call has (temp_v, temp_old), before the sensor's (temp). */
static nvmlReturn_t temp_call_fault(nvmlDevice_t h, enum sim_call own) {
  const struct sim_dev *d = dev_of(h);
  return d && G.refs ? fault_code(d, own, now_s()) : NVML_SUCCESS;
}

static nvmlReturn_t temp_impl(nvmlDevice_t h, unsigned sensor, unsigned *c) {
  nvmlReturn_t r = temp_call_fault(h, SC_TEMP_OLD);
  /* Another sensor is an invalid argument, found after the faults as a missing pointer is. */
  return r != NVML_SUCCESS ? r : unsigned_impl(h, SC_TEMP, K_TEMP, 1, sensor == NVML_TEMPERATURE_GPU ? c : NULL);
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t h, unsigned sensor, unsigned *c) {
  ACCT(temp_impl(h, sensor, c));
}

#ifndef GPUSIM_LEGACY
/* NVML 13's call (the old one is deprecated there): a versioned struct, the sensor in, a signed
 * reading out; a version other than nvmlTemperature_v1 is refused as a real driver refuses it. */
static nvmlReturn_t temp_v_impl(nvmlDevice_t h, nvmlTemperature_t *tp) {
  nvmlReturn_t r = temp_call_fault(h, SC_TEMP_V);
  if (r != NVML_SUCCESS)
    return r;
  CHECK(h, SC_TEMP);
  if (!tp || tp->sensorType != NVML_TEMPERATURE_GPU)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (tp->version != nvmlTemperature_v1)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  tp->temperature = (int)llround(sim_value(d, K_TEMP, t));
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t h, nvmlTemperature_t *tp) {
  ACCT(temp_v_impl(h, tp));
}
#endif

static nvmlReturn_t clock_impl(nvmlDevice_t h, unsigned type, unsigned *mhz) {
  CHECK(h, SC_CLOCK);
  if (!mhz)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (type == NVML_CLOCK_MEM)
    *mhz = (unsigned)llround(sim_value(d, K_MEM_CLOCK, t));
  else if (type == NVML_CLOCK_SM || type == NVML_CLOCK_GRAPHICS)
    *mhz = (unsigned)llround(sim_value(d, K_SM_CLOCK, t));
  else
    return NVML_ERROR_NOT_SUPPORTED;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t h, unsigned type, unsigned *mhz) {
  ACCT(clock_impl(h, type, mhz));
}

static nvmlReturn_t throttle_impl(nvmlDevice_t h, unsigned long long *mask) {
  CHECK(h, SC_THROTTLE);
  if (!mask)
    return NVML_ERROR_INVALID_ARGUMENT;
  *mask = (unsigned long long)sim_value(d, K_THROTTLE, t);
  return NVML_SUCCESS;
}
#ifndef GPUSIM_LEGACY
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t h, unsigned long long *mask) {
  ACCT(throttle_impl(h, mask));
}
#endif
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t h, unsigned long long *mask) {
  ACCT(throttle_impl(h, mask));
}

static nvmlReturn_t pcie_impl(nvmlDevice_t h, unsigned counter, unsigned *kbps) {
  CHECK(h, SC_PCIE);
  if (!kbps || counter > NVML_PCIE_UTIL_RX_BYTES)
    return NVML_ERROR_INVALID_ARGUMENT;
  *kbps = (unsigned)llround(sim_value(d, counter ? K_PCIE_RX : K_PCIE_TX, t) / 1024);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t h, unsigned counter, unsigned *kbps) {
  ACCT(pcie_impl(h, counter, kbps));
}

EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t h, unsigned *pct) {
  ACCT(unsigned_impl(h, SC_FAN, K_FAN, 1, pct));
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t h, unsigned *ps) {
  ACCT(unsigned_impl(h, SC_PSTATE, K_PSTATE, 1, ps));
}

/* ---- processes ---- */

static nvmlReturn_t procs_impl(nvmlDevice_t h, unsigned *count, void *infos, size_t stride) {
  CHECK(h, SC_PROCS);
  if (!count)
    return NVML_ERROR_INVALID_ARGUMENT;
  struct sim_proc p[SIM_MAX_PROCS];
  int n = procs_at(d, t, p);
  if (n && (!infos || *count < (unsigned)n)) {
    *count = (unsigned)n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (int i = 0; i < n; i++) {
    unsigned char *e = (unsigned char *)infos + (size_t)i * stride;
    memset(e, 0, stride);
    memcpy(e + offsetof(nvmlProcessInfo_t, pid), &p[i].pid, sizeof p[i].pid);
    memcpy(e + offsetof(nvmlProcessInfo_t, usedGpuMemory), &p[i].mem, sizeof p[i].mem);
    if (stride == sizeof(nvmlProcessInfo_t)) {
      unsigned na = 0xffffffffu; /* no MIG instance */
      memcpy(e + offsetof(nvmlProcessInfo_t, gpuInstanceId), &na, sizeof na);
      memcpy(e + offsetof(nvmlProcessInfo_t, computeInstanceId), &na, sizeof na);
    }
  }
  *count = (unsigned)n;
  return NVML_SUCCESS;
}
#ifndef GPUSIM_LEGACY
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t h, unsigned *count, nvmlProcessInfo_t *p) {
  ACCT(procs_impl(h, count, p, sizeof *p));
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t h, unsigned *count, nvmlProcessInfo_t *p) {
  ACCT(procs_impl(h, count, p, sizeof *p));
}
#endif
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t h, unsigned *count, nvmlProcessInfo_v1_t *p) {
  ACCT(procs_impl(h, count, p, sizeof *p));
}

/* ---- sample buffers ---- */

#ifndef GPUSIM_LEGACY
/* The driver samples at d->sample_hz from time 0 and keeps the last SAMPLE_BUFFER samples. Returned
 * oldest first; when the caller's buffer is smaller, the oldest fit and the rest come next call. */
static nvmlReturn_t samples_impl(nvmlDevice_t h, unsigned type, unsigned long long last, unsigned *vt, unsigned *count,
                                 nvmlSample_t *out) {
  CHECK(h, SC_SAMPLES);
  if (sim_mig_mode(d, t) == 1)
    return NVML_ERROR_NOT_SUPPORTED;
  if (!count || !vt)
    return NVML_ERROR_INVALID_ARGUMENT;
  enum sim_key key;
  double scale = 1;
  switch (type) {
  case NVML_GPU_UTILIZATION_SAMPLES:
    key = K_UTIL;
    break;
  case NVML_MEMORY_UTILIZATION_SAMPLES:
    key = K_MEM_UTIL;
    break;
  case NVML_TOTAL_POWER_SAMPLES:
    key = K_POWER, scale = 1000;
    break;
  case NVML_PROCESSOR_CLK_SAMPLES:
    key = K_SM_CLOCK;
    break;
  case NVML_MEMORY_CLK_SAMPLES:
    key = K_MEM_CLOCK;
    break;
  default:
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *vt = NVML_VALUE_TYPE_UNSIGNED_INT;
  if (!out) {
    *count = SAMPLE_BUFFER;
    return NVML_SUCCESS;
  }
  long long kmax = (long long)floor(t * d->sample_hz), kmin = kmax - SAMPLE_BUFFER + 1;
  unsigned n = 0;
  for (long long k = kmin < 0 ? 0 : kmin; k <= kmax && n < *count; k++) {
    double tk = (double)k / d->sample_hz;
    unsigned long long ts = wall_us_at(tk);
    if (ts <= last)
      continue;
    if (!d->samples_when_idle && sim_value(d, K_UTIL, tk) == 0 && sim_value(d, K_MEM_UTIL, tk) == 0)
      continue;
    out[n].timeStamp = ts;
    out[n].sampleValue.uiVal = (unsigned)llround(sim_value(d, key, tk) * scale);
    n++;
  }
  if (!n)
    return NVML_ERROR_NOT_FOUND;
  *count = n;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t h, unsigned type, unsigned long long last, unsigned *vt,
                                         unsigned *count, nvmlSample_t *out) {
  ACCT(samples_impl(h, type, last, vt, count, out));
}

/* One sample per process at the driver's latest sample time, when newer than last. */
static nvmlReturn_t proc_util_impl(nvmlDevice_t h, nvmlProcessUtilizationSample_t *u, unsigned *count,
                                   unsigned long long last) {
  CHECK(h, SC_PROC_UTIL);
  if (sim_mig_mode(d, t) == 1)
    return NVML_ERROR_NOT_SUPPORTED;
  if (!count)
    return NVML_ERROR_INVALID_ARGUMENT;
  struct sim_proc p[SIM_MAX_PROCS];
  int n = procs_at(d, t, p);
  double tk = floor(t * d->sample_hz) / d->sample_hz;
  unsigned long long ts = wall_us_at(tk);
  if (!n || ts <= last) {
    *count = 0;
    return NVML_ERROR_NOT_FOUND;
  }
  if (!u || *count < (unsigned)n) {
    *count = (unsigned)n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (int i = 0; i < n; i++)
    u[i] = (nvmlProcessUtilizationSample_t){.pid = p[i].pid,
                                            .timeStamp = ts,
                                            .smUtil = p[i].sm,
                                            .memUtil = (unsigned)llround(sim_value(d, K_MEM_UTIL, tk))};
  *count = (unsigned)n;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t h, nvmlProcessUtilizationSample_t *u, unsigned *count,
                                                    unsigned long long last) {
  ACCT(proc_util_impl(h, u, count, last));
}

/* ---- GPM ---- */

static nvmlReturn_t gpm_support_impl(nvmlDevice_t h, nvmlGpmSupport_t *s) {
  CHECK(h, SC_GPM);
  if (!s)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (s->version != NVML_GPM_SUPPORT_VERSION)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  s->isSupportedDevice = d->gpm && sim_mig_mode(d, t) != 1;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t h, nvmlGpmSupport_t *s) {
  ACCT(gpm_support_impl(h, s));
}

static nvmlReturn_t gpm_alloc_impl(nvmlGpmSample_t *s) {
  if (!s)
    return NVML_ERROR_INVALID_ARGUMENT;
  struct sim_gpm_sample *g = calloc(1, sizeof *g);
  if (!g)
    return NVML_ERROR_MEMORY;
  g->magic = GPM_MAGIC;
  g->dev = g->gi = -1;
  *s = (nvmlGpmSample_t)g;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *s) {
  ACCT(gpm_alloc_impl(s));
}

static nvmlReturn_t gpm_free_impl(nvmlGpmSample_t s) {
  struct sim_gpm_sample *g = (struct sim_gpm_sample *)s;
  if (!g || g->magic != GPM_MAGIC)
    return NVML_ERROR_INVALID_ARGUMENT;
  g->magic = 0;
  free(g);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s) {
  ACCT(gpm_free_impl(s));
}

static nvmlReturn_t gpm_get_impl(nvmlDevice_t h, nvmlGpmSample_t s) {
  CHECK(h, SC_GPM);
  struct sim_gpm_sample *g = (struct sim_gpm_sample *)s;
  if (!g || g->magic != GPM_MAGIC)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->gpm || sim_mig_mode(d, t) == 1)
    return NVML_ERROR_NOT_SUPPORTED;
  g->dev = (int)d->index;
  g->gi = -1;
  g->t = t;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t h, nvmlGpmSample_t s) {
  ACCT(gpm_get_impl(h, s));
}

#ifndef GPUSIM_NO_MIG_DEVICES
/* A GPM sample of one GPU instance of a GPU in MIG mode (h is the GPU's own handle). */
static nvmlReturn_t gpm_mig_get_impl(nvmlDevice_t h, unsigned gi, nvmlGpmSample_t s) {
  CHECK(h, SC_GPM);
  struct sim_gpm_sample *g = (struct sim_gpm_sample *)s;
  if (!g || g->magic != GPM_MAGIC || d->parent)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->gpm || sim_mig_mode(d, t) != 1)
    return NVML_ERROR_NOT_SUPPORTED;
  if (!mig_of(d, gi, t))
    return NVML_ERROR_INVALID_ARGUMENT;
  g->dev = (int)d->index;
  g->gi = (int)gi;
  g->t = t;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t h, unsigned gi, nvmlGpmSample_t s) {
  ACCT(gpm_mig_get_impl(h, gi, s));
}
#endif

static nvmlReturn_t gpm_metrics_impl(nvmlGpmMetricsGet_t *m) {
  if (!G.refs)
    return NVML_ERROR_UNINITIALIZED;
  if (!m)
    return NVML_ERROR_INVALID_ARGUMENT;
  if (m->version != NVML_GPM_METRICS_GET_VERSION)
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  struct sim_gpm_sample *a = (struct sim_gpm_sample *)m->sample1, *b = (struct sim_gpm_sample *)m->sample2;
  if (m->numMetrics > NVML_GPM_METRIC_MAX || !a || !b || a->magic != GPM_MAGIC || b->magic != GPM_MAGIC || a->dev < 0 ||
      a->dev != b->dev || a->gi != b->gi || !(b->t > a->t) || (unsigned)a->dev >= G.scn.ndev)
    return NVML_ERROR_INVALID_ARGUMENT;
  CHECK((nvmlDevice_t)&G.scn.dev[a->dev], SC_GPM);
  if (a->gi >= 0 && !(d = mig_of(d, (unsigned)a->gi, t))) /* an instance's sample: its own timeline */
    return NVML_ERROR_INVALID_ARGUMENT;
  static const struct {
    unsigned id;
    enum sim_key key;
    double scale;
    char *name;
  } map[] = {
      {NVML_GPM_METRIC_GRAPHICS_UTIL, K_GR_ACTIVE, 1, "graphics_util"},
      {NVML_GPM_METRIC_SM_UTIL, K_SM_ACTIVE, 1, "sm_util"},
      {NVML_GPM_METRIC_SM_OCCUPANCY, K_SM_OCC, 1, "sm_occupancy"},
      {NVML_GPM_METRIC_ANY_TENSOR_UTIL, K_TENSOR, 1, "any_tensor_util"},
      {NVML_GPM_METRIC_DRAM_BW_UTIL, K_DRAM, 1, "dram_bw_util"},
      {NVML_GPM_METRIC_FP64_UTIL, K_FP64, 1, "fp64_util"},
      {NVML_GPM_METRIC_FP32_UTIL, K_FP32, 1, "fp32_util"},
      {NVML_GPM_METRIC_FP16_UTIL, K_FP16, 1, "fp16_util"},
      {NVML_GPM_METRIC_PCIE_TX_PER_SEC, K_PCIE_TX, 1.0 / 1048576, "pcie_tx"},
      {NVML_GPM_METRIC_PCIE_RX_PER_SEC, K_PCIE_RX, 1.0 / 1048576, "pcie_rx"},
      {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, K_NVLINK_RX, 1.0 / 1048576, "nvlink_rx"},
      {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, K_NVLINK_TX, 1.0 / 1048576, "nvlink_tx"},
  };
  for (unsigned i = 0; i < m->numMetrics; i++) {
    nvmlGpmMetric_t *x = &m->metrics[i];
    size_t j;
    for (j = 0; j < sizeof map / sizeof map[0] && map[j].id != x->metricId; j++)
      ;
    int unsup = j == sizeof map / sizeof map[0];
    for (int k = 0; k < d->n_gpm_unsupported && !unsup; k++)
      unsup = d->gpm_unsupported[k] == x->metricId;
    if (unsup) {
      x->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
      continue;
    }
    x->nvmlReturn = NVML_SUCCESS;
    x->value = sim_integral(d, map[j].key, a->t, b->t) / (b->t - a->t) * map[j].scale;
    x->metricInfo.shortName = x->metricInfo.longName = map[j].name;
    x->metricInfo.unit = map[j].scale == 1 ? "%" : "MiB/s";
  }
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *m) {
  ACCT(gpm_metrics_impl(m));
}
#endif /* !GPUSIM_LEGACY */

/* ---- for gpusim_health.c (hidden symbols) ---- */

int gpusim_check(struct nvmlDevice_st *h, enum sim_call call, struct sim_dev **dp, double *t) {
  return check((nvmlDevice_t)h, call, dp, t);
}
long long gpusim_thread_cpu(void) {
  return clock_ns(CLOCK_THREAD_CPUTIME_ID);
}
void gpusim_account(long long cpu_t0) {
  atomic_fetch_add(&G.cpu_ns, clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_t0);
  atomic_fetch_add(&G.calls, 1);
}
double gpusim_now(void) {
  return now_s();
}
void gpusim_lock(int on) {
  if (on)
    pthread_mutex_lock(&G.mu);
  else
    pthread_mutex_unlock(&G.mu);
}
struct sim_scn *gpusim_scn(void) {
  return G.refs ? &G.scn : NULL;
}
