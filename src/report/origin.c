/* report/origin: where a run came from, for people — the report's lines on it and compare's list of
 * what differs ("torch 2.3.0 → 2.4.0"). Read from the params its recorders left: the agent's git,
 * container and scheduler params (agent/provenance.c), the NVML collector's driver and CUDA
 * versions, the Python client's Python, torch, CUDA and cuDNN versions (docs/protocol.md). What a run
 * does not have is left out, never shown as a value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report_int.h"

/* The params that say where a run came from, in the order compare lists them, each with the name
 * people know it by. */
static const struct {
  const char *key, *label;
} origin[] = {
    {"git.commit", "git commit"},
    {"git.branch", "git branch"},
    {"git.dirty", "git dirty"},
    {"git.diff_sha256", "git diff (sha256)"},
    {"python.version", "python"},
    {"python.executable", "python executable"},
    {"torch.version", "torch"},
    {"torch.cuda", "torch CUDA"},
    {"torch.cudnn", "cuDNN"},
    {"nvml.driver_version", "NVIDIA driver"},
    {"nvml.cuda_driver_version", "driver CUDA"},
    {"container.runtime", "container"},
};

int rp_param_is_origin(const char *key) {
  if (!strcmp(key, "git.diff") || !strcmp(key, "git.diff_bytes"))
    return 1;
  for (size_t i = 0; i < sizeof origin / sizeof *origin; i++)
    if (!strcmp(origin[i].key, key))
      return 1;
  return 0;
}

const char *report_origin_label(const char *key) {
  for (size_t i = 0; i < sizeof origin / sizeof *origin; i++)
    if (!strcmp(origin[i].key, key))
      return origin[i].label;
  return key;
}

/* "LABEL VALUE" pieces after head, joined by sep; nothing when none of keys is there. */
static void pieces(FILE *out, const struct report_run *r, const char *head, const char *const *keys,
                   const char *const *labels, size_t n) {
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    const char *v = rp_param(r, keys[i]);
    if (!v || !*v)
      continue;
    fputs(any++ ? ", " : head, out);
    fputs(labels[i], out);
    gs_term_text(out, v, 0);
  }
  if (any)
    fputc('\n', out);
}

static void git_line(FILE *out, const struct report_run *r) {
  const char *commit = rp_param(r, "git.commit"), *branch = rp_param(r, "git.branch"),
             *dirty = rp_param(r, "git.dirty"), *sha = rp_param(r, "git.diff_sha256"),
             *bytes = rp_param(r, "git.diff_bytes");
  if (!commit)
    return;
  fputs("  git:      ", out);
  gs_term_text(out, commit, 0);
  if (branch) {
    fputs(" on ", out);
    gs_term_text(out, branch, 0);
  }
  if (dirty && !strcmp(dirty, "true")) {
    fputs(", dirty", out);
    if (sha) {
      fputs(" (diff ", out);
      gs_term_text(out, bytes ? bytes : "?", 0);
      fputs(" bytes, sha256 ", out);
      fprintf(out, "%.12s", sha);
      fputs(rp_param(r, "git.diff") ? "; kept: show RUN --params)" : ")", out);
    }
  } else if (dirty)
    fputs(", clean", out);
  fputc('\n', out);
}

void rp_origin_text(FILE *out, const struct report_run *r) {
  git_line(out, r);
  static const char *const py[] = {"python.version", "python.executable", "torch.version", "torch.cuda", "torch.cudnn"};
  static const char *const py_l[] = {"", "", "torch ", "CUDA ", "cuDNN "};
  const char *ver = rp_param(r, "python.version"), *exe = rp_param(r, "python.executable");
  if (ver || exe) {
    fputs("  python:   ", out);
    gs_term_text(out, ver ? ver : "", 0);
    if (exe) {
      fputs(ver ? " (" : "(", out);
      gs_term_text(out, exe, 0);
      fputc(')', out);
    }
    pieces(out, r, "; ", py + 2, py_l + 2, 3);
    if (!rp_param(r, "torch.version"))
      fputc('\n', out);
  }
  static const char *const drv[] = {"nvml.driver_version", "nvml.cuda_driver_version"};
  static const char *const drv_l[] = {"NVIDIA ", "CUDA "};
  pieces(out, r, "  driver:   ", drv, drv_l, 2);
}

void report_origin_differ(const struct runview *const *views, size_t n, void (*fn)(void *user, const char *key),
                          void *user) {
  for (size_t i = 0; i < sizeof origin / sizeof *origin; i++) {
    const char *v0 = n ? runview_param(views[0], origin[i].key) : NULL;
    int differs = 0;
    for (size_t j = 1; j < n && !differs; j++) {
      const char *v = runview_param(views[j], origin[i].key);
      differs = (!v0) != (!v) || (v0 && v && strcmp(v0, v));
    }
    if (differs)
      fn(user, origin[i].key);
  }
}

void rp_origin_differ(const struct report_run *runs, size_t n, void (*fn)(void *user, const char *key), void *user) {
  const struct runview **views = n ? malloc(n * sizeof *views) : NULL;
  if (!views)
    return; /* out of memory: nothing listed */
  for (size_t i = 0; i < n; i++)
    views[i] = &runs[i].view;
  report_origin_differ(views, n, fn, user);
  free(views);
}
