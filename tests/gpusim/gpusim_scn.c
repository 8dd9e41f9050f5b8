/* gpusim/gpusim_scn: reads a scenario file (format in README.md) into struct sim_scn and evaluates
 * its piecewise-constant timelines: the value at a time, and the integral over an interval (for the
 * energy counter and the interval averages GPM reports). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpusim.h"

const char *const sim_key_names[K_NKEYS] = {
    [K_UTIL] = "util",
    [K_MEM_UTIL] = "mem_util",
    [K_MEM_USED] = "mem_used",
    [K_POWER] = "power",
    [K_TEMP] = "temp",
    [K_SM_CLOCK] = "sm_clock",
    [K_MEM_CLOCK] = "mem_clock",
    [K_THROTTLE] = "throttle",
    [K_PCIE_TX] = "pcie_tx",
    [K_PCIE_RX] = "pcie_rx",
    [K_FAN] = "fan",
    [K_PSTATE] = "pstate",
    [K_SM_ACTIVE] = "sm_active",
    [K_SM_OCC] = "sm_occupancy",
    [K_TENSOR] = "tensor",
    [K_DRAM] = "dram",
    [K_FP16] = "fp16",
    [K_FP32] = "fp32",
    [K_FP64] = "fp64",
    [K_NVLINK_RX] = "nvlink_rx",
    [K_NVLINK_TX] = "nvlink_tx",
    [K_GR_ACTIVE] = "gr_active",
    [K_ECC_SBE] = "ecc_sbe",
    [K_ECC_DBE] = "ecc_dbe",
    [K_ECC_SBE_AGG] = "ecc_sbe_agg",
    [K_ECC_DBE_AGG] = "ecc_dbe_agg",
    [K_REMAP_CORR] = "remap_corr",
    [K_REMAP_UNC] = "remap_unc",
    [K_REMAP_PENDING] = "remap_pending",
    [K_REMAP_FAILURE] = "remap_failure",
    [K_RETIRED_SBE] = "retired_sbe",
    [K_RETIRED_DBE] = "retired_dbe",
    [K_RETIRED_PENDING] = "retired_pending",
    [K_PCIE_REPLAY] = "pcie_replay",
    [K_NVLINK_REPLAY] = "nvlink_replay",
    [K_NVLINK_RECOVERY] = "nvlink_recovery",
    [K_NVLINK_CRC_FLIT] = "nvlink_crc_flit",
    [K_NVLINK_CRC_DATA] = "nvlink_crc_data",
    [K_ECC_SBE_RATE] = "ecc_sbe_per_s",
    [K_ECC_DBE_RATE] = "ecc_dbe_per_s",
    [K_PCIE_REPLAY_RATE] = "pcie_replay_per_s",
    [K_NVLINK_REPLAY_RATE] = "nvlink_replay_per_s",
};

const char *const sim_call_names[SC_NCALLS] = {
    [SC_ALL] = "all",
    [SC_NAME] = "name",
    [SC_UUID] = "uuid",
    [SC_PCI] = "pci",
    [SC_CC] = "cc",
    [SC_UTIL] = "util",
    [SC_SAMPLES] = "samples",
    [SC_MEM] = "mem",
    [SC_POWER] = "power",
    [SC_POWER_LIMIT] = "power_limit",
    [SC_ENERGY] = "energy",
    [SC_TEMP] = "temp",
    [SC_TEMP_V] = "temp_v",
    [SC_TEMP_OLD] = "temp_old",
    [SC_CLOCK] = "clock",
    [SC_MAX_CLOCK] = "max_clock",
    [SC_THROTTLE] = "throttle",
    [SC_PCIE] = "pcie",
    [SC_FAN] = "fan",
    [SC_PSTATE] = "pstate",
    [SC_PROCS] = "procs",
    [SC_PROC_UTIL] = "proc_util",
    [SC_MIG] = "mig",
    [SC_MIG_DEV] = "mig_dev",
    [SC_GPM] = "gpm",
    [SC_EVENTS] = "events",
    [SC_ECC] = "ecc",
    [SC_REMAP] = "remap",
    [SC_RETIRED] = "retired",
    [SC_PCIE_REPLAY] = "pcie_replay",
    [SC_NVLINK] = "nvlink",
};

static const struct {
  const char *name;
  int code;
} codes[] = {
    {"NOT_SUPPORTED", 3},    {"NO_PERMISSION", 4}, {"GPU_IS_LOST", 15},      {"UNKNOWN", 999}, {"TIMEOUT", 10},
    {"INVALID_ARGUMENT", 2}, {"UNINITIALIZED", 1}, {"DRIVER_NOT_LOADED", 9}, {"NO_DATA", 21},  {"GPU_NOT_FOUND", 28},
};

static const struct {
  const char *name;
  unsigned long long bit;
} reasons[] = {
    {"GpuIdle", 0x1},
    {"ApplicationsClocksSetting", 0x2},
    {"SwPowerCap", 0x4},
    {"HwSlowdown", 0x8},
    {"SyncBoost", 0x10},
    {"SwThermalSlowdown", 0x20},
    {"HwThermalSlowdown", 0x40},
    {"HwPowerBrakeSlowdown", 0x80},
    {"DisplayClockSetting", 0x100},
};

struct parser {
  const char *path;
  int line;
  char *err;
  size_t errlen;
  struct sim_scn *s;
  unsigned sel[64]; /* devices the current block applies to */
  int nsel;
};

static int perr(struct parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct parser *p, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(p->err, p->errlen, "%s:%d: %s", p->path, p->line, msg);
  return -1;
}

/* A number with an optional SI (K M G T: 1000s) or binary (Ki Mi Gi Ti: 1024s) suffix, optionally
 * followed by B; also hex (0x60). Returns 0 and sets *v, or -1. */
static int parse_num(const char *s, double *v) {
  char *end;
  errno = 0;
  double x = strtod(s, &end);
  if (end == s || errno)
    return -1;
  double m = 1;
  if (*end && strchr("KMGT", *end)) {
    int bin = end[1] == 'i';
    int e = (int)(strchr("KMGT", *end) - "KMGT") + 1;
    m = pow(bin ? 1024.0 : 1000.0, e);
    end += 1 + bin;
  }
  if (*end == 'B')
    end++;
  if (*end)
    return -1;
  *v = x * m;
  return 0;
}

static int parse_throttle(struct parser *p, const char *s, double *v) {
  if (isdigit((unsigned char)*s))
    return parse_num(s, v) ? perr(p, "bad throttle value '%s'", s) : 0;
  unsigned long long mask = 0;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *tok = strtok_r(buf, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
    size_t i;
    for (i = 0; i < sizeof reasons / sizeof reasons[0] && strcmp(reasons[i].name, tok); i++)
      ;
    if (i == sizeof reasons / sizeof reasons[0])
      return perr(p, "unknown throttle reason '%s'", tok);
    mask |= reasons[i].bit;
  }
  *v = (double)mask;
  return 0;
}

static int parse_procs(struct parser *p, const char *s, struct sim_seg *g) {
  g->procs_set = 1;
  g->nprocs = 0;
  if (!strcmp(s, "none"))
    return 0;
  char buf[512];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (g->nprocs == SIM_MAX_PROCS)
      return perr(p, "more than %d processes", SIM_MAX_PROCS);
    struct sim_proc *pr = &g->procs[g->nprocs++];
    char *f[3] = {tok, NULL, NULL};
    for (int i = 1; i < 3; i++) {
      f[i] = f[i - 1] ? strchr(f[i - 1], ':') : NULL;
      if (f[i])
        *f[i]++ = 0;
    }
    double mem = 0, sm = 0;
    if (!strcmp(f[0], "$JOBPID"))
      pr->jobpid = 1;
    else if (!isdigit((unsigned char)f[0][0]) || (pr->pid = (unsigned)strtoul(f[0], NULL, 10)) == 0)
      return perr(p, "bad pid '%s' (a number or $JOBPID)", f[0]);
    if (!f[1] || parse_num(f[1], &mem) || (f[2] && parse_num(f[2], &sm)))
      return perr(p, "a process is PID:MEM[:SM%%], got '%s'", s);
    pr->mem = (unsigned long long)mem;
    pr->sm = (unsigned)sm;
  }
  return 0;
}

static double parse_time(struct parser *p, const char *s, int *bad) {
  double v;
  if (!s || parse_num(s, &v) || v < 0) {
    *bad = perr(p, "bad time '%s'", s ? s : "");
    return 0;
  }
  return v;
}

static int parse_code(const char *s) {
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (!strcmp(codes[i].name, s))
      return codes[i].code;
  return isdigit((unsigned char)*s) ? atoi(s) : -1;
}

static int parse_call(const char *s) {
  for (int i = 0; i < SC_NCALLS; i++)
    if (!strcmp(sim_call_names[i], s))
      return i;
  return -1;
}

static void dev_defaults(struct sim_dev *x, unsigned i) {
  memset(x, 0, sizeof *x);
  x->index = i;
  x->cc_major = 8, x->cc_minor = 0;
  x->mem_total = 16ULL << 30;
  x->mem_reserved = 256ULL << 20;
  x->power_limit_w = 300;
  x->max_sm = 1410, x->max_mem = 1215;
  x->mig = -1;
  x->sample_hz = 6;
  x->samples_when_idle = 1;
  x->energy_start_mj = 1000000ULL * (i + 1);
  x->lost_at = x->gone_at = x->mig_at = INFINITY;
  snprintf(x->uuid, sizeof x->uuid, "GPU-5a1c0000-0000-4000-8000-%012x", i);
  snprintf(x->pci, sizeof x->pci, "00000000:%02X:00.0", 0x18 + 0x10 * i);
}

static struct sim_dev *dev_get(struct parser *p, unsigned idx) {
  struct sim_scn *s = p->s;
  if (idx >= s->ndev) {
    struct sim_dev *d = realloc(s->dev, (idx + 1) * sizeof *d);
    if (!d)
      return NULL;
    for (unsigned i = s->ndev; i <= idx; i++)
      dev_defaults(&d[i], i);
    s->dev = d;
    s->ndev = idx + 1;
  }
  return &s->dev[idx];
}

static int parse_device_list(struct parser *p, char *s) {
  p->nsel = 0;
  char *save = NULL;
  for (char *tok = strtok_r(s, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *dash = strchr(tok, '-');
    unsigned a = (unsigned)strtoul(tok, NULL, 10), b = dash ? (unsigned)strtoul(dash + 1, NULL, 10) : a;
    if (!isdigit((unsigned char)*tok) || b < a || b >= 64)
      return perr(p, "bad device list '%s' (e.g. 0, 0-7, 1,3)", tok);
    for (unsigned i = a; i <= b && p->nsel < 64; i++) {
      if (!dev_get(p, i))
        return perr(p, "out of memory");
      p->sel[p->nsel++] = i;
    }
  }
  return p->nsel ? 0 : perr(p, "device needs a list");
}

static struct sim_seg *seg_add(struct sim_dev *d, double t) {
  for (int i = 0; i < d->nsegs; i++)
    if (d->segs[i].t == t)
      return &d->segs[i];
  if (d->nsegs == d->cap_segs) {
    int cap = d->cap_segs ? d->cap_segs * 2 : 8;
    struct sim_seg *n = realloc(d->segs, (size_t)cap * sizeof *n);
    if (!n)
      return NULL;
    d->segs = n;
    d->cap_segs = cap;
  }
  struct sim_seg *g = &d->segs[d->nsegs++];
  memset(g, 0, sizeof *g);
  g->t = t;
  return g;
}

static int fault_add(struct parser *p, struct sim_dev *d, const struct sim_fault *f) {
  if (d->nfaults == d->cap_faults) {
    int cap = d->cap_faults ? d->cap_faults * 2 : 4;
    struct sim_fault *n = realloc(d->faults, (size_t)cap * sizeof *n);
    if (!n)
      return perr(p, "out of memory");
    d->faults = n;
    d->cap_faults = cap;
  }
  d->faults[d->nfaults++] = *f;
  return 0;
}

/* "[from T] [until T]" after a fault. */
static int parse_window(struct parser *p, char **tok, int ntok, int i, struct sim_fault *f) {
  int bad = 0;
  f->from = 0;
  f->until = INFINITY;
  for (; i < ntok; i += 2) {
    if (i + 1 >= ntok)
      return perr(p, "'%s' needs a time", tok[i]);
    if (!strcmp(tok[i], "from"))
      f->from = parse_time(p, tok[i + 1], &bad);
    else if (!strcmp(tok[i], "until"))
      f->until = parse_time(p, tok[i + 1], &bad);
    else
      return perr(p, "expected 'from T' or 'until T', got '%s'", tok[i]);
    if (bad)
      return -1;
  }
  return 0;
}

/* The instance of d with GPU-instance id gi declared last (an id may be reused once the earlier
 * instance is gone), NULL when none. */
static struct sim_dev *mig_find(struct sim_dev *d, unsigned gi) {
  for (int i = d->nmigs - 1; i >= 0; i--)
    if (d->migs[i].gi == gi)
      return &d->migs[i];
  return NULL;
}

/* "[slot N] [from T]" after a mig_instance's memory, from token i on. */
static int mig_instance_opts(struct parser *p, char **tok, int ntok, int i, unsigned *slot, double *from) {
  int bad = 0;
  for (; i < ntok; i += 2) {
    if (i + 1 >= ntok || (strcmp(tok[i], "slot") && strcmp(tok[i], "from")))
      return perr(p, "mig_instance wants GI CI PROFILE MEMORY [slot N] [from T]");
    if (tok[i][0] == 'f')
      *from = parse_time(p, tok[i + 1], &bad);
    else if (isdigit((unsigned char)tok[i + 1][0]))
      *slot = (unsigned)atoi(tok[i + 1]);
    else
      return perr(p, "mig_instance: bad slot '%s'", tok[i + 1]);
    if (bad)
      return -1;
  }
  return 0;
}

/* "mig_instance GI CI PROFILE MEMORY [slot N] [from T]": one MIG device of d, there from T (default
 * 0) until its `in GI gone T'. Its defaults: no reserved memory, PCIe and NVLink GPM metrics
 * unsupported (the links are the whole GPU's, not an instance's). Two instances with one id or
 * slot at the same time are refused when the scenario is finished (mig_overlap). */
static int mig_instance_line(struct parser *p, struct sim_dev *d, char **tok, int ntok) {
  double mem, from = 0;
  unsigned slot = (unsigned)d->nmigs;
  if (ntok < 5 || !isdigit((unsigned char)tok[1][0]) || !isdigit((unsigned char)tok[2][0]) || parse_num(tok[4], &mem))
    return perr(p, "mig_instance wants GI CI PROFILE MEMORY [slot N] [from T]");
  if (mig_instance_opts(p, tok, ntok, 5, &slot, &from))
    return -1;
  if (d->nmigs == SIM_MAX_MIG_DECL || slot >= SIM_MAX_MIG)
    return perr(p, "at most %d MIG devices, slots 0-%d", SIM_MAX_MIG_DECL, SIM_MAX_MIG - 1);
  struct sim_dev *n = realloc(d->migs, (size_t)(d->nmigs + 1) * sizeof *n);
  if (!n)
    return perr(p, "out of memory");
  d->migs = n;
  struct sim_dev *x = &d->migs[d->nmigs++];
  dev_defaults(x, d->index);
  x->uuid[0] = 0;
  x->mem_total = (unsigned long long)mem;
  x->mem_reserved = 0;
  x->gi = (unsigned)atoi(tok[1]), x->ci = (unsigned)atoi(tok[2]), x->slot = slot;
  x->from_at = from;
  snprintf(x->profile, sizeof x->profile, "%s", tok[3]);
  static const unsigned links[] = {20, 21, 60, 61};
  for (size_t i = 0; i < 4; i++)
    x->gpm_unsupported[x->n_gpm_unsupported++] = links[i];
  return 0;
}

/* Refuses two instances of d that share a GPU-instance id or a MIG device slot while both exist. */
static int mig_overlap(struct parser *p, const struct sim_dev *d) {
  for (int i = 0; i < d->nmigs; i++)
    for (int j = i + 1; j < d->nmigs; j++) {
      const struct sim_dev *a = &d->migs[i], *b = &d->migs[j];
      if ((a->gi != b->gi && a->slot != b->slot) || a->gone_at <= b->from_at || b->gone_at <= a->from_at)
        continue;
      p->line = 0;
      if (a->gi == b->gi)
        return perr(p, "device %u: GPU instance %u twice at once", d->index, a->gi);
      return perr(p, "device %u: MIG device slot %u twice at once", d->index, a->slot);
    }
  return 0;
}

static int device_line(struct parser *p, struct sim_dev *d, char **tok, int ntok, const char *rest);

/* "in GI LINE": a device line (at, fault, ...) for GPU instance GI of d. */
static int in_line(struct parser *p, struct sim_dev *d, char **tok, int ntok) {
  struct sim_dev *x = ntok >= 3 && isdigit((unsigned char)tok[1][0]) ? mig_find(d, (unsigned)atoi(tok[1])) : NULL;
  if (!x)
    return perr(p, "'in' wants the GPU-instance id of a mig_instance line before it");
  if (!strcmp(tok[2], "in") || !strcmp(tok[2], "mig_instance") || !strcmp(tok[2], "name"))
    return perr(p, "'in %s' is not for an instance", tok[2]);
  return device_line(p, x, tok + 2, ntok - 2, "");
}

/* "mig on|off|unsupported [from T]": d's MIG mode from 0, or the one it changes to at T (an
 * operator's nvidia-smi -mig, applied). */
static int mig_mode_line(struct parser *p, struct sim_dev *d, char **tok, int ntok) {
  int bad = 0, mode = !strcmp(tok[1], "on") ? 1 : !strcmp(tok[1], "off") ? 0 : -1;
  if (ntok == 2)
    d->mig = mode;
  else if (!strcmp(tok[2], "from"))
    d->mig_to = mode, d->mig_at = parse_time(p, tok[3], &bad);
  else
    return perr(p, "mig wants on|off|unsupported [from T]");
  return bad;
}

/* Applies one device-block line to device d. */
/* `xid CODE at T [gi G [ci C]]`, `ecc_event sbe|dbe at T`: an event the driver reports at T. */
static int event_line(struct parser *p, struct sim_dev *d, char **tok, int ntok) {
  int bad = 0, xid = !strcmp(tok[0], "xid");
  if (ntok < 4 || strcmp(tok[2], "at") || (ntok != 4 && ntok != 6 && ntok != 8))
    return perr(p, "%s wants %s at T", tok[0], xid ? "CODE [gi G [ci C]]" : "sbe|dbe");
  if (d->nevents == SIM_MAX_EVENTS)
    return perr(p, "more than %d events on one device", SIM_MAX_EVENTS);
  struct sim_event *e = &d->events[d->nevents];
  *e = (struct sim_event){.gi = 0xFFFFFFFFu, .ci = 0xFFFFFFFFu};
  e->t = parse_time(p, tok[3], &bad);
  if (xid) {
    e->type = 0x8; /* nvmlEventTypeXidCriticalError */
    e->data = (unsigned)atoi(tok[1]);
    if (e->data == 0)
      return perr(p, "bad Xid code '%s'", tok[1]);
  } else if (!strcmp(tok[1], "sbe") || !strcmp(tok[1], "dbe")) {
    e->type = tok[1][0] == 's' ? 0x1 : 0x2;
  } else {
    return perr(p, "ecc_event wants sbe or dbe");
  }
  for (int i = 4; i + 1 < ntok; i += 2) {
    if (!xid || (strcmp(tok[i], "gi") && strcmp(tok[i], "ci")))
      return perr(p, "unexpected '%s'", tok[i]);
    *(tok[i][0] == 'g' ? &e->gi : &e->ci) = (unsigned)atoi(tok[i + 1]);
  }
  if (bad)
    return -1;
  d->nevents++;
  return 0;
}

static int device_line(struct parser *p, struct sim_dev *d, char **tok, int ntok, const char *rest) {
  const char *k = tok[0];
  if (!strcmp(k, "xid") || !strcmp(k, "ecc_event"))
    return event_line(p, d, tok, ntok);
  int bad = 0;
  double v;
  if (!strcmp(k, "name")) {
    snprintf(d->name, sizeof d->name, "%s", rest);
  } else if (!strcmp(k, "vendor") && ntok == 2 && (!strcmp(tok[1], "amd") || !strcmp(tok[1], "nvidia"))) {
    d->amd = tok[1][0] == 'a';
  } else if (!strcmp(k, "gpu_metrics") && (ntok == 2 || (ntok == 3 && !strcmp(tok[2], "unfilled")))) {
    unsigned major, minor;
    if (sscanf(tok[1], "%u.%u", &major, &minor) != 2 || major != 1 || minor < 1 || minor > 9)
      return perr(p, "bad gpu_metrics version '%s' (1.1 .. 1.9)", tok[1]);
    d->metrics_content = (int)minor;
    d->metrics_unfilled = ntok == 3;
  } else if (!strcmp(k, "serial") && ntok == 2) {
    snprintf(d->serial, sizeof d->serial, "%s", tok[1]);
  } else if (!strcmp(k, "uuid") && ntok == 2) {
    snprintf(d->uuid, sizeof d->uuid, "%s", tok[1]);
  } else if (!strcmp(k, "pci") && ntok == 2) {
    snprintf(d->pci, sizeof d->pci, "%s", tok[1]);
  } else if (!strcmp(k, "cc") && ntok == 2) {
    if (sscanf(tok[1], "%d.%d", &d->cc_major, &d->cc_minor) != 2)
      return perr(p, "cc wants MAJOR.MINOR");
  } else if ((!strcmp(k, "memory") || !strcmp(k, "reserved")) && ntok == 2) {
    if (parse_num(tok[1], &v))
      return perr(p, "bad size '%s'", tok[1]);
    *(k[0] == 'm' ? &d->mem_total : &d->mem_reserved) = (unsigned long long)v;
  } else if (!strcmp(k, "power_limit") && ntok == 2) {
    if (parse_num(tok[1], &d->power_limit_w))
      return perr(p, "bad power limit");
  } else if (!strcmp(k, "max_clocks") && ntok == 3) {
    d->max_sm = (unsigned)atoi(tok[1]);
    d->max_mem = (unsigned)atoi(tok[2]);
  } else if (!strcmp(k, "nvlinks") && ntok == 2) {
    d->nvlinks = (unsigned)atoi(tok[1]);
    if (d->nvlinks > 36)
      return perr(p, "nvlinks wants 0 to 36");
  } else if (!strcmp(k, "gpm") && ntok == 2) {
    d->gpm = !strcmp(tok[1], "on");
  } else if (!strcmp(k, "gpm_unsupported")) {
    for (int i = 1; i < ntok && d->n_gpm_unsupported < 16; i++)
      d->gpm_unsupported[d->n_gpm_unsupported++] = (unsigned)atoi(tok[i]);
  } else if (!strcmp(k, "dcgm_unsupported")) {
    for (int i = 1; i < ntok && d->n_dcgm_unsupported < 8; i++)
      d->dcgm_unsupported[d->n_dcgm_unsupported++] = (unsigned)atoi(tok[i]);
  } else if (!strcmp(k, "mig") && (ntok == 2 || ntok == 4)) {
    return mig_mode_line(p, d, tok, ntok);
  } else if (!strcmp(k, "sample_hz") && ntok == 2) {
    if (parse_num(tok[1], &d->sample_hz) || d->sample_hz <= 0 || d->sample_hz > 1000)
      return perr(p, "bad sample_hz");
  } else if (!strcmp(k, "samples_when_idle") && ntok == 2) {
    d->samples_when_idle = !strcmp(tok[1], "yes");
  } else if (!strcmp(k, "energy_start") && ntok == 2) {
    if (parse_num(tok[1], &v))
      return perr(p, "bad energy_start");
    d->energy_start_mj = (unsigned long long)v;
  } else if (!strcmp(k, "period") && ntok == 2) {
    d->period = parse_time(p, tok[1], &bad);
  } else if (!strcmp(k, "lost") && ntok == 2) {
    d->lost_at = parse_time(p, tok[1], &bad);
  } else if (!strcmp(k, "gone") && ntok == 2) {
    d->gone_at = parse_time(p, tok[1], &bad);
  } else if (!strcmp(k, "fault") && ntok >= 3) {
    struct sim_fault f = {0};
    int c = parse_call(tok[1]);
    if (c < 0)
      return perr(p, "unknown call '%s'", tok[1]);
    f.call = (enum sim_call)c;
    if ((f.code = parse_code(tok[2])) <= 0)
      return perr(p, "unknown error code '%s'", tok[2]);
    if (parse_window(p, tok, ntok, 3, &f) || fault_add(p, d, &f))
      return -1;
  } else if (!strcmp(k, "slow") && ntok >= 3) {
    struct sim_fault f = {0};
    int c = parse_call(tok[1]);
    if (c < 0)
      return perr(p, "unknown call '%s'", tok[1]);
    f.call = (enum sim_call)c;
    if (parse_num(tok[2], &v) || v <= 0)
      return perr(p, "slow wants milliseconds");
    f.slow_ms = (int)v;
    if (parse_window(p, tok, ntok, 3, &f) || fault_add(p, d, &f))
      return -1;
  } else if (!strcmp(k, "at") && ntok >= 2) {
    double t = parse_time(p, tok[1], &bad);
    if (bad)
      return -1;
    struct sim_seg *g = seg_add(d, t);
    if (!g)
      return perr(p, "out of memory");
    for (int i = 2; i < ntok; i++) {
      char *eq = strchr(tok[i], '=');
      if (!eq)
        return perr(p, "expected key=value, got '%s'", tok[i]);
      *eq = 0;
      const char *val = eq + 1;
      if (!strcmp(tok[i], "procs")) {
        if (parse_procs(p, val, g))
          return -1;
        *eq = '=';
        continue;
      }
      int key;
      for (key = 0; key < K_NKEYS && strcmp(sim_key_names[key], tok[i]); key++)
        ;
      if (key == K_NKEYS)
        return perr(p, "unknown key '%s'", tok[i]);
      if (key == K_THROTTLE ? parse_throttle(p, val, &v) : parse_num(val, &v) ? perr(p, "bad value '%s'", val) : 0)
        return -1;
      g->v[key] = v;
      g->set[key] = 1;
      *eq = '=';
    }
  } else {
    return perr(p, "unknown or malformed line '%s'", k);
  }
  return bad;
}

/* One line of a device block: a MIG instance's, or the device's own. */
static int block_line(struct parser *p, struct sim_dev *d, char **tok, int ntok, const char *rest) {
  if (!strcmp(tok[0], "mig_instance"))
    return mig_instance_line(p, d, tok, ntok);
  if (!strcmp(tok[0], "in"))
    return in_line(p, d, tok, ntok);
  return device_line(p, d, tok, ntok, rest);
}

static int seg_cmp(const void *a, const void *b) {
  double x = ((const struct sim_seg *)a)->t, y = ((const struct sim_seg *)b)->t;
  return (x > y) - (x < y);
}

/* Sorts the timeline, makes sure it starts at 0 and lets each segment inherit what it leaves unset. */
static int finalize(struct parser *p, struct sim_dev *d) {
  if (!d->name[0])
    snprintf(d->name, sizeof d->name, "GPUSIM Generic GPU");
  if ((d->nsegs == 0 || d->segs[0].t > 0) && !seg_add(d, 0))
    return perr(p, "out of memory");
  qsort(d->segs, (size_t)d->nsegs, sizeof *d->segs, seg_cmp);
  double def[K_NKEYS] = {0};
  def[K_POWER] = 60;
  def[K_TEMP] = 35;
  def[K_SM_CLOCK] = d->max_sm;
  def[K_MEM_CLOCK] = d->max_mem;
  def[K_FAN] = 30;
  int gr_set = 0;
  for (int i = 0; i < d->nsegs; i++)
    gr_set |= d->segs[i].set[K_GR_ACTIVE];
  for (int i = 0; i < d->nsegs; i++) {
    struct sim_seg *g = &d->segs[i], *prev = i ? &d->segs[i - 1] : NULL;
    for (int k = 0; k < K_NKEYS; k++)
      if (!g->set[k])
        g->v[k] = prev ? prev->v[k] : def[k];
    if (!gr_set)
      g->v[K_GR_ACTIVE] = g->v[K_UTIL];
    if (!g->procs_set && prev) {
      g->nprocs = prev->nprocs;
      memcpy(g->procs, prev->procs, sizeof g->procs);
    }
    if (d->period > 0 && g->t >= d->period) {
      p->line = 0;
      return perr(p, "device %u: segment at %g is not inside its period %g", d->index, g->t, d->period);
    }
  }
  return 0;
}

/* An instance after its parent: its name and UUID as a real driver gives them, the parent's GPM
 * support and period, then its own timeline. */
static int finalize_mig(struct parser *p, struct sim_dev *d, struct sim_dev *x) {
  x->parent = d;
  x->gpm = d->gpm;
  if (!x->period)
    x->period = d->period;
  snprintf(x->name, sizeof x->name, "%.58s MIG %.31s", d->name, x->profile);
  if (!x->uuid[0])
    snprintf(x->uuid, sizeof x->uuid, "MIG-5a1c%04x-0000-4000-8000-%012x", d->index, x->gi);
  return finalize(p, x);
}

/* `dcgm hostengine` (a running nv-hostengine answers dcgmConnect_v2), `dcgm profiling busy`
 * (dcgmWatchFields answers DCGM_ST_IN_USE, as beside Nsight) or `dcgm profiling unsupported`
 * (DCGM_ST_PROFILING_NOT_SUPPORTED): what the simulated libdcgm.so.4 (dcgmsim.c) plays. */
static int dcgm_line(struct parser *p, struct sim_scn *s, char **tok, int ntok) {
  if (ntok == 2 && !strcmp(tok[1], "hostengine"))
    s->dcgm_hostengine = 1;
  else if (ntok == 3 && !strcmp(tok[1], "profiling") && !strcmp(tok[2], "busy"))
    s->dcgm_watch_code = -34; /* DCGM_ST_IN_USE */
  else if (ntok == 3 && !strcmp(tok[1], "profiling") && !strcmp(tok[2], "unsupported"))
    s->dcgm_watch_code = -36; /* DCGM_ST_PROFILING_NOT_SUPPORTED */
  else
    return perr(p, "dcgm wants hostengine, profiling busy or profiling unsupported");
  return 0;
}

int sim_scn_load(const char *path, struct sim_scn *s, char *err, size_t errlen) {
  struct parser p = {.path = path, .err = err, .errlen = errlen, .s = s};
  memset(s, 0, sizeof *s);
  snprintf(s->driver, sizeof s->driver, "550.54.15");
  s->cuda = 12040;
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
  }
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    p.line++;
    char *hash = strchr(line, '#');
    if (hash)
      *hash = 0;
    char *tok[64];
    int ntok = 0;
    char copy[1024];
    snprintf(copy, sizeof copy, "%s", line);
    for (char *save = NULL, *t = strtok_r(line, " \t\r\n", &save); t && ntok < 64; t = strtok_r(NULL, " \t\r\n", &save))
      tok[ntok++] = t;
    if (!ntok)
      continue;
    /* The rest of the line after the key, for free text such as a name. */
    char *rest = copy + (tok[0] - line) + strlen(tok[0]);
    while (*rest == ' ' || *rest == '\t')
      rest++;
    rest[strcspn(rest, "\r\n")] = 0;
    for (char *e = rest + strlen(rest); e > rest && (e[-1] == ' ' || e[-1] == '\t');)
      *--e = 0;
    if (!strcmp(tok[0], "driver") && ntok == 2) {
      snprintf(s->driver, sizeof s->driver, "%s", tok[1]);
    } else if (!strcmp(tok[0], "cuda") && ntok == 2) {
      unsigned major = 0, minor = 0;
      char end = 0;
      if (!strcmp(tok[1], "unsupported"))
        s->cuda = 0;
      else if (sscanf(tok[1], "%u.%u%c", &major, &minor, &end) == 2 && major >= 1 && major < 100 && minor < 100)
        s->cuda = (int)(major * 1000 + minor * 10);
      else {
        perr(&p, "cuda wants MAJOR.MINOR (12.4) or unsupported, not '%s'", tok[1]);
        goto fail;
      }
    } else if (!strcmp(tok[0], "dcgm")) {
      if (dcgm_line(&p, s, tok, ntok))
        goto fail;
    } else if (!strcmp(tok[0], "device") && ntok == 2) {
      if (parse_device_list(&p, tok[1]))
        goto fail;
    } else {
      if (!p.nsel) {
        perr(&p, "'%s' outside a device block", tok[0]);
        goto fail;
      }
      for (int i = 0; i < p.nsel; i++) {
        /* device_line may cut tokens at '='; it restores them for the next device. */
        if (block_line(&p, &s->dev[p.sel[i]], tok, ntok, rest))
          goto fail;
      }
    }
  }
  fclose(f);
  f = NULL;
  if (!s->ndev) {
    snprintf(err, errlen, "%s: no device", path);
    goto fail;
  }
  for (unsigned i = 0; i < s->ndev; i++) {
    if (finalize(&p, &s->dev[i]) || mig_overlap(&p, &s->dev[i]))
      goto fail;
    for (int k = 0; k < s->dev[i].nmigs; k++)
      if (finalize_mig(&p, &s->dev[i], &s->dev[i].migs[k]))
        goto fail;
  }
  return 0;

fail:
  if (f)
    fclose(f);
  sim_scn_free(s);
  return -1;
}

void sim_scn_free(struct sim_scn *s) {
  for (unsigned i = 0; s->dev && i < s->ndev; i++) {
    for (int k = 0; k < s->dev[i].nmigs; k++) {
      free(s->dev[i].migs[k].segs);
      free(s->dev[i].migs[k].faults);
    }
    free(s->dev[i].migs);
    free(s->dev[i].segs);
    free(s->dev[i].faults);
  }
  free(s->dev);
  memset(s, 0, sizeof *s);
}

static double fold(const struct sim_dev *d, double t) {
  if (t < 0)
    return 0;
  return d->period > 0 ? fmod(t, d->period) : t;
}

const struct sim_seg *sim_seg_at(const struct sim_dev *d, double t) {
  t = fold(d, t);
  int i = 0;
  while (i + 1 < d->nsegs && d->segs[i + 1].t <= t)
    i++;
  return &d->segs[i];
}

double sim_value(const struct sim_dev *d, enum sim_key k, double t) {
  return sim_seg_at(d, t)->v[k];
}

/* Integral of k over [0, x] within one period (or the whole timeline when not periodic); with bits,
 * of 1 where k's value as a mask has one of them. */
static double partial(const struct sim_dev *d, enum sim_key k, unsigned long long bits, double x) {
  double sum = 0;
  for (int i = 0; i < d->nsegs && d->segs[i].t < x; i++) {
    double end = i + 1 < d->nsegs ? d->segs[i + 1].t : INFINITY;
    double v = d->segs[i].v[k];
    if (bits)
      v = v >= 0 && ((unsigned long long)v & bits) ? 1 : 0;
    sum += v * ((end < x ? end : x) - d->segs[i].t);
  }
  return sum;
}

static double cumulative(const struct sim_dev *d, enum sim_key k, unsigned long long bits, double t) {
  if (t <= 0)
    return 0;
  if (d->period <= 0)
    return partial(d, k, bits, t);
  double whole = floor(t / d->period);
  return whole * partial(d, k, bits, d->period) + partial(d, k, bits, t - whole * d->period);
}

double sim_integral(const struct sim_dev *d, enum sim_key k, double t0, double t1) {
  return cumulative(d, k, 0, t1) - cumulative(d, k, 0, t0);
}

double sim_integral_bits(const struct sim_dev *d, enum sim_key k, unsigned long long bits, double t0, double t1) {
  return cumulative(d, k, bits, t1) - cumulative(d, k, bits, t0);
}

double sim_counter(const struct sim_dev *d, enum sim_key k, double t) {
  enum sim_key rate = k == K_ECC_SBE         ? K_ECC_SBE_RATE
                      : k == K_ECC_DBE       ? K_ECC_DBE_RATE
                      : k == K_PCIE_REPLAY   ? K_PCIE_REPLAY_RATE
                      : k == K_NVLINK_REPLAY ? K_NVLINK_REPLAY_RATE
                                             : K_NKEYS;
  double v = sim_value(d, k, t);
  if (rate != K_NKEYS && t > 0)
    v += sim_integral(d, rate, 0, t);
  return floor(v);
}

int sim_mig_alive(const struct sim_dev *x, double t) {
  return t >= x->from_at && t < x->gone_at;
}

int sim_mig_mode(const struct sim_dev *d, double t) {
  return t >= d->mig_at ? d->mig_to : d->mig;
}

void sim_scn_keep(struct sim_scn *s, int amd) {
  unsigned n = 0;
  for (unsigned i = 0; i < s->ndev; i++) {
    if (s->dev[i].amd != amd) {
      for (int k = 0; k < s->dev[i].nmigs; k++)
        free(s->dev[i].migs[k].segs), free(s->dev[i].migs[k].faults);
      free(s->dev[i].migs), free(s->dev[i].segs), free(s->dev[i].faults);
      continue;
    }
    if (n != i)
      s->dev[n] = s->dev[i];
    s->dev[n].index = n;
    for (int k = 0; k < s->dev[n].nmigs; k++)
      s->dev[n].migs[k].parent = &s->dev[n];
    n++;
  }
  s->ndev = n;
}

double sim_mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

double sim_clock_s(double t0_mono) {
  const char *clock = getenv("GPUSIM_CLOCK");
  if (clock && *clock) {
    FILE *f = fopen(clock, "r");
    double t = 0;
    if (f) {
      if (fscanf(f, "%lf", &t) != 1 || !isfinite(t) || t < 0)
        t = 0;
      fclose(f);
    }
    return t;
  }
  return sim_mono_s() - t0_mono;
}
