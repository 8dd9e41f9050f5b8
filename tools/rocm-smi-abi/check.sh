#!/bin/sh
# tools/rocm-smi-abi/check.sh [ROCM_SMI_H ...]: checks gpuscope's own ROCm SMI declarations
# (src/collect/rocm_smi_api.h) against AMD's rocm_smi.h, which gpuscope never needs to build:
#   1. every entry point of struct rocm_smi_api has the type of AMD's function of that name (the
#      member lines are taken from our header and compiled against rocm_smi.h's types;
#      __builtin_types_compatible_p);
#   2. the size and member offsets of every struct we declare and the value of every constant we use
#      are the same compiled with either header (two programs print them; their outputs are compared).
#      rsmi_frequencies_t differs between ROCm 5 and 6: the header's is compared with our layout of the
#      same RSMI_MAX_NUM_FREQUENCIES (struct rsmi_freq_v5: 32, rsmi_freq_v6: 33).
# The headers: the arguments, else $ROCM_SMI_H, else those found of Debian's librocm-smi-dev
# (/usr/include/rocm_smi/rocm_smi.h) and ROCm's (/opt/rocm/include/rocm_smi/rocm_smi.h); each one is
# checked. Upstream's is ROCm/rocm_smi_lib's include/rocm_smi/rocm_smi.h. Nothing is copied from them
# into the tree. Without one the check is skipped (exit 77). Exit 0 when every check passes for every
# header, 1 with the differences. docs/amd.md.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
hdrs="$*"
[ -n "$hdrs" ] || hdrs=${ROCM_SMI_H:-}
if [ -z "$hdrs" ]; then
  for c in /usr/include/rocm_smi/rocm_smi.h /opt/rocm/include/rocm_smi/rocm_smi.h; do
    [ -f "$c" ] && hdrs="$hdrs $c"
  done
fi
if [ -z "$hdrs" ]; then
  echo "rocm-smi-abi: skip: no rocm_smi.h (apt-get install librocm-smi-dev, or give the path of ROCm/rocm_smi_lib's" \
       "include/rocm_smi/rocm_smi.h: tools/rocm-smi-abi/check.sh PATH)" >&2
  exit 77
fi
cc=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
api="$root/src/collect/rocm_smi_api.h"

awk '/^struct rocm_smi_api \{/ {on = 1; next} on && /^\};/ {exit} on {print}' "$api" |
  sed 's|/\*.*\*/||' | tr '\n' ' ' | tr ';' '\n' |
  grep -E '\(\*rsmi_[A-Za-z0-9_]+\)' | sed 's/^ *//' > "$tmp/members"
names=$(sed -E 's/.*\(\*(rsmi_[A-Za-z0-9_]+)\).*/\1/' "$tmp/members")
nfun=$(echo "$names" | wc -l)

cat > "$tmp/layout.c" <<'EOC'
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#ifdef THEIRS
#include THEIRS
#define FREQ rsmi_frequencies_t
#else
#include "collect/rocm_smi_api.h"
#if NFREQ == 32
#define FREQ struct rsmi_freq_v5
#else
#define FREQ struct rsmi_freq_v6
#endif
#endif
#define P(x) printf("%-50s %lld\n", #x, (long long)(x))
#define S(t) P(sizeof(t))
#define O(t, m) P(offsetof(t, m))
int main(void) {
  S(rsmi_status_t); S(rsmi_memory_type_t); S(rsmi_temperature_metric_t); S(rsmi_clk_type_t); S(rsmi_gpu_block_t);
  S(rsmi_error_count_t); O(rsmi_error_count_t, uncorrectable_err);
  S(rsmi_process_info_t); O(rsmi_process_info_t, pasid); O(rsmi_process_info_t, vram_usage);
  O(rsmi_process_info_t, sdma_usage); O(rsmi_process_info_t, cu_occupancy);
  S(FREQ); O(FREQ, num_supported); O(FREQ, current); O(FREQ, frequency);
  P(RSMI_STATUS_SUCCESS); P(RSMI_STATUS_INVALID_ARGS); P(RSMI_STATUS_NOT_SUPPORTED); P(RSMI_STATUS_PERMISSION);
  P(RSMI_STATUS_INIT_ERROR); P(RSMI_STATUS_NOT_YET_IMPLEMENTED); P(RSMI_STATUS_NOT_FOUND);
  P(RSMI_STATUS_INSUFFICIENT_SIZE); P(RSMI_STATUS_NO_DATA); P(RSMI_STATUS_UNEXPECTED_DATA); P(RSMI_STATUS_BUSY);
  P(RSMI_STATUS_REFCOUNT_OVERFLOW); P(RSMI_STATUS_UNKNOWN_ERROR);
  P(RSMI_MEM_TYPE_VRAM); P(RSMI_TEMP_CURRENT); P(RSMI_TEMP_TYPE_EDGE); P(RSMI_TEMP_TYPE_JUNCTION);
  P(RSMI_TEMP_TYPE_MEMORY); P(RSMI_CLK_TYPE_SYS); P(RSMI_GPU_BLOCK_UMC); P(RSMI_GPU_BLOCK_GFX);
  return 0;
}
EOC

fail=0
for hdr in $hdrs; do
  # 1. The entry points: our struct's function-pointer members, compiled with rocm_smi.h's types.
  {
    echo '#include <stddef.h>'
    echo "#include \"$hdr\""
    echo 'struct ours {'
    sed 's/$/;/' "$tmp/members"
    echo '};'
    echo '#define SAME(f) _Static_assert(__builtin_types_compatible_p(__typeof__(((struct ours *)0)->f), __typeof__(&f)), #f " differs from rocm_smi.h")'
    for n in $names; do
      if grep -q "$n(" "$hdr"; then echo "SAME($n);"; else echo "/* $n: not in this header */"; fi
    done
    echo 'int main(void) { return 0; }'
  } > "$tmp/protos.c"
  missing=$(grep -c 'not in this header' "$tmp/protos.c" || true)
  inc=$(cd "$(dirname "$hdr")/.." && pwd) # rocm_smi.h includes "rocm_smi/kfd_ioctl.h": its sibling
  if ! $cc -std=gnu11 -I"$inc" -fsyntax-only "$tmp/protos.c" 2> "$tmp/protos.err"; then
    echo "rocm-smi-abi: entry points that differ from $hdr:" >&2
    grep -E 'error' "$tmp/protos.err" | sed 's/^[^:]*:[0-9]*:[0-9]*: //' >&2
    fail=1
    continue
  fi
  # 2. Layouts and constants.
  nfreq=$(sed -n 's/^#define RSMI_MAX_NUM_FREQUENCIES \([0-9]*\).*/\1/p' "$hdr")
  $cc -std=gnu11 -I"$root/src" -DNFREQ="$nfreq" -o "$tmp/ours" "$tmp/layout.c"
  $cc -std=gnu11 -I"$inc" -DTHEIRS="\"$hdr\"" -o "$tmp/theirs" "$tmp/layout.c"
  "$tmp/ours" | sed 's/struct rsmi_freq_v[56]/FREQ/' | tr -s ' ' > "$tmp/ours.txt"
  "$tmp/theirs" | sed 's/rsmi_frequencies_t/FREQ/' | tr -s ' ' > "$tmp/theirs.txt"
  if ! diff "$tmp/theirs.txt" "$tmp/ours.txt" > "$tmp/diff"; then
    echo "rocm-smi-abi: layouts or constants that differ ('<' $hdr, '>' ours):" >&2
    cat "$tmp/diff" >&2
    fail=1
    continue
  fi
  echo "rocm-smi-abi: $((nfun - missing)) entry points ($missing newer than this header) and" \
       "$(wc -l < "$tmp/ours.txt") sizes, offsets and constants match $hdr (RSMI_MAX_NUM_FREQUENCIES $nfreq)"
done
exit $fail
