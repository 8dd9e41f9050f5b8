/* collect/nvml_api: gpuscope's own declarations of the part of NVML it uses, and the loader that
 * dlopen()s libnvidia-ml.so.1 and resolves each entry point, newest versioned symbol first. Nothing
 * here needs nvml.h or CUDA at build time: the types are copied from NVIDIA's public nvml.h (CUDA
 * 13.3's, checked against 12.0 and 12.8) and checked by _Static_assert against the x86_64 sizes
 * measured by compiling that header (docs/nvml.md says what is and is not verified). The collector
 * (nvml.c), `gpuscope devices` (nvml_devices.c) and the simulated library (tests/gpusim) all use
 * these declarations.
 *
 * Type and constant names follow nvml.h so the code reads like NVIDIA's documentation; everything
 * gpuscope adds is prefixed nvml_ (lower case). */
#ifndef GS_NVML_API_H
#define GS_NVML_API_H

#include <stddef.h>

/* ---- types (nvml.h names) ---- */

typedef int nvmlReturn_t; /* a 4-byte enum in nvml.h */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpmSample_st *nvmlGpmSample_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_ALREADY_INITIALIZED = 5,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_INSUFFICIENT_POWER = 8,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_TIMEOUT = 10,
  NVML_ERROR_IRQ_ISSUE = 11,
  NVML_ERROR_LIBRARY_NOT_FOUND = 12,
  NVML_ERROR_FUNCTION_NOT_FOUND = 13,
  NVML_ERROR_CORRUPTED_INFOROM = 14,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_RESET_REQUIRED = 16,
  NVML_ERROR_OPERATING_SYSTEM = 17,
  NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
  NVML_ERROR_IN_USE = 19,
  NVML_ERROR_MEMORY = 20,
  NVML_ERROR_NO_DATA = 21,
  NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
  NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
  NVML_ERROR_DEPRECATED = 26,
  NVML_ERROR_NOT_READY = 27,
  NVML_ERROR_GPU_NOT_FOUND = 28,
  NVML_ERROR_UNKNOWN = 999,
};

/* nvmlSamplingType_t */
enum {
  NVML_TOTAL_POWER_SAMPLES = 0,
  NVML_GPU_UTILIZATION_SAMPLES = 1,
  NVML_MEMORY_UTILIZATION_SAMPLES = 2,
  NVML_ENC_UTILIZATION_SAMPLES = 3,
  NVML_DEC_UTILIZATION_SAMPLES = 4,
  NVML_PROCESSOR_CLK_SAMPLES = 5,
  NVML_MEMORY_CLK_SAMPLES = 6,
};

/* nvmlValueType_t */
enum {
  NVML_VALUE_TYPE_DOUBLE = 0,
  NVML_VALUE_TYPE_UNSIGNED_INT = 1,
  NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
  NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
  NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
  NVML_VALUE_TYPE_SIGNED_INT = 5,
  NVML_VALUE_TYPE_UNSIGNED_SHORT = 6,
};

/* nvmlClockType_t, nvmlPcieUtilCounter_t, nvmlTemperatureSensors_t */
enum { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };
enum { NVML_PCIE_UTIL_TX_BYTES = 0, NVML_PCIE_UTIL_RX_BYTES = 1 };
enum { NVML_TEMPERATURE_GPU = 0 };

/* Clock-event (throttle) reason bits. */
#define NVML_CLOCKS_EVENT_REASON_GPU_IDLE 0x1ULL
#define NVML_CLOCKS_EVENT_REASON_APPLICATIONS_CLOCKS_SETTING 0x2ULL
#define NVML_CLOCKS_EVENT_REASON_SW_POWER_CAP 0x4ULL
#define NVML_CLOCKS_EVENT_REASON_HW_SLOWDOWN 0x8ULL
#define NVML_CLOCKS_EVENT_REASON_SYNC_BOOST 0x10ULL
#define NVML_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN 0x20ULL
#define NVML_CLOCKS_EVENT_REASON_HW_THERMAL_SLOWDOWN 0x40ULL
#define NVML_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN 0x80ULL
#define NVML_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING 0x100ULL

#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ULL) /* usedGpuMemory when the driver cannot tell */
#define NVML_MEMORY_INFO_V2 0x02000028u      /* sizeof(nvmlMemory_v2_t) | 2 << 24: plain 2 fails */
#define nvmlTemperature_v1 0x0100000Cu       /* NVML_STRUCT_VERSION(Temperature, 1): sizeof | 1 << 24 */
#define NVML_GPM_SUPPORT_VERSION 1u
#define NVML_GPM_METRICS_GET_VERSION 1u
#define NVML_GPM_METRIC_MAX 333 /* 98 in 12.x, 210 in 12.9, 333 in 13.3; version stays 1 */

/* nvmlGpmMetricId_t (the ones gpuscope reads) */
enum {
  NVML_GPM_METRIC_GRAPHICS_UTIL = 1, /* any graphics/compute context active: DCGM's GR_ENGINE_ACTIVE */
  NVML_GPM_METRIC_SM_UTIL = 2,
  NVML_GPM_METRIC_SM_OCCUPANCY = 3,
  NVML_GPM_METRIC_INTEGER_UTIL = 4,
  NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
  NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6,
  NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7,
  NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9,
  NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
  NVML_GPM_METRIC_FP64_UTIL = 11,
  NVML_GPM_METRIC_FP32_UTIL = 12,
  NVML_GPM_METRIC_FP16_UTIL = 13,
  NVML_GPM_METRIC_PCIE_TX_PER_SEC = 20,         /* MiB/s */
  NVML_GPM_METRIC_PCIE_RX_PER_SEC = 21,         /* MiB/s */
  NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC = 60, /* MiB/s */
  NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC = 61, /* MiB/s */
};

/* Health: event types (nvmlEventType*), nvmlMemoryErrorType_t, nvmlEccCounterType_t,
 * nvmlPageRetirementCause_t, nvmlNvLinkErrorCounter_t, nvmlEnableState_t. */
#define nvmlEventTypeSingleBitEccError 0x1ULL
#define nvmlEventTypeDoubleBitEccError 0x2ULL
#define nvmlEventTypeXidCriticalError 0x8ULL
enum { NVML_MEMORY_ERROR_TYPE_CORRECTED = 0, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1 };
enum { NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1 };
enum {
  NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
  NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
};
enum {
  NVML_NVLINK_ERROR_DL_REPLAY = 0,
  NVML_NVLINK_ERROR_DL_RECOVERY = 1,
  NVML_NVLINK_ERROR_DL_CRC_FLIT = 2,
  NVML_NVLINK_ERROR_DL_CRC_DATA = 3,
};
enum { NVML_FEATURE_DISABLED = 0, NVML_FEATURE_ENABLED = 1 };
#define NVML_NVLINK_MAX_LINKS 36 /* 18 in 12.x, 36 in 13.x: links past a GPU's own answer an error */

typedef struct {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef struct {
  unsigned gpu, memory;
} nvmlUtilization_t;

/* nvmlDeviceGetTemperatureV's argument: the sensor in, the reading (degrees C, signed) out. */
typedef struct {
  unsigned version;
  unsigned sensorType; /* nvmlTemperatureSensors_t */
  int temperature;
} nvmlTemperature_t;

typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
  unsigned version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

/* _v2/_v3 process entry; the unversioned call writes nvmlProcessInfo_v1_t. Both start with pid and
 * usedGpuMemory at the same offsets, so the collector reads them through a stride. */
typedef struct {
  unsigned pid;
  unsigned long long usedGpuMemory;
  unsigned gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

typedef struct {
  unsigned pid;
  unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
  unsigned pid;
  unsigned long long timeStamp;
  unsigned smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

typedef union {
  double dVal;
  int siVal;
  unsigned uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct {
  unsigned long long timeStamp;
  nvmlValue_t sampleValue;
} nvmlSample_t;

typedef struct {
  unsigned version;
  unsigned isSupportedDevice;
} nvmlGpmSupport_t;

typedef struct {
  unsigned metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct {
    char *shortName, *longName, *unit;
  } metricInfo;
} nvmlGpmMetric_t;

typedef struct {
  unsigned version;
  unsigned numMetrics;
  nvmlGpmSample_t sample1, sample2;
  nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

/* One event of an event set (nvmlEventSetWait_v2): an Xid's code in eventData; on MIG the GPU and
 * compute instance it belongs to (0xFFFFFFFF when none). */
typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
  unsigned gpuInstanceId;
  unsigned computeInstanceId;
} nvmlEventData_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(nvmlEventData_t) == 32, "nvmlEventData_t is 32 bytes");
_Static_assert(offsetof(nvmlEventData_t, eventData) == 16, "eventData at 16");
_Static_assert(offsetof(nvmlEventData_t, computeInstanceId) == 28, "computeInstanceId at 28");
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t is 68 bytes");
_Static_assert(sizeof(nvmlUtilization_t) == 8, "nvmlUtilization_t is 8 bytes");
_Static_assert(sizeof(nvmlMemory_t) == 24, "nvmlMemory_t is 24 bytes");
_Static_assert(sizeof(nvmlMemory_v2_t) == 40, "nvmlMemory_v2_t is 40 bytes");
_Static_assert(sizeof(nvmlTemperature_t) == 12, "nvmlTemperature_t is 12 bytes");
_Static_assert(offsetof(nvmlTemperature_t, temperature) == 8, "temperature at 8");
_Static_assert((nvmlTemperature_v1 & 0xffffffu) == sizeof(nvmlTemperature_t), "v1 version = size");
_Static_assert((NVML_MEMORY_INFO_V2 & 0xffffffu) == sizeof(nvmlMemory_v2_t), "v2 version = size");
_Static_assert(sizeof(nvmlProcessInfo_t) == 24, "nvmlProcessInfo_t is 24 bytes");
_Static_assert(sizeof(nvmlProcessInfo_v1_t) == 16, "nvmlProcessInfo_v1_t is 16 bytes");
_Static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32, "process util sample is 32 bytes");
_Static_assert(sizeof(nvmlValue_t) == 8, "nvmlValue_t is 8 bytes");
_Static_assert(sizeof(nvmlSample_t) == 16, "nvmlSample_t is 16 bytes");
_Static_assert(sizeof(nvmlGpmMetric_t) == 40, "nvmlGpmMetric_t is 40 bytes");
_Static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24, "GPM metrics start at 24");
#endif

/* ---- the loader ---- */

/* The entry points gpuscope uses. Any pointer may be NULL except the four the loader requires
 * (nvmlInit, nvmlShutdown, nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex). Each field holds the
 * newest version of the call that the library exports; the ABI of that version is what the field's
 * type says (the process list is the exception: see proc_stride). */
struct nvml_api {
  void *lib;          /* dlopen handle */
  char path[256];     /* what was loaded */
  size_t proc_stride; /* bytes per entry written by nvmlDeviceGetComputeRunningProcesses: 16, 24, 32 */
  int have_memory_v2; /* nvmlDeviceGetMemoryInfo_v2 resolved */

  nvmlReturn_t (*nvmlInit)(void);
  nvmlReturn_t (*nvmlShutdown)(void);
  const char *(*nvmlErrorString)(nvmlReturn_t r);
  nvmlReturn_t (*nvmlSystemGetDriverVersion)(char *buf, unsigned len);
  nvmlReturn_t (*nvmlSystemGetCudaDriverVersion)(int *version); /* 1000 x major + 10 x minor */
  nvmlReturn_t (*nvmlDeviceGetCount)(unsigned *n);
  nvmlReturn_t (*nvmlDeviceGetHandleByIndex)(unsigned i, nvmlDevice_t *d);
  nvmlReturn_t (*nvmlDeviceGetName)(nvmlDevice_t d, char *buf, unsigned len);
  nvmlReturn_t (*nvmlDeviceGetUUID)(nvmlDevice_t d, char *buf, unsigned len);
  nvmlReturn_t (*nvmlDeviceGetPciInfo)(nvmlDevice_t d, nvmlPciInfo_t *p);
  nvmlReturn_t (*nvmlDeviceGetUtilizationRates)(nvmlDevice_t d, nvmlUtilization_t *u);
  nvmlReturn_t (*nvmlDeviceGetMemoryInfo)(nvmlDevice_t d, nvmlMemory_t *m);
  nvmlReturn_t (*nvmlDeviceGetMemoryInfo_v2)(nvmlDevice_t d, nvmlMemory_v2_t *m);
  nvmlReturn_t (*nvmlDeviceGetPowerUsage)(nvmlDevice_t d, unsigned *mw);
  nvmlReturn_t (*nvmlDeviceGetEnforcedPowerLimit)(nvmlDevice_t d, unsigned *mw);
  nvmlReturn_t (*nvmlDeviceGetTotalEnergyConsumption)(nvmlDevice_t d, unsigned long long *mj);
  nvmlReturn_t (*nvmlDeviceGetTemperature)(nvmlDevice_t d, unsigned sensor, unsigned *c); /* deprecated in 13 */
  nvmlReturn_t (*nvmlDeviceGetTemperatureV)(nvmlDevice_t d, nvmlTemperature_t *t);        /* R535+; first */
  nvmlReturn_t (*nvmlDeviceGetClockInfo)(nvmlDevice_t d, unsigned type, unsigned *mhz);
  nvmlReturn_t (*nvmlDeviceGetMaxClockInfo)(nvmlDevice_t d, unsigned type, unsigned *mhz);
  nvmlReturn_t (*nvmlDeviceGetCurrentClocksEventReasons)(nvmlDevice_t d, unsigned long long *mask);
  nvmlReturn_t (*nvmlDeviceGetPcieThroughput)(nvmlDevice_t d, unsigned counter, unsigned *kbps);
  nvmlReturn_t (*nvmlDeviceGetCudaComputeCapability)(nvmlDevice_t d, int *major, int *minor);
  nvmlReturn_t (*nvmlDeviceGetComputeRunningProcesses)(nvmlDevice_t d, unsigned *count, nvmlProcessInfo_t *infos);
  nvmlReturn_t (*nvmlDeviceGetProcessUtilization)(nvmlDevice_t d, nvmlProcessUtilizationSample_t *u, unsigned *count,
                                                  unsigned long long last_us);
  nvmlReturn_t (*nvmlDeviceGetSamples)(nvmlDevice_t d, unsigned type, unsigned long long last_us, unsigned *val_type,
                                       unsigned *count, nvmlSample_t *samples);
  nvmlReturn_t (*nvmlDeviceGetFanSpeed)(nvmlDevice_t d, unsigned *pct);
  nvmlReturn_t (*nvmlDeviceGetMigMode)(nvmlDevice_t d, unsigned *cur, unsigned *pending);
  nvmlReturn_t (*nvmlDeviceGetPerformanceState)(nvmlDevice_t d, unsigned *pstate);
  nvmlReturn_t (*nvmlGpmQueryDeviceSupport)(nvmlDevice_t d, nvmlGpmSupport_t *s);
  nvmlReturn_t (*nvmlGpmSampleAlloc)(nvmlGpmSample_t *s);
  nvmlReturn_t (*nvmlGpmSampleFree)(nvmlGpmSample_t s);
  nvmlReturn_t (*nvmlGpmSampleGet)(nvmlDevice_t d, nvmlGpmSample_t s);
  nvmlReturn_t (*nvmlGpmMetricsGet)(nvmlGpmMetricsGet_t *m);
  /* MIG devices (R450 and newer); an older library simply lists no instances */
  nvmlReturn_t (*nvmlDeviceGetMaxMigDeviceCount)(nvmlDevice_t d, unsigned *count);
  nvmlReturn_t (*nvmlDeviceGetMigDeviceHandleByIndex)(nvmlDevice_t d, unsigned index, nvmlDevice_t *mig);
  nvmlReturn_t (*nvmlDeviceIsMigDeviceHandle)(nvmlDevice_t d, unsigned *is_mig);
  nvmlReturn_t (*nvmlDeviceGetGpuInstanceId)(nvmlDevice_t mig, unsigned *id);
  nvmlReturn_t (*nvmlDeviceGetComputeInstanceId)(nvmlDevice_t mig, unsigned *id);
  nvmlReturn_t (*nvmlDeviceGetDeviceHandleFromMigDeviceHandle)(nvmlDevice_t mig, nvmlDevice_t *parent);
  nvmlReturn_t (*nvmlGpmMigSampleGet)(nvmlDevice_t d, unsigned gpu_instance_id, nvmlGpmSample_t s);
  /* health (collect/nvml_health.c): events, ECC, remapped rows, retired pages, replays, NVLink */
  nvmlReturn_t (*nvmlEventSetCreate)(nvmlEventSet_t *set);
  nvmlReturn_t (*nvmlDeviceRegisterEvents)(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set);
  nvmlReturn_t (*nvmlEventSetWait_v2)(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeout_ms);
  nvmlReturn_t (*nvmlEventSetFree)(nvmlEventSet_t set);
  nvmlReturn_t (*nvmlDeviceGetTotalEccErrors)(nvmlDevice_t d, unsigned error_type, unsigned counter_type,
                                              unsigned long long *count);
  nvmlReturn_t (*nvmlDeviceGetEccMode)(nvmlDevice_t d, unsigned *current, unsigned *pending);
  nvmlReturn_t (*nvmlDeviceGetRemappedRows)(nvmlDevice_t d, unsigned *corr, unsigned *unc, unsigned *pending,
                                            unsigned *failure);
  nvmlReturn_t (*nvmlDeviceGetRetiredPages)(nvmlDevice_t d, unsigned cause, unsigned *count,
                                            unsigned long long *addresses);
  nvmlReturn_t (*nvmlDeviceGetRetiredPagesPendingStatus)(nvmlDevice_t d, unsigned *pending);
  nvmlReturn_t (*nvmlDeviceGetPcieReplayCounter)(nvmlDevice_t d, unsigned *value);
  nvmlReturn_t (*nvmlDeviceGetNvLinkState)(nvmlDevice_t d, unsigned link, unsigned *active);
  nvmlReturn_t (*nvmlDeviceGetNvLinkErrorCounter)(nvmlDevice_t d, unsigned link, unsigned counter,
                                                  unsigned long long *value);
};

/* Loads lib (NULL: $GPUSCOPE_NVML_LIB, else "libnvidia-ml.so.1"), resolves every entry point and
 * calls nvmlInit. Returns 0, or GS_ENOENT with a one-line reason in err ("libnvidia-ml.so.1 not
 * found", "nvmlInit: Driver Not Loaded") and *api left unloaded. Release with nvml_api_close(). */
int nvml_api_open(struct nvml_api *api, const char *lib, char *err, size_t errlen);

/* Calls nvmlShutdown and dlclose()s the library when shutdown != 0; otherwise leaves the library
 * mapped (a thread may still be inside it). Safe on an api that failed to open. */
void nvml_api_close(struct nvml_api *api, int shutdown);

/* NVML's text for r (nvmlErrorString when exported, else gpuscope's copy). Never NULL. */
const char *nvml_api_strerror(const struct nvml_api *api, nvmlReturn_t r);

/* Comma-separated names of optional per-tick entry points this library lacks ("" when none), for
 * one note on the run. Writes into buf and returns it. */
const char *nvml_api_missing(const struct nvml_api *api, char *buf, size_t n);

struct nvml_facts; /* one GPU's static facts (collect.h) */

/* Reads the facts of one device, and on a GPU in MIG mode those of its MIG instances (f->mig).
 * Returns the first fatal code (NVML_ERROR_GPU_IS_LOST) or NVML_SUCCESS; unsupported facts are just
 * left unknown. */
nvmlReturn_t nvml_api_facts(const struct nvml_api *api, nvmlDevice_t dev, struct nvml_facts *f);

/* Lists the MIG instances of dev (a GPU in MIG mode) into f->mig and f->n_mig, one per GPU instance
 * (its first compute instance's MIG device): every MIG device index up to the maximum, an empty one
 * answering NOT_FOUND. Returns NVML_SUCCESS, or the error of the GPU's own calls (GPU_IS_LOST, the
 * count call's; FUNCTION_NOT_FOUND with f->mig_unlisted set when this library lacks the MIG device
 * calls). *incomplete is NVML_SUCCESS when the list is complete, else the first other answer of an
 * index or an instance's handle (GPU_IS_LOST included): that index may hold an instance. */
nvmlReturn_t nvml_api_mig_list(const struct nvml_api *api, nvmlDevice_t dev, struct nvml_facts *f,
                               nvmlReturn_t *incomplete);

/* The handle of the MIG device at index slot of dev (as nvml_api_facts found it), or NULL. */
nvmlDevice_t nvml_api_mig_handle(const struct nvml_api *api, nvmlDevice_t dev, unsigned slot);

#endif
