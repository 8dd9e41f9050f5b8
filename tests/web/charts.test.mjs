// Unit tests of web/src/charts.js's chartPlan: which charts a run page draws from its series.
import { test } from "node:test";
import assert from "node:assert/strict";
import { chartPlan, markName, spansOf } from "../../web/src/charts.js";

const series = (id, name, labels, count = 10, source = "nvml") => ({ id, name, labels, count, source, unit: "" });

test("a series without samples draws nothing (missing is not zero)", () => {
  const plan = chartPlan({ series: [series(1, "gpu.util_pct", "gpu=0", 0)], events: [] });
  assert.deepEqual(plan, []);
});

test("each GPU gets its line in the util and memory-controller charts", () => {
  const run = { series: [series(1, "gpu.util_pct", "gpu=0"), series(2, "gpu.util_pct", "gpu=1"),
    series(3, "gpu.mem_util_pct", "gpu=1")], events: [] };
  const plan = chartPlan(run);
  const util = plan.find((c) => c.id === "util");
  assert.deepEqual(util.lines.map((l) => l.label), ["GPU 0", "GPU 1"]);
  assert.ok(util.lines.every((l) => l.band));
});

test("a throttle span left open lasts to the run's end", () => {
  const run = { run: { duration_s: 10 }, events: [
    { kind: "throttle_start", labels: "gpu=0", name: "hw_slowdown", t: 2 },
    { kind: "throttle_stop", labels: "gpu=0", name: "hw_slowdown", t: 3 },
    { kind: "throttle_start", labels: "gpu=0", name: "sw_power_cap", t: 7 }] };
  assert.deepEqual(spansOf(run), [[2, 3, "hw_slowdown"], [7, 10, "sw_power_cap"]]);
});

test("an Xid's mark names its code and GPU; a job's mark its name", () => {
  assert.equal(markName({ kind: "xid", name: "79", labels: "gpu=3" }), "Xid 79 GPU 3");
  assert.equal(markName({ kind: "xid", name: "48", labels: "gpu=12,host=n1" }), "Xid 48 GPU 12");
  assert.equal(markName({ kind: "mark", name: "eval", labels: "" }), "eval");
});

test("a memory-controller chart for each GPU that reports it", () => {
  const run = { series: [series(1, "gpu.mem_util_pct", "gpu=0"), series(2, "gpu.mem_util_pct", "gpu=1", 0)], events: [] };
  const c = chartPlan(run).find((x) => x.id === "mem-util");
  assert.deepEqual(c.lines.map((l) => l.label), ["GPU 0"]);
});
