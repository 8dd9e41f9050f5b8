/* core/xid: what NVIDIA's Xid catalogue says of the common Xid codes — the meaning and the action it
 * documents (reset the GPU, reboot, field diagnostics, RMA) — in one table (core.h), so the NVML
 * collector's events, the doctor's `gpu_xid` finding, `gpuscope devices` and the alerts word an Xid
 * the same way. The wording is ours, after NVIDIA's "XID Errors" document. */
#include <stddef.h>

#include "core/core.h"

static const struct gs_xid XIDS[] = {
    {13, "graphics engine exception",
     "usually the application (an illegal access); run field diagnostics if it repeats", 0},
    {31, "GPU memory page fault", "usually the application (an illegal address); check the code, then the driver", 0},
    {43, "GPU stopped processing", "the application faulted on the GPU; restart the job", 0},
    {45, "preemptive cleanup after an earlier error", "follow the Xid before it", 0},
    {48, "double-bit ECC error", "drain the node and reset the GPU; RMA if it repeats", 1},
    {61, "internal micro-controller breakpoint", "reset the GPU; report it to NVIDIA if it repeats", 1},
    {62, "internal micro-controller halt", "drain the node and reset the GPU", 1},
    {63, "ECC page retirement or row remapping recorded", "reset the GPU when idle to apply the remap", 0},
    {64, "ECC page retirement or row remapping failed", "drain the node; run field diagnostics, RMA if it repeats", 1},
    {68, "video processor exception", "reset the GPU", 0},
    {74, "NVLink error", "drain the node, reset the GPU, check the NVLink (field diagnostics)", 1},
    {79, "fallen off the bus", "drain the node; reboot it and check its power and PCIe (field diagnostics)", 1},
    {92, "high single-bit ECC error rate", "watch it; run field diagnostics", 0},
    {94, "contained ECC error", "restart the application; reset the GPU when idle", 1},
    {95, "uncontained ECC error", "drain the node and reset the GPU", 1},
    {119, "GSP RPC timeout", "drain the node; reset the GPU or reboot", 1},
    {120, "GSP error", "drain the node; reset the GPU or reboot", 1},
    {140, "unrecovered ECC error", "drain the node and reset the GPU", 1},
    {154, "GPU recovery action changed", "do what nvidia-smi -q says under Recovery Action (reset or reboot)", 1},
};

const struct gs_xid *gs_xid_of(unsigned code) {
  for (size_t i = 0; i < sizeof XIDS / sizeof XIDS[0]; i++)
    if (XIDS[i].code == code)
      return &XIDS[i];
  return NULL;
}
