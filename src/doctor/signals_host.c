/* doctor/signals_host: the host's side of the analysis window — how many cores the job may use (the
 * least of the cgroup quota, its cpuset and the CPUs seen), how busy the host and the job were, I/O
 * and CPU pressure, memory — and so how many cores other work took. */
#include <math.h>
#include <string.h>

#include "doctor/doctor_int.h"

void dr_load_host(struct dr_run *d) {
  for (size_t i = 0; i < d->v->nseries; i++) {
    const struct store_series *s = &d->v->series[i];
    if (!strcmp(s->source, "host") && !strcmp(s->name, "host.cpu.busy_pct") && !strncmp(s->labels, "cpu=", 4) &&
        s->labels[4] >= '0' && s->labels[4] <= '9')
      d->ncpu++;
  }
  struct dr_stats q, cs;
  dr_stats_of(d, "host", "host.cgroup.cpu_limit_cores", "", &q);
  d->quota = q.n && q.mean > 0 ? q.mean : NAN;
  /* The CPUs the job may run on (its affinity and cgroup cpuset): the fewest seen, since a limit
   * tightened during the run binds from then on. */
  dr_stats_of(d, "host", "host.cpuset_cores", "", &cs);
  d->cpuset = cs.n && cs.min >= 1 ? cs.min : NAN;
  d->cores = NAN;
  double lim[3] = {d->quota, d->cpuset, d->ncpu ? (double)d->ncpu : NAN};
  for (int k = 0; k < 3; k++)
    if (isfinite(lim[k]))
      d->cores = isfinite(d->cores) ? fmin(d->cores, lim[k]) : lim[k];
  dr_stats_of(d, "host", "host.cpu.busy_pct", "cpu=total", &d->host_busy);
  dr_stats_of(d, "host", "host.cpu.iowait_pct", "cpu=total", &d->iowait);
  dr_stats_of(d, "host", "host.psi.io_some_pct", "", &d->psi_io);
  dr_stats_of(d, "host", "host.psi.cpu_some_pct", "", &d->psi_cpu);
  dr_stats_of(d, "host", "host.mem.available_bytes", "", &d->mem_avail);
  dr_stats_of(d, "host", "host.mem.total_bytes", "", &d->mem_total);
  dr_stats_of(d, "host", "host.cgroup.mem_limit_bytes", "", &d->cg_mem_limit);
  dr_stats_of(d, "host", "host.cgroup.mem_used_bytes", "", &d->cg_mem_used);
  dr_stats_of(d, "proctree", "tree.cpu_pct", "", &d->tree_cpu);
  dr_stats_of(d, "proctree", "tree.rss_bytes", "", &d->tree_rss);
  dr_stats_of(d, "proctree", "tree.dstate", "", &d->tree_dstate);
  dr_stats_of(d, "proctree", "tree.procs", "", &d->tree_procs);
  dr_stats_of(d, "proctree", "tree.read_bytes_s", "", &d->tree_read);
  d->job_cores = d->tree_cpu.n ? d->tree_cpu.mean / 100 : NAN;
  d->others_cores = NAN;
  if (d->host_busy.n && d->ncpu && isfinite(d->job_cores))
    d->others_cores = fmax(0, d->host_busy.mean / 100 * d->ncpu - d->job_cores);
}
