/* gpusim/gpusim_health: the simulated driver's health calls — an event set that delivers the
 * scenario's Xid and ECC events once their time has come, the ECC totals and mode, remapped rows,
 * retired pages, the PCIe replay counter and NVLink state and error counters, all from the
 * scenario's timeline (README.md, "Health"). A call a scenario faults (`fault ecc NOT_SUPPORTED`:
 * a consumer card) answers that code; a MIG device handle answers NOT_SUPPORTED, as on a real
 * driver. The legacy build (an old driver) exports none of them. */
#include <stdlib.h>
#include <string.h>

#include "collect/nvml_api.h"
#include "gpusim.h"

#ifndef GPUSIM_LEGACY

#define EXPORT __attribute__((visibility("default")))
#define HACCT(expr)                                                                                                    \
  do {                                                                                                                 \
    long long t0_ = gpusim_thread_cpu();                                                                               \
    nvmlReturn_t r_ = (expr);                                                                                          \
    gpusim_account(t0_);                                                                                               \
    return r_;                                                                                                         \
  } while (0)

#define HCHECK(h, call)                                                                                                \
  struct sim_dev *d = NULL;                                                                                            \
  double t = 0;                                                                                                        \
  nvmlReturn_t rc_ = gpusim_check((struct nvmlDevice_st *)(h), (call), &d, &t);                                        \
  if (rc_ != NVML_SUCCESS)                                                                                             \
    return rc_;

enum { SET_DEVS = 64 };
#define SET_MAGIC 0x65767473u
#define SIM_EVENT_TYPES                                                                                                \
  (nvmlEventTypeXidCriticalError | nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError)

struct nvmlEventSet_st {
  unsigned magic;
  unsigned long long types[SET_DEVS]; /* registered per device index (0: none) */
  double since[SET_DEVS];             /* events from this scenario time on (the registration) */
  unsigned char done[SET_DEVS][SIM_MAX_EVENTS];
};

static nvmlReturn_t set_create_impl(nvmlEventSet_t *set) {
  if (!gpusim_scn())
    return NVML_ERROR_UNINITIALIZED;
  if (!set)
    return NVML_ERROR_INVALID_ARGUMENT;
  struct nvmlEventSet_st *s = calloc(1, sizeof *s);
  if (!s)
    return NVML_ERROR_MEMORY;
  s->magic = SET_MAGIC;
  *set = s;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
  HACCT(set_create_impl(set));
}

static nvmlReturn_t set_free_impl(nvmlEventSet_t set) {
  if (!set || set->magic != SET_MAGIC)
    return NVML_ERROR_INVALID_ARGUMENT;
  set->magic = 0;
  free(set);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  HACCT(set_free_impl(set));
}

/* Every type asked must be one the device has: ECC types only where ECC answers (a consumer card's
 * `fault ecc NOT_SUPPORTED` refuses them), as NVML refuses a mask with an unsupported type. */
static nvmlReturn_t register_impl(nvmlDevice_t h, unsigned long long types, nvmlEventSet_t set) {
  HCHECK(h, SC_EVENTS);
  if (!set || set->magic != SET_MAGIC || d->index >= SET_DEVS || (types & ~SIM_EVENT_TYPES))
    return NVML_ERROR_INVALID_ARGUMENT;
  struct sim_dev *x = NULL;
  double t2;
  if ((types & (nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError)) &&
      gpusim_check((struct nvmlDevice_st *)h, SC_ECC, &x, &t2) != NVML_SUCCESS)
    return NVML_ERROR_NOT_SUPPORTED;
  gpusim_lock(1);
  set->types[d->index] |= types;
  set->since[d->index] = t;
  gpusim_lock(0);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t h, unsigned long long types, nvmlEventSet_t set) {
  HACCT(register_impl(h, types, set));
}

/* The earliest event due and not yet delivered on a registered device; TIMEOUT at once when none
 * (the simulator never waits: its clock may be a test's file). */
static nvmlReturn_t wait_impl(nvmlEventSet_t set, nvmlEventData_t *data) {
  struct sim_scn *s = gpusim_scn();
  if (!s)
    return NVML_ERROR_UNINITIALIZED;
  if (!set || set->magic != SET_MAGIC || !data)
    return NVML_ERROR_INVALID_ARGUMENT;
  double now = gpusim_now();
  int bi = -1, bk = -1;
  gpusim_lock(1);
  for (unsigned i = 0; i < s->ndev && i < SET_DEVS; i++) {
    const struct sim_dev *d = &s->dev[i];
    for (int k = 0; set->types[i] && k < d->nevents; k++) {
      const struct sim_event *e = &d->events[k];
      if (set->done[i][k] || !(e->type & set->types[i]) || e->t > now || e->t < set->since[i])
        continue;
      if (bi < 0 || e->t < s->dev[bi].events[bk].t)
        bi = (int)i, bk = k;
    }
  }
  if (bi >= 0) {
    const struct sim_event *e = &s->dev[bi].events[bk];
    set->done[bi][bk] = 1;
    memset(data, 0, sizeof *data);
    data->device = (nvmlDevice_t)&s->dev[bi];
    data->eventType = e->type;
    data->eventData = e->type == nvmlEventTypeXidCriticalError ? e->data : 0;
    data->gpuInstanceId = e->gi;
    data->computeInstanceId = e->ci;
  }
  gpusim_lock(0);
  return bi >= 0 ? NVML_SUCCESS : NVML_ERROR_TIMEOUT;
}
EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeout_ms) {
  (void)timeout_ms;
  HACCT(wait_impl(set, data));
}

static nvmlReturn_t ecc_impl(nvmlDevice_t h, unsigned type, unsigned counter, unsigned long long *n) {
  HCHECK(h, SC_ECC);
  if (!n || type > 1 || counter > 1)
    return NVML_ERROR_INVALID_ARGUMENT;
  double v = sim_counter(d, type ? K_ECC_DBE : K_ECC_SBE, t);
  if (counter == NVML_AGGREGATE_ECC)
    v += sim_value(d, type ? K_ECC_DBE_AGG : K_ECC_SBE_AGG, t);
  *n = (unsigned long long)v;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t h, unsigned type, unsigned counter,
                                                unsigned long long *n) {
  HACCT(ecc_impl(h, type, counter, n));
}

static nvmlReturn_t ecc_mode_impl(nvmlDevice_t h, unsigned *cur, unsigned *pend) {
  HCHECK(h, SC_ECC);
  (void)t;
  if (!cur || !pend)
    return NVML_ERROR_INVALID_ARGUMENT;
  *cur = *pend = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t h, unsigned *cur, unsigned *pend) {
  HACCT(ecc_mode_impl(h, cur, pend));
}

static nvmlReturn_t remap_impl(nvmlDevice_t h, unsigned *corr, unsigned *unc, unsigned *pend, unsigned *fail) {
  HCHECK(h, SC_REMAP);
  if (!corr || !unc || !pend || !fail)
    return NVML_ERROR_INVALID_ARGUMENT;
  *corr = (unsigned)sim_value(d, K_REMAP_CORR, t);
  *unc = (unsigned)sim_value(d, K_REMAP_UNC, t);
  *pend = sim_value(d, K_REMAP_PENDING, t) != 0;
  *fail = sim_value(d, K_REMAP_FAILURE, t) != 0;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t h, unsigned *corr, unsigned *unc, unsigned *pend,
                                              unsigned *fail) {
  HACCT(remap_impl(h, corr, unc, pend, fail));
}

/* The count only (addresses 0x1000 apart when asked): INSUFFICIENT_SIZE with the count when the
 * buffer is smaller, as NVML answers a count query. */
static nvmlReturn_t retired_impl(nvmlDevice_t h, unsigned cause, unsigned *count, unsigned long long *addr) {
  HCHECK(h, SC_RETIRED);
  if (!count || cause > 1)
    return NVML_ERROR_INVALID_ARGUMENT;
  unsigned n = (unsigned)sim_value(d, cause ? K_RETIRED_DBE : K_RETIRED_SBE, t), cap = *count;
  *count = n;
  if (cap < n || (n && !addr))
    return NVML_ERROR_INSUFFICIENT_SIZE;
  for (unsigned i = 0; i < n; i++)
    addr[i] = 0x1000ULL * (i + 1);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t h, unsigned cause, unsigned *count,
                                              unsigned long long *addr) {
  HACCT(retired_impl(h, cause, count, addr));
}

static nvmlReturn_t retired_pending_impl(nvmlDevice_t h, unsigned *pend) {
  HCHECK(h, SC_RETIRED);
  if (!pend)
    return NVML_ERROR_INVALID_ARGUMENT;
  *pend = sim_value(d, K_RETIRED_PENDING, t) != 0;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t h, unsigned *pend) {
  HACCT(retired_pending_impl(h, pend));
}

static nvmlReturn_t replay_impl(nvmlDevice_t h, unsigned *v) {
  HCHECK(h, SC_PCIE_REPLAY);
  if (!v)
    return NVML_ERROR_INVALID_ARGUMENT;
  *v = (unsigned)sim_counter(d, K_PCIE_REPLAY, t);
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t h, unsigned *v) {
  HACCT(replay_impl(h, v));
}

/* A GPU without NVLink answers NOT_SUPPORTED; a link past its own, INVALID_ARGUMENT. */
static nvmlReturn_t link_ok(const struct sim_dev *d, unsigned link) {
  if (!d->nvlinks)
    return NVML_ERROR_NOT_SUPPORTED;
  return link < d->nvlinks ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

static nvmlReturn_t nvlink_state_impl(nvmlDevice_t h, unsigned link, unsigned *active) {
  HCHECK(h, SC_NVLINK);
  (void)t;
  nvmlReturn_t r = link_ok(d, link);
  if (r != NVML_SUCCESS)
    return r;
  if (!active)
    return NVML_ERROR_INVALID_ARGUMENT;
  *active = NVML_FEATURE_ENABLED;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t h, unsigned link, unsigned *active) {
  HACCT(nvlink_state_impl(h, link, active));
}

static nvmlReturn_t nvlink_err_impl(nvmlDevice_t h, unsigned link, unsigned counter, unsigned long long *v) {
  HCHECK(h, SC_NVLINK);
  nvmlReturn_t r = link_ok(d, link);
  if (r != NVML_SUCCESS)
    return r;
  if (!v || counter > NVML_NVLINK_ERROR_DL_CRC_DATA)
    return NVML_ERROR_INVALID_ARGUMENT;
  static const enum sim_key keys[4] = {K_NVLINK_REPLAY, K_NVLINK_RECOVERY, K_NVLINK_CRC_FLIT, K_NVLINK_CRC_DATA};
  *v = link == 0 ? (unsigned long long)sim_counter(d, keys[counter], t) : 0;
  return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t h, unsigned link, unsigned counter,
                                                    unsigned long long *v) {
  HACCT(nvlink_err_impl(h, link, counter, v));
}

#endif
typedef int gpusim_health_unused; /* keeps the legacy build's translation unit non-empty */
