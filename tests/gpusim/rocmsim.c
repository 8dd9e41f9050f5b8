/* rocmsim: the simulated librocm_smi64.so (README.md, "ROCm SMI"): the `vendor amd` devices of the
 * same scenario files gpusim.c plays for NVML, answered through ROCm SMI's entry points
 * (src/collect/rocm_smi_api.h's declarations, checked against AMD's headers). Time is seconds since
 * the first rsmi_init (or GPUSIM_CLOCK's file); `$JOBPID` is this process's first child, as in
 * gpusim.c. Faults: `fault util|mem|power|power_limit|energy|temp|clock|pcie|ecc|name|uuid|pci|all CODE`
 * (`throttle`: the metrics table)
 * with NVML's code names (NOT_SUPPORTED is RSMI_STATUS_NOT_SUPPORTED, NO_PERMISSION is
 * RSMI_STATUS_PERMISSION, anything else RSMI_STATUS_UNKNOWN_ERROR). */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "collect/rocm_smi_api.h"
#include "gpusim.h"

#define EXPORT __attribute__((visibility("default")))
#define PKT 256 /* max_pkt_sz: the PCIe payload the simulated link carries */
#define ENERGY_RES 15.3f

static struct {
  pthread_mutex_t mu;
  int refs;
  struct sim_scn scn;
  double t0;
} R = {.mu = PTHREAD_MUTEX_INITIALIZER};

static double now_s(void) {
  return sim_clock_s(R.t0);
}

static rsmi_status_t of_nvml(int code) {
  return code == 3 ? RSMI_STATUS_NOT_SUPPORTED : code == 4 ? RSMI_STATUS_PERMISSION : RSMI_STATUS_UNKNOWN_ERROR;
}

/* The device dv at the time of the call, or an error: not initialised, no such device, lost, or a
 * scenario fault on call. */
static rsmi_status_t dev(uint32_t dv, enum sim_call call, const struct sim_dev **dp, double *t) {
  if (!R.refs)
    return RSMI_STATUS_INIT_ERROR;
  if (dv >= R.scn.ndev)
    return RSMI_STATUS_INVALID_ARGS;
  const struct sim_dev *d = &R.scn.dev[dv];
  double now = now_s();
  if (now >= d->lost_at || now >= d->gone_at)
    return RSMI_STATUS_UNKNOWN_ERROR;
  for (int i = 0; i < d->nfaults; i++) {
    const struct sim_fault *f = &d->faults[i];
    if ((f->call == call || f->call == SC_ALL) && now >= f->from && now < f->until && f->code)
      return of_nvml(f->code);
  }
  *dp = d;
  *t = now;
  return RSMI_STATUS_SUCCESS;
}

#define DEV(dv, call)                                                                                                  \
  const struct sim_dev *d = NULL;                                                                                      \
  double t = 0;                                                                                                        \
  rsmi_status_t rc_ = dev((dv), (call), &d, &t);                                                                       \
  if (rc_ != RSMI_STATUS_SUCCESS)                                                                                      \
    return rc_;

EXPORT rsmi_status_t rsmi_init(uint64_t flags) {
  (void)flags;
  pthread_mutex_lock(&R.mu);
  rsmi_status_t r = RSMI_STATUS_SUCCESS;
  if (R.refs == 0) {
    const char *path = getenv("GPUSIM_SCENARIO");
    char err[512];
    if (!path || !*path)
      r = RSMI_STATUS_INIT_ERROR; /* no amdgpu driver */
    else if (sim_scn_load(path, &R.scn, err, sizeof err)) {
      fprintf(stderr, "rocmsim: %s\n", err);
      r = RSMI_STATUS_INIT_ERROR;
    } else {
      sim_scn_keep(&R.scn, 1);
      R.t0 = sim_mono_s();
    }
  }
  if (r == RSMI_STATUS_SUCCESS)
    R.refs++;
  pthread_mutex_unlock(&R.mu);
  return r;
}

EXPORT rsmi_status_t rsmi_shut_down(void) {
  pthread_mutex_lock(&R.mu);
  if (R.refs > 0 && --R.refs == 0)
    sim_scn_free(&R.scn);
  pthread_mutex_unlock(&R.mu);
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_num_monitor_devices(uint32_t *n) {
  if (!R.refs)
    return RSMI_STATUS_INIT_ERROR;
  *n = R.scn.ndev;
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_status_string(rsmi_status_t s, const char **out) {
  *out = s == RSMI_STATUS_SUCCESS         ? "RSMI_STATUS_SUCCESS: The function has been executed successfully."
         : s == RSMI_STATUS_NOT_SUPPORTED ? "RSMI_STATUS_NOT_SUPPORTED: The function is not supported"
         : s == RSMI_STATUS_PERMISSION    ? "RSMI_STATUS_PERMISSION: The user does not have permission"
                                          : "RSMI_STATUS_UNKNOWN_ERROR: An unknown error occurred";
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_name_get(uint32_t dv, char *name, size_t len) {
  DEV(dv, SC_NAME);
  if (strlen(d->name) + 1 > len)
    return RSMI_STATUS_INSUFFICIENT_SIZE;
  snprintf(name, len, "%s", d->name[0] ? d->name : "AMD Instinct MI300X");
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_unique_id_get(uint32_t dv, uint64_t *id) {
  DEV(dv, SC_UUID);
  *id = 0x5a1c0000a3d00000ULL + d->index;
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_pci_id_get(uint32_t dv, uint64_t *bdfid) {
  DEV(dv, SC_PCI);
  *bdfid = (uint64_t)(0x0c + 0x10 * d->index) << 8; /* domain 0, bus 0c, 1c, ...; device 0, function 0 */
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_serial_number_get(uint32_t dv, char *serial, uint32_t len) {
  DEV(dv, SC_NAME);
  char s[32];
  snprintf(s, sizeof s, "%s", d->serial);
  if (!s[0])
    snprintf(s, sizeof s, "PCB0%05u", 4200 + d->index);
  if (strlen(s) + 1 > len)
    return RSMI_STATUS_INSUFFICIENT_SIZE;
  snprintf(serial, len, "%s", s);
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_busy_percent_get(uint32_t dv, uint32_t *p) {
  DEV(dv, SC_UTIL);
  *p = (uint32_t)lround(sim_value(d, K_UTIL, t));
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_memory_busy_percent_get(uint32_t dv, uint32_t *p) {
  DEV(dv, SC_UTIL);
  *p = (uint32_t)lround(sim_value(d, K_MEM_UTIL, t));
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_memory_total_get(uint32_t dv, rsmi_memory_type_t type, uint64_t *total) {
  DEV(dv, SC_MEM);
  if (type != RSMI_MEM_TYPE_VRAM)
    return RSMI_STATUS_NOT_SUPPORTED;
  *total = d->mem_total;
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_memory_usage_get(uint32_t dv, rsmi_memory_type_t type, uint64_t *used) {
  DEV(dv, SC_MEM);
  if (type != RSMI_MEM_TYPE_VRAM)
    return RSMI_STATUS_NOT_SUPPORTED;
  *used = (uint64_t)sim_value(d, K_MEM_USED, t);
  return RSMI_STATUS_SUCCESS;
}

/* MI300's socket power; an MI200 (gfx90a) answers only the average, as the real library does. */
EXPORT rsmi_status_t rsmi_dev_current_socket_power_get(uint32_t dv, uint64_t *uw) {
  DEV(dv, SC_POWER);
  if (strstr(d->name, "MI2"))
    return RSMI_STATUS_NOT_SUPPORTED;
  *uw = (uint64_t)llround(sim_value(d, K_POWER, t) * 1e6);
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_power_ave_get(uint32_t dv, uint32_t sensor, uint64_t *uw) {
  DEV(dv, SC_POWER);
  if (sensor || !strstr(d->name, "MI2"))
    return RSMI_STATUS_NOT_SUPPORTED;
  *uw = (uint64_t)llround(sim_value(d, K_POWER, t) * 1e6);
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_power_cap_get(uint32_t dv, uint32_t sensor, uint64_t *cap) {
  DEV(dv, SC_POWER_LIMIT);
  if (sensor)
    return RSMI_STATUS_INVALID_ARGS;
  *cap = (uint64_t)llround(d->power_limit_w * 1e6);
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_energy_count_get(uint32_t dv, uint64_t *counter, float *res, uint64_t *ts) {
  DEV(dv, SC_ENERGY);
  double uj = (double)d->energy_start_mj * 1e3 + sim_integral(d, K_POWER, 0, t) * 1e6;
  *counter = (uint64_t)(uj / ENERGY_RES);
  *res = ENERGY_RES;
  if (ts)
    *ts = (uint64_t)(t * 1e9);
  return RSMI_STATUS_SUCCESS;
}

/* Edge is the scenario's temp, the junction 10 °C and the HBM 5 °C above it. */
EXPORT rsmi_status_t rsmi_dev_temp_metric_get(uint32_t dv, uint32_t sensor, rsmi_temperature_metric_t m, int64_t *mc) {
  DEV(dv, SC_TEMP);
  if (m != RSMI_TEMP_CURRENT || sensor > RSMI_TEMP_TYPE_MEMORY)
    return RSMI_STATUS_NOT_SUPPORTED;
  double c = sim_value(d, K_TEMP, t) + (sensor == RSMI_TEMP_TYPE_JUNCTION ? 10
                                        : sensor == RSMI_TEMP_TYPE_MEMORY ? 5
                                                                          : 0);
  *mc = llround(c * 1000);
  return RSMI_STATUS_SUCCESS;
}

/* ROCm 6's layout (has_deep_sleep first); GPUSIM_RSMI_FREQ_V5=1 writes ROCm 5's. Levels: 500 MHz,
 * the current clock, the maximum; the current one is level 1. */
EXPORT rsmi_status_t rsmi_dev_gpu_clk_freq_get(uint32_t dv, rsmi_clk_type_t type, rsmi_frequencies_t *f) {
  DEV(dv, SC_CLOCK);
  if (type != RSMI_CLK_TYPE_SYS)
    return RSMI_STATUS_NOT_SUPPORTED;
  double cur = sim_value(d, K_SM_CLOCK, t);
  uint64_t hz[3] = {500000000ULL, (uint64_t)llround((cur > 0 ? cur : d->max_sm) * 1e6),
                    (uint64_t)d->max_sm * 1000000ULL};
  const char *v5 = getenv("GPUSIM_RSMI_FREQ_V5");
  if (v5 && *v5 == '1') {
    struct rsmi_freq_v5 x = {.num_supported = 3, .current = 1};
    memcpy(x.frequency, hz, sizeof hz);
    memcpy(f, &x, sizeof x);
  } else {
    struct rsmi_freq_v6 x = {.has_deep_sleep = 0, .num_supported = 3, .current = 1};
    memcpy(x.frequency, hz, sizeof hz);
    memcpy(f, &x, sizeof x);
  }
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_pci_throughput_get(uint32_t dv, uint64_t *sent, uint64_t *recv, uint64_t *pkt) {
  DEV(dv, SC_PCIE);
  *sent = (uint64_t)(sim_value(d, K_PCIE_TX, t) / PKT);
  *recv = (uint64_t)(sim_value(d, K_PCIE_RX, t) / PKT);
  *pkt = PKT;
  return RSMI_STATUS_SUCCESS;
}

EXPORT rsmi_status_t rsmi_dev_ecc_count_get(uint32_t dv, rsmi_gpu_block_t block, rsmi_error_count_t *ec) {
  DEV(dv, SC_ECC);
  ec->correctable_err = block == RSMI_GPU_BLOCK_UMC ? (uint64_t)sim_counter(d, K_ECC_SBE, t) : 0;
  ec->uncorrectable_err = block == RSMI_GPU_BLOCK_UMC ? (uint64_t)sim_counter(d, K_ECC_DBE, t) : 0;
  return RSMI_STATUS_SUCCESS;
}

/* ---- the firmware's metrics table (rsmi_dev_gpu_metrics_info_get) ---- */

#define RESID_HZ 100000.0 /* accumulation_counter's ticks per second (the v1.6 residencies' unit) */

/* The scenario's throttle reasons (NVML's bits) as indep_throttle_status bits (the kernel's
 * SMU_THROTTLER_*): SwPowerCap PPT0 (0), HwSlowdown TDC_GFX (16), SwThermalSlowdown TEMP_GPU (32),
 * HwThermalSlowdown PROCHOT_GFX (47). */
static uint64_t indep_of(double nv) {
  unsigned long long m = nv >= 0 ? (unsigned long long)nv : 0;
  return (m & 0x4 ? 1ULL : 0) | (m & 0x8 ? 1ULL << 16 : 0) | (m & 0x20 ? 1ULL << 32 : 0) | (m & 0x40 ? 1ULL << 47 : 0);
}

/* The table of content revision d->metrics_content, in the layout of the library
 * GPUSIM_RSMI_METRICS names: 5 (ROCm 5.x, 96 bytes), 6 (ROCm 6.1/6.2, 424 bytes), else 7 (ROCm 6.3
 * and later, 1832 bytes: the v1.6 residencies). What the revision lacks, and every field of an
 * `unfilled` table, is all ones, as the kernel leaves it. */
EXPORT rsmi_status_t rsmi_dev_gpu_metrics_info_get(uint32_t dv, rsmi_gpu_metrics_t *out) {
  DEV(dv, SC_THROTTLE);
  if (!d->metrics_content)
    return RSMI_STATUS_NOT_SUPPORTED;
  const char *e = getenv("GPUSIM_RSMI_METRICS");
  int layout = e && *e == '5' ? 5 : e && *e == '6' ? 6 : 7;
  size_t size = layout == 5 ? sizeof(struct rsmi_metrics_v5) : layout == 6 ? 424 : 1832;
  unsigned c = (unsigned)d->metrics_content;
  struct rsmi_metrics_v6 x;
  memset(&x, 0xff, sizeof x);
  x.common_header = (struct metrics_table_header_t){(uint16_t)size, 1, (uint8_t)c};
  if (!d->metrics_unfilled) {
    x.average_gfx_activity = (uint16_t)lround(sim_value(d, K_UTIL, t));
    x.average_umc_activity = (uint16_t)lround(sim_value(d, K_MEM_UTIL, t));
    if (c == 3)
      x.indep_throttle_status = indep_of(sim_value(d, K_THROTTLE, t));
    if (c >= 4)
      x.pcie_bandwidth_inst = (uint64_t)llround((sim_value(d, K_PCIE_TX, t) + sim_value(d, K_PCIE_RX, t)) / 1e9);
    if (c >= 6) {
      x.accumulation_counter = (uint64_t)llround(t * RESID_HZ);
      x.ppt_residency_acc = (uint64_t)llround(sim_integral_bits(d, K_THROTTLE, 0x4, 0, t) * RESID_HZ);
      x.socket_thm_residency_acc = (uint64_t)llround(sim_integral_bits(d, K_THROTTLE, 0x20, 0, t) * RESID_HZ);
      x.prochot_residency_acc = (uint64_t)llround(sim_integral_bits(d, K_THROTTLE, 0x40, 0, t) * RESID_HZ);
      x.vr_thm_residency_acc = x.hbm_thm_residency_acc = 0;
    }
  }
  unsigned char buf[1832];
  memset(buf, 0xff, sizeof buf);
  memcpy(buf, &x, size < sizeof x ? size : sizeof x);
  memcpy(out, buf, size);
  return RSMI_STATUS_SUCCESS;
}

/* ---- processes: one list over every device, as the KFD's /sys/class/kfd/kfd/proc ---- */

static unsigned first_child(void) {
  const char *e = getenv("GPUSIM_JOBPID");
  if (e && *e)
    return (unsigned)strtoul(e, NULL, 10);
  DIR *dir = opendir("/proc");
  unsigned best = 0;
  pid_t self = getpid();
  struct dirent *de;
  while (dir && (de = readdir(dir))) {
    char path[300], buf[512];
    if (de->d_name[0] < '1' || de->d_name[0] > '9')
      continue;
    snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
    FILE *f = fopen(path, "r");
    if (!f)
      continue;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')'), state;
    int ppid;
    unsigned pid = (unsigned)strtoul(de->d_name, NULL, 10);
    if (rp && sscanf(rp + 1, " %c %d", &state, &ppid) == 2 && ppid == self && (!best || pid < best))
      best = pid;
  }
  if (dir)
    closedir(dir);
  return best;
}

/* The processes on device d now: pid and VRAM. */
static int procs_on(const struct sim_dev *d, double t, unsigned *pid, uint64_t *mem, int max) {
  const struct sim_seg *g = sim_seg_at(d, t);
  int n = 0;
  for (int i = 0; i < g->nprocs && n < max; i++) {
    unsigned p = g->procs[i].jobpid ? first_child() : g->procs[i].pid;
    if (p)
      pid[n] = p, mem[n++] = g->procs[i].mem;
  }
  return n;
}

/* Every (pid, device) in force now; the VRAM summed per pid over its devices. */
static int procs_all(rsmi_process_info_t *out, int max, uint32_t *dv_of, int by_pid) {
  int n = 0;
  double t = now_s();
  for (unsigned k = 0; k < R.scn.ndev; k++) {
    unsigned pid[SIM_MAX_PROCS];
    uint64_t mem[SIM_MAX_PROCS];
    int m = procs_on(&R.scn.dev[k], t, pid, mem, SIM_MAX_PROCS);
    for (int i = 0; i < m; i++) {
      int j = 0;
      while (by_pid && j < n && out[j].process_id != pid[i])
        j++;
      if (j == n || !by_pid) {
        if (n == max)
          return n;
        out[n] = (rsmi_process_info_t){.process_id = pid[i], .cu_occupancy = 0};
        if (dv_of)
          dv_of[n] = k;
        j = n++;
      }
      out[j].vram_usage += mem[i];
    }
  }
  return n;
}

EXPORT rsmi_status_t rsmi_compute_process_info_get(rsmi_process_info_t *procs, uint32_t *num) {
  if (!R.refs)
    return RSMI_STATUS_INIT_ERROR;
  rsmi_process_info_t all[64];
  int n = procs_all(all, 64, NULL, 1);
  if (!procs) {
    *num = (uint32_t)n;
    return RSMI_STATUS_SUCCESS;
  }
  uint32_t k = (uint32_t)n < *num ? (uint32_t)n : *num;
  memcpy(procs, all, k * sizeof *all);
  rsmi_status_t r = (uint32_t)n > *num ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
  *num = k;
  return r;
}

EXPORT rsmi_status_t rsmi_compute_process_info_by_pid_get(uint32_t pid, rsmi_process_info_t *proc) {
  if (!R.refs)
    return RSMI_STATUS_INIT_ERROR;
  rsmi_process_info_t all[64];
  int n = procs_all(all, 64, NULL, 1);
  for (int i = 0; i < n; i++)
    if (all[i].process_id == pid) {
      *proc = all[i];
      return RSMI_STATUS_SUCCESS;
    }
  return RSMI_STATUS_NOT_FOUND;
}

EXPORT rsmi_status_t rsmi_compute_process_gpus_get(uint32_t pid, uint32_t *dv, uint32_t *num) {
  if (!R.refs)
    return RSMI_STATUS_INIT_ERROR;
  rsmi_process_info_t all[64];
  uint32_t dev_of[64], k = 0;
  int n = procs_all(all, 64, dev_of, 0);
  for (int i = 0; i < n; i++)
    if (all[i].process_id == pid) {
      if (k < *num)
        dv[k] = dev_of[i];
      k++;
    }
  if (!k)
    return RSMI_STATUS_NOT_FOUND;
  rsmi_status_t r = k > *num ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
  *num = k < *num ? k : *num;
  return r;
}
