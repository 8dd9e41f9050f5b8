/* report/devices: `gpuscope devices`' listing of what collect/nvml_devices.c found — each GPU in the
 * style of `nvidia-smi -L`, with its memory, compute capability, MIG mode, the metric families the
 * driver answers for it and its health now (ECC, remapped rows, replays), as a table or as JSON. A fact the driver did
 * not give is "?" (or "n/a") in the table and null in JSON. */
#include <stdio.h>

#include "collect/collect.h"
#include "core/core.h"
#include "report/report.h"

static const char *mig_text(const struct nvml_facts *f) {
  if (f->mig_current < 0)
    return NULL;
  if (f->mig_current == f->mig_pending)
    return f->mig_current ? "enabled" : "disabled";
  return f->mig_current ? "enabled (pending disable)" : "disabled (pending enable)";
}

static void json_str_or_null(FILE *out, const char *s) {
  if (s[0])
    gs_json_str(out, s);
  else
    fputs("null", out);
}

/* "mig_instances": [{"gpu_instance_id": 1, "compute_instance_id": 0, "profile": ..., ...}] */
static void write_json_migs(FILE *out, const struct nvml_facts *f) {
  fputs(", \"mig_instances\": [", out);
  for (int i = 0; i < f->n_mig; i++) {
    const struct nvml_mig_facts *m = &f->mig[i];
    fprintf(out, "%s{\"gpu_instance_id\": %u, \"compute_instance_id\": %u, \"profile\": ", i ? ", " : "", m->gi, m->ci);
    json_str_or_null(out, m->profile);
    fputs(", \"name\": ", out);
    json_str_or_null(out, m->name);
    fputs(", \"uuid\": ", out);
    json_str_or_null(out, m->uuid);
    if (m->mem_total >= 0)
      fprintf(out, ", \"memory_total_bytes\": %lld}", m->mem_total);
    else
      fputs(", \"memory_total_bytes\": null}", out);
  }
  fputc(']', out);
}

static void json_count(FILE *out, const char *key, long long v) {
  if (v >= 0)
    fprintf(out, ", \"%s\": %lld", key, v);
  else
    fprintf(out, ", \"%s\": null", key);
}

/* "health": {"healthy": ..., "why": ..., the counters (null: not answered)} */
static void write_json_health(FILE *out, const struct nvml_health_now *h) {
  fprintf(out, ", \"health\": {\"healthy\": %s, \"why\": ", h->unhealthy ? "false" : "true");
  json_str_or_null(out, h->why);
  json_count(out, "ecc_corrected", h->ecc_sbe);
  json_count(out, "ecc_uncorrected", h->ecc_dbe);
  json_count(out, "remapped_rows_correctable", h->remap_corr);
  json_count(out, "remapped_rows_uncorrectable", h->remap_unc);
  json_count(out, "remap_pending", h->remap_pending);
  json_count(out, "remap_failure", h->remap_failure);
  json_count(out, "retired_pages_sbe", h->retired_sbe);
  json_count(out, "retired_pages_dbe", h->retired_dbe);
  json_count(out, "retired_pages_pending", h->retired_pending);
  json_count(out, "pcie_replays", h->pcie_replays);
  json_count(out, "nvlink_errors", h->nvlink_errors);
  fputc('}', out);
}

static const char *count_text(long long v, char *buf, size_t n) {
  if (v < 0)
    return "n/a";
  snprintf(buf, n, "%lld", v);
  return buf;
}

/* "  health OK  ECC 0/0 (corrected/uncorrected)  remapped rows 0/0  PCIe replays 0  NVLink errors 0" */
static void write_text_health(FILE *out, const struct nvml_health_now *h) {
  char a[24], b[24], c[24], d[24], e[24], f[24];
  if (h->unhealthy)
    fprintf(out, "  health UNHEALTHY: %s\n", h->why);
  else
    fprintf(out,
            "  health OK  ECC %s/%s (corrected/uncorrected)  remapped rows %s/%s  PCIe replays %s  NVLink errors "
            "%s\n",
            count_text(h->ecc_sbe, a, sizeof a), count_text(h->ecc_dbe, b, sizeof b),
            count_text(h->remap_corr, c, sizeof c), count_text(h->remap_unc, d, sizeof d),
            count_text(h->pcie_replays, e, sizeof e), count_text(h->nvlink_errors, f, sizeof f));
}

static void write_json_device(FILE *out, unsigned index, const struct nvml_facts *f, int lost) {
  char cc[16];
  fprintf(out, "{\"index\": %u, \"name\": ", index);
  if (f->name[0])
    gs_json_str(out, f->name);
  else
    fputs("null", out);
  fputs(", \"uuid\": ", out);
  if (f->uuid[0])
    gs_json_str(out, f->uuid);
  else
    fputs("null", out);
  fputs(", \"pci_bus_id\": ", out);
  if (f->pci_bus_id[0])
    gs_json_str(out, f->pci_bus_id);
  else
    fputs("null", out);
  if (f->mem_total >= 0)
    fprintf(out, ", \"memory_total_bytes\": %lld", f->mem_total);
  else
    fputs(", \"memory_total_bytes\": null", out);
  fputs(", \"cc\": ", out);
  if (f->cc_major >= 0) {
    snprintf(cc, sizeof cc, "%d.%d", f->cc_major, f->cc_minor);
    gs_json_str(out, cc);
  } else {
    fputs("null", out);
  }
  fputs(", \"mig_mode\": ", out);
  if (mig_text(f))
    gs_json_str(out, mig_text(f));
  else
    fputs("null", out);
  fprintf(out, ", \"families\": {\"basic\": %s, \"samples\": %s, \"per_process\": %s, \"gpm\": %s}",
          f->fam_basic ? "true" : "false", f->fam_samples ? "true" : "false", f->fam_per_process ? "true" : "false",
          f->fam_gpm ? "true" : "false");
  if (f->mig_current == 1)
    write_json_migs(out, f);
  if (f->vendor[0]) { /* an AMD GPU (docs/amd.md) */
    fputs(", \"vendor\": ", out);
    gs_json_str(out, f->vendor);
    if (f->power_cap_w >= 0)
      fprintf(out, ", \"power_cap_w\": %.1f", f->power_cap_w);
    fputs(", \"serial\": ", out);
    json_str_or_null(out, f->serial);
    fputs(", \"gfx\": ", out);
    json_str_or_null(out, f->gfx);
  }
  if (lost)
    fputs(", \"lost\": true", out);
}

static void write_text_device(FILE *out, unsigned index, const struct nvml_facts *f, int lost) {
  /* The driver's text is bytes, not checked text: the terminal writer's escaping, as for the store's. */
  char mem[32], cc[16], name[4 * sizeof f->name], uuid[4 * sizeof f->uuid], bus[4 * sizeof f->pci_bus_id], t[400];
  gs_term_copy(name, sizeof name, f->name);
  gs_term_copy(uuid, sizeof uuid, f->uuid);
  gs_term_copy(bus, sizeof bus, f->pci_bus_id);
  fprintf(out, "GPU %u: %s (UUID: %s)%s\n", index, name[0] ? name : "?", uuid[0] ? uuid : "?", lost ? "  LOST" : "");
  if (lost)
    return;
  if (f->vendor[0]) { /* an AMD GPU: no CC or MIG; its power cap and gfx target instead */
    char cap[32] = "?";
    if (f->power_cap_w >= 0)
      snprintf(cap, sizeof cap, "%.0f W", f->power_cap_w);
    gs_term_copy(t, sizeof t, f->serial);
    fprintf(out, "  vendor %s  bus %s  memory %s  power cap %s  %s  serial %s  families:%s%s\n", f->vendor,
            bus[0] ? bus : "?", f->mem_total >= 0 ? gs_fmt_bytes((double)f->mem_total, mem, sizeof mem) : "?", cap,
            f->gfx[0] ? f->gfx : "gfx ?", t[0] ? t : "?", f->fam_basic ? " basic" : "",
            f->fam_per_process ? " per-process" : "");
    return;
  }
  if (f->cc_major >= 0)
    snprintf(cc, sizeof cc, "%d.%d", f->cc_major, f->cc_minor);
  fprintf(out, "  bus %s  memory %s  CC %s  MIG %s  families:%s%s%s%s%s\n", bus[0] ? bus : "?",
          f->mem_total >= 0 ? gs_fmt_bytes((double)f->mem_total, mem, sizeof mem) : "?", f->cc_major >= 0 ? cc : "?",
          mig_text(f) ? mig_text(f) : "n/a", f->fam_basic ? " basic" : "", f->fam_samples ? " samples" : "",
          f->fam_per_process ? " per-process" : "", f->fam_gpm ? " GPM" : "",
          f->fam_basic || f->fam_samples || f->fam_per_process || f->fam_gpm ? "" : " none");
  for (int i = 0; i < f->n_mig; i++) {
    const struct nvml_mig_facts *m = &f->mig[i];
    gs_term_copy(t, sizeof t, m->profile);
    gs_term_copy(uuid, sizeof uuid, m->uuid);
    fprintf(out, "  MIG %s  GPU instance %u, compute instance %u  memory %s  (UUID: %s)\n", t[0] ? t : "?", m->gi,
            m->ci, m->mem_total >= 0 ? gs_fmt_bytes((double)m->mem_total, mem, sizeof mem) : "?", uuid[0] ? uuid : "?");
  }
}

int report_devices_unhealthy(const struct nvml_devices *d) {
  int n = 0;
  for (unsigned i = 0; i < d->n; i++)
    n += d->dev[i].health.unhealthy != 0;
  return n;
}

int report_devices(FILE *out, const struct nvml_devices *d, int json) {
  if (json) {
    fputs("{\"driver_version\": ", out);
    if (d->driver[0])
      gs_json_str(out, d->driver);
    else
      fputs("null", out);
    fputs(", \"devices\": [", out);
  } else {
    unsigned nv = d->n - d->n_amd;
    if (nv || !d->n_amd)
      fprintf(out, "NVIDIA driver %s, %u GPU%s\n", d->driver[0] ? d->driver : "(version unknown)", nv,
              nv == 1 ? "" : "s");
    if (d->n_amd)
      fprintf(out, "AMD (ROCm SMI), %u GPU%s\n", d->n_amd, d->n_amd == 1 ? "" : "s");
  }
  for (unsigned i = 0; i < d->n; i++) {
    if (json) {
      fputs(i ? ",\n  " : "\n  ", out);
      write_json_device(out, i, &d->dev[i].facts, d->dev[i].lost);
      write_json_health(out, &d->dev[i].health);
      fputc('}', out);
    } else {
      write_text_device(out, i, &d->dev[i].facts, d->dev[i].lost);
      write_text_health(out, &d->dev[i].health);
    }
  }
  if (json)
    fprintf(out, "%s]}\n", d->n ? "\n" : "");
  return ferror(out) ? GS_EIO : GS_OK;
}
