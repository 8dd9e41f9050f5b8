/* expose: the Prometheus exposition of `gpuscope agent` and `gpuscope run --listen`. A scrape
 * renders the sink's latest values (gs_sink_each) — never an NVML call — as the Prometheus text
 * format 0.0.4, or OpenMetrics 1.0 when the scraper's Accept header asks for it. GPU metrics carry
 * dcgm-exporter's names, labels, units and scales (so the public DCGM Grafana boards read them
 * unchanged); everything else gpuscope knows is under gpuscope_ (docs/deploy.md lists the names).
 * A series that was never read (not supported) or has not been read for a while (a process that
 * exited) has no line: missing is not zero. One render is shared by every scrape of the same tick,
 * so many scrapers cost what one does. The room is the agent's (it reads the sink, collect's NVML
 * facts and the doctor's findings): the HTTP server under it is serve's one-path endpoint
 * (serve_endpoint_start), the only thing of serve it uses. */
#ifndef GS_EXPOSE_H
#define GS_EXPOSE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/core.h"
#include "store/store.h"

#define EXPOSE_DEFAULT_LISTEN "127.0.0.1:9733"

struct expose_opts {
  const char *host_label; /* "hostname" (dcgm-exporter 4.x, the default) or "Hostname" (older) */
  int64_t interval_ns;    /* the agent's tick: renders are shared within one tick */
};

struct expose;

/* An exporter over sink (not owned; it must outlive the exporter). NULL on allocation failure. */
struct expose *expose_new(struct gs_sink *sink, const struct expose_opts *o);
void expose_free(struct expose *m);

/* Writes one exposition of the latest values to out; openmetrics selects OpenMetrics 1.0 (with the
 * closing "# EOF"). now_ns is the monotonic time the staleness is measured at. Returns 0 or
 * GS_EIO when out failed. */
int expose_write(struct expose *m, FILE *out, int openmetrics, int64_t now_ns);

/* The findings gpuscope_finding shows (copied; replaces the previous set). Thread-safe. */
void expose_set_findings(struct expose *m, const struct store_finding *f, size_t n);

/* 1 when an Accept header asks for OpenMetrics (application/openmetrics-text) before plain text. */
int expose_wants_openmetrics(const char *accept);

/* Serves GET /metrics on listen (loopback by default; another address needs token) until
 * expose_stop_listen, on serve's one-path endpoint. Returns 0 or GS_EINVAL with the endpoint's
 * message (a bad address or token, an address that cannot be bound). *port (when port is not NULL)
 * is the bound port; expose_url gives the whole address. */
int expose_listen(struct expose *m, const char *listen, const char *token, int *port);
void expose_stop_listen(struct expose *m);

/* Writes the listening endpoint's URL ("http://127.0.0.1:9733/metrics", an IPv6 host in brackets)
 * to out (n bytes, truncated to fit). Returns 0, or GS_EINVAL (out "") when m is not listening. */
int expose_url(const struct expose *m, char *out, size_t n);

#endif
