/* cli/cmd_migrate: `gpuscope migrate [--store URL]` — brings a store made by an older gpuscope to
 * this schema version, explicitly. Reads never migrate (they open read-only), and `gpuscope run`
 * migrates the store it writes to; this is the way to do it without starting a run. */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"

static int on_opt(int opt, const char *arg, void *user) {
  if (opt == 's')
    *(const char **)user = arg;
  return -1;
}

int cmd_migrate(int argc, char **argv) {
  static const struct option longopts[] = {
      {"store", required_argument, 0, 's'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
  static const char usage[] =
      "usage: gpuscope migrate [--store URL]\n\n"
      "Brings a store made by an older gpuscope to this schema version, in one transaction. The\n"
      "store must exist and be a gpuscope store (its meta table says app = gpuscope); any other\n"
      "file is left untouched. Other commands never migrate: reads open the store read-only.\n";
  const char *url = NULL;
  int rc = cli_parse_opts(argc, argv, longopts, usage, on_opt, &url);
  if (rc >= 0)
    return rc;
  if (optind < argc)
    return cli_error(GS_EXIT_USAGE, "migrate: unexpected argument '%s' (see 'gpuscope migrate --help')", argv[optind]);
  struct store *st = cli_open_store_mode(url, STORE_MIGRATE);
  if (!st)
    return GS_EXIT_STORE;
  int version = st->version >= 3 && st->schema_version ? st->schema_version : GS_STORE_SCHEMA_VERSION;
  if (st->schema_found == version)
    printf("gpuscope: the store is at schema version %d already; nothing to do\n", version);
  else
    printf("gpuscope: migrated the store from schema version %d to %d\n", st->schema_found, version);
  st->close(st);
  return GS_EXIT_OK;
}
