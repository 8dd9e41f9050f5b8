/* cli: the gpuscope program — main() dispatches to one function per sub-command, each in its own
 * file. Sub-commands parse arguments and print; the work is done by the subsystems.
 *
 * Exit codes (README "Exit codes"): 0 ok; 1 unexpected failure (a read that fails on an open store,
 * no memory, a fork or signalfd that fails); 2 bad usage, bad input or unknown run; 3 the store
 * cannot be opened (missing, a folder, unreadable, read-only for a write), created or written, or is
 * not a gpuscope store. `gpuscope run` exits with the job's status instead (128+N when the job died
 * of signal N, 127 not found, 126 not executable). */
#ifndef GS_CLI_H
#define GS_CLI_H

#include "alert/alert.h"
#include "store/store.h"

enum { GS_EXIT_OK = 0, GS_EXIT_FAIL = 1, GS_EXIT_USAGE = 2, GS_EXIT_STORE = 3 };

int cmd_run(int argc, char **argv);
int cmd_runs(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_migrate(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_copy(int argc, char **argv);
int cmd_log(int argc, char **argv);

/* cmd_meta.c: edits of runs after the fact */
int cmd_tag(int argc, char **argv);
int cmd_note(int argc, char **argv);
int cmd_rename(int argc, char **argv);
int cmd_rm(int argc, char **argv);
int cmd_gc(int argc, char **argv);

/* cmd_search.c: `runs --where/--since/--sort/--columns` */
struct report_row;
struct cli_search {
  const char *where, *since, *sort, *columns; /* NULL: not asked */
};
/* The runs of st that o selects, sorted, in *rows (free with report_rows_free). Returns 0, or the
 * exit code after saying why (2 for a bad expression, age or column). */
int cli_runs_search(struct store *st, const struct cli_search *o, struct report_row **rows, size_t *n);
/* Prints the columns (comma-separated names) of rows as a table, JSON (json) or CSV (csv). Returns
 * 0, 2 for an unknown column, 1 when a column could not be read. */
int cli_runs_columns(struct report_row *rows, size_t n, const char *columns, int json, int csv);

/* Prints "gpuscope: <msg>" on stderr and returns code. */
int cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

struct option;

/* Parses the options of a sub-command's argv (argv[0] its name) with getopt_long: long options from
 * longopts, and -h. Each option goes to on_opt(val, its value or NULL, user), which returns -1 to go
 * on or an exit code to stop with. --help/-h prints usage and stops with 0; a missing value or an
 * unknown option is reported and stops with GS_EXIT_USAGE. Returns -1 when every option was taken
 * (optind then indexes the first operand), else the exit code to stop with. */
int cli_parse_opts(int argc, char **argv, const struct option *longopts, const char *usage,
                   int (*on_opt)(int opt, const char *arg, void *user), void *user);
/* The same with short options besides -h: shortopts is letters of short options without a value
 * ("q"), after a "+" when options stop at the first operand (a command to run keeps its own). */
int cli_parse_opts_short(int argc, char **argv, const char *shortopts, const struct option *longopts, const char *usage,
                         int (*on_opt)(int opt, const char *arg, void *user), void *user);

/* --log-max's value: bytes with an optional K, M or G (binary), at least 64K; "0" keeps none (-1).
 * Returns 0 with *out, or GS_EXIT_USAGE after saying why (cmd names the command). */
int cli_parse_log_max(const char *cmd, const char *arg, int64_t *out);

/* Opens the store named by url (NULL: the default) in mode; on failure prints the reason (exit code
 * GS_EXIT_STORE) and returns NULL. */
struct store *cli_open_store_mode(const char *url, enum store_mode mode);
/* cli_open_store_mode(url, STORE_READ): read-only, never creates (runs, show, metrics). */
struct store *cli_open_store(const char *url);

/* Resolves a run reference; on failure prints the reason and returns GS_EXIT_USAGE (else 0). */
int cli_get_run(struct store *st, const char *ref, struct store_run *run);

/* Opens the store at url (NULL: default) and resolves ref in it. Returns 0 with *st open (the
 * caller closes it) and *run filled, or the exit code after printing the reason (*st NULL). */
int cli_open_run(const char *url, const char *ref, struct store **st, struct store_run *run);

/* The alert options of the commands that watch (run, attach, agent; docs/alerts.md): the XDG file
 * (alert_config_default_path, or --alert-config FILE, or none) read first, then each flag in order. */
enum {
  CLI_OPT_ALERT = 0x200,
  CLI_OPT_ALERT_WEBHOOK,
  CLI_OPT_ALERT_SLACK,
  CLI_OPT_ALERT_CMD,
  CLI_OPT_ALERT_EVERY,
  CLI_OPT_ALERT_SET,
  CLI_OPT_ALERT_CONFIG
};
#define CLI_ALERT_LONGOPTS                                                                                             \
  {"alert", required_argument, 0, CLI_OPT_ALERT}, {"alert-webhook", required_argument, 0, CLI_OPT_ALERT_WEBHOOK},      \
      {"alert-slack", required_argument, 0, CLI_OPT_ALERT_SLACK},                                                      \
      {"alert-cmd", required_argument, 0, CLI_OPT_ALERT_CMD},                                                          \
      {"alert-every", required_argument, 0, CLI_OPT_ALERT_EVERY},                                                      \
      {"alert-set", required_argument, 0, CLI_OPT_ALERT_SET}, {                                                        \
    "alert-config", required_argument, 0, CLI_OPT_ALERT_CONFIG                                                         \
  }
#define CLI_ALERT_USAGE                                                                                                \
  "  --alert RULE       alert on RULE (repeatable): gpu_idle<10%:for=2m, hang:for=5m, exit,\n"                         \
  "                     finding:gain=1.2, throttle>20%:for=1m, gpu_mem>95%, straggler\n"                               \
  "  --alert-webhook URL  POST each alert as JSON (repeatable); --alert-slack URL as {\"text\": ...}\n"                \
  "  --alert-cmd CMD    run CMD (sh -c) with the alert as JSON on stdin and in GPUSCOPE_ALERT_*\n"                     \
  "  --alert-every T    evaluate the rules at most every T (default 5s)\n"                                             \
  "  --alert-set K=V    timeout, retries, queue or rate (docs/alerts.md)\n"                                            \
  "  --alert-config F   read F instead of $XDG_CONFIG_HOME/gpuscope/alerts.ini ('none': no file)\n"

#define CLI_ALERT_MAX_FLAGS 64
struct cli_alerts {
  const char *flag[CLI_ALERT_MAX_FLAGS][2]; /* (setting, value) in the order given */
  int n;
  const char *file; /* --alert-config (NULL: the default path) */
  struct alert_config c;
};

/* Takes one alert option of opt (a CLI_OPT_ALERT_*) into a. Returns -1 (go on), GS_EXIT_USAGE after
 * saying why, or -2 when opt is not an alert option. */
int cli_alert_opt(struct cli_alerts *a, int opt, const char *arg);
/* Reads the file, then applies the flags, into a->c. Returns -1 (go on) or GS_EXIT_USAGE after one
 * line naming the file and line, or the flag, that is wrong. */
int cli_alerts_load(struct cli_alerts *a, const char *cmd);

#endif
