/* collect/rocm_smi_api: loads librocm_smi64.so with dlopen and resolves each entry point by name
 * (rocm_smi_api.h), as nvml_api.c does for NVML; the collector (collect/rocm.c) and `gpuscope
 * devices` (collect/rocm_devices.c) call through the struct and never link against ROCm. */
#include "collect/rocm_smi_api.h"

#include <dlfcn.h>
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

double rocm_smi_api_clock_mhz(const unsigned char *buf) {
  struct rsmi_freq_v5 v5;
  struct rsmi_freq_v6 v6;
  memcpy(&v5, buf, sizeof v5);
  memcpy(&v6, buf, sizeof v6);
  uint32_t flag;
  memcpy(&flag, buf, sizeof flag); /* v6: has_deep_sleep and its padding */
  if (flag <= 1 && v6.num_supported >= 1 && v6.num_supported <= 33 && v6.current < v6.num_supported)
    return (double)v6.frequency[v6.current] / 1e6;
  if (v5.num_supported >= 1 && v5.num_supported <= 32 && v5.current < v5.num_supported)
    return (double)v5.frequency[v5.current] / 1e6;
  return -1;
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
