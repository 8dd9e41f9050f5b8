/* alert: rules over a live run's recent window, and their delivery while the run goes on. The run
 * loop's writer thread (agent/agent.c), and the node agent's store thread (agent/node.c), call
 * alert_engine_eval after a flush; the engine loads the run's view from that thread's own store
 * handle, evaluates every rule on the window the web app re-diagnoses, and queues what starts
 * ("firing") and what ends ("resolved"). A delivery thread of the engine's own sends each queued
 * alert to the webhooks (libcurl, loaded on first use: alert/curl_api.h) and the command; the
 * queue is bounded, so a webhook that hangs or refuses costs dropped alerts, counted, never a
 * delayed tick or flush. Each alert is also an event of the run (kind alert). docs/alerts.md. */
#ifndef GS_ALERT_H
#define GS_ALERT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum alert_kind {
  ALERT_GPU_IDLE,  /* a GPU's util below threshold % for for_ns */
  ALERT_FINDING,   /* a live finding of at least gain (speed-up) and severity */
  ALERT_HANG,      /* no step for for_ns, the job having stepped before */
  ALERT_EXIT,      /* the run crashed, failed or was killed (OOM included) */
  ALERT_THROTTLE,  /* a GPU's clocks cut for heat or power more than threshold % of for_ns */
  ALERT_GPU_MEM,   /* a GPU's memory used at least threshold % of its total for for_ns */
  ALERT_STRAGGLER, /* the live finding `straggler` (a slow rank or GPU) */
  ALERT_XID,       /* a GPU reported an Xid within the last for_ns */
  ALERT_ECC,       /* uncorrected ECC errors within for_ns, or corrected ones above rate per minute */
  ALERT_ROW_REMAP, /* a row remap pending or failed (the latest reading) */
  ALERT_NVLINK,    /* NVLink errors (replay, recovery, CRC) within for_ns */
  ALERT_JOB,       /* the job's own alert (gpuscope.alert, wandb.alert) of at least severity (its level) */
};

struct alert_rule {
  enum alert_kind kind;
  double threshold; /* %, for gpu_idle, throttle and gpu_mem */
  int64_t for_ns;   /* how long the condition holds before the alert fires */
  double gain;      /* finding, straggler: the least estimated speed-up (1.0 = any) */
  int severity;     /* finding, straggler: the least severity (0 info, 1 low, 2 medium, 3 high); job: the least
                       level (0 info, 1 warn, 2 error) */
  double rate;      /* ecc: corrected errors per minute that fire it (0: uncorrected only) */
  char spec[128];   /* as written, for messages and the payload */
};

#define ALERT_MAX_RULES 32
#define ALERT_MAX_HOOKS 8

/* What a run's alerts are and where they go: the XDG file's settings with the flags' added. Plain
 * data, filled by alert_rule_parse, alert_config_set and alert_config_load. */
struct alert_config {
  struct alert_rule rules[ALERT_MAX_RULES];
  size_t nrules;
  char hooks[ALERT_MAX_HOOKS][1024]; /* webhook URLs */
  int hook_slack[ALERT_MAX_HOOKS];   /* 1: Slack's {"text": ...}, 0: gpuscope's JSON */
  size_t nhooks;
  char command[1024]; /* run by /bin/sh -c with the alert as JSON on stdin ("" none) */
  int64_t every_ns;   /* evaluate at most this often (default 5 s) */
  int64_t timeout_ns; /* one delivery's limit, and the drain's at the run's end (default 10 s) */
  int retries;        /* more tries of a failed delivery, with back-off from 1 s (default 3) */
  int queue;          /* alerts waiting for delivery at most (default 64) */
  int rate_per_min;   /* alerts queued per minute at most (default 30) */
};

/* The defaults above, no rules, no destinations. Can't fail. */
void alert_config_init(struct alert_config *c);

/* Parses one rule as `--alert` takes it: NAME[OPVALUE][:KEY=VALUE,...], e.g. `gpu_idle<10%:for=2m`,
 * `hang:for=5m`, `exit`, `finding:gain=1.2,severity=medium` (docs/alerts.md). Returns 0, or GS_EINVAL
 * with a one-line message in err. */
int alert_rule_parse(const char *spec, struct alert_rule *r, char *err, size_t errlen);

/* Sets one setting by the file's key name (rule, webhook, slack, command, every, timeout, retries,
 * queue, rate), as the flags and the file both do; a rule, webhook or slack is added. Returns 0, or
 * GS_EINVAL with a one-line message in err. */
int alert_config_set(struct alert_config *c, const char *key, const char *value, char *err, size_t errlen);

/* Reads an alerts.ini (libinih): `[alerts]` with the keys of alert_config_set, `rule` repeatable.
 * A file that does not exist is no error and changes nothing (returns 1); 0 when read; GS_EINVAL with
 * "PATH:LINE: what is wrong" in err for a bad line (the first), GS_EIO when it cannot be read. */
int alert_config_load(struct alert_config *c, const char *path, char *err, size_t errlen);

/* The file every run reads: $XDG_CONFIG_HOME/gpuscope/alerts.ini, else ~/.config/gpuscope/alerts.ini.
 * Into buf; NULL when neither XDG_CONFIG_HOME nor HOME is set or the path does not fit. */
const char *alert_config_default_path(char *buf, size_t n);

/* The rules a destination without any gets (ALERT_DEFAULT_RULES): a webhook, a Slack URL or a
 * command set but no rule would otherwise be sent nothing, the job's crash included. When c has a
 * destination and no rule, adds them and returns 1; else returns 0 and leaves c as it is. */
#define ALERT_DEFAULT_RULES "exit, hang, job"
int alert_config_default_rules(struct alert_config *c);
/* Whether c has a rule (without a webhook or command, its alerts are the run's events alone). */
int alert_config_active(const struct alert_config *c);

struct gs_sink;
struct store;
struct alert_engine;

/* Who the alerts are about, for the payload. */
struct alert_run_info {
  const char *run_id, *run_name, *host;
  int64_t mono_start_ns; /* the run's start on the monotonic clock */
  int64_t interval_ns;   /* the sampling interval (how recent a reading must be) */
};

/* Starts an engine for one run (copies c and info) and its delivery thread; sink gets each alert as
 * an event (kind "alert", name the rule, labels, text "firing: ..." / "resolved: ..."). Returns NULL
 * with a message (gs_last_error) when the thread cannot start. Free with alert_engine_free. */
struct alert_engine *alert_engine_new(const struct alert_config *c, const struct alert_run_info *info,
                                      struct gs_sink *sink);

/* Evaluates every rule on the run's recent window if c->every_ns has passed since the last time
 * (else returns at once), reading st from the calling thread (the one that writes st). Queues each
 * change; never waits on a delivery. Returns 0 or a GS_E code when the view cannot be read (no alert
 * changes then). */
int alert_engine_eval(struct alert_engine *e, struct store *st);

/* The run's last look, after its last flush and before alert_engine_finish: sends the job's own
 * alerts it raised since the last evaluation (a job that alerts and exits at once is not left
 * unheard), and notes once how many were raised without a `job` rule to send them. Returns as
 * alert_engine_eval. */
int alert_engine_last_eval(struct alert_engine *e, struct store *st);

/* The run's end: status is the run's (finished, failed, killed), exit_code the job's shell status
 * (-1 unknown), oom_limit NAN unless the kernel's OOM killer ended the job, then its cgroup's memory
 * limit in bytes (0 when unknown; the agent tells: collect/ reads the cgroup). Fires the exit rule for a run that did
 * not finish, resolves what is firing ("the run ended"), lets the delivery thread send what is queued for at most the
 * timeout, then stops it; what it could not send is dropped, counted. Puts the counts as params alert.fired,
 * alert.sent, alert.failed, alert.dropped, and a note when some were dropped or failed. Call once. */
void alert_engine_finish(struct alert_engine *e, const char *status, int exit_code, double oom_limit);

/* One line for the run summary ("  alerts: 2 fired, 1 resolved; 3 sent, 0 failed, 0 dropped") on out;
 * nothing when no rule fired and nothing was dropped. */
void alert_engine_summary(const struct alert_engine *e, FILE *out);

/* Stops the delivery thread if alert_engine_finish did not, and frees. NULL does nothing. */
void alert_engine_free(struct alert_engine *e);

#endif
