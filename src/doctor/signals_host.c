/* doctor/signals_host: the host's side of the analysis window — how many cores the job may use (the
 * least of the cgroup quota, its cpuset and the CPUs seen), how busy the host and the job were, I/O
 * and CPU pressure, memory — and so how many cores other work took.
 *
 * In a group of runs (the nodes of one job) every node has a host of its own; the host-side rules
 * read one of them, the node that holds the others back (dr_pick_node): in a synchronous job the
 * rank that waits longest for its data sets the pace, so its node's CPU, I/O and memory are where a
 * cause of waiting would be, and its steps are the ones whose data wait the rules explain. Where
 * several runs share that host (one task per GPU), the host's series are the host's and the job's
 * are that rank's run's (d->node: host=H,run=ID). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "doctor/doctor_int.h"

/* Without step timings: the run whose job kept the most CPU busy (tree.cpu_pct), from the group's
 * runs (group.run.K.labels: the labels of run K's own series, group.run.K.host its host). */
static void busiest_node(struct dr_run *d) {
  double best = -1;
  for (int k = 0;; k++) {
    char key[64];
    snprintf(key, sizeof key, "group.run.%d.labels", k);
    const char *lab = runview_param(d->v, key);
    snprintf(key, sizeof key, "group.run.%d.host", k);
    const char *host = runview_param(d->v, key);
    if (!lab || !host)
      break;
    struct runview_stats st;
    if (runview_stats(d->v, "proctree", "tree.cpu_pct", lab, d->from, d->to, &st))
      st.n = 0;
    if (!d->host[0] || (st.n && st.mean > best)) {
      dr_printf(d->host, sizeof d->host, "%s", host);
      dr_printf(d->node, sizeof d->node, "%s", lab);
      best = st.n ? st.mean : best;
    }
  }
}

void dr_pick_node(struct dr_run *d) {
  const struct dr_rank *w = NULL;
  for (size_t i = 0; i < d->nranks; i++) {
    const struct dr_rank *r = &d->ranks[i];
    if (r->nsteps >= DR_MIN_STEPS && isfinite(r->data_mean) && r->total_mean > 0 && (!w || r->data_mean > w->data_mean))
      w = r;
  }
  d->host_rank = 0;
  if (w && w->rank != 0 && !(w->data_mean <= d->data_mean)) {
    /* another rank waits longer than rank 0: its step figures are what the host side explains */
    d->host_rank = w->rank;
    d->step_mean = w->total_mean;
    d->data_mean = w->data_mean;
    d->data_share = fmin(1, w->data_mean / w->total_mean);
    d->h2d_mean = d->h2d_share = d->compute_mean = NAN;
  }
  char key[64];
  snprintf(key, sizeof key, "group.rank.%d.host", d->host_rank);
  const char *host = runview_param(d->v, key);
  snprintf(key, sizeof key, "group.rank.%d.labels", d->host_rank);
  const char *node = runview_param(d->v, key);
  d->host[0] = d->node[0] = 0;
  if (host && *host) {
    dr_printf(d->host, sizeof d->host, "%s", host);
    if (node && *node)
      dr_printf(d->node, sizeof d->node, "%s", node);
    else
      dr_printf(d->node, sizeof d->node, "host=%s", host);
  } else
    busiest_node(d);
}

void dr_load_host(struct dr_run *d) {
  char base[320];
  for (size_t i = 0; i < d->v->nseries; i++) {
    const struct store_series *s = &d->v->series[i];
    if (!strcmp(s->source, "host") && !strcmp(s->name, "host.cpu.busy_pct") &&
        dr_own_labels(d, s->labels, base, sizeof base) && !strncmp(base, "cpu=", 4) && base[4] >= '0' && base[4] <= '9')
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
