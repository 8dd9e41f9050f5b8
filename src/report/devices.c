/* report/devices: `gpuscope devices`' listing of what collect/nvml_devices.c found — each GPU in the
 * style of `nvidia-smi -L`, with its memory, compute capability, MIG mode and the metric families the
 * driver answers for it, as a table or as JSON. A fact the driver did not give is "?" (or "n/a") in
 * the table and null in JSON. */
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
  if (lost)
    fputs(", \"lost\": true", out);
  fputc('}', out);
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

int report_devices(FILE *out, const struct nvml_devices *d, int json) {
  if (json) {
    fputs("{\"driver_version\": ", out);
    if (d->driver[0])
      gs_json_str(out, d->driver);
    else
      fputs("null", out);
    fputs(", \"devices\": [", out);
  } else {
    fprintf(out, "NVIDIA driver %s, %u GPU%s\n", d->driver[0] ? d->driver : "(version unknown)", d->n,
            d->n == 1 ? "" : "s");
  }
  for (unsigned i = 0; i < d->n; i++) {
    if (json) {
      fputs(i ? ",\n  " : "\n  ", out);
      write_json_device(out, i, &d->dev[i].facts, d->dev[i].lost);
    } else {
      write_text_device(out, i, &d->dev[i].facts, d->dev[i].lost);
    }
  }
  if (json)
    fprintf(out, "%s]}\n", d->n ? "\n" : "");
  return ferror(out) ? GS_EIO : GS_OK;
}
