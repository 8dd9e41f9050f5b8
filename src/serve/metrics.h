/* serve/metrics: the Prometheus endpoint of `gpuscope agent` and `gpuscope run --listen`. A scrape
 * renders the sink's latest values (gs_sink_each) — never an NVML call — as the Prometheus text
 * format 0.0.4, or OpenMetrics 1.0 when the scraper's Accept header asks for it. GPU metrics carry
 * dcgm-exporter's names, labels, units and scales (so the public DCGM Grafana boards read them
 * unchanged); everything else gpuscope knows is under gpuscope_ (docs/deploy.md lists the names).
 * A series that was never read (not supported) or has not been read for a while (a process that
 * exited) has no line: missing is not zero. One render is shared by every scrape of the same tick,
 * so many scrapers cost what one does. */
#ifndef GS_SERVE_METRICS_H
#define GS_SERVE_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"
#include "store/store.h"

#define METRICS_DEFAULT_LISTEN "127.0.0.1:9733"

struct metrics_opts {
  const char *host_label; /* "hostname" (dcgm-exporter 4.x, the default) or "Hostname" (older) */
  int64_t interval_ns;    /* the agent's tick: renders are shared within one tick */
};

struct metrics;

/* An exporter over sink (not owned; it must outlive the exporter). NULL on allocation failure. */
struct metrics *metrics_new(struct gs_sink *sink, const struct metrics_opts *o);
void metrics_free(struct metrics *m);

/* Writes one exposition of the latest values to out; openmetrics selects OpenMetrics 1.0 (with the
 * closing "# EOF"). now_ns is the monotonic time the staleness is measured at. Returns 0 or
 * GS_EIO when out failed. */
int metrics_write(struct metrics *m, FILE *out, int openmetrics, int64_t now_ns);

/* The findings gpuscope_finding shows (copied; replaces the previous set). Thread-safe. */
void metrics_set_findings(struct metrics *m, const struct store_finding *f, size_t n);

/* 1 when an Accept header asks for OpenMetrics (application/openmetrics-text) before plain text. */
int metrics_wants_openmetrics(const char *accept);

/* Serves GET /metrics on listen (loopback by default; another address needs token) until
 * metrics_stop_listen. Returns 0 or a GS_E code with a message (as serve_endpoint_start). *port is
 * the bound port. */
int metrics_listen(struct metrics *m, const char *listen, const char *token, int *port);
void metrics_stop_listen(struct metrics *m);

#endif
