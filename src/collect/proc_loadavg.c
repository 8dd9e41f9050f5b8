/* collect/proc_loadavg: /proc/loadavg — the 1-, 5- and 15-minute load averages. */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/host_int.h"

void host_read_loadavg(struct host *h, struct gs_sink *s, int64_t now) {
  if (reread(h->fd_load, h->buf, BUF) <= 0)
    return;
  char *p = h->buf;
  for (int i = 0; i < 3; i++)
    gs_sink_put(s, h->sid_load[i], now, strtod(p, &p));
}
