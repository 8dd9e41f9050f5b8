"""gpuscope.keras's callback in a real Keras `model.fit` under `gpuscope run`: every training batch
is a step with its samples, each epoch a mark and its metrics logged, and the run says it is
Keras's. A ctest skip (with the reason) where keras is not importable by GS_PYTHON;
test_client_frameworks.py drives the callback's hooks everywhere."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")

JOB = r"""
import numpy as np, keras, gpuscope
from gpuscope.keras import GpuscopeCallback
x = np.random.rand(256, 8).astype("float32")
y = np.random.randint(0, 2, 256)
m = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
m.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
m.fit(x, y, batch_size=32, epochs=2, callbacks=[GpuscopeCallback(batch_size=32)], verbose=0)
"""


def test_keras_callback_with_real_keras():
    p = subprocess.run([PYTHON, "-c", "import keras"], capture_output=True, text=True)
    if p.returncode != 0:
        skip_needs_pypi(f"keras is not importable by {PYTHON} ({p.stderr.strip().splitlines()[-1:]})")
    sb = Sandbox()
    try:
        job = os.path.join(sb.dir, "job.py")
        with open(job, "w") as f:
            f.write(JOB)
        sb.ok("run", "--name", "keras", "--", PYTHON, job, env={"PYTHONPATH": CLIENT})
        rows = sb.csv("show", "keras", "--metric", "step.samples", "--csv")
        check([float(r["value"]) for r in rows] == [32.0] * 16, f"{len(rows)} steps stored, want 16 of 32 samples")
        params = {r["key"]: r["value"] for r in sb.csv("show", "keras", "--params", "--csv")}
        check(params.get("framework") == "keras" and params.get("batch_size") == "32", f"params {params}")
        check(params.get("framework_version"), f"no framework_version in {params}")
        loss = [r for r in sb.csv("show", "keras", "--metric", "loss", "--csv") if r["source"] == "client"]
        check(len(loss) == 2, f"{len(loss)} epoch losses logged, want 2")
        marks = [e for e in sb.json("show", "keras", "--events", "--json") if e["kind"] == "mark"]
        check(len([e for e in marks if e["name"] == "epoch"]) == 2, f"epoch marks {marks}")
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
