/* cli/cmd_serve: `gpuscope serve [--listen HOST:PORT] [--store URL] [--token T]` — the run pages in a
 * browser and the JSON API (docs/api.md) until SIGINT or SIGTERM — and `gpuscope serve --html FILE
 * RUN [RUN...]`, which writes the same run page (or compare page) as one self-contained file. Exit
 * codes as cli.h: 2 for bad usage (a non-loopback address without a token, an unknown run, an
 * unwritable file), 3 when the store cannot be opened, 1 when the address cannot be bound. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "serve/serve.h"

static volatile sig_atomic_t serve_stop;

static void on_signal(int sig) {
  (void)sig;
  serve_stop = 1;
}

static const char USAGE[] =
    "usage: gpuscope serve [--listen HOST:PORT] [--store URL] [--token T]\n"
    "       gpuscope serve --html FILE RUN [RUN...]\n"
    "  The run pages (runs, run, compare) in a browser, live, and the JSON API (docs/api.md).\n"
    "  --listen HOST:PORT  address to listen on (default " SERVE_DEFAULT_LISTEN "; port 0: any free port)\n"
    "  --token T           require T on every request (Authorization: Bearer T, or open /?token=T once);\n"
    "                      default $GPUSCOPE_TOKEN; required for an address other than loopback\n"
    "  --store URL         the store to read (never written)\n"
    "  --html FILE         write the run page of RUN (or the compare page of several runs, the\n"
    "                      first the baseline) as one self-contained file that opens from file://\n"
    "                      (\"-\": stdout), and exit\n";

struct cmd_serve_opts {
  struct serve_opts o;
  const char *html;
};

static int serve_opt(int c, const char *arg, void *user) {
  struct cmd_serve_opts *co = user;
  struct serve_opts *o = &co->o;
  switch (c) {
  case 'H':
    co->html = arg;
    break;
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

/* Writes the self-contained page of refs to path ("-": stdout), beside the target and renamed. */
static int write_page(const char *url, const char *path, char *const *refs, size_t n) {
  struct store *st = cli_open_store(url);
  if (!st)
    return GS_EXIT_STORE;
  char tmp[4200];
  FILE *out = stdout;
  if (strcmp(path, "-")) {
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    if (!(out = fopen(tmp, "w"))) {
      st->close(st);
      return cli_error(GS_EXIT_USAGE, "serve: cannot write %s", path);
    }
  }
  int rc = serve_page_write(out, st, refs, n);
  st->close(st);
  if (out != stdout) {
    if (fclose(out) && !rc)
      rc = gs_fail(GS_EIO, "writing %s failed", path);
    if (rc || rename(tmp, path)) {
      unlink(tmp);
      if (!rc)
        return cli_error(GS_EXIT_USAGE, "serve: cannot write %s", path);
    }
  } else if (fflush(stdout) && !rc)
    rc = gs_fail(GS_EIO, "writing the page failed");
  if (rc == GS_ENOENT || rc == GS_EAMBIG || rc == GS_EINVAL)
    return cli_error(GS_EXIT_USAGE, "serve: %s", gs_last_error());
  if (rc)
    return cli_error(rc == GS_EIO ? GS_EXIT_FAIL : GS_EXIT_STORE, "serve: %s", gs_last_error());
  return GS_EXIT_OK;
}

int cmd_serve(int argc, char **argv) {
  static const struct option longopts[] = {{"listen", required_argument, 0, 'l'},
                                           {"store", required_argument, 0, 's'},
                                           {"token", required_argument, 0, 't'},
                                           {"quiet", no_argument, 0, 'q'},
                                           {"html", required_argument, 0, 'H'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  struct cmd_serve_opts co = {{0}, 0};
  struct serve_opts o;
  int rc = cli_parse_opts(argc, argv, longopts, USAGE, serve_opt, &co);
  if (rc >= 0)
    return rc;
  o = co.o;
  if (co.html) {
    if (!*co.html)
      return cli_error(GS_EXIT_USAGE, "serve: --html needs a file name");
    if (optind >= argc)
      return cli_error(GS_EXIT_USAGE, "serve: --html needs the run (or runs) to show");
    return write_page(o.store_url, co.html, argv + optind, (size_t)(argc - optind));
  }
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
