/* store/sqlite_util: the SQLite back end's shared helpers (sqlite_int.h) — error messages that name
 * their cause, the one loop every reader steps its rows with (so a lock or an I/O error is an
 * error, never the end of the rows), the quiet rollback, and small column and array helpers. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "store/sqlite_int.h"

/* Whether the folder of path has (almost) no space left. */
static int disk_nearly_full(const char *path) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    dir[1] = 0;
  else
    *slash = 0;
  struct statvfs v;
  return statvfs(dir, &v) == 0 && (double)v.f_bavail * (double)v.f_frsize < 1024.0 * 1024.0;
}

/* Whether the store's file or its -wal has reached this process's file size limit (ulimit -f). */
static int at_file_size_limit(const char *path) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) || rl.rlim_cur == RLIM_INFINITY)
    return 0;
  char p[1100];
  const char *suffix[] = {"", "-wal", "-journal"};
  for (int i = 0; i < 3; i++) {
    struct stat sb;
    snprintf(p, sizeof p, "%s%s", path, suffix[i]);
    if (stat(p, &sb) == 0 && (rlim_t)sb.st_size + 65536 >= rl.rlim_cur)
      return 1;
  }
  return 0;
}

/* What went wrong, in the words a person acts on; NULL when it is none of these. SQLite reports a
 * write past a size limit as a plain I/O error and its errno may be stale by now, so a failed
 * write also looks at the limit and at the free space. */
static const char *cause(struct sqlite_store *s) {
  int rc = sqlite3_extended_errcode(s->db) & 0xff, e = sqlite3_system_errno(s->db);
  if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
    return "locked by another process";
  if (rc == SQLITE_READONLY || e == EROFS)
    return "the store is read-only";
  if (rc != SQLITE_FULL && rc != SQLITE_IOERR && rc != SQLITE_CANTOPEN)
    return NULL;
  if (e == EFBIG || at_file_size_limit(s->path))
    return "file size limit reached (ulimit -f)";
  if (e == EDQUOT)
    return "disk quota exceeded";
  if (rc == SQLITE_FULL || e == ENOSPC || disk_nearly_full(s->path))
    return "disk full";
  return NULL;
}

int sq_fail(struct sqlite_store *s, const char *what) {
  int rc = sqlite3_extended_errcode(s->db) & 0xff;
  const char *why = cause(s), *msg = sqlite3_errmsg(s->db);
  int code = rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? GS_EBUSY : GS_EIO;
  if (why)
    return gs_fail(code, "store %s: %s: %s (%s)", s->path, what, why, msg);
  return gs_fail(code, "store %s: %s: %s", s->path, what, msg);
}

int sq_exec(struct sqlite_store *s, const char *sql, const char *what) {
  return sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK ? GS_OK : sq_fail(s, what);
}

int sq_step_done(struct sqlite_store *s, sqlite3_stmt *st, const char *what) {
  sqlite3_reset(st);
  return sqlite3_step(st) == SQLITE_DONE ? GS_OK : sq_fail(s, what);
}

void sq_rollback(struct sqlite_store *s) {
  /* SQLite may have rolled back already (SQLITE_FULL, an I/O error): then there is nothing to do,
   * and a ROLLBACK would only fail with "no transaction is active". */
  if (!sqlite3_get_autocommit(s->db))
    sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

int sq_each_row(struct sqlite_store *s, sqlite3_stmt *st, const char *what, int (*row)(sqlite3_stmt *st, void *user),
                void *user) {
  int rc = GS_OK, step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW)
    if ((rc = row(st, user)))
      break;
  if (!rc && step != SQLITE_DONE)
    rc = sq_fail(s, what);
  sqlite3_finalize(st);
  return rc;
}

int sq_prepare(struct sqlite_store *s, const char *sql, sqlite3_stmt **st, const char *what) {
  *st = NULL;
  return sqlite3_prepare_v2(s->db, sql, -1, st, NULL) == SQLITE_OK ? GS_OK : sq_fail(s, what);
}

void sq_copy_col(sqlite3_stmt *st, int col, char *dst, size_t n) {
  const unsigned char *t = sqlite3_column_text(st, col);
  snprintf(dst, n, "%s", t ? (const char *)t : "");
}

int sq_check_writable(struct sqlite_store *s) {
  if (!s->base.read_only)
    return GS_OK;
  return gs_fail(GS_EINVAL, "store %s is open read-only here: nothing was written", s->path);
}

void *sq_vec_push(struct sq_vec *x) {
  if (x->len == x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 16;
    void *nv = realloc(x->v, cap * x->elem);
    if (!nv) {
      gs_fail(GS_ENOMEM, "out of memory");
      return NULL;
    }
    x->v = nv;
    x->cap = cap;
  }
  void *item = (char *)x->v + x->len++ * x->elem;
  memset(item, 0, x->elem);
  return item;
}
