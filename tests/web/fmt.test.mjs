// Unit tests of web/src/fmt.js: every figure the pages show, and "—" for what was not measured.
import { test } from "node:test";
import assert from "node:assert/strict";
import { bytes, DASH, evidence, gpuNote, num, pct, pctv, rate, secs, speed, sps } from "../../web/src/fmt.js";

test("what was not measured is a dash, never zero", () => {
  for (const f of [num, pct, pctv, bytes, rate, secs, speed, sps])
    for (const v of [null, undefined, NaN, Infinity, "12"]) assert.equal(f(v), DASH, `${f.name}(${v})`);
  assert.equal(evidence(null, "share"), DASH);
});

test("zero is shown as zero", () => {
  assert.equal(pct(0), "0 %");
  assert.equal(bytes(0), "0 B");
  assert.equal(secs(0), "0 µs");
});

test("units scale", () => {
  assert.equal(bytes(1536), "1.5 KiB");
  assert.equal(bytes(80 * 1024 ** 3), "80.0 GiB");
  assert.equal(rate(2.5e9), "2.50 GB/s");
  assert.equal(secs(0.0421), "42.1 ms");
  assert.equal(secs(5400), "90.0 min");
  assert.equal(speed(2.6), "2.60×");
  assert.equal(sps(1108.3), "1108 samples/s");
});

test("evidence values are shown in the unit the API names for them", () => {
  assert.equal(evidence(0.87, "share"), "87.0 %");
  assert.equal(evidence(30, "pct"), "30.0 %");
  assert.equal(evidence(64 * 1024 ** 3, "bytes"), "64.0 GiB");
  assert.equal(evidence(1e9, "bytes_s"), "1.00 GB/s");
  assert.equal(evidence(0.25, "s"), "250.0 ms");
  assert.equal(evidence(700, "w"), "700 W");
  assert.equal(evidence(1.5, "x"), "1.50×");
  assert.equal(evidence(4, ""), "4");
  assert.equal(evidence(0.25, undefined), "0.2500"); // no unit named: the number as it is
  assert.equal(evidence({ "0": 10, "1": 20 }, "pct"), "0: 10.0 %, 1: 20.0 %");
});

test("a note about a metric a GPU does not have names its GPU; any other note is the user's", () => {
  assert.equal(gpuNote("gpu0: fan speed: Not Supported"), 0);
  assert.equal(gpuNote("gpu12 mig 3: SM activity (GPM): Insufficient Permissions"), 12);
  assert.equal(gpuNote("gpu1: clock event reasons: Function Not Found"), 1);
  for (const n of ["loader starved <b>x</b>", "gpu0: utilization: Unknown Error (retrying)", "nvml collector off: no driver",
    "gpu0: fan speed: Not Supported, said the user", "my gpu0: fan: Not Supported", ""])
    assert.equal(gpuNote(n), null, n);
});
