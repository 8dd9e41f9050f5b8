/* collect/proc_net_dev: /proc/net/dev — bytes received and sent per interface (not lo). */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/host_int.h"

void host_read_net_dev(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  if (reread(h->fd_net, h->buf, BUF) <= 0)
    return;
  for (char *line = h->buf; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl)
      *nl = 0;
    char *colon = strchr(line, ':');
    if (colon) {
      char *name = line;
      while (*name == ' ')
        name++;
      size_t len = (size_t)(colon - name);
      if (!(len == 2 && !memcmp(name, "lo", 2))) {
        int fresh = 0;
        struct dev_prev *d = host_dev_slot(h->net, &h->nnet, name, len, &fresh);
        const char *p = colon + 1;
        uint64_t rx = next_u64(&p);
        skip_fields(&p, 7);
        uint64_t tx = next_u64(&p);
        if (d && fresh) {
          char lab[48];
          snprintf(lab, sizeof lab, "iface=%s", d->name);
          d->sid[0] = host_series(s, "host.net.rx_bytes_s", lab, "B/s");
          d->sid[1] = host_series(s, "host.net.tx_bytes_s", lab, "B/s");
        } else if (d && dt > 0 && d->seen) {
          gs_sink_put(s, d->sid[0], now, (double)(rx - d->a) / dt);
          gs_sink_put(s, d->sid[1], now, (double)(tx - d->b) / dt);
        }
        if (d)
          d->a = rx, d->b = tx, d->seen = 1;
      }
    }
    line = nl ? nl + 1 : NULL;
  }
}
