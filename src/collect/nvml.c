/* collect/nvml: the NVIDIA GPU collector. It loads NVML at run time (nvml_api.c), records each GPU's
 * static facts as run params, then samples every GPU from its own thread at the run's interval and
 * writes series (source "nvml", labels "gpu=N" or "gpu=N,pid=P"), throttle and GPU-lost events and
 * one-line notes into the thread-safe sink. The run loop's sample() call only returns: a driver call
 * that takes seconds (it happens: persistence mode off, a GPU falling off the bus) then stalls this
 * thread alone, never the host and process-tree collectors, and close() gives the thread two
 * seconds before it leaves it behind.
 *
 * Where the driver keeps a sample buffer (nvmlDeviceGetSamples), every driver sample is stored with
 * its own timestamp, so a dip shorter than the agent's interval still shows. Hopper and newer add
 * GPM (SM, tensor, DRAM activity), read from two samples taken at least 100 ms apart; on older GPUs
 * the same series come from DCGM's profiling fields where the host has DCGM. A call that
 * answers NOT_SUPPORTED or NO_PERMISSION is switched off for that GPU with one note; GPU_IS_LOST
 * ends that GPU's sampling with a "gpu_lost" event while the others go on.
 *
 * This file reads the GPU's own figures and runs the thread; MIG instances (nvml_mig.c), processes
 * (nvml_procs.c), GPM (nvml_gpm.c) and DCGM (nvml_dcgm.c) have files of their own, over
 * nvml_util.c (nvml_int.h). */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/nvml_int.h"

static double sample_value(unsigned vt, nvmlValue_t v) {
  switch (vt) {
  case NVML_VALUE_TYPE_DOUBLE:
    return v.dVal;
  case NVML_VALUE_TYPE_UNSIGNED_INT:
    return v.uiVal;
  case NVML_VALUE_TYPE_UNSIGNED_LONG:
    return (double)v.ulVal;
  case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
    return (double)v.ullVal;
  case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
    return (double)v.sllVal;
  case NVML_VALUE_TYPE_SIGNED_INT:
    return v.siVal;
  case NVML_VALUE_TYPE_UNSIGNED_SHORT:
    return v.usVal;
  default:
    return NAN;
  }
}

/* Reads the driver's utilisation sample buffer (which 0: GPU, 1: memory) since the last sample
 * seen and stores each sample at its own time. Returns how many were new, or -1 when the buffer
 * cannot be read (then the caller falls back to nvmlDeviceGetUtilizationRates). */
static int samples_tick(struct nvml_ctx *c, struct gpu *g, int which) {
  enum call call = which ? C_SAMPLES_MEM : C_SAMPLES_GPU;
  unsigned type = which ? NVML_MEMORY_UTILIZATION_SAMPLES : NVML_GPU_UTILIZATION_SAMPLES;
  enum metric metric = which ? M_MEM_UTIL : M_UTIL;
  unsigned vt = 0, n = 0;
  nvmlReturn_t r;
  if (g->off[call])
    return -1;
  if (!g->sbuf_cap) {
    r = c->api.nvmlDeviceGetSamples(g->dev, type, g->seen_us[which], &vt, &n, NULL);
    if (r == NVML_ERROR_NOT_FOUND)
      return 0;
    if (!nv_ok(c, g, call, r))
      return -1;
    n = n < 64 ? 64 : n > 4096 ? 4096 : n;
    nvmlSample_t *b = calloc(n, sizeof *b);
    if (!b)
      return -1;
    g->sbuf = b;
    g->sbuf_cap = n;
  }
  n = g->sbuf_cap;
  r = c->api.nvmlDeviceGetSamples(g->dev, type, g->seen_us[which], &vt, &n, g->sbuf);
  if (r == NVML_ERROR_NOT_FOUND)
    return 0;
  if (r == NVML_ERROR_INSUFFICIENT_SIZE && g->sbuf_cap < 4096) {
    /* More than a buffer-full since last time: read the oldest next tick with a bigger buffer. */
    free(g->sbuf);
    g->sbuf = NULL;
    g->sbuf_cap = 0;
    return -1;
  }
  if (!nv_ok(c, g, call, r))
    return -1;
  if (n > g->sbuf_cap)
    n = g->sbuf_cap;
  int64_t now, now_wall;
  nv_clock_pair(&now, &now_wall);
  unsigned long long newest = g->seen_us[which];
  int got = 0;
  for (unsigned i = 0; i < n; i++) {
    unsigned long long ts = g->sbuf[i].timeStamp;
    double v = sample_value(vt, g->sbuf[i].sampleValue);
    if (ts <= g->seen_us[which] || !(v >= 0 && v <= 100))
      continue;
    int64_t t = nv_drv_to_mono(ts, now, now_wall);
    nv_emit(c, g, metric, t, v);
    if (ts > newest) {
      if (newest > g->seen_us[which] || got) {
        int64_t gap = (int64_t)(ts - newest) * 1000;
        g->gap_ns[which] = gap < 20 * NS_PER_MS ? 20 * NS_PER_MS : gap > GS_NS_PER_S ? GS_NS_PER_S : gap;
      }
      newest = ts;
      g->newest_ns[which] = t;
    }
    got++;
  }
  g->seen_us[which] = newest;
  return got;
}

/* gpu.util_pct and gpu.mem_util_pct: every driver sample when the buffer has them; otherwise (no
 * buffer, or no new sample for two driver periods: an idle GPU stops sampling) the current
 * nvmlDeviceGetUtilizationRates. Falling back on every empty read would interleave two sources
 * whenever the agent ticks faster than the driver samples. */
static void util_tick(struct nvml_ctx *c, struct gpu *g) {
  int need[2];
  int64_t now = gs_mono_ns();
  for (int w = 0; w < 2; w++) {
    int got = samples_tick(c, g, w);
    RETURN_IF_LOST();
    need[w] = got < 0 || (got == 0 && (!g->newest_ns[w] || now - g->newest_ns[w] > 2 * g->gap_ns[w] + c->interval_ns));
  }
  if (!need[0] && !need[1])
    return;
  nvmlUtilization_t u;
  if (CALL(C_UTIL, c->api.nvmlDeviceGetUtilizationRates(g->dev, &u))) {
    int64_t t = nv_stamp(c);
    if (need[0])
      nv_emit(c, g, M_UTIL, t, u.gpu);
    if (need[1])
      nv_emit(c, g, M_MEM_UTIL, t, u.memory);
  }
}

/* Reads dev's GPU temperature (degrees C): nvmlDeviceGetTemperatureV (NVML 13 deprecates the old
 * call) unless *old_only, which is set when that call refuses its version or its argument (a driver
 * exporting the name without this struct), as memory_read does; the deprecated
 * nvmlDeviceGetTemperature is the fallback. Returns the answer of the call that counted;
 * FUNCTION_NOT_FOUND when no call is left. */
static nvmlReturn_t temp_read(const struct nvml_api *a, nvmlDevice_t dev, int *old_only, double *celsius) {
  nvmlReturn_t r;
  if (a->nvmlDeviceGetTemperatureV && !*old_only) {
    nvmlTemperature_t tv = {.version = nvmlTemperature_v1, .sensorType = NVML_TEMPERATURE_GPU};
    r = a->nvmlDeviceGetTemperatureV(dev, &tv);
    if (r == NVML_SUCCESS) {
      *celsius = tv.temperature;
      return r;
    }
    if (r != NVML_ERROR_ARGUMENT_VERSION_MISMATCH && r != NVML_ERROR_NOT_SUPPORTED &&
        r != NVML_ERROR_FUNCTION_NOT_FOUND && r != NVML_ERROR_INVALID_ARGUMENT)
      return r;
    *old_only = 1;
  }
  if (!a->nvmlDeviceGetTemperature)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  unsigned u;
  r = a->nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &u);
  if (r == NVML_SUCCESS)
    *celsius = u;
  return r;
}

static void temp_tick(struct nvml_ctx *c, struct gpu *g) {
  double v = NAN;
  if (g->off[C_TEMP])
    return;
  nvmlReturn_t r = temp_read(&c->api, g->dev, &g->temp_old_only, &v);
  if (r == NVML_ERROR_FUNCTION_NOT_FOUND && !c->api.nvmlDeviceGetTemperature) {
    g->off[C_TEMP] = 1; /* no call left: the library's note lists what it lacks */
    return;
  }
  if (nv_ok(c, g, C_TEMP, r))
    nv_emit(c, g, M_TEMP, nv_stamp(c), v);
}

static void memory_tick(struct nvml_ctx *c, struct gpu *g) {
  double v[3];
  if (g->off[C_MEMORY])
    return;
  nvmlReturn_t r = nv_memory_read(&c->api, g->dev, &g->mem_v1_only, v);
  if (r == NVML_ERROR_FUNCTION_NOT_FOUND && !c->api.nvmlDeviceGetMemoryInfo) {
    g->off[C_MEMORY] = 1; /* the library has no call left: its note lists what it lacks */
    return;
  }
  if (!nv_ok(c, g, C_MEMORY, r))
    return;
  int64_t t = nv_stamp(c);
  nv_emit(c, g, M_MEM_USED, t, v[0]);
  nv_emit(c, g, M_MEM_FREE, t, v[1]);
  nv_emit(c, g, M_MEM_TOTAL, t, v[2]);
}

static void throttle_tick(struct nvml_ctx *c, struct gpu *g) {
  unsigned long long mask;
  if (!CALL(C_THROTTLE, c->api.nvmlDeviceGetCurrentClocksEventReasons(g->dev, &mask)))
    return;
  int64_t t = nv_stamp(c);
  nv_emit(c, g, M_THROTTLE, t, (double)mask);
  /* GpuIdle is not a slowdown of work: it stays in the bitmask but makes no events. */
  unsigned long long changed = ((g->throttle_valid ? g->throttle_prev : 0) ^ mask) & ~NVML_CLOCKS_EVENT_REASON_GPU_IDLE;
  for (int b = 0; b < 64 && changed; b++) {
    unsigned long long bit = 1ULL << b;
    if (!(changed & bit))
      continue;
    changed &= ~bit;
    char name[40];
    const struct gs_clock_reason *r = gs_clock_reason_of_bit(bit);
    if (r)
      snprintf(name, sizeof name, "%s", r->name);
    else
      snprintf(name, sizeof name, "Reason0x%llx", bit);
    nv_event(c, t, (mask & bit) ? "throttle_start" : "throttle_stop", name, "");
  }
  g->throttle_prev = mask;
  g->throttle_valid = 1;
}

static void gpu_tick(struct nvml_ctx *c, struct gpu *g, uint64_t tick) {
  const struct nvml_api *a = &c->api;
  nvmlDevice_t d = g->dev;
  unsigned u;
  unsigned long long ull;

  nv_health_xids(c, g);  /* before any call that may find the GPU lost (an Xid 79) */
  nv_gpm_tick(c, g, -1); /* first, so the 100 ms spacing of GPM samples jitters least */
  nv_dcgm_tick(c, g);    /* what DCGM gave for a GPU without GPM (read before the GPUs) */
  RETURN_IF_LOST();
  util_tick(c, g);
  RETURN_IF_LOST();
  memory_tick(c, g);
  RETURN_IF_LOST();
  if (CALL(C_POWER, a->nvmlDeviceGetPowerUsage(d, &u)))
    nv_emit(c, g, M_POWER, nv_stamp(c), u / 1000.0);
  RETURN_IF_LOST();
  if (CALL(C_POWER_LIMIT, a->nvmlDeviceGetEnforcedPowerLimit(d, &u)))
    nv_emit(c, g, M_POWER_LIMIT, nv_stamp(c), u / 1000.0);
  RETURN_IF_LOST();
  if (CALL(C_ENERGY, a->nvmlDeviceGetTotalEnergyConsumption(d, &ull)))
    nv_emit(c, g, M_ENERGY, nv_stamp(c), ull / 1000.0);
  RETURN_IF_LOST();
  temp_tick(c, g);
  RETURN_IF_LOST();
  if (CALL(C_SM_CLOCK, a->nvmlDeviceGetClockInfo(d, NVML_CLOCK_SM, &u)))
    nv_emit(c, g, M_SM_CLOCK, nv_stamp(c), u);
  RETURN_IF_LOST();
  if (CALL(C_MEM_CLOCK, a->nvmlDeviceGetClockInfo(d, NVML_CLOCK_MEM, &u)))
    nv_emit(c, g, M_MEM_CLOCK, nv_stamp(c), u);
  RETURN_IF_LOST();
  int64_t t = nv_stamp(c);
  nv_emit(c, g, M_SM_CLOCK_MAX, t, g->sm_clock_max); /* NAN (unknown) is dropped */
  nv_emit(c, g, M_MEM_CLOCK_MAX, t, g->mem_clock_max);
  throttle_tick(c, g);
  RETURN_IF_LOST();
  /* Each PCIe read blocks ~20 ms in the driver: read one GPU per tick, each about once a second. */
  if ((tick + g->index) % c->pcie_every == 0) {
    if (CALL(C_PCIE, a->nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_TX_BYTES, &u)))
      nv_emit(c, g, M_PCIE_TX, nv_stamp(c), u * 1024.0);
    RETURN_IF_LOST();
    if (CALL(C_PCIE, a->nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_RX_BYTES, &u)))
      nv_emit(c, g, M_PCIE_RX, nv_stamp(c), u * 1024.0);
    RETURN_IF_LOST();
  }
  if (CALL(C_FAN, a->nvmlDeviceGetFanSpeed(d, &u)))
    nv_emit(c, g, M_FAN, nv_stamp(c), u);
  RETURN_IF_LOST();
  if (CALL(C_PSTATE, a->nvmlDeviceGetPerformanceState(d, &u)) && u <= 15) /* 32 = unknown */
    nv_emit(c, g, M_PSTATE, nv_stamp(c), u);
  RETURN_IF_LOST();
  nv_procs_tick(c, g);
  RETURN_IF_LOST();
  nv_health_tick(c, g);
  RETURN_IF_LOST();
  nv_mig_follow(c, g);
  for (int k = 0; k < g->n_migs && !g->lost; k++)
    nv_mig_tick(c, g, k);
}

/* ---- the thread ---- */

static struct timespec abs_ts(int64_t ns) {
  return (struct timespec){.tv_sec = ns / GS_NS_PER_S, .tv_nsec = ns % GS_NS_PER_S};
}

static void ctx_free(struct nvml_ctx *c, int shutdown);

/* The first time phase + k * step (k any integer) that is not before t. */
static int64_t grid_at_or_after(int64_t t, int64_t phase, int64_t step) {
  int64_t d = t - phase;
  return phase + (d >= 0 ? (d + step - 1) / step : -(-d / step)) * step;
}

static void *nvml_thread(void *arg) {
  struct nvml_ctx *c = arg;
  uint64_t tick = 0;
  int64_t next = gs_mono_ns();
  pthread_mutex_lock(&c->mu);
  while (!atomic_load(&c->stop)) {
    while (!atomic_load(&c->stop) && gs_mono_ns() < next) {
      struct timespec ts = abs_ts(next);
      pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    if (atomic_load(&c->stop))
      break;
    pthread_mutex_unlock(&c->mu);
    c->tick_ns = next;
    unsigned i;
    int written = 1;
    nv_health_events(c); /* timeout 0: each GPU's tick writes what came */
    nv_dcgm_poll(c);     /* one call for every GPU DCGM watches; each GPU's tick writes its values */
    for (i = 0; i < c->n_gpus && !atomic_load(&c->stop); i++) {
      struct gpu *g = &c->gpus[i];
      if (g->lost) {
        if (nv_health_xids(c, g)) /* an event of a GPU lost meanwhile */
          written &= nv_flush(c, g);
        continue;
      }
      gpu_tick(c, g, tick);
      written &= nv_flush(c, g);
    }
    tick++;
    c->ticks += i == c->n_gpus && written; /* a tick close() cut short is not counted */
    /* Keep the schedule; after an overrun (a slow driver call) skip the ticks that were missed. */
    int64_t now = gs_mono_ns(), phase = atomic_exchange(&c->phase_ns, 0);
    if (phase) /* move onto the run loop's grid, so a tick's GPU and host values share a time */
      next = grid_at_or_after(next + c->interval_ns, phase, c->interval_ns) - c->interval_ns;
    next = gs_tick_after(next, now, c->interval_ns);
    pthread_mutex_lock(&c->mu);
  }
  c->exited = 1;
  pthread_cond_broadcast(&c->cv);
  int detached = c->detached;
  pthread_mutex_unlock(&c->mu);
  if (detached)
    ctx_free(c, 0); /* close() has returned long ago; leave the library mapped */
  return NULL;
}

/* ---- open / close ---- */

static void ctx_free(struct nvml_ctx *c, int shutdown) {
  if (!c)
    return;
  for (unsigned i = 0; c->gpus && i < c->n_gpus; i++) {
    struct gpu *g = &c->gpus[i];
    for (int m = -1; shutdown && m < g->n_migs; m++) {
      struct gpm_state *st = m < 0 ? &g->gpm : &g->migs[m].gpm;
      for (int k = 0; k < 2; k++)
        if (st->s[k])
          c->api.nvmlGpmSampleFree(st->s[k]);
    }
    free(g->migs);
    free(g->sbuf), free(g->gpm_req), free(g->pbuf), free(g->pids), free(g->ubuf), free(g->procs);
  }
  if (shutdown)
    nv_health_stop(c);
  nv_dcgm_stop(c, shutdown);
  free(c->gpus);
  free(c->pp), free(c->pe), free(c->pn), free(c->pend_end);
  nvml_api_close(&c->api, shutdown);
  if (c->sync_ready) {
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
  }
  free(c);
}

/* Records what NVML says about GPU index as the run's params gpu.N.* (none for a fact it does not
 * give: missing is not zero). */
static void gpu_record_facts(struct nvml_ctx *c, unsigned index, const struct nvml_facts *f) {
  char v[64];
  if (f->name[0])
    nv_param(c->sink, index, "name", f->name);
  if (f->uuid[0])
    nv_param(c->sink, index, "uuid", f->uuid);
  if (f->pci_bus_id[0])
    nv_param(c->sink, index, "pci_bus_id", f->pci_bus_id);
  if (f->cc_major >= 0) {
    snprintf(v, sizeof v, "%d.%d", f->cc_major, f->cc_minor);
    nv_param(c->sink, index, "cc", v);
  }
  if (f->mem_total >= 0) {
    snprintf(v, sizeof v, "%lld", f->mem_total);
    nv_param(c->sink, index, "mem_total_bytes", v);
  }
  if (f->mig_current >= 0)
    nv_param(c->sink, index, "mig_mode", nv_mig_mode_text(f->mig_current, f->mig_pending, v, sizeof v));
}

/* Reads the GPU's max SM and memory clocks (NAN when NVML cannot tell, with a note). Returns 0, or
 * -1 when the GPU was lost meanwhile (already marked lost). */
static int gpu_read_max_clocks(struct nvml_ctx *c, struct gpu *g) {
  const struct nvml_api *a = &c->api;
  static const struct {
    unsigned type;
    const char *what;
  } mc[2] = {{NVML_CLOCK_SM, "max SM clock"}, {NVML_CLOCK_MEM, "max memory clock"}};
  if (!a->nvmlDeviceGetMaxClockInfo)
    return 0;
  for (int k = 0; k < 2; k++) {
    unsigned mhz;
    nvmlReturn_t r = a->nvmlDeviceGetMaxClockInfo(g->dev, mc[k].type, &mhz);
    if (r == NVML_SUCCESS)
      *(k ? &g->mem_clock_max : &g->sm_clock_max) = mhz;
    else if (r == NVML_ERROR_GPU_IS_LOST)
      return nv_lose(c, g, r), -1;
    else
      nv_note(c, "gpu%u: %s: %s", g->index, mc[k].what, nvml_api_strerror(a, r));
  }
  return 0;
}

/* Finds one GPU's handle and static facts, records them as params and prepares its buffers.
 * Returns 0, or GS_ENOMEM. A GPU that cannot be used is marked lost with a note or event. */
static int gpu_init(struct nvml_ctx *c, struct gpu *g, unsigned index) {
  const struct nvml_api *a = &c->api;
  g->index = index;
  snprintf(g->label, sizeof g->label, "gpu=%u", index);
  g->sm_clock_max = g->mem_clock_max = NAN;
  for (int m = 0; m < M_COUNT; m++)
    g->sid[m] = -1, g->last_t[m] = INT64_MIN;
  g->gap_ns[0] = g->gap_ns[1] = GS_NS_PER_S;
  /* Start after "now": samples from before the run belong to someone else's story. */
  g->seen_us[0] = g->seen_us[1] = g->pu_seen_us = (unsigned long long)nv_wall_us();

  nvmlReturn_t r = a->nvmlDeviceGetHandleByIndex(index, &g->dev);
  if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_GPU_NOT_FOUND) {
    nv_lose(c, g, r);
    return 0;
  }
  if (r != NVML_SUCCESS) {
    g->lost = 1;
    nv_note(c, "gpu%u: nvmlDeviceGetHandleByIndex: %s (not sampled)", index, nvml_api_strerror(a, r));
    return 0;
  }
  struct nvml_facts f;
  r = nvml_api_facts(a, g->dev, &f);
  if (r != NVML_SUCCESS) {
    nv_lose(c, g, r);
    return 0;
  }
  snprintf(g->name, sizeof g->name, "%s", f.name[0] ? f.name : "unknown GPU");
  snprintf(g->uuid, sizeof g->uuid, "%s", f.uuid);
  snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "%s", f.pci_bus_id);
  gpu_record_facts(c, index, &f);
  g->fam_gpm = f.fam_gpm;
  g->mig_mode = f.mig_current, g->mig_pending = f.mig_pending;
  g->mig_next_ns = gs_mono_ns() + nv_mig_every(c->interval_ns);
  nv_calls_switch_off_missing(a, g, f.fam_gpm);
  if (gpu_read_max_clocks(c, g))
    return 0;
  if (f.fam_gpm && nv_gpm_start(c, g, -1))
    return GS_ENOMEM;
  return nv_mig_start(c, g, &f);
}

/* The driver's version and the newest CUDA it runs (nvidia-smi's "CUDA Version": 12040 is 12.4) as
 * run params; either left out when the driver does not say. */
static void driver_params(struct nvml_ctx *c, struct gs_sink *sink) {
  if (c->driver[0])
    gs_sink_param(sink, "nvml.driver_version", c->driver);
  int cuda = 0;
  if (c->api.nvmlSystemGetCudaDriverVersion && c->api.nvmlSystemGetCudaDriverVersion(&cuda) == NVML_SUCCESS &&
      cuda > 0) {
    char v[32];
    snprintf(v, sizeof v, "%d.%d", cuda / 1000, cuda % 1000 / 10);
    gs_sink_param(sink, "nvml.cuda_driver_version", v);
  }
}

/* The run's GPU params and notes, each GPU's facts and buffers, then what reads across the GPUs:
 * DCGM for those without GPM, the health event set. Returns 0, or GS_ENOMEM. */
static int gpus_start(struct nvml_ctx *c, struct gs_sink *sink) {
  char v[512];
  snprintf(v, sizeof v, "%u", c->n_gpus);
  gs_sink_param(sink, "gpu.count", v);
  driver_params(c, sink);
  if (*nvml_api_missing(&c->api, v, sizeof v))
    gs_sink_note(sink, "nvml: this driver's library lacks %s; those metrics are off", v);
  for (unsigned i = 0; i < c->n_gpus; i++) {
    if (gpu_init(c, &c->gpus[i], i))
      return GS_ENOMEM;
    nv_flush(c, &c->gpus[i]);
  }
  if (nv_dcgm_start(c))
    return GS_ENOMEM;
  nv_health_start(c);
  return 0;
}

static void *nvml_open(const struct collector_opts *opts, struct gs_sink *sink, char *err, size_t errlen) {
  struct nvml_ctx *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  if (nvml_api_open(&c->api, opts ? opts->nvml_lib : NULL, err, errlen)) {
    free(c);
    return NULL;
  }
  c->sink = sink;
  c->interval_ns = opts && opts->interval_ns > 0 ? opts->interval_ns : 100 * NS_PER_MS;
  c->pcie_every = (unsigned)((PCIE_PERIOD_NS + c->interval_ns - 1) / c->interval_ns);
  if (!c->pcie_every)
    c->pcie_every = 1;

  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int bad = pthread_mutex_init(&c->mu, NULL) | pthread_cond_init(&c->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (bad) {
    snprintf(err, errlen, "cannot create a lock");
    goto fail;
  }
  c->sync_ready = 1;

  if (!c->api.nvmlSystemGetDriverVersion ||
      c->api.nvmlSystemGetDriverVersion(c->driver, sizeof c->driver) != NVML_SUCCESS)
    c->driver[0] = 0;
  c->driver[sizeof c->driver - 1] = 0;
  unsigned n = 0;
  nvmlReturn_t r = c->api.nvmlDeviceGetCount(&n);
  if (r != NVML_SUCCESS) {
    snprintf(err, errlen, "nvmlDeviceGetCount: %s", nvml_api_strerror(&c->api, r));
    goto fail;
  }
  if (n == 0) {
    snprintf(err, errlen, "no NVIDIA GPU (the driver reports none)");
    goto fail;
  }
  c->gpus = calloc(n, sizeof *c->gpus);
  if (!c->gpus) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  c->n_gpus = n;
  c->tick_ns = gs_mono_ns();
  if (gpus_start(c, sink)) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }

  /* The thread takes no signals: the run loop's handlers (forwarding to the job) stay on it. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int e = pthread_create(&c->thread, NULL, nvml_thread, c);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) {
    snprintf(err, errlen, "cannot start the NVML thread");
    goto fail;
  }
  c->thread_started = 1;
  return c;

fail:
  ctx_free(c, 1);
  return NULL;
}

/* The thread samples on its own clock, so the run loop's tick only hands over its first scheduled
 * time (the grid the thread then follows) and returns: nothing here can wait on the driver. */
static int nvml_sample(void *ctx, struct gs_sink *sink, int64_t now_ns) {
  struct nvml_ctx *c = ctx;
  (void)sink;
  if (c && !c->phased) {
    c->phased = 1;
    atomic_store(&c->phase_ns, now_ns);
  }
  return GS_COLLECT_OK;
}

static void nvml_summary(void *ctx, FILE *out) {
  struct nvml_ctx *c = ctx;
  if (!c) {
    fprintf(out, "GPUs: none\n");
    return;
  }
  unsigned gpm = 0, same = 1;
  for (unsigned i = 0; i < c->n_gpus; i++) {
    gpm += (unsigned)c->gpus[i].gpm.on;
    same &= !strcmp(c->gpus[i].name, c->gpus[0].name);
  }
  if (same)
    fprintf(out, "GPUs: %u \xc3\x97 %s", c->n_gpus, c->gpus[0].name);
  else
    fprintf(out, "GPUs: %u (%s, ...)", c->n_gpus, c->gpus[0].name);
  fprintf(out, " (NVML %s, ", c->driver[0] ? c->driver : "?");
  if (gpm == c->n_gpus)
    fprintf(out, "GPM on");
  else if (gpm == 0)
    fprintf(out, "GPM off");
  else
    fprintf(out, "GPM on %u of %u", gpm, c->n_gpus);
  if (c->dcgm)
    fprintf(out, ", DCGM profiling (%s)", c->dcgm->how);
  int lost = atomic_load(&c->n_lost);
  if (lost)
    fprintf(out, ", %d lost", lost);
  fprintf(out, ")\n");
}

/* Stops the thread. When it is stuck inside the driver for more than CLOSE_WAIT_NS, it is left
 * behind: it frees the context itself if the call ever returns, writes nothing more into the sink
 * (stop is set under mu, and every write checks it under mu), and the library stays mapped. */
static void nvml_close(void *ctx) {
  struct nvml_ctx *c = ctx;
  if (!c)
    return;
  if (!c->thread_started) {
    ctx_free(c, 1);
    return;
  }
  pthread_mutex_lock(&c->mu);
  atomic_store(&c->stop, 1);
  pthread_cond_broadcast(&c->cv);
  int64_t deadline = gs_mono_ns() + CLOSE_WAIT_NS;
  while (!c->exited && gs_mono_ns() < deadline) {
    struct timespec ts = abs_ts(deadline);
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
  }
  int exited = c->exited;
  pthread_t th = c->thread;
  if (!exited)
    c->detached = 1;
  pthread_mutex_unlock(&c->mu);
  if (!exited) {
    pthread_detach(th);
    return;
  }
  pthread_join(th, NULL);
  /* What the thread did, for the run's record (and the tests, which count rather than time). */
  char v[32];
  snprintf(v, sizeof v, "%llu", c->ticks);
  gs_sink_param(c->sink, "nvml.ticks", v);
  snprintf(v, sizeof v, "%llu", c->late);
  gs_sink_param(c->sink, "nvml.late_readings", v);
  ctx_free(c, 1);
}

const struct collector collector_nvml = {
    .version = 1,
    .name = "nvml",
    .metrics = nv_metrics,
    .n_metrics = M_COUNT,
    .open = nvml_open,
    .sample = nvml_sample,
    .summary = nvml_summary,
    .close = nvml_close,
};
