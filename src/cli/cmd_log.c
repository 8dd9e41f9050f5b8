/* cli/cmd_log: `gpuscope log [options] RUN` — the job's output as the store kept it (report/log.c
 * reads and writes it): every stream or one, the lines a POSIX regular expression matches, and
 * with --follow a live run's output as it comes, until the run ends. */
#include <getopt.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "report/report.h"

static const char LOG_USAGE[] =
    "usage: gpuscope log [options] RUN\n\n"
    "Prints the job's output as `gpuscope run` kept it (its last --log-max bytes). On a terminal\n"
    "each line is shown as the terminal last showed it, without control sequences; into a pipe or\n"
    "a file the bytes are written as the job wrote them.\n\n"
    "  --stream S     out or err (the job's stdout or stderr); a job that wrote to a terminal had\n"
    "                 one stream for both, tty, and either name shows it\n"
    "  --grep RE      only the lines matching RE (POSIX extended regular expression)\n"
    "  --follow       keep printing a running run's output until the run ends\n"
    "  --times        each line after its time since the run's start\n"
    "  --raw          the bytes as stored even on a terminal (colours, \\r)\n"
    "  --store URL    sqlite:///path/to/file.db or postgresql://host/db (default $GPUSCOPE_STORE)\n\n"
    "Exit: 0 output printed (with --grep: a line matched); 1 the run kept no output (said why), or\n"
    "no line matched; 2 bad usage or no such run; 3 the store cannot be read.\n";

struct log_args {
  const char *store, *stream, *grep;
  int follow, times, raw;
};

static int log_opt(int opt, const char *arg, void *user) {
  struct log_args *a = user;
  switch (opt) {
  case 's':
    a->store = arg;
    break;
  case 'S':
    if (strcmp(arg, "out") && strcmp(arg, "err") && strcmp(arg, "tty"))
      return cli_error(GS_EXIT_USAGE, "log: --stream is out, err or tty, not '%s'", arg);
    a->stream = arg;
    break;
  case 'g':
    a->grep = arg;
    break;
  case 'f':
    a->follow = 1;
    break;
  case 't':
    a->times = 1;
    break;
  case 'r':
    a->raw = 1;
    break;
  }
  return -1;
}

/* Why a run has no output kept, from its params ("" when it should have some), and how its stdout
 * and stderr were kept (log.streams: "out,err", "tty,tty", "tty,err", ...; "" when unknown). */
static void log_why_none(struct store *st, const char *run_id, char *why, size_t n, char *streams_out, size_t sn,
                         long long *seen, long long *kept) {
  struct gs_kv *kv = NULL;
  size_t nkv = 0;
  const char *capture = NULL, *streams = NULL;
  why[0] = 0;
  *seen = *kept = -1;
  if (st->params_read(st, run_id, &kv, &nkv) == 0) {
    for (size_t i = 0; i < nkv; i++) {
      if (!strcmp(kv[i].key, "log.capture"))
        capture = kv[i].value;
      else if (!strcmp(kv[i].key, "log.streams"))
        streams = kv[i].value;
      else if (!strcmp(kv[i].key, "log.bytes"))
        *seen = atoll(kv[i].value);
      else if (!strcmp(kv[i].key, "log.kept_bytes"))
        *kept = atoll(kv[i].value);
    }
  }
  snprintf(streams_out, sn, "%s", streams ? streams : "");
  if (capture && !strcmp(capture, "off"))
    snprintf(why, n, "its output was not kept (an attached process's output cannot be read, or --log-max 0)");
  else if (!streams)
    snprintf(why, n, "its output was not kept (recorded by a gpuscope that did not keep it, or not by `run`)");
  store_kv_free(kv, nkv);
}

/* Prints what the run has from l->next_seq on; with follow, again until the run has ended. */
static int log_pump(struct store *st, struct store_run *run, struct report_log *l, int follow) {
  for (;;) {
    int running = follow && !strcmp(run->status, "running");
    int rc = report_log_read(stdout, st, run->id, l);
    fflush(stdout);
    if (rc)
      return rc;
    if (!running)
      return GS_OK;
    struct timespec ts = {0, 300000000L}; /* a reader's poll, as top's refresh */
    nanosleep(&ts, NULL);
    if ((rc = st->run_get(st, run->id, run)))
      return rc;
  }
}

int cmd_log(int argc, char **argv) {
  static const struct option longopts[] = {{"store", required_argument, 0, 's'}, {"stream", required_argument, 0, 'S'},
                                           {"grep", required_argument, 0, 'g'},  {"follow", no_argument, 0, 'f'},
                                           {"times", no_argument, 0, 't'},       {"raw", no_argument, 0, 'r'},
                                           {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
  struct log_args a = {0};
  int rc = cli_parse_opts(argc, argv, longopts, LOG_USAGE, log_opt, &a);
  if (rc >= 0)
    return rc;
  if (optind != argc - 1)
    return cli_error(GS_EXIT_USAGE, "log: want exactly one RUN (usage: gpuscope log [options] RUN)");
  regex_t re;
  int rerr = a.grep ? regcomp(&re, a.grep, REG_EXTENDED | REG_NOSUB) : 0;
  if (rerr) {
    char msg[256];
    regerror(rerr, &re, msg, sizeof msg);
    return cli_error(GS_EXIT_USAGE, "log: --grep '%s' is not a regular expression: %s", a.grep, msg);
  }
  struct store *st;
  struct store_run run;
  if ((rc = cli_open_run(a.store, argv[optind], &st, &run))) {
    if (a.grep)
      regfree(&re);
    return rc;
  }
  char why[160], streams[32];
  long long seen, kept;
  log_why_none(st, run.id, why, sizeof why, streams, sizeof streams, &seen, &kept);
  if (seen >= 0 && kept >= 0 && seen > kept) /* the bound cut it: said first, on stderr */
    fprintf(stderr, "gpuscope: the job wrote %lld bytes; its first %lld were cut (--log-max): the last %lld are kept\n",
            seen, seen - kept, kept);
  /* --stream out / err: the stream that one was kept as (tty when it was a terminal) */
  const char *kind = a.stream, *comma = strchr(streams, ',');
  if (a.stream && comma && strcmp(a.stream, "tty"))
    kind = !strcmp(a.stream, "out") ? (!strncmp(streams, "tty,", 4) ? "tty" : "out")
                                    : (!strcmp(comma + 1, "tty") ? "tty" : "err");
  if (a.stream && strcmp(a.stream, "tty") && !strcmp(streams, "tty,tty"))
    fprintf(stderr, "gpuscope: the job wrote to a terminal: its stdout and stderr are one stream (tty), shown whole\n");
  struct report_log l = {.stream = kind, .re = a.grep ? &re : NULL, .raw = a.raw || !isatty(1), .times = a.times};
  int err = log_pump(st, &run, &l, a.follow);
  if (!err)
    report_log_finish(stdout, &l);
  fflush(stdout);
  if (err)
    rc = cli_error(err == GS_EIO || err == GS_ECORRUPT ? GS_EXIT_STORE : GS_EXIT_FAIL, "log: %s", gs_last_error());
  else if (!l.chunks && why[0])
    rc = cli_error(GS_EXIT_FAIL, "log: run %s: %s", run.id, why);
  else
    rc = a.grep && !l.lines_out ? GS_EXIT_FAIL : GS_EXIT_OK;
  report_log_done(&l);
  if (a.grep)
    regfree(&re);
  st->close(st);
  return rc;
}
