// Where a run came from, for the run page: its origin params (git; Python, torch, CUDA and cuDNN
// from the client; the NVIDIA driver and its CUDA from NVML; the container; the scheduler's ids) as
// rows of [label, value], in the order the report lists them. A pure function (unit-tested with
// node --test); what the run does not have is left out, never shown as a value.

export const ORIGIN = [
  ["git.commit", "git commit"], ["git.branch", "git branch"], ["git.dirty", "git dirty"],
  ["git.diff_sha256", "git diff (sha256)"], ["git.diff_bytes", "git diff (bytes)"],
  ["python.version", "python"], ["python.executable", "python executable"],
  ["torch.version", "torch"], ["torch.cuda", "torch CUDA"], ["torch.cudnn", "cuDNN"],
  ["nvml.driver_version", "NVIDIA driver"], ["nvml.cuda_driver_version", "driver CUDA"],
  ["container.runtime", "container"], ["container.orchestrator", "orchestrator"],
  ["container.cgroup", "cgroup"],
];

// The rows of the params p (key -> value) that say where the run came from, then its scheduler's
// ids (sched.*); the kept diff itself (git.diff) is not a row: the page shows it folded.
export function originRows(p) {
  const rows = ORIGIN.filter(([k]) => typeof p[k] === "string" && p[k] !== "").map(([k, label]) => [label, p[k]]);
  for (const [k, v] of Object.entries(p))
    if (k.startsWith("sched.") && v !== "") rows.push([k.slice(6).replace(/_/g, " "), v]);
  return rows;
}

// Whether a param is shown in the origin box rather than among the params.
export function isOrigin(k) {
  return k === "git.diff" || k.startsWith("sched.") || ORIGIN.some(([o]) => o === k);
}
