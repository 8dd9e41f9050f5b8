/* cli/cmd_serve: `gpuscope serve [--listen HOST:PORT] [--store URL] [--token T]` — the run pages in a
 * browser and the JSON API (docs/api.md) until SIGINT or SIGTERM. Exit codes as cli.h: 2 for bad
 * usage (a non-loopback address without a token), 3 when the store cannot be opened, 1 when the
 * address cannot be bound. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "serve/serve.h"

static volatile sig_atomic_t serve_stop;

static void on_signal(int sig) {
  (void)sig;
  serve_stop = 1;
}

static const char USAGE[] =
    "usage: gpuscope serve [--listen HOST:PORT] [--store URL] [--token T]\n"
    "  The run pages (runs, run, compare) in a browser, live, and the JSON API (docs/api.md).\n"
    "  --listen HOST:PORT  address to listen on (default " SERVE_DEFAULT_LISTEN "; port 0: any free port)\n"
    "  --token T           require T on every request (Authorization: Bearer T, or open /?token=T once);\n"
    "                      default $GPUSCOPE_TOKEN; required for an address other than loopback\n"
    "  --store URL         the store to read (never written)\n";

static int serve_opt(int c, const char *arg, void *user) {
  struct serve_opts *o = user;
  switch (c) {
  case 'l':
    o->listen = arg;
    break;
  case 's':
    o->store_url = arg;
    break;
  case 't':
    o->token = arg;
    break;
  case 'q':
    o->quiet = 1;
    break;
  }
  return -1;
}

int cmd_serve(int argc, char **argv) {
  static const struct option longopts[] = {{"listen", required_argument, 0, 'l'}, {"store", required_argument, 0, 's'},
                                           {"token", required_argument, 0, 't'},  {"quiet", no_argument, 0, 'q'},
                                           {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
  struct serve_opts o = {0};
  int rc = cli_parse_opts(argc, argv, longopts, USAGE, serve_opt, &o);
  if (rc >= 0)
    return rc;
  if (optind < argc)
    return cli_error(GS_EXIT_USAGE, "serve: unexpected argument '%s'", argv[optind]);
  if (!o.token)
    o.token = getenv("GPUSCOPE_TOKEN");
  char def[1200];
  if (!o.store_url)
    o.store_url = store_default_url(def, sizeof def);
  struct serve_addr a;
  if (serve_addr_parse(o.listen ? o.listen : SERVE_DEFAULT_LISTEN, &a))
    return cli_error(GS_EXIT_USAGE, "serve: %s", gs_last_error());
  struct store *st = cli_open_store(o.store_url); /* its one-line reason and exit code, up front */
  if (!st)
    return GS_EXIT_STORE;
  st->close(st);
  struct sigaction sa = {.sa_handler = on_signal};
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  rc = serve_run(&o, &serve_stop);
  if (rc == GS_EINVAL)
    return cli_error(GS_EXIT_USAGE, "serve: %s", gs_last_error());
  if (rc == GS_EBUSY)
    return cli_error(GS_EXIT_FAIL, "serve: %s", gs_last_error());
  if (rc)
    return cli_error(GS_EXIT_STORE, "%s", gs_last_error());
  return GS_EXIT_OK;
}
