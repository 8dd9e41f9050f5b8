/* serve/mhd_api: fills the libmicrohttpd table of mhd_api.h on first use (see there for why): one
 * load per process, through core's gs_dynlib_use. */
#include <stdio.h>

#define MHD_API_DEFINE_SYMS
#include "serve/mhd_api.h"

struct mhd_api mhd_api;

static struct gs_dynlib lib = {.soname = "libmicrohttpd.so.12",
                               .env = "GPUSCOPE_LIBMHD",
                               .what = "the HTTP server (serve, --listen)",
                               .package = "libmicrohttpd12",
                               .syms = mhd_api_syms,
                               .nsyms = sizeof mhd_api_syms / sizeof mhd_api_syms[0],
                               .table = &mhd_api,
                               .table_size = sizeof mhd_api};

int mhd_api_load(char *err, size_t errlen) {
  return gs_dynlib_use(&lib, err, errlen);
}
