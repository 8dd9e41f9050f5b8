/* serve/mhd_api: fills the libmicrohttpd table of mhd_api.h on first use (see there for why): one
 * load per process, under pthread_once, through core's gs_dynlib_load. */
#include <pthread.h>
#include <stdio.h>

#define MHD_API_DEFINE_SYMS
#include "serve/mhd_api.h"

struct mhd_api mhd_api;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_err[320];

static void load(void) {
  struct mhd_api t;
  if (!gs_dynlib_load("libmicrohttpd.so.12", "GPUSCOPE_LIBMHD", "the HTTP server (serve, --listen)", "libmicrohttpd12",
                      mhd_api_syms, sizeof mhd_api_syms / sizeof mhd_api_syms[0], &t, load_err, sizeof load_err)) {
    load_rc = GS_ENOENT;
    return;
  }
  mhd_api = t;
}

int mhd_api_load(char *err, size_t errlen) {
  pthread_once(&load_once, load);
  if (load_rc && err && errlen)
    snprintf(err, errlen, "%s", load_err);
  return load_rc;
}
