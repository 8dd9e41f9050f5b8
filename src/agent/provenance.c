/* agent/provenance: where a run came from, recorded as params without the user doing anything —
 * the git commit, branch and state of the folder the job runs in (the hash of its uncommitted diff is
 * what `git diff --no-ext-diff HEAD | sha256sum` prints), the scheduler's ids from the environment
 * (Slurm, Kubernetes' downward API variables, PBS, LSF) and the container (the cgroup path, the
 * runtime where it says so). What cannot be read is absent, never made up: no git, not a
 * repository, no scheduler. With --save-diff the diff itself is kept too (git.diff, at most
 * AGENT_SAVE_DIFF_MAX bytes, else only its hash and a note). Git runs once at the start, bounded in time, never on the
 * sampling path; one that hangs (a stale NFS mount) is killed after PROV_GIT_TIMEOUT_MS and recorded as a note. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent_int.h"
#include "collect/collect.h"
#include "core/core.h"

/* How long one git command may take (a repository on a slow network mount). */
#define PROV_GIT_TIMEOUT_MS 2000

struct capture {
  char text[512]; /* the start of stdout, for one-line answers */
  size_t n;
  struct gs_sha256 hash; /* all of stdout */
  size_t bytes;
  char *all; /* when keep > 0: all of stdout, malloc'd, while it is at most keep bytes (else NULL) */
  size_t keep;
};

/* What git printed, kept whole while it stays within c->keep bytes (a longer one is dropped whole:
 * half a diff cannot be applied). */
static void keep_bytes(struct capture *c, const char *buf, size_t r) {
  if (!c->keep || (c->bytes && !c->all))
    return;
  if (c->bytes + r > c->keep) {
    free(c->all);
    c->all = NULL;
    return;
  }
  char *all = realloc(c->all, c->bytes + r + 1);
  if (!all) {
    free(c->all);
    c->all = NULL;
    return;
  }
  memcpy(all + c->bytes, buf, r);
  all[c->bytes + r] = 0;
  c->all = all;
}

/* Runs git with args in cwd, stdout into c (c->keep set by the caller, the rest cleared), stderr discarded, with a
 * deadline. Returns git's exit code, -1 when it could not run, -2 when it was killed at the deadline. */
static int git(const char *cwd, const char *const *args, struct capture *c) {
  size_t keep = c->keep;
  memset(c, 0, sizeof *c);
  c->keep = keep;
  gs_sha256_init(&c->hash);
  int p[2];
  if (pipe2(p, O_CLOEXEC))
    return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]), close(p[1]);
    return -1;
  }
  if (pid == 0) {
    int devnull = open("/dev/null", O_RDWR);
    if (devnull < 0 || chdir(cwd) || dup2(devnull, 0) < 0 || dup2(p[1], 1) < 0 || dup2(devnull, 2) < 0)
      _exit(127);
    /* never ask, never take the index lock a running `git status` of the user would wait on */
    setenv("GIT_TERMINAL_PROMPT", "0", 1);
    setenv("GIT_OPTIONAL_LOCKS", "0", 1);
    char *argv[16] = {"git"};
    for (int i = 0; args[i] && i < 14; i++)
      argv[i + 1] = (char *)args[i];
    execvp("git", argv);
    _exit(127);
  }
  close(p[1]);
  int64_t deadline = gs_mono_ns() + (int64_t)PROV_GIT_TIMEOUT_MS * 1000000;
  int killed = 0;
  char buf[65536];
  for (;;) {
    int64_t left_ms = (deadline - gs_mono_ns()) / 1000000;
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    if (left_ms <= 0 || poll(&pf, 1, (int)left_ms) == 0) {
      kill(pid, SIGKILL);
      killed = 1;
      break;
    }
    ssize_t r = read(p[0], buf, sizeof buf);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    gs_sha256_update(&c->hash, buf, (size_t)r);
    keep_bytes(c, buf, (size_t)r);
    c->bytes += (size_t)r;
    size_t take = sizeof c->text - 1 - c->n < (size_t)r ? sizeof c->text - 1 - c->n : (size_t)r;
    memcpy(c->text + c->n, buf, take);
    c->n += take;
  }
  close(p[0]);
  int ws;
  while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
    ;
  c->text[c->n] = 0;
  c->text[strcspn(c->text, "\n")] = 0;
  if (killed)
    return -2;
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
}

/* Whether s (n bytes) is text a store keeps as it is: no NUL byte, and well-formed UTF-8 (a diff of
 * a Latin-1 file is not: PostgreSQL would refuse it, SQLite's readers would repair it). */
static int is_text(const char *s, size_t n) {
  if (strlen(s) != n)
    return 0;
  uint32_t cp;
  for (size_t k; (k = gs_utf8_next(s, &cp)); s += k)
    if (cp == 0xfffd && k == 1) /* a real U+FFFD takes three bytes */
      return 0;
  return 1;
}

static void git_params(struct gs_sink *s, const char *cwd, int save_diff) {
  struct capture c = {0};
  static const char *const head[] = {"rev-parse", "HEAD", NULL};
  int rc = git(cwd, head, &c);
  if (rc == -2) {
    gs_sink_note(s, "provenance: git did not answer within %d ms in %s; the commit is not recorded",
                 PROV_GIT_TIMEOUT_MS, cwd);
    return;
  }
  if (rc != 0 || strlen(c.text) < 40)
    return; /* no git, or not a repository (or one without a commit yet): nothing to record */
  gs_sink_param(s, "git.commit", c.text);
  static const char *const branch[] = {"rev-parse", "--abbrev-ref", "HEAD", NULL};
  if (git(cwd, branch, &c) == 0 && c.text[0])
    gs_sink_param(s, "git.branch", c.text); /* "HEAD" when detached, as git says it */
  static const char *const status[] = {"status", "--porcelain", "--untracked-files=normal", NULL};
  if (git(cwd, status, &c) == 0)
    gs_sink_param(s, "git.dirty", c.bytes ? "true" : "false");
  static const char *const diff[] = {"diff", "--no-ext-diff", "--no-color", "HEAD", NULL};
  c.keep = save_diff ? AGENT_SAVE_DIFF_MAX : 0;
  if (git(cwd, diff, &c) == 0 && c.bytes) {
    char hex[65], n[32];
    gs_sha256_hex(&c.hash, hex);
    gs_sink_param(s, "git.diff_sha256", hex);
    snprintf(n, sizeof n, "%zu", c.bytes);
    gs_sink_param(s, "git.diff_bytes", n);
    if (c.all && is_text(c.all, c.bytes)) /* every store keeps params as UTF-8 text */
      gs_sink_param(s, "git.diff", c.all);
    else if (save_diff)
      gs_sink_note(s, "provenance: the diff is %zu bytes, %s %d: only its hash is kept", c.bytes,
                   c.all ? "not UTF-8 text; --save-diff keeps text of at most" : "over --save-diff's",
                   AGENT_SAVE_DIFF_MAX);
  }
  free(c.all);
}

/* What the run's own cgroups say (a container's cgroup namespace may hide them: then nothing), where
 * the environment did not: the container's id, the pod's UID and namespace, the Slurm job. */
static void owner_params(struct gs_sink *s, const struct collect_owner *o) {
  char ns[128], v[8];
  if (o->container[0])
    gs_sink_param(s, "container.id", o->container);
  if (o->pod_uid[0])
    gs_sink_param(s, "sched.k8s_pod_uid", o->pod_uid);
  if (!gs_sink_param_get(s, "sched.k8s_namespace", v, sizeof v) && !collect_k8s_own_namespace(NULL, ns, sizeof ns))
    gs_sink_param(s, "sched.k8s_namespace", ns);
  const char *host = getenv("HOSTNAME"); /* a pod's hostname is its name unless spec.hostname says else */
  if (getenv("KUBERNETES_SERVICE_HOST") && !gs_sink_param_get(s, "sched.k8s_pod", v, sizeof v) && host && *host)
    gs_sink_param(s, "sched.k8s_pod", host);
  if (o->hpc_job[0] && !gs_sink_param_get(s, "sched.slurm_job_id", v, sizeof v))
    gs_sink_param(s, "sched.slurm_job_id", o->hpc_job);
}

/* The scheduler's ids and the container, from the environment and /proc. */
static void env_params(struct gs_sink *s) {
  static const struct {
    const char *env, *param;
  } ids[] = {
      {"SLURM_JOB_ID", "sched.slurm_job_id"},
      {"SLURM_STEP_ID", "sched.slurm_step_id"},
      {"SLURM_JOB_NAME", "sched.slurm_job_name"},
      {"SLURM_ARRAY_TASK_ID", "sched.slurm_array_task_id"},
      {"POD_NAME", "sched.k8s_pod"}, /* the downward API's usual names */
      {"POD_NAMESPACE", "sched.k8s_namespace"},
      {"NODE_NAME", "sched.k8s_node"},
      {"PBS_JOBID", "sched.pbs_job_id"},
      {"LSB_JOBID", "sched.lsf_job_id"},
      {"TORCHELASTIC_RUN_ID", "sched.torchelastic_run_id"},
  };
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    const char *v = getenv(ids[i].env);
    if (v && *v)
      gs_sink_param(s, ids[i].param, v);
  }
  if (getenv("KUBERNETES_SERVICE_HOST"))
    gs_sink_param(s, "container.orchestrator", "kubernetes");
  struct collect_owner own;
  int owned = !collect_owner_of(NULL, getpid(), &own);
  const char *rt = getenv("container"); /* podman, systemd-nspawn, lxc set it */
  if (rt && *rt)
    gs_sink_param(s, "container.runtime", rt);
  else if (access("/.dockerenv", F_OK) == 0)
    gs_sink_param(s, "container.runtime", "docker");
  else if (owned && own.runtime[0])
    gs_sink_param(s, "container.runtime", own.runtime);
  char cg[1024];
  if (!collect_cgroup_path(NULL, cg, sizeof cg) && cg[0] && strcmp(cg, "/")) /* the root cgroup says nothing */
    gs_sink_param(s, "container.cgroup", cg);
  if (owned)
    owner_params(s, &own);
}

void agent_provenance(struct gs_sink *s, const char *cwd, int save_diff) {
  if (cwd && *cwd)
    git_params(s, cwd, save_diff);
  env_params(s);
}
