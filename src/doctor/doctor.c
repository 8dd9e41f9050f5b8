/* doctor: placeholder until the rules land — no findings. */
#include <stdlib.h>

#include "doctor/doctor.h"

int doctor_run(struct store *st, const char *run_id, struct store_finding **out, size_t *n) {
  (void)st, (void)run_id;
  if (out)
    *out = NULL;
  *n = 0;
  return GS_OK;
}
