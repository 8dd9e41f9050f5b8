#!/bin/sh
# tools/nvml-abi/check.sh [NVML_H]: checks gpuscope's own NVML declarations (src/collect/nvml_api.h)
# against NVIDIA's nvml.h, which gpuscope never needs to build:
#   1. every entry point of struct nvml_api has the type of NVIDIA's function of that name (the
#      member lines are taken from our header and compiled against nvml.h's types;
#      __builtin_types_compatible_p, so an enum argument and `unsigned` agree as the ABI does);
#   2. the size and member offsets of every struct we declare (nvmlEventData_t included) and the
#      value of every constant we use are the same compiled with either header (two programs print
#      them; their outputs are compared).
# The header: the argument, else $NVML_H, else the CUDA toolkit's or the system's. Nothing is copied
# from it into the tree. Without one the check is skipped (exit 77) with how to get one. Exit 0 when
# every check passes, 1 with the differences. docs/nvml.md, "Limits and what is not verified".
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
hdr=${1:-${NVML_H:-}}
if [ -z "$hdr" ]; then
  for c in /usr/local/cuda/include/nvml.h /usr/include/nvml.h /usr/include/nvidia/gdk/nvml.h; do
    [ -f "$c" ] && hdr=$c && break
  done
fi
if [ -z "$hdr" ] || [ ! -f "$hdr" ]; then
  echo "nvml-abi: skip: no nvml.h (give its path: tools/nvml-abi/check.sh PATH; the CUDA toolkit has one," \
       "and NVIDIA's go-nvml repository keeps a copy as gen/nvml/nvml.h)" >&2
  exit 77
fi
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
api="$root/src/collect/nvml_api.h"

# 1. The entry points: our struct's function-pointer members, compiled with nvml.h's types.
awk '/^struct nvml_api \{/ {on = 1; next} on && /^\};/ {exit} on {print}' "$api" |
  sed 's|/\*.*\*/||' | tr '\n' ' ' | tr ';' '\n' |
  grep -E '\(\*nvml[A-Za-z0-9_]+\)' | sed 's/^ *//' > "$tmp/members"
names=$(sed -E 's/.*\(\*(nvml[A-Za-z0-9_]+)\).*/\1/' "$tmp/members")
{
  echo '#include <stddef.h>'
  echo "#include \"$hdr\""
  echo 'struct ours {'
  sed 's/$/;/' "$tmp/members"
  echo '};'
  echo '#define SAME(f) _Static_assert(__builtin_types_compatible_p(__typeof__(((struct ours *)0)->f), __typeof__(&f)), #f " differs from nvml.h")'
  for n in $names; do echo "SAME($n);"; done
  echo 'int main(void) { return 0; }'
} > "$tmp/protos.c"
if ! $cc -std=gnu11 -fsyntax-only "$tmp/protos.c" 2> "$tmp/protos.err"; then
  echo "nvml-abi: entry points that differ from $hdr:" >&2
  grep -E 'error' "$tmp/protos.err" | sed 's/^[^:]*:[0-9]*:[0-9]*: //' >&2
  exit 1
fi
nfun=$(echo "$names" | wc -l)

# 2. Layouts and constants, printed by one program built with each header.
cat > "$tmp/layout.c" <<'EOF'
#include <stddef.h>
#include <stdio.h>
#ifdef THEIRS
#include THEIRS
#define NVML_MEMORY_INFO_V2 nvmlMemory_v2 /* where our names differ from nvml.h's */
#define NVML_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN nvmlClocksThrottleReasonHwPowerBrakeSlowdown
#define NVML_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING nvmlClocksEventReasonDisplayClockSetting
#else
#include "collect/nvml_api.h"
#endif
#define P(x) printf("%-60s %lld\n", #x, (long long)(x))
#define S(t) P(sizeof(t))
#define O(t, m) P(offsetof(t, m))
int main(void) {
  S(nvmlPciInfo_t); O(nvmlPciInfo_t, busId); O(nvmlPciInfo_t, pciSubSystemId);
  S(nvmlUtilization_t); S(nvmlMemory_t); S(nvmlMemory_v2_t); O(nvmlMemory_v2_t, used);
  S(nvmlTemperature_t); O(nvmlTemperature_t, temperature);
  S(nvmlProcessInfo_t); O(nvmlProcessInfo_t, computeInstanceId); S(nvmlProcessInfo_v1_t);
  S(nvmlProcessUtilizationSample_t); O(nvmlProcessUtilizationSample_t, decUtil);
  S(nvmlValue_t); S(nvmlSample_t); O(nvmlSample_t, sampleValue);
  S(nvmlGpmSupport_t); S(nvmlGpmMetric_t); O(nvmlGpmMetric_t, metricInfo); O(nvmlGpmMetricsGet_t, metrics);
  S(nvmlEventData_t); O(nvmlEventData_t, eventType); O(nvmlEventData_t, eventData);
  O(nvmlEventData_t, gpuInstanceId); O(nvmlEventData_t, computeInstanceId);
  P(NVML_MEMORY_INFO_V2); P(nvmlTemperature_v1); P(NVML_GPM_SUPPORT_VERSION); P(NVML_GPM_METRICS_GET_VERSION);
  P(NVML_GPM_METRIC_MAX);
  P(NVML_ERROR_NOT_SUPPORTED); P(NVML_ERROR_NOT_FOUND); P(NVML_ERROR_INSUFFICIENT_SIZE); P(NVML_ERROR_TIMEOUT);
  P(NVML_ERROR_FUNCTION_NOT_FOUND); P(NVML_ERROR_GPU_IS_LOST); P(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  P(NVML_ERROR_GPU_NOT_FOUND); P(NVML_ERROR_UNKNOWN);
  P(NVML_GPU_UTILIZATION_SAMPLES); P(NVML_MEMORY_UTILIZATION_SAMPLES); P(NVML_CLOCK_SM); P(NVML_CLOCK_MEM);
  P(NVML_PCIE_UTIL_RX_BYTES); P(NVML_TEMPERATURE_GPU); P(NVML_VALUE_TYPE_UNSIGNED_SHORT);
  P(NVML_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN); P(NVML_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING);
  P(NVML_GPM_METRIC_GRAPHICS_UTIL); P(NVML_GPM_METRIC_SM_OCCUPANCY); P(NVML_GPM_METRIC_ANY_TENSOR_UTIL);
  P(NVML_GPM_METRIC_DRAM_BW_UTIL); P(NVML_GPM_METRIC_FP16_UTIL); P(NVML_GPM_METRIC_PCIE_RX_PER_SEC);
  P(NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC);
  P(nvmlEventTypeSingleBitEccError); P(nvmlEventTypeDoubleBitEccError); P(nvmlEventTypeXidCriticalError);
  P(NVML_MEMORY_ERROR_TYPE_UNCORRECTED); P(NVML_AGGREGATE_ECC);
  P(NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR); P(NVML_NVLINK_ERROR_DL_REPLAY);
  P(NVML_NVLINK_ERROR_DL_RECOVERY); P(NVML_NVLINK_ERROR_DL_CRC_FLIT); P(NVML_NVLINK_ERROR_DL_CRC_DATA);
  P(NVML_FEATURE_ENABLED); P(NVML_NVLINK_MAX_LINKS);
  return 0;
}
EOF
$cc -std=gnu11 -I"$root/src" -o "$tmp/ours" "$tmp/layout.c"
$cc -std=gnu11 -DTHEIRS="\"$hdr\"" -o "$tmp/theirs" "$tmp/layout.c"
"$tmp/ours" > "$tmp/ours.txt"
"$tmp/theirs" > "$tmp/theirs.txt"
if ! diff "$tmp/theirs.txt" "$tmp/ours.txt" > "$tmp/diff"; then
  echo "nvml-abi: layouts or constants that differ ('<' $hdr, '>' ours):" >&2
  cat "$tmp/diff" >&2
  exit 1
fi
echo "nvml-abi: $nfun entry points and $(wc -l < "$tmp/ours.txt") sizes, offsets and constants match $hdr"
