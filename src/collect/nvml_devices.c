/* collect/nvml_devices: what `gpuscope devices` lists — each GPU NVML sees, with its memory, compute
 * capability, MIG mode and which metric families the driver answers for it (basic, utilisation
 * samples, per-process, GPM). It loads NVML the same way the collector does (nvml_api.c), reads the
 * facts into a struct nvml_devices and releases NVML before returning; report/devices.c prints it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collect.h"
#include "collect/nvml_api.h"
#include "core/core.h"

static void why_add(struct nvml_health_now *h, const char *what) {
  size_t len = strlen(h->why);
  snprintf(h->why + len, sizeof h->why - len, "%s%s", len ? "; " : "", what);
  h->unhealthy = 1;
}

/* The NVLink error counters summed over the active links; -1 when the GPU has none or they do not
 * answer. */
static long long nvlink_errors(const struct nvml_api *a, nvmlDevice_t dev) {
  if (!a->nvmlDeviceGetNvLinkState || !a->nvmlDeviceGetNvLinkErrorCounter)
    return -1;
  long long sum = -1;
  for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
    unsigned active = 0;
    if (a->nvmlDeviceGetNvLinkState(dev, l, &active) != NVML_SUCCESS)
      break;
    for (unsigned k = NVML_NVLINK_ERROR_DL_REPLAY; active && k <= NVML_NVLINK_ERROR_DL_CRC_DATA; k++) {
      unsigned long long v;
      if (a->nvmlDeviceGetNvLinkErrorCounter(dev, l, k, &v) == NVML_SUCCESS)
        sum = (sum < 0 ? 0 : sum) + (long long)v;
    }
  }
  return sum;
}

/* Reads what says a GPU is sick now, as dcgmi health does from the driver's counters (an Xid is an
 * event: only the agent sees it). A call that does not answer leaves its number -1. */
static void health_read(const struct nvml_api *a, nvmlDevice_t dev, struct nvml_health_now *h) {
  unsigned long long ull;
  unsigned c, u, p, f;
  h->ecc_sbe = h->ecc_dbe = h->remap_corr = h->remap_unc = h->retired_sbe = h->retired_dbe = h->pcie_replays = -1;
  h->remap_pending = h->remap_failure = h->retired_pending = -1;
  h->nvlink_errors = -1;
  if (!dev)
    return; /* lost: nothing answers */
  if (a->nvmlDeviceGetTotalEccErrors &&
      a->nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS)
    h->ecc_sbe = (long long)ull;
  if (a->nvmlDeviceGetTotalEccErrors &&
      a->nvmlDeviceGetTotalEccErrors(dev, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS)
    h->ecc_dbe = (long long)ull;
  if (a->nvmlDeviceGetRemappedRows && a->nvmlDeviceGetRemappedRows(dev, &c, &u, &p, &f) == NVML_SUCCESS)
    h->remap_corr = c, h->remap_unc = u, h->remap_pending = p != 0, h->remap_failure = f != 0;
  if (a->nvmlDeviceGetRetiredPages) {
    for (unsigned cause = 0; cause < 2; cause++) {
      unsigned n = 0;
      nvmlReturn_t r = a->nvmlDeviceGetRetiredPages(dev, cause, &n, NULL);
      if (r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE)
        *(cause ? &h->retired_dbe : &h->retired_sbe) = n;
    }
  }
  if (a->nvmlDeviceGetRetiredPagesPendingStatus && a->nvmlDeviceGetRetiredPagesPendingStatus(dev, &p) == NVML_SUCCESS)
    h->retired_pending = p != 0;
  if (a->nvmlDeviceGetPcieReplayCounter && a->nvmlDeviceGetPcieReplayCounter(dev, &u) == NVML_SUCCESS)
    h->pcie_replays = u;
  h->nvlink_errors = nvlink_errors(a, dev);
  if (h->remap_failure == 1)
    why_add(h, "row remap failed");
  if (h->remap_pending == 1)
    why_add(h, "row remap pending (reset the GPU)");
  if (h->retired_pending == 1)
    why_add(h, "page retirement pending (reset the GPU)");
  if (h->ecc_dbe > 0)
    why_add(h, "uncorrected ECC errors");
}

int collect_devices_list(struct nvml_devices *d, const char *lib) {
  struct nvml_api api;
  char err[300];
  memset(d, 0, sizeof *d);
  if (nvml_api_open(&api, lib, err, sizeof err)) /* no NVIDIA library: the AMD GPUs alone, if any */
    return collect_devices_append_amd(d) > 0 ? GS_OK : gs_fail(GS_ENOENT, "%s", err);
  if (api.nvmlSystemGetDriverVersion && api.nvmlSystemGetDriverVersion(d->driver, sizeof d->driver) != NVML_SUCCESS)
    d->driver[0] = 0;
  d->driver[sizeof d->driver - 1] = 0;
  unsigned n = 0;
  nvmlReturn_t r = api.nvmlDeviceGetCount(&n);
  if (r != NVML_SUCCESS) {
    snprintf(err, sizeof err, "nvmlDeviceGetCount: %s", nvml_api_strerror(&api, r));
    nvml_api_close(&api, 1);
    return collect_devices_append_amd(d) > 0 ? GS_OK : gs_fail(GS_ENOENT, "%s", err);
  }
  if (n && !(d->dev = calloc(n, sizeof *d->dev))) {
    nvml_api_close(&api, 1);
    return gs_fail(GS_ENOMEM, "out of memory");
  }
  d->n = n;
  for (unsigned i = 0; i < n; i++) {
    struct nvml_facts *f = &d->dev[i].facts;
    nvmlDevice_t dev;
    r = api.nvmlDeviceGetHandleByIndex(i, &dev);
    if (r == NVML_SUCCESS)
      r = nvml_api_facts(&api, dev, f);
    else
      memset(f, 0, sizeof *f), f->cc_major = -1, f->mem_total = -1, f->mig_current = -1;
    d->dev[i].lost = r != NVML_SUCCESS;
    struct nvml_health_now *h = &d->dev[i].health;
    health_read(&api, d->dev[i].lost ? NULL : dev, h);
    if (d->dev[i].lost)
      snprintf(h->why, sizeof h->why, "lost (%s)", nvml_api_strerror(&api, r)), h->unhealthy = 1;
  }
  nvml_api_close(&api, 1);
  return collect_devices_append_amd(d) < 0 ? gs_fail(GS_ENOMEM, "out of memory") : GS_OK;
}

void collect_devices_done(struct nvml_devices *d) {
  free(d->dev);
  d->dev = NULL;
  d->n = 0;
}
