/* collect: the collectors, one per source of signals (host procfs, the job's process tree, NVIDIA
 * GPUs through NVML). Each is a `struct collector` of function pointers listed in collect_registry;
 * the run loop opens them all, calls sample() once per tick (one wakeup for all of them) and closes
 * them at the end. Collectors write only into the sink; they never touch the store. */
#ifndef GS_COLLECT_H
#define GS_COLLECT_H

#include <stdio.h>
#include <sys/types.h>

#include "core/core.h"

/* What sample() returns: go on, skip this tick (try again next), or switch this collector off. */
enum { GS_COLLECT_OK = 0, GS_COLLECT_RETRY = 1, GS_COLLECT_DISABLE = 2 };

struct collector_opts {
  const char *root;      /* prefix for every procfs/sysfs path ("/" normally; tests use fixtures) */
  pid_t pid;             /* the job's root process (0: none, host only) */
  int64_t interval_ns;   /* the sampling interval */
  const char *nvml_lib;  /* path of libnvidia-ml.so.1 to load (NULL: GPUSCOPE_NVML_LIB or default) */
  int subreaper;         /* the agent is the job's parent and a child subreaper: its orphans count */
};

struct collector {
  int version; /* 1 */
  const char *name; /* "host", "proctree", "nvml" */
  const struct gs_metric_desc *metrics; /* static description of what it emits */
  size_t n_metrics;
  /* Opens the collector. Returns its context, or NULL when the source is absent or unusable, with
   * a one-line reason in err (not an error for the run: the collector is simply off). */
  void *(*open)(const struct collector_opts *opts, struct gs_sink *sink, char *err, size_t errlen);
  /* Samples once at monotonic time now_ns into sink. Returns GS_COLLECT_OK/RETRY/DISABLE. */
  int (*sample)(void *ctx, struct gs_sink *sink, int64_t now_ns);
  /* Writes a few words for the end-of-run summary (may be NULL). */
  void (*summary)(void *ctx, FILE *out);
  /* Releases everything; must not block for long. ctx may be NULL. */
  void (*close)(void *ctx);
};

extern const struct collector collector_host;
extern const struct collector collector_proctree;
extern const struct collector collector_nvml;

/* All collectors, in sampling order, NULL-terminated. */
extern const struct collector *const collect_registry[];

/* Helper for collectors: builds root + path into buf ("/" root gives path unchanged). */
const char *collect_path(const struct collector_opts *o, const char *path, char *buf, size_t n);

/* Counts the live descendants of pid (children, grandchildren...), reading every thread's children
 * list. Used at the end of a run to report what the job left behind. */
int collect_count_descendants(pid_t pid);
/* Lists the live descendants of pid (parents before their children) into *out, which the caller
 * frees (it may be NULL when there are none). Returns how many; 0 when none or out of memory. */
int collect_list_descendants(pid_t pid, pid_t **out);

/* ---- NVML specifics (collect/nvml*.c) ---- */

/* Writes what `gpuscope devices` shows (index, name, UUID, memory, CC, metric families available)
 * as a table, or as JSON when json != 0. lib: as collector_opts.nvml_lib. Returns 0, or GS_ENOENT
 * with a message when no NVML library could be loaded (the caller prints it). */
int nvml_devices_write(FILE *out, int json, const char *lib);

#endif
