/* collect/nvml_health: is the GPU sick. Xid errors and ECC errors come as events from one NVML event
 * set for every GPU, taken each tick with a timeout of 0 (never blocking the sampling thread) and
 * written by the GPU's own tick; the health counters (ECC totals, remapped rows, retired pages, PCIe
 * replays, NVLink errors per active link) change rarely and are read every HEALTH_EVERY_NS, not
 * every tick, so the agent's cost stays where it was. A counter the GPU does not have (a consumer
 * card without ECC, a PCIe card without NVLink, a MIG instance) answers NOT_SUPPORTED once, is noted
 * and has no series: missing is never zero. docs/nvml.md, "Health". */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "collect/nvml_int.h"

#define HEALTH_EVENTS (nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError)
#define EVENTS_PER_TICK 32 /* at most this many events taken per tick: a storm cannot stall the thread */

/* Registers g for Xid and ECC events; a GPU without ECC (consumer cards) refuses the ECC types, so
 * Xid alone is tried next. */
static void health_register(struct nvml_ctx *c, struct gpu *g) {
  if (g->lost || g->off[C_EVENTS])
    return;
  nvmlReturn_t r = c->api.nvmlDeviceRegisterEvents(g->dev, HEALTH_EVENTS, c->events);
  if (r == NVML_ERROR_NOT_SUPPORTED)
    r = c->api.nvmlDeviceRegisterEvents(g->dev, nvmlEventTypeXidCriticalError, c->events);
  if (r != NVML_SUCCESS) {
    g->off[C_EVENTS] = 1;
    nv_note(c, "gpu%u: Xid events: %s", g->index, nvml_api_strerror(&c->api, r));
  }
}

/* The ECC mode as a param (gpu.N.ecc_mode "enabled" / "disabled", "enabled (pending disable)"). */
static void health_ecc_mode(struct nvml_ctx *c, struct gpu *g) {
  unsigned cur, pend;
  if (g->lost || !c->api.nvmlDeviceGetEccMode || c->api.nvmlDeviceGetEccMode(g->dev, &cur, &pend) != NVML_SUCCESS)
    return;
  char v[48];
  snprintf(v, sizeof v, "%s%s", cur ? "enabled" : "disabled",
           pend == cur ? ""
           : pend      ? " (pending enable)"
                       : " (pending disable)");
  nv_param(c->sink, g->index, "ecc_mode", v);
}

void nv_health_start(struct nvml_ctx *c) {
  const struct nvml_api *a = &c->api;
  if (a->nvmlEventSetCreate && a->nvmlDeviceRegisterEvents && a->nvmlEventSetWait_v2 && a->nvmlEventSetFree) {
    nvmlReturn_t r = a->nvmlEventSetCreate(&c->events);
    if (r != NVML_SUCCESS) {
      c->events = NULL;
      nv_note(c, "nvml: Xid events off: nvmlEventSetCreate: %s", nvml_api_strerror(a, r));
    }
  }
  for (unsigned i = 0; i < c->n_gpus; i++) {
    struct gpu *g = &c->gpus[i];
    g->health.last_xid = NAN;
    g->health.next_ns = gs_mono_ns(); /* the first tick reads the counters */
    for (int k = 0; k < XID_CODES; k++)
      g->health.code_sid[k] = -1, g->health.code_last_t[k] = INT64_MIN;
    if (!c->events)
      g->off[C_EVENTS] = 1;
    health_register(c, g);
    health_ecc_mode(c, g);
  }
  nv_flush(c, &c->gpus[0]); /* the notes */
}

void nv_health_stop(struct nvml_ctx *c) {
  if (c->events)
    c->api.nvmlEventSetFree(c->events);
  c->events = NULL;
}

static struct gpu *gpu_of(struct nvml_ctx *c, nvmlDevice_t dev) {
  for (unsigned i = 0; i < c->n_gpus; i++)
    if (c->gpus[i].dev == dev)
      return &c->gpus[i];
  return NULL;
}

void nv_health_events(struct nvml_ctx *c) {
  if (!c->events)
    return;
  for (int n = 0; n < EVENTS_PER_TICK; n++) {
    nvmlEventData_t e;
    memset(&e, 0, sizeof e);
    nvmlReturn_t r = c->api.nvmlEventSetWait_v2(c->events, &e, 0);
    if (r != NVML_SUCCESS)
      return; /* TIMEOUT: nothing more now; anything else is retried next tick */
    struct gpu *g = gpu_of(c, e.device);
    if (!g || g->health.nfresh == (int)(sizeof g->health.fresh / sizeof g->health.fresh[0]))
      continue;
    struct health *h = &g->health;
    h->fresh[h->nfresh].type = e.eventType;
    h->fresh[h->nfresh].code = (unsigned)e.eventData;
    h->fresh[h->nfresh].gi = e.gpuInstanceId;
    h->fresh[h->nfresh].ci = e.computeInstanceId;
    h->fresh[h->nfresh].t = gs_mono_ns();
    h->nfresh++;
  }
}

/* The count of Xids of code k in the window ending at now (older ones leave the list). */
static int xid_count(struct health *h, unsigned code, int64_t now) {
  int n = 0, keep = 0;
  for (int i = 0; i < h->nrecent; i++) {
    if (now - h->recent[i].t > XID_WINDOW_NS)
      continue;
    h->recent[keep++] = h->recent[i];
    n += h->recent[i].code == code;
  }
  h->nrecent = keep;
  return n;
}

static int xid_slot(struct health *h, unsigned code) {
  for (int k = 0; k < h->ncodes; k++)
    if (h->codes[k] == code)
      return k;
  if (h->ncodes == XID_CODES)
    return -1;
  h->codes[h->ncodes] = code;
  return h->ncodes++;
}

/* One delivered event: an Xid is an event xid (its code, NVIDIA's meaning and action; on MIG the
 * instance it belongs to) and the point gpu.xid; an ECC event is an event ecc_error. */
static void xid_write(struct nvml_ctx *c, struct gpu *g, unsigned long long type, unsigned code, unsigned gi,
                      unsigned ci, int64_t t) {
  struct health *h = &g->health;
  char name[16], text[200], where[64] = "";
  if (type != nvmlEventTypeXidCriticalError) {
    int dbe = type == nvmlEventTypeDoubleBitEccError;
    nv_event(c, t, "ecc_error", dbe ? "double_bit" : "single_bit",
             dbe ? "uncorrected (double-bit) ECC error" : "corrected (single-bit) ECC error");
    return;
  }
  if (gi != 0xFFFFFFFFu && ci != 0xFFFFFFFFu)
    snprintf(where, sizeof where, " on MIG GPU instance %u, compute instance %u", gi, ci);
  else if (gi != 0xFFFFFFFFu)
    snprintf(where, sizeof where, " on MIG GPU instance %u", gi);
  const struct gs_xid *x = gs_xid_of(code);
  snprintf(name, sizeof name, "%u", code);
  if (x)
    snprintf(text, sizeof text, "Xid %u (%s)%s: %s", code, x->meaning, where, x->action);
  else
    snprintf(text, sizeof text, "Xid %u%s (see NVIDIA's Xid catalogue)", code, where);
  size_t before = c->n_pe;
  nv_event(c, t, "xid", name, text);
  if (c->n_pe > before) /* queued (not out of memory): its value is the code */
    c->pe[c->n_pe - 1].value = code;
  h->last_xid = code;
  if (h->nrecent == XID_RECENT)
    memmove(h->recent, h->recent + 1, sizeof h->recent[0] * (XID_RECENT - 1)), h->nrecent--;
  h->recent[h->nrecent].code = code, h->recent[h->nrecent].t = t;
  h->nrecent++;
  xid_slot(h, code);
}

/* gpu.xid (the last code) and gpu.xid_count{xid=C}, at every counter reading once an Xid came: a
 * gauge read by /metrics must stay fresh, as DCGM keeps its last value. */
static void xid_series(struct nvml_ctx *c, struct gpu *g, int64_t t) {
  struct health *h = &g->health;
  if (isnan(h->last_xid))
    return;
  nv_emit(c, g, M_XID, t, h->last_xid);
  for (int k = 0; k < h->ncodes; k++) {
    if (t <= h->code_last_t[k] || nv_grow((void **)&c->pp, &c->cap_pp, c->n_pp + 1, sizeof *c->pp))
      continue;
    h->code_last_t[k] = t;
    c->pp[c->n_pp++] =
        (struct pend_point){.metric = M_XID_COUNT, .proc = k, .mig = -1, .t = t, .v = xid_count(h, h->codes[k], t)};
  }
}

static void ecc_read(struct nvml_ctx *c, struct gpu *g, int64_t t) {
  static const struct {
    unsigned type, counter;
    enum metric m;
  } ecc[4] = {{NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, M_ECC_SBE_VOL},
              {NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, M_ECC_DBE_VOL},
              {NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC, M_ECC_SBE_AGG},
              {NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC, M_ECC_DBE_AGG}};
  for (int k = 0; k < 4 && !g->lost; k++) {
    unsigned long long n;
    if (CALL(C_ECC, c->api.nvmlDeviceGetTotalEccErrors(g->dev, ecc[k].type, ecc[k].counter, &n)))
      nv_emit(c, g, ecc[k].m, t, (double)n);
  }
}

static void remap_read(struct nvml_ctx *c, struct gpu *g, int64_t t) {
  unsigned corr, unc, pend, fail;
  if (!CALL(C_REMAP, c->api.nvmlDeviceGetRemappedRows(g->dev, &corr, &unc, &pend, &fail)))
    return;
  nv_emit(c, g, M_REMAP_CORR, t, corr);
  nv_emit(c, g, M_REMAP_UNC, t, unc);
  nv_emit(c, g, M_REMAP_PENDING, t, pend != 0);
  nv_emit(c, g, M_REMAP_FAILURE, t, fail != 0);
}

/* Retired pages (pre-Ampere GPUs; Ampere and newer remap rows and answer NOT_SUPPORTED here). A
 * count query answers INSUFFICIENT_SIZE with the count when there are pages. */
static void retired_read(struct nvml_ctx *c, struct gpu *g, int64_t t) {
  static const struct {
    unsigned cause;
    enum metric m;
  } rp[2] = {{NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, M_RETIRED_SBE},
             {NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, M_RETIRED_DBE}};
  for (int k = 0; k < 2 && !g->off[C_RETIRED]; k++) {
    unsigned n = 0;
    nvmlReturn_t r = c->api.nvmlDeviceGetRetiredPages(g->dev, rp[k].cause, &n, NULL);
    if (r == NVML_ERROR_INSUFFICIENT_SIZE)
      r = NVML_SUCCESS;
    if (!nv_ok(c, g, C_RETIRED, r))
      return;
    nv_emit(c, g, rp[k].m, t, n);
  }
  unsigned pend;
  if (!g->off[C_RETIRED] && c->api.nvmlDeviceGetRetiredPagesPendingStatus &&
      nv_ok(c, g, C_RETIRED, c->api.nvmlDeviceGetRetiredPagesPendingStatus(g->dev, &pend)))
    nv_emit(c, g, M_RETIRED_PENDING, t, pend != 0);
}

/* The links to read: those active at the first reading. A link past the GPU's own answers an error
 * (INVALID_ARGUMENT, NOT_SUPPORTED); no link at all (a PCIe card) switches NVLink off with a note. */
static void links_list(struct nvml_ctx *c, struct gpu *g) {
  struct health *h = &g->health;
  h->links_listed = 1;
  nvmlReturn_t first = NVML_SUCCESS;
  for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
    unsigned active = 0;
    nvmlReturn_t r = c->api.nvmlDeviceGetNvLinkState(g->dev, l, &active);
    if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_GPU_NOT_FOUND) {
      nv_lose(c, g, r);
      return;
    }
    if (r != NVML_SUCCESS) {
      if (l == 0)
        first = r;
      break;
    }
    if (active == NVML_FEATURE_ENABLED)
      h->link[h->nlinks++] = (unsigned char)l;
  }
  if (!h->nlinks)
    nv_verdict(c, g, NULL, C_NVLINK, first == NVML_SUCCESS ? NVML_ERROR_NOT_SUPPORTED : first);
}

static void nvlink_read(struct nvml_ctx *c, struct gpu *g, int64_t t) {
  static const struct {
    unsigned counter;
    enum metric m;
  } nl[4] = {{NVML_NVLINK_ERROR_DL_REPLAY, M_NVLINK_REPLAY},
             {NVML_NVLINK_ERROR_DL_RECOVERY, M_NVLINK_RECOVERY},
             {NVML_NVLINK_ERROR_DL_CRC_FLIT, M_NVLINK_CRC_FLIT},
             {NVML_NVLINK_ERROR_DL_CRC_DATA, M_NVLINK_CRC_DATA}};
  struct health *h = &g->health;
  if (g->off[C_NVLINK])
    return;
  if (!h->links_listed)
    links_list(c, g);
  for (int k = 0; k < 4 && h->nlinks && !g->off[C_NVLINK] && !g->lost; k++) {
    double sum = 0;
    unsigned l;
    for (l = 0; l < h->nlinks; l++) {
      unsigned long long v;
      if (!CALL(C_NVLINK, c->api.nvmlDeviceGetNvLinkErrorCounter(g->dev, h->link[l], nl[k].counter, &v)))
        break;
      sum += (double)v;
    }
    if (l == h->nlinks) /* a total of some links only would be a drop, then a rise */
      nv_emit(c, g, nl[k].m, t, sum);
  }
}

int nv_health_xids(struct nvml_ctx *c, struct gpu *g) {
  struct health *h = &g->health;
  int n = h->nfresh;
  if (!n)
    return 0;
  int64_t t = nv_stamp(c);
  for (int i = 0; i < n; i++)
    xid_write(c, g, h->fresh[i].type, h->fresh[i].code, h->fresh[i].gi, h->fresh[i].ci,
              h->fresh[i].t > t ? t : h->fresh[i].t);
  h->nfresh = 0;
  xid_series(c, g, t);
  return n;
}

void nv_health_tick(struct nvml_ctx *c, struct gpu *g) {
  struct health *h = &g->health;
  int64_t now = gs_mono_ns();
  if (now < h->next_ns)
    return;
  int64_t t = nv_stamp(c);
  h->next_ns = now + HEALTH_EVERY_NS;
  ecc_read(c, g, t);
  RETURN_IF_LOST();
  remap_read(c, g, t);
  RETURN_IF_LOST();
  retired_read(c, g, t);
  RETURN_IF_LOST();
  unsigned u;
  if (CALL(C_PCIE_REPLAY, c->api.nvmlDeviceGetPcieReplayCounter(g->dev, &u)))
    nv_emit(c, g, M_PCIE_REPLAY, t, u);
  RETURN_IF_LOST();
  nvlink_read(c, g, t);
  RETURN_IF_LOST();
  xid_series(c, g, t);
}
