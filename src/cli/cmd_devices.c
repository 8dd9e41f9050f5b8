/* cli/cmd_devices: placeholder until the NVML collector lands. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "collect/collect.h"

int cmd_devices(int argc, char **argv) {
  int json = argc > 1 && !strcmp(argv[1], "--json");
  if (nvml_devices_write(stdout, json, NULL)) {
    fprintf(stderr, "gpuscope: no NVIDIA GPU found: %s\n", gs_last_error());
    if (json)
      printf("{\"devices\": []}\n");
  }
  return GS_EXIT_OK;
}
