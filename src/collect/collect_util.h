/* collect_util: private helpers of the procfs collectors (not part of the subsystem's interface):
 * files kept open and re-read with pread each tick, and allocation-free field parsing. */
#ifndef GS_COLLECT_UTIL_H
#define GS_COLLECT_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

/* Re-reads an open file from offset 0 into buf (NUL-terminated). Returns bytes read or -1. */
static inline ssize_t reread(int fd, char *buf, size_t n) {
  if (fd < 0)
    return -1;
  ssize_t r = pread(fd, buf, n - 1, 0);
  buf[r > 0 ? r : 0] = 0;
  return r;
}

/* Parses an unsigned decimal at *p, skipping leading spaces; advances *p past it. */
static inline uint64_t next_u64(const char **p) {
  const char *s = *p;
  while (*s == ' ' || *s == '\t')
    s++;
  uint64_t v = 0;
  while (*s >= '0' && *s <= '9')
    v = v * 10 + (uint64_t)(*s++ - '0');
  *p = s;
  return v;
}

/* Skips n space-separated fields. */
static inline void skip_fields(const char **p, int n) {
  const char *s = *p;
  while (n-- > 0) {
    while (*s == ' ')
      s++;
    while (*s && *s != ' ' && *s != '\n')
      s++;
  }
  *p = s;
}

/* proctree.c, for proctree_gpu.c: 1 once a tree (a collector_proctree context) is over — its root
 * has exited (or was never there) and no process is left in it. */
int proctree_ended(void *ctx);

#endif
