/* collect/proc_stat: /proc/stat — CPU time per core and in total (user, system, iowait, steal,
 * busy), as shares of the time since the last tick. */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/host_int.h"

void host_read_proc_stat(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  (void)dt;
  if (reread(h->fd_stat, h->buf, BUF) <= 0)
    return;
  for (const char *line = h->buf; line && !strncmp(line, "cpu", 3);
       line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    const char *p = line + 3;
    int idx = 0;
    if (isdigit((unsigned char)*p)) {
      idx = 1 + (int)next_u64(&p);
      if (idx > MAX_CPUS)
        continue;
    }
    uint64_t user = next_u64(&p), nice = next_u64(&p), sys = next_u64(&p), idle = next_u64(&p), iow = next_u64(&p),
             irq = next_u64(&p), sirq = next_u64(&p), steal = next_u64(&p);
    struct cpu_prev *c = &h->cpu[idx], cur = *c;
    cur.user = user + nice;
    cur.system = sys + irq + sirq;
    cur.iowait = iow;
    cur.steal = steal;
    cur.idle = idle;
    cur.total = cur.user + cur.system + iow + steal + idle;
    if (!c->registered) {
      cur.registered = 1;
      char lab[32];
      if (idx)
        snprintf(lab, sizeof lab, "cpu=%d", idx - 1);
      else
        snprintf(lab, sizeof lab, "cpu=total");
      cur.sid[0] = host_series(s, "host.cpu.busy_pct", lab, "%");
      cur.sid[1] = host_series(s, "host.cpu.user_pct", lab, "%");
      cur.sid[2] = host_series(s, "host.cpu.system_pct", lab, "%");
      cur.sid[3] = host_series(s, "host.cpu.iowait_pct", lab, "%");
      cur.sid[4] = host_series(s, "host.cpu.steal_pct", lab, "%");
      if (idx > h->ncpu)
        h->ncpu = idx;
    } else if (h->primed && cur.total > c->total) {
      double d = (double)(cur.total - c->total);
      gs_sink_put(s, cur.sid[0], now,
                  100.0 * (d - (double)(cur.idle - c->idle) - (double)(cur.iowait - c->iowait)) / d);
      gs_sink_put(s, cur.sid[1], now, 100.0 * (double)(cur.user - c->user) / d);
      gs_sink_put(s, cur.sid[2], now, 100.0 * (double)(cur.system - c->system) / d);
      gs_sink_put(s, cur.sid[3], now, 100.0 * (double)(cur.iowait - c->iowait) / d);
      gs_sink_put(s, cur.sid[4], now, 100.0 * (double)(cur.steal - c->steal) / d);
    }
    *c = cur;
  }
}
