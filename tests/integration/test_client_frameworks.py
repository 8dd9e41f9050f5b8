"""The framework callbacks (gpuscope.lightning, gpuscope.keras, gpuscope.hf) under the real
`gpuscope run`, each driven through the hook sequence its framework calls, with a minimal stand-in
for the framework's base class, so the callback's own logic (params, per-step timing, validation not
counted as data wait) is tested everywhere. The same callbacks with their real frameworks are
test_client_real_{lightning,keras,hf}.py, each a ctest skip where its framework is not installed."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")

STUBS = {
    "lightning/__init__.py": "",
    "lightning/pytorch/__init__.py": "__version__ = '9.9-stub'\nclass Callback:\n    pass\n",
    "keras/__init__.py": ("__version__ = '9.9-stub'\nfrom . import callbacks, mixed_precision, backend\n"),
    "keras/callbacks.py": "class Callback:\n    def __init__(self):\n        self.params = {}\n",
    "keras/mixed_precision.py": ("class _P:\n    name = 'mixed_bfloat16'\n"
                                 "def global_policy():\n    return _P()\n"),
    "keras/backend.py": "def backend():\n    return 'stub'\n",
    "transformers/__init__.py": "__version__ = '9.9-stub'\nclass TrainerCallback:\n    pass\n",
}

# Calls the hooks in the order each framework does: 6 steps of 20 ms data wait and 30 ms compute,
# with a 300 ms validation after step 3 that must not count as data wait.
DRIVE = r"""
import atexit, json, sys, time
import gpuscope
which = sys.argv[1]
own = {"data": [], "compute": []}  # the driver's own measure of each step's two phases
atexit.register(lambda: json.dump(own, open(sys.argv[2], "w")))
class Phase:
    def __init__(self, kind):
        self.kind = kind
    def __enter__(self):
        self.t = time.monotonic()
    def __exit__(self, *e):
        own[self.kind].append(time.monotonic() - self.t)
def work(data, compute):
    time.sleep(data)
    return compute
if which == "lightning":
    from gpuscope.lightning import GpuscopeCallback
    class Loader:
        batch_size = 16
    class Trainer:
        precision = "bf16-mixed"
        accumulate_grad_batches = 1
        train_dataloader = Loader()
    cb, tr = GpuscopeCallback(), Trainer()
    cb.on_train_start(tr, None)
    cb.on_train_epoch_start(tr, None)
    for i in range(6):
        with Phase("data"):
            time.sleep(0.02)
        cb.on_train_batch_start(tr, None, [[0] * 16], i)
        with Phase("compute"):
            time.sleep(0.03)
        cb.on_train_batch_end(tr, None, None, [[0] * 16], i)
        if i == 2:
            time.sleep(0.3)
            cb.on_validation_end(tr, None)
    cb.on_train_end(tr, None)
elif which == "keras":
    from gpuscope.keras import GpuscopeCallback
    cb = GpuscopeCallback(batch_size=16)
    cb.on_train_begin()
    cb.on_epoch_begin(0)
    for i in range(6):
        with Phase("data"):
            time.sleep(0.02)
        cb.on_train_batch_begin(i)
        with Phase("compute"):
            time.sleep(0.03)
        cb.on_train_batch_end(i, {"loss": 0.5})
        if i == 2:
            time.sleep(0.3)
            cb.on_test_end()
    cb.on_epoch_end(0, {"loss": 0.25, "accuracy": 0.9})
    cb.on_train_end()
else:
    from gpuscope.hf import GpuscopeCallback
    class Args:
        per_device_train_batch_size = 8
        gradient_accumulation_steps = 2
        bf16 = True
        fp16 = False
        dataloader_num_workers = 2
        dataloader_pin_memory = True
    class State:
        global_step = 0
    cb, a, s = GpuscopeCallback(), Args(), State()
    cb.on_train_begin(a, s, None)
    cb.on_epoch_begin(a, s, None)
    for i in range(6):
        with Phase("data"):
            time.sleep(0.02)
        cb.on_step_begin(a, s, None)
        with Phase("compute"):
            time.sleep(0.03)
        s.global_step += 1
        cb.on_step_end(a, s, None)
        cb.on_log(a, s, None, logs={"loss": 0.5, "learning_rate": 1e-4, "note": "x"})
        if i == 2:
            time.sleep(0.3)
            cb.on_evaluate(a, s, None)
    cb.on_train_end(a, s, None)
"""

WANT = {
    # precision in the protocol's vocabulary (docs/protocol.md), and where it came from
    "lightning": {"framework": "lightning", "precision": "mixed-bf16", "batch_size": "16",
                  "precision_source": "lightning trainer.precision=bf16-mixed"},
    "keras": {"framework": "keras", "precision": "mixed-bf16", "batch_size": "16", "backend": "stub",
              "precision_source": "keras global dtype policy mixed_bfloat16"},
    "hf": {"framework": "transformers", "precision": "mixed-bf16", "batch_size": "8", "gradient_accumulation_steps": "2",
           "num_workers": "2", "pin_memory": "true"},
}
SAMPLES = {"lightning": 16, "keras": 16, "hf": 16}


def drive_with_stub(which):
    sb = Sandbox()
    try:
        stubs = os.path.join(sb.dir, "stubs")
        for rel, text in STUBS.items():
            os.makedirs(os.path.dirname(os.path.join(stubs, rel)), exist_ok=True)
            with open(os.path.join(stubs, rel), "w") as f:
                f.write(text)
        drive = os.path.join(sb.dir, "drive.py")
        with open(drive, "w") as f:
            f.write(DRIVE)
        mine = os.path.join(sb.dir, "own.json")
        sb.ok("run", "--name", which, "--", PYTHON, drive, which, mine, env={"PYTHONPATH": CLIENT + os.pathsep + stubs})
        with open(mine) as f:
            own = json.load(f)
        params = {r["key"]: r["value"] for r in sb.csv("show", which, "--params", "--csv")}
        for k, v in WANT[which].items():
            check(params.get(k) == v, f"{which}: param {k} = {params.get(k)!r}, want {v!r}")
        check(params.get("framework_version") == "9.9-stub", f"{which}: framework_version {params}")
        rows = sb.csv("show", which, "--metric", "step.*", "--csv")
        col = lambda name: [float(r["value"]) for r in rows if r["name"] == name]  # noqa: E731
        data, compute, samples = col("step.data_s"), col("step.compute_s"), col("step.samples")
        check(len(data) == 6 and len(compute) == 6, f"{which}: {len(data)} steps stored, want 6")
        # Each phase as the driver measured it around its own sleep: a sleep is never shorter, and a
        # starved process makes any phase longer, so the callback's figure is held to the driver's, not
        # to a band. Counted validation (300 ms) would put one data wait 0.3 s over the driver's.
        check(len(own["data"]) == 6 and len(own["compute"]) == 6, f"{which}: the driver measured {own}")
        check(all(d >= 0.019 and abs(d - o) < 0.15 for d, o in zip(data, own["data"])),
              f"{which}: data waits {data}, the driver measured {own['data']} (validation must not count)")
        check(all(c >= 0.029 and abs(c - o) < 0.15 for c, o in zip(compute, own["compute"])),
              f"{which}: compute {compute}, the driver measured {own['compute']}")
        check(samples == [SAMPLES[which]] * 6, f"{which}: samples {samples}")
        if which != "lightning":
            loss = [r for r in sb.csv("show", which, "--metric", "loss", "--csv") if r["source"] == "client"]
            check(loss, f"{which}: the logged loss was not stored")
    finally:
        sb.close()


def test_lightning_callback_with_stub():
    drive_with_stub("lightning")


def test_keras_callback_with_stub():
    drive_with_stub("keras")


def test_hf_callback_with_stub():
    drive_with_stub("hf")


if __name__ == "__main__":
    run_tests(globals())
