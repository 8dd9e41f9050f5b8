/* doctor: rules that turn a stored run's signals into ranked findings — each with a stable rule id,
 * the share of run time it costs, an estimated speed-up, the evidence numbers and a concrete fix.
 * Thresholds and reasoning live in docs/diagnosis.md. */
#ifndef GS_DOCTOR_H
#define GS_DOCTOR_H

#include "store/store.h"

/* Diagnoses run_id, replaces its findings in the store, and returns them ranked (most time lost
 * first) in *out (malloc'd, caller frees; may be NULL when out is NULL). A run with nothing worth
 * fixing gets exactly one finding, rule "healthy". Returns 0 or a GS_E code. */
int doctor_run(struct store *st, const char *run_id, struct store_finding **out, size_t *n);

#endif
