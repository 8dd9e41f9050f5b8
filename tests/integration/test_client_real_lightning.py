"""gpuscope.lightning's callback in a real PyTorch Lightning fit under `gpuscope run`: every training
batch is a step, and the run says it is Lightning's. A ctest skip (with the reason) where
lightning is not importable by GS_PYTHON; test_client_frameworks.py drives the callback's hooks
everywhere."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")

JOB = r"""
import torch, lightning.pytorch as pl, gpuscope
from gpuscope.lightning import GpuscopeCallback
class M(pl.LightningModule):
    def __init__(self):
        super().__init__(); self.l = torch.nn.Linear(8, 2)
    def training_step(self, b, i):
        return torch.nn.functional.cross_entropy(self.l(b[0]), b[1])
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
ds = torch.utils.data.TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
dl = torch.utils.data.DataLoader(ds, batch_size=32)
pl.Trainer(max_epochs=1, callbacks=[GpuscopeCallback()], logger=False, enable_checkpointing=False,
           enable_progress_bar=False, accelerator="cpu").fit(M(), dl)
"""


def test_lightning_callback_with_real_lightning():
    p = subprocess.run([PYTHON, "-c", "import lightning.pytorch"], capture_output=True, text=True)
    if p.returncode != 0:
        skip_needs_pypi(f"lightning is not importable by {PYTHON} ({p.stderr.strip().splitlines()[-1:]})")
    sb = Sandbox()
    try:
        job = os.path.join(sb.dir, "job.py")
        with open(job, "w") as f:
            f.write(JOB)
        sb.ok("run", "--name", "pl", "--", PYTHON, job, env={"PYTHONPATH": CLIENT})
        rows = sb.csv("show", "pl", "--metric", "step.n", "--csv")
        check(len(rows) == 8, f"{len(rows)} steps stored, want 8 (256 samples in batches of 32)")
        params = {r["key"]: r["value"] for r in sb.csv("show", "pl", "--params", "--csv")}
        check(params.get("framework") == "lightning" and params.get("batch_size") == "32", f"params {params}")
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
