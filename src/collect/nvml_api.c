/* collect/nvml_api: loads libnvidia-ml.so.1 with dlopen, resolves each entry point preferring the
 * newest versioned symbol (nvmlInit_v2 before nvmlInit, ..._v3 before _v2 before unversioned), and
 * reads the static facts of a device. The collector and `gpuscope devices` both start here; neither
 * ever links against NVML, so gpuscope runs unchanged on machines without NVIDIA's driver. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collect.h"
#include "collect/nvml_api.h"
#include "core/core.h"

enum { SYM_REQUIRED = 1, SYM_PER_TICK = 2 };

struct sym {
  size_t off; /* of the field in struct nvml_api */
  int flags;
  const char *names[4]; /* newest first, NULL-terminated */
};

#define F(field) offsetof(struct nvml_api, field)

static const struct sym syms[] = {
    {F(nvmlInit), SYM_REQUIRED, {"nvmlInit_v2", "nvmlInit", NULL}},
    {F(nvmlShutdown), SYM_REQUIRED, {"nvmlShutdown", NULL}},
    {F(nvmlDeviceGetCount), SYM_REQUIRED, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount", NULL}},
    {F(nvmlDeviceGetHandleByIndex),
     SYM_REQUIRED,
     {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex", NULL}},
    {F(nvmlErrorString), 0, {"nvmlErrorString", NULL}},
    {F(nvmlSystemGetDriverVersion), 0, {"nvmlSystemGetDriverVersion", NULL}},
    {F(nvmlSystemGetCudaDriverVersion),
     0,
     {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion", NULL}},
    {F(nvmlDeviceGetName), 0, {"nvmlDeviceGetName", NULL}},
    {F(nvmlDeviceGetUUID), 0, {"nvmlDeviceGetUUID", NULL}},
    {F(nvmlDeviceGetPciInfo), 0, {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo", NULL}},
    {F(nvmlDeviceGetUtilizationRates), SYM_PER_TICK, {"nvmlDeviceGetUtilizationRates", NULL}},
    {F(nvmlDeviceGetMemoryInfo), SYM_PER_TICK, {"nvmlDeviceGetMemoryInfo", NULL}},
    {F(nvmlDeviceGetMemoryInfo_v2), 0, {"nvmlDeviceGetMemoryInfo_v2", NULL}},
    {F(nvmlDeviceGetPowerUsage), SYM_PER_TICK, {"nvmlDeviceGetPowerUsage", NULL}},
    {F(nvmlDeviceGetEnforcedPowerLimit), SYM_PER_TICK, {"nvmlDeviceGetEnforcedPowerLimit", NULL}},
    {F(nvmlDeviceGetTotalEnergyConsumption), SYM_PER_TICK, {"nvmlDeviceGetTotalEnergyConsumption", NULL}},
    {F(nvmlDeviceGetTemperature), SYM_PER_TICK, {"nvmlDeviceGetTemperature", NULL}},
    {F(nvmlDeviceGetTemperatureV), 0, {"nvmlDeviceGetTemperatureV", NULL}},
    {F(nvmlDeviceGetClockInfo), SYM_PER_TICK, {"nvmlDeviceGetClockInfo", NULL}},
    {F(nvmlDeviceGetMaxClockInfo), 0, {"nvmlDeviceGetMaxClockInfo", NULL}},
    {F(nvmlDeviceGetCurrentClocksEventReasons),
     SYM_PER_TICK,
     {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons", NULL}},
    {F(nvmlDeviceGetPcieThroughput), SYM_PER_TICK, {"nvmlDeviceGetPcieThroughput", NULL}},
    {F(nvmlDeviceGetCudaComputeCapability), 0, {"nvmlDeviceGetCudaComputeCapability", NULL}},
    {F(nvmlDeviceGetComputeRunningProcesses),
     SYM_PER_TICK,
     {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
      "nvmlDeviceGetComputeRunningProcesses", NULL}},
    {F(nvmlDeviceGetProcessUtilization), SYM_PER_TICK, {"nvmlDeviceGetProcessUtilization", NULL}},
    {F(nvmlDeviceGetSamples), SYM_PER_TICK, {"nvmlDeviceGetSamples", NULL}},
    {F(nvmlDeviceGetFanSpeed), SYM_PER_TICK, {"nvmlDeviceGetFanSpeed", NULL}},
    {F(nvmlDeviceGetMigMode), 0, {"nvmlDeviceGetMigMode", NULL}},
    {F(nvmlDeviceGetPerformanceState), SYM_PER_TICK, {"nvmlDeviceGetPerformanceState", NULL}},
    {F(nvmlGpmQueryDeviceSupport), 0, {"nvmlGpmQueryDeviceSupport", NULL}},
    {F(nvmlGpmSampleAlloc), 0, {"nvmlGpmSampleAlloc", NULL}},
    {F(nvmlGpmSampleFree), 0, {"nvmlGpmSampleFree", NULL}},
    {F(nvmlGpmSampleGet), 0, {"nvmlGpmSampleGet", NULL}},
    {F(nvmlGpmMetricsGet), 0, {"nvmlGpmMetricsGet", NULL}},
    {F(nvmlDeviceGetMaxMigDeviceCount), 0, {"nvmlDeviceGetMaxMigDeviceCount", NULL}},
    {F(nvmlDeviceGetMigDeviceHandleByIndex), 0, {"nvmlDeviceGetMigDeviceHandleByIndex", NULL}},
    {F(nvmlDeviceIsMigDeviceHandle), 0, {"nvmlDeviceIsMigDeviceHandle", NULL}},
    {F(nvmlDeviceGetGpuInstanceId), 0, {"nvmlDeviceGetGpuInstanceId", NULL}},
    {F(nvmlDeviceGetComputeInstanceId), 0, {"nvmlDeviceGetComputeInstanceId", NULL}},
    {F(nvmlDeviceGetDeviceHandleFromMigDeviceHandle), 0, {"nvmlDeviceGetDeviceHandleFromMigDeviceHandle", NULL}},
    {F(nvmlGpmMigSampleGet), 0, {"nvmlGpmMigSampleGet", NULL}},
    {F(nvmlEventSetCreate), 0, {"nvmlEventSetCreate", NULL}},
    {F(nvmlDeviceRegisterEvents), 0, {"nvmlDeviceRegisterEvents", NULL}},
    {F(nvmlEventSetWait_v2), 0, {"nvmlEventSetWait_v2", NULL}},
    {F(nvmlEventSetFree), 0, {"nvmlEventSetFree", NULL}},
    {F(nvmlDeviceGetTotalEccErrors), 0, {"nvmlDeviceGetTotalEccErrors", NULL}},
    {F(nvmlDeviceGetEccMode), 0, {"nvmlDeviceGetEccMode", NULL}},
    {F(nvmlDeviceGetRemappedRows), 0, {"nvmlDeviceGetRemappedRows", NULL}},
    {F(nvmlDeviceGetRetiredPages), 0, {"nvmlDeviceGetRetiredPages", NULL}},
    {F(nvmlDeviceGetRetiredPagesPendingStatus), 0, {"nvmlDeviceGetRetiredPagesPendingStatus", NULL}},
    {F(nvmlDeviceGetPcieReplayCounter), 0, {"nvmlDeviceGetPcieReplayCounter", NULL}},
    {F(nvmlDeviceGetNvLinkState), 0, {"nvmlDeviceGetNvLinkState", NULL}},
    {F(nvmlDeviceGetNvLinkErrorCounter), 0, {"nvmlDeviceGetNvLinkErrorCounter", NULL}},
};

#undef F

/* Resolves the first name the library exports; returns its index in s->names or -1. The pointer is
 * stored through memcpy: POSIX guarantees a dlsym() result converts to a function pointer. */
static int sym_resolve(struct nvml_api *api, const struct sym *s) {
  for (int i = 0; s->names[i]; i++) {
    void *p = dlsym(api->lib, s->names[i]);
    if (p) {
      memcpy((char *)api + s->off, &p, sizeof p);
      return i;
    }
  }
  return -1;
}

static void *sym_field(const struct nvml_api *api, const struct sym *s) {
  void *p;
  memcpy(&p, (const char *)api + s->off, sizeof p);
  return p;
}

int nvml_api_open(struct nvml_api *api, const char *lib, char *err, size_t errlen) {
  memset(api, 0, sizeof *api);
  if (!lib || !*lib)
    lib = getenv("GPUSCOPE_NVML_LIB");
  int is_default = !lib || !*lib;
  if (is_default)
    lib = "libnvidia-ml.so.1";
  snprintf(api->path, sizeof api->path, "%s", lib);
  api->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!api->lib) {
    if (is_default)
      snprintf(err, errlen, "libnvidia-ml.so.1 not found");
    else
      snprintf(err, errlen, "cannot load %s: %s", lib, dlerror());
    return GS_ENOENT;
  }
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    int which = sym_resolve(api, &syms[i]);
    if (which < 0 && (syms[i].flags & SYM_REQUIRED)) {
      snprintf(err, errlen, "%s lacks %s", api->path, syms[i].names[0]);
      goto fail;
    }
    if (syms[i].off == offsetof(struct nvml_api, nvmlDeviceGetComputeRunningProcesses))
      api->proc_stride = which == 2 ? sizeof(nvmlProcessInfo_v1_t) : sizeof(nvmlProcessInfo_t);
  }
  api->have_memory_v2 = api->nvmlDeviceGetMemoryInfo_v2 != NULL;
  /* Early R535 drivers wrote a 32-byte entry from _v3 (an extra usedGpuCcProtectedMemory). They
   * are the ones with confidential-computing calls but without the later detail-list call. */
  if (api->proc_stride == sizeof(nvmlProcessInfo_t) && dlsym(api->lib, "nvmlDeviceGetConfComputeMemSizeInfo") &&
      !dlsym(api->lib, "nvmlDeviceGetRunningProcessDetailList"))
    api->proc_stride = 32;

  nvmlReturn_t r = api->nvmlInit();
  if (r != NVML_SUCCESS) {
    snprintf(err, errlen, "nvmlInit: %s", nvml_api_strerror(api, r));
    goto fail;
  }
  return GS_OK;

fail:
  dlclose(api->lib);
  memset(api, 0, sizeof *api);
  return GS_ENOENT;
}

void nvml_api_close(struct nvml_api *api, int shutdown) {
  if (!api->lib)
    return;
  if (shutdown) {
    api->nvmlShutdown();
    dlclose(api->lib);
  }
  api->lib = NULL;
}

const char *nvml_api_strerror(const struct nvml_api *api, nvmlReturn_t r) {
  if (api && api->nvmlErrorString) {
    const char *s = api->nvmlErrorString(r);
    if (s)
      return s;
  }
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
  case NVML_ERROR_NOT_FOUND:
    return "Not Found";
  case NVML_ERROR_INSUFFICIENT_SIZE:
    return "Insufficient Size";
  case NVML_ERROR_DRIVER_NOT_LOADED:
    return "Driver Not Loaded";
  case NVML_ERROR_TIMEOUT:
    return "Timeout";
  case NVML_ERROR_FUNCTION_NOT_FOUND:
    return "Function Not Found";
  case NVML_ERROR_GPU_IS_LOST:
    return "GPU is lost";
  case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
    return "Argument Version Mismatch";
  case NVML_ERROR_GPU_NOT_FOUND:
    return "GPU not found";
  default:
    return "Unknown Error";
  }
}

const char *nvml_api_missing(const struct nvml_api *api, char *buf, size_t n) {
  size_t len = 0;
  buf[0] = 0;
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    if (!(syms[i].flags & SYM_PER_TICK) || sym_field(api, &syms[i]))
      continue;
    if (syms[i].off == offsetof(struct nvml_api, nvmlDeviceGetTemperature) && api->nvmlDeviceGetTemperatureV)
      continue; /* the deprecated call's successor answers */
    int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", syms[i].names[0]);
    if (w < 0 || (size_t)w >= n - len)
      break;
    len += (size_t)w;
  }
  if (!api->nvmlGpmMetricsGet && len + 10 < n)
    snprintf(buf + len, n - len, "%snvmlGpm*", len ? ", " : "");
  return buf;
}

/* Total memory of a device (MIG or not), -1 when it does not say. */
static long long mem_total_of(const struct nvml_api *api, nvmlDevice_t dev) {
  if (api->nvmlDeviceGetMemoryInfo_v2) {
    nvmlMemory_v2_t m = {.version = NVML_MEMORY_INFO_V2};
    if (api->nvmlDeviceGetMemoryInfo_v2(dev, &m) == NVML_SUCCESS)
      return (long long)m.total;
  }
  nvmlMemory_t m;
  if (api->nvmlDeviceGetMemoryInfo && api->nvmlDeviceGetMemoryInfo(dev, &m) == NVML_SUCCESS)
    return (long long)m.total;
  return -1;
}

/* Reads one MIG device's facts into m. Returns NVML_SUCCESS; NOT_FOUND when h is not a MIG device
 * of this GPU (a driver bug, not something to sample); or the error of its GPU-instance id call. */
static nvmlReturn_t mig_device_facts(const struct nvml_api *api, nvmlDevice_t dev, nvmlDevice_t h,
                                     struct nvml_mig_facts *m) {
  unsigned is_mig = 1;
  nvmlDevice_t parent = dev;
  if ((api->nvmlDeviceIsMigDeviceHandle && api->nvmlDeviceIsMigDeviceHandle(h, &is_mig) == NVML_SUCCESS && !is_mig) ||
      (api->nvmlDeviceGetDeviceHandleFromMigDeviceHandle &&
       api->nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h, &parent) == NVML_SUCCESS && parent != dev))
    return NVML_ERROR_NOT_FOUND;
  nvmlReturn_t r = api->nvmlDeviceGetGpuInstanceId(h, &m->gi);
  if (r != NVML_SUCCESS)
    return r;
  if (!api->nvmlDeviceGetComputeInstanceId || api->nvmlDeviceGetComputeInstanceId(h, &m->ci) != NVML_SUCCESS)
    m->ci = 0;
  if (!api->nvmlDeviceGetName || api->nvmlDeviceGetName(h, m->name, sizeof m->name) != NVML_SUCCESS)
    m->name[0] = 0;
  if (!api->nvmlDeviceGetUUID || api->nvmlDeviceGetUUID(h, m->uuid, sizeof m->uuid) != NVML_SUCCESS)
    m->uuid[0] = 0;
  m->name[sizeof m->name - 1] = m->uuid[sizeof m->uuid - 1] = 0;
  /* The profile has no call of its own on a MIG handle: real drivers name the device
   * "<GPU's name> MIG <profile>". */
  const char *p = strstr(m->name, " MIG ");
  snprintf(m->profile, sizeof m->profile, "%s", p ? p + 5 : "");
  m->mem_total = mem_total_of(api, h);
  return NVML_SUCCESS;
}

nvmlReturn_t nvml_api_mig_list(const struct nvml_api *api, nvmlDevice_t dev, struct nvml_facts *f,
                               nvmlReturn_t *incomplete) {
  unsigned max = 0;
  *incomplete = NVML_SUCCESS;
  f->n_mig = 0;
  if (!api->nvmlDeviceGetMaxMigDeviceCount || !api->nvmlDeviceGetMigDeviceHandleByIndex ||
      !api->nvmlDeviceGetGpuInstanceId) {
    f->mig_unlisted = 1;
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  }
  nvmlReturn_t r = api->nvmlDeviceGetMaxMigDeviceCount(dev, &max);
  if (r != NVML_SUCCESS)
    return r;
  for (unsigned slot = 0; slot < max && f->n_mig < NVML_MAX_MIG; slot++) {
    nvmlDevice_t h = NULL;
    r = api->nvmlDeviceGetMigDeviceHandleByIndex(dev, slot, &h);
    if (r == NVML_ERROR_GPU_IS_LOST)
      return r;
    struct nvml_mig_facts *m = &f->mig[f->n_mig];
    memset(m, 0, sizeof *m);
    m->slot = slot;
    if (r == NVML_SUCCESS && h)
      r = mig_device_facts(api, dev, h, m); /* GPU_IS_LOST here is the instance's, not the GPU's */
    if (r != NVML_SUCCESS) {
      if (r != NVML_ERROR_NOT_FOUND && *incomplete == NVML_SUCCESS)
        *incomplete = r; /* this slot's instance may exist: the list is not complete */
      continue;
    }
    int seen = 0;
    for (int i = 0; i < f->n_mig; i++)
      seen |= f->mig[i].gi == m->gi;
    f->n_mig += !seen;
  }
  return NVML_SUCCESS;
}

/* The instances nvml_api_facts lists: what could be listed is listed; only a lost GPU is an error. */
static nvmlReturn_t facts_migs(const struct nvml_api *api, nvmlDevice_t dev, struct nvml_facts *f) {
  nvmlReturn_t incomplete, r = nvml_api_mig_list(api, dev, f, &incomplete);
  return r == NVML_ERROR_GPU_IS_LOST ? r : NVML_SUCCESS;
}

/* Each part of nvml_api_facts returns what the first call that found the GPU lost answered, else
 * NVML_SUCCESS: a call that fails otherwise leaves its fact unknown. */
#define LOST(expr) ((r = (expr)) == NVML_ERROR_GPU_IS_LOST)

/* Name, UUID, PCI bus id, compute capability. */
static nvmlReturn_t facts_identity(const struct nvml_api *api, nvmlDevice_t dev, struct nvml_facts *f) {
  nvmlReturn_t r;
  if (api->nvmlDeviceGetName) {
    if (LOST(api->nvmlDeviceGetName(dev, f->name, sizeof f->name)))
      return r;
    if (r != NVML_SUCCESS)
      f->name[0] = 0;
  }
  if (api->nvmlDeviceGetUUID) {
    if (LOST(api->nvmlDeviceGetUUID(dev, f->uuid, sizeof f->uuid)))
      return r;
    if (r != NVML_SUCCESS)
      f->uuid[0] = 0;
  }
  f->name[sizeof f->name - 1] = f->uuid[sizeof f->uuid - 1] = 0;
  if (api->nvmlDeviceGetPciInfo) {
    nvmlPciInfo_t p;
    memset(&p, 0, sizeof p);
    if (LOST(api->nvmlDeviceGetPciInfo(dev, &p)))
      return r;
    if (r == NVML_SUCCESS) {
      p.busId[sizeof p.busId - 1] = 0;
      snprintf(f->pci_bus_id, sizeof f->pci_bus_id, "%s", p.busId);
    }
  }
  if (api->nvmlDeviceGetCudaComputeCapability) {
    int ma, mi;
    if (LOST(api->nvmlDeviceGetCudaComputeCapability(dev, &ma, &mi)))
      return r;
    if (r == NVML_SUCCESS)
      f->cc_major = ma, f->cc_minor = mi;
  }
  return NVML_SUCCESS;
}

/* Total memory and whether the basic readings (memory, utilisation) answer at all. */
static nvmlReturn_t facts_basic(const struct nvml_api *api, nvmlDevice_t dev, struct nvml_facts *f) {
  nvmlReturn_t r;
  int basic = 0;
  if (api->nvmlDeviceGetMemoryInfo_v2) {
    nvmlMemory_v2_t m = {.version = NVML_MEMORY_INFO_V2};
    if (LOST(api->nvmlDeviceGetMemoryInfo_v2(dev, &m)))
      return r;
    if (r == NVML_SUCCESS)
      f->mem_total = (long long)m.total, basic = 1;
  }
  if (f->mem_total < 0 && api->nvmlDeviceGetMemoryInfo) {
    nvmlMemory_t m;
    if (LOST(api->nvmlDeviceGetMemoryInfo(dev, &m)))
      return r;
    if (r == NVML_SUCCESS)
      f->mem_total = (long long)m.total, basic = 1;
  }
  if (api->nvmlDeviceGetUtilizationRates) {
    nvmlUtilization_t u;
    if (LOST(api->nvmlDeviceGetUtilizationRates(dev, &u)))
      return r;
    basic |= r == NVML_SUCCESS;
  }
  f->fam_basic = basic;
  return NVML_SUCCESS;
}

/* The MIG mode and which families of readings the GPU has: driver samples, processes, GPM. */
static nvmlReturn_t facts_families(const struct nvml_api *api, nvmlDevice_t dev, struct nvml_facts *f) {
  nvmlReturn_t r;
  if (api->nvmlDeviceGetMigMode) {
    unsigned cur, pend;
    if (LOST(api->nvmlDeviceGetMigMode(dev, &cur, &pend)))
      return r;
    if (r == NVML_SUCCESS)
      f->mig_current = cur != 0, f->mig_pending = pend != 0;
  }
  if (api->nvmlDeviceGetSamples) {
    unsigned vt, n = 0;
    if (LOST(api->nvmlDeviceGetSamples(dev, NVML_GPU_UTILIZATION_SAMPLES, 0, &vt, &n, NULL)))
      return r;
    f->fam_samples = r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND;
  }
  if (api->nvmlDeviceGetComputeRunningProcesses) {
    unsigned n = 0;
    if (LOST(api->nvmlDeviceGetComputeRunningProcesses(dev, &n, NULL)))
      return r;
    f->fam_per_process = r == NVML_SUCCESS || r == NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (api->nvmlGpmQueryDeviceSupport && api->nvmlGpmMetricsGet && api->nvmlGpmSampleGet && api->nvmlGpmSampleAlloc &&
      api->nvmlGpmSampleFree) {
    nvmlGpmSupport_t s = {.version = NVML_GPM_SUPPORT_VERSION};
    if (LOST(api->nvmlGpmQueryDeviceSupport(dev, &s)))
      return r;
    f->fam_gpm = r == NVML_SUCCESS && s.isSupportedDevice;
  }
  return NVML_SUCCESS;
}
#undef LOST

nvmlReturn_t nvml_api_facts(const struct nvml_api *api, nvmlDevice_t dev, struct nvml_facts *f) {
  nvmlReturn_t r;
  memset(f, 0, sizeof *f);
  f->cc_major = f->cc_minor = -1;
  f->mem_total = -1;
  f->power_cap_w = -1;
  f->mig_current = f->mig_pending = -1;
  if ((r = facts_identity(api, dev, f)) || (r = facts_basic(api, dev, f)) || (r = facts_families(api, dev, f)))
    return r;
  return f->mig_current == 1 ? facts_migs(api, dev, f) : NVML_SUCCESS;
}

nvmlDevice_t nvml_api_mig_handle(const struct nvml_api *api, nvmlDevice_t dev, unsigned slot) {
  nvmlDevice_t h = NULL;
  if (!api->nvmlDeviceGetMigDeviceHandleByIndex || api->nvmlDeviceGetMigDeviceHandleByIndex(dev, slot, &h))
    return NULL;
  return h;
}
