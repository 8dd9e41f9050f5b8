/* store/mlflow_import: `gpuscope import mlruns/` — a team's MLflow file store brought in
 * (docs/export.md, "From MLflow"). Every run of every experiment is read and checked first and
 * written as a gpuscope export file into a temporary file; only a whole one is imported, through
 * store_import_check and store_import, so an MLflow run comes in as an export's run does: a run is
 * its id (derived from the MLflow run id, so a second import adds nothing), and a damaged file is
 * one line naming the file and the byte offset, with nothing of the store written. The readers of
 * the files are mlflow_parse.c (pure, fuzzed). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/import_write.h"
#include "store/mlflow_int.h"
#include "store/store_backend.h"

/* What one run's conversion writes: the output, the run's id, its start and the lines so far. */
struct mlx {
  struct imp_out w; /* the output, the run's id, its start and the lines so far */
};

enum { ML_PATH = 4096 };

/* dir/name into out (ML_PATH bytes); -1 when it does not fit (such a path is passed over). */
static int join(char *out, const char *dir, const char *name) {
  int k = snprintf(out, ML_PATH, "%s/%s", dir, name);
  return k < 0 || k >= ML_PATH ? -1 : 0;
}

static int is_dir(const char *path) {
  struct stat st;
  return !stat(path, &st) && S_ISDIR(st.st_mode);
}

static int not_hidden(const struct dirent *d) {
  return d->d_name[0] != '.';
}

/* The whole file at path (at most ML_MAX_FILE bytes) into *buf (malloc'd, NUL-terminated). */
static int read_all(const char *path, char **buf, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return gs_fail(GS_EINVAL, "%s: cannot read it: %s", path, strerror(errno));
  char *b = malloc(ML_MAX_FILE + 1);
  size_t got = b ? fread(b, 1, ML_MAX_FILE + 1, f) : 0;
  int bad = !b || ferror(f) || got > ML_MAX_FILE;
  fclose(f);
  if (bad) {
    free(b);
    return gs_fail(b ? GS_ECORRUPT : GS_ENOMEM, "%s: %s", path, b ? "over 64 MiB, or unreadable" : "out of memory");
  }
  b[got] = 0;
  *buf = b;
  *n = got;
  return 0;
}

static int read_meta(const char *dir, struct ml_meta *m) {
  char path[ML_PATH], err[256];
  if (join(path, dir, "meta.yaml"))
    return gs_fail(GS_EINVAL, "%s: a path too long", dir);
  char *buf;
  size_t n;
  int rc = read_all(path, &buf, &n);
  if (rc)
    return rc;
  if (ml_parse_meta(buf, n, m, err, sizeof err))
    rc = gs_fail(GS_ECORRUPT, "%s %s", path, err);
  free(buf);
  return rc;
}

int store_mlflow_is(const char *path) {
  struct dirent **d;
  int n = is_dir(path) ? scandir(path, &d, not_hidden, alphasort) : -1, found = 0;
  for (int i = 0; i < n; i++) {
    char meta[ML_PATH];
    char sub[ML_PATH];
    found |= !join(sub, path, d[i]->d_name) && !join(meta, sub, "meta.yaml") && !access(meta, R_OK);
    free(d[i]);
  }
  if (n >= 0)
    free(d);
  return found;
}

/* Calls fn for each file under dir, its key the path below dir ("train/loss"), sorted. */
typedef int (*file_fn)(struct mlx *x, const char *path, const char *key, void *user);
static int each_file(struct mlx *x, const char *dir, const char *prefix, file_fn fn, void *user) {
  struct dirent **d;
  int n = scandir(dir, &d, not_hidden, alphasort), rc = 0;
  for (int i = 0; i < n; i++) {
    char path[ML_PATH], key[ML_PATH];
    int k = snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "/" : "", d[i]->d_name);
    if (!rc && (join(path, dir, d[i]->d_name) || k >= (int)sizeof key))
      rc = gs_fail(GS_EINVAL, "%s/%s: a path too long", dir, d[i]->d_name);
    if (!rc)
      rc = is_dir(path) ? each_file(x, path, key, fn, user) : fn(x, path, key, user);
    free(d[i]);
  }
  if (n >= 0)
    free(d);
  return rc;
}

/* A param or tag file: its content is the value (tags go in as tag.KEY). */
static int param_file(struct mlx *x, const char *path, const char *key, void *user) {
  const char *prefix = user;
  char *buf, k[700];
  size_t n;
  int rc = read_all(path, &buf, &n);
  if (rc)
    return rc;
  if (n >= 2 * 1024 * 1024 || strlen(buf) != n) {
    free(buf);
    return gs_fail(GS_ECORRUPT, "%s offset 0: a value over 2 MiB, or with a NUL byte", path);
  }
  snprintf(k, sizeof k, "%s%s", prefix, key);
  if (strlen(k) > 255)
    rc = gs_fail(GS_ECORRUPT, "%s: a key over 255 bytes", path);
  else
    imp_param(&x->w, k, buf);
  if (!rc && !strcmp(k, "tag.mlflow.source.git.commit"))
    imp_param(&x->w, "git.commit", buf);
  free(buf);
  return rc;
}

static void ml_point_of(const void *pts, size_t k, int64_t *wall_ns, int64_t *step, double *v) {
  const struct ml_point *p = (const struct ml_point *)pts + k;
  *wall_ns = p->ts_ms * 1000000, *step = p->step, *v = p->v;
}

static int cmp_point(const void *a, const void *b) {
  const struct ml_point *p = a, *q = b;
  if (p->ts_ms != q->ts_ms) /* by time, then by step: the order MLflow reads them in */
    return p->ts_ms < q->ts_ms ? -1 : 1;
  return p->step < q->step ? -1 : p->step > q->step;
}

/* A metric file: the series source client, and client.step for the points that have a step. */
static int metric_file(struct mlx *x, const char *path, const char *key, void *user) {
  (void)user;
  char *buf, err[256];
  size_t n, np;
  struct ml_point *p;
  int rc = read_all(path, &buf, &n);
  if (rc)
    return rc;
  if (ml_parse_metric(buf, n, &p, &np, err, sizeof err))
    rc = gs_fail(GS_ECORRUPT, "%s %s", path, err);
  free(buf);
  if (rc || !np)
    return rc;
  if (strlen(key) > 159) {
    free(p);
    return gs_fail(GS_ECORRUPT, "%s: a metric name over 159 bytes", path);
  }
  qsort(p, np, sizeof *p, cmp_point);
  imp_series(&x->w, "client", key, "", p, np, ml_point_of, 0);
  size_t k = 0;
  for (size_t i = 0; i < np; i++) /* the points with a step, and the time each had (the same t) */
    if (p[i].step >= 0)
      p[k++] = p[i];
  if (k == np) /* every point has its step: the step series has the value series' times */
    imp_series(&x->w, "client.step", key, "count", p, k, ml_point_of, 1);
  free(p);
  return 0;
}

/* MLflow's status (RUNNING 1, SCHEDULED 2, FINISHED 3, FAILED 4, KILLED 5) as a stored run's, and
 * the exit code it implies (-1: unknown). */
static const char *run_status(const char *ml, int *code) {
  *code = -1; /* the file store writes the number of MLflow's RunStatus, older ones its name */
  if (ml && (!strcmp(ml, "FINISHED") || !strcmp(ml, "3")))
    return *code = 0, "finished";
  if (ml && (!strcmp(ml, "FAILED") || !strcmp(ml, "4")))
    return *code = 1, "failed";
  if (ml && (!strcmp(ml, "KILLED") || !strcmp(ml, "5")))
    return "killed";
  return "crashed"; /* running or scheduled when the store was copied: it never ended there */
}

static int64_t meta_ms(const struct ml_meta *m, const char *key) {
  const char *v = ml_meta_get(m, key);
  char *end;
  long long ms = v ? strtoll(v, &end, 10) : -1;
  return v && *v && !*end && ms >= 0 && ms <= 9000000000000LL ? ms : -1;
}

/* The run line, from the run's meta.yaml; the gpuscope id is "ml" and the MLflow id's first 29. */
static int put_run(struct mlx *x, const char *dir, const struct ml_meta *m) {
  const char *rid = ml_meta_get(m, "run_id") ? ml_meta_get(m, "run_id") : ml_meta_get(m, "run_uuid");
  if (!rid || strlen(rid) < 29 || strspn(rid, "0123456789abcdef") != strlen(rid))
    return gs_fail(GS_ECORRUPT, "%s/meta.yaml: its run_id is not an MLflow run id (32 hex digits)", dir);
  snprintf(x->w.id, sizeof x->w.id, "ml%.29s", rid);
  int64_t start = meta_ms(m, "start_time"), end = meta_ms(m, "end_time");
  if (start < 0)
    return gs_fail(GS_ECORRUPT, "%s/meta.yaml: no start_time", dir);
  x->w.start_ns = start * 1000000;
  x->w.lines = x->w.n_series = 0;
  int code;
  const char *status = run_status(ml_meta_get(m, "status"), &code), *name = ml_meta_get(m, "run_name");
  const char *user = ml_meta_get(m, "user_id"), *cmd = ml_meta_get(m, "source_name");
  fprintf(x->w.out, "{\"type\":\"run\",\"id\":\"%s\",\"name\":", x->w.id);
  gs_json_str(x->w.out, name ? name : "");
  fprintf(x->w.out, ",\"group\":\"\",\"status\":\"%s\",\"command\":", status);
  gs_json_str(x->w.out, cmd ? cmd : "");
  fputs(",\"cwd\":\"\",\"host\":\"\",\"user\":", x->w.out);
  gs_json_str(x->w.out, user ? user : "");
  fprintf(x->w.out, ",\"tags\":\"\",\"start_wall_ns\":%lld,\"end_wall_ns\":%lld,\"interval_ns\":0,\"exit_code\":%d}\n",
          (long long)x->w.start_ns, (long long)(end >= start ? end : start) * 1000000, code);
  x->w.lines = 1;
  return 0;
}

/* One run folder: its record, where it came from, params, tags, metrics, a note, its end. */
static int put_mlflow_run(struct mlx *x, const char *dir, const struct ml_meta *exp) {
  struct ml_meta *m = malloc(sizeof *m);
  if (!m)
    return gs_fail(GS_ENOMEM, "out of memory");
  int rc = read_meta(dir, m);
  const char *stage = rc ? NULL : ml_meta_get(m, "lifecycle_stage");
  if (rc || (stage && !strcmp(stage, "deleted")) || (rc = put_run(x, dir, m))) {
    free(m);
    return rc < 0 ? rc : 1; /* 1: a deleted run, passed over */
  }
  const char *ename = ml_meta_get(exp, "name"), *eid = ml_meta_get(exp, "experiment_id");
  imp_param(&x->w, "import.format", "mlflow");
  imp_param(&x->w, "import.path", dir);
  imp_param(&x->w, "mlflow.run_id", ml_meta_get(m, "run_id") ? ml_meta_get(m, "run_id") : ml_meta_get(m, "run_uuid"));
  imp_param(&x->w, "mlflow.experiment", ename ? ename : "");
  imp_param(&x->w, "mlflow.experiment_id", eid ? eid : "");
  imp_param(&x->w, "mlflow.status", ml_meta_get(m, "status") ? ml_meta_get(m, "status") : "");
  char sub[ML_PATH];
  if (!join(sub, dir, "params") && is_dir(sub))
    rc = each_file(x, sub, "", param_file, "");
  if (!rc && !join(sub, dir, "tags") && is_dir(sub))
    rc = each_file(x, sub, "", param_file, "tag.");
  if (!rc && !join(sub, dir, "metrics") && is_dir(sub))
    rc = each_file(x, sub, "", metric_file, NULL);
  if (!rc) {
    imp_line_open(&x->w, "note");
    fputs(",\"text\":", x->w.out);
    char note[4400];
    snprintf(note, sizeof note, "imported from the MLflow file store at %s (experiment %s)", dir, ename ? ename : "?");
    gs_json_str(x->w.out, note);
    fputs("}\n", x->w.out);
    fprintf(x->w.out, "{\"type\":\"run_end\",\"run\":\"%s\",\"lines\":%lld}\n", x->w.id, (long long)x->w.lines + 1);
  }
  free(m);
  return rc;
}

/* Every run of every experiment folder under root, into out as an export file; *runs counted. */
static int mlflow_export(const char *root, FILE *out, int64_t *runs) {
  struct mlx x = {.w.out = out};
  struct ml_meta *exp = malloc(sizeof *exp);
  struct dirent **d;
  int n = exp ? scandir(root, &d, not_hidden, alphasort) : -1, rc = exp ? 0 : gs_fail(GS_ENOMEM, "out of memory");
  if (exp && n < 0)
    rc = gs_fail(GS_EINVAL, "%s: cannot read the folder: %s", root, strerror(errno));
  fputs("{\"type\":\"header\",\"format\":\"gpuscope-export\",\"version\":1,\"sections\":\"run,param,series,points,"
        "note\"}\n",
        out);
  for (int i = 0; i < n; i++) {
    char edir[ML_PATH], meta[ML_PATH];
    if (!rc && !join(edir, root, d[i]->d_name) && !join(meta, edir, "meta.yaml") && is_dir(edir) &&
        !access(meta, F_OK) && !(rc = read_meta(edir, exp))) {
      struct dirent **r;
      int nr = scandir(edir, &r, not_hidden, alphasort);
      for (int k = 0; k < nr; k++) {
        char rdir[ML_PATH];
        int one = !rc && !join(rdir, edir, r[k]->d_name) && !join(meta, rdir, "meta.yaml") && is_dir(rdir) &&
                          !access(meta, F_OK)
                      ? put_mlflow_run(&x, rdir, exp)
                      : 1;
        *runs += one == 0;
        rc = one < 0 ? one : rc;
        free(r[k]);
      }
      if (nr >= 0)
        free(r);
    }
    free(d[i]);
  }
  if (n >= 0)
    free(d);
  free(exp);
  fprintf(out, "{\"type\":\"end\",\"runs\":%lld}\n", (long long)*runs);
  return rc;
}

void *store_mlflow_convert(const char *dir) {
  FILE *f = imp_tmpfile("mlflow");
  if (!f)
    return NULL;
  int64_t runs = 0;
  int rc = mlflow_export(dir, f, &runs);
  if (!rc && (fflush(f) || fseek(f, 0, SEEK_SET)))
    rc = gs_fail(GS_EIO, "cannot write the temporary file (disk full?)");
  if (!rc)
    rc = store_import_check(f, dir);
  if (rc) {
    fclose(f);
    return NULL;
  }
  return f;
}
