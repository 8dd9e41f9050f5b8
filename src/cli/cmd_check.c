/* cli/cmd_check: `gpuscope check RUN [--baseline RUN] --min-speedup X --max-data-wait P% --min-gpu-util
 * P% --forbid RULE,...` — the gate a CI job puts on a training run (report/check.c judges it). Exit
 * codes: 0 every budget holds; 1 a budget is broken, its figure was not measured or cannot tell (a
 * gate that cannot see fails), or reading the store fails; 2 bad usage (a rule the doctor does not have among
 * it) or an unknown run; 3 the store cannot be opened. The JUnit file is written whatever the verdict. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "report/report.h"

static const char check_usage[] =
    "usage: gpuscope check RUN [--baseline RUN] [--min-speedup X] [--max-data-wait P%] [--min-gpu-util P%]\n"
    "                      [--forbid RULE,...] [--junit FILE] [--json] [--store URL]\n\n"
    "Exits 0 when every budget holds, 1 with one line per broken budget (what was measured, the\n"
    "budget, the finding that explains it). A budget whose figure the run did not measure is broken\n"
    "too (\"unknown\"). The speed-up holds only when the steps can tell: its 95 % interval (from both\n"
    "runs' step-to-step spread) wholly at or above the budget; one that spans the budget is broken as\n"
    "\"cannot tell\", with about how many steps of the run would tell.\n\n"
    "  --baseline RUN       the run to compare throughput with (needed by --min-speedup): an id, or a\n"
    "                       name or tag:KEY=VALUE for the newest finished run of that name or tag\n"
    "  --min-speedup X      throughput at least X times the baseline's (0.95: at most 5 % slower)\n"
    "  --max-data-wait P%   the steps wait for data at most P % of the time (or a share: 0.2)\n"
    "  --min-gpu-util P%    mean GPU utilisation at least P %\n"
    "  --forbid RULE,...    none of these findings: the doctor's rule ids (input_bound, pageable_copies,\n"
    "                       ...; one it does not have is bad usage)\n"
    "  --junit FILE         also write a JUnit XML report (-: on stdout, the text verdict on stderr)\n"
    "  --json               the verdict as one JSON object\n";

struct check_opts {
  const char *store, *baseline, *junit;
  int json;
  struct report_budgets b;
  int bad;
};

/* "20%" as 0.20, "0.2" as 0.2; NAN when it is neither. */
static double parse_share(const char *s) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || !isfinite(v))
    return NAN;
  if (*end == '%' && !end[1])
    return v / 100;
  return *end ? NAN : v <= 1 ? v : NAN;
}

static int check_opt(int c, const char *arg, void *user) {
  struct check_opts *o = user;
  char *end;
  switch (c) {
  case 's':
    o->store = arg;
    break;
  case 'b':
    o->baseline = arg;
    break;
  case 'J':
    o->junit = arg;
    break;
  case 'j':
    o->json = 1;
    break;
  case 'S':
    errno = 0;
    o->b.min_speedup = strtod(arg, &end);
    if (errno || *end || !(o->b.min_speedup > 0) || !isfinite(o->b.min_speedup))
      return cli_error(GS_EXIT_USAGE, "check: --min-speedup wants a positive number (0.95), got '%s'", arg);
    break;
  case 'D':
  case 'U': {
    double v = parse_share(arg);
    if (!(v >= 0 && v <= 1))
      return cli_error(GS_EXIT_USAGE, "check: %s wants a percentage (20%%) or a share (0.2), got '%s'",
                       c == 'D' ? "--max-data-wait" : "--min-gpu-util", arg);
    *(c == 'D' ? &o->b.max_data_wait : &o->b.min_gpu_util) = v;
    break;
  }
  case 'F':
    if (!*arg || strlen(arg) >= sizeof o->b.forbid ||
        strspn(arg, "abcdefghijklmnopqrstuvwxyz0123456789_,") != strlen(arg))
      return cli_error(GS_EXIT_USAGE, "check: --forbid wants rule ids separated by commas, got '%s'", arg);
    snprintf(o->b.forbid, sizeof o->b.forbid, "%s", arg);
    break;
  }
  return -1;
}

static int load(struct store *st, const char *ref, struct report_run *r) {
  int rc = report_run_load(st, ref, 0, r);
  if (rc == GS_ENOENT || rc == GS_EAMBIG)
    return cli_error(GS_EXIT_USAGE, "check: %s", gs_last_error());
  if (rc)
    return cli_error(GS_EXIT_FAIL, "check: %s", gs_last_error());
  return 0;
}

/* Has r the tag kv ("K=V") among its comma-separated tags? */
static int has_tag(const struct store_run *r, const char *kv) {
  size_t n = strlen(kv);
  for (const char *p = r->tags; (p = strstr(p, kv)); p += n)
    if ((p == r->tags || p[-1] == ',') && (p[n] == ',' || !p[n]))
      return 1;
  return 0;
}

/* The id of the run ref names as a baseline, into id[n]. A name or "tag:K=V" means the newest
 * finished run of that name or with that tag: a run still going (the main branch's pipeline running
 * right now), failed, killed or crashed is no baseline. An id, an id's prefix or "last" is taken as
 * it is. Returns 0 or an exit code (printed): 2 when no run fits. */
static int find_baseline(struct store *st, const char *ref, char *id, size_t n) {
  const char *tag = strncmp(ref, "tag:", 4) ? NULL : ref + 4;
  if (tag && (!strchr(tag, '=') || tag[0] == '='))
    return cli_error(GS_EXIT_USAGE, "check: --baseline tag:KEY=VALUE, got '%s'", ref);
  if (!tag) {
    struct store_run run;
    int rc = st->run_get(st, ref, &run);
    if (rc)
      return cli_error(rc == GS_ENOENT || rc == GS_EAMBIG ? GS_EXIT_USAGE : GS_EXIT_FAIL, "check: %s", gs_last_error());
    if (strcmp(run.name, ref) || !strcmp(run.status, "finished")) {
      snprintf(id, n, "%s", run.id);
      return 0;
    }
  }
  struct store_run *runs = NULL;
  size_t nr = 0;
  if (st->runs_list(st, &runs, &nr))
    return cli_error(GS_EXIT_FAIL, "check: %s", gs_last_error());
  id[0] = 0;
  for (size_t i = 0; i < nr && !id[0]; i++) /* newest first */
    if (!strcmp(runs[i].status, "finished") && (tag ? has_tag(&runs[i], tag) : !strcmp(runs[i].name, ref)))
      snprintf(id, n, "%s", runs[i].id);
  free(runs);
  if (!id[0])
    return cli_error(GS_EXIT_USAGE, "check: no finished run %s '%s' to be the baseline%s", tag ? "tagged" : "named",
                     tag ? tag : ref, tag ? "" : " (its newest is still running, or did not finish)");
  return 0;
}

/* Writes the JUnit report to path ("-": stdout). Returns 0 or an exit code (printed). */
static int write_junit(const char *path, const struct report_run *r, const struct report_run *base,
                       const struct report_check *c) {
  FILE *f = strcmp(path, "-") ? fopen(path, "w") : stdout;
  if (!f)
    return cli_error(GS_EXIT_FAIL, "check: cannot write %s: %s", path, strerror(errno));
  errno = 0;
  int rc = report_check_junit(f, r, base, c), err = errno;
  /* what is still buffered is written here: a full disk shows at the close (or stdout's flush) */
  if (f == stdout ? fflush(f) : fclose(f))
    rc = GS_EIO, err = errno;
  if (!rc)
    return 0;
  return cli_error(GS_EXIT_FAIL, "check: cannot write %s: %s", path, err ? strerror(err) : "write error");
}

int cmd_check(int argc, char **argv) {
  static const struct option longopts[] = {{"store", required_argument, 0, 's'},
                                           {"baseline", required_argument, 0, 'b'},
                                           {"min-speedup", required_argument, 0, 'S'},
                                           {"max-data-wait", required_argument, 0, 'D'},
                                           {"min-gpu-util", required_argument, 0, 'U'},
                                           {"forbid", required_argument, 0, 'F'},
                                           {"junit", required_argument, 0, 'J'},
                                           {"json", no_argument, 0, 'j'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  struct check_opts o = {.b = {.min_speedup = NAN, .max_data_wait = NAN, .min_gpu_util = NAN}};
  int rc = cli_parse_opts(argc, argv, longopts, check_usage, check_opt, &o);
  if (rc >= 0)
    return rc;
  if (argc - optind != 1)
    return cli_error(GS_EXIT_USAGE, "check: one RUN to check (see 'gpuscope check --help')");
  int junit_out = o.junit && !strcmp(o.junit, "-");
  if (junit_out && o.json)
    return cli_error(GS_EXIT_USAGE, "check: --junit - and --json would both write to stdout: give --junit a file");
  const char *ref = argv[optind];
  if (isfinite(o.b.min_speedup) && !o.baseline)
    return cli_error(GS_EXIT_USAGE, "check: --min-speedup needs --baseline RUN");
  if (!isfinite(o.b.min_speedup) && !isfinite(o.b.max_data_wait) && !isfinite(o.b.min_gpu_util) && !o.b.forbid[0])
    return cli_error(GS_EXIT_USAGE, "check: no budget given (see 'gpuscope check --help')");
  struct store *st = cli_open_store(o.store);
  if (!st)
    return GS_EXIT_STORE;
  struct report_run r, base;
  memset(&r, 0, sizeof r);
  memset(&base, 0, sizeof base);
  char bid[sizeof r.view.run.id];
  struct report_check *c = calloc(1, sizeof *c);
  if (!c)
    rc = cli_error(GS_EXIT_FAIL, "out of memory");
  else if (!(rc = load(st, ref, &r)) &&
           (!o.baseline || (!(rc = find_baseline(st, o.baseline, bid, sizeof bid)) && !(rc = load(st, bid, &base))))) {
    const struct report_run *b = o.baseline ? &base : NULL;
    if (report_check_run(&r, b, &o.b, c))
      rc = cli_error(GS_EXIT_USAGE, "check: %s", gs_last_error());
    else {
      /* --junit -: stdout is the XML alone, the text verdict goes to stderr */
      int wrc = o.json ? report_check_json(stdout, &r, b, c) : report_check_text(junit_out ? stderr : stdout, &r, b, c);
      rc = wrc ? cli_error(GS_EXIT_FAIL, "check: cannot write the verdict") : c->broken ? GS_EXIT_FAIL : 0;
      if (o.junit) {
        int jrc = write_junit(o.junit, &r, b, c);
        rc = rc ? rc : jrc;
      }
    }
  }
  free(c);
  report_run_done(&r);
  report_run_done(&base);
  st->close(st);
  return rc;
}
