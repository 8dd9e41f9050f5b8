/* collect/proc_pid_cgroup: the one reader of a process's cgroups — /proc/PID/cgroup (one line per
 * hierarchy: "N:cpu,cpuacct:/path" for cgroup v1, "0::/path" for the unified v2 one) joined with
 * /proc/self/mountinfo (where each hierarchy is mounted, and which part of it), so every layout
 * finds each controller's folder: v2 (all controllers under /sys/fs/cgroup), v1 (one mount per
 * controller or co-mounted group) and hybrid (v1 controllers beside an empty v2 at .../unified).
 * A controller on a v1 hierarchy wins over the unified one, where a hybrid host has none. Also the
 * few other per-process and kernel files the rest of gpuscope reads (/proc/PID/comm, environ,
 * cmdline, stat, the boot id), so every /proc and /sys path goes through collect/ and its root
 * prefix. host's sys_fs_cgroup.c reads the controllers' files; the OOM count is here. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collect/collect.h"
#include "collect/collect_util.h"

static const char *const cg_names[COLLECT_CG_N] = {"cpu", "cpuacct", "memory", "cpuset"};

/* Whether the comma-separated list (len bytes) holds word. */
static int list_has(const char *list, size_t len, const char *word) {
  size_t w = strlen(word);
  for (const char *p = list, *end = list + len; p < end;) {
    const char *c = memchr(p, ',', (size_t)(end - p));
    size_t l = c ? (size_t)(c - p) : (size_t)(end - p);
    if (l == w && !memcmp(p, word, w))
      return 1;
    p += l + 1;
  }
  return 0;
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s) {
  char *o = s;
  for (; *s; s++)
    if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
      *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
      s += 3;
    } else {
      *o++ = *s;
    }
  *o = 0;
}

/* A whole small file under the root into a fresh buffer (NUL-terminated); NULL when unreadable. */
static char *slurp(const char *root, const char *path) {
  struct collector_opts o = {.root = root};
  char p[1024];
  FILE *f = fopen(collect_path(&o, path, p, sizeof p), "re");
  if (!f)
    return NULL;
  size_t cap = 8192, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - 1 - n, f);
    if (n < cap - 1 || cap >= (1u << 22)) /* a mountinfo of a busy host fits in 4 MiB */
      break;
    char *b = realloc(buf, cap *= 2);
    if (!b)
      free(buf);
    buf = b;
  }
  fclose(f);
  if (buf)
    buf[n] = 0;
  return buf;
}

/* The folder of a hierarchy's cgroup path: mountpoint + the path below the mount's own root (a
 * container sees /docker/ID mounted as its /sys/fs/cgroup/memory). 0, or -1 when the cgroup is not
 * below that mount. */
static int join_mount(const char *mroot, const char *mpoint, const char *path, char *dir, size_t n) {
  size_t l = strlen(mroot);
  if (strcmp(mroot, "/")) {
    if (strncmp(path, mroot, l) || (path[l] && path[l] != '/'))
      return -1;
    path += l;
  }
  if (!strcmp(path, "/"))
    path = "";
  return snprintf(dir, n, "%s%s", mpoint, path) < (int)n ? 0 : -1;
}

/* Finds in mountinfo the mount of a v1 hierarchy holding controller ctl (ctl NULL: the cgroup2
 * mount) whose root the path lies under; fills dir. 0 when found. */
static int find_mount(char *mountinfo, const char *ctl, const char *path, char *dir, size_t n) {
  for (char *line = mountinfo; line && *line;) {
    char *next = strchr(line, '\n');
    if (next)
      *next = 0;
    char mroot[512], mpoint[512], fstype[32], opts[512];
    char *dash = strstr(line, " - ");
    int ok = dash && sscanf(line, "%*s %*s %*s %511s %511s", mroot, mpoint) == 2 &&
             sscanf(dash + 3, "%31s %*s %511s", fstype, opts) == 2;
    if (next)
      *next = '\n';
    line = next ? next + 1 : NULL;
    if (!ok || strcmp(fstype, ctl ? "cgroup" : "cgroup2") || (ctl && !list_has(opts, strlen(opts), ctl)))
      continue;
    unescape(mroot), unescape(mpoint);
    if (!join_mount(mroot, mpoint, path, dir, n))
      return 0;
  }
  return -1;
}

/* Without a mountinfo (a fixture tree, a /proc without it): the usual places. */
static void guess_mounts(const char *root, struct collect_cgroup *cg, char v1_list[][128], char paths[][512]) {
  struct collector_opts o = {.root = root};
  for (int c = 0; c < COLLECT_CG_N; c++) {
    char d[COLLECT_CG_DIR_MAX], q[COLLECT_CG_DIR_MAX + 64];
    if (v1_list[c][0]) {
      snprintf(d, sizeof d, "/sys/fs/cgroup/%.100s%.500s", v1_list[c], strcmp(paths[c], "/") ? paths[c] : "");
      if (access(collect_path(&o, d, q, sizeof q), F_OK) == 0) {
        snprintf(cg->dir[c], sizeof cg->dir[c], "%s", d), cg->v1[c] = 1;
        continue;
      }
    }
    const char *v2 = strcmp(cg->v2_path, "/") ? cg->v2_path : "";
    static const char *const bases[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    for (int b = 0; b < 2 && cg->v2_path[0] && !cg->dir[c][0]; b++) {
      snprintf(d, sizeof d, "%s%.500s", bases[b], v2);
      char probe[COLLECT_CG_DIR_MAX + 32];
      snprintf(probe, sizeof probe, "%s/cgroup.controllers", d);
      if (access(collect_path(&o, probe, q, sizeof q), F_OK) == 0)
        snprintf(cg->dir[c], sizeof cg->dir[c], "%s", d);
    }
  }
}

/* Reads /proc/PID/cgroup: each wanted controller's v1 hierarchy (its controller list and path), and
 * the v2 path. Returns 0, or -1 when the file is unreadable. */
static int read_proc_cgroup(const char *root, pid_t pid, struct collect_cgroup *cg, char v1_list[][128],
                            char paths[][512]) {
  char rel[64];
  if (pid > 0)
    snprintf(rel, sizeof rel, "/proc/%d/cgroup", (int)pid);
  else
    snprintf(rel, sizeof rel, "/proc/self/cgroup");
  char *text = slurp(root, rel);
  if (!text)
    return -1;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2 || strlen(c2 + 1) >= 500) /* no cgroup path is that long; bounded, the names below fit */
      continue;
    if (c2 == c1 + 1 && !strncmp(line, "0:", 2)) {
      snprintf(cg->v2_path, sizeof cg->v2_path, "%s", c2 + 1);
      continue;
    }
    size_t len = (size_t)(c2 - c1 - 1);
    for (int c = 0; c < COLLECT_CG_N; c++)
      if (len < 128 && list_has(c1 + 1, len, cg_names[c])) {
        snprintf(v1_list[c], 128, "%.*s", (int)len, c1 + 1);
        snprintf(paths[c], 512, "%s", c2 + 1);
      }
  }
  free(text);
  return 0;
}

int collect_cgroup_find(const char *root, pid_t pid, struct collect_cgroup *cg) {
  char v1_list[COLLECT_CG_N][128] = {{0}}, paths[COLLECT_CG_N][512] = {{0}};
  memset(cg, 0, sizeof *cg);
  if (read_proc_cgroup(root, pid, cg, v1_list, paths))
    return -1;
  char *mi = slurp(root, "/proc/self/mountinfo");
  if (!mi) {
    guess_mounts(root, cg, v1_list, paths);
  } else {
    for (int c = 0; c < COLLECT_CG_N; c++) {
      if (v1_list[c][0] && !find_mount(mi, cg_names[c], paths[c], cg->dir[c], sizeof cg->dir[c]))
        cg->v1[c] = 1;
      else if (cg->v2_path[0] && find_mount(mi, NULL, cg->v2_path, cg->dir[c], sizeof cg->dir[c]))
        cg->dir[c][0] = 0;
    }
    free(mi);
  }
  for (int c = 0; c < COLLECT_CG_N; c++)
    snprintf(cg->path[c], sizeof cg->path[c], "%s", cg->v1[c] ? paths[c] : cg->dir[c][0] ? cg->v2_path : "");
  int v1 = 0, v2 = 0;
  for (int c = 0; c < COLLECT_CG_N; c++)
    v1 |= cg->dir[c][0] && cg->v1[c], v2 |= cg->dir[c][0] && !cg->v1[c];
  cg->layout = v1 && cg->v2_path[0] ? COLLECT_CG_HYBRID : v1 ? COLLECT_CG_V1 : v2 ? COLLECT_CG_V2 : COLLECT_CG_NONE;
  return 0;
}

const char *collect_cgroup_layout_name(int layout) {
  static const char *const names[] = {"none", "v2", "v1", "hybrid"};
  return layout >= 0 && layout <= COLLECT_CG_HYBRID ? names[layout] : "none";
}

int collect_cgroup_path(const char *root, char *buf, size_t n) {
  struct collect_cgroup cg;
  if (collect_cgroup_find(root, 0, &cg))
    return -1;
  /* v2's path; on v1 or hybrid, where the v2 line says "/" (or nothing), the memory hierarchy's
   * folder below its mount says where the job was put (a container's, a Slurm job's). */
  const char *p = cg.v2_path;
  if ((!p[0] || !strcmp(p, "/")) && cg.v1[COLLECT_CG_MEMORY]) {
    const char *d = cg.dir[COLLECT_CG_MEMORY], *s = strstr(d, "/memory");
    p = s && s[7] == '/' ? s + 7 : s && !s[7] ? "/" : p;
  }
  if (!p[0])
    return -1;
  return snprintf(buf, n, "%s", p) < (int)n ? 0 : -1;
}

/* The value after "key " in a file of "key value" lines under the cgroup folder; -1 when absent. */
static long long key_value(const char *root, const char *dir, const char *file, const char *key) {
  char rel[COLLECT_CG_DIR_MAX + 64];
  snprintf(rel, sizeof rel, "%s/%s", dir, file);
  char *text = slurp(root, rel);
  long long v = -1;
  size_t kl = strlen(key);
  for (char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
    if (!strncmp(p, key, kl) && p[kl] == ' ') {
      const char *q = p + kl + 1;
      v = (long long)next_u64(&q);
      break;
    }
  free(text);
  return v;
}

/* A file under the cgroup folder holding one number; NAN when absent or not a number ("max"). */
static double one_number(const char *root, const char *dir, const char *file) {
  char rel[COLLECT_CG_DIR_MAX + 64];
  snprintf(rel, sizeof rel, "%s/%s", dir, file);
  char *text = slurp(root, rel);
  double v = NAN;
  if (text && text[0] >= '0' && text[0] <= '9') {
    const char *q = text;
    v = (double)next_u64(&q);
  }
  free(text);
  return v;
}

int collect_cgroup_oom(const char *root, pid_t pid, struct collect_oom *o) {
  struct collect_cgroup cg;
  o->kills = o->limit_hits = -1;
  o->limit_bytes = o->peak_bytes = NAN;
  if (collect_cgroup_find(root, pid, &cg) || !cg.dir[COLLECT_CG_MEMORY][0])
    return -1;
  const char *d = cg.dir[COLLECT_CG_MEMORY];
  if (cg.v1[COLLECT_CG_MEMORY]) {
    o->kills = key_value(root, d, "memory.oom_control", "oom_kill"); /* kernel 4.13 on */
    double hits = one_number(root, d, "memory.failcnt");
    o->limit_hits = isfinite(hits) ? (long long)hits : -1;
    o->limit_bytes = one_number(root, d, "memory.limit_in_bytes");
    o->peak_bytes = one_number(root, d, "memory.max_usage_in_bytes");
    if (isfinite(o->limit_bytes) && o->limit_bytes >= COLLECT_CG_V1_UNLIMITED)
      o->limit_bytes = NAN; /* v1's "no limit": the largest page-aligned count */
  } else {
    o->kills = key_value(root, d, "memory.events", "oom_kill");
    o->limit_hits = key_value(root, d, "memory.events", "max");
    o->limit_bytes = one_number(root, d, "memory.max");
    o->peak_bytes = one_number(root, d, "memory.peak"); /* kernel 5.19 on */
  }
  return 0;
}

ssize_t collect_proc_read(const char *root, pid_t pid, const char *file, char *buf, size_t n) {
  struct collector_opts o = {.root = root};
  char rel[320], p[640];
  if (pid > 0)
    snprintf(rel, sizeof rel, "/proc/%d/%s", (int)pid, file);
  else
    snprintf(rel, sizeof rel, "/proc/%s", file);
  if (!n)
    return -1;
  buf[0] = 0;
  int fd = open(collect_path(&o, rel, p, sizeof p), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  size_t got = 0;
  while (got + 1 < n) {
    ssize_t r = read(fd, buf + got, n - 1 - got);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (r < 0 && !got) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
      }
      break;
    }
    got += (size_t)r;
  }
  close(fd);
  buf[got] = 0;
  return (ssize_t)got;
}

void collect_boot_id(char *buf, size_t n) {
  if (collect_proc_read(NULL, 0, "sys/kernel/random/boot_id", buf, n) < 0)
    buf[0] = 0;
  buf[strcspn(buf, "\n")] = 0;
}
