/* cli/cmd_devices: `gpuscope devices [--json]` — lists the NVIDIA GPUs NVML sees and the metric
 * families each one answers (collect's collect_devices_list reads them, report_devices prints them).
 * No GPU is not an error: the command says why on stderr and lists nothing, so scripts can call it
 * anywhere. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "collect/collect.h"
#include "report/report.h"

static void devices_usage(FILE *out) {
  fprintf(out, "usage: gpuscope devices [--json]\n\n"
               "Lists the NVIDIA GPUs (index, name, UUID, PCI bus, memory, compute capability, MIG mode)\n"
               "and the metric families the driver offers for each: basic, samples (every driver\n"
               "utilisation sample), per-process, GPM (Hopper and newer). The library loaded is\n"
               "$GPUSCOPE_NVML_LIB, else libnvidia-ml.so.1.\n\n"
               "  --json   one object: {\"driver_version\": ..., \"devices\": [...]}\n");
}

/* argv[0] is "devices". Returns the process exit code: 0 whether or not a GPU was found. */
int cmd_devices(int argc, char **argv) {
  int json = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) {
      json = 1;
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
  }
  collect_devices_done(&d);
  return GS_EXIT_OK;
}
