/* collect/proc_pressure: /proc/pressure/{cpu,memory,io} — pressure stall information, from the
 * total= microsecond counters, so the share is exact per tick rather than a 10 s average. */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/host_int.h"

/* Opens the three PSI files; a file that exists but cannot be read (PSI disabled) is absent, not
 * zero, and gets no series. */
void host_open_pressure(struct host *h, struct gs_sink *s) {
  static const char *psi[] = {"/proc/pressure/cpu", "/proc/pressure/memory", "/proc/pressure/io"};
  static const char *psi_names[3][2] = {{"host.psi.cpu_some_pct", NULL},
                                        {"host.psi.memory_some_pct", "host.psi.memory_full_pct"},
                                        {"host.psi.io_some_pct", "host.psi.io_full_pct"}};
  for (int r = 0; r < 3; r++) {
    h->fd_psi[r] = host_open_ro(h, psi[r]);
    if (h->fd_psi[r] >= 0 && reread(h->fd_psi[r], h->buf, BUF) <= 0)
      host_close_fd(&h->fd_psi[r]);
    for (int k = 0; k < 2; k++)
      h->sid_psi[r][k] = h->fd_psi[r] >= 0 && psi_names[r][k] ? host_series(s, psi_names[r][k], "", "%") : -1;
  }
}

void host_read_pressure(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  for (int r = 0; r < 3; r++) {
    if (reread(h->fd_psi[r], h->buf, BUF) <= 0)
      continue;
    for (int k = 0; k < 2; k++) { /* some, full */
      const char *p = strstr(h->buf, k ? "full" : "some");
      p = p ? strstr(p, "total=") : NULL;
      if (!p)
        continue;
      p += 6;
      uint64_t total = next_u64(&p); /* microseconds stalled */
      if (h->primed && dt > 0 && h->sid_psi[r][k] >= 0)
        gs_sink_put(s, h->sid_psi[r][k], now, fmin(100.0, (double)(total - h->psi_prev[r][k]) / 1e4 / dt));
      h->psi_prev[r][k] = total;
    }
  }
}
