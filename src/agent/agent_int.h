/* agent_int: what the run loop (agent.c) uses of the attach path (attach.c) — watching a process
 * gpuscope did not start. Not part of the subsystem's interface. */
#ifndef GS_AGENT_INT_H
#define GS_AGENT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ingest/ingest.h"

/* The process `gpuscope attach` watches. A non-child cannot be waited for, so its exit is seen
 * through a pidfd (readable once it exits) or, on a kernel without pidfd_open, by re-reading its
 * /proc/PID/stat start time every tick (a reused pid is not the same process). */
struct agent_attach_target {
  pid_t pid;
  int pidfd;                /* -1 when pidfd_open is not available */
  unsigned long long start; /* starttime field of /proc/PID/stat */
};

/* Checks that pid is a live process this user may watch and starts watching it. Returns 0, or
 * GS_ENOENT (no such process), GS_EINVAL (pid is the agent itself or below 1) or GS_EIO, with a
 * message. Release with agent_attach_done(). */
int agent_attach_open(pid_t pid, struct agent_attach_target *t);
/* 1 when the process has exited (or its pid now names another process), else 0. Reads procfs:
 * call it once per tick only when t->pidfd < 0; with a pidfd, poll the pidfd instead. */
int agent_attach_gone(const struct agent_attach_target *t);
void agent_attach_done(struct agent_attach_target *t);

/* The process's command line, spaces for NULs, control characters as '?', into buf ("" when it
 * cannot be read). */
void agent_attach_command(pid_t pid, char *buf, size_t n);

/* Opens the client channel at agent_attach_socket_path(pid) into *out, creating the private
 * directory. A socket file left by an agent that died is replaced. Returns 0; GS_EBUSY when another
 * agent still reads that socket (the process is watched already: do not record it twice); or
 * another GS_E code with the reason in err (the run may go on without a client channel). */
int agent_attach_ingest_open(pid_t pid, struct ingest **out, char *err, size_t errlen);

/* What a new run records of where it runs (run_common.c; run, attach and the node agent alike): the
 * folder, host, user, this agent's pid, the sampling interval, and its start on both clocks, with no
 * exit code yet. */
struct store_run;
void agent_run_fill_here(struct store_run *r, int64_t interval_ns);

/* Where the run came from, as params (provenance.c): git commit, branch, dirty, the diff's SHA-256
 * for the repository cwd is in (nothing when git or a repository is absent), the scheduler's ids
 * (sched.*) and the container (container.*). Runs git at most four times, each bounded to 2 s; can't
 * fail (what cannot be read is not recorded; a git that hangs is said in a note). save_diff: keep the
 * diff itself as the param git.diff when it is text of at most AGENT_SAVE_DIFF_MAX bytes (a longer
 * one: only its hash, and a note). */
struct gs_sink;
enum { AGENT_SAVE_DIFF_MAX = 1024 * 1024 };
void agent_provenance(struct gs_sink *s, const char *cwd, int save_diff);

/* `run --listen` (node.c): starts the /metrics endpoint over sink on listen and prints its address
 * on stderr (unless quiet). Returns 0 with *out (free with expose_free), or GS_EINVAL with a
 * message (bad address or token, or the address cannot be bound). */
struct expose;
int agent_metrics_start(struct gs_sink *sink, const char *listen, const char *token, const char *host_label,
                        int64_t interval_ns, int quiet, struct expose **out);

/* The job's output (joblog.c): passed through unchanged to where it went (a terminal through a
 * pseudo-terminal, a pipe or file through a pipe) and kept in the store, its last max bytes. */
struct joblog;
struct store;
/* Before the fork: the pseudo-terminal and pipes, and the params log.streams and log.max_bytes.
 * Returns 0 with *out (free with joblog_free), or GS_ENOMEM / GS_EIO with the reason in err. */
int joblog_open(struct joblog **out, int64_t max, struct gs_sink *sink, char *err, size_t errlen);
/* In the job, before exec: its stdout and stderr onto the pseudo-terminal or pipes. */
void joblog_child(const struct joblog *j);
/* In the agent once the job is forked: closes the job's ends, starts the pump thread. Returns 0 or
 * GS_EIO with a message. */
int joblog_start(struct joblog *j);
/* The agent's terminal changed size (SIGWINCH): the pseudo-terminal takes it. NULL: nothing. */
void joblog_winch(struct joblog *j);
/* 1 when the job's output goes through a pseudo-terminal. */
int joblog_has_tty(const struct joblog *j);
/* After the job ended: what it wrote last is passed on and kept, the pump stops, and the params
 * log.bytes and log.dropped_bytes are set. Idempotent; NULL: nothing. */
void joblog_stop(struct joblog *j);
/* The writer thread, each flush: the buffered chunks into the store, the oldest trimmed to the
 * bound. A failed append drops them (counted, its cause noted by joblog_end). NULL: nothing. */
void joblog_flush(struct joblog *j, struct store *st, const struct store_run *run);
/* The writer thread, before its last flush: the param log.kept_bytes and a note of a failure. */
void joblog_end(struct joblog *j);
/* Stops the pump if it runs and frees everything; NULL: nothing. */
void joblog_free(struct joblog *j);

/* ---- oom.c: whether the kernel's OOM killer ended the job ---- */
struct collect_oom;
struct gs_sink;
/* The cgroup's memory figures at the run's start into *at_start (unknown ones -1 / NAN). */
void agent_oom_start(struct collect_oom *at_start);
/* At the job's end (status its shell status, -1 unknown: nothing said): when the OOM killer ended
 * it, puts the params exit.oom_killed=1, exit.oom_limit_bytes, exit.mem_peak_bytes and a note, and
 * returns the limit in bytes (0 when unknown); NAN when it was not OOM-killed. */
double agent_oom_end(const struct collect_oom *at_start, int status, struct gs_sink *s);

#endif
