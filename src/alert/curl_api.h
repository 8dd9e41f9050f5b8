/* alert/curl_api: libcurl loaded on first use, as store/pq_api.h loads libpq. The webhook code
 * (webhook.c) calls libcurl by its own names; this header, included after <curl/curl.h> (kept for its
 * types and constants), turns each into a call through a table that curl_api_load() fills with
 * dlopen/dlsym. So a run without a webhook never maps libcurl and its TLS stack (libssl, libcrypto,
 * nghttp2, libssh2, LDAP, Kerberos: test_lazy_libs), and a machine without libcurl runs gpuscope:
 * the alert's delivery then fails with a line naming the package. A function webhook.c starts to use
 * must be added to CURL_API_FUNCS; the link fails otherwise (the program is not linked with libcurl).
 * Private to alert/. */
#ifndef GS_ALERT_CURL_API_H
#define GS_ALERT_CURL_API_H

/* curl.h's type-checking macros would wrap curl_easy_setopt, which names a table entry here. */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <stddef.h>
/* ... and without it, two macros that only count the arguments. */
#undef curl_easy_setopt
#undef curl_easy_getinfo

#include "core/core.h"

#define CURL_API_FUNCS(X)                                                                                              \
  X(curl_easy_init)                                                                                                    \
  X(curl_easy_setopt)                                                                                                  \
  X(curl_easy_perform)                                                                                                 \
  X(curl_easy_getinfo)                                                                                                 \
  X(curl_easy_cleanup)                                                                                                 \
  X(curl_easy_strerror)                                                                                                \
  X(curl_slist_append)                                                                                                 \
  X(curl_slist_free_all)

struct curl_api {
#define CURL_API_FIELD(f) __typeof__(f) *f;
  CURL_API_FUNCS(CURL_API_FIELD)
#undef CURL_API_FIELD
};

#ifdef CURL_API_DEFINE_SYMS
/* Each entry point's name and place in the table, for curl_api.c alone (before the names below
 * become macros). */
static const struct gs_dynsym curl_api_syms[] = {
#define CURL_API_SYM(f) {#f, offsetof(struct curl_api, f)},
    CURL_API_FUNCS(CURL_API_SYM)
#undef CURL_API_SYM
};
#endif

/* The table every call below goes through; filled once by curl_api_load(), never emptied. */
extern struct curl_api curl_api;

/* Loads libcurl (libcurl.so.4, or $GPUSCOPE_LIBCURL for tests) once per process, thread-safely.
 * Returns 0, or GS_ENOENT with a one-line message in err naming the Debian package (libcurl4). */
int curl_api_load(char *err, size_t errlen);

#define CURL_API_CALL(f) (curl_api.f)
#define curl_easy_init CURL_API_CALL(curl_easy_init)
#define curl_easy_setopt CURL_API_CALL(curl_easy_setopt)
#define curl_easy_perform CURL_API_CALL(curl_easy_perform)
#define curl_easy_getinfo CURL_API_CALL(curl_easy_getinfo)
#define curl_easy_cleanup CURL_API_CALL(curl_easy_cleanup)
#define curl_easy_strerror CURL_API_CALL(curl_easy_strerror)
#define curl_slist_append CURL_API_CALL(curl_slist_append)
#define curl_slist_free_all CURL_API_CALL(curl_slist_free_all)

#endif
