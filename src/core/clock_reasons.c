/* core/clock_reasons: the table of NVML's clock-event reasons (core.h), so that the collector's
 * event names, the doctor's throttling bits and the reports' labels come from one place. */
#include <string.h>

#include "core/core.h"

const struct gs_clock_reason gs_clock_reasons[] = {
    {0x1ULL, "GpuIdle", GS_REASON_IDLE},
    {0x2ULL, "ApplicationsClocksSetting", 0},
    {0x4ULL, "SwPowerCap", GS_REASON_THROTTLE | GS_REASON_POWER},
    /* HW slowdown is raised for heat or for the power brake; NVML does not say which. */
    {0x8ULL, "HwSlowdown", GS_REASON_THROTTLE},
    {0x10ULL, "SyncBoost", 0},
    {0x20ULL, "SwThermalSlowdown", GS_REASON_THROTTLE | GS_REASON_HEAT},
    {0x40ULL, "HwThermalSlowdown", GS_REASON_THROTTLE | GS_REASON_HEAT},
    {0x80ULL, "HwPowerBrakeSlowdown", GS_REASON_THROTTLE | GS_REASON_POWER},
    {0x100ULL, "DisplayClockSetting", 0},
};
const size_t gs_clock_reasons_n = sizeof gs_clock_reasons / sizeof gs_clock_reasons[0];

const struct gs_clock_reason *gs_clock_reason_of_bit(unsigned long long bit) {
  for (size_t i = 0; i < gs_clock_reasons_n; i++)
    if (gs_clock_reasons[i].bit == bit)
      return &gs_clock_reasons[i];
  return NULL;
}

const struct gs_clock_reason *gs_clock_reason_named(const char *name) {
  for (size_t i = 0; name && i < gs_clock_reasons_n; i++)
    if (!strcmp(gs_clock_reasons[i].name, name))
      return &gs_clock_reasons[i];
  return NULL;
}

unsigned long long gs_clock_reasons_mask(unsigned flags) {
  unsigned long long m = 0;
  for (size_t i = 0; i < gs_clock_reasons_n; i++)
    if ((gs_clock_reasons[i].flags & flags) == flags)
      m |= gs_clock_reasons[i].bit;
  return m;
}
