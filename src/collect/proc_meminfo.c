/* collect/proc_meminfo: /proc/meminfo — memory total, used, available, cached, and swap. A file
 * that lacks one of the six keys gives nothing that tick (missing is not zero). */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/host_int.h"

static uint64_t meminfo_kib(const char *buf, const char *key, int *found) {
  const char *p = strstr(buf, key);
  if (!p || (p != buf && p[-1] != '\n'))
    return 0;
  p += strlen(key);
  *found += 1;
  return next_u64(&p);
}

void host_read_meminfo(struct host *h, struct gs_sink *s, int64_t now) {
  if (reread(h->fd_mem, h->buf, BUF) <= 0)
    return;
  int f = 0;
  uint64_t total = meminfo_kib(h->buf, "MemTotal:", &f), avail = meminfo_kib(h->buf, "MemAvailable:", &f),
           cached = meminfo_kib(h->buf, "Cached:", &f), buffers = meminfo_kib(h->buf, "Buffers:", &f),
           swt = meminfo_kib(h->buf, "SwapTotal:", &f), swf = meminfo_kib(h->buf, "SwapFree:", &f);
  if (f < 6)
    return;
  gs_sink_put(s, h->sid_mem[0], now, (double)total * 1024);
  gs_sink_put(s, h->sid_mem[1], now, (double)(total - avail) * 1024);
  gs_sink_put(s, h->sid_mem[2], now, (double)avail * 1024);
  gs_sink_put(s, h->sid_mem[3], now, (double)(cached + buffers) * 1024);
  gs_sink_put(s, h->sid_mem[4], now, (double)(swt - swf) * 1024);
  gs_sink_put(s, h->sid_mem[5], now, (double)swt * 1024);
}
