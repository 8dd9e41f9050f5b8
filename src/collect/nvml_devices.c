/* collect/nvml_devices: what `gpuscope devices` lists — each GPU NVML sees, with its memory, compute
 * capability, MIG mode and which metric families the driver answers for it (basic, utilisation
 * samples, per-process, GPM). It loads NVML the same way the collector does (nvml_api.c), reads the
 * facts into a struct nvml_devices and releases NVML before returning; report/devices.c prints it. */
#include <stdlib.h>
#include <string.h>

#include "collect/collect.h"
#include "collect/nvml_api.h"
#include "core/core.h"

int collect_devices_list(struct nvml_devices *d, const char *lib) {
  struct nvml_api api;
  char err[300];
  memset(d, 0, sizeof *d);
  if (nvml_api_open(&api, lib, err, sizeof err))
    return gs_fail(GS_ENOENT, "%s", err);
  if (api.nvmlSystemGetDriverVersion && api.nvmlSystemGetDriverVersion(d->driver, sizeof d->driver) != NVML_SUCCESS)
    d->driver[0] = 0;
  d->driver[sizeof d->driver - 1] = 0;
  unsigned n = 0;
  nvmlReturn_t r = api.nvmlDeviceGetCount(&n);
  if (r != NVML_SUCCESS) {
    snprintf(err, sizeof err, "nvmlDeviceGetCount: %s", nvml_api_strerror(&api, r));
    nvml_api_close(&api, 1);
    return gs_fail(GS_ENOENT, "%s", err);
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
  }
  nvml_api_close(&api, 1);
  return GS_OK;
}

void collect_devices_done(struct nvml_devices *d) {
  free(d->dev);
  d->dev = NULL;
  d->n = 0;
}
