/* cli/cmd_attach: `gpuscope attach [options] PID` — argument parsing for the agent's attach mode
 * (agent.h): record a run of a process gpuscope did not start, until it exits or ^C. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "cli/cli.h"

static const char attach_usage[] =
    "usage: gpuscope attach [options] PID\n\n"
    "Watches a running process and its descendants (launching nothing) and keeps the run in the\n"
    "store, until the process exits or gpuscope gets ^C, SIGTERM or SIGHUP (the process is never\n"
    "signalled). The run carries the params attached=1 and attached.pid. Clients in the process (or\n"
    "in its children) find the agent's socket on their own within a few seconds (docs/protocol.md).\n\n"
    "  --name NAME        name the run\n"
    "  --tag K=V          tag the run (repeatable)\n"
    "  --interval T       sampling interval (default 100ms, at least 10ms)\n"
    "  --flush T          commit samples every T (default 10 ticks, 1s..10s; 100ms..60s)\n"
    "  --store URL        sqlite:///path/to/file.db (default $GPUSCOPE_STORE or the XDG path)\n"
    "  --quiet            no live line, no summary\n" CLI_ALERT_USAGE "\n"
    "Exit status: 0 when the run was recorded, 2 bad usage, no such process or already watched,\n"
    "3 the store cannot be used.\n";

struct attach_args {
  struct agent_opts o;
  struct cli_alerts alerts;
  char tags[1024];
};

static int attach_opt(int c, const char *arg, void *user) {
  struct attach_args *a = user;
  int rc = cli_alert_opt(&a->alerts, c, arg);
  if (rc != -2)
    return rc;
  switch (c) {
  case 'n':
    a->o.name = arg;
    return -1;
  case 't':
    if (!strchr(arg, '=') || arg[0] == '=' || strchr(arg, ','))
      return cli_error(GS_EXIT_USAGE, "--tag wants KEY=VALUE (no commas), got '%s'", arg);
    if (strlen(a->tags) + strlen(arg) + 2 > sizeof a->tags)
      return cli_error(GS_EXIT_USAGE, "too many tags");
    if (a->tags[0])
      strcat(a->tags, ",");
    strcat(a->tags, arg);
    return -1;
  case 'i':
    if (gs_parse_duration(arg, &a->o.interval_ns))
      return cli_error(GS_EXIT_USAGE, "--interval: %s", gs_last_error());
    if (a->o.interval_ns < 10000000LL)
      return cli_error(GS_EXIT_USAGE, "--interval %s is below the 10ms minimum", arg);
    return -1;
  case 'f':
    if (gs_parse_duration(arg, &a->o.flush_ns))
      return cli_error(GS_EXIT_USAGE, "--flush: %s", gs_last_error());
    if (a->o.flush_ns < 100000000LL || a->o.flush_ns > 60000000000LL)
      return cli_error(GS_EXIT_USAGE, "--flush %s is outside 100ms..60s", arg);
    return -1;
  case 's':
    a->o.store_url = arg;
    return -1;
  case 'q':
    a->o.quiet = 1;
    return -1;
  }
  return GS_EXIT_USAGE;
}

int cmd_attach(int argc, char **argv) {
  static const struct option longopts[] = {{"name", required_argument, 0, 'n'},
                                           {"tag", required_argument, 0, 't'},
                                           {"interval", required_argument, 0, 'i'},
                                           {"flush", required_argument, 0, 'f'},
                                           {"store", required_argument, 0, 's'},
                                           {"quiet", no_argument, 0, 'q'},
                                           {"help", no_argument, 0, 'h'},
                                           CLI_ALERT_LONGOPTS,
                                           {0, 0, 0, 0}};
  struct attach_args a = {.o = {.interval_ns = 100000000LL, .name = "", .root = "/"}};
  int rc = cli_parse_opts(argc, argv, longopts, attach_usage, attach_opt, &a);
  if (rc >= 0)
    return rc;
  if (optind != argc - 1)
    return cli_error(GS_EXIT_USAGE, "attach: want exactly one PID (usage: gpuscope attach [options] PID)");
  char *end;
  long pid = strtol(argv[optind], &end, 10);
  if (!argv[optind][0] || *end || pid < 1 || pid > 1 << 22)
    return cli_error(GS_EXIT_USAGE, "attach: '%s' is not a process id", argv[optind]);
  a.o.attach_pid = (pid_t)pid;
  a.o.tags = a.tags;
  if ((rc = cli_alerts_load(&a.alerts, "attach")) >= 0)
    return rc;
  a.o.alerts = &a.alerts.c;
  char def[1200];
  if (!a.o.store_url)
    a.o.store_url = store_default_url(def, sizeof def);
  int status = 0;
  rc = agent_run(&a.o, &status);
  if (rc)
    return cli_error(rc == GS_EINVAL || rc == GS_ENOENT || rc == GS_EBUSY ? GS_EXIT_USAGE
                     : rc == GS_ESTORE                                    ? GS_EXIT_STORE
                                                                          : GS_EXIT_FAIL,
                     "%s", gs_last_error());
  return status;
}
