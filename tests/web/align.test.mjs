// Unit tests of web/src/align.js: the compare page's alignments by time, step and samples seen.
import { test } from "node:test";
import assert from "node:assert/strict";
import { align, defaultAlignment, hasOwnSteps, samplesPerStep, stepAt } from "../../web/src/align.js";

const steps = { t: [0, 10, 20], mean: [0, 100, 200] };

test("the step at a time is linear between the step series' points, null outside", () => {
  assert.equal(stepAt(steps, 5), 50);
  assert.equal(stepAt(steps, 20), 200);
  assert.equal(stepAt(steps, 25), null);
  assert.equal(stepAt(null, 5), null);
});

test("by samples seen, a run of batch 64 lies four times further than one of batch 16", () => {
  const loss = { t: [10, 20], mean: [1.0, 0.5] };
  assert.deepEqual(align(loss, "samples", steps, 64), [[6400, 12800], [1.0, 0.5]]);
  assert.deepEqual(align(loss, "samples", steps, 16), [[1600, 3200], [1.0, 0.5]]);
  assert.deepEqual(align(loss, "step", steps, 16), [[100, 200], [1.0, 0.5]]);
  assert.deepEqual(align(loss, "time", null, null), [[10, 20], [1.0, 0.5]]);
});

test("what cannot be placed is left out, never put at zero", () => {
  assert.equal(align({ t: [30], mean: [1] }, "step", steps, 1), null); // after the last step
  assert.equal(align({ t: [10], mean: [1] }, "samples", steps, null), null); // no samples per step
  assert.equal(align({ t: [], mean: [] }, "time", null, null), null);
});

test("samples per step is the mean of the step.samples series; none without it", () => {
  assert.equal(samplesPerStep({ t: [1, 2, 3], mean: [32, 32, null] }), 32);
  assert.equal(samplesPerStep(null), null);
});

test("runs of different batch sizes start aligned by samples seen", () => {
  const s = { t: [0], mean: [0] };
  assert.equal(defaultAlignment([{ key: "batch_size" }], [s, s], [16, 64]), "samples");
  assert.equal(defaultAlignment([{ key: "lr" }], [s, s], [16, 16]), "step");
  assert.equal(defaultAlignment([{ key: "batch_size" }], [s, null], [16, null]), "time");
});

test("a metric that carries its own steps is placed by them, without a step series", () => {
  // an imported MLflow run: no step.n, each loss point with its step; one point without falls back
  const loss = { t: [5, 15, 18], mean: [1.0, 0.8, 0.6], step: [0, 10, null] };
  assert.equal(hasOwnSteps(loss), true);
  assert.equal(hasOwnSteps({ t: [1], mean: [1] }), false);
  assert.equal(hasOwnSteps({ t: [1], mean: [1], step: [null] }), false);
  assert.deepEqual(align(loss, "step", null, null), [[0, 10], [1.0, 0.8]]);
  assert.deepEqual(align(loss, "step", steps, null), [[0, 10, 180], [1.0, 0.8, 0.6]]);
  assert.deepEqual(align(loss, "samples", null, 32), [[0, 320], [1.0, 0.8]]);
});

test("a run with own steps but no step series still starts aligned by step", () => {
  const s = { t: [0], mean: [0] };
  assert.equal(defaultAlignment([], [s, null], [16, null], [false, true]), "step");
  assert.equal(defaultAlignment([], [s, null], [16, null], [false, false]), "time");
  assert.equal(defaultAlignment([], [s, null], [16, null]), "time");
});
