/* cli/cmd_read: the read-back commands — `runs`, `show` and `metrics`. They share option parsing
 * (--store, --json, --csv) and print what the store holds, without interpretation. */
#include <fnmatch.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "collect/collect.h"
#include "report/report.h"
#include "store/store.h"

struct read_opts {
  const char *store, *metric, *run, *group;
  struct cli_search search; /* runs only */
  int json, csv, events, notes, params, catalog;
  int64_t from, to;
};

static int read_opt(int c, const char *arg, void *user) {
  struct read_opts *o = user;
  switch (c) {
  case 's':
    o->store = arg;
    break;
  case 'j':
    o->json = 1;
    break;
  case 'c':
    o->csv = 1;
    break;
  case 'm':
    o->metric = arg;
    break;
  case 'f':
  case 't':
    if (gs_parse_duration(arg, c == 'f' ? &o->from : &o->to))
      return cli_error(GS_EXIT_USAGE, "--%s: %s (a time since the run's start)", c == 'f' ? "from" : "to",
                       gs_last_error());
    break;
  case 'e':
    o->events = 1;
    break;
  case 'N':
    o->notes = 1;
    break;
  case 'p':
    o->params = 1;
    break;
  case 'C':
    o->catalog = 1;
    break;
  case 'g':
    o->group = arg;
    break;
  case 'w':
    o->search.where = arg;
    break;
  case 'S':
    o->search.since = arg;
    break;
  case 'o':
    o->search.sort = arg;
    break;
  case 'L':
    o->search.columns = arg;
    break;
  }
  return -1;
}

/* Parses the options every read-back command shares; returns -1 to go on, else an exit code. */
static int parse_read_opts(int argc, char **argv, struct read_opts *o, const char *usage, int want_run) {
  static const struct option longopts[] = {{"store", required_argument, 0, 's'},
                                           {"json", no_argument, 0, 'j'},
                                           {"csv", no_argument, 0, 'c'},
                                           {"metric", required_argument, 0, 'm'},
                                           {"from", required_argument, 0, 'f'},
                                           {"to", required_argument, 0, 't'},
                                           {"events", no_argument, 0, 'e'},
                                           {"notes", no_argument, 0, 'N'},
                                           {"params", no_argument, 0, 'p'},
                                           {"catalog", no_argument, 0, 'C'},
                                           {"group", required_argument, 0, 'g'},
                                           {"where", required_argument, 0, 'w'},
                                           {"since", required_argument, 0, 'S'},
                                           {"sort", required_argument, 0, 'o'},
                                           {"columns", required_argument, 0, 'L'},
                                           {"help", no_argument, 0, 'h'},
                                           {0, 0, 0, 0}};
  memset(o, 0, sizeof *o);
  o->from = INT64_MIN;
  o->to = INT64_MAX;
  int rc = cli_parse_opts(argc, argv, longopts, usage, read_opt, o);
  if (rc >= 0)
    return rc;
  if (o->json && o->csv)
    return cli_error(GS_EXIT_USAGE, "%s: --json and --csv exclude each other", argv[0]);
  if (want_run && o->group)
    return cli_error(GS_EXIT_USAGE, "%s: --group is an option of 'gpuscope runs'", argv[0]);
  const struct cli_search *q = &o->search;
  if (want_run && (q->where || q->since || q->sort || q->columns))
    return cli_error(GS_EXIT_USAGE, "%s: --where, --since, --sort and --columns are options of 'gpuscope runs'",
                     argv[0]);
  if (want_run && !o->catalog) { /* --catalog lists what gpuscope collects, in no run */
    if (optind >= argc)
      return cli_error(GS_EXIT_USAGE, "%s: which run? (an id, a unique id prefix, a name, or 'last')", argv[0]);
    o->run = argv[optind++];
  }
  if (optind < argc)
    return cli_error(GS_EXIT_USAGE, "%s: unexpected argument '%s'", argv[0], argv[optind]);
  return -1;
}

/* Reports the store's last error, closes it, and returns 1: the store opened, so a failed read is an
 * unexpected failure (README's table keeps 3 for a store that cannot be opened). */
static int close_fail(struct store *st) {
  int rc = cli_error(GS_EXIT_FAIL, "%s", gs_last_error());
  st->close(st);
  return rc;
}

/* Prints `, "key": ` and value as a JSON string: one field of an object already opened. */
static void json_field(const char *key, const char *value) {
  printf(", \"%s\": ", key);
  gs_json_str(stdout, value);
}

/* Opens a series' JSON object in a list (first: no comma before it) with its source, name, labels
 * and unit; the caller adds the rest and closes it. */
static void json_series_open(const struct store_series *s, int first) {
  printf("%s\n {\"source\": ", first ? "" : ",");
  gs_json_str(stdout, s->source);
  json_field("name", s->name);
  json_field("labels", s->labels);
  json_field("unit", s->unit);
}

static void fmt_time(int64_t wall_ns, char *buf, size_t n) {
  time_t t = (time_t)(wall_ns / GS_NS_PER_S);
  struct tm tm;
  localtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
}

/* The runs as `runs --json` prints them. */
static void print_runs_json(const struct store_run *runs, size_t n) {
  printf("[");
  for (size_t i = 0; i < n; i++) {
    const struct store_run *r = &runs[i];
    printf("%s\n {\"id\": ", i ? "," : "");
    gs_json_str(stdout, r->id);
    json_field("name", r->name);
    json_field("status", r->status);
    printf(", \"start_wall_ns\": %lld, \"duration_s\": ", (long long)r->start_wall_ns);
    gs_json_num(stdout, r->end_wall_ns ? (double)(r->end_wall_ns - r->start_wall_ns) / GS_NS_PER_S : NAN);
    printf(", \"exit_code\": ");
    if (r->exit_code >= 0)
      printf("%d", r->exit_code);
    else
      printf("null");
    json_field("command", r->command);
    json_field("host", r->host);
    json_field("group", r->group);
    json_field("tags", r->tags);
    printf("}");
  }
  printf("%s]\n", n ? "\n" : "");
}

/* The runs that --where / --since / --sort select, in *runs; with --columns, printed here (*done
 * set). Returns -1 to go on, else the exit code. */
static int search_runs(struct store *st, const struct read_opts *o, struct store_run **runs, size_t *n, int *done) {
  struct report_row *rows = NULL;
  size_t nr = 0;
  int rc = cli_runs_search(st, &o->search, &rows, &nr);
  if (rc)
    return rc;
  if (o->search.columns) {
    rc = cli_runs_columns(rows, nr, o->search.columns, o->json, o->csv);
    *done = 1;
  } else if ((*runs = calloc(nr ? nr : 1, sizeof **runs))) {
    for (size_t i = 0; i < nr; i++)
      (*runs)[i] = rows[i].run;
    *n = nr;
    rc = -1;
  } else {
    rc = cli_error(GS_EXIT_FAIL, "out of memory");
  }
  report_rows_free(rows, nr);
  return rc;
}

int cmd_runs(int argc, char **argv) {
  struct read_opts o;
  int rc = parse_read_opts(argc, argv, &o,
                           "usage: gpuscope runs [--group NAME] [--where EXPR] [--since AGE] [--sort [-]COLUMN]\n"
                           "                     [--columns A,B,...] [--json|--csv] [--store URL]\n\n"
                           "Lists the runs, newest first (--group: the runs of one group, such as the\n"
                           "nodes of one distributed job). --where keeps the runs an expression matches:\n"
                           "  'param.batch_size >= 64 and tag.team = vision and gpu.name ~ A100'\n"
                           "(= != < <= > >= ~, and, or, not, parentheses; a missing value matches nothing);\n"
                           "--since 7d the runs started since; --sort -samples_per_s the highest first;\n"
                           "--columns name,param.batch_size,samples_per_s,top_finding what to print.\n"
                           "The columns and the grammar: docs/runs.md.\n",
                           0);
  if (rc >= 0)
    return rc;
  struct store *st = cli_open_store(o.store);
  if (!st)
    return GS_EXIT_STORE;
  struct store_run *runs = NULL;
  size_t n = 0;
  const struct cli_search *q = &o.search;
  if (q->where || q->since || q->sort || q->columns) {
    int done = 0;
    if ((rc = search_runs(st, &o, &runs, &n, &done)) >= 0 || done) {
      st->close(st);
      return rc < 0 ? GS_EXIT_OK : rc;
    }
  } else if (st->runs_list(st, &runs, &n))
    return close_fail(st);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++) /* --group NAME: that group's runs only */
    if (!o.group || !strcmp(runs[i].group, o.group))
      runs[kept++] = runs[i];
  n = kept;
  if (o.json) {
    print_runs_json(runs, n);
  } else {
    printf("%-26s  %-16s  %-8s  %-19s  %10s  %s\n", "ID", "NAME", "STATUS", "START", "DURATION", "COMMAND");
    for (size_t i = 0; i < n; i++) {
      struct store_run *r = &runs[i];
      char start[32], dur[32] = "-";
      fmt_time(r->start_wall_ns, start, sizeof start);
      if (r->end_wall_ns)
        gs_fmt_duration(r->end_wall_ns - r->start_wall_ns, dur, sizeof dur);
      char id[32], name[17], status[16], cmd[61];
      gs_term_copy(id, sizeof id, r->id);
      gs_term_copy(name, sizeof name, r->name[0] ? r->name : "-");
      gs_term_copy(status, sizeof status, r->status);
      gs_term_copy(cmd, sizeof cmd, r->command);
      printf("%-26s  %-16s  %-8s  %-19s  %10s  %s\n", id, name, status, start, dur, cmd);
    }
    if (o.group) { /* the group as one experiment: how many runs, on how many hosts */
      size_t hosts = 0;
      for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < i && strcmp(runs[j].host, runs[i].host))
          j++;
        hosts += j == i;
      }
      printf("group %s: %zu run%s on %zu host%s\n", o.group, n, n == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s");
    }
  }
  free(runs);
  st->close(st);
  return GS_EXIT_OK;
}

static int series_matches(const struct store_series *s, const char *glob) {
  if (!glob)
    return 1;
  char full[512];
  snprintf(full, sizeof full, "%s{%s}", s->name, s->labels);
  return !fnmatch(glob, s->name, 0) || !fnmatch(glob, full, 0);
}

struct show_ctx {
  const struct store_series *s;
  struct store_steps steps; /* the steps that came with a client metric's values (none: empty) */
  FILE *json_steps;         /* JSON: the points' steps, written beside them, printed after them */
  int json, csv, first;
  char source[32], name[160], labels[256], unit[16]; /* the series' names, safe for a terminal */
};

/* The series' source, name, labels and unit as four CSV fields (no newline). */
static void csv_series(const struct store_series *s) {
  gs_csv_field(stdout, s->source);
  putchar(',');
  gs_csv_field(stdout, s->name);
  putchar(',');
  gs_csv_field(stdout, s->labels);
  putchar(',');
  gs_csv_field(stdout, s->unit);
}

/* v with the fewest digits that read back as v itself (15, else 17), so what `show` prints is what
 * the job logged; not finite: null in JSON, nothing in CSV. */
static void print_exact(double v, int json) {
  if (!isfinite(v)) {
    if (json)
      fputs("null", stdout);
    return;
  }
  char buf[40];
  snprintf(buf, sizeof buf, "%.15g", v);
  if (strtod(buf, NULL) != v)
    snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, stdout);
}

static int print_sample(void *u, int64_t t, double v) {
  struct show_ctx *c = u;
  int64_t step = store_steps_at(&c->steps, t);
  if (c->csv) {
    csv_series(c->s);
    printf(",%.6f,", (double)t / GS_NS_PER_S);
    print_exact(v, 0);
    putchar(',');
    if (step >= 0)
      printf("%lld", (long long)step);
    putchar('\n');
  } else if (c->json) {
    printf("%s[%.6f, ", c->first ? "" : ", ", (double)t / GS_NS_PER_S);
    print_exact(v, 1);
    printf("]");
    if (c->json_steps) {
      if (step >= 0)
        fprintf(c->json_steps, "%s%lld", c->first ? "" : ", ", (long long)step);
      else
        fprintf(c->json_steps, "%snull", c->first ? "" : ", ");
    }
  } else {
    printf("%10.3f  %-10s %-32s %-24s %.6g %s", (double)t / GS_NS_PER_S, c->source, c->name, c->labels, v, c->unit);
    if (step >= 0)
      printf("%sstep %lld", c->unit[0] ? "  " : " ", (long long)step);
    putchar('\n');
  }
  c->first = 0;
  return 0;
}

static int show_events(struct store *st, const struct store_run *run, const struct read_opts *o) {
  struct store_event *ev = NULL;
  size_t n = 0;
  if (st->events_read(st, run->id, &ev, &n))
    return cli_error(GS_EXIT_FAIL, "%s", gs_last_error());
  if (o->csv)
    printf("t_s,kind,name,value,labels,text\n");
  if (o->json)
    printf("[");
  int first = 1;
  for (size_t i = 0; i < n; i++) {
    struct store_event *e = &ev[i];
    if (e->t < o->from || e->t > o->to ||
        (o->metric && fnmatch(o->metric, e->kind, 0) && fnmatch(o->metric, e->name, 0)))
      continue;
    if (o->csv) {
      printf("%.6f,", (double)e->t / GS_NS_PER_S);
      gs_csv_field(stdout, e->kind);
      putchar(',');
      gs_csv_field(stdout, e->name);
      putchar(',');
      if (isfinite(e->value))
        printf("%.15g", e->value);
      putchar(',');
      gs_csv_field(stdout, e->labels);
      putchar(',');
      gs_csv_field(stdout, e->text);
      putchar('\n');
    } else if (o->json) {
      printf("%s\n {\"t_s\": %.6f, \"kind\": ", first ? "" : ",", (double)e->t / GS_NS_PER_S);
      gs_json_str(stdout, e->kind);
      json_field("name", e->name);
      printf(", \"value\": ");
      gs_json_num(stdout, e->value);
      json_field("labels", e->labels);
      json_field("text", e->text);
      printf("}");
    } else {
      char kind[32], name[128], labels[256];
      printf("%10.3f  %-16s %-24s %-20s ", (double)e->t / GS_NS_PER_S, gs_term_copy(kind, sizeof kind, e->kind),
             gs_term_copy(name, sizeof name, e->name), gs_term_copy(labels, sizeof labels, e->labels));
      gs_term_text(stdout, e->text, 0);
      putchar('\n');
    }
    first = 0;
  }
  if (o->json)
    printf("%s]\n", first ? "" : "\n");
  free(ev);
  return GS_EXIT_OK;
}

static int show_params(struct store *st, const struct store_run *run, const struct read_opts *o) {
  struct gs_kv *kv = NULL;
  size_t n = 0;
  if (st->params_read(st, run->id, &kv, &n))
    return cli_error(GS_EXIT_FAIL, "%s", gs_last_error());
  if (o->json) {
    printf("{");
    for (size_t i = 0; i < n; i++) {
      printf("%s\n ", i ? "," : "");
      gs_json_str(stdout, kv[i].key);
      printf(": ");
      gs_json_str(stdout, kv[i].value);
    }
    printf("%s}\n", n ? "\n" : "");
  } else {
    if (o->csv)
      printf("key,value\n");
    for (size_t i = 0; i < n; i++) {
      if (o->csv) {
        gs_csv_field(stdout, kv[i].key);
        putchar(',');
        gs_csv_field(stdout, kv[i].value);
      } else {
        char key[160];
        printf("%-32s ", gs_term_copy(key, sizeof key, kv[i].key));
        gs_term_text(stdout, kv[i].value, 0);
      }
      putchar('\n');
    }
  }
  store_kv_free(kv, n);
  return GS_EXIT_OK;
}

static int show_notes(struct store *st, const struct store_run *run, const struct read_opts *o) {
  char **notes = NULL;
  size_t n = 0;
  if (st->notes_read(st, run->id, &notes, &n))
    return cli_error(GS_EXIT_FAIL, "%s", gs_last_error());
  if (o->json) {
    printf("[");
    for (size_t i = 0; i < n; i++) {
      printf("%s", i ? ", " : "");
      gs_json_str(stdout, notes[i]);
    }
    printf("]\n");
  } else {
    for (size_t i = 0; i < n; i++) {
      gs_term_text(stdout, notes[i], 0);
      putchar('\n');
    }
  }
  store_notes_free(notes, n);
  return GS_EXIT_OK;
}

/* Prints one series' points (JSON: one member of "series", first: no comma before it), each with
 * the step that came with it, if any. Returns 0 or the exit code of a failed read. */
static int show_series(struct store *st, const struct store_series *all, size_t n, const struct store_series *s,
                       const struct read_opts *o, int first) {
  struct show_ctx c = {.s = s, .json = o->json, .csv = o->csv, .first = 1};
  if (store_steps_load(st, all, n, s, o->from, o->to, &c.steps))
    return cli_error(GS_EXIT_FAIL, "%s", gs_last_error());
  gs_term_copy(c.source, sizeof c.source, s->source);
  gs_term_copy(c.name, sizeof c.name, s->name);
  gs_term_copy(c.labels, sizeof c.labels, s->labels);
  gs_term_copy(c.unit, sizeof c.unit, s->unit);
  char *steps = NULL;
  size_t steps_len = 0;
  if (o->json) {
    json_series_open(s, first);
    printf(", \"points\": [");
    if (c.steps.p.n)
      c.json_steps = open_memstream(&steps, &steps_len);
  }
  int rc = 0;
  if (st->samples_read(st, s->id, o->from, o->to, print_sample, &c))
    rc = cli_error(GS_EXIT_FAIL, "%s", gs_last_error());
  if (c.json_steps && !fclose(c.json_steps) && steps)
    printf("], \"steps\": [%s", steps);
  if (o->json)
    printf("]}");
  free(steps);
  store_steps_done(&c.steps);
  return rc;
}

int cmd_show(int argc, char **argv) {
  struct read_opts o;
  int rc = parse_read_opts(argc, argv, &o,
                           "usage: gpuscope show RUN [--metric GLOB] [--csv|--json] [--from T --to T]\n"
                           "                         [--events | --params | --notes] [--store URL]\n\n"
                           "Prints a run's raw samples (t_s = seconds since the run's start), a job's metric\n"
                           "with the step it was logged at (CSV: the step column). GLOB matches a\n"
                           "series name (gpu.util_pct, 'host.cpu.*') or name{labels} ('*{gpu=0}').\n"
                           "RUN is an id, a unique id prefix, a name, or 'last'.\n",
                           1);
  if (rc >= 0)
    return rc;
  struct store *st;
  struct store_run run;
  if ((rc = cli_open_run(o.store, o.run, &st, &run)))
    return rc;
  if (o.events || o.params || o.notes) {
    rc = o.events ? show_events(st, &run, &o) : o.params ? show_params(st, &run, &o) : show_notes(st, &run, &o);
    st->close(st);
    return rc;
  }
  struct store_series *series = NULL;
  size_t n = 0;
  if (st->series_list(st, run.id, &series, &n))
    return close_fail(st);
  size_t shown = 0;
  if (o.csv)
    printf("source,name,labels,unit,t_s,value,step\n");
  if (o.json) {
    printf("{\"run\": ");
    gs_json_str(stdout, run.id);
    printf(", \"series\": [");
  }
  for (size_t i = 0; i < n && !rc; i++) {
    /* a step is never a value: the steps that came with a metric are shown with its points */
    if (!series_matches(&series[i], o.metric) || store_series_is_steps(&series[i]))
      continue;
    rc = show_series(st, series, n, &series[i], &o, !shown);
    shown++;
  }
  if (o.json)
    printf("%s]}\n", shown ? "\n" : "");
  if (!rc && o.metric && !shown) {
    char glob[256];
    fprintf(stderr, "gpuscope: no series of run %s matches '%s' (see 'gpuscope metrics %s')\n", run.id,
            gs_term_copy(glob, sizeof glob, o.metric), run.id);
  }
  free(series);
  st->close(st);
  return rc;
}

/* Every metric each collector can emit, from their static descriptions. */
static int print_catalog(const struct read_opts *o) {
  if (o->json)
    printf("[");
  int first = 1;
  for (size_t i = 0; collect_registry[i]; i++) {
    const struct collector *c = collect_registry[i];
    for (size_t k = 0; k < c->n_metrics; k++) {
      const struct gs_metric_desc *d = &c->metrics[k];
      if (o->metric && fnmatch(o->metric, d->name, 0))
        continue;
      if (o->json) {
        printf("%s\n {\"source\": ", first ? "" : ",");
        gs_json_str(stdout, c->name);
        json_field("name", d->name);
        json_field("unit", d->unit);
        printf(", \"kind\": \"%s\", \"help\": ", gs_kind_name(d->kind));
        gs_json_str(stdout, d->help);
        printf("}");
      } else {
        printf("%-9s %-36s %-6s %s\n", c->name, d->name, d->unit, d->help);
      }
      first = 0;
    }
  }
  if (o->json)
    printf("%s]\n", first ? "" : "\n");
  return GS_EXIT_OK;
}

int cmd_metrics(int argc, char **argv) {
  struct read_opts o;
  int rc = parse_read_opts(argc, argv, &o,
                           "usage: gpuscope metrics RUN [--metric GLOB] [--json] [--store URL]\n"
                           "       gpuscope metrics --catalog [--json]\n\n"
                           "Lists a run's series with unit, kind and number of samples; --catalog lists every\n"
                           "metric gpuscope can collect.\n",
                           1);
  if (rc >= 0)
    return rc;
  if (o.catalog)
    return print_catalog(&o);
  struct store *st;
  struct store_run run;
  if ((rc = cli_open_run(o.store, o.run, &st, &run)))
    return rc;
  struct store_series *series = NULL;
  size_t n = 0;
  if (st->series_list(st, run.id, &series, &n))
    return close_fail(st);
  if (o.json)
    printf("[");
  else
    printf("%-10s %-36s %-28s %-6s %-8s %8s\n", "SOURCE", "NAME", "LABELS", "UNIT", "KIND", "SAMPLES");
  size_t shown = 0;
  for (size_t i = 0; i < n; i++) {
    struct store_series *s = &series[i];
    if (!series_matches(s, o.metric))
      continue;
    if (o.json) {
      json_series_open(s, !shown);
      printf(", \"kind\": \"%s\", \"count\": %lld}", gs_kind_name(s->kind), (long long)s->count);
    } else {
      char src[32], name[160], labels[256], unit[16];
      printf("%-10s %-36s %-28s %-6s %-8s %8lld\n", gs_term_copy(src, sizeof src, s->source),
             gs_term_copy(name, sizeof name, s->name), gs_term_copy(labels, sizeof labels, s->labels),
             gs_term_copy(unit, sizeof unit, s->unit), gs_kind_name(s->kind), (long long)s->count);
    }
    shown++;
  }
  if (o.json)
    printf("%s]\n", shown ? "\n" : "");
  free(series);
  st->close(st);
  return GS_EXIT_OK;
}
