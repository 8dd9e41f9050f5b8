/* collect/gpu_owners: whose work is on each GPU. It samples after collector_nvml and reads NVML's
 * fresh per-process series from the sink (gpu.proc_mem_bytes, gpu.proc_sm_pct, labelled gpu=N,pid=P),
 * as gputrees does.
 *
 * On the node agent (opts.pid 0), each GPU process is tied to its owner (proc_pid_owner.c): the
 * series gpu_proc.owner (1 while NVML lists it) labelled pid, nspid (its pid inside its container),
 * runtime, container, pod_uid and hpc_job, and each GPU gets the params gpu.N.hpc_job (the Slurm job:
 * dcgm-exporter's mapping file for the GPU, else its processes' Slurm cgroups), gpu.N.namespace,
 * gpu.N.pod and gpu.N.container (the kubelet's log folders for the processes' pod UID), several
 * jobs or pods on one GPU joined with ','. The exposition puts them on the GPU's DCGM lines; a param
 * goes back to "" when its processes are gone, so a finished job's labels leave the page.
 *
 * In a run (opts.pid > 0) inside a container: when this process is in a PID namespace of its own
 * and NVML lists pids that are not in it (the driver reports the host's), the join of GPU processes
 * to the job cannot work; one note says so, with the fix, and the summary repeats it. A GPU's use is
 * then tied to the job only where that is certain, and marked inferred (infer_owner): every process
 * in this namespace that holds an NVIDIA GPU device open (/dev/nvidiaN) is the job's, and NVML lists
 * exactly as many processes on this container's GPUs as the job has such processes, so no process
 * of another container shares them. Each GPU then gets gpu.N.owner "job" and gpu.N.owner_how the
 * reason; where it is not certain, gpu.N.owner "unknown" and the reason. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/collect.h"
#include "collect/collect_util.h"

enum { MAX_LISTED = 1024, MAX_GPUS = 64, MAX_OWNED = GPUTREES_MAX, N_GPU_PARAMS = 4, MAX_PODRES = 512 };
#define PODRES_EVERY_NS (10 * GS_NS_PER_S) /* pods come and go in seconds, not ticks */
#define PODRES_TIMEOUT_MS 500              /* a local socket: a kubelet that slow is not answering */

static const char *const gpu_params[N_GPU_PARAMS] = {"hpc_job", "namespace", "pod", "container"};

struct listed {
  int gpu;
  pid_t pid;
};

struct owned {
  pid_t pid;
  struct collect_owner o;
  struct collect_pod pod; /* names when the pod's folder was found */
  int sid;
  int listed; /* listed this tick */
};

struct gpuowners {
  struct collector_opts opts;
  const char *jobmap; /* DCGM_HPC_JOB_MAPPING_DIR, NULL when unset */
  int64_t grace_ns, since;
  struct listed listed[MAX_LISTED];
  size_t n_listed;
  struct owned owned[MAX_OWNED];
  size_t n_owned;
  char put[MAX_GPUS][N_GPU_PARAMS][256]; /* the params as last put */
  int own_ns;                            /* in a PID namespace of its own: 1, 0, -1 unknown */
  int foreign;                           /* run mode: pids NVML listed that this namespace lacks */
  int listed_any;                        /* run mode: NVML listed some process */
  int64_t inferred_at;                   /* run mode: when the owner was last inferred */
  char owner[MAX_GPUS][160];             /* run mode: gpu.N.owner_how as last put */
  char how[160];                         /* run mode: the last inference's reason, "" before one */
  int certain;                           /* run mode: whether it tied the GPUs' use to the job */
  int job_holds;                         /* run mode: the job held a GPU device open at the last look */
  char podres_sock[512];                 /* the kubelet's pod-resources socket, "" when absent */
  int64_t podres_at;                     /* when it was last asked */
  int n_podres, podres_noted;
  struct collect_podres_gpu podres[MAX_PODRES];
};

static const struct gs_metric_desc owners_metrics[] = {
    {"gpu_proc.owner", "count", GS_GAUGE,
     "1 for each GPU process NVML lists, labelled with its pid, nspid (inside its container), runtime, "
     "container, pod_uid and hpc_job (the node agent)"},
};

/* The pid and GPU of a "gpu=N,pid=P" label list; 0 when it is not one. */
static int label_gpu_pid(const char *labels, int *gpu, pid_t *pid) {
  const char *p = labels;
  if (strncmp(p, "gpu=", 4))
    return 0;
  p += 4;
  uint64_t g = next_u64(&p);
  if (strncmp(p, ",pid=", 5) || g >= MAX_GPUS)
    return 0;
  p += 5;
  uint64_t v = next_u64(&p);
  if (*p || !v || v >= 1u << 30)
    return 0;
  *gpu = (int)g, *pid = (pid_t)v;
  return 1;
}

/* gs_sink_each callback (under the sink's lock: no sink calls): NVML's fresh per-process series. */
static void note_listed(void *user, int id, const char *source, size_t slen, const char *name, size_t nlen,
                        const char *labels, double v, int64_t t) {
  (void)id, (void)v;
  struct gpuowners *g = user;
  int gpu;
  pid_t pid;
  if (t < g->since || slen != 4 || strncmp(source, "nvml", 4) ||
      !((nlen == 18 && !strncmp(name, "gpu.proc_mem_bytes", 18)) ||
        (nlen == 15 && !strncmp(name, "gpu.proc_sm_pct", 15))) ||
      !label_gpu_pid(labels, &gpu, &pid))
    return;
  for (size_t i = 0; i < g->n_listed; i++)
    if (g->listed[i].gpu == gpu && g->listed[i].pid == pid)
      return;
  if (g->n_listed < MAX_LISTED)
    g->listed[g->n_listed++] = (struct listed){gpu, pid};
}

/* The owner of pid, read when first listed; NULL when it cannot be read or the table is full. */
static struct owned *owner_of(struct gpuowners *g, struct gs_sink *s, pid_t pid) {
  char stat[64];
  for (size_t i = 0; i < g->n_owned; i++)
    if (g->owned[i].pid == pid) /* known: while it lives (NVML may list an exited pid for a while) */
      return collect_proc_read(g->opts.root, pid, "stat", stat, sizeof stat) > 0 ? &g->owned[i] : NULL;
  struct owned *w = &g->owned[g->n_owned];
  if (g->n_owned == MAX_OWNED || collect_owner_of(g->opts.root, pid, &w->o))
    return NULL;
  w->pid = pid;
  memset(&w->pod, 0, sizeof w->pod);
  if (w->o.pod_uid[0])
    collect_k8s_pod(g->opts.root, w->o.pod_uid, w->o.container, &w->pod);
  char labels[512];
  int n = snprintf(labels, sizeof labels, "pid=%d", (int)pid);
  if (w->o.nspid > 0 && w->o.ns_levels > 1)
    n += snprintf(labels + n, sizeof labels - (size_t)n, ",nspid=%ld", w->o.nspid);
  const char *const kv[][2] = {
      {"runtime", w->o.runtime}, {"container", w->o.container}, {"pod_uid", w->o.pod_uid}, {"hpc_job", w->o.hpc_job}};
  for (size_t k = 0; k < 4; k++) /* each value checked for its shape: no ',' or '=' */
    if (kv[k][1][0] && n < (int)sizeof labels)
      n += snprintf(labels + n, sizeof labels - (size_t)n, ",%s=%s", kv[k][0], kv[k][1]);
  w->sid = gs_sink_series(s, "owners", "gpu_proc.owner", labels, "count", GS_GAUGE);
  g->n_owned++;
  return w;
}

/* Adds v to the ','-joined list in buf unless it is there or there is no room. */
static void join_distinct(char *buf, size_t n, const char *v) {
  size_t l = strlen(v), o = strlen(buf);
  if (!l)
    return;
  for (const char *p = buf; *p;) {
    size_t k = strcspn(p, ",");
    if (k == l && !memcmp(p, v, l))
      return;
    p += k + (p[k] == ',');
  }
  if (o + l + 2 <= n)
    snprintf(buf + o, n - o, "%s%s", o ? "," : "", v);
}

/* The pods the kubelet says hold GPU gpu (its UUID, or a MIG instance's parent), into v[1..3].
 * Returns whether any does. */
static int podres_of(struct gpuowners *g, struct gs_sink *s, int gpu, char v[][256]) {
  char key[32], uuid[96];
  snprintf(key, sizeof key, "gpu.%d.uuid", gpu);
  if (!g->n_podres || !gs_sink_param_get(s, key, uuid, sizeof uuid) || !uuid[0])
    return 0;
  int any = 0;
  for (int i = 0; i < g->n_podres; i++)
    if (!strcmp(g->podres[i].uuid, uuid)) {
      join_distinct(v[1], 256, g->podres[i].ns);
      join_distinct(v[2], 256, g->podres[i].pod);
      join_distinct(v[3], 256, g->podres[i].container);
      any = 1;
    }
  return any;
}

/* This tick's params of GPU gpu from the kubelet and its processes' owners; put when they changed. */
static void gpu_params_put(struct gpuowners *g, struct gs_sink *s, int gpu) {
  char v[N_GPU_PARAMS][256] = {{0}};
  int from_file = !collect_hpc_job_file(g->jobmap, gpu, v[0], sizeof v[0]);
  int from_kubelet = podres_of(g, s, gpu, v);
  for (size_t i = 0; i < g->n_listed; i++) {
    if (g->listed[i].gpu != gpu)
      continue;
    for (size_t k = 0; k < g->n_owned; k++) {
      const struct owned *w = &g->owned[k];
      if (w->pid != g->listed[i].pid)
        continue;
      if (!from_file)
        join_distinct(v[0], sizeof v[0], w->o.hpc_job);
      if (from_kubelet)
        continue;
      join_distinct(v[1], sizeof v[1], w->pod.ns);
      join_distinct(v[2], sizeof v[2], w->pod.pod);
      join_distinct(v[3], sizeof v[3], w->pod.container);
    }
  }
  for (int k = 0; k < N_GPU_PARAMS; k++)
    if (strcmp(v[k], g->put[gpu][k])) {
      char key[48];
      snprintf(key, sizeof key, "gpu.%d.%s", gpu, gpu_params[k]);
      gs_sink_param(s, key, v[k]);
      memcpy(g->put[gpu][k], v[k], sizeof v[k]);
    }
}

/* Asks the kubelet which pods hold which GPUs, every PODRES_EVERY_NS; a failure is noted once and
 * leaves the pods to the processes' cgroups until it answers again. */
static void podres_refresh(struct gpuowners *g, struct gs_sink *s, int64_t now) {
  if (!g->podres_sock[0] || (g->podres_at && now - g->podres_at < PODRES_EVERY_NS))
    return;
  char err[600];
  int n = collect_podres_list(g->podres_sock, PODRES_TIMEOUT_MS, g->podres, MAX_PODRES, err, sizeof err);
  g->podres_at = now;
  g->n_podres = n > 0 ? n : 0;
  if (n < 0 && !g->podres_noted++)
    gs_sink_note(s, "kubelet pod-resources: %s; the pods' labels come from the GPU processes' cgroups", err);
}

/* The node agent's tick: owners of the listed processes, their series and each GPU's params. */
static void node_tick(struct gpuowners *g, struct gs_sink *s, int64_t now) {
  podres_refresh(g, s, now);
  for (size_t i = 0; i < g->n_owned; i++)
    g->owned[i].listed = 0;
  unsigned long long gpus = 0;
  for (size_t i = 0; i < g->n_listed; i++) {
    struct owned *w = owner_of(g, s, g->listed[i].pid);
    if (w)
      w->listed = 1;
    gpus |= 1ull << g->listed[i].gpu;
  }
  for (size_t i = 0; i < g->n_owned;) { /* a process NVML no longer lists: its line leaves the page */
    if (g->owned[i].listed) {
      gs_sink_put(s, g->owned[i].sid, now, 1);
      i++;
    } else {
      gs_sink_end(s, g->owned[i].sid);
      g->owned[i] = g->owned[--g->n_owned];
    }
  }
  char key[32], v[8];
  for (int gpu = 0; gpu < MAX_GPUS; gpu++) {
    int had = g->put[gpu][0][0] || g->put[gpu][1][0] || g->put[gpu][2][0] || g->put[gpu][3][0];
    /* the mapping files and the kubelet name a GPU's job or pod whether or not a process runs */
    snprintf(key, sizeof key, "gpu.%d.uuid", gpu);
    if (gpus >> gpu & 1 || had || ((g->jobmap || g->n_podres) && gs_sink_param_get(s, key, v, sizeof v)))
      gpu_params_put(g, s, gpu);
  }
}

/* Whether /proc/PID/fd under the root holds an NVIDIA GPU device (/dev/nvidiaN; not nvidiactl or
 * nvidia-uvm, which every CUDA process opens whatever GPU it uses): 1, 0, or -1 when its fds may not
 * be read (another user's process: then nobody can be sure). */
static int holds_gpu_device(const struct collector_opts *o, const char *pid) {
  char dir[320], p[600], link[64];
  snprintf(dir, sizeof dir, "/proc/%s/fd", pid);
  DIR *d = opendir(collect_path(o, dir, p, sizeof p));
  if (!d)
    return errno == EACCES || errno == EPERM ? -1 : 0; /* ENOENT: it is gone */
  int holds = 0;
  for (struct dirent *e; !holds && (e = readdir(d));) {
    if (e->d_name[0] == '.')
      continue;
    snprintf(p + strlen(p), sizeof p - strlen(p), "/%s", e->d_name);
    ssize_t n = readlink(p, link, sizeof link - 1);
    *strrchr(p, '/') = 0;
    if (n <= 11)
      continue;
    link[n] = 0;
    const char *q = link + 11;
    holds = !strncmp(link, "/dev/nvidia", 11) && strspn(q, "0123456789") == strlen(q);
  }
  closedir(d);
  return holds;
}

/* Counts the processes of this namespace (but gpuscope) that hold a GPU device open: in *job those
 * of the job's tree, the return value the others; -1 when /proc cannot be listed or a process's fds
 * cannot be read. */
static int device_holders(const struct gpuowners *g, int *job) {
  char p[512];
  DIR *d = opendir(collect_path(&g->opts, "/proc", p, sizeof p));
  if (!d)
    return -1;
  pid_t *tree = NULL;
  int nt = collect_list_descendants(g->opts.pid, &tree), others = 0, unreadable = 0;
  *job = 0;
  for (struct dirent *e; (e = readdir(d));) {
    char *end;
    long pid = strtol(e->d_name, &end, 10);
    int holds = *end || pid <= 0 || pid == getpid() ? 0 : holds_gpu_device(&g->opts, e->d_name);
    unreadable |= holds < 0;
    if (holds <= 0)
      continue;
    int mine = pid == g->opts.pid;
    for (int i = 0; i < nt && !mine; i++)
      mine = tree[i] == pid;
    *job += mine, others += !mine;
  }
  closedir(d);
  free(tree);
  return unreadable ? -1 : others;
}

/* Run mode with host pids: whether the listed GPUs' use is the job's, put as gpu.N.owner and
 * gpu.N.owner_how when it changes. Looked at every 5 s (a scan of this namespace's fds), every
 * second while the job holds no GPU device yet (CUDA's start). */
static void infer_owner(struct gpuowners *g, struct gs_sink *s, int64_t now) {
  if (g->inferred_at && now - g->inferred_at < (g->job_holds ? 5 : 1) * GS_NS_PER_S)
    return;
  g->inferred_at = now;
  int job = 0, others = device_holders(g, &job);
  g->job_holds = job > 0;
  size_t listed = 0; /* distinct pids, a process on two GPUs once */
  for (size_t i = 0; i < g->n_listed; i++) {
    size_t k = 0;
    while (k < i && g->listed[k].pid != g->listed[i].pid)
      k++;
    listed += k == i;
  }
  char how[160];
  int certain = others == 0 && job > 0 && (size_t)job == listed;
  if (certain)
    snprintf(how, sizeof how, "inferred: %d process%s of the job hold%s a GPU open and NVML lists %zu", job,
             job == 1 ? "" : "es", job == 1 ? "s" : "", listed);
  else if (others < 0)
    snprintf(how, sizeof how, "this namespace's processes, or the fds of one, cannot be read");
  else if (others > 0)
    snprintf(how, sizeof how, "%d process%s of this container outside the job hold%s a GPU open", others,
             others == 1 ? "" : "es", others == 1 ? "s" : "");
  else
    snprintf(how, sizeof how, "NVML lists %zu process%s, %d of the job hold%s a GPU open: others may share them",
             listed, listed == 1 ? "" : "es", job, job == 1 ? "s" : "");
  snprintf(g->how, sizeof g->how, "%s", how);
  g->certain = certain;
  for (size_t i = 0; i < g->n_listed; i++) {
    int gpu = g->listed[i].gpu;
    if (!strcmp(g->owner[gpu], how))
      continue;
    char key[32];
    snprintf(key, sizeof key, "gpu.%d.owner", gpu);
    gs_sink_param(s, key, certain ? "job" : "unknown");
    snprintf(key, sizeof key, "gpu.%d.owner_how", gpu);
    gs_sink_param(s, key, how);
    snprintf(g->owner[gpu], sizeof g->owner[gpu], "%s", how);
  }
}

/* Whether this process is in a PID namespace other than the host's: 1, 0, or -1 unknown. Not from
 * NSpid, which a container's own /proc shows one level deep; the host's namespace is the one whose
 * inode is the kernel's fixed PROC_PID_INIT_INO. */
static int own_pid_namespace(const struct collector_opts *o) {
  char p[256], link[64];
  ssize_t n = readlink(collect_path(o, "/proc/self/ns/pid", p, sizeof p), link, sizeof link - 1);
  if (n <= 0)
    return -1;
  link[n] = 0;
  return strcmp(link, "pid:[4026531836]") != 0; /* PROC_PID_INIT_INO, 0xEFFFFFFC */
}

/* A run's tick in a PID namespace of its own: NVML's pids that are not in it, noted once. */
static void run_tick(struct gpuowners *g, struct gs_sink *s, int64_t now) {
  char buf[64];
  g->listed_any |= g->n_listed > 0;
  for (size_t i = 0; i < g->n_listed && !g->foreign; i++)
    if (collect_proc_read(g->opts.root, g->listed[i].pid, "stat", buf, sizeof buf) < 0) {
      g->foreign = (int)g->listed[i].pid;
      gs_sink_note(s,
                   "NVML lists GPU process %d, which is not in this container's PID namespace: the driver "
                   "reports the host's pids, so gpuscope cannot tie the GPUs' processes to the job. Run the "
                   "container with --pid=host (Kubernetes: hostPID: true), or run `gpuscope agent` on the host",
                   g->foreign);
    }
  if (g->foreign && g->n_listed)
    infer_owner(g, s, now);
}

static void *owners_open(const struct collector_opts *o, struct gs_sink *s, char *err, size_t errlen) {
  (void)s;
  struct gpuowners *g = calloc(1, sizeof *g);
  if (!g) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  g->opts = *o;
  g->own_ns = own_pid_namespace(o);
  if (o->pid > 0 && g->own_ns != 1) { /* a run on the host: NVML's pids are ours */
    free(g);
    return NULL;
  }
  const char *m = getenv("DCGM_HPC_JOB_MAPPING_DIR");
  g->jobmap = m && *m ? m : NULL;
  /* the kubelet's pod-resources socket, when there is one (GPUSCOPE_KUBELET_SOCKET: where a
   * DaemonSet mounted it) */
  const char *k = getenv("GPUSCOPE_KUBELET_SOCKET");
  char p[512];
  if (!k || !*k)
    k = collect_path(o, "/var/lib/kubelet/pod-resources/kubelet.sock", p, sizeof p);
  if (o->pid <= 0 && access(k, F_OK) == 0)
    snprintf(g->podres_sock, sizeof g->podres_sock, "%s", k);
  int64_t iv = o->interval_ns > 0 ? o->interval_ns : GS_NS_PER_S;
  g->grace_ns = 5 * iv < 10 * GS_NS_PER_S ? 10 * GS_NS_PER_S : 5 * iv;
  return g;
}

static int owners_sample(void *ctx, struct gs_sink *s, int64_t now) {
  struct gpuowners *g = ctx;
  g->n_listed = 0;
  g->since = now - g->grace_ns;
  gs_sink_each(s, note_listed, g);
  if (g->opts.pid > 0)
    run_tick(g, s, now);
  else
    node_tick(g, s, now);
  return GS_COLLECT_OK;
}

static void owners_summary(void *ctx, FILE *out) {
  const struct gpuowners *g = ctx;
  if (g->opts.pid > 0 && g->foreign && g->certain)
    fprintf(out,
            "containers: NVML lists host pids (%d is not in this PID namespace); the GPUs' use is tied to the job "
            "(%s)\n",
            g->foreign, g->how);
  else if (g->opts.pid > 0 && g->foreign)
    fprintf(out,
            "containers: NVML lists host pids (%d is not in this PID namespace): GPU use is not tied to the job%s%s%s; "
            "run with --pid=host (Kubernetes: hostPID: true) or use `gpuscope agent` on the host\n",
            g->foreign, g->how[0] ? " (" : "", g->how, g->how[0] ? ")" : "");
  else if (g->opts.pid > 0 && g->listed_any)
    fprintf(out, "containers: in a PID namespace of its own; NVML's pids are this namespace's\n");
  else if (g->opts.pid > 0)
    fprintf(out, "containers: in a PID namespace of its own\n");
  else
    fprintf(out, "owners: %zu GPU processes tied to their containers and jobs\n", g->n_owned);
}

static void owners_close(void *ctx) {
  free(ctx);
}

const struct collector collector_gpuowners = {
    .version = 1,
    .name = "owners",
    .metrics = owners_metrics,
    .n_metrics = sizeof owners_metrics / sizeof *owners_metrics,
    .open = owners_open,
    .sample = owners_sample,
    .summary = owners_summary,
    .close = owners_close,
};
