/* collect/nvml: placeholder until the NVML collector lands — no GPUs. */
#include "collect/collect.h"

static void *nvml_open(const struct collector_opts *o, struct gs_sink *s, char *err, size_t errlen) {
  (void)o, (void)s;
  snprintf(err, errlen, "NVML collector not built");
  return NULL;
}

const struct collector collector_nvml = {.version = 1, .name = "nvml", .open = nvml_open};

int nvml_devices_write(FILE *out, int json, const char *lib) {
  (void)out, (void)json, (void)lib;
  return gs_fail(GS_ENOENT, "NVML collector not built");
}
