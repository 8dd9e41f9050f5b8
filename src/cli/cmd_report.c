/* cli/cmd_report: `gpuscope report RUN` — one run's diagnosis (the doctor runs first when the run has
 * no findings yet) as terminal text, JSON, or a self-contained HTML file — and `gpuscope compare RUN
 * RUN...`, which shares its options and file writing. Exit codes as cli.h: 2 for bad usage or an
 * unknown run, 3 when the store cannot be opened, 1 when reading it fails or the diagnosis could not
 * run (the report is still printed; the cause on stderr). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "report/report.h"
#include "serve/serve.h"

struct report_opts {
  const char *store, *html;
  int json, color, rediagnose;
  char **refs;
  size_t nrefs;
};

static int report_opt(int c, const char *arg, void *user) {
  struct report_opts *o = user;
  switch (c) {
  case 's':
    o->store = arg;
    break;
  case 'j':
    o->json = 1;
    break;
  case 'H':
    o->html = arg;
    break;
  case 'c':
    o->color = 1;
    break;
  case 'n':
    o->color = 0;
    break;
  case 'd':
    o->rediagnose = 1;
    break;
  }
  return -1;
}

/* Parses the options report and compare share; returns -1 to go on, else an exit code. */
static int report_parse_opts(int argc, char **argv, struct report_opts *o, const char *usage) {
  static const struct option longopts[] = {{"store", required_argument, 0, 's'}, {"json", no_argument, 0, 'j'},
                                           {"html", required_argument, 0, 'H'},  {"color", no_argument, 0, 'c'},
                                           {"no-color", no_argument, 0, 'n'},    {"diagnose", no_argument, 0, 'd'},
                                           {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  const char *nc = getenv("NO_COLOR");
  o->color = isatty(STDOUT_FILENO) && !(nc && *nc);
  int rc = cli_parse_opts(argc, argv, longopts, usage, report_opt, o);
  if (rc >= 0)
    return rc;
  if (o->html && !*o->html)
    return cli_error(GS_EXIT_USAGE, "%s: --html needs a file name", argv[0]);
  o->refs = argv + optind;
  o->nrefs = (size_t)(argc - optind);
  return -1;
}

/* Loads a run for a report — or, when no run is called ref, the group ref (the runs of one
 * distributed job read as one, store_group_open(); *group is then its store, which the caller
 * closes after the report; NULL for a run). On failure prints why and returns the exit code. */
static int report_load_or_exit(struct store *st, const char *ref, int rediagnose, struct report_run *r,
                               struct store **group) {
  *group = NULL;
  int rc = report_run_load(st, ref, rediagnose, r);
  if (rc == GS_ENOENT) {
    report_run_done(r);
    if ((*group = store_group_open(st, ref)) && (rc = report_run_load(*group, ref, rediagnose, r))) {
      (*group)->close(*group);
      *group = NULL;
    }
  }
  if (rc == GS_OK)
    return 0;
  return cli_error(rc == GS_ENOENT || rc == GS_EAMBIG || rc == GS_EINVAL ? GS_EXIT_USAGE : GS_EXIT_FAIL, "%s",
                   gs_last_error());
}

/* After the report is written: a diagnosis that failed is said on stderr with its cause and makes
 * the exit code 1 (the report itself, without findings, is still printed); findings the store
 * refused to keep are said too, with exit 0 (they are in the report; the next report diagnoses
 * again). Returns 0 or GS_EXIT_FAIL. */
static int report_diag_status(const char *cmd, const struct report_run *r) {
  if (r->save_error[0])
    fprintf(stderr, "gpuscope: %s: run %s: the findings were not saved in the store: %s\n", cmd, r->view.run.id,
            r->save_error);
  if (!r->diag_rc)
    return 0;
  return cli_error(GS_EXIT_FAIL, "%s: run %s: the diagnosis could not run: %s", cmd, r->view.run.id, r->diag_error);
}

/* Writes a file through write(out, user): "-" is stdout. Returns 0 or an exit code (printed). */
static int report_write_file(const char *path, int (*write)(FILE *out, void *user), void *user) {
  if (!strcmp(path, "-"))
    return write(stdout, user) ? cli_error(GS_EXIT_FAIL, "%s", gs_last_error()) : 0;
  /* Written beside the target and renamed, so a failure never leaves half a report. */
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  if (!tmp)
    return cli_error(GS_EXIT_FAIL, "out of memory");
  snprintf(tmp, n, "%s.XXXXXX", path);
  int fd = mkstemp(tmp);
  FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!f) {
    int e = errno;
    if (fd >= 0)
      close(fd), unlink(tmp);
    free(tmp);
    return cli_error(GS_EXIT_USAGE, "cannot write %s: %s", path, strerror(e));
  }
  mode_t um = umask(0);
  umask(um);
  (void)fchmod(fd, 0666 & ~um); /* as a plain fopen() would have made it */
  int rc = write(f, user);
  if (fclose(f) || rc || rename(tmp, path)) {
    int e = errno;
    unlink(tmp);
    free(tmp);
    return cli_error(GS_EXIT_USAGE, "cannot write %s: %s", path, rc ? gs_last_error() : strerror(e));
  }
  free(tmp);
  return 0;
}

struct html_job {
  struct store *st;
  const struct report_run *r;
};

/* The HTML report is the web app's run page, self-contained (serve/page.c): one front end. */
static int write_html(FILE *out, void *user) {
  struct html_job *j = user;
  char *ref = (char *)j->r->view.run.id;
  return serve_page_write(out, j->st, &ref, 1);
}

int cmd_report(int argc, char **argv) {
  static const char usage[] =
      "usage: gpuscope report RUN [--json] [--html FILE] [--diagnose] [--store URL] [--color|--no-color]\n\n"
      "Diagnoses a run: its facts, then the findings ranked by the time they cost, each with the\n"
      "evidence numbers, the estimated speed-up and the fix. A run without findings yet is\n"
      "diagnosed first; --diagnose diagnoses it again (after a gpuscope upgrade). --json prints\n"
      "everything as JSON; --html FILE writes one self-contained page with charts (FILE '-' is\n"
      "stdout). RUN is an id, a unique id prefix, a name, or 'last', or a group (gpuscope run\n"
      "--group): its runs, the nodes of one job, read as one run.\n";
  struct report_opts o;
  int rc = report_parse_opts(argc, argv, &o, usage);
  if (rc >= 0)
    return rc;
  if (o.nrefs != 1)
    return cli_error(GS_EXIT_USAGE, "report: %s (see 'gpuscope report --help')",
                     o.nrefs ? "one run at a time (to put runs side by side: gpuscope compare)"
                             : "which run? (an id, a unique id prefix, a name, or 'last')");
  struct store *st = cli_open_store_mode(o.store, STORE_KEEP);
  if (!st)
    return GS_EXIT_STORE;
  struct report_run r;
  struct store *group = NULL;
  rc = report_load_or_exit(st, o.refs[0], o.rediagnose, &r, &group);
  if (!rc && o.html) {
    struct html_job j = {group ? group : st, &r};
    rc = report_write_file(o.html, write_html, &j);
    if (!rc && !o.json && strcmp(o.html, "-"))
      printf("gpuscope: wrote %s (run %s, %zu finding%s)\n", o.html, r.view.run.id, r.view.nfindings,
             r.view.nfindings == 1 ? "" : "s");
  }
  if (!rc && o.json)
    rc = report_json(stdout, &r) ? cli_error(GS_EXIT_FAIL, "%s", gs_last_error()) : 0;
  else if (!rc && !o.html)
    rc = report_text(stdout, &r, o.color) ? cli_error(GS_EXIT_FAIL, "%s", gs_last_error()) : 0;
  if (!rc)
    rc = report_diag_status("report", &r);
  report_run_done(&r);
  if (group)
    group->close(group);
  st->close(st);
  return rc;
}

struct compare_job {
  struct store *st;
  const struct report_run *runs;
  size_t n;
};

/* The web app's compare page, self-contained (serve/page.c). */
static int write_compare_html(FILE *out, void *user) {
  struct compare_job *j = user;
  char **ids = calloc(j->n, sizeof *ids);
  if (!ids)
    return gs_fail(GS_ENOMEM, "out of memory");
  for (size_t i = 0; i < j->n; i++)
    ids[i] = (char *)j->runs[i].view.run.id;
  int rc = serve_page_write(out, j->st, ids, j->n);
  free(ids);
  return rc;
}

int cmd_compare(int argc, char **argv) {
  static const char usage[] =
      "usage: gpuscope compare RUN RUN... [--json] [--html FILE] [--diagnose] [--store URL]\n"
      "                        [--color|--no-color]\n\n"
      "Puts runs side by side: throughput (samples/s), median step, data-wait share, GPU util, SM\n"
      "activity, memory peak, energy per sample, idle GPU-hours; each run's speed-up over the first;\n"
      "the params that differ; the findings that appeared or disappeared against the first run.\n"
      "Runs without findings yet are diagnosed first. RUN is an id, a prefix, a name, or 'last', or a\n"
      "group (its runs read as one).\n";
  struct report_opts o;
  int rc = report_parse_opts(argc, argv, &o, usage);
  if (rc >= 0)
    return rc;
  if (o.nrefs < 2)
    return cli_error(GS_EXIT_USAGE, "compare: give at least two runs (see 'gpuscope compare --help')");
  rc = 0;
  struct store *st = cli_open_store_mode(o.store, STORE_KEEP);
  if (!st)
    return GS_EXIT_STORE;
  struct report_run *runs = calloc(o.nrefs, sizeof *runs);
  struct store **groups = calloc(o.nrefs, sizeof *groups);
  size_t loaded = 0;
  if (!runs || !groups)
    rc = cli_error(GS_EXIT_FAIL, "out of memory");
  for (; !rc && loaded < o.nrefs; loaded++)
    if ((rc = report_load_or_exit(st, o.refs[loaded], o.rediagnose, &runs[loaded], &groups[loaded])))
      report_run_done(&runs[loaded]);
  if (!rc && o.html) {
    struct compare_job j = {st, runs, o.nrefs};
    rc = report_write_file(o.html, write_compare_html, &j);
    if (!rc && !o.json && strcmp(o.html, "-"))
      printf("gpuscope: wrote %s (%zu runs)\n", o.html, o.nrefs);
  }
  if (!rc && o.json)
    rc = report_compare_json(stdout, runs, o.nrefs) ? cli_error(GS_EXIT_FAIL, "%s", gs_last_error()) : 0;
  else if (!rc && !o.html)
    rc = report_compare_text(stdout, runs, o.nrefs, o.color) ? cli_error(GS_EXIT_FAIL, "%s", gs_last_error()) : 0;
  int diag = 0; /* every run's failed diagnosis is said */
  for (size_t i = 0; !rc && i < loaded; i++)
    if (report_diag_status("compare", &runs[i]))
      diag = GS_EXIT_FAIL;
  if (!rc)
    rc = diag;
  for (size_t i = 0; i < loaded && runs; i++)
    report_run_done(&runs[i]);
  for (size_t i = 0; groups && i < o.nrefs; i++)
    if (groups[i])
      groups[i]->close(groups[i]);
  free(runs);
  free(groups);
  st->close(st);
  return rc;
}
