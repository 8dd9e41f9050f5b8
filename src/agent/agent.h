/* agent: the run loop behind `gpuscope run`. It launches the job, opens every collector, wakes once
 * per tick to sample them all, drains the client socket, hands batches to a writer thread that
 * appends them to the store every flush period (see agent_flush_default), forwards signals to the job, and closes the
 * run with the job's status. The job never waits on the agent: it is a separate process, and the agent only reads
 * procfs, the driver and a non-blocking socket. */
#ifndef GS_AGENT_H
#define GS_AGENT_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

struct alert_config;

struct agent_opts {
  char *const *argv;          /* the job: argv[0] is looked up on PATH (unused when attach_pid > 0) */
  pid_t attach_pid;           /* > 0: watch this running process and its descendants, launch nothing */
  const char *name;           /* run name ("" = none) */
  const char *tags;           /* "k=v,k2=v2" */
  int64_t interval_ns;        /* sampling interval */
  int64_t flush_ns;           /* how often the writer commits; 0 = agent_flush_default(interval_ns) */
  const char *store_url;      /* where the run is kept */
  const char *root;           /* procfs root ("/") */
  int quiet;                  /* no live line, no summary */
  int wait_tree;              /* after the job exits, wait for its descendants too */
  const char *group;          /* run group (NULL = none): the runs of one `gpuscope tune` */
  long stop_after_steps;      /* > 0: SIGTERM the job once the client numbered this many steps (tune) */
  double stop_after_samples;  /* > 0: SIGTERM the job once its steps x samples per step reach this (tune) */
  const struct gs_kv *params; /* nparams extra run params, recorded as given (tune's trial, GPU, cores) */
  size_t nparams;
  int64_t stop_grace_ns;  /* > 0: a job still running this long after it was asked to stop (stop_after_steps,
                           * or SIGINT, SIGTERM or SIGHUP passed on) gets SIGKILL, its whole tree with it (tune) */
  const char *listen;     /* non-NULL: serve the run's /metrics there (`run --listen`, expose/expose.h) */
  const char *token;      /* for listen: required off loopback */
  const char *host_label; /* for listen: "hostname" (NULL) or "Hostname" */
  int save_diff;          /* keep the git diff itself (param git.diff, at most 1 MiB), not only its hash */
  /* rules and destinations (NULL, or no rule: no alerts; alert/alert.h) */
  const struct alert_config *alerts;
  int64_t log_max; /* bytes of the job's output kept in the store, the tail (0: AGENT_LOG_MAX_DEFAULT;
                    * < 0: none, and the job writes to the agent's own stdout and stderr) */
};

/* The job's output kept by default: its last 8 MiB (`--log-max`). */
#define AGENT_LOG_MAX_DEFAULT (8LL << 20)

/* The default commit period: 10 ticks, at least 1 s and at most 10 s. A SIGKILLed agent loses at most
 * one period of samples (SIGTERM, SIGINT, SIGHUP and the job's exit flush everything); a commit costs
 * about as much as a tick of every collector, so committing each tick would double the agent's cost. */
int64_t agent_flush_default(int64_t interval_ns);

/* Runs the job under watch (or watches o->attach_pid: attach mode below) until it exits. Once the
 * job has started, returns 0 whatever the store does afterwards — a store that fails mid-run is said
 * on stderr, in the run summary and in the run's notes, never by ending the job — and sets
 * *job_status the way a shell would: the job's exit code, 128+N when killed by signal N, 127 when
 * not found, 126 when not executable. Returns a negative GS_E code with the message in
 * gs_last_error() when the run could not start, and the job is then not launched (*job_status 1):
 * GS_ESTORE (the store cannot be opened or the run not begun), GS_EINVAL (--listen: a bad address or
 * token, or one that cannot be bound), GS_EBUSY, GS_ENOENT (attach), GS_ENOMEM or GS_EIO (signals,
 * the writer thread, the fork); a run already begun in the store is then closed as "failed". o and
 * what it points to stay the caller's; nothing is left to free. */
int agent_run(const struct agent_opts *o, int *job_status);

/* Attach mode (o->attach_pid > 0, `gpuscope attach PID`): nothing is launched; the run ends when the
 * process exits or gpuscope gets SIGINT, SIGTERM or SIGHUP (never passed on: the process is not
 * ours), and *job_status is 0. Its exit status is unknowable to a non-parent, so the run's exit code
 * stays unknown (-1). The run carries the params attached=1, attached.pid and attached.end (exited
 * or interrupted). The client socket is the per-process one below, which the clients look for on
 * their own; GPUSCOPE_SOCKET is not set. Returns GS_ENOENT when there is no such process and
 * GS_EBUSY when another agent is attached to it already. */

/* Node mode (`gpuscope agent`, agent/node.c): no job; the host and every GPU are sampled each tick
 * and served as Prometheus metrics on listen (expose/expose.h) until SIGINT, SIGTERM or SIGHUP. */
struct agent_node_opts {
  const char *listen;     /* "HOST:PORT" (NULL: EXPOSE_DEFAULT_LISTEN, 127.0.0.1:9733) */
  const char *token;      /* required off loopback (serve's rules) */
  const char *host_label; /* "hostname" (default) or "Hostname" */
  int64_t interval_ns;
  int record;            /* keep a node run in the store as well */
  const char *store_url; /* with record */
  const char *name;      /* the node run's name (default "node") */
  const char *root;      /* procfs root ("/") */
  int quiet;
  int print_address; /* print the address line even when quiet */
  /* with record: rules over the node run's window (alert/alert.h) */
  const struct alert_config *alerts;
};

/* Runs the node agent until a signal. Prints "gpuscope agent: metrics at http://HOST:PORT/metrics"
 * on stdout once listening. Returns 0; GS_EINVAL (bad address or token, or the address cannot be
 * bound: the message says which); GS_ESTORE when the store cannot be opened or written (record). */
int agent_node_run(const struct agent_node_opts *o);

/* The socket of an agent attached to pid: $XDG_RUNTIME_DIR/gpuscope/PID.sock, or
 * /tmp/gpuscope-UID/PID.sock without XDG_RUNTIME_DIR (the directory is the user's, mode 0700).
 * Writes it into buf and returns buf, or NULL when it does not fit buf or a socket address. */
const char *agent_attach_socket_path(pid_t pid, char *buf, size_t n);

#endif
