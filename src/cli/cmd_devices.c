/* cli/cmd_devices: `gpuscope devices [--json] [--health]` — lists the NVIDIA GPUs NVML sees, the
 * metric families each one answers and its health now (--health: exit 1 when one is unhealthy) (collect's
 * collect_devices_list reads them, report_devices prints them). No GPU is not an error: the command says why on stderr
 * and lists nothing, so scripts can call it anywhere. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "collect/collect.h"
#include "report/report.h"

static void devices_usage(FILE *out) {
  fprintf(out, "usage: gpuscope devices [--json] [--health]\n\n"
               "Lists the NVIDIA GPUs (index, name, UUID, PCI bus, memory, compute capability, MIG mode)\n"
               "and the metric families the driver offers for each: basic, samples (every driver\n"
               "utilisation sample), per-process, GPM (Hopper and newer). The library loaded is\n"
               "$GPUSCOPE_NVML_LIB, else libnvidia-ml.so.1.\n\n"
               "  --json     one object: {\"driver_version\": ..., \"devices\": [...]}\n"
               "  --health   exit 1 when a GPU is unhealthy (lost, a row remap pending or failed, a page\n"
               "             retirement pending, uncorrected ECC errors): for Slurm's HealthCheckProgram\n"
               "             and Kubernetes node checks\n");
}

/* argv[0] is "devices". Returns the process exit code: 0 whether or not a GPU was found; with
 * --health, GS_EXIT_FAIL when a GPU is unhealthy (one line on stderr per GPU). */
int cmd_devices(int argc, char **argv) {
  int json = 0, health = 0, rc = GS_EXIT_OK;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = 1;
    } else if (!strcmp(argv[i], "--health")) {
      health = 1;
    } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      devices_usage(stdout);
      return GS_EXIT_OK;
    } else {
      devices_usage(stderr);
      return cli_error(GS_EXIT_USAGE, "devices: unknown argument '%s'", argv[i]);
    }
  }
  struct nvml_devices d;
  if (collect_devices_list(&d, NULL)) {
    fprintf(stderr, "no NVIDIA GPU found: %s\n", gs_last_error());
    if (json)
      printf("{\"devices\": []}\n");
  } else {
    report_devices(stdout, &d, json);
    if (health && report_devices_unhealthy(&d)) {
      for (unsigned i = 0; i < d.n; i++)
        if (d.dev[i].health.unhealthy)
          fprintf(stderr, "gpuscope: devices: GPU %u unhealthy: %s\n", i, d.dev[i].health.why);
      rc = GS_EXIT_FAIL;
    }
  }
  collect_devices_done(&d);
  return rc;
}
