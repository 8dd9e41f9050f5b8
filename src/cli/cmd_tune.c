/* cli/cmd_tune: `gpuscope tune --param NAME=V1,V2 ... -- CMD {NAME} ...` — argument parsing for the
 * tune (src/tune/); prints the result table or --json and maps errors to exit codes. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "tune/tune.h"

static const char tune_usage[] =
    "usage: gpuscope tune --param NAME=V1,V2,... [--param ...] [options] -- CMD ARGS with {NAME}\n\n"
    "Runs CMD once per configuration, each a normal gpuscope run in one group, measures throughput\n"
    "after warm-up from the client's steps, and keeps the fastest configuration.\n\n"
    "  --param NAME=V1,V2  a parameter and its values; {NAME} in CMD is replaced, and\n"
    "                      GPUSCOPE_PARAM_<NAME> is set (repeatable; each must be used)\n"
    "  --steps N           measured steps per trial, after warm-up (default 50)\n"
    "  --warmup N          steps discarded first (default 10)\n"
    "  --seconds S         run each trial S seconds instead (warm-up steps still discarded)\n"
    "  --strategy S        grid (default), halving, or doctor\n"
    "  --metric M          samples_per_s (default) or steps_per_s\n"
    "  --budget T          start no trial after T (e.g. 10m); a running trial is stopped then\n"
    "  --grace T           how long a trial asked to stop has before SIGKILL (default 10s)\n"
    "  --mem-limit BYTES   address-space limit for each process of the job (RLIMIT_AS; 2G, 512M)\n"
    "  --log-max BYTES     keep the last BYTES of each trial's output in the store (default 8M; 0 none)\n"
    "  --name NAME         the tune's name: run group, tag tune=NAME, trial runs NAME/01...\n"
    "  --interval T        the trials' sampling interval (default 100ms)\n"
    "  --json              print the result as JSON\n"
    "  --store URL         sqlite:///path/to/file.db (default $GPUSCOPE_STORE or the XDG path)\n"
    "\nExit: 0 a winner or a tie was found; 1 no configuration could be measured; 2 bad usage;\n"
    "3 store; 130 interrupted by Ctrl-C, 143 by SIGTERM, 129 by SIGHUP (the table so far is printed).\n";

struct tune_cli {
  struct tune_opts o;
  int json;
  int steps_given, seconds_given;
};

static int parse_long(const char *s, long min, long *out) {
  char *end;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < min)
    return -1;
  *out = v;
  return 0;
}

static int parse_bytes(const char *s, int64_t *out) {
  char *end;
  double v = strtod(s, &end);
  double k = 1;
  if (*end == 'k' || *end == 'K')
    k = 1024, end++;
  else if (*end == 'm' || *end == 'M')
    k = 1024.0 * 1024, end++;
  else if (*end == 'g' || *end == 'G')
    k = 1024.0 * 1024 * 1024, end++;
  if (*end == 'i')
    end++;
  if (*end == 'B' || *end == 'b')
    end++;
  if (end == s || *end || !(v * k >= 64 * 1024 * 1024.0) || v * k > 9e18)
    return -1;
  *out = (int64_t)(v * k);
  return 0;
}

static int on_opt(int opt, const char *arg, void *user) {
  struct tune_cli *c = user;
  struct tune_opts *o = &c->o;
  int64_t ns;
  switch (opt) {
  case 'p':
    if (tune_param_add(o, arg))
      return cli_error(GS_EXIT_USAGE, "tune: %s", gs_last_error());
    break;
  case 'S':
    if (parse_long(arg, 1, &o->steps))
      return cli_error(GS_EXIT_USAGE, "tune: --steps wants a whole number >= 1, got '%s'", arg);
    c->steps_given = 1;
    break;
  case 'W':
    if (parse_long(arg, 0, &o->warmup))
      return cli_error(GS_EXIT_USAGE, "tune: --warmup wants a whole number >= 0, got '%s'", arg);
    break;
  case 'T':
    if (gs_parse_duration(arg, &ns) || ns < 100000000LL)
      return cli_error(GS_EXIT_USAGE, "tune: --seconds wants a duration of at least 0.1 s, got '%s'", arg);
    o->seconds = (double)ns / GS_NS_PER_S;
    c->seconds_given = 1;
    break;
  case 'g':
    if (!strcmp(arg, "grid"))
      o->strategy = TUNE_GRID;
    else if (!strcmp(arg, "halving"))
      o->strategy = TUNE_HALVING;
    else if (!strcmp(arg, "doctor"))
      o->strategy = TUNE_DOCTOR;
    else
      return cli_error(GS_EXIT_USAGE, "tune: --strategy is grid, halving or doctor, not '%s'", arg);
    break;
  case 'm':
    if (!strcmp(arg, "samples_per_s"))
      o->metric = TUNE_SAMPLES_PER_S;
    else if (!strcmp(arg, "steps_per_s"))
      o->metric = TUNE_STEPS_PER_S;
    else
      return cli_error(GS_EXIT_USAGE, "tune: --metric is samples_per_s or steps_per_s, not '%s'", arg);
    break;
  case 'b':
    if (gs_parse_duration(arg, &o->budget_ns) || o->budget_ns <= 0)
      return cli_error(GS_EXIT_USAGE, "tune: --budget wants a duration such as 10m, got '%s'", arg);
    break;
  case 'G':
    if (gs_parse_duration(arg, &o->grace_ns) || o->grace_ns < 100000000LL)
      return cli_error(GS_EXIT_USAGE, "tune: --grace wants a duration of at least 0.1 s, got '%s'", arg);
    break;
  case 'l':
    return cli_parse_log_max("tune", arg, &o->log_max) ? GS_EXIT_USAGE : -1;
  case 'M':
    if (parse_bytes(arg, &o->mem_limit))
      return cli_error(GS_EXIT_USAGE, "tune: --mem-limit wants bytes of at least 64M (e.g. 2G), got '%s'", arg);
    break;
  case 'n':
    if (!arg[0] || strlen(arg) >= sizeof o->name || strpbrk(arg, ",="))
      return cli_error(GS_EXIT_USAGE, "tune: --name wants 1-%zu characters without ',' or '='", sizeof o->name - 1);
    snprintf(o->name, sizeof o->name, "%s", arg);
    break;
  case 'i':
    if (gs_parse_duration(arg, &o->interval_ns) || o->interval_ns < 10000000LL)
      return cli_error(GS_EXIT_USAGE, "tune: --interval wants a duration of at least 10ms, got '%s'", arg);
    break;
  case 'j':
    c->json = 1;
    break;
  case 's':
    o->store_url = arg;
    break;
  }
  return -1;
}

/* The checks once the options are read: the command after '--' (argv[i]), one way to end a trial,
 * the placeholders and the strategy's needs. Returns -1 to go on, else the exit code (printed). */
static int tune_check_args(struct tune_cli *c, int argc, char **argv, int i) {
  if (i >= argc || i + 1 >= argc || !argv[i + 1][0])
    return cli_error(GS_EXIT_USAGE, "tune: no command given (usage: gpuscope tune --param N=V1,V2 -- CMD {N})");
  if (c->steps_given && c->seconds_given)
    return cli_error(GS_EXIT_USAGE, "tune: --steps and --seconds both end a trial: give one");
  c->o.argv = argv + i + 1;
  if (tune_validate(&c->o))
    return cli_error(GS_EXIT_USAGE, "tune: %s", gs_last_error());
  if (c->o.strategy == TUNE_HALVING && c->o.seconds > 0)
    return cli_error(GS_EXIT_USAGE, "tune: --strategy halving doubles steps per rung: use --steps, not --seconds");
  return -1;
}

int cmd_tune(int argc, char **argv) {
  static const struct option longopts[] = {
      {"param", required_argument, 0, 'p'},    {"steps", required_argument, 0, 'S'},
      {"warmup", required_argument, 0, 'W'},   {"seconds", required_argument, 0, 'T'},
      {"strategy", required_argument, 0, 'g'}, {"metric", required_argument, 0, 'm'},
      {"budget", required_argument, 0, 'b'},   {"mem-limit", required_argument, 0, 'M'},
      {"log-max", required_argument, 0, 'l'},  {"name", required_argument, 0, 'n'},
      {"interval", required_argument, 0, 'i'}, {"json", no_argument, 0, 'j'},
      {"store", required_argument, 0, 's'},    {"grace", required_argument, 0, 'G'},
      {"help", no_argument, 0, 'h'},           {0, 0, 0, 0}};
  struct tune_cli c = {.o = {.steps = 50, .warmup = 10, .interval_ns = 100000000LL, .progress = stderr}};
  /* Stop at the first operand: the command's own options belong to it. */
  char **args = calloc((size_t)argc + 2, sizeof *args);
  if (!args)
    return cli_error(GS_EXIT_FAIL, "out of memory");
  int nopt = 0;
  args[nopt++] = argv[0];
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--"); i++)
    args[nopt++] = argv[i];
  int rc = cli_parse_opts(nopt, args, longopts, tune_usage, on_opt, &c);
  if (rc < 0 && optind < nopt)
    rc = cli_error(GS_EXIT_USAGE, "tune: unexpected '%s' before '--' (the command goes after '--')", args[optind]);
  free(args);
  if (rc >= 0)
    goto out;
  if ((rc = tune_check_args(&c, argc, argv, i)) >= 0)
    goto out;
  if (!c.o.name[0]) {
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(c.o.name, sizeof c.o.name, "tune-%Y%m%d-%H%M%S", &tm);
  }
  char def[1200];
  if (!c.o.store_url)
    c.o.store_url = store_default_url(def, sizeof def);
  struct tune_result r;
  int trc = tune_run(&c.o, &r);
  /* 3 only when the store is what failed (README's table); anything else is 1. */
  int fail = trc == GS_ESTORE ? GS_EXIT_STORE : GS_EXIT_FAIL;
  if (trc && !r.n) {
    rc = cli_error(fail, "tune: %s", gs_last_error());
    tune_result_done(&r);
    goto out;
  }
  struct store *st = store_open(c.o.store_url);
  if (c.json)
    tune_print_json(stdout, &c.o, &r, st);
  else
    tune_print_table(stdout, &c.o, &r, st);
  if (st)
    st->close(st);
  if (trc)
    rc = cli_error(fail, "tune: stopped: %s", gs_last_error());
  else
    rc = r.interrupted ? 128 + (r.signo > 0 ? r.signo : SIGINT) : r.best < 0 ? GS_EXIT_FAIL : GS_EXIT_OK;
  tune_result_done(&r);
out:
  tune_opts_done(&c.o);
  return rc;
}
