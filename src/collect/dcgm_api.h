/* collect/dcgm_api: gpuscope's own declarations of the part of DCGM it uses (the profiling fields:
 * SM active, SM occupancy, tensor active, DRAM active, from Volta on) and the loader that dlopen()s
 * libdcgm.so.4 and resolves each entry point by name, as nvml_api does for NVML. Nothing here needs
 * DCGM's headers at build time: the types follow NVIDIA's dcgm_structs.h, dcgm_fields.h and
 * dcgm_agent.h (DCGM 4.x, the NVIDIA/DCGM repository), the sizes are asserted below, and
 * tools/dcgm-abi/check.sh compares every declaration with those headers (docs/dcgm.md). The NVML
 * collector (nvml_dcgm.c) and the simulated library (tests/gpusim/dcgmsim.c) use them.
 *
 * Type and constant names follow DCGM's so the code reads like its documentation; what gpuscope
 * adds is prefixed dcgm_ (lower case). An enum of DCGM's that has no negative value is declared
 * `unsigned`, the type GCC and Clang give it, so the ABI check finds the function types equal. */
#ifndef GS_DCGM_API_H
#define GS_DCGM_API_H

#include <stddef.h>
#include <stdint.h>

/* ---- types (DCGM names) ---- */

typedef int dcgmReturn_t; /* an enum with negative values in dcgm_structs.h */
typedef uintptr_t dcgmHandle_t;
typedef uintptr_t dcgmGpuGrp_t;
typedef uintptr_t dcgmFieldGrp_t;
typedef unsigned dcgmOperationMode_t;
typedef unsigned dcgmGroupType_t;
typedef unsigned dcgm_field_entity_group_t;
typedef unsigned int dcgm_field_eid_t;

enum {
  DCGM_ST_OK = 0,
  DCGM_ST_BADPARAM = -1,
  DCGM_ST_GENERIC_ERROR = -3,
  DCGM_ST_MEMORY = -4,
  DCGM_ST_NOT_CONFIGURED = -5,
  DCGM_ST_NOT_SUPPORTED = -6,
  DCGM_ST_INIT_ERROR = -7,
  DCGM_ST_NVML_ERROR = -8,
  DCGM_ST_UNINITIALIZED = -10,
  DCGM_ST_TIMEOUT = -11,
  DCGM_ST_VER_MISMATCH = -12,
  DCGM_ST_NO_DATA = -14,
  DCGM_ST_STALE_DATA = -15,
  DCGM_ST_NOT_WATCHED = -16,
  DCGM_ST_NO_PERMISSION = -17,
  DCGM_ST_GPU_IS_LOST = -18,
  DCGM_ST_CONNECTION_NOT_VALID = -21,
  DCGM_ST_GPU_NOT_SUPPORTED = -22,
  DCGM_ST_GROUP_INCOMPATIBLE = -23,
  DCGM_ST_MAX_LIMIT = -24,
  DCGM_ST_REQUIRES_ROOT = -29,
  DCGM_ST_MODULE_NOT_LOADED = -33,
  DCGM_ST_IN_USE = -34,
  DCGM_ST_GROUP_IS_EMPTY = -35,
  DCGM_ST_PROFILING_NOT_SUPPORTED = -36,
  DCGM_ST_PROFILING_LIBRARY_ERROR = -37,
  DCGM_ST_PROFILING_MULTI_PASS = -38,
  DCGM_ST_INSUFFICIENT_DRIVER_VERSION = -44,
  DCGM_ST_PAUSED = -54,
};

enum { DCGM_OPERATION_MODE_AUTO = 1, DCGM_OPERATION_MODE_MANUAL = 2 };
enum { DCGM_GROUP_DEFAULT = 0, DCGM_GROUP_EMPTY = 1 };
enum { DCGM_FE_NONE = 0, DCGM_FE_GPU = 1 };

#define DCGM_MAX_NUM_DEVICES 32
#define DCGM_MAX_STR_LENGTH 256
#define DCGM_MAX_BLOB_LENGTH 4096
#define DCGM_MAX_CLOCKS 256
#define DCGM_HE_PORT_NUMBER 5555

/* Field types (dcgm_fields.h DCGM_FT_*) and the profiling fields read (ratios 0..1, doubles). */
#define DCGM_FT_DOUBLE 'd'
#define DCGM_FI_PROF_SM_ACTIVE 1002
#define DCGM_FI_PROF_SM_OCCUPANCY 1003
#define DCGM_FI_PROF_PIPE_TENSOR_ACTIVE 1004
#define DCGM_FI_PROF_DRAM_ACTIVE 1005

/* A double at or above this is no value: blank, not found, not supported, not permissioned. */
#define DCGM_FP64_BLANK 140737488355328.0
#define DCGM_FP64_IS_BLANK(val) (((val) >= DCGM_FP64_BLANK ? 1 : 0))

#define MAKE_DCGM_VERSION(typeName, ver) (unsigned int)(sizeof(typeName) | ((unsigned long)(ver) << 24U))

typedef struct {
  unsigned int version;
  unsigned int persistAfterDisconnect; /* 0: the host engine drops our watches when we go */
  unsigned int timeoutMs;
  unsigned int addressIsUnixSocket;
} dcgmConnectV2Params_v2;
typedef dcgmConnectV2Params_v2 dcgmConnectV2Params_t;
#define dcgmConnectV2Params_version2 MAKE_DCGM_VERSION(dcgmConnectV2Params_v2, 2)

typedef struct {
  int version;
  unsigned int memClock;
  unsigned int smClock;
} dcgmClockSet_v1;
typedef dcgmClockSet_v1 dcgmClockSet_t;

typedef struct {
  unsigned int version;
  unsigned int count;
  dcgmClockSet_t clockSet[DCGM_MAX_CLOCKS];
} dcgmDeviceSupportedClockSets_v1;

typedef struct {
  unsigned int version;
  unsigned int slowdownTemp;
  unsigned int shutdownTemp;
} dcgmDeviceThermals_v1;

typedef struct {
  unsigned int version;
  unsigned int curPowerLimit;
  unsigned int defaultPowerLimit;
  unsigned int enforcedPowerLimit;
  unsigned int minPowerLimit;
  unsigned int maxPowerLimit;
} dcgmDevicePowerLimits_v1;

typedef struct {
  unsigned int version;
  char brandName[DCGM_MAX_STR_LENGTH];
  char deviceName[DCGM_MAX_STR_LENGTH];
  char pciBusId[DCGM_MAX_STR_LENGTH];
  char serial[DCGM_MAX_STR_LENGTH];
  char uuid[DCGM_MAX_STR_LENGTH];
  char vbios[DCGM_MAX_STR_LENGTH];
  char inforomImageVersion[DCGM_MAX_STR_LENGTH];
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char driverVersion[DCGM_MAX_STR_LENGTH];
  unsigned int virtualizationMode;
} dcgmDeviceIdentifiers_v1;

typedef struct {
  unsigned int version;
  unsigned int bar1Total;
  unsigned int fbTotal;
  unsigned int fbUsed;
  unsigned int fbFree;
} dcgmDeviceMemoryUsage_v1;

typedef struct {
  unsigned int version;
  unsigned int persistenceModeEnabled;
  unsigned int migModeEnabled;
  unsigned int confidentialComputeMode;
} dcgmDeviceSettings_v2;

/* dcgmGetDeviceAttributes' answer (DCGM 4.0 and newer): only identifiers is read. */
typedef struct {
  unsigned int version;
  dcgmDeviceSupportedClockSets_v1 clockSets;
  dcgmDeviceThermals_v1 thermalSettings;
  dcgmDevicePowerLimits_v1 powerLimits;
  dcgmDeviceIdentifiers_v1 identifiers;
  dcgmDeviceMemoryUsage_v1 memoryUsage;
  dcgmDeviceSettings_v2 settings;
} dcgmDeviceAttributes_v3;
typedef dcgmDeviceAttributes_v3 dcgmDeviceAttributes_t;
#define dcgmDeviceAttributes_version3 MAKE_DCGM_VERSION(dcgmDeviceAttributes_v3, 3)

typedef struct {
  unsigned int version;
  unsigned short fieldId;
  unsigned short fieldType; /* DCGM_FT_* */
  int status;               /* DCGM_ST_OK or why this value is missing */
  int64_t ts;               /* µs since 1970 */
  union {
    int64_t i64;
    double dbl;
    char str[DCGM_MAX_STR_LENGTH];
    char blob[DCGM_MAX_BLOB_LENGTH];
  } value;
} dcgmFieldValue_v1;

/* dcgmGetLatestValues_v2's callback: the values of one entity; returns 0 to go on. */
typedef int (*dcgmFieldValueEntityEnumeration_f)(dcgm_field_entity_group_t entityGroupId, dcgm_field_eid_t entityId,
                                                 dcgmFieldValue_v1 *values, int numValues, void *userData);

/* x86_64 layouts measured by compiling DCGM 4.6's headers (tools/dcgm-abi/check.sh checks them). */
_Static_assert(sizeof(dcgmConnectV2Params_v2) == 16, "dcgmConnectV2Params_v2 layout");
_Static_assert(sizeof(dcgmDeviceIdentifiers_v1) == 2064, "dcgmDeviceIdentifiers_v1 layout");
_Static_assert(offsetof(dcgmDeviceAttributes_v3, identifiers) == 3120, "dcgmDeviceAttributes_v3 layout");
_Static_assert(sizeof(dcgmDeviceAttributes_v3) == 5220, "dcgmDeviceAttributes_v3 layout");
_Static_assert(offsetof(dcgmFieldValue_v1, ts) == 16 && offsetof(dcgmFieldValue_v1, value) == 24 &&
                   sizeof(dcgmFieldValue_v1) == 4120,
               "dcgmFieldValue_v1 layout");

/* ---- the loader ---- */

struct dcgm_api {
  void *lib;      /* dlopen handle */
  char path[256]; /* what was loaded */

  dcgmReturn_t (*dcgmInit)(void);
  dcgmReturn_t (*dcgmShutdown)(void);
  const char *(*errorString)(dcgmReturn_t result);
  dcgmReturn_t (*dcgmStartEmbedded)(dcgmOperationMode_t opMode, dcgmHandle_t *pDcgmHandle);
  dcgmReturn_t (*dcgmStopEmbedded)(dcgmHandle_t pDcgmHandle);
  dcgmReturn_t (*dcgmConnect_v2)(const char *ipAddress, dcgmConnectV2Params_t *connectParams,
                                 dcgmHandle_t *pDcgmHandle);
  dcgmReturn_t (*dcgmDisconnect)(dcgmHandle_t pDcgmHandle);
  dcgmReturn_t (*dcgmGetAllSupportedDevices)(dcgmHandle_t pDcgmHandle, unsigned int gpuIdList[DCGM_MAX_NUM_DEVICES],
                                             int *count);
  dcgmReturn_t (*dcgmGetDeviceAttributes)(dcgmHandle_t pDcgmHandle, unsigned int gpuId,
                                          dcgmDeviceAttributes_t *pDcgmAttr);
  dcgmReturn_t (*dcgmGroupCreate)(dcgmHandle_t pDcgmHandle, dcgmGroupType_t type, const char *groupName,
                                  dcgmGpuGrp_t *pDcgmGrpId);
  dcgmReturn_t (*dcgmGroupAddDevice)(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId, unsigned int gpuId);
  dcgmReturn_t (*dcgmGroupDestroy)(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId);
  dcgmReturn_t (*dcgmFieldGroupCreate)(dcgmHandle_t dcgmHandle, int numFieldIds, const unsigned short *fieldIds,
                                       const char *fieldGroupName, dcgmFieldGrp_t *dcgmFieldGroupId);
  dcgmReturn_t (*dcgmFieldGroupDestroy)(dcgmHandle_t dcgmHandle, dcgmFieldGrp_t dcgmFieldGroupId);
  dcgmReturn_t (*dcgmWatchFields)(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId, dcgmFieldGrp_t fieldGroupId,
                                  long long updateFreq, double maxKeepAge, int maxKeepSamples);
  dcgmReturn_t (*dcgmUnwatchFields)(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId, dcgmFieldGrp_t fieldGroupId);
  dcgmReturn_t (*dcgmGetLatestValues_v2)(dcgmHandle_t pDcgmHandle, dcgmGpuGrp_t groupId, dcgmFieldGrp_t fieldGroupId,
                                         dcgmFieldValueEntityEnumeration_f enumCB, void *userData);
};

/* Loads DCGM: lib, else $GPUSCOPE_DCGM_LIB, else libdcgm.so.4 from the loader's search path, and
 * calls dcgmInit. Every entry point above but errorString is required (all are in every DCGM 4).
 * Returns 0; GS_ENOENT when the library cannot be loaded ("libdcgm.so.4 not found"); GS_EIO when it
 * loads but cannot be used ("... lacks X", "dcgmInit: ..."). On error the reason is in err, api is
 * zeroed and nothing stays loaded. */
int dcgm_api_open(struct dcgm_api *api, const char *lib, char *err, size_t errlen);
/* dcgmShutdown and dlclose when shutdown is set (leave both when a thread may still be inside the
 * library); forgets the handle either way. A closed api is a no-op. */
void dcgm_api_close(struct dcgm_api *api, int shutdown);
/* DCGM's text for r (errorString when the library has it, else our own names). Never NULL. */
const char *dcgm_api_strerror(const struct dcgm_api *api, dcgmReturn_t r);

#endif
