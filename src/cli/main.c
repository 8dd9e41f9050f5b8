/* cli/main: gpuscope's entry point — finds the sub-command and hands it the arguments — and the
 * helpers the sub-commands share (cli.h). */
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
    {"report", cmd_report, "diagnose a run: findings, evidence, fixes (--json, --html FILE)"},
    {"compare", cmd_compare, "compare runs side by side: throughput, GPU use, what changed"},
    {"tune", cmd_tune, "try configurations for real and keep the fastest (grid, halving, doctor)"},
    {"devices", cmd_devices, "list NVIDIA GPUs and the metric families each offers"},
    {"migrate", cmd_migrate, "bring a store made by an older gpuscope to this schema version"},
    {"serve", cmd_serve, "the run pages in a browser, live, and a JSON API (--listen, --token)"},
};

static void usage(FILE *out) {
  fprintf(out, "usage: gpuscope COMMAND [options]\n\n"
               "gpuscope watches a training job and tells you why the GPU is idle.\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].help);
  fprintf(out, "\nEvery command takes --store URL (default: $GPUSCOPE_STORE, else\n"
               "$XDG_DATA_HOME/gpuscope/gpuscope.db) and --help.\n");
}

int cli_error(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("gpuscope: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return code;
}

int cli_parse_opts_short(int argc, char **argv, const char *shortopts, const struct option *longopts, const char *usage,
                         int (*on_opt)(int opt, const char *arg, void *user), void *user) {
  char optstring[32];
  int in_order = shortopts[0] == '+';
  snprintf(optstring, sizeof optstring, "%s:h%s", in_order ? "+" : "", shortopts + in_order);
  int c;
  optind = 1;
  opterr = 0;
  while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
    switch (c) {
    case 'h':
      printf("%s", usage);
      return GS_EXIT_OK;
    case ':':
      return cli_error(GS_EXIT_USAGE, "%s: option '%s' needs a value", argv[0], argv[optind - 1]);
    case '?':
      return cli_error(GS_EXIT_USAGE, "%s: unknown option '%s' (see 'gpuscope %s --help')", argv[0], argv[optind - 1],
                       argv[0]);
    default: {
      int rc = on_opt(c, optarg, user);
      if (rc >= 0)
        return rc;
    }
    }
  }
  return -1;
}

int cli_parse_opts(int argc, char **argv, const struct option *longopts, const char *usage,
                   int (*on_opt)(int opt, const char *arg, void *user), void *user) {
  return cli_parse_opts_short(argc, argv, "", longopts, usage, on_opt, user);
}

struct store *cli_open_store_mode(const char *url, enum store_mode mode) {
  char def[1200];
  if (!url)
    url = store_default_url(def, sizeof def);
  struct store *st = store_open_mode(url, mode);
  if (!st)
    cli_error(GS_EXIT_STORE, "%s", gs_last_error());
  return st;
}

struct store *cli_open_store(const char *url) {
  return cli_open_store_mode(url, STORE_READ);
}

int cli_get_run(struct store *st, const char *ref, struct store_run *run) {
  int rc = st->run_get(st, ref, run);
  if (rc == GS_OK)
    return 0;
  return cli_error(rc == GS_ENOENT || rc == GS_EAMBIG ? GS_EXIT_USAGE : GS_EXIT_FAIL, "%s", gs_last_error());
}

int cli_open_run(const char *url, const char *ref, struct store **st, struct store_run *run) {
  *st = cli_open_store(url);
  if (!*st)
    return GS_EXIT_STORE;
  int rc = cli_get_run(*st, ref, run);
  if (rc) {
    (*st)->close(*st);
    *st = NULL;
  }
  return rc;
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
