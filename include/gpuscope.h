/* gpuscope.h — the C client: lets a training job written in C or C++ tell the gpuscope agent about
 * its steps, metrics, params and marks (protocol gs1, docs/protocol.md). Link libgpuscope-client
 * (static or shared) and -lpthread.
 *
 * The promise: it costs next to nothing and can never hurt the job. Every call formats one short
 * line and sends it as one datagram with MSG_DONTWAIT; nothing blocks, allocates or raises a signal.
 * When the socket is full or the agent is gone, the message is dropped and counted (gpuscope_dropped());
 * the count goes to the agent ("gs1 dropped N") with the next send that gets through, so the report
 * warns that its step figures are partial.
 * Without GPUSCOPE_SOCKET in the environment (the job runs without `gpuscope run`) every call is a
 * cheap no-op, but for a look every 2 s at most (one lstat per directory) for the socket of an agent
 * `gpuscope attach` started on the process (docs/protocol.md, "Attached runs"); the first one found
 * is kept. All functions are thread-safe and async-signal-unsafe.
 *
 * The one piece of process-wide state is the socket, opened on the first call (pthread_once) and
 * kept for the life of the process; a forked child shares it, which is fine for datagrams. */
#ifndef GPUSCOPE_H
#define GPUSCOPE_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define GPUSCOPE_API __attribute__((visibility("default")))
#else
#define GPUSCOPE_API
#endif

#define GPUSCOPE_PROTOCOL "gs1"

/* Logs a metric value (loss, accuracy, learning rate). name: 1-128 of [A-Za-z0-9_./-], not starting
 * with "step.". step: the training step it belongs to, or -1 for none. A non-finite value is sent
 * and rejected (and counted) by the agent. */
GPUSCOPE_API void gpuscope_log(const char *name, double value, long long step);

/* Records a run parameter (batch_size, precision, model). Control characters in value are sent as
 * spaces; a value is cut to 1024 bytes at a UTF-8 character boundary. A later value replaces an
 * earlier one. */
GPUSCOPE_API void gpuscope_param(const char *key, const char *value);

/* Reports one finished training step: seconds spent waiting for data, copying to the device (-1 when
 * not measured: the field is then left out, so "not measured" is never read as zero), and computing;
 * samples in the step (-1 when unknown). The step's time is taken now, on CLOCK_MONOTONIC, so the
 * agent stores it when it ended, not when it arrived. In a distributed job the process's rank (from
 * RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK) goes with it, so each rank keeps its own
 * step series. */
GPUSCOPE_API void gpuscope_step(long long n, double data_s, double h2d_s, double compute_s, long long samples);

/* Records a marker event (epoch, eval, checkpoint), with a value or NAN for none. */
GPUSCOPE_API void gpuscope_mark(const char *name, double value);

/* Messages dropped so far: socket full, agent gone, or a message too long to send. */
GPUSCOPE_API unsigned long long gpuscope_dropped(void);

/* 1 when the client has an agent to send to: GPUSCOPE_SOCKET named a usable socket path at the
 * first call, or (without GPUSCOPE_SOCKET) the socket of an agent `gpuscope attach` started on this
 * process or an ancestor was found (looked for at most every 2 s; GPUSCOPE_ATTACH=0: never); else 0. */
GPUSCOPE_API int gpuscope_enabled(void);

#ifdef __cplusplus
}
#endif

#endif
