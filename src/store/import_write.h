/* store/import_write: the export-file lines the importers of other trackers' runs write (mlflow_import.c,
 * tb_import.c): a run's param, series and points lines in gpuscope's export format (docs/export.md),
 * which store_import_check and store_import then take as an export's. Internal to store/. */
#ifndef GS_STORE_IMPORT_WRITE_H
#define GS_STORE_IMPORT_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The run being written: where, its id, its start and what has gone out. */
struct imp_out {
  FILE *out;
  char id[32];
  int64_t start_ns; /* the run's start, Unix ns: points are written relative to it */
  int64_t lines;    /* of the run in progress, its run line included */
  int64_t n_series; /* declared so far */
};

/* An unnamed temporary file (in $TMPDIR, else /tmp; unlinked at once) for an importer's conversion,
 * named gpuscope-WHAT-XXXXXX while it is made. NULL with the message set (gs_fail) when it cannot. */
FILE *imp_tmpfile(const char *what);

/* Opens a line of the run in progress: {"type":TYPE,"run":ID (the caller closes it). */
void imp_line_open(struct imp_out *o, const char *type);
/* A param line. */
void imp_param(struct imp_out *o, const char *key, const char *value);

/* Point k of pts: its time (Unix ns), step and value. */
typedef void (*imp_point_fn)(const void *pts, size_t k, int64_t *wall_ns, int64_t *step, double *v);
/* A series (source, name, unit; gauge, no labels) and its n points, 4096 a line: their values, or
 * with steps their steps; times strictly increasing (a point at or before the previous one goes a
 * nanosecond after it, one before the start at 0). */
void imp_series(struct imp_out *o, const char *source, const char *name, const char *unit, const void *pts, size_t n,
                imp_point_fn point, int steps);

#endif
