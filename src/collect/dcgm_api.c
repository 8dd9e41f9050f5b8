/* collect/dcgm_api: loads libdcgm.so.4 with dlopen and resolves each entry point by name, as
 * nvml_api.c loads NVML: the NVML collector (nvml_dcgm.c) reads DCGM's profiling fields through it
 * on GPUs without GPM, and gpuscope never links against DCGM, so a host without it runs unchanged. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/dcgm_api.h"
#include "core/core.h"

#define F(field)                                                                                                       \
  { offsetof(struct dcgm_api, field), #field }

static const struct {
  size_t off; /* of the field in struct dcgm_api */
  const char *name;
} dcgm_syms[] = {
    F(dcgmInit),
    F(dcgmShutdown),
    F(dcgmStartEmbedded),
    F(dcgmStopEmbedded),
    F(dcgmConnect_v2),
    F(dcgmDisconnect),
    F(dcgmGetAllSupportedDevices),
    F(dcgmGetDeviceAttributes),
    F(dcgmGroupCreate),
    F(dcgmGroupAddDevice),
    F(dcgmGroupDestroy),
    F(dcgmFieldGroupCreate),
    F(dcgmFieldGroupDestroy),
    F(dcgmWatchFields),
    F(dcgmUnwatchFields),
    F(dcgmGetLatestValues_v2),
};

#undef F

int dcgm_api_open(struct dcgm_api *api, const char *lib, char *err, size_t errlen) {
  memset(api, 0, sizeof *api);
  if (!lib || !*lib)
    lib = getenv("GPUSCOPE_DCGM_LIB");
  int is_default = !lib || !*lib;
  if (is_default)
    lib = "libdcgm.so.4";
  snprintf(api->path, sizeof api->path, "%s", lib);
  api->lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!api->lib) {
    if (is_default)
      snprintf(err, errlen, "libdcgm.so.4 not found");
    else
      snprintf(err, errlen, "cannot load %s: %s", lib, dlerror());
    return GS_ENOENT;
  }
  /* POSIX guarantees a dlsym() result converts to a function pointer: stored through memcpy. */
  for (size_t i = 0; i < sizeof dcgm_syms / sizeof dcgm_syms[0]; i++) {
    void *p = dlsym(api->lib, dcgm_syms[i].name);
    if (!p) {
      snprintf(err, errlen, "%s lacks %s", api->path, dcgm_syms[i].name);
      goto fail;
    }
    memcpy((char *)api + dcgm_syms[i].off, &p, sizeof p);
  }
  void *es = dlsym(api->lib, "errorString");
  if (es)
    memcpy(&api->errorString, &es, sizeof es);
  dcgmReturn_t r = api->dcgmInit();
  if (r != DCGM_ST_OK) {
    snprintf(err, errlen, "dcgmInit: %s", dcgm_api_strerror(api, r));
    goto fail;
  }
  return GS_OK;

fail:
  dlclose(api->lib);
  memset(api, 0, sizeof *api);
  return GS_EIO;
}

void dcgm_api_close(struct dcgm_api *api, int shutdown) {
  if (!api->lib)
    return;
  if (shutdown) {
    api->dcgmShutdown();
    dlclose(api->lib);
  }
  api->lib = NULL;
}

/* Without errorString, DCGM's own texts (its dcgm_errors.c) for the answers the collector notes. */
const char *dcgm_api_strerror(const struct dcgm_api *api, dcgmReturn_t r) {
  if (api && api->errorString) {
    const char *s = api->errorString(r);
    if (s)
      return s;
  }
  switch (r) {
  case DCGM_ST_OK:
    return "Success";
  case DCGM_ST_NOT_SUPPORTED:
    return "Feature not supported";
  case DCGM_ST_NO_PERMISSION:
    return "No permission";
  case DCGM_ST_CONNECTION_NOT_VALID:
    return "Host engine connection invalid/disconnected";
  case DCGM_ST_REQUIRES_ROOT:
    return "Host engine is running as non-root";
  case DCGM_ST_MODULE_NOT_LOADED:
    return "This request is serviced by a module of DCGM that is not currently loaded";
  case DCGM_ST_IN_USE:
    return "The requested operation could not be completed because the affected resource is in use";
  case DCGM_ST_PROFILING_NOT_SUPPORTED:
    return "Profiling is not supported for this group of GPUs or GPU";
  case DCGM_ST_PROFILING_MULTI_PASS:
    return "The requested profiling metrics cannot be collected in a single pass";
  case DCGM_ST_NO_DATA:
    return "No data is available";
  case DCGM_ST_NOT_WATCHED:
    return "Field is not being watched";
  default:
    return "Unknown Error";
  }
}
