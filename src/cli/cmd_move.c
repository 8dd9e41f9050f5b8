/* cli/cmd_move: moving runs between stores — `gpuscope export RUN… -o FILE`, `gpuscope import FILE`
 * and `gpuscope copy RUN… --to URL` (store.h "moving runs", docs/export.md). Arguments, messages
 * and exit codes only: the work is store_export, store_import and store_copy. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

struct move_opts {
  const char *store, *out, *to;
};

static int on_opt(int opt, const char *arg, void *user) {
  struct move_opts *o = user;
  if (opt == 's')
    o->store = arg;
  else if (opt == 'o')
    o->out = arg;
  else if (opt == 't')
    o->to = arg;
  return -1;
}

static int parse(int argc, char **argv, const char *usage, struct move_opts *o) {
  static const struct option longopts[] = {{"store", required_argument, 0, 's'},
                                           {"output", required_argument, 0, 'o'},
                                           {"to", required_argument, 0, 't'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  return cli_parse_opts_short(argc, argv, "o:", longopts, usage, on_opt, o);
}

/* The exit code of a store_* failure, after saying it. */
static int fail_code(int rc) {
  int code = rc == GS_ECORRUPT || rc == GS_EINVAL || rc == GS_ENOENT ? GS_EXIT_USAGE
             : rc == GS_ESTORE || rc == GS_EIO                       ? GS_EXIT_STORE
                                                                     : GS_EXIT_FAIL;
  return cli_error(code, "%s", gs_last_error());
}

/* The runs named by argv[first..argc) in st, resolved (ended ones: a running run is refused). */
static int resolve(struct store *st, int argc, char **argv, int first, struct store_run **runs, size_t *n) {
  *n = 0;
  if (!(*runs = calloc((size_t)(argc - first), sizeof **runs)))
    return cli_error(GS_EXIT_FAIL, "out of memory");
  for (int i = first; i < argc; i++) {
    int rc = cli_get_run(st, argv[i], &(*runs)[*n]);
    if (rc)
      return rc;
    if (!strcmp((*runs)[*n].status, "running"))
      return cli_error(GS_EXIT_USAGE, "run %s is still running: move it when it has ended", (*runs)[*n].id);
    ++*n;
  }
  return 0;
}

struct said {
  size_t written, held;
};

static void say_run(void *user, const struct store_run *r, int written) {
  struct said *s = user;
  char name[128];
  gs_term_escape(r->name, 1, name, sizeof name);
  if (written)
    printf("%s %s: added\n", r->id, name);
  else
    printf("%s %s: in the store already, nothing added\n", r->id, name);
  ++*(written ? &s->written : &s->held);
}

int cmd_export(int argc, char **argv) {
  static const char usage[] =
      "usage: gpuscope export RUN... -o FILE [--store URL]\n\n"
      "Writes the runs (ids, prefixes, names or 'last'; ended runs) into one file: each run's record,\n"
      "params, series with every point, events, notes and findings, as JSON Lines (docs/export.md).\n"
      "-o - writes to stdout. 'gpuscope import FILE' reads it into another store.\n";
  struct move_opts o;
  int rc = parse(argc, argv, usage, &o);
  if (rc >= 0)
    return rc;
  if (!o.out)
    return cli_error(GS_EXIT_USAGE, "export: -o FILE is needed (see 'gpuscope export --help')");
  if (optind >= argc)
    return cli_error(GS_EXIT_USAGE, "export: no run named (see 'gpuscope export --help')");
  struct store *st = cli_open_store(o.store);
  if (!st)
    return GS_EXIT_STORE;
  struct store_run *runs = NULL;
  size_t n = 0;
  int to_stdout = !strcmp(o.out, "-");
  FILE *out = NULL;
  if ((rc = resolve(st, argc, argv, optind, &runs, &n)))
    goto fail;
  if (!(out = to_stdout ? stdout : fopen(o.out, "w"))) {
    rc = cli_error(GS_EXIT_FAIL, "export: cannot write %s: %s", o.out, strerror(errno));
    goto fail;
  }
  if ((rc = store_export(st, runs, n, out)))
    rc = fail_code(rc);
  if (!to_stdout && fclose(out) && !rc)
    rc = cli_error(GS_EXIT_FAIL, "export: cannot write %s: %s", o.out, strerror(errno));
  if (rc && !to_stdout)
    remove(o.out); /* never a file that is not whole */
  else if (!to_stdout)
    fprintf(stderr, "gpuscope: exported %zu run%s to %s\n", n, n == 1 ? "" : "s", o.out);
fail:
  free(runs);
  st->close(st);
  return rc;
}

/* `gpuscope import mlruns/` or `logs/`: an MLflow file store's runs, or a TensorBoard log
 * directory's, converted and checked before the store is opened (store_mlflow_convert,
 * store_tb_convert), so a damaged one makes none; what names the runs in the last line. */
static int import_converted(const char *url, const char *dir, FILE *in, const char *what) {
  if (!in)
    return cli_error(GS_EXIT_USAGE, "import: %s", gs_last_error());
  struct store *st = cli_open_store_mode(url, STORE_WRITE);
  if (!st) {
    fclose(in);
    return GS_EXIT_STORE;
  }
  struct said s = {0};
  int rc = store_import(st, in, dir, say_run, &s);
  if (rc)
    rc = fail_code(rc);
  else
    fprintf(stderr, "gpuscope: %zu %s run%s added, %zu in the store already\n", s.written, what,
            s.written == 1 ? "" : "s", s.held);
  fclose(in);
  st->close(st);
  return rc;
}

static int import_tensorboard(const char *url, const char *dir) {
  char said[512];
  FILE *in = store_tb_convert(dir, said, sizeof said);
  if (in && *said) /* before the store is opened: only scalars and hparams are runs' data here */
    fprintf(stderr, "gpuscope: import: not imported (only scalars and hparams are): %s\n", said);
  return import_converted(url, dir, in, "TensorBoard");
}

int cmd_import(int argc, char **argv) {
  static const char usage[] =
      "usage: gpuscope import FILE|MLRUNS|LOGDIR [--store URL]\n\n"
      "Writes the runs of an export file into the store, each with its id: a run the store holds\n"
      "already is left as it is (a second import adds nothing). The whole file is read first: a\n"
      "truncated or damaged one is refused (exit 2) and nothing of it is written.\n"
      "MLRUNS, an MLflow file store's folder (mlruns/), brings its runs in the same way: names,\n"
      "params, tags, metrics by step and time, start and end (docs/export.md, From MLflow).\n"
      "LOGDIR, a TensorBoard log directory (folders of events.out.tfevents.* files), brings each\n"
      "folder of event files in as a run: scalars by step and time, hparams as params (docs/export.md,\n"
      "From TensorBoard).\n";
  struct move_opts o;
  int rc = parse(argc, argv, usage, &o);
  if (rc >= 0)
    return rc;
  if (optind + 1 != argc)
    return cli_error(GS_EXIT_USAGE, "import: one FILE is needed (see 'gpuscope import --help')");
  if (store_mlflow_is(argv[optind]))
    return import_converted(o.store, argv[optind], store_mlflow_convert(argv[optind]), "MLflow");
  if (store_tb_is(argv[optind]))
    return import_tensorboard(o.store, argv[optind]);
  FILE *in = fopen(argv[optind], "r");
  if (!in)
    return cli_error(GS_EXIT_USAGE, "import: cannot read %s: %s", argv[optind], strerror(errno));
  if ((rc = store_import_check(in, argv[optind]))) { /* before the store is opened: a bad file makes none */
    fclose(in);
    return fail_code(rc);
  }
  struct store *st = cli_open_store_mode(o.store, STORE_WRITE);
  if (!st) {
    fclose(in);
    return GS_EXIT_STORE;
  }
  struct said s = {0};
  if ((rc = store_import(st, in, argv[optind], say_run, &s)))
    rc = fail_code(rc);
  else
    fprintf(stderr, "gpuscope: %zu run%s added, %zu in the store already\n", s.written, s.written == 1 ? "" : "s",
            s.held);
  fclose(in);
  st->close(st);
  return rc;
}

int cmd_copy(int argc, char **argv) {
  static const char usage[] =
      "usage: gpuscope copy RUN... --to URL [--store URL]\n\n"
      "Copies the runs (ended ones) into the store at --to (a team's postgresql://... from a laptop's\n"
      "SQLite, say), each with its id: a run there already is left as it is, so a second copy adds\n"
      "nothing. The same as export and import, without the file.\n";
  struct move_opts o;
  int rc = parse(argc, argv, usage, &o);
  if (rc >= 0)
    return rc;
  if (!o.to)
    return cli_error(GS_EXIT_USAGE, "copy: --to URL is needed (see 'gpuscope copy --help')");
  if (optind >= argc)
    return cli_error(GS_EXIT_USAGE, "copy: no run named (see 'gpuscope copy --help')");
  char def[1200];
  if (!strcmp(o.to, o.store ? o.store : store_default_url(def, sizeof def)))
    return cli_error(GS_EXIT_USAGE, "copy: --to names the store the runs are in");
  struct store *src = cli_open_store(o.store), *dst = NULL;
  if (!src)
    return GS_EXIT_STORE;
  struct store_run *runs = NULL;
  size_t n = 0;
  struct said s = {0};
  if ((rc = resolve(src, argc, argv, optind, &runs, &n)))
    goto fail;
  if (!(dst = cli_open_store_mode(o.to, STORE_WRITE))) {
    rc = GS_EXIT_STORE;
    goto fail;
  }
  if ((rc = store_copy(src, runs, n, dst, say_run, &s)))
    rc = fail_code(rc);
  else
    fprintf(stderr, "gpuscope: %zu run%s added, %zu in the store already\n", s.written, s.written == 1 ? "" : "s",
            s.held);
fail:
  free(runs);
  if (dst)
    dst->close(dst);
  src->close(src);
  return rc;
}
