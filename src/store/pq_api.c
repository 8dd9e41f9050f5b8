/* store/pq_api: fills the libpq table of pq_api.h on first use (see there for why): one load per
 * process, through core's gs_dynlib_use. */
#include <stdio.h>

#define PQ_API_DEFINE_SYMS
#include "store/pq_api.h"

struct pq_api pq_api;

static struct gs_dynlib lib = {.soname = "libpq.so.5",
                               .env = "GPUSCOPE_LIBPQ",
                               .what = "a postgresql:// store",
                               .package = "libpq5",
                               .syms = pq_api_syms,
                               .nsyms = sizeof pq_api_syms / sizeof pq_api_syms[0],
                               .table = &pq_api,
                               .table_size = sizeof pq_api};

int pq_api_load(char *err, size_t errlen) {
  return gs_dynlib_use(&lib, err, errlen);
}
