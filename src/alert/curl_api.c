/* alert/curl_api: fills the libcurl table of curl_api.h on first use (see there for why): one load
 * per process, through core's gs_dynlib_use. */
#include <stdio.h>

#define CURL_API_DEFINE_SYMS
#include "alert/curl_api.h"

struct curl_api curl_api;

static struct gs_dynlib lib = {.soname = "libcurl.so.4",
                               .env = "GPUSCOPE_LIBCURL",
                               .what = "an alert webhook",
                               .package = "libcurl4",
                               .syms = curl_api_syms,
                               .nsyms = sizeof curl_api_syms / sizeof curl_api_syms[0],
                               .table = &curl_api,
                               .table_size = sizeof curl_api};

int curl_api_load(char *err, size_t errlen) {
  return gs_dynlib_use(&lib, err, errlen);
}
