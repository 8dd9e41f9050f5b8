/* store/store: the registry of store back ends — one entry per URL scheme — and the default store
 * location. store_open_mode() picks a back end by the URL's scheme (a bare path is SQLite) and
 * hands it the rest; a new back end is one more line in BACKENDS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_backend.h"

static const struct store_backend *const BACKENDS[] = {&store_backend_sqlite, &store_backend_postgresql,
                                                       &store_backend_postgres};

struct store *store_open_mode(const char *url, enum store_mode mode) {
  if (!url || !*url) {
    gs_fail(GS_EINVAL, "empty store URL");
    return NULL;
  }
  const char *sep = strstr(url, "://");
  if (!sep)
    return store_backend_sqlite.open(url, mode);
  for (size_t i = 0; i < sizeof BACKENDS / sizeof *BACKENDS; i++) {
    size_t n = strlen(BACKENDS[i]->scheme);
    if ((size_t)(sep - url) == n && !strncmp(url, BACKENDS[i]->scheme, n))
      return BACKENDS[i]->open(sep + 3, mode);
  }
  gs_fail(GS_EINVAL, "unsupported store URL '%s' (use sqlite:///path/to/file.db or postgresql://host/db)", url);
  return NULL;
}

struct store *store_open(const char *url) {
  return store_open_mode(url, STORE_WRITE);
}

const char *store_default_url(char *buf, size_t n) {
  const char *env = getenv("GPUSCOPE_STORE"), *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
  if (env && *env)
    snprintf(buf, n, "%s", env);
  else if (xdg && *xdg)
    snprintf(buf, n, "sqlite://%s/gpuscope/gpuscope.db", xdg);
  else
    snprintf(buf, n, "sqlite://%s/.local/share/gpuscope/gpuscope.db", home && *home ? home : ".");
  return buf;
}
