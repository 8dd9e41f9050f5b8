/* core/dynlib: a library loaded on first use, its entry points written into a caller's table. The
 * PostgreSQL store (store/pq_api.c) and the HTTP server (serve/mhd_api.c) load libpq and
 * libmicrohttpd this way, so a run that uses neither never maps them (docs/architecture.md); the
 * NVML loader (collect/nvml_api.c) is the older pattern, with versioned names of its own. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

void *gs_dynlib_load(const char *soname, const char *env, const char *what, const char *package,
                     const struct gs_dynsym *syms, size_t n, void *table, char *err, size_t errlen) {
  const char *lib = env ? getenv(env) : NULL;
  if (!lib || !*lib)
    lib = soname;
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    snprintf(err, errlen, "%s needs %s, which could not be loaded (%s): install the Debian package %s", what, soname,
             why ? why : "not found", package);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    void *p = dlsym(h, syms[i].name);
    if (!p) {
      snprintf(err, errlen, "%s lacks %s: %s needs the version of %s that Debian 12's %s ships or newer", lib,
               syms[i].name, what, soname, package);
      dlclose(h);
      return NULL;
    }
    memcpy((char *)table + syms[i].off, &p, sizeof p);
  }
  return h;
}
