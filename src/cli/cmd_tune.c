/* cli/cmd_tune: `gpuscope tune --param NAME=V1,V2 ... -- CMD {NAME} ...` — argument parsing for the
 * tune (src/tune/); prints the result table or --json and maps errors to exit codes. */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "collect/collect.h"
#include "tune/tune.h"

#ifndef GS_VERSION
#define GS_VERSION "dev"
#endif

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
    "  --quality M[:min|:max]  a metric the job logs (gpuscope.log): a configuration whose\n"
    "                      value is worse than the baseline's beyond noise cannot win (default min)\n"
    "  --quality-at W      samples (default: at equal samples seen) or time (at equal time)\n"
    "  --quality-tol X     the least difference that counts as worse: X in the metric's unit, or X%%\n"
    "  --lr-base R@B       {lr} in CMD is R scaled for each trial's batch from batch B (e.g. 0.1@32)\n"
    "  --lr-rule RULE      linear (default with --lr-base), sqrt or none\n"
    "  --lr-warmup N       {warmup}: N samples of warm-up, in steps at the trial's batch, when its\n"
    "                      rate was raised (0 otherwise)\n"
    "  --samples N         run each trial until its steps x batch reach N samples (not --steps)\n"
    "  --gpus LIST         0,1,2,3 or all: trials side by side, one per GPU (CUDA_VISIBLE_DEVICES,\n"
    "                      HIP_VISIBLE_DEVICES), the cores split between them\n"
    "  --resume NAME       continue the sweep NAME from the store: finished trials of the same\n"
    "                      command, arguments and gpuscope version are not rerun; the command read\n"
    "                      from the store is printed and run only when you answer y (or --yes)\n"
    "  --yes               with --resume: run the stored command without asking\n"
    "  --json              print the result as JSON\n"
    "  --store URL         sqlite:///path/to/file.db (default $GPUSCOPE_STORE or the XDG path)\n"
    "\nExit: 0 a winner or a tie was found; 1 no configuration could be measured, or the stored\n"
    "command was refused; 2 bad usage (--resume without --yes and no terminal to ask on);\n"
    "3 store; 130 interrupted by Ctrl-C, 143 by SIGTERM, 129 by SIGHUP (the table so far is printed).\n";

struct tune_cli {
  struct tune_opts o;
  int json, yes;
  int steps_given, seconds_given, lr_rule_given;
  const char *resume; /* --resume NAME */
  const char *gpus;   /* --gpus LIST, parsed once the options are read */
  char **spec;        /* --resume: the arguments read back from the store (owned) */
  int nspec;
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

static int parse_num(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !isfinite(v))
    return -1;
  *out = v;
  return 0;
}

/* The options of output, quality, learning rate, equal data, GPUs, resume and the memory limit. Returns -1 to
 * go on, else the exit code. */
static int on_opt_more(struct tune_cli *c, int opt, const char *arg) {
  struct tune_opts *o = &c->o;
  char buf[160];
  double v;
  if (opt == 'j' || opt == 'y') {
    *(opt == 'j' ? &c->json : &c->yes) = 1;
    return -1;
  }
  if (opt == 'l')
    return cli_parse_log_max("tune", arg, &o->log_max) ? GS_EXIT_USAGE : -1;
  if (opt == 'G') {
    if (gs_parse_duration(arg, &o->grace_ns) || o->grace_ns < 100000000LL)
      return cli_error(GS_EXIT_USAGE, "tune: --grace wants a duration of at least 0.1 s, got '%s'", arg);
    return -1;
  }
  if (opt == 'q') {
    const char *colon = strrchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
    if (!n || n >= sizeof o->quality || (colon && strcmp(colon, ":min") && strcmp(colon, ":max")))
      return cli_error(GS_EXIT_USAGE, "tune: --quality wants METRIC, METRIC:min or METRIC:max, got '%s'", arg);
    snprintf(o->quality, sizeof o->quality, "%.*s", (int)n, arg);
    o->quality_max = colon && !strcmp(colon, ":max");
  } else if (opt == 'Q') {
    if (strcmp(arg, "samples") && strcmp(arg, "time"))
      return cli_error(GS_EXIT_USAGE, "tune: --quality-at is samples or time, not '%s'", arg);
    o->quality_at = !strcmp(arg, "time") ? TUNE_AT_TIME : TUNE_AT_SAMPLES;
  } else if (opt == 'X') {
    snprintf(buf, sizeof buf, "%s", arg);
    size_t n = strlen(buf);
    o->quality_tol_rel = n && buf[n - 1] == '%';
    if (o->quality_tol_rel)
      buf[n - 1] = 0;
    if (parse_num(buf, &v) || v < 0)
      return cli_error(GS_EXIT_USAGE, "tune: --quality-tol wants a number >= 0 or a share such as 2%%, got '%s'", arg);
    o->quality_tol = o->quality_tol_rel ? v / 100 : v;
  } else if (opt == 'L') {
    const char *at = strchr(arg, '@');
    snprintf(buf, sizeof buf, "%.*s", at ? (int)(at - arg) : 0, arg);
    if (!at || parse_num(buf, &o->lr_base) || !(o->lr_base > 0) || parse_num(at + 1, &o->lr_batch) ||
        !(o->lr_batch > 0))
      return cli_error(GS_EXIT_USAGE, "tune: --lr-base wants RATE@BATCH with both > 0 (e.g. 0.1@32), got '%s'", arg);
  } else if (opt == 'R') {
    if (strcmp(arg, "linear") && strcmp(arg, "sqrt") && strcmp(arg, "none"))
      return cli_error(GS_EXIT_USAGE, "tune: --lr-rule is linear, sqrt or none, not '%s'", arg);
    o->lr_rule = !strcmp(arg, "linear") ? TUNE_LR_LINEAR : !strcmp(arg, "sqrt") ? TUNE_LR_SQRT : TUNE_LR_NONE;
    c->lr_rule_given = 1;
  } else if (opt == 'U') {
    if (parse_num(arg, &o->lr_warmup) || o->lr_warmup < 0)
      return cli_error(GS_EXIT_USAGE, "tune: --lr-warmup wants samples >= 0, got '%s'", arg);
  } else if (opt == 'M') {
    if (parse_bytes(arg, &o->mem_limit))
      return cli_error(GS_EXIT_USAGE, "tune: --mem-limit wants bytes of at least 64M (e.g. 2G), got '%s'", arg);
  } else if (opt == 'P') {
    c->gpus = arg;
  } else if (opt == 'r') {
    if (!arg[0] || strlen(arg) >= sizeof o->name || strpbrk(arg, ",="))
      return cli_error(GS_EXIT_USAGE, "tune: --resume wants the sweep's name (1-%zu characters)", sizeof o->name - 1);
    c->resume = arg;
  } else if (opt == 'N') {
    if (parse_num(arg, &o->samples) || !(o->samples >= 1) || o->samples > 1e15)
      return cli_error(GS_EXIT_USAGE, "tune: --samples wants a count >= 1, got '%s'", arg);
  }
  return -1;
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
  case 'n':
    if (!arg[0] || strlen(arg) >= sizeof o->name || strpbrk(arg, ",="))
      return cli_error(GS_EXIT_USAGE, "tune: --name wants 1-%zu characters without ',' or '='", sizeof o->name - 1);
    snprintf(o->name, sizeof o->name, "%s", arg);
    break;
  case 'i':
    if (gs_parse_duration(arg, &o->interval_ns) || o->interval_ns < 10000000LL)
      return cli_error(GS_EXIT_USAGE, "tune: --interval wants a duration of at least 10ms, got '%s'", arg);
    break;
  case 'y':
  case 'j':
  case 'q':
  case 'Q':
  case 'X':
  case 'L':
  case 'R':
  case 'U':
  case 'N':
  case 'P':
  case 'r':
  case 'M':
  case 'l':
  case 'G':
    return on_opt_more(c, opt, arg);
  case 's':
    o->store_url = arg;
    break;
  }
  return -1;
}

/* Whether the driver lists gpu (an index, a GPU's UUID or a MIG instance's UUID) among d's devices. */
static int gpu_listed(const struct nvml_devices *d, const char *gpu) {
  char *end;
  unsigned long i = strtoul(gpu, &end, 10);
  if (gpu[0] >= '0' && gpu[0] <= '9' && !*end)
    return i < d->n && !d->dev[i].lost;
  for (unsigned k = 0; k < d->n; k++) {
    const struct nvml_facts *f = &d->dev[k].facts;
    if (!d->dev[k].lost && !strcmp(f->uuid, gpu))
      return 1;
    for (int m = 0; m < f->n_mig; m++)
      if (f->mig[m].uuid[0] && !strcmp(f->mig[m].uuid, gpu))
        return 1;
  }
  return 0;
}

/* The HIP index of each AMD GPU of o->gpus (o->hip): its place among the AMD GPUs d lists, which
 * come after the NVIDIA ones; "" for an NVIDIA GPU or a UUID. */
static void gpus_hip(struct tune_opts *o, const struct nvml_devices *d) {
  for (int i = 0; i < o->ngpus; i++) {
    o->hip[i][0] = 0;
    if (!o->gpus[i][0] || strspn(o->gpus[i], "0123456789") != strlen(o->gpus[i]))
      continue;
    unsigned k = (unsigned)strtoul(o->gpus[i], NULL, 10), amd = 0;
    if (k >= d->n || strcmp(d->dev[k].facts.vendor, "amd"))
      continue;
    for (unsigned j = 0; j < k; j++)
      amd += !strcmp(d->dev[j].facts.vendor, "amd");
    snprintf(o->hip[i], sizeof o->hip[i], "%u", amd);
  }
}

/* Each GPU of --gpus LIST (o->gpus) checked against the driver: a trial given a GPU that is not there
 * would run on none, or on another. Returns -1 to go on, else the exit code (printed). */
static int gpus_known(struct tune_opts *o, const char *list) {
  struct nvml_devices d;
  int rc = -1;
  if (collect_devices_list(&d, NULL))
    rc = cli_error(GS_EXIT_USAGE, "tune: --gpus %s: no GPU driver to check them against (%s)", list, gs_last_error());
  for (int i = 0; i < o->ngpus && rc < 0; i++)
    if (!gpu_listed(&d, o->gpus[i]))
      rc =
          cli_error(GS_EXIT_USAGE,
                    "tune: --gpus: the driver has no GPU '%s' (%u listed: give their indices 0-%u, GPU or MIG UUIDs as "
                    "`gpuscope devices` shows, or all)",
                    o->gpus[i], d.n, d.n ? d.n - 1 : 0);
  if (rc < 0)
    gpus_hip(o, &d);
  collect_devices_done(&d);
  return rc;
}

/* --gpus LIST: the GPUs named (indices or MIG UUIDs), or with "all" every GPU NVML lists (each MIG
 * instance of a GPU in MIG mode by its UUID). Returns -1 to go on, else the exit code (printed). */
static int parse_gpus(struct tune_opts *o, const char *list) {
  if (!strcmp(list, "all")) {
    struct nvml_devices d;
    if (collect_devices_list(&d, NULL)) {
      fprintf(stderr, "[tune] --gpus all: no GPU (%s): trials run one at a time\n", gs_last_error());
      collect_devices_done(&d);
      return -1;
    }
    for (unsigned i = 0; i < d.n && o->ngpus < TUNE_MAX_GPUS; i++) {
      const struct nvml_facts *f = &d.dev[i].facts;
      if (d.dev[i].lost)
        continue;
      if (f->mig_current == 1 && f->n_mig > 0) {
        for (int m = 0; m < f->n_mig && o->ngpus < TUNE_MAX_GPUS; m++)
          if (f->mig[m].uuid[0])
            snprintf(o->gpus[o->ngpus++], sizeof o->gpus[0], "%s", f->mig[m].uuid);
      } else {
        snprintf(o->gpus[o->ngpus++], sizeof o->gpus[0], "%u", i);
      }
    }
    gpus_hip(o, &d);
    collect_devices_done(&d);
    if (!o->ngpus)
      fprintf(stderr, "[tune] --gpus all: NVML lists no usable GPU: trials run one at a time\n");
    return -1;
  }
  for (const char *p = list;;) {
    size_t n = strcspn(p, ",");
    if (!n || n >= sizeof o->gpus[0] || o->ngpus >= TUNE_MAX_GPUS || memchr(p, '=', n))
      return cli_error(GS_EXIT_USAGE, "tune: --gpus wants all or a list such as 0,1,2,3 (at most %d), got '%s'",
                       TUNE_MAX_GPUS, list);
    snprintf(o->gpus[o->ngpus], sizeof o->gpus[0], "%.*s", (int)n, p);
    for (int i = 0; i < o->ngpus; i++)
      if (!strcmp(o->gpus[i], o->gpus[o->ngpus]))
        return cli_error(GS_EXIT_USAGE, "tune: --gpus names %s twice", o->gpus[i]);
    o->ngpus++;
    if (!p[n])
      break;
    p += n + 1;
  }
  return gpus_known(o, list);
}

/* What one option needs of another. Returns -1 to go on, else the exit code (printed). */
static int tune_check_needs(struct tune_cli *c) {
  struct tune_opts *o = &c->o;
  if (o->samples > 0 && (c->steps_given || c->seconds_given))
    return cli_error(GS_EXIT_USAGE, "tune: --samples ends a trial as --steps and --seconds do: give one");
  if (o->samples > 0 && o->strategy == TUNE_HALVING)
    return cli_error(GS_EXIT_USAGE, "tune: --strategy halving doubles steps per rung: use --steps, not --samples");
  if (!o->quality[0] && (o->quality_at != TUNE_AT_SAMPLES || isfinite(o->quality_tol)))
    return cli_error(GS_EXIT_USAGE, "tune: --quality-at and --quality-tol need --quality METRIC");
  if (!(o->lr_base > 0) && (c->lr_rule_given || o->lr_warmup > 0))
    return cli_error(GS_EXIT_USAGE, "tune: --lr-rule and --lr-warmup need --lr-base RATE@BATCH");
  if (o->lr_base > 0 && !c->lr_rule_given)
    o->lr_rule = TUNE_LR_LINEAR;
  if (o->samples > 0)
    o->steps = 0; /* every step after warm-up up to the count is measured */
  return c->gpus ? parse_gpus(o, c->gpus) : -1;
}

/* The checks once the options are read: the command after '--' (argv[i]), one way to end a trial,
 * the placeholders and the strategy's needs. Returns -1 to go on, else the exit code (printed). */
static int tune_check_args(struct tune_cli *c, int argc, char **argv, int i) {
  if (i >= argc || i + 1 >= argc || !argv[i + 1][0])
    return cli_error(GS_EXIT_USAGE, "tune: no command given (usage: gpuscope tune --param N=V1,V2 -- CMD {N})");
  if (c->steps_given && c->seconds_given)
    return cli_error(GS_EXIT_USAGE, "tune: --steps and --seconds both end a trial: give one");
  int rc = tune_check_needs(c);
  if (rc >= 0)
    return rc;
  c->o.argv = argv + i + 1;
  if (tune_validate(&c->o))
    return cli_error(GS_EXIT_USAGE, "tune: %s", gs_last_error());
  if (c->o.strategy == TUNE_HALVING && c->o.seconds > 0)
    return cli_error(GS_EXIT_USAGE, "tune: --strategy halving doubles steps per rung: use --steps, not --seconds");
  return -1;
}

static const struct option tune_longopts[] = {{"param", required_argument, 0, 'p'},
                                              {"steps", required_argument, 0, 'S'},
                                              {"warmup", required_argument, 0, 'W'},
                                              {"seconds", required_argument, 0, 'T'},
                                              {"strategy", required_argument, 0, 'g'},
                                              {"metric", required_argument, 0, 'm'},
                                              {"budget", required_argument, 0, 'b'},
                                              {"mem-limit", required_argument, 0, 'M'},
                                              {"log-max", required_argument, 0, 'l'},
                                              {"name", required_argument, 0, 'n'},
                                              {"interval", required_argument, 0, 'i'},
                                              {"json", no_argument, 0, 'j'},
                                              {"yes", no_argument, 0, 'y'},
                                              {"store", required_argument, 0, 's'},
                                              {"grace", required_argument, 0, 'G'},
                                              {"quality", required_argument, 0, 'q'},
                                              {"quality-at", required_argument, 0, 'Q'},
                                              {"quality-tol", required_argument, 0, 'X'},
                                              {"lr-base", required_argument, 0, 'L'},
                                              {"lr-rule", required_argument, 0, 'R'},
                                              {"lr-warmup", required_argument, 0, 'U'},
                                              {"samples", required_argument, 0, 'N'},
                                              {"gpus", required_argument, 0, 'P'},
                                              {"resume", required_argument, 0, 'r'},
                                              {"help", no_argument, 0, 'h'},
                                              {0, 0, 0, 0}};

/* Parses argv (argv[0] "tune") into c: the options before '--', then the command. Returns -1 to go
 * on, else the exit code (printed). A --resume without a command stops after the options. */
static int tune_parse(struct tune_cli *c, int argc, char **argv) {
  /* Stop at the first operand: the command's own options belong to it. */
  char **args = calloc((size_t)argc + 2, sizeof *args);
  if (!args)
    return cli_error(GS_EXIT_FAIL, "out of memory");
  int nopt = 0;
  args[nopt++] = argv[0];
  int i = 1;
  for (; i < argc && strcmp(argv[i], "--"); i++)
    args[nopt++] = argv[i];
  int rc = cli_parse_opts(nopt, args, tune_longopts, tune_usage, on_opt, c);
  if (rc < 0 && optind < nopt)
    rc = cli_error(GS_EXIT_USAGE, "tune: unexpected '%s' before '--' (the command goes after '--')", args[optind]);
  free(args);
  if (rc >= 0)
    return rc;
  if (c->resume) {
    if (c->o.nparams || i < argc)
      return cli_error(GS_EXIT_USAGE,
                       "tune: --resume NAME reads the sweep from the store: give no --param nor command");
    return -1;
  }
  if (argc - 1 > TUNE_SPEC_MAX)
    return cli_error(GS_EXIT_USAGE, "tune: at most %d arguments", TUNE_SPEC_MAX);
  c->o.spec = argv + 1, c->o.nspec = argc - 1;
  return tune_check_args(c, argc, argv, i);
}

/* The stored arguments of run id (its tune.argc, tune.argv.N params) into c->spec, with "tune" first,
 * and its STORE_PARAM_IMPORTED into imported (untouched when the run was not imported). Returns -1 to
 * go on, else the exit code (printed). */
static int stored_spec(struct tune_cli *c, struct store *st, const char *id, const char *name, char *imported,
                       size_t implen) {
  struct gs_kv *kv = NULL;
  size_t nkv = 0;
  if (st->params_read(st, id, &kv, &nkv))
    return cli_error(GS_EXIT_STORE, "tune: %s", gs_last_error());
  const char *argc_s = NULL;
  for (size_t k = 0; k < nkv; k++) {
    if (!strcmp(kv[k].key, "tune.argc"))
      argc_s = kv[k].value;
    if (!strcmp(kv[k].key, STORE_PARAM_IMPORTED))
      snprintf(imported, implen, "%s", kv[k].value ? kv[k].value : "");
  }
  int na = argc_s ? atoi(argc_s) : 0, rc = -1;
  if (na > 0 && na <= TUNE_SPEC_MAX && (c->spec = calloc((size_t)na + 2, sizeof *c->spec))) {
    c->spec[0] = strdup("tune");
    for (size_t k = 0; k < nkv; k++) {
      int at = -1;
      if (sscanf(kv[k].key, "tune.argv.%d", &at) == 1 && at >= 0 && at < na && !c->spec[at + 1])
        c->spec[at + 1] = strdup(kv[k].value ? kv[k].value : "");
    }
    c->nspec = na + 1;
  }
  for (int k = 0; k <= na && rc == -1; k++)
    if (!c->spec || !c->spec[k])
      rc = cli_error(GS_EXIT_FAIL, "tune: --resume %s: the stored arguments are incomplete", name);
  store_kv_free(kv, nkv);
  return rc;
}

/* --resume NAME: the arguments the sweep was started with, from the newest trial run of group NAME
 * (its tune.argv.N params), into c->spec, that run's id into id and where it was imported from into
 * imported ("" not imported). Returns -1 to go on, else the exit code (printed). */
static int resume_spec(struct tune_cli *c, const char *url, const char *name, char *id, size_t idlen, char *imported,
                       size_t implen) {
  struct store *st = store_open(url);
  if (!st)
    return cli_error(GS_EXIT_STORE, "tune: %s", gs_last_error());
  struct store_run *runs = NULL;
  size_t n = 0, best = (size_t)-1;
  int rc = -1;
  if (st->runs_list(st, &runs, &n))
    rc = cli_error(GS_EXIT_STORE, "tune: %s", gs_last_error());
  for (size_t i = 0; i < n && rc == -1; i++)
    if (!strcmp(runs[i].group, name) && (best == (size_t)-1 || runs[i].start_wall_ns > runs[best].start_wall_ns))
      best = i;
  if (rc == -1 && best == (size_t)-1)
    rc = cli_error(GS_EXIT_FAIL, "tune: --resume %s: no sweep of that name in the store", name);
  if (rc == -1) {
    snprintf(id, idlen, "%s", runs[best].id);
    rc = stored_spec(c, st, runs[best].id, name, imported, implen);
  }
  free(runs);
  st->close(st);
  return rc;
}

/* arg as a shell word for the terminal: bare when it holds only safe characters, else in single
 * quotes (a quote as '\''), control characters escaped (gs_term_text). */
static void put_shell_word(FILE *out, const char *arg) {
  if (*arg &&
      strspn(arg, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_./=:,+@%{}") == strlen(arg)) {
    gs_term_text(out, arg, 0);
    return;
  }
  fputc('\'', out);
  for (const char *p = arg; *p;) {
    size_t n = strcspn(p, "'");
    char part[256];
    while (n) {
      size_t m = n < sizeof part - 1 ? n : sizeof part - 1;
      memcpy(part, p, m), part[m] = 0;
      gs_term_text(out, part, 0);
      p += m, n -= m;
    }
    if (*p == '\'')
      fputs("'\\''", out), p++;
  }
  fputc('\'', out);
}

/* A store is data, not instructions: the command --resume read from run id is printed, and run only
 * with --yes or when the user answers y on the terminal. Returns -1 to go on, else the exit code. */
static int confirm_stored(const struct tune_cli *c, const char *name, const char *id, const char *imported) {
  fprintf(stderr, "gpuscope: tune --resume %s runs the sweep as the store recorded it (run %s", name, id);
  if (imported[0]) {
    fputs(", imported: ", stderr);
    gs_term_text(stderr, imported, 0);
  }
  fputs("):\n ", stderr);
  for (int i = 0; i < c->nspec; i++)
    fputc(' ', stderr), put_shell_word(stderr, c->spec[i]);
  fputc('\n', stderr);
  if (c->yes)
    return -1;
  if (!isatty(0) || !isatty(2))
    return cli_error(GS_EXIT_USAGE,
                     "tune: --resume %s: not run: a command read from the store runs only when "
                     "confirmed (no terminal to ask on: add --yes)",
                     name);
  fputs("run it? [y/N] ", stderr);
  char line[16];
  if (fgets(line, sizeof line, stdin) && (line[0] == 'y' || line[0] == 'Y'))
    return -1;
  return cli_error(GS_EXIT_FAIL, "tune: --resume %s: not run", name);
}

/* Runs the sweep c describes and prints its result. Returns the exit code. */
static int tune_go(struct tune_cli *c) {
  if (!c->o.name[0]) {
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(c->o.name, sizeof c->o.name, "tune-%Y%m%d-%H%M%S", &tm);
  }
  char def[1200];
  if (!c->o.store_url)
    c->o.store_url = store_default_url(def, sizeof def);
  struct tune_result r;
  int trc = tune_run(&c->o, &r), rc;
  /* 3 only when the store is what failed (README's table); anything else is 1. */
  int fail = trc == GS_ESTORE ? GS_EXIT_STORE : GS_EXIT_FAIL;
  if (trc && !r.n) {
    rc = cli_error(fail, "tune: %s", gs_last_error());
    tune_result_done(&r);
    return rc;
  }
  struct store *st = store_open(c->o.store_url);
  if (c->json)
    tune_print_json(stdout, &c->o, &r, st);
  else
    tune_print_table(stdout, &c->o, &r, st);
  if (st)
    st->close(st);
  if (trc)
    rc = cli_error(fail, "tune: stopped: %s", gs_last_error());
  else
    rc = r.interrupted ? 128 + (r.signo > 0 ? r.signo : SIGINT) : r.best < 0 ? GS_EXIT_FAIL : GS_EXIT_OK;
  tune_result_done(&r);
  return rc;
}

/* --resume NAME: the sweep's own arguments read back and parsed, with this call's --store and --json
 * and the name kept. Returns -1 to go on (c holds the sweep), else the exit code. */
static int tune_resume(struct tune_cli *c) {
  char def[1200], name[sizeof c->o.name];
  const char *url = c->o.store_url ? c->o.store_url : store_default_url(def, sizeof def);
  snprintf(name, sizeof name, "%s", c->resume);
  char id[64], imported[400] = "";
  int json = c->json, yes = c->yes, rc = resume_spec(c, url, name, id, sizeof id, imported, sizeof imported);
  if (rc < 0)
    rc = confirm_stored(c, name, id, imported);
  if (rc >= 0)
    return rc;
  char **spec = c->spec;
  int nspec = c->nspec;
  const char *store_url = c->o.store_url;
  tune_opts_done(&c->o);
  memset(c, 0, sizeof *c);
  c->o = (struct tune_opts){.steps = 50, .warmup = 10, .interval_ns = 100000000LL, .progress = stderr};
  c->o.version = GS_VERSION;
  c->o.quality_tol = NAN;
  c->spec = spec, c->nspec = nspec;
  if ((rc = tune_parse(c, nspec, spec)) >= 0)
    return rc;
  c->json |= json;
  c->yes |= yes;
  c->o.resume = 1;
  if (store_url)
    c->o.store_url = store_url;
  if (strcmp(c->o.name, name))
    snprintf(c->o.name, sizeof c->o.name, "%s", name);
  return -1;
}

int cmd_tune(int argc, char **argv) {
  struct tune_cli c = {.o = {.steps = 50, .warmup = 10, .interval_ns = 100000000LL, .progress = stderr}};
  c.o.version = GS_VERSION;
  c.o.quality_tol = NAN;
  int rc = tune_parse(&c, argc, argv);
  if (rc < 0 && c.resume)
    rc = tune_resume(&c);
  if (rc < 0)
    rc = tune_go(&c);
  tune_opts_done(&c.o);
  for (int i = 0; c.spec && i < c.nspec; i++)
    free(c.spec[i]);
  free(c.spec);
  return rc;
}
