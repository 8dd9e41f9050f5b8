/* store/tb_import: `gpuscope import logs/` — a TensorBoard log directory brought in (docs/export.md,
 * "From TensorBoard"). A run is a folder holding event files (events.out.tfevents.*), TensorBoard's
 * own rule, named by its path below the imported folder (the folder itself: its name); its files
 * are read in name order and merged. Every run is read and checked first and written as a gpuscope
 * export file into a temporary file; only a whole one is imported, through store_import_check and
 * store_import, as mlflow_import.c does: a run is its id (derived from its first event file, so a
 * second import adds nothing), and a damaged file is one line naming the file and the byte offset,
 * with nothing of the store written. The reader of the files is tb_parse.c (pure, fuzzed). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/store_backend.h"
#include "store/import_write.h"
#include "store/tb_int.h"

enum { TB_PATH = 4096, TB_DEPTH = 16 };

/* What the conversion writes: the output, the run in progress (its id, start, lines so far, series
 * declared), the runs written and what was passed over in all of them. */
struct tbx {
  struct imp_out w; /* the output, the run's id, its start and the lines so far */
  const char *root;
  int64_t runs;
  int64_t other[TB_KINDS];
};

static const char *const kind_names[TB_KINDS][2] = {
    [TB_IMAGE] = {"image", "images"},
    [TB_HISTOGRAM] = {"histogram", "histograms"},
    [TB_AUDIO] = {"audio clip", "audio clips"},
    [TB_TENSOR] = {"tensor (text, another plugin's)", "tensors (text, other plugins')"},
    [TB_GRAPH] = {"graph", "graphs"},
    [TB_OTHER] = {"other value or event", "other values or events"},
};

static int join(char *out, const char *dir, const char *name) {
  int k = snprintf(out, TB_PATH, "%s/%s", dir, name);
  return k < 0 || k >= TB_PATH ? -1 : 0;
}

static int not_hidden(const struct dirent *d) {
  return d->d_name[0] != '.';
}

static int is_event_name(const char *name) {
  return !strncmp(name, "events.out.tfevents.", 20);
}

/* A folder, not a link to one (no cycles); a regular event file. */
static int real_dir(const char *path) {
  struct stat st;
  return !lstat(path, &st) && S_ISDIR(st.st_mode);
}

static int event_file(const char *dir, const char *name) {
  char path[TB_PATH];
  struct stat st;
  return is_event_name(name) && !join(path, dir, name) && !stat(path, &st) && S_ISREG(st.st_mode);
}

static int holds_events(const char *dir, int depth) {
  struct dirent **d;
  int n = scandir(dir, &d, not_hidden, alphasort), found = 0;
  for (int i = 0; i < n; i++) {
    char sub[TB_PATH];
    found = found || event_file(dir, d[i]->d_name) ||
            (depth < TB_DEPTH && !join(sub, dir, d[i]->d_name) && real_dir(sub) && holds_events(sub, depth + 1));
    free(d[i]);
  }
  if (n >= 0)
    free(d);
  return found;
}

int store_tb_is(const char *path) {
  struct stat st;
  return !stat(path, &st) && S_ISDIR(st.st_mode) && holds_events(path, 0);
}

/* The file at path, mapped (*buf NULL when it is empty); tb_unmap undoes it. */
static int map_file(const char *path, const uint8_t **buf, size_t *n) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st)) {
    int e = errno;
    if (fd >= 0)
      close(fd);
    return gs_fail(GS_EINVAL, "%s: cannot read it: %s", path, strerror(e));
  }
  *n = (size_t)st.st_size;
  *buf = NULL;
  void *m = *n ? mmap(NULL, *n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
  close(fd);
  if (m == MAP_FAILED)
    return gs_fail(GS_EINVAL, "%s: cannot read it: %s", path, strerror(errno));
  *buf = m;
  return 0;
}

static void unmap(const uint8_t *buf, size_t n) {
  if (buf)
    munmap((void *)buf, n);
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
  return h;
}

/* The run's id from its first event file: "tb" and 29 hex digits of two FNV-1a hashes of the file's
 * name (time, host, pid) and its first record (the file_version event with its wall time), which
 * stay as they are while the run writes on, wherever the folder is moved. */
static void run_id(struct tbx *x, const char *name, const uint8_t *buf, size_t n) {
  size_t len = 0;
  for (int i = 7; n >= 12 && i >= 0; i--)
    len = len << 8 | buf[i];
  len = n >= 16 && len <= n - 16 ? (len < 4096 ? len : 4096) : 0;
  uint64_t a = fnv1a(0xcbf29ce484222325ull, name, strlen(name)), b = fnv1a(0x6c62272e07bb0142ull, name, strlen(name));
  a = fnv1a(a, buf ? buf + 12 : NULL, len);
  b = fnv1a(b ^ 0x5bd1e995, buf ? buf + 12 : NULL, len);
  snprintf(x->w.id, sizeof x->w.id, "tb%016llx%013llx", (unsigned long long)a, (unsigned long long)(b >> 12));
}

/* Unix seconds (0 .. 9e9, tb_parse checked) as nanoseconds: whole seconds and the fraction apart,
 * as wall * 1e9 near 1.8e18 would round to 256 ns. */
static int64_t wall_ns(double wall) {
  double sec = floor(wall);
  return (int64_t)sec * 1000000000 + (int64_t)llround((wall - sec) * 1e9);
}

static void tb_point_of(const void *pts, size_t k, int64_t *wall, int64_t *step, double *v) {
  const struct tb_point *p = (const struct tb_point *)pts + k;
  *wall = wall_ns(p->wall), *step = p->step, *v = p->v;
}

static int cmp_point(const void *a, const void *b) {
  const struct tb_point *p = a, *q = b;
  if (p->tag != q->tag)
    return p->tag < q->tag ? -1 : 1;
  if (p->wall != q->wall) /* by time, then by step, within a tag */
    return p->wall < q->wall ? -1 : 1;
  return p->step < q->step ? -1 : p->step > q->step;
}

/* What was passed over, "3 images, 1 graph" ("" when nothing). */
static void describe_other(const int64_t other[TB_KINDS], char *out, size_t n) {
  size_t k = 0;
  out[0] = 0;
  for (int i = 0; i < TB_KINDS; i++)
    if (other[i] && k < n) {
      int w = snprintf(out + k, n - k, "%s%lld %s", k ? ", " : "", (long long)other[i], kind_names[i][other[i] != 1]);
      k += w > 0 ? (size_t)w : 0;
    }
}

/* The run line, params, series, note and end of one run folder's events. */
static void put_run(struct tbx *x, const char *dir, const char *name, struct tb_run *r, int files) {
  x->w.start_ns = wall_ns(r->wall_min);
  x->w.lines = x->w.n_series = 0;
  fprintf(x->w.out, "{\"type\":\"run\",\"id\":\"%s\",\"name\":", x->w.id);
  gs_json_str(x->w.out, name);
  fputs(
      ",\"group\":\"\",\"status\":\"finished\",\"command\":\"\",\"cwd\":\"\",\"host\":\"\",\"user\":\"\",\"tags\":\"\"",
      x->w.out);
  fprintf(x->w.out, ",\"start_wall_ns\":%lld,\"end_wall_ns\":%lld,\"interval_ns\":0,\"exit_code\":-1}\n",
          (long long)x->w.start_ns, (long long)wall_ns(r->wall_max));
  x->w.lines = 1;
  char num[32];
  snprintf(num, sizeof num, "%d", files);
  imp_param(&x->w, "import.format", "tensorboard");
  imp_param(&x->w, "import.path", dir);
  imp_param(&x->w, "tensorboard.files", num);
  for (size_t i = 0; i < r->n_params; i++) /* hparams, but never over a key of ours */
    if (strncmp(r->params[2 * i], "import.", 7) && strncmp(r->params[2 * i], "tensorboard.", 12) &&
        strncmp(r->params[2 * i], "gpuscope.", 9))
      imp_param(&x->w, r->params[2 * i], r->params[2 * i + 1]);
  qsort(r->pts, r->n_pts, sizeof *r->pts, cmp_point);
  for (size_t i = 0, e; i < r->n_pts; i = e) {
    for (e = i + 1; e < r->n_pts && r->pts[e].tag == r->pts[i].tag;)
      e++;
    imp_series(&x->w, "client", r->tags[r->pts[i].tag], "", r->pts + i, e - i, tb_point_of, 0);
    imp_series(&x->w, "client.step", r->tags[r->pts[i].tag], "count", r->pts + i, e - i, tb_point_of, 1);
  }
  char other[512], note[TB_PATH + 700];
  describe_other(r->other, other, sizeof other);
  snprintf(note, sizeof note, "imported from the TensorBoard log directory at %s (%d event file%s)%s%s", dir, files,
           files == 1 ? "" : "s", *other ? "; not imported: " : "", other);
  imp_line_open(&x->w, "note");
  fputs(",\"text\":", x->w.out);
  gs_json_str(x->w.out, note);
  fputs("}\n", x->w.out);
  fprintf(x->w.out, "{\"type\":\"run_end\",\"run\":\"%s\",\"lines\":%lld}\n", x->w.id, (long long)x->w.lines + 1);
  for (int i = 0; i < TB_KINDS; i++)
    x->other[i] += r->other[i];
  x->runs++;
}

/* The run's name: its path below the root, else the root's own name; at most 127 bytes, cut on a
 * character's boundary. */
static void run_name(const struct tbx *x, const char *rel, char *out, size_t n) {
  char *real = realpath(x->root, NULL); /* "." and ".." by their names */
  const char *root = real ? real : x->root, *base = root + strlen(root);
  while (base > root && base[-1] == '/')
    base--;
  const char *end = base;
  while (base > root && base[-1] != '/')
    base--;
  if (*rel)
    snprintf(out, n, "%s", rel);
  else
    snprintf(out, n, "%.*s", (int)(end - base), end > base ? base : "/");
  free(real);
  size_t len = strlen(out);
  while (len > 127 || (len && ((unsigned char)out[len] & 0xc0) == 0x80))
    len--;
  out[len] = 0;
}

/* The event files among dir's entries d, read in name order into one run; 1 when there are none
 * (or no event in them), 0 when written, else the error. */
static int put_tb_run(struct tbx *x, const char *dir, const char *rel, struct dirent **d, int n) {
  struct tb_run r = {0};
  int files = 0, rc = 0;
  for (int i = 0; !rc && i < n; i++) {
    char path[TB_PATH], err[256];
    const uint8_t *buf = NULL;
    size_t len = 0;
    if (!event_file(dir, d[i]->d_name) || join(path, dir, d[i]->d_name))
      continue;
    if ((rc = map_file(path, &buf, &len)))
      break;
    if (tb_parse_events(&r, buf, len, err, sizeof err))
      rc = gs_fail(GS_ECORRUPT, "%s: %s", path, err);
    else if (!files++)
      run_id(x, d[i]->d_name, buf, len);
    unmap(buf, len);
  }
  if (!rc && files && r.events) {
    char name[TB_PATH];
    run_name(x, rel, name, sizeof name);
    put_run(x, dir, name, &r, files);
  }
  tb_run_done(&r);
  return rc ? rc : !(files && r.events);
}

/* Every run folder at dir and below (depth bounded, links to folders not followed). */
static int walk(struct tbx *x, const char *dir, const char *rel, int depth) {
  struct dirent **d;
  int n = scandir(dir, &d, not_hidden, alphasort);
  if (n < 0)
    return gs_fail(GS_EINVAL, "%s: cannot read the folder: %s", dir, strerror(errno));
  int rc = put_tb_run(x, dir, rel, d, n);
  rc = rc > 0 ? 0 : rc;
  for (int i = 0; i < n; i++) {
    char sub[TB_PATH], subrel[TB_PATH];
    int k = snprintf(subrel, sizeof subrel, "%s%s%s", rel, *rel ? "/" : "", d[i]->d_name);
    if (!rc && depth < TB_DEPTH && k < (int)sizeof subrel && !join(sub, dir, d[i]->d_name) && real_dir(sub))
      rc = walk(x, sub, subrel, depth + 1);
    free(d[i]);
  }
  free(d);
  return rc;
}

void *store_tb_convert(const char *dir, char *said, size_t saidlen) {
  FILE *f = imp_tmpfile("tensorboard");
  if (!f)
    return NULL;
  struct tbx x = {.w.out = f, .root = dir};
  fputs("{\"type\":\"header\",\"format\":\"gpuscope-export\",\"version\":1,\"sections\":\"run,param,series,points,"
        "note\"}\n",
        f);
  int rc = walk(&x, dir, "", 0);
  fprintf(f, "{\"type\":\"end\",\"runs\":%lld}\n", (long long)x.runs);
  if (!rc && (fflush(f) || fseek(f, 0, SEEK_SET)))
    rc = gs_fail(GS_EIO, "cannot write the temporary file (disk full?)");
  if (!rc)
    rc = store_import_check(f, dir);
  if (rc) {
    fclose(f);
    return NULL;
  }
  describe_other(x.other, said, saidlen);
  return f;
}
