/* collect/nvml_procs: the processes on a GPU — their device memory (the running-process lists) and
 * SM share (the driver's process-utilization samples, each with its own timestamp), as series
 * labelled pid=P. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/nvml_int.h"

static int pid_listed(const struct gpu *g, unsigned pid) {
  for (unsigned i = 0; i < g->n_pids; i++)
    if (g->pids[i] == pid)
      return 1;
  return 0;
}

static int procs_grow(struct gpu *g, unsigned want, size_t stride) {
  unsigned char *b = realloc(g->pbuf, (size_t)want * stride);
  if (!b)
    return -1;
  g->pbuf = b;
  unsigned *p = realloc(g->pids, want * sizeof *p);
  if (!p)
    return -1;
  g->pids = p;
  g->pcap = want;
  return 0;
}

void nv_procs_tick(struct nvml_ctx *c, struct gpu *g) {
  size_t stride = c->api.proc_stride;
  unsigned n = g->pcap;
  nvmlReturn_t r;
  if (g->off[C_PROCS])
    return;
  r = c->api.nvmlDeviceGetComputeRunningProcesses(g->dev, &n, g->pcap ? (nvmlProcessInfo_t *)g->pbuf : NULL);
  if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
    if (procs_grow(g, 2 * n + 5, stride))
      return;
    n = g->pcap;
    r = c->api.nvmlDeviceGetComputeRunningProcesses(g->dev, &n, (nvmlProcessInfo_t *)g->pbuf);
  }
  if (!nv_ok(c, g, C_PROCS, r))
    return;
  if (n > g->pcap)
    n = g->pcap;
  int64_t t = nv_stamp(c);
  g->n_pids = 0;
  for (unsigned i = 0; i < n; i++) {
    unsigned pid;
    unsigned long long mem;
    memcpy(&pid, g->pbuf + i * stride, sizeof pid);
    memcpy(&mem, g->pbuf + i * stride + offsetof(nvmlProcessInfo_t, usedGpuMemory), sizeof mem);
    g->pids[g->n_pids++] = pid;
    if (mem != NVML_VALUE_NOT_AVAILABLE_ULL)
      nv_emit_proc(c, g, M_PROC_MEM, pid, t, (double)mem);
  }

  if (g->off[C_PROC_UTIL] || !g->n_pids)
    return;
  unsigned m = 0;
  r = c->api.nvmlDeviceGetProcessUtilization(g->dev, NULL, &m, g->pu_seen_us);
  if (r == NVML_ERROR_NOT_FOUND || (r == NVML_SUCCESS && m == 0))
    return;
  if (r != NVML_ERROR_INSUFFICIENT_SIZE && !nv_ok(c, g, C_PROC_UTIL, r))
    return;
  if (m > g->ucap) {
    unsigned want = m + 8;
    nvmlProcessUtilizationSample_t *u = realloc(g->ubuf, want * sizeof *u);
    if (!u)
      return;
    g->ubuf = u;
    g->ucap = want;
  }
  m = g->ucap;
  r = c->api.nvmlDeviceGetProcessUtilization(g->dev, g->ubuf, &m, g->pu_seen_us);
  if (r == NVML_ERROR_NOT_FOUND || !nv_ok(c, g, C_PROC_UTIL, r))
    return;
  if (m > g->ucap)
    m = g->ucap;
  int64_t now, now_wall;
  nv_clock_pair(&now, &now_wall);
  unsigned long long newest = g->pu_seen_us;
  /* The driver's buffer can hold stale or garbage entries: keep only new ones, in range, of a
   * process that is on this GPU now. */
  for (unsigned i = 0; i < m; i++) {
    nvmlProcessUtilizationSample_t *s = &g->ubuf[i];
    if (s->timeStamp <= g->pu_seen_us || s->smUtil > 100 || !pid_listed(g, s->pid))
      continue;
    nv_emit_proc(c, g, M_PROC_SM, s->pid, nv_drv_to_mono(s->timeStamp, now, now_wall), s->smUtil);
    if (s->timeStamp > newest)
      newest = s->timeStamp;
  }
  g->pu_seen_us = newest;
}
