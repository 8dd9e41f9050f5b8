/* store/mlflow_int: the readers of an MLflow file store's files, private to the store folder
 * (mlflow_import.c uses them, the libFuzzer target tests/fuzz/fuzz_mlflow_parse.c runs them). An
 * MLflow file store (mlruns/EXPERIMENT/RUN/) keeps a run's record in meta.yaml (YAML, read through
 * libyaml), each metric in a file of lines "TIMESTAMP_MS VALUE [STEP]", each param and tag in a file
 * of its own (the value is the file). The files come from elsewhere: pure functions, no I/O, no
 * global state; every refusal is a one-line reason that says at which byte offset. */
#ifndef GS_STORE_MLFLOW_INT_H
#define GS_STORE_MLFLOW_INT_H

#include <stddef.h>
#include <stdint.h>

enum {
  ML_MAX_KEYS = 64,         /* top-level keys of one meta.yaml */
  ML_MAX_VALUE = 1024,      /* bytes of one meta.yaml value (longer: refused) */
  ML_MAX_FILE = 64 << 20,   /* bytes of one file read (a metric of millions of points) */
  ML_MAX_POINTS = 10000000, /* points of one metric */
};

/* A meta.yaml's top-level keys whose values are scalars (a list or mapping, such as "tags: []", is
 * passed over); null (null, ~, or nothing) is kept as absent. */
struct ml_meta {
  struct {
    char key[64];
    char val[ML_MAX_VALUE];
  } kv[ML_MAX_KEYS];
  size_t n;
};

/* Parses a meta.yaml of n bytes (need not be NUL-terminated). Returns 0, or -1 with the reason in
 * err ("offset N: why"). */
int ml_parse_meta(const char *s, size_t n, struct ml_meta *out, char *err, size_t errlen);
/* The value of key, or NULL when absent or null. */
const char *ml_meta_get(const struct ml_meta *m, const char *key);

struct ml_point {
  int64_t ts_ms; /* Unix milliseconds, 0 .. 9e12 (in nanoseconds it fits 64 bits) */
  double v;
  int64_t step; /* -1: the line had none (MLflow before 1.0) */
};

/* Parses a metric file of n bytes: lines "TIMESTAMP VALUE [STEP]" (one space apart; a final newline
 * optional; a value that is not finite, "nan", is left out: missing is not zero). Returns 0 with
 * *pts malloc'd (the caller frees it; NULL when *np is 0), or -1 with the reason in err ("offset N:
 * why") and nothing to free. */
int ml_parse_metric(const char *s, size_t n, struct ml_point **pts, size_t *np, char *err, size_t errlen);

#endif
