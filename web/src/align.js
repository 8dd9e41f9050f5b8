// The compare page's alignments of one run's series: by time since its start, by step (the run's
// step.n series maps its times to step numbers) or by samples seen (steps times the run's samples
// per step), so runs of different batch sizes line up by the data they have seen. Pure functions
// (unit-tested with node --test); a point that cannot be placed is left out, never put at 0.
import { fin } from "./fmt.js";

// The step number at time t, linear between the step series' points; null outside it.
export function stepAt(steps, t) {
  if (!steps || !steps.t.length) return null;
  const T = steps.t, N = steps.mean;
  if (t < T[0] || t > T[T.length - 1]) return null;
  let lo = 0, hi = T.length - 1;
  while (hi - lo > 1) { const m = (lo + hi) >> 1; if (T[m] <= t) lo = m; else hi = m; }
  if (!fin(N[lo]) || !fin(N[hi])) return null;
  return T[hi] === T[lo] ? N[lo] : N[lo] + ((N[hi] - N[lo]) * (t - T[lo])) / (T[hi] - T[lo]);
}

// The mean samples per step of a run from its step.samples series (null when it has none).
export function samplesPerStep(samples) {
  if (!samples) return null;
  const v = samples.mean.filter(fin);
  return v.length ? v.reduce((a, b) => a + b, 0) / v.length : null;
}

// Whether series s carries its points' own steps (a metric logged with its step, as W&B's and
// MLflow's are, an imported run's: the API's "step"), which place it by step without a step series.
export function hasOwnSteps(s) {
  return !!(s && Array.isArray(s.step) && s.step.some(fin));
}

// The step of point k of s: its own where it has one, else the step series' at its time.
function stepOf(s, k, steps) {
  const own = Array.isArray(s.step) ? s.step[k] : null;
  return fin(own) ? own : stepAt(steps, s.t[k]);
}

// [x, y] of series s in mode "time" | "step" | "samples", or null when nothing can be placed. x only
// grows (a point at or before the last placed one is dropped), as uPlot needs.
export function align(s, mode, steps, perStep) {
  if (!s || !s.t.length) return null;
  if (mode === "time") return [s.t, s.mean];
  if (mode === "samples" && !fin(perStep)) return null;
  const x = [], y = [];
  s.t.forEach((t, k) => {
    let n = stepOf(s, k, steps);
    if (n === null) return;
    if (mode === "samples") n *= perStep;
    if (!x.length || n > x[x.length - 1]) x.push(n), y.push(s.mean[k]);
  });
  return x.length ? [x, y] : null;
}

// The alignment a comparison starts with: samples seen when the runs' batch sizes differ and every
// run counts samples, else step when every run has steps (a step series, or metrics that carry
// their own steps: ownStepsOf), else time.
export function defaultAlignment(paramsDiffer, stepsOf, perStepOf, ownStepsOf = []) {
  const batchDiffers = (paramsDiffer || []).some((p) => /batch/.test(p.key));
  if (batchDiffers && perStepOf.length && perStepOf.every(fin)) return "samples";
  if (stepsOf.length && stepsOf.every((s, i) => s || ownStepsOf[i])) return "step";
  return "time";
}
