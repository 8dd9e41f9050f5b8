// Unit tests of web/src/origin.js: the run page's "where it came from" rows.
import { test } from "node:test";
import assert from "node:assert/strict";
import { isOrigin, originRows } from "../../web/src/origin.js";

test("origin rows come in the report's order with people's names, scheduler ids last", () => {
  const p = { "sched.slurm_job_id": "42", "torch.version": "2.4.0", "git.commit": "3f2c", "batch_size": "64",
    "nvml.driver_version": "550.54.15", "python.version": "3.11.2" };
  assert.deepEqual(originRows(p), [["git commit", "3f2c"], ["python", "3.11.2"], ["torch", "2.4.0"],
    ["NVIDIA driver", "550.54.15"], ["slurm job id", "42"]]);
});

test("what a run does not have is no row, and the diff itself is never one", () => {
  assert.deepEqual(originRows({}), []);
  assert.deepEqual(originRows({ "git.diff": "diff --git a b", "torch.cuda": "" }), []);
  assert.ok(isOrigin("git.diff") && isOrigin("torch.cudnn") && isOrigin("sched.k8s_pod"));
  assert.ok(!isOrigin("batch_size") && !isOrigin("gpu.0.name"));
});
