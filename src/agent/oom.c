/* agent/oom: whether the kernel's OOM killer ended the job, on every cgroup layout. The agent reads
 * its cgroup's memory figures (collect_cgroup_oom: v2 memory.events, v1 memory.oom_control and
 * memory.failcnt) when the run starts and when the job has exited; the job was OOM-killed when the
 * kill count rose, or — a kernel without the count — when it died of SIGKILL with the limit
 * reached (the peak at the limit, or the limit hit since the start). The verdict goes into the
 * run's params (exit.oom_killed, exit.oom_limit_bytes, exit.mem_peak_bytes: what the report, the
 * `exit` alert and `runs --where` read) and a note. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/agent_int.h"
#include "collect/collect.h"
#include "core/core.h"

void agent_oom_start(struct collect_oom *at_start) {
  collect_cgroup_oom(NULL, 0, at_start);
}

/* Whether the end figures say the OOM killer ended the job (status: its shell status). */
static int oom_killed(const struct collect_oom *a, const struct collect_oom *b, int status) {
  if (a->kills >= 0 && b->kills > a->kills)
    return 1;
  if (status != 128 + SIGKILL || !isfinite(b->limit_bytes))
    return 0;
  int hit = a->limit_hits >= 0 && b->limit_hits > a->limit_hits;
  /* the peak is within a page or two of the limit when the kernel had to reclaim at it */
  return hit || (isfinite(b->peak_bytes) && b->peak_bytes >= b->limit_bytes - 65536);
}

double agent_oom_end(const struct collect_oom *at_start, int status, struct gs_sink *s) {
  struct collect_oom end;
  if (status < 0 || collect_cgroup_oom(NULL, 0, &end) || !oom_killed(at_start, &end, status))
    return NAN;
  char v[64], lim[32] = "", peak[32] = "", count[80] = "";
  gs_sink_param(s, "exit.oom_killed", "1");
  if (isfinite(end.limit_bytes)) {
    snprintf(v, sizeof v, "%.0f", end.limit_bytes);
    gs_sink_param(s, "exit.oom_limit_bytes", v);
    gs_fmt_limit(end.limit_bytes, lim, sizeof lim);
  }
  if (isfinite(end.peak_bytes)) {
    snprintf(v, sizeof v, "%.0f", end.peak_bytes);
    gs_sink_param(s, "exit.mem_peak_bytes", v);
    gs_fmt_bytes(end.peak_bytes, peak, sizeof peak);
  }
  if (at_start->kills >= 0 && end.kills > at_start->kills)
    snprintf(count, sizeof count, "; the cgroup's oom_kill count %lld -> %lld", at_start->kills, end.kills);
  gs_sink_note(s, "the kernel's OOM killer ended the job%s%s%s%s%s%s",
               lim[0] ? " at its cgroup's memory limit of " : "", lim, peak[0] ? " (peak " : "", peak,
               peak[0] ? ")" : "", count);
  return isfinite(end.limit_bytes) ? end.limit_bytes : 0;
}
