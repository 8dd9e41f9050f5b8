/* serve/mhd_api: libmicrohttpd loaded on first use, as store/pq_api.h loads libpq (see there): serve's
 * files call libmicrohttpd's functions by their own names, which this header, included after
 * <microhttpd.h>, turns into calls through a table that mhd_api_load() fills. A run without --listen
 * never maps libmicrohttpd and its gnutls stack. Private to serve/. A function serve starts to use
 * must be added to MHD_API_FUNCS: the link fails otherwise (the program is not linked with it). */
#ifndef GS_SERVE_MHD_API_H
#define GS_SERVE_MHD_API_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <microhttpd.h>

#include "core/core.h"

#define MHD_API_FUNCS(X)                                                                                               \
  X(MHD_add_response_header)                                                                                           \
  X(MHD_create_response_from_buffer)                                                                                   \
  X(MHD_create_response_from_callback)                                                                                 \
  X(MHD_destroy_response)                                                                                              \
  X(MHD_get_daemon_info)                                                                                               \
  X(MHD_lookup_connection_value)                                                                                       \
  X(MHD_queue_response)                                                                                                \
  X(MHD_start_daemon)                                                                                                  \
  X(MHD_stop_daemon)                                                                                                   \
  X(MHD_get_connection_info)                                                                                           \
  X(MHD_get_connection_values)                                                                                         \
  X(MHD_set_connection_option)                                                                                         \
  X(MHD_suspend_connection)                                                                                            \
  X(MHD_resume_connection)                                                                                             \
  X(MHD_quiesce_daemon)                                                                                                \
  X(MHD_del_response_header)                                                                                           \
  X(MHD_get_response_header)                                                                                           \
  X(MHD_create_response_from_buffer_with_free_callback)                                                                \
  X(MHD_is_feature_supported)

struct mhd_api {
#define MHD_API_FIELD(f) __typeof__(f) *f;
  MHD_API_FUNCS(MHD_API_FIELD)
#undef MHD_API_FIELD
};

#ifdef MHD_API_DEFINE_SYMS
/* Each entry point's name and place in the table, for mhd_api.c alone (built before the names
 * below become macros). */
static const struct gs_dynsym mhd_api_syms[] = {
#define MHD_API_SYM(f) {#f, offsetof(struct mhd_api, f)},
    MHD_API_FUNCS(MHD_API_SYM)
#undef MHD_API_SYM
};
#endif

/* The table every call below goes through; filled once by mhd_api_load(), never emptied. */
extern struct mhd_api mhd_api;

/* Loads libmicrohttpd (libmicrohttpd.so.12, or $GPUSCOPE_LIBMHD for tests) once per process,
 * thread-safely. Returns 0, or GS_ENOENT with a one-line message in err naming the Debian package
 * (libmicrohttpd12) or the entry point the library lacks; a later call fails the same way. */
int mhd_api_load(char *err, size_t errlen);

#define MHD_API_CALL(f) (mhd_api.f)
#define MHD_add_response_header MHD_API_CALL(MHD_add_response_header)
#define MHD_create_response_from_buffer MHD_API_CALL(MHD_create_response_from_buffer)
#define MHD_create_response_from_callback MHD_API_CALL(MHD_create_response_from_callback)
#define MHD_destroy_response MHD_API_CALL(MHD_destroy_response)
#define MHD_get_daemon_info MHD_API_CALL(MHD_get_daemon_info)
#define MHD_lookup_connection_value MHD_API_CALL(MHD_lookup_connection_value)
#define MHD_queue_response MHD_API_CALL(MHD_queue_response)
#define MHD_start_daemon MHD_API_CALL(MHD_start_daemon)
#define MHD_stop_daemon MHD_API_CALL(MHD_stop_daemon)
#define MHD_get_connection_info MHD_API_CALL(MHD_get_connection_info)
#define MHD_get_connection_values MHD_API_CALL(MHD_get_connection_values)
#define MHD_set_connection_option MHD_API_CALL(MHD_set_connection_option)
#define MHD_suspend_connection MHD_API_CALL(MHD_suspend_connection)
#define MHD_resume_connection MHD_API_CALL(MHD_resume_connection)
#define MHD_quiesce_daemon MHD_API_CALL(MHD_quiesce_daemon)
#define MHD_del_response_header MHD_API_CALL(MHD_del_response_header)
#define MHD_get_response_header MHD_API_CALL(MHD_get_response_header)
#define MHD_create_response_from_buffer_with_free_callback                                                             \
  MHD_API_CALL(MHD_create_response_from_buffer_with_free_callback)
#define MHD_is_feature_supported MHD_API_CALL(MHD_is_feature_supported)

#endif
