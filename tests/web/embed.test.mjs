// Unit tests of web/src/embed.js: a self-contained page answers the API from its own data, with
// the server's filters (id, name/labels, from/to), and says plainly what it does not hold.
import { test } from "node:test";
import assert from "node:assert/strict";
import { embedApi } from "../../web/src/embed.js";

const run = { run: { id: "01aaa", name: "baseline" }, series: [], events: [] };
const EMB = {
  runs: { "01aaa": run },
  series: {
    "01aaa": [
      { id: 1, name: "gpu.util_pct", labels: "gpu=0", t: [0, 1, 2, 3], mean: [10, 20, null, 40], min: [5, 15, null, 35], max: [15, 25, null, 45] },
      { id: 2, name: "gpu.util_pct", labels: "gpu=1", t: [0, 1], mean: [50, 60] },
    ],
  },
};

test("a run by id or by name", () => {
  const api = embedApi(EMB);
  assert.equal(api("runs/01aaa"), run);
  assert.equal(api("runs/baseline"), run);
  assert.throws(() => api("runs/other"), /no run 'other' in this file/);
});

test("series filtered by id and time window; a gap stays a gap", () => {
  const api = embedApi(EMB);
  const got = api("runs/01aaa/series?id=1&from=1&to=2").series;
  assert.equal(got.length, 1);
  assert.deepEqual(got[0].t, [1, 2]);
  assert.deepEqual(got[0].mean, [20, null]);
  assert.deepEqual(got[0].min, [15, null]);
});

test("series by name and labels", () => {
  const api = embedApi(EMB);
  const got = api("runs/01aaa/series?name=gpu.util_pct&labels=gpu%3D1").series;
  assert.deepEqual(got.map((s) => s.id), [2]);
  assert.equal(got[0].min, undefined); // a series without a band has none
});

test("another page than the file's is an error, not an empty answer", () => {
  assert.throws(() => embedApi(EMB)("runs"), /one page only/);
});
