// Numbers as people read them: every figure the pages show goes through one of these, and an
// absent or non-finite value is "—", never 0. Pure functions (unit-tested with node --test).
export const fin = (v) => typeof v === "number" && isFinite(v);
export const DASH = "—";
// A verdict on the whole run (the doctor's doctor_is_verdict): no cost, no speed-up, not a finding.
export const isVerdict = (rule) => rule === "healthy" || rule === "insufficient_data";

// A note the NVML collector wrote about a metric a GPU (or MIG instance) does not have — "gpu0: fan
// speed: Not Supported", as nv_verdict words it with NVML's error string — is about the GPU, not
// something to act on: the run page lists such notes under its GPU table, not at the top of the
// page, and the runs page leaves them out. Its GPU's index, else null.
const GPU_NOTE = /^gpu(\d+)(?: mig \d+)?: .+: (?:Not Supported|Insufficient Permissions|Function Not Found)$/;
export function gpuNote(note) {
  const m = GPU_NOTE.exec(String(note));
  return m ? Number(m[1]) : null;
}
export function num(v, d = 1, unit = "") {
  if (!fin(v)) return DASH;
  return v.toFixed(d) + (unit ? " " + unit : "");
}
export function pct(share, d = 0) { return fin(share) ? (share * 100).toFixed(d) + " %" : DASH; }
export function pctv(v, d = 0) { return fin(v) ? v.toFixed(d) + " %" : DASH; }
export function bytes(v) {
  if (!fin(v)) return DASH;
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < u.length - 1) v /= 1024, i++;
  return v.toFixed(i ? 1 : 0) + " " + u[i];
}
export function rate(v) { // bytes per second, decimal like link speeds
  if (!fin(v)) return DASH;
  const u = ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"];
  let i = 0;
  while (Math.abs(v) >= 1000 && i < u.length - 1) v /= 1000, i++;
  return v.toFixed(i ? 2 : 0) + " " + u[i];
}
export function secs(v) {
  if (!fin(v)) return DASH;
  const a = Math.abs(v);
  if (a < 1e-3) return (v * 1e6).toFixed(0) + " µs";
  if (a < 1) return (v * 1e3).toFixed(a < 0.01 ? 2 : 1) + " ms";
  if (a < 120) return v.toFixed(a < 10 ? 2 : 1) + " s";
  if (a < 7200) return (v / 60).toFixed(1) + " min";
  if (a < 172800) return (v / 3600).toFixed(1) + " h";
  return (v / 86400).toFixed(1) + " d";
}
export function speed(v) { return fin(v) ? v.toFixed(2) + "×" : DASH; }
export function when(t) {
  if (!fin(t)) return DASH;
  const d = new Date(t * 1000), p = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}`;
}
export function sps(v) { return fin(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + " samples/s" : DASH; }

// An evidence value in its unit, as the API names it for each evidence member ("evidence_units",
// from the doctor's one table, doctor_evidence_unit): share, pct, bytes, bytes_s, s, cores, mhz, w,
// c, j, h, x, or "" for a count or plain number. An object (a value per GPU) shows each member in
// the same unit.
const UNIT = {
  share: (v) => pct(v, 1),
  pct: (v) => pctv(v, 1),
  bytes: bytes,
  bytes_s: rate,
  s: secs,
  cores: (v) => num(v, 2, "cores"),
  mhz: (v) => num(v, 0, "MHz"),
  w: (v) => num(v, 0, "W"),
  c: (v) => num(v, 0, "°C"),
  j: (v) => num(v, 0, "J"),
  h: (v) => num(v, 2, "h"),
  x: speed,
};
export function evidence(v, unit) {
  if (v === null || v === undefined) return DASH;
  if (typeof v === "object") return Object.entries(v).map(([k, x]) => k + ": " + evidence(x, unit)).join(", ");
  if (typeof v !== "number") return String(v);
  if (UNIT[unit]) return UNIT[unit](v);
  return Number.isInteger(v) ? String(v) : v.toPrecision(4);
}
