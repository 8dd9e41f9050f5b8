/* core/dynlib: a library loaded on first use, its entry points written into a caller's table. The
 * PostgreSQL store (store/pq_api.c) and the HTTP server (serve/mhd_api.c) load libpq and
 * libmicrohttpd this way, so a run that uses neither never maps them (docs/architecture.md); the
 * NVML loader (collect/nvml_api.c) is the older pattern, with versioned names of its own. */
#include <dlfcn.h>
#include <pthread.h>
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

static pthread_mutex_t dynlib_mu = PTHREAD_MUTEX_INITIALIZER;

int gs_dynlib_use(struct gs_dynlib *d, char *err, size_t errlen) {
  pthread_mutex_lock(&dynlib_mu);
  if (!d->tried) {
    d->tried = 1;
    /* filled into a copy, so a table is never seen half-written */
    void *t = calloc(1, d->table_size);
    if (!t) {
      snprintf(d->err, sizeof d->err, "%s: out of memory", d->what);
      d->rc = GS_ENOMEM;
    } else if (!gs_dynlib_load(d->soname, d->env, d->what, d->package, d->syms, d->nsyms, t, d->err, sizeof d->err)) {
      d->rc = GS_ENOENT;
    } else {
      memcpy(d->table, t, d->table_size);
    }
    free(t);
  }
  int rc = d->rc;
  if (rc && err && errlen)
    snprintf(err, errlen, "%s", d->err);
  pthread_mutex_unlock(&dynlib_mu);
  return rc;
}
