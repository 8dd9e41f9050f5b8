/* agent/run_common: what the run loop (agent.c, for run and attach) and the node agent (node.c)
 * share, so neither calls into the other: what a new run records of where it runs, and the writer's
 * default flush period. */
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agent_int.h"
#include "core/core.h"
#include "store/store.h"

void agent_run_fill_here(struct store_run *r, int64_t interval_ns) {
  if (!getcwd(r->cwd, sizeof r->cwd))
    r->cwd[0] = 0;
  gethostname(r->host, sizeof r->host - 1);
  struct passwd *pw = getpwuid(getuid());
  snprintf(r->user, sizeof r->user, "%s", pw ? pw->pw_name : "");
  r->interval_ns = interval_ns;
  r->agent_pid = getpid();
  r->exit_code = -1;
  r->start_wall_ns = gs_wall_ns();
  r->mono_start_ns = gs_mono_ns();
}

int64_t agent_flush_default(int64_t interval_ns) {
  int64_t f = 10 * interval_ns;
  return f < GS_NS_PER_S ? GS_NS_PER_S : f > 10 * GS_NS_PER_S ? 10 * GS_NS_PER_S : f;
}
