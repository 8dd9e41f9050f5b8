#!/bin/sh
# tools/dcgm-abi/check.sh [DCGM_AGENT_H | DIR]: checks gpuscope's own DCGM declarations
# (src/collect/dcgm_api.h) against NVIDIA's DCGM headers (dcgm_agent.h, which includes
# dcgm_structs.h and dcgm_fields.h), which gpuscope never needs to build, as tools/nvml-abi does NVML:
#   1. every entry point of struct dcgm_api has the type of DCGM's function of that name (the member
#      lines are taken from our header and compiled against DCGM's types;
#      __builtin_types_compatible_p), and each scalar type we declare (`typedef unsigned
#      dcgmGroupType_t;`) is compatible with DCGM's (an enum without negative values and `unsigned`
#      agree, as the ABI does);
#   2. the size and member offsets of every struct we declare and the value of every constant we use
#      (each DCGM_ST_* of our enum, the field ids, the version words) are the same compiled with
#      either header (two programs print them; their outputs are compared).
# The header: the argument (the file, or the folder holding it), else $DCGM_H, else the system's
# (/usr/include/dcgm_agent.h, from NVIDIA's datacenter-gpu-manager package). Nothing is copied from
# it into the tree. Without one the check is skipped (exit 77) with how to get one. Exit 0 when every
# check passes, 1 with the differences. docs/dcgm.md, "Limits and what is not verified".
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
hdr=${1:-${DCGM_H:-}}
[ -n "$hdr" ] && [ -d "$hdr" ] && hdr="$hdr/dcgm_agent.h"
if [ -z "$hdr" ]; then
  for c in /usr/include/dcgm_agent.h /usr/include/datacenter-gpu-manager-4/dcgm_agent.h /usr/local/dcgm/include/dcgm_agent.h; do
    [ -f "$c" ] && hdr=$c && break
  done
fi
if [ -z "$hdr" ] || [ ! -f "$hdr" ]; then
  echo "dcgm-abi: skip: no dcgm_agent.h (give its path or folder: tools/dcgm-abi/check.sh PATH;" \
       "NVIDIA's datacenter-gpu-manager-4-dev package installs it, and the NVIDIA/DCGM repository" \
       "keeps it with dcgm_structs.h and dcgm_fields.h in dcgmlib/)" >&2
  exit 77
fi
hdir=$(cd "$(dirname "$hdr")" && pwd)
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
api="$root/src/collect/dcgm_api.h"

# 1. The entry points: our struct's function-pointer members, compiled with DCGM's types.
awk '/^struct dcgm_api \{/ {on = 1; next} on && /^\};/ {exit} on {print}' "$api" |
  sed 's|/\*.*\*/||' | tr '\n' ' ' | tr ';' '\n' |
  grep -E '\(\*(dcgm[A-Za-z0-9_]+|errorString)\)' | sed 's/^ *//' > "$tmp/members"
names=$(sed -E 's/.*\(\*(dcgm[A-Za-z0-9_]+|errorString)\).*/\1/' "$tmp/members")
# the scalar typedefs: "typedef TYPE NAME;" with one word or two before the name
grep -E '^typedef (unsigned|unsigned int|int|uintptr_t) [A-Za-z_0-9]+;' "$api" |
  sed -E 's/^typedef (.*) ([A-Za-z_0-9]+);.*/\1|\2/' > "$tmp/scalars"
# protos MODE: strict (our member's type exactly), or loose (also our member with a non-const field list:
# DCGM before 4.2.3 declared dcgmFieldGroupCreate's fieldIds without const, the same ABI).
protos() {
  {
    echo '#include <stddef.h>'
    echo '#include <stdint.h>'
    echo "#include \"$hdr\""
    echo 'struct ours {'
    sed 's/$/;/' "$tmp/members"
    echo '};'
    echo 'struct ours_noconst {'
    sed 's/const unsigned short/unsigned short/g; s/$/;/' "$tmp/members"
    echo '};'
    echo '#define IS(s, f) __builtin_types_compatible_p(__typeof__(((struct s *)0)->f), __typeof__(&f))'
    if [ "$1" = strict ]; then
      echo '#define SAME(f) _Static_assert(IS(ours, f), #f " differs from the DCGM headers")'
    else
      echo '#define SAME(f) _Static_assert(IS(ours, f) || IS(ours_noconst, f), #f " differs from the DCGM headers")'
    fi
    for n in $names; do echo "SAME($n);"; done
    while IFS='|' read -r t n; do
      echo "_Static_assert(__builtin_types_compatible_p($t, $n), \"$n is not $t in the DCGM headers\");"
    done < "$tmp/scalars"
    echo 'int main(void) { return 0; }'
  } > "$tmp/protos.c"
  $cc -std=gnu11 -fsyntax-only -I"$hdir" "$tmp/protos.c" 2> "$tmp/protos.err"
}
if ! protos strict; then
  constonly=$(grep -oE '"[A-Za-z0-9_]+ differs' "$tmp/protos.err" | sed 's/"//; s/ differs//' | tr '\n' ' ')
  if ! protos loose; then
    echo "dcgm-abi: declarations that differ from $hdr:" >&2
    grep -E 'error' "$tmp/protos.err" | sed 's/^[^:]*:[0-9]*:[0-9]*: //' >&2
    exit 1
  fi
  echo "dcgm-abi: note: ${constonly}differ(s) from $hdr only by const on a pointed-to input (the same ABI)"
fi
nfun=$(echo "$names" | wc -l)
nscalar=$(wc -l < "$tmp/scalars")

# 2. Layouts and constants, printed by one program built with each header.
sts=$(grep -oE '^  DCGM_ST_[A-Z0-9_]+' "$api" | sed 's/^ *//' | sort -u)
{
  cat <<'HEAD'
#include <stddef.h>
#include <stdio.h>
#ifdef THEIRS
#include THEIRS
#else
#include "collect/dcgm_api.h"
#endif
#define P(x) printf("%-60s %lld\n", #x, (long long)(x))
#define S(t) P(sizeof(t))
#define O(t, m) P(offsetof(t, m))
int main(void) {
  S(dcgmConnectV2Params_v2); O(dcgmConnectV2Params_v2, timeoutMs); O(dcgmConnectV2Params_v2, addressIsUnixSocket);
  S(dcgmClockSet_v1); S(dcgmDeviceSupportedClockSets_v1); S(dcgmDeviceThermals_v1); S(dcgmDevicePowerLimits_v1);
  S(dcgmDeviceIdentifiers_v1); O(dcgmDeviceIdentifiers_v1, pciBusId); O(dcgmDeviceIdentifiers_v1, uuid);
  O(dcgmDeviceIdentifiers_v1, driverVersion); O(dcgmDeviceIdentifiers_v1, virtualizationMode);
  S(dcgmDeviceMemoryUsage_v1); S(dcgmDeviceSettings_v2);
  S(dcgmDeviceAttributes_v3); O(dcgmDeviceAttributes_v3, identifiers); O(dcgmDeviceAttributes_v3, settings);
  S(dcgmFieldValue_v1); O(dcgmFieldValue_v1, fieldId); O(dcgmFieldValue_v1, fieldType); O(dcgmFieldValue_v1, status);
  O(dcgmFieldValue_v1, ts); O(dcgmFieldValue_v1, value);
  S(dcgmHandle_t); S(dcgmGpuGrp_t); S(dcgmFieldGrp_t);
  P(dcgmConnectV2Params_version2); P(dcgmDeviceAttributes_version3);
  P(DCGM_OPERATION_MODE_AUTO); P(DCGM_OPERATION_MODE_MANUAL); P(DCGM_GROUP_DEFAULT); P(DCGM_GROUP_EMPTY);
  P(DCGM_FE_NONE); P(DCGM_FE_GPU); P(DCGM_MAX_NUM_DEVICES); P(DCGM_MAX_STR_LENGTH); P(DCGM_MAX_BLOB_LENGTH);
  P(DCGM_MAX_CLOCKS); P(DCGM_HE_PORT_NUMBER); P(DCGM_FT_DOUBLE);
  P(DCGM_FI_PROF_SM_ACTIVE); P(DCGM_FI_PROF_SM_OCCUPANCY); P(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE);
  P(DCGM_FI_PROF_DRAM_ACTIVE); P(DCGM_FP64_BLANK); P(DCGM_FP64_IS_BLANK(DCGM_FP64_BLANK + 2.0));
HEAD
  for s in $sts; do echo "  P($s);"; done
  echo '  return 0;'
  echo '}'
} > "$tmp/layout.c"
$cc -std=gnu11 -I"$root/src" -o "$tmp/ours" "$tmp/layout.c"
$cc -std=gnu11 -I"$hdir" -DTHEIRS="\"$hdr\"" -o "$tmp/theirs" "$tmp/layout.c"
"$tmp/ours" > "$tmp/ours.txt"
"$tmp/theirs" > "$tmp/theirs.txt"
if ! diff "$tmp/theirs.txt" "$tmp/ours.txt" > "$tmp/diff"; then
  echo "dcgm-abi: layouts or constants that differ ('<' $hdr, '>' ours):" >&2
  cat "$tmp/diff" >&2
  exit 1
fi
echo "dcgm-abi: $nfun entry points, $nscalar scalar types and $(wc -l < "$tmp/ours.txt") sizes, offsets and constants match $hdr"
