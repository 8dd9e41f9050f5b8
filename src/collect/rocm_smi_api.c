/* collect/rocm_smi_api: loads librocm_smi64.so with dlopen and resolves each entry point by name
 * (rocm_smi_api.h), as nvml_api.c does for NVML; the collector (collect/rocm.c) and `gpuscope
 * devices` (collect/rocm_devices.c) call through the struct and never link against ROCm. */
#include "collect/rocm_smi_api.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ROCM_SMI_KFD "/dev/kfd" /* the amdgpu driver's compute interface (ROCm's KFD) */

static const char *const sonames[] = {"librocm_smi64.so.7", "librocm_smi64.so.6", "librocm_smi64.so.5",
                                      "librocm_smi64.so"};

#define SYM(name)                                                                                                      \
  { #name, offsetof(struct rocm_smi_api, name) }
static const struct {
  const char *name;
  size_t off;
} syms[] = {
    SYM(rsmi_init),
    SYM(rsmi_shut_down),
    SYM(rsmi_num_monitor_devices),
    SYM(rsmi_dev_name_get),
    SYM(rsmi_dev_memory_total_get),
    SYM(rsmi_status_string),
    SYM(rsmi_dev_unique_id_get),
    SYM(rsmi_dev_pci_id_get),
    SYM(rsmi_dev_serial_number_get),
    SYM(rsmi_dev_busy_percent_get),
    SYM(rsmi_dev_memory_busy_percent_get),
    SYM(rsmi_dev_memory_usage_get),
    SYM(rsmi_dev_power_ave_get),
    SYM(rsmi_dev_current_socket_power_get),
    SYM(rsmi_dev_power_cap_get),
    SYM(rsmi_dev_energy_count_get),
    SYM(rsmi_dev_temp_metric_get),
    SYM(rsmi_dev_gpu_clk_freq_get),
    SYM(rsmi_dev_pci_throughput_get),
    SYM(rsmi_dev_ecc_count_get),
    SYM(rsmi_compute_process_info_get),
    SYM(rsmi_compute_process_info_by_pid_get),
    SYM(rsmi_compute_process_gpus_get),
    SYM(rsmi_dev_gpu_metrics_info_get),
};
enum { N_REQUIRED = 5 }; /* init, shut_down, count, name, memory total */

int rocm_smi_api_open(struct rocm_smi_api *a, const char *lib, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  if (!lib || !*lib)
    lib = getenv("GPUSCOPE_ROCM_SMI_LIB");
  if (lib && *lib) {
    a->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    snprintf(a->path, sizeof a->path, "%s", lib);
  }
  /* Without the amdgpu driver's compute node there is no GPU to see, and the real library, loaded
   * anyway, writes its own complaints on stderr: do not load it at all. */
  if (!(lib && *lib) && access(ROCM_SMI_KFD, F_OK)) {
    snprintf(err, errlen, "no AMD GPU driver (%s absent)", ROCM_SMI_KFD);
    return -1;
  }
  for (size_t i = 0; !a->lib && !(lib && *lib) && i < sizeof sonames / sizeof *sonames; i++) {
    a->lib = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
    snprintf(a->path, sizeof a->path, "%s", sonames[i]);
  }
  if (!a->lib) {
    const char *e = dlerror();
    snprintf(err, errlen, "no ROCm SMI library (%s)", lib && *lib ? (e ? e : lib) : "librocm_smi64.so not found");
    return -1;
  }
  for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
    void *f = dlsym(a->lib, syms[i].name);
    memcpy((char *)a + syms[i].off, &f, sizeof f);
    if (!f && i < N_REQUIRED) {
      snprintf(err, errlen, "%s lacks %s", a->path, syms[i].name);
      goto fail;
    }
  }
  rsmi_status_t r = a->rsmi_init(0);
  if (r != RSMI_STATUS_SUCCESS) {
    snprintf(err, errlen, "rsmi_init: %s", rocm_smi_api_strerror(a, r));
    goto fail;
  }
  return 0;
fail:
  dlclose(a->lib);
  memset(a, 0, sizeof *a);
  return -1;
}

void rocm_smi_api_close(struct rocm_smi_api *a) {
  if (!a || !a->lib)
    return;
  a->rsmi_shut_down();
  dlclose(a->lib);
  memset(a, 0, sizeof *a);
}

const char *rocm_smi_api_strerror(const struct rocm_smi_api *a, rsmi_status_t r) {
  const char *s = NULL;
  if (a && a->rsmi_status_string && a->rsmi_status_string(r, &s) == RSMI_STATUS_SUCCESS && s && *s)
    return s;
  switch (r) {
  case RSMI_STATUS_NOT_SUPPORTED:
    return "RSMI_STATUS_NOT_SUPPORTED";
  case RSMI_STATUS_PERMISSION:
    return "RSMI_STATUS_PERMISSION";
  case RSMI_STATUS_INIT_ERROR:
    return "RSMI_STATUS_INIT_ERROR";
  default:
    return "RSMI error";
  }
}

double rocm_smi_api_clock_mhz(const unsigned char *buf, double *max_mhz) {
  struct rsmi_freq_v5 v5;
  struct rsmi_freq_v6 v6;
  memcpy(&v5, buf, sizeof v5);
  memcpy(&v6, buf, sizeof v6);
  uint32_t flag, n = 0, cur = 0;
  const uint64_t *f = NULL;
  memcpy(&flag, buf, sizeof flag); /* v6: has_deep_sleep and its padding */
  if (flag <= 1 && v6.num_supported >= 1 && v6.num_supported <= 33 && v6.current < v6.num_supported)
    n = v6.num_supported, cur = v6.current, f = v6.frequency;
  else if (v5.num_supported >= 1 && v5.num_supported <= 32 && v5.current < v5.num_supported)
    n = v5.num_supported, cur = v5.current, f = v5.frequency;
  if (max_mhz)
    *max_mhz = -1;
  if (!f)
    return -1;
  for (uint32_t i = 0; max_mhz && i < n; i++) /* the levels, lowest first; the highest is the maximum */
    if ((double)f[i] / 1e6 > *max_mhz)
      *max_mhz = (double)f[i] / 1e6;
  return (double)f[cur] / 1e6;
}

int rocm_smi_api_cdna(const char *name, char *gfx, size_t n) {
  static const struct {
    const char *part, *gfx;
    int gen;
  } parts[] = {{"MI100", "gfx908", 1},
               {"MI210", "gfx90a", 2},
               {"MI250", "gfx90a", 2},
               {"MI300", "gfx942", 3},
               {"MI325", "gfx942", 3}};
  if (gfx && n)
    gfx[0] = 0;
  for (size_t i = 0; name && i < sizeof parts / sizeof *parts; i++)
    if (strstr(name, parts[i].part)) {
      if (gfx && n)
        snprintf(gfx, n, "%s", parts[i].gfx);
      return parts[i].gen;
    }
  return 0;
}

#define METRICS_FILL 0xa5 /* no field is 0xa5a5...: a value or all ones */

void rocm_smi_api_metrics_prepare(unsigned char *buf) {
  memset(buf, METRICS_FILL, ROCM_SMI_METRICS_BUF);
}

/* Did the library write any of the n bytes at off (still the fill: it did not)? */
static int written(const unsigned char *buf, size_t off, size_t n) {
  for (size_t i = off; i < off + n; i++)
    if (buf[i] != METRICS_FILL)
      return 1;
  return 0;
}

static double pct16(uint16_t v) {
  return v == UINT16_MAX || v > 100 ? NAN : v;
}

int rocm_smi_api_metrics(const unsigned char *buf, struct rocm_smi_metrics *m) {
  struct rsmi_metrics_v6 x;
  memcpy(&x, buf, sizeof x);
  memset(m, 0, sizeof *m);
  m->gfx_pct = m->umc_pct = m->pcie_gbs = NAN;
  if (x.common_header.format_revision != 1)
    return -1;
  m->content = x.common_header.content_revision;
  /* ROCm 6.0 and later write firmware_timestamp right after the v1.1 part (a value or all ones);
   * 6.3 and later the v1.6 residencies after the v1.5 part. */
  m->layout = !written(buf, offsetof(struct rsmi_metrics_v6, firmware_timestamp), sizeof x.firmware_timestamp)      ? 5
              : written(buf, offsetof(struct rsmi_metrics_v6, accumulation_counter), sizeof x.accumulation_counter) ? 7
                                                                                                                    : 6;
  m->gfx_pct = pct16(x.average_gfx_activity);
  m->umc_pct = pct16(x.average_umc_activity);
  if (m->layout >= 6 && m->content == 3 && x.indep_throttle_status != UINT64_MAX)
    m->has_indep = 1, m->indep = x.indep_throttle_status;
  if (m->layout >= 6 && m->content >= 4 && x.pcie_bandwidth_inst != UINT64_MAX)
    m->pcie_gbs = (double)x.pcie_bandwidth_inst;
  if (m->layout >= 7 && m->content >= 6 && x.accumulation_counter != UINT64_MAX && x.ppt_residency_acc != UINT64_MAX &&
      x.socket_thm_residency_acc != UINT64_MAX) {
    m->has_resid = 1;
    m->acc = x.accumulation_counter, m->ppt = x.ppt_residency_acc, m->socket_thm = x.socket_thm_residency_acc;
    m->hbm_thm = x.hbm_thm_residency_acc != UINT64_MAX ? x.hbm_thm_residency_acc : 0;
    m->vr_thm = x.vr_thm_residency_acc != UINT64_MAX ? x.vr_thm_residency_acc : 0;
    m->prochot = x.prochot_residency_acc != UINT64_MAX ? x.prochot_residency_acc : 0;
  }
  return 0;
}

/* The kernel's SMU_THROTTLER_* groups (amdgpu_smu.h): power 0-7, current 16-23, temperature 32-43,
 * VRHOT 44-45, PROCHOT 46-47, other 56-57. NVML's bits: core/clock_reasons.c. */
unsigned long long rocm_smi_api_indep_reasons(uint64_t indep) {
  unsigned long long r = 0;
  if (indep & 0xffULL)
    r |= 0x4ULL; /* SwPowerCap */
  if (indep & 0xff0000ULL)
    r |= 0x8ULL; /* HwSlowdown */
  if (indep & 0xfff00000000ULL)
    r |= 0x20ULL; /* SwThermalSlowdown */
  if (indep & 0xf00000000000ULL)
    r |= 0x40ULL; /* HwThermalSlowdown */
  return r;
}

/* The share of a..b that the counters at and bt (residencies) say a limit held. */
static double resid_share(uint64_t at, uint64_t bt, double span) {
  return bt >= at ? (double)(bt - at) / span : 0;
}

long long rocm_smi_api_resid_reasons(const struct rocm_smi_metrics *a, const struct rocm_smi_metrics *b) {
  if (!a->has_resid || !b->has_resid || b->acc <= a->acc)
    return -1;
  double span = (double)(b->acc - a->acc);
  long long r = 0;
  if (resid_share(a->ppt, b->ppt, span) >= 0.5)
    r |= 0x4LL; /* SwPowerCap */
  if (fmax(resid_share(a->socket_thm, b->socket_thm, span), resid_share(a->hbm_thm, b->hbm_thm, span)) >= 0.5)
    r |= 0x20LL; /* SwThermalSlowdown */
  if (fmax(resid_share(a->vr_thm, b->vr_thm, span), resid_share(a->prochot, b->prochot, span)) >= 0.5)
    r |= 0x40LL; /* HwThermalSlowdown */
  return r;
}
