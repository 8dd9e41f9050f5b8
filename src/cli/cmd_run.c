/* cli/cmd_run: `gpuscope run [options] [--] CMD [ARGS...]` — argument parsing for the agent. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "cli/cli.h"

/* The group of a node's run in a distributed job, from the launcher's environment: torchrun's
 * TORCHELASTIC_RUN_ID (one id for every node of a rendezvous), else Slurm's job id with its step
 * id (every node of one srun step). NULL when neither is set. */
static const char *cli_default_group(char *buf, size_t n) {
  const char *elastic = getenv("TORCHELASTIC_RUN_ID"), *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
  if (elastic && *elastic)
    snprintf(buf, n, "%s", elastic);
  else if (job && *job && step && *step)
    snprintf(buf, n, "slurm-%s.%s", job, step);
  else if (job && *job)
    snprintf(buf, n, "slurm-%s", job);
  else
    return NULL;
  return buf;
}

static const char RUN_USAGE[] =
    "usage: gpuscope run [options] [--] CMD [ARGS...]\n\n"
    "Runs CMD, samples the host, the job's processes and the GPUs while it runs, keeps the run\n"
    "in the store, prints a summary, and exits with CMD's status.\n\n"
    "  --name NAME        name the run (read-back commands accept it)\n"
    "  --tag K=V          tag the run (repeatable)\n"
    "  --group NAME       one experiment across runs, e.g. the nodes of a distributed job\n"
    "                     (default $TORCHELASTIC_RUN_ID, else $SLURM_JOB_ID.$SLURM_STEP_ID)\n"
    "  --interval T       sampling interval: 50ms, 0.5s, 2s (default 100ms, at least 10ms)\n"
    "  --flush T          commit samples to the store every T (default 10 ticks, 1s..10s;\n"
    "                     a SIGKILLed agent loses at most T of samples; 100ms..60s)\n"
    "  --store URL        sqlite:///path/to/file.db or postgresql://host/db (default\n"
    "                     $GPUSCOPE_STORE or the XDG path)\n"
    "  --wait-tree        after CMD exits, wait for the processes it left running\n"
    "  --save-diff        keep the uncommitted git diff itself (at most 1 MiB), not only its hash\n"
    "  --quiet            no live line, no summary\n"
    "  --log-max BYTES    keep the last BYTES of the job's output in the store (default 8M;\n"
    "                     0 keeps none); the output itself goes where it would without gpuscope\n"
    "  --listen HOST:PORT serve the run's Prometheus metrics (/metrics, as `gpuscope agent`)\n"
    "  --token T          for --listen: require 'Authorization: Bearer T' (default\n"
    "                     $GPUSCOPE_TOKEN); required for an address other than loopback\n"
    "  --host-label NAME  for --listen: hostname (default) or Hostname\n" CLI_ALERT_USAGE;

struct run_args {
  struct agent_opts o;
  struct cli_alerts alerts;
  char tags[1024]; /* the --tag values joined by commas */
};

/* Adds one --tag KEY=VALUE to a->tags. Returns -1 (go on) or GS_EXIT_USAGE after saying why. */
static int run_add_tag(struct run_args *a, const char *tag) {
  if (!strchr(tag, '=') || tag[0] == '=' || strchr(tag, ','))
    return cli_error(GS_EXIT_USAGE, "--tag wants KEY=VALUE (no commas), got '%s'", tag);
  if (strlen(tag) + 1 > sizeof a->tags)
    return cli_error(GS_EXIT_USAGE, "--tag is %zu bytes long; the tags of a run are at most %zu bytes in all",
                     strlen(tag), sizeof a->tags - 1);
  if (strlen(a->tags) + strlen(tag) + 2 > sizeof a->tags)
    return cli_error(GS_EXIT_USAGE, "too many tags: they are at most %zu bytes in all", sizeof a->tags - 1);
  if (a->tags[0])
    strcat(a->tags, ",");
  strcat(a->tags, tag);
  return -1;
}

/* cli_parse_opts' callback: one option of `run` into a struct run_args. */
static int run_opt(int opt, const char *arg, void *user) {
  struct run_args *a = user;
  struct agent_opts *o = &a->o;
  int rc = cli_alert_opt(&a->alerts, opt, arg);
  if (rc != -2)
    return rc;
  switch (opt) {
  case 'n':
    if (strlen(arg) >= sizeof((struct store_run *)0)->name)
      return cli_error(GS_EXIT_USAGE, "--name is %zu bytes long; a run name is at most %zu", strlen(arg),
                       sizeof((struct store_run *)0)->name - 1);
    o->name = arg;
    break;
  case 't':
    return run_add_tag(a, arg);
  case 'i':
    if (gs_parse_duration(arg, &o->interval_ns))
      return cli_error(GS_EXIT_USAGE, "--interval: %s", gs_last_error());
    if (o->interval_ns < 10000000LL)
      return cli_error(GS_EXIT_USAGE, "--interval %s is below the 10ms minimum", arg);
    break;
  case 'f':
    if (gs_parse_duration(arg, &o->flush_ns))
      return cli_error(GS_EXIT_USAGE, "--flush: %s", gs_last_error());
    if (o->flush_ns < 100000000LL || o->flush_ns > 60000000000LL)
      return cli_error(GS_EXIT_USAGE, "--flush %s is outside 100ms..60s", arg);
    break;
  case 'g':
    o->group = arg;
    break;
  case 's':
    o->store_url = arg;
    break;
  case 'q':
    o->quiet = 1;
    break;
  case 'l':
    return cli_parse_log_max("run", arg, &o->log_max) ? GS_EXIT_USAGE : -1;
  case 'w':
    o->wait_tree = 1;
    break;
  case 'D':
    o->save_diff = 1;
    break;
  case 'r':
    o->root = arg;
    break;
  case 'L':
    o->listen = arg;
    break;
  case 'T':
    o->token = arg;
    break;
  case 'H':
    if (strcmp(arg, "hostname") && strcmp(arg, "Hostname"))
      return cli_error(GS_EXIT_USAGE, "run: --host-label is hostname or Hostname, not '%s'", arg);
    o->host_label = arg;
    break;
  }
  return -1;
}

int cmd_run(int argc, char **argv) {
  static const struct option longopts[] = {{"name", required_argument, 0, 'n'},
                                           {"tag", required_argument, 0, 't'},
                                           {"interval", required_argument, 0, 'i'},
                                           {"store", required_argument, 0, 's'},
                                           {"flush", required_argument, 0, 'f'},
                                           {"group", required_argument, 0, 'g'},
                                           {"quiet", no_argument, 0, 'q'},
                                           {"log-max", required_argument, 0, 'l'},
                                           {"wait-tree", no_argument, 0, 'w'},
                                           {"root", required_argument, 0, 'r'},
                                           {"help", no_argument, 0, 'h'},
                                           {"listen", required_argument, 0, 'L'},
                                           {"token", required_argument, 0, 'T'},
                                           {"host-label", required_argument, 0, 'H'},
                                           {"save-diff", no_argument, 0, 'D'},
                                           CLI_ALERT_LONGOPTS,
                                           {0, 0, 0, 0}};
  struct run_args a = {.o = {.interval_ns = 100000000LL, .name = "", .root = "/"}};
  struct agent_opts *o = &a.o;
  /* "+": options stop at CMD, whose own options are its; -q is --quiet. */
  int rc = cli_parse_opts_short(argc, argv, "+q", longopts, RUN_USAGE, run_opt, &a);
  if (rc >= 0)
    return rc;
  if (optind < argc && !strcmp(argv[optind], "--"))
    optind++;
  if (optind >= argc || !argv[optind][0])
    return cli_error(GS_EXIT_USAGE, "run: no command given (usage: gpuscope run [options] -- CMD [ARGS...])");
  o->argv = argv + optind;
  if (o->listen && !o->token)
    o->token = getenv("GPUSCOPE_TOKEN");
  o->tags = a.tags;
  if ((rc = cli_alerts_load(&a.alerts, "run")) >= 0)
    return rc;
  o->alerts = &a.alerts.c;
  char group[64];
  if (!o->group)
    o->group = cli_default_group(group, sizeof group);
  char def[1200];
  if (!o->store_url)
    o->store_url = store_default_url(def, sizeof def);
  int status = 0;
  rc = agent_run(o, &status);
  if (rc) /* README's table: 3 only when the store cannot be opened, created or written */
    return cli_error(rc == GS_EINVAL   ? GS_EXIT_USAGE
                     : rc == GS_ESTORE ? GS_EXIT_STORE
                                       : GS_EXIT_FAIL,
                     "%s", gs_last_error());
  return status;
}
