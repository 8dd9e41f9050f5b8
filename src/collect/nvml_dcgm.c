/* collect/nvml_dcgm: SM activity on GPUs without GPM (Volta to Ada) from DCGM's profiling fields,
 * where the host has DCGM. Part of the NVML collector, not a collector of its own: the values
 * become the same series GPM gives (gpu.sm_active_pct, gpu.sm_occupancy_pct, gpu.tensor_active_pct,
 * gpu.dram_active_pct; source nvml, labels gpu=N), so every reader of those (the doctor, the charts,
 * /metrics) works unchanged. DCGM is loaded at open (dcgm_api.c) only when some GPU lacks GPM;
 * its fields are watched at the sampling interval, read once per tick before the GPUs
 * (nv_dcgm_poll) and written in each GPU's own tick (nv_dcgm_tick), as health's events are. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "collect/nvml_int.h"

#define DCGM_MIN_FREQ_US 100000 /* DCGM's profiling fields are sampled at most every 100 ms */
#define DCGM_CONNECT_MS 1000    /* how long to wait for a running nv-hostengine */

static const struct {
  unsigned short field;
  enum metric metric;
} dcgm_table[N_DCGM] = {
    {DCGM_FI_PROF_SM_ACTIVE, M_SM_ACTIVE},
    {DCGM_FI_PROF_SM_OCCUPANCY, M_SM_OCCUPANCY},
    {DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, M_TENSOR_ACTIVE},
    {DCGM_FI_PROF_DRAM_ACTIVE, M_DRAM_ACTIVE},
};

/* Whether DCGM should read GPU g: GPM does not (absent, or refused), and it is a whole GPU. */
static int dcgm_wants(const struct gpu *g) {
  return !g->lost && !g->gpm.on && g->mig_mode != 1;
}

/* Connects to the host engine at addr ("host[:port]", or a UNIX socket: "/path", "unix:///path").
 * Returns DCGM's answer. */
static dcgmReturn_t dcgm_connect(struct nv_dcgm *d, const char *addr) {
  dcgmConnectV2Params_t p = {.version = dcgmConnectV2Params_version2, .timeoutMs = DCGM_CONNECT_MS};
  if (!strncmp(addr, "unix://", 7))
    addr += 7;
  p.addressIsUnixSocket = addr[0] == '/';
  dcgmReturn_t r = d->api.dcgmConnect_v2(addr, &p, &d->h);
  if (r == DCGM_ST_OK)
    snprintf(d->how, sizeof d->how, "host engine %s", addr);
  return r;
}

/* Reaches a host engine: the one $GPUSCOPE_DCGM_HOST names ("embedded": one started in this
 * process), else a running nv-hostengine on this host (it may be watching these fields already, for
 * dcgm-exporter; a second profiler beside it would be refused), else an embedded one. Returns 0, or
 * -1 with the reason in err. */
static int dcgm_reach(struct nv_dcgm *d, const char *host, char *err, size_t errlen) {
  dcgmReturn_t r = DCGM_ST_OK;
  if (host && *host && strcmp(host, "embedded")) {
    if ((r = dcgm_connect(d, host)) == DCGM_ST_OK)
      return 0;
    snprintf(err, errlen, "cannot connect to the host engine at %s: %s", host, dcgm_api_strerror(&d->api, r));
    return -1;
  }
  if (!host || !*host) {
    char local[32];
    snprintf(local, sizeof local, "127.0.0.1:%d", DCGM_HE_PORT_NUMBER);
    if (dcgm_connect(d, local) == DCGM_ST_OK)
      return 0;
  }
  if ((r = d->api.dcgmStartEmbedded(DCGM_OPERATION_MODE_AUTO, &d->h)) != DCGM_ST_OK) {
    snprintf(err, errlen, "dcgmStartEmbedded: %s", dcgm_api_strerror(&d->api, r));
    return -1;
  }
  d->embedded = 1;
  snprintf(d->how, sizeof d->how, "embedded");
  return 0;
}

/* The GPU DCGM's attributes a describe: the one wanted with that UUID, else that PCI bus id. */
static struct gpu *dcgm_match(struct nvml_ctx *c, const dcgmDeviceIdentifiers_v1 *a) {
  for (int by_pci = 0; by_pci < 2; by_pci++)
    for (unsigned i = 0; i < c->n_gpus; i++) {
      struct gpu *g = &c->gpus[i];
      const char *ours = by_pci ? g->pci_bus_id : g->uuid, *theirs = by_pci ? a->pciBusId : a->uuid;
      if (dcgm_wants(g) && !g->dcgm.on && ours[0] && !strncasecmp(ours, theirs, DCGM_MAX_STR_LENGTH))
        return g;
    }
  return NULL;
}

/* Finds DCGM's id of every wanted GPU and puts it in the group. Returns how many, or -1 with the
 * reason in err. */
static int dcgm_map(struct nvml_ctx *c, struct nv_dcgm *d, char *err, size_t errlen) {
  unsigned ids[DCGM_MAX_NUM_DEVICES];
  int n = 0, found = 0;
  dcgmReturn_t r = d->api.dcgmGetAllSupportedDevices(d->h, ids, &n);
  if (r != DCGM_ST_OK) {
    snprintf(err, errlen, "dcgmGetAllSupportedDevices: %s", dcgm_api_strerror(&d->api, r));
    return -1;
  }
  dcgmDeviceAttributes_t *a = malloc(sizeof *a);
  if (!a) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (int k = 0; k < n && k < DCGM_MAX_NUM_DEVICES; k++) {
    memset(a, 0, sizeof *a);
    a->version = dcgmDeviceAttributes_version3;
    if (d->api.dcgmGetDeviceAttributes(d->h, ids[k], a) != DCGM_ST_OK)
      continue;
    a->identifiers.uuid[DCGM_MAX_STR_LENGTH - 1] = a->identifiers.pciBusId[DCGM_MAX_STR_LENGTH - 1] = 0;
    struct gpu *g = dcgm_match(c, &a->identifiers);
    if (!g || d->api.dcgmGroupAddDevice(d->h, d->group, ids[k]) != DCGM_ST_OK)
      continue;
    g->dcgm.on = 1, g->dcgm.id = ids[k];
    found++;
  }
  free(a);
  return found;
}

/* Why a watch was refused, in the user's words (the cause DCGM names, and what to do). */
static const char *dcgm_refusal_hint(dcgmReturn_t r) {
  switch (r) {
  case DCGM_ST_IN_USE:
  case DCGM_ST_PROFILING_LIBRARY_ERROR:
    return " (another profiler holds the GPU's counters: Nsight Systems or Compute, or a second DCGM; "
           "DCGM profiling cannot run beside it)";
  case DCGM_ST_REQUIRES_ROOT:
  case DCGM_ST_NO_PERMISSION:
    return " (profiling needs root, or the driver's NVreg_RestrictProfilingToAdminUsers=0)";
  case DCGM_ST_PROFILING_NOT_SUPPORTED:
    return " (DCGM profiles data-center GPUs from Volta on)";
  default:
    return "";
  }
}

/* The group, the field group and the watch. Returns 0, or -1 with the reason in err. */
static int dcgm_watch(struct nvml_ctx *c, struct nv_dcgm *d, char *err, size_t errlen) {
  char name[64];
  snprintf(name, sizeof name, "gpuscope-%ld-%lld", (long)getpid(), (long long)gs_mono_ns());
  dcgmReturn_t r = d->api.dcgmGroupCreate(d->h, DCGM_GROUP_EMPTY, name, &d->group);
  if (r != DCGM_ST_OK) {
    snprintf(err, errlen, "dcgmGroupCreate: %s", dcgm_api_strerror(&d->api, r));
    return -1;
  }
  d->have_group = 1;
  int n = dcgm_map(c, d, err, errlen);
  if (n <= 0) {
    if (n == 0)
      snprintf(err, errlen, "none of its GPUs is one of NVML's without GPM");
    return -1;
  }
  unsigned short ids[N_DCGM];
  for (int k = 0; k < N_DCGM; k++)
    ids[k] = dcgm_table[k].field;
  if ((r = d->api.dcgmFieldGroupCreate(d->h, N_DCGM, ids, name, &d->fields)) != DCGM_ST_OK) {
    snprintf(err, errlen, "dcgmFieldGroupCreate: %s", dcgm_api_strerror(&d->api, r));
    return -1;
  }
  d->have_fields = 1;
  long long us = c->interval_ns / 1000;
  if (us < DCGM_MIN_FREQ_US)
    us = DCGM_MIN_FREQ_US;
  /* Only the latest value is read: two kept are enough, for at most 10 intervals. */
  r = d->api.dcgmWatchFields(d->h, d->group, d->fields, us, fmax(1.0, 10.0 * (double)us / 1e6), 2);
  if (r != DCGM_ST_OK) {
    snprintf(err, errlen, "profiling refused: %s%s", dcgm_api_strerror(&d->api, r), dcgm_refusal_hint(r));
    return -1;
  }
  d->watching = 1;
  return 0;
}

/* Leaves DCGM: the watch, the groups, the host engine, the library (see nv_dcgm_stop). */
static void dcgm_free(struct nv_dcgm *d, int shutdown) {
  if (!d)
    return;
  if (shutdown && !d->gone && d->h) {
    if (d->watching)
      d->api.dcgmUnwatchFields(d->h, d->group, d->fields);
    if (d->have_fields)
      d->api.dcgmFieldGroupDestroy(d->h, d->fields);
    if (d->have_group)
      d->api.dcgmGroupDestroy(d->h, d->group);
  }
  if (shutdown && d->h)
    (d->embedded ? d->api.dcgmStopEmbedded : d->api.dcgmDisconnect)(d->h);
  dcgm_api_close(&d->api, shutdown);
  free(d);
}

/* The params that say where the series come from: nvml.dcgm, and gpu.N.sm_active_from per GPU. */
static void dcgm_params(struct nvml_ctx *c, const struct nv_dcgm *d) {
  gs_sink_param(c->sink, "nvml.dcgm", d->how);
  for (unsigned i = 0; i < c->n_gpus; i++)
    if (c->gpus[i].dcgm.on)
      nv_param(c->sink, c->gpus[i].index, "sm_active_from", "dcgm");
}

/* The GPUs DCGM was for ("gpu0,gpu2"), into buf. Returns buf. */
static const char *dcgm_wanted_list(const struct nvml_ctx *c, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (unsigned i = 0; i < c->n_gpus && at + 1 < n; i++)
    if (dcgm_wants(&c->gpus[i]))
      at += (size_t)snprintf(buf + at, n - at, "%sgpu%u", at ? "," : "", c->gpus[i].index);
  return buf;
}

/* nv_dcgm_start's work, once it is known that DCGM is wanted. */
static int dcgm_start(struct nvml_ctx *c, const char *host) {
  char err[320], gpus[128];
  struct nv_dcgm *d = calloc(1, sizeof *d);
  if (!d)
    return GS_ENOMEM;
  const char *lib = getenv("GPUSCOPE_DCGM_LIB");
  int e = dcgm_api_open(&d->api, NULL, err, sizeof err);
  if (e) {
    if (e != GS_ENOENT || (lib && *lib)) /* the default library absent: nothing changes, no note */
      gs_sink_note(c->sink, "dcgm: %s: SM activity unknown on %s", err, dcgm_wanted_list(c, gpus, sizeof gpus));
    free(d);
    return 0;
  }
  if (dcgm_reach(d, host, err, sizeof err) || dcgm_watch(c, d, err, sizeof err)) {
    gs_sink_note(c->sink, "dcgm: %s: SM activity unknown on %s", err, dcgm_wanted_list(c, gpus, sizeof gpus));
    for (unsigned i = 0; i < c->n_gpus; i++)
      c->gpus[i].dcgm.on = 0;
    dcgm_free(d, 1);
    return 0;
  }
  for (unsigned i = 0; i < c->n_gpus; i++)
    for (int k = 0; k < N_DCGM; k++)
      c->gpus[i].dcgm.fresh[k] = NAN;
  dcgm_params(c, d);
  c->dcgm = d;
  return 0;
}

int nv_dcgm_start(struct nvml_ctx *c) {
  unsigned want = 0;
  for (unsigned i = 0; i < c->n_gpus; i++)
    want += (unsigned)dcgm_wants(&c->gpus[i]);
  const char *host = getenv("GPUSCOPE_DCGM_HOST");
  if (!want || (host && !strcmp(host, "off")))
    return 0;
  /* An embedded host engine starts threads of its own: they take no signals, as the sampling
   * thread takes none, so the run loop's handlers (forwarding to the job) stay on the run loop. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int r = dcgm_start(c, host);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return r;
}

/* dcgmGetLatestValues_v2's callback: one GPU's values, kept for its tick when newer than the last. */
static int dcgm_take(dcgm_field_entity_group_t eg, dcgm_field_eid_t id, dcgmFieldValue_v1 *v, int n, void *arg) {
  struct nvml_ctx *c = arg;
  struct gpu *g = NULL;
  for (unsigned i = 0; i < c->n_gpus && !g && eg == DCGM_FE_GPU; i++)
    if (c->gpus[i].dcgm.on && c->gpus[i].dcgm.id == id)
      g = &c->gpus[i];
  for (int j = 0; g && j < n; j++) {
    int k = 0;
    while (k < N_DCGM && dcgm_table[k].field != v[j].fieldId)
      k++;
    if (k == N_DCGM)
      continue;
    double x = v[j].value.dbl;
    int ok = v[j].status == DCGM_ST_OK && v[j].fieldType == DCGM_FT_DOUBLE;
    if (ok && !DCGM_FP64_IS_BLANK(x) && isfinite(x) && v[j].ts > g->dcgm.ts[k]) {
      g->dcgm.fresh[k] = x * 100.0; /* a ratio: the series are % */
      g->dcgm.ts[k] = v[j].ts;
    } else if (!g->dcgm.noted[k] && (ok ? x >= DCGM_FP64_BLANK + 2.0 : v[j].status != DCGM_ST_NO_DATA)) {
      /* not supported / not permissioned (an answer, unlike a blank before the first sample) */
      g->dcgm.noted[k] = 1;
      nv_note(c, "gpu%u: DCGM %s: %s", g->index, nv_metrics[dcgm_table[k].metric].name,
              ok ? (x >= DCGM_FP64_BLANK + 3.0 ? "no permission" : "not supported")
                 : dcgm_api_strerror(&c->dcgm->api, v[j].status));
    }
  }
  return 0;
}

void nv_dcgm_poll(struct nvml_ctx *c) {
  struct nv_dcgm *d = c->dcgm;
  if (!d || d->gone)
    return;
  dcgmReturn_t r = d->api.dcgmGetLatestValues_v2(d->h, d->group, d->fields, dcgm_take, c);
  if (r == DCGM_ST_OK) {
    d->noted_poll = 0;
  } else if (r == DCGM_ST_CONNECTION_NOT_VALID) {
    d->gone = 1;
    nv_note(c, "dcgm: %s: %s; SM activity unknown from now on", d->how, dcgm_api_strerror(&d->api, r));
  } else if (!d->noted_poll) {
    d->noted_poll = 1;
    nv_note(c, "dcgm: dcgmGetLatestValues_v2: %s (retrying)", dcgm_api_strerror(&d->api, r));
  }
}

void nv_dcgm_tick(struct nvml_ctx *c, struct gpu *g) {
  if (!c->dcgm || !g->dcgm.on)
    return;
  for (int k = 0; k < N_DCGM; k++)
    if (isfinite(g->dcgm.fresh[k])) {
      nv_emit(c, g, dcgm_table[k].metric, nv_stamp(c), g->dcgm.fresh[k]);
      g->dcgm.fresh[k] = NAN;
    }
}

void nv_dcgm_stop(struct nvml_ctx *c, int shutdown) {
  dcgm_free(c->dcgm, shutdown);
  c->dcgm = NULL;
}
