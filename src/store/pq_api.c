/* store/pq_api: fills the libpq table of pq_api.h on first use (see there for why): one load per
 * process, under pthread_once, through core's gs_dynlib_load. */
#include <pthread.h>
#include <stdio.h>

#define PQ_API_DEFINE_SYMS
#include "store/pq_api.h"

struct pq_api pq_api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_err[320];

static void load(void) {
  struct pq_api t;
  if (!gs_dynlib_load("libpq.so.5", "GPUSCOPE_LIBPQ", "a postgresql:// store", "libpq5", pq_api_syms,
                      sizeof pq_api_syms / sizeof pq_api_syms[0], &t, load_err, sizeof load_err)) {
    load_rc = GS_ENOENT;
    return;
  }
  pq_api = t;
}

int pq_api_load(char *err, size_t errlen) {
  pthread_once(&load_once, load);
  if (load_rc && err && errlen)
    snprintf(err, errlen, "%s", load_err);
  return load_rc;
}
