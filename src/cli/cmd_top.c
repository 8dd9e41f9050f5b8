/* cli/cmd_top: `gpuscope top [options] [RUN]` and `gpuscope top [options] -- CMD [ARGS...]` —
 * argument parsing for the live view (src/tui). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "collect/collect.h"
#include "tui/tui.h"

static const char top_usage[] =
    "usage: gpuscope top [options] [RUN]\n"
    "       gpuscope top [options] -- CMD [ARGS...]\n\n"
    "A live view of a run in the terminal: per GPU util, SM activity, memory, power and temperature\n"
    "with a history graph, the host's cores, the job's processes, the step breakdown and the doctor's\n"
    "top finding. It reads what the agent committed to the store and never talks to the agent.\n"
    "RUN defaults to the newest running run; with -- CMD it runs CMD under `gpuscope run` (output to a\n"
    "log file it names on exit) and quitting stops CMD. A run that ends stays on screen, \"finished\".\n\n"
    "Keys: q quit, Up/Down PgUp/PgDn scroll the processes, g next GPU, h help. NO_COLOR is respected.\n\n"
    "  --refresh T        how often to read the store again (default 1s; 200ms..60s)\n"
    "  --store URL        sqlite:///path/to/file.db (default $GPUSCOPE_STORE or the XDG path)\n\n"
    "Exit status: 0 (with -- CMD: CMD's status), 2 bad usage, no such run or not a terminal,\n"
    "3 the store cannot be used.\n";

struct top_args {
  struct tui_opts o;
};

static int top_opt(int c, const char *arg, void *user) {
  struct top_args *a = user;
  switch (c) {
  case 'r':
    if (gs_parse_duration(arg, &a->o.refresh_ns))
      return cli_error(GS_EXIT_USAGE, "--refresh: %s", gs_last_error());
    if (a->o.refresh_ns < 200000000LL || a->o.refresh_ns > 60 * GS_NS_PER_S)
      return cli_error(GS_EXIT_USAGE, "--refresh %s is outside 200ms..60s", arg);
    return -1;
  case 's':
    a->o.store_url = arg;
    return -1;
  }
  return GS_EXIT_USAGE;
}

int cmd_top(int argc, char **argv) {
  static const struct option longopts[] = {{"refresh", required_argument, 0, 'r'},
                                           {"store", required_argument, 0, 's'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  struct top_args a = {.o = {.refresh_ns = GS_NS_PER_S, .self_exe = COLLECT_SELF_EXE}};
  /* Options stop at "--": what follows is the job's command line, never top's options. */
  int dash = argc;
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--")) {
      dash = i;
      break;
    }
  int rc = cli_parse_opts(dash, argv, longopts, top_usage, top_opt, &a);
  if (rc >= 0)
    return rc;
  if (dash < argc) {
    if (optind != dash)
      return cli_error(GS_EXIT_USAGE, "top: give a RUN or -- CMD, not both");
    if (dash + 1 >= argc || !argv[dash + 1][0])
      return cli_error(GS_EXIT_USAGE, "top: no command after --");
    a.o.argv = argv + dash + 1;
  } else if (optind < argc - 1) {
    return cli_error(GS_EXIT_USAGE, "top: one RUN at most (usage: gpuscope top [options] [RUN])");
  } else if (optind == argc - 1) {
    a.o.run_ref = argv[optind];
  }
  int status = 0;
  rc = tui_top(&a.o, &status);
  if (rc)
    return cli_error(rc == GS_EIO && !a.o.argv ? GS_EXIT_STORE
                     : rc == GS_EIO            ? GS_EXIT_FAIL
                                               : GS_EXIT_USAGE,
                     "%s", gs_last_error());
  return status;
}
