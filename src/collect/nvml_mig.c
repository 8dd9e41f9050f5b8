/* collect/nvml_mig: a GPU's MIG instances — listed at open (their facts as params), re-listed every
 * nv_mig_every() and soon after an instance's calls answer as if it were gone (a created one gets
 * its series and an event, a destroyed one its series ended), the mode re-read when it changes, and
 * each instance's memory and GPM sampled per tick. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "collect/nvml_int.h"

/* One MIG instance's tick: its GPM, then its memory. What a MIG device does not answer is off after
 * its first NOT_SUPPORTED, with one note, as on a GPU. */
void nv_mig_tick(struct nvml_ctx *c, struct gpu *g, int k) {
  struct mig *mi = &g->migs[k];
  double v[3];
  nv_gpm_tick(c, g, k);
  if (g->lost || mi->off[C_MEMORY])
    return;
  nvmlReturn_t r = nv_memory_read(&c->api, mi->dev, &mi->mem_v1_only, v);
  if (!nv_verdict(c, g, mi, C_MEMORY, r))
    return;
  int64_t t = nv_stamp(c);
  nv_emit_mig(c, g, k, M_MIG_MEM_USED, t, v[0]);
  nv_emit_mig(c, g, k, M_MIG_MEM_FREE, t, v[1]);
  nv_emit_mig(c, g, k, M_MIG_MEM_TOTAL, t, v[2]);
}

/* Records one MIG instance's facts as params gpu.N.mig.G.* (none for a fact the driver does not give). */
static void mig_record_facts(struct nvml_ctx *c, unsigned index, const struct nvml_mig_facts *m) {
  char k[48], v[64];
  static const char *const keys[3] = {"profile", "name", "uuid"};
  const char *vals[3] = {m->profile, m->name, m->uuid};
  for (int i = 0; i < 3; i++) {
    snprintf(k, sizeof k, "mig.%u.%s", m->gi, keys[i]);
    if (vals[i][0])
      nv_param(c->sink, index, k, vals[i]);
  }
  snprintf(k, sizeof k, "mig.%u.ci", m->gi);
  snprintf(v, sizeof v, "%u", m->ci);
  nv_param(c->sink, index, k, v);
  if (m->mem_total >= 0) {
    snprintf(k, sizeof k, "mig.%u.mem_total_bytes", m->gi);
    snprintf(v, sizeof v, "%lld", m->mem_total);
    nv_param(c->sink, index, k, v);
  }
}

/* Writes the param gpu.N.mig.instances ("1,9": the GPU-instance ids; "" when none is left). */
static void mig_record_list(struct nvml_ctx *c, struct gpu *g) {
  char list[NVML_MAX_MIG * 12] = "";
  for (int k = 0; k < g->n_migs; k++) {
    size_t len = strlen(list);
    snprintf(list + len, sizeof list - len, "%s%u", len ? "," : "", g->migs[k].gi);
  }
  nv_param(c->sink, g->index, "mig.instances", list);
}

/* Adds one MIG instance of g (listed by nvml_api_facts or nvml_api_mig_list): its handle, labels
 * gpu=N,gi=G, params, and GPM where this library has nvmlGpmMigSampleGet. Only memory and GPM are
 * read from a MIG device; its other calls are off. With announce (an instance created while the
 * agent runs), an event mig_instance_created at t. Returns 0 (also when its handle cannot be had:
 * the next re-list tries again), or GS_ENOMEM. */
static int mig_add(struct nvml_ctx *c, struct gpu *g, const struct nvml_mig_facts *m, int announce, int64_t t) {
  const struct nvml_api *a = &c->api;
  if (g->n_migs == NVML_MAX_MIG || (!g->migs && !(g->migs = calloc(NVML_MAX_MIG, sizeof *g->migs))))
    return g->migs ? 0 : GS_ENOMEM;
  struct mig *mi = &g->migs[g->n_migs];
  memset(mi, 0, sizeof *mi);
  if (!(mi->dev = nvml_api_mig_handle(a, g->dev, m->slot)))
    return 0;
  mi->gi = m->gi, mi->slot = m->slot;
  snprintf(mi->profile, sizeof mi->profile, "%s", m->profile);
  snprintf(mi->uuid, sizeof mi->uuid, "%s", m->uuid);
  snprintf(mi->label, sizeof mi->label, "gpu=%u,gi=%u", g->index, mi->gi);
  for (int j = 0; j < N_MIG_METRICS; j++)
    mi->sid[j] = -1, mi->last_t[j] = INT64_MIN;
  memset(mi->off, 1, sizeof mi->off);
  mi->off[C_MEMORY] = !a->nvmlDeviceGetMemoryInfo && !a->nvmlDeviceGetMemoryInfo_v2;
  mi->off[C_GPM] = !a->nvmlGpmMigSampleGet || !a->nvmlGpmMetricsGet || !a->nvmlGpmSampleAlloc;
  mig_record_facts(c, g->index, m);
  g->n_migs++;
  if (announce) {
    char text[64];
    snprintf(text, sizeof text, "MIG instance GI %u (%.20s) created", mi->gi, mi->profile[0] ? mi->profile : "?");
    nv_event_on(c, t, "mig_instance_created", mi->profile, text, mi->label);
  }
  return !mi->off[C_GPM] ? nv_gpm_start(c, g, g->n_migs - 1) : 0;
}

/* Prepares the MIG instances nvml_api_facts listed on a GPU in MIG mode (mig_add). Returns 0, or
 * GS_ENOMEM. */
int nv_mig_start(struct nvml_ctx *c, struct gpu *g, const struct nvml_facts *f) {
  if (f->mig_unlisted)
    nv_note(c, "gpu%u: MIG instances not listed: this driver's library lacks the MIG device calls", g->index);
  for (int i = 0; i < f->n_mig; i++)
    if (mig_add(c, g, &f->mig[i], 0, 0))
      return GS_ENOMEM;
  if (g->n_migs)
    mig_record_list(c, g);
  return 0;
}

/* How often a MIG GPU's instances are re-listed: every 10 ticks, at least 1 s and at most 10 s apart. */
int64_t nv_mig_every(int64_t interval_ns) {
  int64_t e = 10 * interval_ns;
  return e < MIG_EVERY_MIN_NS ? MIG_EVERY_MIN_NS : e > MIG_EVERY_MAX_NS ? MIG_EVERY_MAX_NS : e;
}

/* Ends instance k of g: its series lose their latest value (no /metrics line; the points stay), an
 * event mig_instance_destroyed at t, and its GPM samples are freed. The instances after it move down. */
static void mig_gone(struct nvml_ctx *c, struct gpu *g, int k, int64_t t) {
  struct mig *mi = &g->migs[k];
  for (int j = 0; j < N_MIG_METRICS; j++)
    if (mi->sid[j] >= 0 && !nv_grow((void **)&c->pend_end, &c->cap_end, c->n_end + 1, sizeof *c->pend_end))
      c->pend_end[c->n_end++] = mi->sid[j];
  char text[64];
  snprintf(text, sizeof text, "MIG instance GI %u (%.20s) destroyed", mi->gi, mi->profile[0] ? mi->profile : "?");
  nv_event_on(c, t, "mig_instance_destroyed", mi->profile, text, mi->label);
  for (int s = 0; s < 2; s++)
    if (mi->gpm.s[s])
      c->api.nvmlGpmSampleFree(mi->gpm.s[s]);
  memmove(mi, mi + 1, (size_t)(g->n_migs - k - 1) * sizeof *mi);
  g->n_migs--;
}

static int mig_same(const struct mig *mi, const struct nvml_mig_facts *m) {
  return mi->gi == m->gi && !strcmp(mi->profile, m->profile) && !strcmp(mi->uuid, m->uuid);
}

/* Brings g's instances in line with a complete list f: the ones not listed are gone, the listed
 * ones not known are new (an id reused with another profile is both). */
static void mig_sync(struct nvml_ctx *c, struct gpu *g, const struct nvml_facts *f) {
  int64_t t = nv_stamp(c);
  int changed = 0, i;
  for (int k = g->n_migs - 1; k >= 0; k--) {
    struct mig *mi = &g->migs[k];
    for (i = 0; i < f->n_mig && !mig_same(mi, &f->mig[i]); i++)
      ;
    if (i == f->n_mig) {
      mig_gone(c, g, k, t);
      changed = 1;
    } else {
      mi->kept_bad = mi->suspect, mi->suspect = 0;
      mi->slot = f->mig[i].slot;
    }
  }
  for (i = 0; i < f->n_mig; i++) {
    int k;
    for (k = 0; k < g->n_migs && !mig_same(&g->migs[k], &f->mig[i]); k++)
      ;
    if (k == g->n_migs) {
      int n = g->n_migs;
      if (mig_add(c, g, &f->mig[i], 1, t))
        break;
      changed |= g->n_migs > n;
    }
  }
  if (changed)
    mig_record_list(c, g);
}

/* Re-reads g's MIG mode; a change is the param gpu.N.mig_mode again and, when the current mode
 * changed, an event mig_mode. Leaving MIG mode switches the GPU's own calls back on (those MIG mode
 * refused; one that the GPU refuses for another reason is noted once more). Returns 0, or -1 when
 * the GPU was lost. */
static int mig_mode_reread(struct nvml_ctx *c, struct gpu *g) {
  unsigned cur, pend;
  char v[48];
  nvmlReturn_t r =
      c->api.nvmlDeviceGetMigMode ? c->api.nvmlDeviceGetMigMode(g->dev, &cur, &pend) : NVML_ERROR_FUNCTION_NOT_FOUND;
  if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_GPU_NOT_FOUND)
    return nv_lose(c, g, r), -1;
  if (r != NVML_SUCCESS) {
    if (!g->noted[C_MIG])
      nv_note(c, "gpu%u: MIG mode: %s (retrying)", g->index, nvml_api_strerror(&c->api, r));
    g->noted[C_MIG] = 1;
    return 0; /* the mode last read holds */
  }
  int was = g->mig_mode;
  if ((int)(cur != 0) == was && (int)(pend != 0) == g->mig_pending)
    return 0;
  g->mig_mode = cur != 0, g->mig_pending = pend != 0;
  nv_param(c->sink, g->index, "mig_mode", nv_mig_mode_text(g->mig_mode, g->mig_pending, v, sizeof v));
  if (was != g->mig_mode)
    nv_event(c, nv_stamp(c), "mig_mode", v, g->mig_mode ? "MIG mode enabled" : "MIG mode disabled");
  if (was == 1 && !g->mig_mode) {
    /* What MIG mode refused answers again; the driver's samples from before are not this mode's. */
    nv_calls_switch_off_missing(&c->api, g, g->fam_gpm);
    g->seen_us[0] = g->seen_us[1] = g->pu_seen_us = (unsigned long long)nv_wall_us();
  }
  return 0;
}

/* On a GPU that has MIG mode: every nv_mig_every(), and at once (at most every MIG_AGAIN_NS) when
 * an instance's calls answered as if it were gone, re-reads the mode and the instance list and
 * follows them (mig_sync). An incomplete list changes nothing (one note); it is tried again. */
void nv_mig_follow(struct nvml_ctx *c, struct gpu *g) {
  int64_t now = gs_mono_ns();
  if (g->mig_mode < 0 || (now < g->mig_next_ns && (!g->mig_relist || now - g->mig_again_ns < MIG_AGAIN_NS)))
    return;
  if (g->mig_relist)
    g->mig_again_ns = now;
  g->mig_relist = 0;
  g->mig_next_ns = now + nv_mig_every(c->interval_ns);
  if (mig_mode_reread(c, g))
    return;
  struct nvml_facts f;
  f.n_mig = 0;
  if (g->mig_mode == 1) {
    nvmlReturn_t why, r = nvml_api_mig_list(&c->api, g->dev, &f, &why);
    if (r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_GPU_NOT_FOUND) {
      nv_lose(c, g, r);
      return;
    }
    if (r == NVML_ERROR_FUNCTION_NOT_FOUND)
      return; /* no MIG device calls: noted at open */
    if (r != NVML_SUCCESS || (r = why) != NVML_SUCCESS) {
      if (!g->noted[C_MIG])
        nv_note(c, "gpu%u: MIG instances: %s (retrying)", g->index, nvml_api_strerror(&c->api, r));
      g->noted[C_MIG] = 1;
      return;
    }
  }
  mig_sync(c, g, &f);
}
