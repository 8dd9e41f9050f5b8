#!/bin/sh
# tools/rocm-smi-abi/check.sh [ROCM_SMI_H ...]: checks gpuscope's own ROCm SMI declarations
# (src/collect/rocm_smi_api.h) against AMD's rocm_smi.h, which gpuscope never needs to build:
#   1. every entry point of struct rocm_smi_api has the type of AMD's function of that name (the
#      member lines are taken from our header and compiled against rocm_smi.h's types;
#      __builtin_types_compatible_p);
#   2. the size and member offsets of every struct we declare and the value of every constant we use
#      are the same compiled with either header (two programs print them; their outputs are compared).
#      rsmi_frequencies_t differs between ROCm 5 and 6: the header's is compared with our layout of the
#      same RSMI_MAX_NUM_FREQUENCIES (struct rsmi_freq_v5: 32, rsmi_freq_v6: 33). rsmi_gpu_metrics_t
#      grew: ROCm 5's (no indep_throttle_status) is compared whole with struct rsmi_metrics_v5; a
#      later one's offsets of every field gpuscope reads with struct rsmi_metrics_v6's, up to the
#      fields that header has (v1.5's pcie_nak_rcvd_count_acc, or v1.6's residencies), and its size
#      must fit in ROCM_SMI_METRICS_BUF.
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
#define MET rsmi_gpu_metrics_t
#define FITS (sizeof(rsmi_gpu_metrics_t) <= MBUF)
#else
#include "collect/rocm_smi_api.h"
#if NFREQ == 32
#define FREQ struct rsmi_freq_v5
#else
#define FREQ struct rsmi_freq_v6
#endif
#if MLEVEL == 50
#define MET struct rsmi_metrics_v5
#else
#define MET struct rsmi_metrics_v6
#endif
#define FITS (ROCM_SMI_METRICS_BUF == MBUF)
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
  S(struct metrics_table_header_t); O(struct metrics_table_header_t, format_revision);
  O(struct metrics_table_header_t, content_revision); P(FITS);
  O(MET, common_header); O(MET, average_gfx_activity); O(MET, average_umc_activity); O(MET, throttle_status);
  O(MET, pcie_link_speed); O(MET, gfx_activity_acc); O(MET, temperature_hbm);
#if MLEVEL == 50
  S(MET);
#else
  O(MET, firmware_timestamp); O(MET, indep_throttle_status); O(MET, current_socket_power);
  O(MET, pcie_bandwidth_inst); O(MET, current_dclk0s);
#endif
#if MLEVEL >= 61
  O(MET, jpeg_activity); O(MET, pcie_nak_rcvd_count_acc);
#endif
#if MLEVEL >= 70
  O(MET, accumulation_counter); O(MET, prochot_residency_acc); O(MET, ppt_residency_acc);
  O(MET, socket_thm_residency_acc); O(MET, vr_thm_residency_acc); O(MET, hbm_thm_residency_acc);
#endif
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
  # which fields this header's rsmi_gpu_metrics_t has: 50 (ROCm 5), 60 (6.0), 61 (v1.5: 6.1), 70 (v1.6: 6.3)
  mlevel=50
  grep -q 'indep_throttle_status;' "$hdr" && mlevel=60
  grep -q 'pcie_nak_rcvd_count_acc;' "$hdr" && mlevel=61
  grep -q 'accumulation_counter;' "$hdr" && mlevel=70
  mbuf=$(sed -n 's/^#define ROCM_SMI_METRICS_BUF \([0-9]*\).*/\1/p' "$api")
  $cc -std=gnu11 -I"$root/src" -DNFREQ="$nfreq" -DMLEVEL="$mlevel" -DMBUF="$mbuf" -o "$tmp/ours" "$tmp/layout.c"
  $cc -std=gnu11 -I"$inc" -DTHEIRS="\"$hdr\"" -DMLEVEL="$mlevel" -DMBUF="$mbuf" -o "$tmp/theirs" "$tmp/layout.c"
  "$tmp/ours" | sed 's/struct rsmi_freq_v[56]/FREQ/; s/struct rsmi_metrics_v[56]/MET/' | tr -s ' ' > "$tmp/ours.txt"
  "$tmp/theirs" | sed 's/rsmi_frequencies_t/FREQ/; s/rsmi_gpu_metrics_t/MET/' | tr -s ' ' > "$tmp/theirs.txt"
  if ! diff "$tmp/theirs.txt" "$tmp/ours.txt" > "$tmp/diff"; then
    echo "rocm-smi-abi: layouts or constants that differ ('<' $hdr, '>' ours):" >&2
    cat "$tmp/diff" >&2
    fail=1
    continue
  fi
  echo "rocm-smi-abi: $((nfun - missing)) entry points ($missing newer than this header) and" \
       "$(wc -l < "$tmp/ours.txt") sizes, offsets and constants match $hdr (RSMI_MAX_NUM_FREQUENCIES $nfreq," \
       "gpu_metrics fields of level $mlevel)"
done
exit $fail
