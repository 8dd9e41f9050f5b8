/* serve/page: the run page or the compare page as one self-contained HTML file — the web front end's
 * assets inlined and the API answers it needs embedded as JSON (window.GS_EMBED), so the file opens
 * from file:// with no network and no server: one front end, two deliveries. The embedded series
 * are those the page draws, downsampled to PAGE_POINTS (min/max only for the utilisation band), so
 * an hour-long run stays near a megabyte. */
#include <stdlib.h>
#include <string.h>

#include "serve/serve_int.h"

enum { PAGE_POINTS = 500, PAGE_PROCS = 12 };

struct kv_args {
  const char *keys[4], *vals[4];
};

static const char *kv_get(void *user, const char *key) {
  struct kv_args *a = user;
  for (int i = 0; i < 4 && a->keys[i]; i++)
    if (!strcmp(a->keys[i], key))
      return a->vals[i];
  return NULL;
}

/* The answer of one API path into out, or its error. */
static int api_into(struct serve *s, const char *path, struct kv_args *args, FILE *out) {
  struct serve_reply r;
  if (serve_reply_begin(&r))
    return GS_ENOMEM;
  struct serve_args a = {kv_get, args};
  serve_api(s, path, &a, &r);
  serve_reply_end(&r);
  int rc = GS_OK;
  if (r.stream) { /* a streamed series answer: read it whole (no other thread holds the lock here) */
    char buf[16384];
    ssize_t n;
    while ((n = serve_series_stream_read(r.stream, 0, buf, sizeof buf)) > 0)
      fwrite(buf, 1, (size_t)n, out);
    serve_series_stream_free(r.stream);
    if (n == MHD_CONTENT_READER_END_WITH_ERROR)
      rc = gs_fail(GS_EIO, "the page's series failed: %s", gs_last_error());
  } else if (r.status != 200) {
    /* the body is {"error": "..."}: give its text as the message */
    const char *m = r.body ? strstr(r.body, "\"error\":\"") : NULL;
    rc = gs_fail(r.status == 404   ? GS_ENOENT
                 : r.status == 409 ? GS_EAMBIG
                                   : GS_EIO,
                 "%.*s", m ? (int)strcspn(m + 9, "\"") : 20, m ? m + 9 : "the page's data failed");
  } else {
    while (r.len && (r.body[r.len - 1] == '\n'))
      r.len--;
    fwrite(r.body, 1, r.len, out);
  }
  free(r.body);
  return rc;
}

static int page_series(const struct runview *v, const struct store_series *s) {
  static const char *const gpu[] = {"gpu.util_pct",          "gpu.mem_util_pct",    "gpu.sm_active_pct",
                                    "gpu.tensor_active_pct", "gpu.dram_active_pct", "gpu.mem_used_bytes",
                                    "gpu.power_w",           "gpu.power_limit_w",   "gpu.temp_c",
                                    "gpu.sm_clock_mhz",      "gpu.pcie_rx_bytes_s", "gpu.pcie_tx_bytes_s"};
  if (s->count <= 0)
    return 0;
  for (size_t i = 0; i < sizeof gpu / sizeof *gpu; i++)
    if (!strcmp(s->name, gpu[i]))
      return 1;
  if (!strcmp(s->name, "host.cpu.busy_pct")) { /* cpu=N, or in a group cpu=N,host=H */
    if (strncmp(s->labels, "cpu=", 4))
      return 0;
    size_t n = strspn(s->labels + 4, "0123456789");
    return n && (!s->labels[4 + n] || (v->group && !strncmp(s->labels + 4 + n, ",host=", 6)));
  }
  if (!strcmp(s->name, "proc.cpu_pct") || !strcmp(s->name, "proc.rss_bytes"))
    return 2;
  return !strcmp(s->source, "client") && runview_labels_match(v, s->labels, ""); /* a group: every node's */
}

/* The series a run page draws: {"ID": [S, ...]} member for one run. */
static int run_series(struct serve *srv, const char *id, FILE *out, int compare_only) {
  struct runview v;
  struct store *group;
  int rc = serve_view_load(srv, id, &v, &group);
  if (rc) {
    runview_done(&v);
    if (group)
      group->close(group);
    return rc;
  }
  gs_json_str(out, v.run.id);
  fputs(":[", out);
  int k = 0, ncpu = 0, nrss = 0, util_gpu = -1;
  /* the compare page overlays the util of each run's lowest-numbered GPU that has one (a MIG GPU 0
   * has none) */
  for (size_t i = 0; i < v.nseries; i++) {
    int g = runview_gpu_label(v.series[i].labels);
    if (!strcmp(v.series[i].name, "gpu.util_pct") && v.series[i].count > 0 && g >= 0 && (util_gpu < 0 || g < util_gpu))
      util_gpu = g;
  }
  for (size_t i = 0; i < v.nseries && !rc; i++) {
    const struct store_series *s = &v.series[i];
    int want = page_series(&v, s);
    if (compare_only)
      want = (!strcmp(s->name, "gpu.util_pct") && util_gpu >= 0 && runview_gpu_label(s->labels) == util_gpu) ||
             ((!strcmp(s->name, "step.total_s") || !strcmp(s->name, "step.n")) && !*s->labels &&
              !strcmp(s->source, "client"));
    if (want == 2)
      want = !strcmp(s->name, "proc.cpu_pct") ? ncpu++ < PAGE_PROCS : nrss++ < PAGE_PROCS;
    if (!want)
      continue;
    if (k++)
      fputc(',', out);
    rc = serve_series_json(out, &v, s, INT64_MIN, INT64_MAX, PAGE_POINTS,
                           !compare_only && !strcmp(s->name, "gpu.util_pct"));
  }
  fputc(']', out);
  runview_done(&v);
  if (group)
    group->close(group);
  return rc;
}

/* Writes text into a <script> or <style> element: "</" (a closing tag) and "<!--" cannot occur. */
static void put_raw(FILE *out, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (p[i] == '<' && i + 1 < n && (p[i + 1] == '/' || p[i + 1] == '!')) {
      fputs("<\\", out);
      continue;
    }
    fputc(p[i], out);
  }
}

static const struct serve_asset *asset(const char *path) {
  for (size_t i = 0; i < serve_nassets; i++)
    if (!strcmp(serve_assets[i].path, path))
      return &serve_assets[i];
  return NULL;
}

/* The page's window.GS_EMBED object: the answers the front end would fetch for these runs. */
#define SERVE_PAGE_LOG_TAIL "65536"
static int embed_json(struct serve *s, const struct store_run *runs, size_t n, const char *list, FILE *j) {
  int rc = GS_OK;
  fprintf(j, "{\"mode\":\"%s\",\"hash\":", n == 1 ? "run" : "compare");
  char hash[1024];
  snprintf(hash, sizeof hash, "#/%s/%s", n == 1 ? "run" : "compare", list);
  gs_json_str(j, hash);
  fputs(",\"runs\":{", j);
  for (size_t i = 0; i < n && !rc && n == 1; i++) {
    char path[64];
    snprintf(path, sizeof path, "runs/%s", runs[i].id);
    gs_json_str(j, runs[i].id);
    fputc(':', j);
    struct kv_args none = {{0}, {0}};
    rc = api_into(s, path, &none, j);
  }
  fputs("},\"log\":{", j); /* a run's page: the last SERVE_PAGE_LOG_TAIL bytes of its output */
  for (size_t i = 0; i < n && !rc && n == 1; i++) {
    char path[64];
    snprintf(path, sizeof path, "runs/%s/log", runs[i].id);
    gs_json_str(j, runs[i].id);
    fputc(':', j);
    struct kv_args tail = {{"tail"}, {SERVE_PAGE_LOG_TAIL}};
    if (api_into(s, path, &tail, j)) /* a group (the runs of one job as one) has no output of its own */
      fputs("null", j);
  }
  fputs("},\"series\":{", j);
  for (size_t i = 0; i < n && !rc; i++) {
    if (i)
      fputc(',', j);
    rc = run_series(s, runs[i].id, j, n > 1);
  }
  fputs("},\"compare\":", j);
  if (n > 1 && !rc) {
    struct kv_args args = {{"runs"}, {list}};
    rc = api_into(s, "compare", &args, j);
  } else
    fputs("null", j);
  fputc('}', j);
  return rc;
}

int serve_page_write(FILE *out, struct store *st, char *const *refs, size_t n) {
  const struct serve_asset *app = asset("/assets/app.js"), *css = asset("/assets/app.css"),
                           *up = asset("/assets/uPlot.iife.min.js"), *upcss = asset("/assets/uPlot.min.css");
  if (!app || !css || !up || !upcss)
    return gs_fail(GS_EINVAL, "the web UI was not built into this gpuscope (%s)",
                   *serve_assets_missing ? serve_assets_missing : "assets missing");
  if (!n || n > SERVE_MAX_COMPARE)
    return gs_fail(GS_EINVAL, "a page shows 1 run, or compares 2 to %d", SERVE_MAX_COMPARE);
  struct serve_opts o = {0};
  struct serve s = {.o = &o, .st = st};
  pthread_mutex_init(&s.mu, NULL); /* a streamed answer takes it */
  struct store_run *runs = calloc(n, sizeof *runs);
  char *json = NULL, *list = NULL;
  size_t jlen = 0, llen = 0;
  FILE *j = open_memstream(&json, &jlen), *l = open_memstream(&list, &llen);
  int rc = !runs || !j || !l ? gs_fail(GS_ENOMEM, "out of memory") : GS_OK;
  for (size_t i = 0; i < n && !rc; i++) {
    rc = st->run_get(st, refs[i], &runs[i]);
    if (rc == GS_ENOENT) { /* a group: the runs of one distributed job as one */
      struct store *g = store_group_open(st, refs[i]);
      rc = g ? g->run_get(g, refs[i], &runs[i]) : GS_ENOENT;
      if (g)
        g->close(g);
    }
    fprintf(l, "%s%s", i ? "," : "", runs[i].id);
  }
  if (l) {
    fclose(l);
    l = NULL;
  }
  if (rc)
    goto fail;
  rc = embed_json(&s, runs, n, list, j);
  fclose(j);
  j = NULL;
  if (rc)
    goto fail;
  fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>gpuscope: ",
        out);
  gs_html_text(out, n == 1 ? (runs[0].name[0] ? runs[0].name : runs[0].id) : "compare");
  fputs("</title>\n<style>\n", out);
  put_raw(out, (const char *)upcss->data, upcss->len);
  put_raw(out, (const char *)css->data, css->len);
  fputs("</style>\n</head>\n<body>\n<header><span class=\"brand\">gpuscope</span><nav id=\"crumbs\"></nav>"
        "<span id=\"live\"></span></header>\n<main id=\"app\"><p class=\"muted\">Loading…</p></main>\n"
        "<script>window.GS_EMBED = ",
        out);
  /* JSON has '<' only inside strings, where \u003c means the same: no tag can close the script */
  for (size_t i = 0; i < jlen; i++)
    if (json[i] == '<')
      fputs("\\u003c", out);
    else
      fputc(json[i], out);
  fputs(";</script>\n<script>\n", out);
  put_raw(out, (const char *)up->data, up->len);
  fputs("\n</script>\n<script>\n", out);
  put_raw(out, (const char *)app->data, app->len);
  fputs("\n</script>\n</body>\n</html>\n", out);
  if (ferror(out))
    rc = gs_fail(GS_EIO, "writing the page failed");
fail:
  if (j)
    fclose(j);
  if (l)
    fclose(l);
  free(json);
  free(list);
  free(runs);
  serve_caches_done(&s);
  pthread_mutex_destroy(&s.mu);
  return rc;
}
