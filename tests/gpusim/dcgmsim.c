/* gpusim/dcgmsim: a simulated libdcgm.so.4 beside the simulated NVML, answering from the same
 * scenario file ($GPUSIM_SCENARIO, README.md): every device of the scenario is one of DCGM's GPUs
 * (its DCGM id counted from the last device, so the collector must find it by UUID, as on a host
 * where the two orders differ), and the profiling fields give the scenario's `sm_active`,
 * `sm_occupancy`, `tensor` and `dram` as ratios, each the average over the watch period that ended
 * last, stamped with that period's end, as DCGM's cache updates them. Top-level `dcgm` lines say
 * whether a host engine runs and whether profiling is refused (busy beside Nsight, unsupported).
 * Time counts from the first dcgmInit, or follows $GPUSIM_CLOCK's file as the NVML simulator does. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/dcgm_api.h"
#include "gpusim.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_GROUPS 8
#define MAX_FIELDS 16

static struct {
  pthread_mutex_t mu;
  int refs;
  struct sim_scn scn;
  double t0_mono;
  long long t0_wall_us;
  struct {
    int used, watched, n;
    unsigned ids[DCGM_MAX_NUM_DEVICES];
    long long freq_us;
  } groups[MAX_GROUPS];
  struct {
    int used, n;
    unsigned short ids[MAX_FIELDS];
  } fields[MAX_GROUPS];
} S = {.mu = PTHREAD_MUTEX_INITIALIZER};

static double now_s(void) {
  return sim_clock_s(S.t0_mono);
}

/* The device whose DCGM id is id (ids count down from the last device), or NULL. */
static const struct sim_dev *dev_of(unsigned id) {
  if (id >= S.scn.ndev)
    return NULL;
  const struct sim_dev *d = &S.scn.dev[S.scn.ndev - 1 - id];
  return now_s() < d->gone_at ? d : NULL;
}

EXPORT dcgmReturn_t dcgmInit(void) {
  pthread_mutex_lock(&S.mu);
  dcgmReturn_t r = DCGM_ST_OK;
  if (S.refs == 0) {
    const char *path = getenv("GPUSIM_SCENARIO");
    char err[512];
    if (!path || !*path) {
      r = DCGM_ST_INIT_ERROR;
    } else if (sim_scn_load(path, &S.scn, err, sizeof err)) {
      fprintf(stderr, "dcgmsim: %s\n", err);
      r = DCGM_ST_INIT_ERROR;
    } else {
      sim_scn_keep(&S.scn, 0); /* `vendor amd` devices are the ROCm SMI stand-in's */
      struct timespec w;
      clock_gettime(CLOCK_REALTIME, &w);
      S.t0_mono = sim_mono_s();
      S.t0_wall_us = (long long)w.tv_sec * 1000000 + w.tv_nsec / 1000;
    }
  }
  if (r == DCGM_ST_OK)
    S.refs++;
  pthread_mutex_unlock(&S.mu);
  return r;
}

EXPORT dcgmReturn_t dcgmShutdown(void) {
  pthread_mutex_lock(&S.mu);
  if (S.refs > 0 && --S.refs == 0) {
    sim_scn_free(&S.scn);
    memset(S.groups, 0, sizeof S.groups);
    memset(S.fields, 0, sizeof S.fields);
  }
  pthread_mutex_unlock(&S.mu);
  return DCGM_ST_OK;
}

EXPORT const char *errorString(dcgmReturn_t r) {
  switch (r) {
  case DCGM_ST_OK:
    return "Success";
  case DCGM_ST_IN_USE:
    return "The requested operation could not be completed because the affected resource is in use";
  case DCGM_ST_PROFILING_NOT_SUPPORTED:
    return "Profiling is not supported for this group of GPUs or GPU";
  case DCGM_ST_CONNECTION_NOT_VALID:
    return "Host engine connection invalid/disconnected";
  default:
    return NULL; /* the caller's own names */
  }
}

EXPORT dcgmReturn_t dcgmStartEmbedded(dcgmOperationMode_t mode, dcgmHandle_t *h) {
  if (!S.refs)
    return DCGM_ST_UNINITIALIZED;
  if (mode != DCGM_OPERATION_MODE_AUTO && mode != DCGM_OPERATION_MODE_MANUAL)
    return DCGM_ST_BADPARAM;
  *h = 1;
  return DCGM_ST_OK;
}

EXPORT dcgmReturn_t dcgmStopEmbedded(dcgmHandle_t h) {
  return h == 1 ? DCGM_ST_OK : DCGM_ST_BADPARAM;
}

EXPORT dcgmReturn_t dcgmConnect_v2(const char *addr, dcgmConnectV2Params_t *p, dcgmHandle_t *h) {
  if (!S.refs)
    return DCGM_ST_UNINITIALIZED;
  if (!addr || !p || !h)
    return DCGM_ST_BADPARAM;
  if (p->version != dcgmConnectV2Params_version2)
    return DCGM_ST_VER_MISMATCH;
  if (!S.scn.dcgm_hostengine)
    return DCGM_ST_CONNECTION_NOT_VALID;
  *h = 2;
  return DCGM_ST_OK;
}

EXPORT dcgmReturn_t dcgmDisconnect(dcgmHandle_t h) {
  return h == 2 ? DCGM_ST_OK : DCGM_ST_BADPARAM;
}

EXPORT dcgmReturn_t dcgmGetAllSupportedDevices(dcgmHandle_t h, unsigned int ids[DCGM_MAX_NUM_DEVICES], int *count) {
  (void)h;
  int n = 0;
  for (unsigned id = 0; id < S.scn.ndev && n < DCGM_MAX_NUM_DEVICES; id++)
    if (dev_of(id))
      ids[n++] = id;
  *count = n;
  return DCGM_ST_OK;
}

EXPORT dcgmReturn_t dcgmGetDeviceAttributes(dcgmHandle_t h, unsigned int id, dcgmDeviceAttributes_t *a) {
  (void)h;
  if (a->version != dcgmDeviceAttributes_version3)
    return DCGM_ST_VER_MISMATCH;
  const struct sim_dev *d = dev_of(id);
  if (!d)
    return DCGM_ST_BADPARAM;
  unsigned v = a->version;
  memset(a, 0, sizeof *a);
  a->version = v;
  snprintf(a->identifiers.deviceName, sizeof a->identifiers.deviceName, "%s", d->name);
  snprintf(a->identifiers.uuid, sizeof a->identifiers.uuid, "%s", d->uuid);
  snprintf(a->identifiers.pciBusId, sizeof a->identifiers.pciBusId, "%s", d->pci);
  snprintf(a->identifiers.driverVersion, sizeof a->identifiers.driverVersion, "%s", S.scn.driver);
  return DCGM_ST_OK;
}

EXPORT dcgmReturn_t dcgmGroupCreate(dcgmHandle_t h, dcgmGroupType_t type, const char *name, dcgmGpuGrp_t *g) {
  (void)h, (void)name;
  if (type != DCGM_GROUP_EMPTY)
    return DCGM_ST_NOT_SUPPORTED; /* the simulator has empty groups only */
  for (int k = 0; k < MAX_GROUPS; k++)
    if (!S.groups[k].used) {
      memset(&S.groups[k], 0, sizeof S.groups[k]);
      S.groups[k].used = 1;
      *g = (dcgmGpuGrp_t)k + 1;
      return DCGM_ST_OK;
    }
  return DCGM_ST_MAX_LIMIT;
}

/* The group or field group of a handle, or NULL. */
static __typeof__(&S.groups[0]) group_of(dcgmGpuGrp_t g) {
  return g >= 1 && g <= MAX_GROUPS && S.groups[g - 1].used ? &S.groups[g - 1] : NULL;
}
static __typeof__(&S.fields[0]) fields_of(dcgmFieldGrp_t f) {
  return f >= 1 && f <= MAX_GROUPS && S.fields[f - 1].used ? &S.fields[f - 1] : NULL;
}
#define GROUP(g) group_of(g)
#define FIELDS(f) fields_of(f)

EXPORT dcgmReturn_t dcgmGroupAddDevice(dcgmHandle_t h, dcgmGpuGrp_t g, unsigned int id) {
  (void)h;
  if (!GROUP(g) || !dev_of(id) || GROUP(g)->n >= DCGM_MAX_NUM_DEVICES)
    return DCGM_ST_BADPARAM;
  GROUP(g)->ids[GROUP(g)->n++] = id;
  return DCGM_ST_OK;
}

EXPORT dcgmReturn_t dcgmGroupDestroy(dcgmHandle_t h, dcgmGpuGrp_t g) {
  (void)h;
  if (!GROUP(g))
    return DCGM_ST_NOT_CONFIGURED;
  GROUP(g)->used = 0;
  return DCGM_ST_OK;
}

EXPORT dcgmReturn_t dcgmFieldGroupCreate(dcgmHandle_t h, int n, const unsigned short *ids, const char *name,
                                         dcgmFieldGrp_t *f) {
  (void)h, (void)name;
  if (n < 1 || n > MAX_FIELDS)
    return DCGM_ST_BADPARAM;
  for (int k = 0; k < MAX_GROUPS; k++)
    if (!S.fields[k].used) {
      S.fields[k].used = 1, S.fields[k].n = n;
      memcpy(S.fields[k].ids, ids, (size_t)n * sizeof *ids);
      *f = (dcgmFieldGrp_t)k + 1;
      return DCGM_ST_OK;
    }
  return DCGM_ST_MAX_LIMIT;
}

EXPORT dcgmReturn_t dcgmFieldGroupDestroy(dcgmHandle_t h, dcgmFieldGrp_t f) {
  (void)h;
  if (!FIELDS(f))
    return DCGM_ST_NOT_CONFIGURED;
  FIELDS(f)->used = 0;
  return DCGM_ST_OK;
}

EXPORT dcgmReturn_t dcgmWatchFields(dcgmHandle_t h, dcgmGpuGrp_t g, dcgmFieldGrp_t f, long long freq_us,
                                    double keep_age, int keep_samples) {
  (void)h, (void)keep_age, (void)keep_samples;
  if (!GROUP(g) || !FIELDS(f) || freq_us <= 0)
    return DCGM_ST_BADPARAM;
  if (S.scn.dcgm_watch_code)
    return S.scn.dcgm_watch_code;
  GROUP(g)->watched = 1, GROUP(g)->freq_us = freq_us;
  return DCGM_ST_OK;
}

EXPORT dcgmReturn_t dcgmUnwatchFields(dcgmHandle_t h, dcgmGpuGrp_t g, dcgmFieldGrp_t f) {
  (void)h;
  if (!GROUP(g) || !FIELDS(f))
    return DCGM_ST_BADPARAM;
  GROUP(g)->watched = 0;
  return DCGM_ST_OK;
}

/* One field's latest value on d: the average over the last whole watch period. */
static void field_value(const struct sim_dev *d, unsigned short field, long long freq_us, dcgmFieldValue_v1 *v) {
  static const struct {
    unsigned short field;
    enum sim_key key;
  } keys[] = {{DCGM_FI_PROF_SM_ACTIVE, K_SM_ACTIVE},
              {DCGM_FI_PROF_SM_OCCUPANCY, K_SM_OCC},
              {DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, K_TENSOR},
              {DCGM_FI_PROF_DRAM_ACTIVE, K_DRAM}};
  memset(v, 0, offsetof(dcgmFieldValue_v1, value) + sizeof(double));
  v->version = MAKE_DCGM_VERSION(dcgmFieldValue_v1, 1);
  v->fieldId = field, v->fieldType = DCGM_FT_DOUBLE, v->status = DCGM_ST_OK;
  v->value.dbl = DCGM_FP64_BLANK + 2.0; /* DCGM_FP64_NOT_SUPPORTED */
  double f = (double)freq_us / 1e6, p = floor(now_s() / f);
  for (int k = 0; k < d->n_dcgm_unsupported; k++)
    if (d->dcgm_unsupported[k] == field)
      return;
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
    if (keys[k].field != field)
      continue;
    v->value.dbl = DCGM_FP64_BLANK; /* before the first period ends: no value yet */
    if (p >= 1) {
      v->value.dbl = sim_integral(d, keys[k].key, (p - 1) * f, p * f) / f / 100.0;
      v->ts = S.t0_wall_us + (long long)p * freq_us;
    }
  }
}

EXPORT dcgmReturn_t dcgmGetLatestValues_v2(dcgmHandle_t h, dcgmGpuGrp_t g, dcgmFieldGrp_t f,
                                           dcgmFieldValueEntityEnumeration_f cb, void *user) {
  (void)h;
  if (!GROUP(g) || !FIELDS(f) || !cb)
    return DCGM_ST_BADPARAM;
  static dcgmFieldValue_v1 v[MAX_FIELDS]; /* 4 KiB each: not on the caller's stack (under mu) */
  long long freq_us = GROUP(g)->watched ? GROUP(g)->freq_us : 1000000;
  pthread_mutex_lock(&S.mu);
  for (int i = 0; i < GROUP(g)->n; i++) {
    const struct sim_dev *d = dev_of(GROUP(g)->ids[i]);
    if (!d)
      continue;
    for (int k = 0; k < FIELDS(f)->n; k++) {
      field_value(d, FIELDS(f)->ids[k], freq_us, &v[k]);
      if (!GROUP(g)->watched)
        v[k].status = DCGM_ST_NOT_WATCHED;
    }
    if (cb(DCGM_FE_GPU, GROUP(g)->ids[i], v, FIELDS(f)->n, user))
      break;
  }
  pthread_mutex_unlock(&S.mu);
  return DCGM_ST_OK;
}
