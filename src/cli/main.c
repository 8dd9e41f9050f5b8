/* cli/main: gpuscope's entry point — finds the sub-command and hands it the arguments. The helpers
 * the sub-commands share are in cli_util.c (cli.h), so the commands can be linked into unit tests
 * (tests/unit/test_cli.c) without this main(). */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

#ifndef GS_VERSION
#define GS_VERSION "dev"
#endif

struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
};

static const struct command commands[] = {
    {"run", cmd_run, "run a command under watch and keep the run"},
    {"attach", cmd_attach, "watch a running process gpuscope did not start, until it exits"},
    {"agent", cmd_agent, "watch the whole node and serve Prometheus metrics (DCGM names; --listen, --record)"},
    {"top", cmd_top, "live view of a run in the terminal (or: top -- CMD)"},
    {"runs", cmd_runs, "list the runs in the store"},
    {"show", cmd_show, "print a run's raw samples, events, params or notes"},
    {"metrics", cmd_metrics, "list a run's series with unit and count"},
    {"log", cmd_log, "print a run's output as the job wrote it (--stream, --grep RE, --follow)"},
    {"tag", cmd_tag, "set or remove a run's tags (KEY=VALUE, --rm KEY)"},
    {"note", cmd_note, "add a note to a run"},
    {"rename", cmd_rename, "give a run a new name"},
    {"rm", cmd_rm, "remove runs and everything of them (--yes)"},
    {"gc", cmd_gc, "remove the runs that ended more than --older-than AGE ago"},
    {"report", cmd_report, "diagnose a run: findings, evidence, fixes (--json, --html FILE)"},
    {"compare", cmd_compare, "compare runs side by side: throughput, GPU use, what changed"},
    {"check", cmd_check, "a CI gate: budgets on a run's speed-up, data wait, GPU use and findings (--junit)"},
    {"tune", cmd_tune, "try configurations for real and keep the fastest (grid, halving, doctor)"},
    {"devices", cmd_devices, "list NVIDIA GPUs and the metric families each offers"},
    {"migrate", cmd_migrate, "bring a store made by an older gpuscope to this schema version"},
    {"serve", cmd_serve, "the run pages in a browser, live, and a JSON API (--listen, --token)"},
    {"export", cmd_export, "write runs into one file (-o FILE) that import reads into another store"},
    {"import", cmd_import, "add the runs of an export file to the store (a run there already: nothing)"},
    {"copy", cmd_copy, "copy runs to another store (--to URL), e.g. SQLite to PostgreSQL; idempotent"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: gpuscope COMMAND [options]\n\n"
               "gpuscope watches a training job and tells you why the GPU is idle.\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].help);
  fprintf(out, "\nEvery command takes --store URL (default: $GPUSCOPE_STORE, else\n"
               "$XDG_DATA_HOME/gpuscope/gpuscope.db) and --help.\n");
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? GS_EXIT_USAGE : GS_EXIT_OK;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
    printf("gpuscope %s\n", GS_VERSION);
    return GS_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (!strcmp(argv[1], commands[i].name))
      return commands[i].fn(argc - 1, argv + 1);
  cli_error(GS_EXIT_USAGE, "unknown command '%s' (see 'gpuscope --help')", argv[1]);
  return GS_EXIT_USAGE;
}
