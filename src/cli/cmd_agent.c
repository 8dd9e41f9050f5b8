/* cli/cmd_agent: `gpuscope agent [--listen HOST:PORT] [--interval T] [--record] [--token T]
 * [--host-label hostname|Hostname]` — the node agent (agent/node.c): every GPU and the host, served
 * as Prometheus metrics under dcgm-exporter's names and gpuscope's own (docs/deploy.md). Exit codes
 * as cli.h: 2 for bad usage (a non-loopback address without a token, an address that cannot be
 * bound), 3 when the store cannot be opened (--record), 1 otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>

#include "agent/agent.h"
#include "cli/cli.h"
#include "expose/expose.h"

static const char USAGE[] =
    "usage: gpuscope agent [--listen HOST:PORT] [--interval T] [--record] [--token T]\n"
    "                      [--host-label hostname|Hostname]\n"
    "  Watches the whole node (every GPU, the host; no job is launched) and serves /metrics for\n"
    "  Prometheus: GPU metrics under dcgm-exporter's names and labels, gpuscope's own as gpuscope_*.\n"
    "  --listen HOST:PORT   address (default " EXPOSE_DEFAULT_LISTEN "; port 0: any free port)\n"
    "  --interval T         sampling interval (default 1s, at least 10ms)\n"
    "  --record             also keep a node run in the store (--store URL, --name NAME)\n"
    "  --token T            require 'Authorization: Bearer T' (default $GPUSCOPE_TOKEN); required\n"
    "                       for an address other than loopback\n"
    "  --host-label NAME    the host label's name: hostname (dcgm-exporter 4.x, default) or Hostname\n"
    "  --quiet              no notes on stderr\n"
    "  with --record, the alert options of `gpuscope run` (over the node run's window):\n" CLI_ALERT_USAGE;

struct node_args {
  struct agent_node_opts o;
  struct cli_alerts alerts;
};

static int agent_opt(int c, const char *arg, void *user) {
  struct node_args *na = user;
  struct agent_node_opts *o = &na->o;
  int rc = cli_alert_opt(&na->alerts, c, arg);
  if (rc != -2)
    return rc;
  switch (c) {
  case 'l':
    o->listen = arg;
    break;
  case 'i':
    if (gs_parse_duration(arg, &o->interval_ns))
      return cli_error(GS_EXIT_USAGE, "agent: --interval: %s", gs_last_error());
    if (o->interval_ns < 10000000LL)
      return cli_error(GS_EXIT_USAGE, "agent: --interval %s is below the 10ms minimum", arg);
    break;
  case 'R':
    o->record = 1;
    break;
  case 's':
    o->store_url = arg;
    break;
  case 'n':
    o->name = arg;
    break;
  case 't':
    o->token = arg;
    break;
  case 'H':
    if (strcmp(arg, "hostname") && strcmp(arg, "Hostname"))
      return cli_error(GS_EXIT_USAGE, "agent: --host-label is hostname or Hostname, not '%s'", arg);
    o->host_label = arg;
    break;
  case 'r':
    o->root = arg;
    break;
  case 'q':
    o->quiet = 1;
    break;
  }
  return -1;
}

int cmd_agent(int argc, char **argv) {
  static const struct option longopts[] = {{"listen", required_argument, 0, 'l'},
                                           {"interval", required_argument, 0, 'i'},
                                           {"record", no_argument, 0, 'R'},
                                           {"store", required_argument, 0, 's'},
                                           {"name", required_argument, 0, 'n'},
                                           {"token", required_argument, 0, 't'},
                                           {"host-label", required_argument, 0, 'H'},
                                           {"root", required_argument, 0, 'r'},
                                           {"quiet", no_argument, 0, 'q'},
                                           {"help", no_argument, 0, 'h'},
                                           CLI_ALERT_LONGOPTS,
                                           {0, 0, 0, 0}};
  struct node_args na = {.o = {.interval_ns = GS_NS_PER_S, .host_label = "hostname", .root = "/", .print_address = 1}};
  struct agent_node_opts o = na.o;
  int rc = cli_parse_opts(argc, argv, longopts, USAGE, agent_opt, &na);
  o = na.o;
  if (rc >= 0)
    return rc;
  if (optind < argc)
    return cli_error(GS_EXIT_USAGE, "agent: unexpected argument '%s'", argv[optind]);
  if (!o.token)
    o.token = getenv("GPUSCOPE_TOKEN");
  if ((rc = cli_alerts_load(&na.alerts, "agent")) >= 0)
    return rc;
  if (alert_config_active(&na.alerts.c)) {
    if (!o.record && na.alerts.n) /* the file's rules are for runs: a node agent without a store skips them */
      return cli_error(GS_EXIT_USAGE, "agent: alerts read the recorded window: add --record");
    if (o.record)
      o.alerts = &na.alerts.c;
  }
  char def[1200];
  if (o.record && !o.store_url)
    o.store_url = store_default_url(def, sizeof def);
  rc = agent_node_run(&o);
  if (rc == GS_EINVAL)
    return cli_error(GS_EXIT_USAGE, "agent: %s", gs_last_error());
  if (rc)
    return cli_error(rc == GS_ESTORE ? GS_EXIT_STORE : GS_EXIT_FAIL, "agent: %s", gs_last_error());
  return GS_EXIT_OK;
}
