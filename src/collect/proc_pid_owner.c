/* collect/proc_pid_owner: who a process belongs to, from the host — its container (docker,
 * containerd, CRI-O and podman scope names, the kubelet's pod slices with their escaped pod UIDs,
 * on v1 and v2 paths), its Slurm job (`/slurm/uid_U/job_J/step_S` on v1,
 * `system.slice/slurmstepd.scope/job_J/step_S` on v2), from the paths of /proc/PID/cgroup; its pid
 * inside its own PID namespace (the last NSpid of /proc/PID/status); and, for a pod, the namespace,
 * pod and container names the kubelet's log folders give (/var/log/pods/NAMESPACE_POD_UID,
 * /var/log/containers/POD_NAMESPACE_CONTAINER-ID.log). Also the per-GPU job files dcgm-exporter reads
 * from DCGM_HPC_JOB_MAPPING_DIR. The cgroup path is the kernel's, but its names are chosen by
 * whoever made the cgroup: every field is checked against the shape its runtime gives it (hex ids,
 * UUIDs, digits), so nothing else gets through; tests/fuzz/fuzz_owner.c runs the parser. */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collect/collect.h"
#include "collect/collect_util.h"

/* Whether s[0..n) is n lowercase hex digits. */
static int all_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
      return 0;
  return n > 0;
}

/* A pod UID (36 characters: 8-4-4-4-12 hex) from s[0..n), where the systemd driver writes '_' for
 * '-'; 0 when it is not one. */
static int take_uid(const char *s, size_t n, char *out) {
  char u[37];
  if (n != 36)
    return 0;
  for (size_t i = 0; i < 36; i++) {
    int dash = i == 8 || i == 13 || i == 18 || i == 23;
    u[i] = s[i] == '_' ? '-' : s[i];
    if (dash ? u[i] != '-' : !all_hex(&u[i], 1))
      return 0; /* out untouched: a look-alike leaves no half of itself */
  }
  memcpy(out, u, 36), out[36] = 0;
  return 1;
}

/* Digits only (a Slurm job or step number), at most 20; 0 otherwise. */
static int take_digits(const char *s, size_t n, char *out, size_t cap) {
  if (!n || n >= cap || n > 20)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!isdigit((unsigned char)s[i]))
      return 0;
  memcpy(out, s, n), out[n] = 0;
  return 1;
}

static int starts(const char *s, size_t n, const char *p) {
  size_t l = strlen(p);
  return n >= l && !memcmp(s, p, l);
}

/* A container scope "PREFIX<64 hex>[.scope]" of one of the runtimes. */
static int container_scope(const char *s, size_t n, struct collect_owner *o) {
  static const char *const pre[][2] = {
      {"docker-", "docker"}, {"cri-containerd-", "containerd"}, {"crio-", "cri-o"}, {"libpod-", "podman"}};
  if (n > 6 && !memcmp(s + n - 6, ".scope", 6))
    n -= 6;
  for (size_t k = 0; k < sizeof pre / sizeof *pre; k++) {
    size_t l = strlen(pre[k][0]);
    if (starts(s, n, pre[k][0]) && n - l == 64 && all_hex(s + l, 64)) {
      snprintf(o->runtime, sizeof o->runtime, "%s", pre[k][1]);
      memcpy(o->container, s + l, 64), o->container[64] = 0;
      return 1;
    }
  }
  return 0;
}

/* One segment of a cgroup path, its parent segment before it. */
static void parse_segment(const char *s, size_t n, const char *parent, size_t pn, int in_slurm, int in_kube,
                          struct collect_owner *o) {
  if (container_scope(s, n, o))
    return;
  if (n == 64 && all_hex(s, 64)) { /* cgroupfs drivers: /docker/ID, /kubepods/QOS/podUID/ID */
    memcpy(o->container, s, 64), o->container[64] = 0;
    snprintf(o->runtime, sizeof o->runtime, "%s", pn == 6 && !memcmp(parent, "docker", 6) ? "docker" : "");
    return;
  }
  if (in_kube) { /* "pod<UID>" (cgroupfs) or "kubepods-<qos>-pod<UID_with_underscores>.slice" (systemd) */
    size_t m = n > 6 && !memcmp(s + n - 6, ".slice", 6) ? n - 6 : n;
    if (m >= 39 && !memcmp(s + m - 39, "pod", 3) && (m == 39 || s[m - 40] == '-'))
      take_uid(s + m - 36, 36, o->pod_uid);
  }
  if (in_slurm && starts(s, n, "job_"))
    take_digits(s + 4, n - 4, o->hpc_job, sizeof o->hpc_job);
}

void collect_owner_parse(const char *path, struct collect_owner *o) {
  const char *parent = "";
  size_t pn = 0;
  int in_slurm = 0, in_kube = 0;
  for (const char *p = path; *p;) {
    while (*p == '/')
      p++;
    size_t n = strcspn(p, "/\n");
    if (!n)
      break;
    parse_segment(p, n, parent, pn, in_slurm, in_kube, o);
    in_slurm |= starts(p, n, "slurm"); /* slurm, slurmstepd.scope, slurm_NODE */
    in_kube |= starts(p, n, "kubepods");
    parent = p, pn = n;
    p += n;
    if (*p == '\n')
      break;
  }
}

/* The last NSpid of /proc/PID/status (the pid inside its own namespace) and how many namespaces
 * deep it is (1: the host's). */
static void read_nspid(const char *root, pid_t pid, struct collect_owner *o) {
  char buf[4096];
  if (collect_proc_read(root, pid, "status", buf, sizeof buf) <= 0)
    return;
  const char *p = strstr(buf, "\nNSpid:");
  if (!p)
    return;
  p += 7;
  int levels = 0;
  while (*p == '\t' || *p == ' ') {
    uint64_t v = next_u64(&p);
    if (v) {
      o->nspid = (long)v;
      levels++;
    }
  }
  o->ns_levels = levels;
}

int collect_owner_of(const char *root, pid_t pid, struct collect_owner *o) {
  memset(o, 0, sizeof *o);
  o->nspid = -1;
  char buf[8192];
  if (collect_proc_read(root, pid, "cgroup", buf, sizeof buf) <= 0)
    return -1;
  /* every hierarchy's line: on v1 a runtime may name only some of them */
  for (char *line = buf; line && *line;) {
    char *next = strchr(line, '\n'), *c = strchr(line, ':');
    c = c ? strchr(c + 1, ':') : NULL;
    if (next)
      *next = 0;
    if (c && (!o->container[0] || !o->hpc_job[0] || !o->pod_uid[0]))
      collect_owner_parse(c + 1, o);
    line = next ? next + 1 : NULL;
  }
  read_nspid(root, pid, o);
  return 0;
}

/* Whether a kubelet folder name is NAMESPACE_POD_UID for uid: splits it into ns and pod. */
static int pod_folder(const char *name, const char *uid, char *ns, size_t nsn, char *pod, size_t pn) {
  size_t l = strlen(name);
  const char *u1 = strchr(name, '_'), *u2 = u1 ? strchr(u1 + 1, '_') : NULL;
  if (l < 40 || strcmp(name + l - 36, uid) || !u1 || !u2 || u2 != name + l - 37 || u1 == name || u2 == u1 + 1)
    return 0;
  snprintf(ns, nsn, "%.*s", (int)(u1 - name), name);
  snprintf(pod, pn, "%.*s", (int)(u2 - u1 - 1), u1 + 1);
  return 1;
}

/* Whether ns and pod are names Kubernetes allows (DNS labels and subdomains: [a-z0-9.-]). */
static int k8s_name(const char *s) {
  for (; *s; s++)
    if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-' || *s == '.'))
      return 0;
  return 1;
}

/* The kubelet's log folder NAME: GPUSCOPE_KUBELET_LOGS/NAME when set (where a DaemonSet mounted the
 * node's /var/log), else /var/log/NAME under the root. */
static const char *kubelet_dir(const char *root, const char *name, char *p, size_t n) {
  const char *env = getenv("GPUSCOPE_KUBELET_LOGS");
  struct collector_opts o = {.root = root};
  char rel[64];
  if (env && *env) {
    snprintf(p, n, "%s/%s", env, name);
    return p;
  }
  snprintf(rel, sizeof rel, "/var/log/%s", name);
  return collect_path(&o, rel, p, n);
}

int collect_k8s_pod(const char *root, const char *uid, const char *cid, struct collect_pod *pod) {
  char p[512];
  memset(pod, 0, sizeof *pod);
  DIR *d = opendir(kubelet_dir(root, "pods", p, sizeof p));
  if (!d)
    return -1;
  struct dirent *e;
  int found = 0;
  while (!found && (e = readdir(d)))
    found = pod_folder(e->d_name, uid, pod->ns, sizeof pod->ns, pod->pod, sizeof pod->pod) && k8s_name(pod->ns) &&
            k8s_name(pod->pod);
  closedir(d);
  if (!found) {
    memset(pod, 0, sizeof *pod);
    return -1;
  }
  /* the container's name: /var/log/containers/POD_NAMESPACE_CONTAINER-ID.log */
  if (!cid || !cid[0] || !(d = opendir(kubelet_dir(root, "containers", p, sizeof p))))
    return 0;
  char head[340], tail[80];
  snprintf(head, sizeof head, "%s_%s_", pod->pod, pod->ns);
  snprintf(tail, sizeof tail, "-%s.log", cid);
  size_t hl = strlen(head), tl = strlen(tail);
  while ((e = readdir(d))) {
    size_t l = strlen(e->d_name);
    if (l > hl + tl && !strncmp(e->d_name, head, hl) && !strcmp(e->d_name + l - tl, tail)) {
      snprintf(pod->container, sizeof pod->container, "%.*s", (int)(l - hl - tl), e->d_name + hl);
      if (!k8s_name(pod->container))
        pod->container[0] = 0;
      break;
    }
  }
  closedir(d);
  return 0;
}

int collect_k8s_own_namespace(const char *root, char *buf, size_t n) {
  struct collector_opts o = {.root = root};
  char p[256];
  buf[0] = 0;
  FILE *f = fopen(collect_path(&o, "/var/run/secrets/kubernetes.io/serviceaccount/namespace", p, sizeof p), "re");
  if (!f)
    return -1;
  if (!fgets(buf, (int)n, f))
    buf[0] = 0;
  fclose(f);
  buf[strcspn(buf, "\r\n")] = 0;
  if (!buf[0] || !k8s_name(buf)) {
    buf[0] = 0;
    return -1;
  }
  return 0;
}

int collect_hpc_job_file(const char *dir, int gpu, char *buf, size_t n) {
  char path[600], text[512];
  buf[0] = 0;
  if (!dir || !*dir || gpu < 0 || snprintf(path, sizeof path, "%s/%d", dir, gpu) >= (int)sizeof path)
    return -1;
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  size_t got = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[got] = 0;
  /* one job id a line (several when jobs share the GPU): joined with ',', ids of [A-Za-z0-9_.-] only */
  size_t o = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    size_t l = strcspn(line, " \t\r");
    int ok = l > 0;
    for (size_t i = 0; i < l; i++)
      ok &= isalnum((unsigned char)line[i]) || line[i] == '_' || line[i] == '.' || line[i] == '-';
    if (!ok || o + l + 2 > n)
      continue;
    if (o)
      buf[o++] = ',';
    memcpy(buf + o, line, l), o += l;
    buf[o] = 0;
  }
  return buf[0] ? 0 : -1;
}
