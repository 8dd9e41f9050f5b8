/* cli/cmd_meta: what a person changes about runs after the fact — `tag`, `note`, `rename`, `rm` and
 * `gc` (docs/runs.md). Each opens the store to write without creating it (STORE_MIGRATE: a store of
 * an older gpuscope is brought to this version first, as `gpuscope run` would) and makes one change
 * per run through the store's edit functions; the web app never writes. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "report/report.h"

struct meta_opts {
  const char *store;
  const char *older_than;
  int yes, keep_tagged, dry_run;
  char **rm; /* tag --rm KEY, each */
  size_t nrm;
};

static int meta_opt(int c, const char *arg, void *user) {
  struct meta_opts *o = user;
  switch (c) {
  case 's':
    o->store = arg;
    break;
  case 'y':
    o->yes = 1;
    break;
  case 'k':
    o->keep_tagged = 1;
    break;
  case 'n':
    o->dry_run = 1;
    break;
  case 'o':
    o->older_than = arg;
    break;
  case 'r': {
    char **v = realloc(o->rm, (o->nrm + 1) * sizeof *v);
    if (!v)
      return cli_error(GS_EXIT_FAIL, "out of memory");
    o->rm = v;
    o->rm[o->nrm++] = (char *)arg;
    break;
  }
  }
  return -1;
}

static int parse_meta(int argc, char **argv, struct meta_opts *o, const char *usage) {
  static const struct option longopts[] = {{"store", required_argument, 0, 's'},
                                           {"yes", no_argument, 0, 'y'},
                                           {"keep-tagged", no_argument, 0, 'k'},
                                           {"dry-run", no_argument, 0, 'n'},
                                           {"older-than", required_argument, 0, 'o'},
                                           {"rm", required_argument, 0, 'r'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  return cli_parse_opts(argc, argv, longopts, usage, meta_opt, o);
}

/* The store open to write, with its edits (a store of version 4 or later). */
static struct store *open_edit(const char *url) {
  struct store *st = cli_open_store_mode(url, STORE_MIGRATE);
  if (st && (st->version < 6 || !st->run_delete)) {
    cli_error(GS_EXIT_STORE, "this store cannot be edited");
    st->close(st);
    return NULL;
  }
  return st;
}

/* The exit code of a failed edit: a run that is not there or still running is the user's (2). */
static int edit_failed(int rc) {
  return cli_error(rc == GS_ENOENT || rc == GS_EBUSY ? GS_EXIT_USAGE : GS_EXIT_STORE, "%s", gs_last_error());
}

/* Opens the store and resolves the one run of a one-run edit (argv[optind]). */
static int edit_one(int argc, char **argv, const struct meta_opts *o, int extra, struct store **st,
                    struct store_run *run) {
  *st = NULL;
  if (optind >= argc)
    return cli_error(GS_EXIT_USAGE, "%s: which run? (an id, a unique id prefix, a name, or 'last')", argv[0]);
  if (extra >= 0 && argc - optind - 1 != extra)
    return cli_error(GS_EXIT_USAGE, "%s: wants RUN and %d more argument%s (see 'gpuscope %s --help')", argv[0], extra,
                     extra == 1 ? "" : "s", argv[0]);
  if (!(*st = open_edit(o->store)))
    return GS_EXIT_STORE;
  int rc = cli_get_run(*st, argv[optind], run);
  if (rc) {
    (*st)->close(*st);
    *st = NULL;
  }
  return rc;
}

int cmd_tag(int argc, char **argv) {
  struct meta_opts o;
  int rc = parse_meta(argc, argv, &o,
                      "usage: gpuscope tag RUN KEY=VALUE... [--rm KEY]... [--store URL]\n\n"
                      "Sets tags of a run (a KEY already there takes the new VALUE) and removes those\n"
                      "named by --rm. Tags read as tag.KEY in 'gpuscope runs --where'. Prints the tags.\n");
  struct store *st = NULL;
  struct store_run run;
  if (rc < 0 && !(rc = edit_one(argc, argv, &o, -1, &st, &run))) {
    int nset = argc - optind - 1;
    if (!nset && !o.nrm)
      rc = cli_error(GS_EXIT_USAGE, "tag: nothing to do: give KEY=VALUE or --rm KEY");
    else if (store_tags_edit(run.tags, sizeof run.tags, argv + optind + 1, (size_t)nset, o.rm, o.nrm))
      rc = cli_error(GS_EXIT_USAGE, "tag: %s", gs_last_error());
    else if ((rc = st->run_set_tags(st, run.id, run.tags)))
      rc = edit_failed(rc);
    else {
      gs_term_text(stdout, run.tags, 0);
      putchar('\n');
    }
  }
  if (st)
    st->close(st);
  free(o.rm);
  return rc < 0 ? GS_EXIT_OK : rc;
}

int cmd_note(int argc, char **argv) {
  struct meta_opts o;
  int rc = parse_meta(argc, argv, &o,
                      "usage: gpuscope note RUN TEXT [--store URL]\n\n"
                      "Adds a note to a run: it shows with the run's notes in 'show --notes', the\n"
                      "report and the run page.\n");
  struct store *st = NULL;
  struct store_run run;
  if (rc < 0 && !(rc = edit_one(argc, argv, &o, 1, &st, &run))) {
    const char *text = argv[optind + 1];
    if (!*text || strlen(text) > 4096)
      rc = cli_error(GS_EXIT_USAGE, "note: a note is 1 to 4096 bytes (this one: %zu)", strlen(text));
    else if ((rc = st->run_add_note(st, run.id, text)))
      rc = edit_failed(rc);
  }
  if (st)
    st->close(st);
  free(o.rm);
  return rc < 0 ? GS_EXIT_OK : rc;
}

int cmd_rename(int argc, char **argv) {
  struct meta_opts o;
  int rc = parse_meta(argc, argv, &o,
                      "usage: gpuscope rename RUN NAME [--store URL]\n\n"
                      "Gives a run a new name (what 'gpuscope report NAME' finds).\n");
  struct store *st = NULL;
  struct store_run run;
  if (rc < 0 && !(rc = edit_one(argc, argv, &o, 1, &st, &run))) {
    const char *name = argv[optind + 1];
    if (!*name || strlen(name) >= sizeof run.name)
      rc = cli_error(GS_EXIT_USAGE, "rename: a run name is 1 to %zu bytes (this one: %zu)", sizeof run.name - 1,
                     strlen(name));
    else if ((rc = st->run_rename(st, run.id, name)))
      rc = edit_failed(rc);
  }
  if (st)
    st->close(st);
  free(o.rm);
  return rc < 0 ? GS_EXIT_OK : rc;
}

/* Asks on the terminal whether to remove n runs; 1 for yes. */
static int confirm(size_t n) {
  if (!isatty(0) || !isatty(2))
    return 0;
  fprintf(stderr, "remove %zu run%s and everything of %s? [y/N] ", n, n == 1 ? "" : "s", n == 1 ? "it" : "them");
  char line[16];
  return fgets(line, sizeof line, stdin) && (line[0] == 'y' || line[0] == 'Y');
}

/* Removes runs[0..n) (none running: checked), then compacts; prints each. */
static int remove_runs(struct store *st, const struct store_run *runs, size_t n, const struct meta_opts *o) {
  for (size_t i = 0; i < n; i++) {
    char name[130];
    printf("%s %s %s\n", o->dry_run ? "would remove" : "removed", runs[i].id,
           gs_term_copy(name, sizeof name, runs[i].name[0] ? runs[i].name : "-"));
    int rc = o->dry_run ? GS_OK : st->run_delete(st, runs[i].id);
    if (rc)
      return edit_failed(rc);
  }
  if (!o->dry_run && n && st->compact && st->compact(st))
    return cli_error(GS_EXIT_STORE, "the runs are removed, but the store could not be compacted: %s", gs_last_error());
  return GS_EXIT_OK;
}

int cmd_rm(int argc, char **argv) {
  struct meta_opts o;
  int rc = parse_meta(argc, argv, &o,
                      "usage: gpuscope rm RUN... [--yes] [--store URL]\n\n"
                      "Removes runs and everything of them (samples, events, params, notes, findings,\n"
                      "logs), then gives the room back (SQLite: VACUUM). A running run is refused, and\n"
                      "then nothing is removed. Without --yes, asks on a terminal; elsewhere refuses.\n");
  if (rc >= 0)
    return rc;
  if (optind >= argc) {
    free(o.rm);
    return cli_error(GS_EXIT_USAGE, "rm: which runs? (ids, unique id prefixes, names, or 'last')");
  }
  struct store *st = open_edit(o.store);
  size_t n = (size_t)(argc - optind);
  struct store_run *runs = st ? calloc(n, sizeof *runs) : NULL;
  rc = !st ? GS_EXIT_STORE : !runs ? cli_error(GS_EXIT_FAIL, "out of memory") : -1;
  size_t k = 0; /* the runs named, each once (a name and an id may name the same run) */
  for (size_t i = 0; rc < 0 && i < n; i++) {
    if ((rc = cli_get_run(st, argv[optind + (int)i], &runs[k])))
      break;
    rc = !strcmp(runs[k].status, "running")
             ? cli_error(GS_EXIT_USAGE, "rm: run %s is running: it can be removed once it has ended (nothing removed)",
                         runs[k].id)
             : -1;
    size_t j = 0;
    while (j < k && strcmp(runs[j].id, runs[k].id))
      j++;
    k += j == k;
  }
  n = k;
  if (rc < 0 && !o.yes && !confirm(n))
    rc = cli_error(GS_EXIT_USAGE, "rm: removing %zu run%s needs --yes (nothing removed)", n, n == 1 ? "" : "s");
  if (rc < 0)
    rc = remove_runs(st, runs, n, &o);
  free(runs);
  free(o.rm);
  if (st)
    st->close(st);
  return rc;
}

int cmd_gc(int argc, char **argv) {
  struct meta_opts o;
  int rc = parse_meta(argc, argv, &o,
                      "usage: gpuscope gc --older-than AGE [--keep-tagged] [--dry-run] [--store URL]\n\n"
                      "Removes the runs that ended more than AGE ago (90d, 12h, 30m), as 'gpuscope rm'\n"
                      "does; --keep-tagged keeps runs that have tags; --dry-run only lists them. Running\n"
                      "runs are never removed.\n");
  free(o.rm);
  if (rc >= 0)
    return rc;
  if (optind < argc)
    return cli_error(GS_EXIT_USAGE, "gc: unexpected argument '%s'", argv[optind]);
  int64_t age;
  if (!o.older_than)
    return cli_error(GS_EXIT_USAGE, "gc: --older-than AGE is required (such as 90d)");
  if (gs_parse_duration(o.older_than, &age))
    return cli_error(GS_EXIT_USAGE, "gc: --older-than: %s", gs_last_error());
  struct store *st = open_edit(o.store);
  if (!st)
    return GS_EXIT_STORE;
  struct store_run *runs = NULL;
  size_t n = 0, k = 0;
  if (st->runs_list(st, &runs, &n)) {
    rc = cli_error(GS_EXIT_FAIL, "%s", gs_last_error());
  } else {
    int64_t before = gs_wall_ns() - age;
    for (size_t i = 0; i < n; i++)
      if (strcmp(runs[i].status, "running") && runs[i].end_wall_ns > 0 && runs[i].end_wall_ns < before &&
          !(o.keep_tagged && runs[i].tags[0]))
        runs[k++] = runs[i];
    rc = remove_runs(st, runs, k, &o);
    if (!rc)
      printf("gc: %s %zu of %zu run%s\n", o.dry_run ? "would remove" : "removed", k, n, n == 1 ? "" : "s");
  }
  free(runs);
  st->close(st);
  return rc;
}
