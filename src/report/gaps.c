/* report/gaps: what a run's data is missing, said before any verdict on it — GPU data that stopped
 * (a driver call that never returned, param nvml.data_stopped_at_s from the agent), messages the
 * job's client dropped (ingest.client_dropped) or refused (ingest.client_rejected), steps and metric values over the
 * agent's per-second caps (ingest.steps_over_cap, ingest.metrics_over_cap). A "healthy" finding on such a run is no
 * verdict on what is missing. */
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

static const char *kv_get(const struct gs_kv *kv, size_t n, const char *key) {
  const char *v = NULL;
  for (size_t i = 0; i < n; i++) /* later values replace earlier ones */
    if (kv[i].key && !strcmp(kv[i].key, key))
      v = kv[i].value;
  return v;
}

int rp_gpu_data_stopped(const struct gs_kv *kv, size_t n) {
  const char *resumed = kv_get(kv, n, "nvml.data_resumed_at_s"); /* "" after a later stall */
  return kv_get(kv, n, "nvml.data_stopped_at_s") && !(resumed && *resumed);
}

int rp_data_gaps(FILE *out, const char *indent, const struct gs_kv *kv, size_t n) {
  int lines = 0;
  const char *v;
  if (rp_gpu_data_stopped(kv, n)) {
    fprintf(out, "%sGPU data stopped at ", indent);
    gs_term_text(out, kv_get(kv, n, "nvml.data_stopped_at_s"), 0);
    fputs(" s (a driver call did not return): the GPU figures cover only the run's start, and no verdict "
          "below is one on the GPUs\n",
          out);
    lines++;
  }
  if ((v = kv_get(kv, n, "ingest.client_dropped")) && strcmp(v, "0")) {
    fprintf(out, "%sthe job's client dropped ", indent);
    gs_term_text(out, v, 0);
    fputs(" messages it could not send: step figures are built on part of the steps\n", out);
    lines++;
  }
  if ((v = kv_get(kv, n, "ingest.client_rejected")) && strncmp(v, "0 ", 2)) {
    fprintf(out, "%sthe job's client refused ", indent);
    gs_term_text(out, v, 0);
    fputs(" values it could not send, by cause (not a finite number, a metric name or step it cannot send, "
          "another bad argument): not stored\n",
          out);
    lines++;
  }
  if ((v = kv_get(kv, n, "ingest.steps_over_cap")) && strcmp(v, "0")) {
    fprintf(out, "%s", indent);
    gs_term_text(out, v, 0);
    fputs(" steps over the agent's cap of 1000 a second were counted, not stored: step figures are built on "
          "the steps kept\n",
          out);
    lines++;
  }
  if ((v = kv_get(kv, n, "ingest.metrics_over_cap")) && strcmp(v, "0")) {
    fprintf(out, "%s", indent);
    gs_term_text(out, v, 0);
    fputs(" metric values over the agent's cap of 1000 a second per series were counted, not stored\n", out);
    lines++;
  }
  return lines;
}
