/* cli/cli_util: what the sub-commands share (cli.h) — the one error line, option parsing with
 * getopt_long and its exit codes, opening the store and resolving a run reference with their
 * messages. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cli_error(int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("gpuscope: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return code;
}

int cli_parse_opts_short(int argc, char **argv, const char *shortopts, const struct option *longopts, const char *usage,
                         int (*on_opt)(int opt, const char *arg, void *user), void *user) {
  char optstring[32];
  int in_order = shortopts[0] == '+';
  snprintf(optstring, sizeof optstring, "%s:h%s", in_order ? "+" : "", shortopts + in_order);
  int c;
  /* 0, not 1: glibc then re-initialises getopt fully (the '+' ordering and its place inside a group
   * of short options), so a second parse in one process (top -- CMD runs cmd_run; the unit tests)
   * starts clean. */
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
    switch (c) {
    case 'h':
      printf("%s", usage);
      return GS_EXIT_OK;
    case ':':
      return cli_error(GS_EXIT_USAGE, "%s: option '%s' needs a value", argv[0], argv[optind - 1]);
    case '?':
      if (!strcmp(argv[optind - 1], "--help")) { /* --help whether or not longopts lists it */
        printf("%s", usage);
        return GS_EXIT_OK;
      }
      return cli_error(GS_EXIT_USAGE, "%s: unknown option '%s' (see 'gpuscope %s --help')", argv[0], argv[optind - 1],
                       argv[0]);
    default: {
      int rc = on_opt(c, optarg, user);
      if (rc >= 0)
        return rc;
    }
    }
  }
  return -1;
}

int cli_parse_opts(int argc, char **argv, const struct option *longopts, const char *usage,
                   int (*on_opt)(int opt, const char *arg, void *user), void *user) {
  return cli_parse_opts_short(argc, argv, "", longopts, usage, on_opt, user);
}

struct store *cli_open_store_mode(const char *url, enum store_mode mode) {
  char def[1200];
  if (!url)
    url = store_default_url(def, sizeof def);
  struct store *st = store_open_mode(url, mode);
  if (!st)
    cli_error(GS_EXIT_STORE, "%s", gs_last_error());
  return st;
}

struct store *cli_open_store(const char *url) {
  return cli_open_store_mode(url, STORE_READ);
}

int cli_get_run(struct store *st, const char *ref, struct store_run *run) {
  int rc = st->run_get(st, ref, run);
  if (rc == GS_OK)
    return 0;
  return cli_error(rc == GS_ENOENT || rc == GS_EAMBIG ? GS_EXIT_USAGE : GS_EXIT_FAIL, "%s", gs_last_error());
}

int cli_open_run(const char *url, const char *ref, struct store **st, struct store_run *run) {
  *st = cli_open_store(url);
  if (!*st)
    return GS_EXIT_STORE;
  int rc = cli_get_run(*st, ref, run);
  if (rc) {
    (*st)->close(*st);
    *st = NULL;
  }
  return rc;
}

int cli_alert_opt(struct cli_alerts *a, int opt, const char *arg) {
  static const char *const KEYS[] = {"rule", "webhook", "slack", "command", "every"};
  if (opt == CLI_OPT_ALERT_CONFIG) {
    a->file = arg;
    return -1;
  }
  if (opt < CLI_OPT_ALERT || opt > CLI_OPT_ALERT_SET)
    return -2;
  if (a->n >= CLI_ALERT_MAX_FLAGS)
    return cli_error(GS_EXIT_USAGE, "at most %d alert options", CLI_ALERT_MAX_FLAGS);
  const char *key = opt == CLI_OPT_ALERT_SET ? NULL : KEYS[opt - CLI_OPT_ALERT];
  a->flag[a->n][0] = key;
  a->flag[a->n++][1] = arg;
  return -1;
}

int cli_alerts_load(struct cli_alerts *a, const char *cmd) {
  char path[1200], err[1400];
  alert_config_init(&a->c);
  const char *file = a->file ? a->file : alert_config_default_path(path, sizeof path);
  if (file && strcmp(file, "none")) {
    int rc = alert_config_load(&a->c, file, err, sizeof err);
    if (rc == 1 && a->file)
      return cli_error(GS_EXIT_USAGE, "%s: --alert-config %s: no such file", cmd, a->file);
    if (rc < 0)
      return cli_error(GS_EXIT_USAGE, "%s", err);
  }
  for (int i = 0; i < a->n; i++) {
    char key[32];
    const char *val = a->flag[i][1];
    if (!a->flag[i][0]) { /* --alert-set KEY=VALUE */
      const char *eq = strchr(val, '=');
      if (!eq || eq == val || (size_t)(eq - val) >= sizeof key)
        return cli_error(GS_EXIT_USAGE, "%s: --alert-set wants KEY=VALUE, not '%s'", cmd, val);
      snprintf(key, sizeof key, "%.*s", (int)(eq - val), val);
      val = eq + 1;
    } else {
      snprintf(key, sizeof key, "%s", a->flag[i][0]);
    }
    if (alert_config_set(&a->c, key, val, err, sizeof err))
      return cli_error(GS_EXIT_USAGE, "%s: %s", cmd, err);
  }
  if (alert_config_default_rules(&a->c))
    fprintf(stderr, "gpuscope: %s: alerts have a destination but no rule (--alert): alerting on %s\n", cmd,
            ALERT_DEFAULT_RULES);
  return -1;
}

int cli_parse_log_max(const char *cmd, const char *arg, int64_t *out) {
  char *end;
  errno = 0;
  double v = strtod(arg, &end), k = 1;
  if (*end == 'k' || *end == 'K')
    k = 1024, end++;
  else if (*end == 'm' || *end == 'M')
    k = 1024.0 * 1024, end++;
  else if (*end == 'g' || *end == 'G')
    k = 1024.0 * 1024 * 1024, end++;
  if (*end == 'i' && k > 1)
    end++;
  if ((*end == 'B' || *end == 'b') && k > 1)
    end++;
  if (end == arg || *end || errno || !(v * k >= 0) || v * k > 1e12 || (v * k > 0 && v * k < 65536))
    return cli_error(GS_EXIT_USAGE,
                     "%s: --log-max wants bytes: 0 (keep none) or at least 64K, up to 1000G (e.g. 8M), got '%s'", cmd,
                     arg);
  *out = v * k == 0 ? -1 : (int64_t)(v * k);
  return 0;
}
