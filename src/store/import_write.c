/* store/import_write: the export lines of an imported run (import_write.h). */
#include "store/import_write.h"

#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"

enum { POINTS_PER_LINE = 4096 };

FILE *imp_tmpfile(const char *what) {
  const char *tmp = getenv("TMPDIR");
  char path[1024];
  snprintf(path, sizeof path, "%s/gpuscope-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", what);
  int fd = mkstemp(path);
  if (fd < 0) {
    gs_fail(GS_EIO, "cannot make a temporary file in %s", tmp && *tmp ? tmp : "/tmp");
    return NULL;
  }
  unlink(path);
  FILE *f = fdopen(fd, "w+");
  if (!f) {
    close(fd);
    gs_fail(GS_ENOMEM, "out of memory");
  }
  return f;
}

void imp_line_open(struct imp_out *o, const char *type) {
  fprintf(o->out, "{\"type\":\"%s\",\"run\":\"%s\"", type, o->id);
  o->lines++;
}

void imp_param(struct imp_out *o, const char *key, const char *value) {
  imp_line_open(o, "param");
  fputs(",\"key\":", o->out);
  gs_json_str(o->out, key);
  fputs(",\"value\":", o->out);
  gs_json_str(o->out, value);
  fputs("}\n", o->out);
}

void imp_series(struct imp_out *o, const char *source, const char *name, const char *unit, const void *pts, size_t n,
                imp_point_fn point, int steps) {
  imp_line_open(o, "series");
  fprintf(o->out, ",\"id\":%lld,\"source\":\"%s\",\"name\":", (long long)o->n_series, source);
  gs_json_str(o->out, name);
  fprintf(o->out, ",\"labels\":\"\",\"unit\":\"%s\",\"kind\":\"gauge\"}\n", unit);
  int64_t last = -1, wall, step;
  double v;
  for (size_t i = 0; i < n; i += POINTS_PER_LINE) {
    size_t e = i + POINTS_PER_LINE < n ? i + POINTS_PER_LINE : n;
    imp_line_open(o, "points");
    fprintf(o->out, ",\"series\":%lld,\"t\":[", (long long)o->n_series);
    for (size_t k = i; k < e; k++) {
      point(pts, k, &wall, &step, &v);
      int64_t t = wall - o->start_ns;
      last = t > last ? t : last + 1;
      fprintf(o->out, "%s%lld", k > i ? "," : "", (long long)last);
    }
    fputs("],\"v\":[", o->out);
    for (size_t k = i; k < e; k++) {
      point(pts, k, &wall, &step, &v);
      if (steps)
        fprintf(o->out, "%s%lld", k > i ? "," : "", (long long)step);
      else
        fprintf(o->out, "%s%.17g", k > i ? "," : "", v);
    }
    fputs("]}\n", o->out);
  }
  o->n_series++;
}
