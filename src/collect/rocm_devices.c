/* collect/rocm_devices: the AMD GPUs of `gpuscope devices` — ROCm SMI's devices appended after the
 * NVIDIA ones in struct nvml_devices (the same numbering as the collectors': AMD after NVIDIA), with
 * their memory, power cap, serial number and gfx target, and their ECC counts as health. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collect.h"
#include "collect/rocm_smi_api.h"

static void amd_facts(const struct rocm_smi_api *a, uint32_t dv, struct nvml_device *x) {
  struct nvml_facts *f = &x->facts;
  struct nvml_health_now *h = &x->health;
  uint64_t u;
  memset(x, 0, sizeof *x);
  f->cc_major = f->cc_minor = -1;
  f->mem_total = -1;
  f->mig_current = f->mig_pending = -1;
  f->power_cap_w = -1;
  snprintf(f->vendor, sizeof f->vendor, "amd");
  memset(h, 0xff, sizeof *h); /* every count -1: unknown */
  h->unhealthy = 0, h->why[0] = 0;
  if (a->rsmi_dev_name_get(dv, f->name, sizeof f->name) != RSMI_STATUS_SUCCESS)
    f->name[0] = 0;
  if (a->rsmi_dev_unique_id_get && a->rsmi_dev_unique_id_get(dv, &u) == RSMI_STATUS_SUCCESS)
    snprintf(f->uuid, sizeof f->uuid, "0x%016llx", (unsigned long long)u);
  if (a->rsmi_dev_pci_id_get && a->rsmi_dev_pci_id_get(dv, &u) == RSMI_STATUS_SUCCESS)
    snprintf(f->pci_bus_id, sizeof f->pci_bus_id, "%04x:%02x:%02x.%x", (unsigned)(u >> 32), (unsigned)(u >> 8) & 0xff,
             (unsigned)(u >> 3) & 0x1f, (unsigned)u & 7);
  if (a->rsmi_dev_serial_number_get &&
      a->rsmi_dev_serial_number_get(dv, f->serial, sizeof f->serial) != RSMI_STATUS_SUCCESS)
    f->serial[0] = 0;
  if (a->rsmi_dev_memory_total_get(dv, RSMI_MEM_TYPE_VRAM, &u) == RSMI_STATUS_SUCCESS)
    f->mem_total = (long long)u;
  if (a->rsmi_dev_power_cap_get && a->rsmi_dev_power_cap_get(dv, 0, &u) == RSMI_STATUS_SUCCESS)
    f->power_cap_w = (double)u / 1e6;
  uint32_t p;
  f->fam_basic = a->rsmi_dev_busy_percent_get && a->rsmi_dev_busy_percent_get(dv, &p) == RSMI_STATUS_SUCCESS;
  f->fam_per_process = a->rsmi_compute_process_info_get != NULL;
  rocm_smi_api_cdna(f->name, f->gfx, sizeof f->gfx);
  rsmi_error_count_t ec;
  if (a->rsmi_dev_ecc_count_get && a->rsmi_dev_ecc_count_get(dv, RSMI_GPU_BLOCK_UMC, &ec) == RSMI_STATUS_SUCCESS) {
    h->ecc_sbe = (long long)ec.correctable_err, h->ecc_dbe = (long long)ec.uncorrectable_err;
    if (ec.uncorrectable_err)
      h->unhealthy = 1, snprintf(h->why, sizeof h->why, "uncorrected ECC errors");
  }
}

int collect_devices_append_amd(struct nvml_devices *d) {
  struct rocm_smi_api a;
  char err[256];
  uint32_t n = 0;
  if (rocm_smi_api_open(&a, NULL, err, sizeof err))
    return 0;
  if (a.rsmi_num_monitor_devices(&n) != RSMI_STATUS_SUCCESS || !n) {
    rocm_smi_api_close(&a);
    return 0;
  }
  struct nvml_device *dev = realloc(d->dev, (d->n + n) * sizeof *dev);
  if (!dev) {
    rocm_smi_api_close(&a);
    return -1;
  }
  d->dev = dev;
  for (uint32_t i = 0; i < n; i++)
    amd_facts(&a, i, &d->dev[d->n + i]);
  d->n += n;
  d->n_amd = n;
  rocm_smi_api_close(&a);
  return (int)n;
}
