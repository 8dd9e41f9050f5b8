/* collect/host_util: what the host collector's readers share (host_int.h): opening under the root
 * prefix, closing, series, device slots. */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/host_int.h"

int host_open_ro(const struct host *h, const char *path) {
  char p[512];
  return open(collect_path(&h->opts, path, p, sizeof p), O_RDONLY | O_CLOEXEC);
}

void host_close_fd(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

int host_series(struct gs_sink *s, const char *name, const char *labels, const char *unit) {
  return gs_sink_series(s, "host", name, labels, unit, GS_GAUGE);
}

struct dev_prev *host_dev_slot(struct dev_prev *devs, int *n, const char *name, size_t len, int *fresh) {
  for (int i = 0; i < *n; i++)
    if (strlen(devs[i].name) == len && !memcmp(devs[i].name, name, len))
      return &devs[i];
  if (*n >= MAX_DEVS || len >= sizeof devs->name)
    return NULL;
  struct dev_prev *d = &devs[(*n)++];
  memset(d, 0, sizeof *d);
  memcpy(d->name, name, len);
  *fresh = 1;
  return d;
}

int host_same_name(const char *known, const char *name, size_t len) {
  return strlen(known) == len && !memcmp(known, name, len);
}
