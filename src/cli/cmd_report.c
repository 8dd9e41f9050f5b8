/* cli/cmd_report: placeholder until reports land. */
#include "cli/cli.h"

int cmd_report(int argc, char **argv) {
  (void)argc, (void)argv;
  return cli_error(GS_EXIT_FAIL, "report: not built yet");
}

int cmd_compare(int argc, char **argv) {
  (void)argc, (void)argv;
  return cli_error(GS_EXIT_FAIL, "compare: not built yet");
}
