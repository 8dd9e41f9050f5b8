/* store/pq_api: libpq loaded on first use. The PostgreSQL back end calls libpq's functions by their
 * own names; this header, included after <libpq-fe.h> (whose types and constants it keeps), turns
 * each of those names into a call through a table that pq_api_load() fills with dlopen/dlsym. So a
 * run into SQLite never maps libpq and what it brings (libcrypto, gnutls, Kerberos, LDAP: about
 * 5 MiB of resident pages), and a machine without libpq can still run gpuscope: a postgresql:// URL
 * then fails with one line naming the package. Private to store/: only the PostgreSQL back end
 * (pg_int.h) includes it. A function the back end starts to use must be added to PQ_API_FUNCS; the
 * link fails otherwise (the program is not linked with libpq). */
#ifndef GS_STORE_PQ_API_H
#define GS_STORE_PQ_API_H

#include <libpq-fe.h>
#include <stddef.h>

#include "core/core.h"

#define PQ_API_FUNCS(X)                                                                                                \
  X(PQclear)                                                                                                           \
  X(PQconnectdbParams)                                                                                                 \
  X(PQconninfoFree)                                                                                                    \
  X(PQconninfoParse)                                                                                                   \
  X(PQenterPipelineMode)                                                                                               \
  X(PQerrorMessage)                                                                                                    \
  X(PQescapeIdentifier)                                                                                                \
  X(PQexec)                                                                                                            \
  X(PQexecParams)                                                                                                      \
  X(PQexecPrepared)                                                                                                    \
  X(PQexitPipelineMode)                                                                                                \
  X(PQfinish)                                                                                                          \
  X(PQfreemem)                                                                                                         \
  X(PQgetResult)                                                                                                       \
  X(PQgetisnull)                                                                                                       \
  X(PQgetlength)                                                                                                       \
  X(PQgetvalue)                                                                                                        \
  X(PQntuples)                                                                                                         \
  X(PQpipelineSync)                                                                                                    \
  X(PQprepare)                                                                                                         \
  X(PQputCopyData)                                                                                                     \
  X(PQputCopyEnd)                                                                                                      \
  X(PQresultErrorField)                                                                                                \
  X(PQresultErrorMessage)                                                                                              \
  X(PQresultStatus)                                                                                                    \
  X(PQsendQueryParams)                                                                                                 \
  X(PQsendQueryPrepared)                                                                                               \
  X(PQsetNoticeProcessor)                                                                                              \
  X(PQstatus)                                                                                                          \
  X(PQtransactionStatus)                                                                                               \
  X(PQsocket)                                                                                                          \
  X(PQsetnonblocking)                                                                                                  \
  X(PQisnonblocking)                                                                                                   \
  X(PQflush)                                                                                                           \
  X(PQconsumeInput)                                                                                                    \
  X(PQisBusy)                                                                                                          \
  X(PQcancel)                                                                                                          \
  X(PQgetCancel)                                                                                                       \
  X(PQfreeCancel)                                                                                                      \
  X(PQsendPrepare)                                                                                                     \
  X(PQpipelineStatus)

struct pq_api {
#define PQ_API_FIELD(f) __typeof__(f) *f;
  PQ_API_FUNCS(PQ_API_FIELD)
#undef PQ_API_FIELD
};

#ifdef PQ_API_DEFINE_SYMS
/* Each entry point's name and place in the table, for pq_api.c alone: it must be built here, before
 * the names below become macros. */
static const struct gs_dynsym pq_api_syms[] = {
#define PQ_API_SYM(f) {#f, offsetof(struct pq_api, f)},
    PQ_API_FUNCS(PQ_API_SYM)
#undef PQ_API_SYM
};
#endif

/* The table every call below goes through; filled once by pq_api_load(), never emptied. */
extern struct pq_api pq_api;

/* Loads libpq (libpq.so.5, or $GPUSCOPE_LIBPQ for tests) once per process, thread-safely. Returns 0,
 * or a negative GS_E… code with a one-line message in err naming the Debian package to install
 * (libpq5) or the entry point the library lacks. Calling it again after a success costs a load of
 * one flag; after a failure it fails again with the same message. */
int pq_api_load(char *err, size_t errlen);

#define PQ_API_CALL(f) (pq_api.f)
#define PQclear PQ_API_CALL(PQclear)
#define PQconnectdbParams PQ_API_CALL(PQconnectdbParams)
#define PQconninfoFree PQ_API_CALL(PQconninfoFree)
#define PQconninfoParse PQ_API_CALL(PQconninfoParse)
#define PQenterPipelineMode PQ_API_CALL(PQenterPipelineMode)
#define PQerrorMessage PQ_API_CALL(PQerrorMessage)
#define PQescapeIdentifier PQ_API_CALL(PQescapeIdentifier)
#define PQexec PQ_API_CALL(PQexec)
#define PQexecParams PQ_API_CALL(PQexecParams)
#define PQexecPrepared PQ_API_CALL(PQexecPrepared)
#define PQexitPipelineMode PQ_API_CALL(PQexitPipelineMode)
#define PQfinish PQ_API_CALL(PQfinish)
#define PQfreemem PQ_API_CALL(PQfreemem)
#define PQgetResult PQ_API_CALL(PQgetResult)
#define PQgetisnull PQ_API_CALL(PQgetisnull)
#define PQgetlength PQ_API_CALL(PQgetlength)
#define PQgetvalue PQ_API_CALL(PQgetvalue)
#define PQntuples PQ_API_CALL(PQntuples)
#define PQpipelineSync PQ_API_CALL(PQpipelineSync)
#define PQprepare PQ_API_CALL(PQprepare)
#define PQputCopyData PQ_API_CALL(PQputCopyData)
#define PQputCopyEnd PQ_API_CALL(PQputCopyEnd)
#define PQresultErrorField PQ_API_CALL(PQresultErrorField)
#define PQresultErrorMessage PQ_API_CALL(PQresultErrorMessage)
#define PQresultStatus PQ_API_CALL(PQresultStatus)
#define PQsendQueryParams PQ_API_CALL(PQsendQueryParams)
#define PQsendQueryPrepared PQ_API_CALL(PQsendQueryPrepared)
#define PQsetNoticeProcessor PQ_API_CALL(PQsetNoticeProcessor)
#define PQstatus PQ_API_CALL(PQstatus)
#define PQtransactionStatus PQ_API_CALL(PQtransactionStatus)
#define PQsocket PQ_API_CALL(PQsocket)
#define PQsetnonblocking PQ_API_CALL(PQsetnonblocking)
#define PQisnonblocking PQ_API_CALL(PQisnonblocking)
#define PQflush PQ_API_CALL(PQflush)
#define PQconsumeInput PQ_API_CALL(PQconsumeInput)
#define PQisBusy PQ_API_CALL(PQisBusy)
#define PQcancel PQ_API_CALL(PQcancel)
#define PQgetCancel PQ_API_CALL(PQgetCancel)
#define PQfreeCancel PQ_API_CALL(PQfreeCancel)
#define PQsendPrepare PQ_API_CALL(PQsendPrepare)
#define PQpipelineStatus PQ_API_CALL(PQpipelineStatus)

#endif
