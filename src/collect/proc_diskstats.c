/* collect/proc_diskstats: /proc/diskstats — throughput, operations and busy time of each whole disk
 * (a name with /sys/block/NAME that is not a loop or ram device). */
#include <ctype.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/host_int.h"

/* Whether a diskstats name is a whole disk (it has /sys/block/NAME). A name found not to be is
 * remembered, so partitions cost no system call on later ticks. */
static int whole_disk(struct host *h, const char *name, size_t len) {
  for (int i = 0; i < h->nnot_disk; i++)
    if (host_same_name(h->not_disk[i], name, len))
      return 0;
  char p[256], q[512];
  snprintf(p, sizeof p, "/sys/block/%.*s", (int)len, name);
  if (strncmp(name, "loop", 4) && strncmp(name, "ram", 3) && access(collect_path(&h->opts, p, q, sizeof q), F_OK) == 0)
    return 1;
  if (h->nnot_disk < MAX_DEVS && len < sizeof h->not_disk[0]) {
    memcpy(h->not_disk[h->nnot_disk], name, len);
    h->not_disk[h->nnot_disk++][len] = 0;
  }
  return 0;
}

void host_read_diskstats(struct host *h, struct gs_sink *s, int64_t now, double dt) {
  if (reread(h->fd_disk, h->buf, BUF) <= 0)
    return;
  for (char *line = h->buf; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl)
      *nl = 0;
    const char *p = line;
    skip_fields(&p, 2);
    while (*p == ' ')
      p++;
    const char *name = p;
    while (*p && *p != ' ')
      p++;
    size_t len = (size_t)(p - name);
    int fresh = 0;
    struct dev_prev *d = NULL;
    for (int i = 0; i < h->ndisk && !d; i++)
      if (host_same_name(h->disk[i].name, name, len))
        d = &h->disk[i];
    if (!d && len && whole_disk(h, name, len))
      d = host_dev_slot(h->disk, &h->ndisk, name, len, &fresh);
    if (d) {
      uint64_t reads = next_u64(&p);
      skip_fields(&p, 1);
      uint64_t rsec = next_u64(&p), _rms = next_u64(&p), writes = next_u64(&p);
      (void)_rms;
      skip_fields(&p, 1);
      uint64_t wsec = next_u64(&p), _wms = next_u64(&p), _inflight = next_u64(&p), io_ms = next_u64(&p);
      (void)_wms, (void)_inflight;
      if (fresh) {
        char lab[48];
        snprintf(lab, sizeof lab, "dev=%s", d->name);
        d->sid[0] = host_series(s, "host.disk.read_bytes_s", lab, "B/s");
        d->sid[1] = host_series(s, "host.disk.write_bytes_s", lab, "B/s");
        d->sid[2] = host_series(s, "host.disk.read_ops_s", lab, "1/s");
        d->sid[3] = host_series(s, "host.disk.write_ops_s", lab, "1/s");
        d->sid[4] = host_series(s, "host.disk.util_pct", lab, "%");
      } else if (dt > 0 && d->seen) {
        gs_sink_put(s, d->sid[0], now, (double)(rsec - d->a) * 512 / dt);
        gs_sink_put(s, d->sid[1], now, (double)(wsec - d->b) * 512 / dt);
        gs_sink_put(s, d->sid[2], now, (double)(reads - d->c) / dt);
        gs_sink_put(s, d->sid[3], now, (double)(writes - d->d) / dt);
        gs_sink_put(s, d->sid[4], now, fmin(100.0, (double)(io_ms - d->e) / 10.0 / dt));
      }
      d->a = rsec, d->b = wsec, d->c = reads, d->d = writes, d->e = io_ms, d->seen = 1;
    }
    line = nl ? nl + 1 : NULL;
  }
}
