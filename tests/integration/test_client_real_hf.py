"""gpuscope.hf's callback in a real transformers `Trainer.train()` under `gpuscope run` (a tiny
PyTorch model on the CPU): every optimizer step is a step, and the run carries the Trainer's batch
size and says it is transformers'. A ctest skip (with the reason) where transformers is not
importable by GS_PYTHON; test_client_frameworks.py drives the callback's hooks everywhere."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")

JOB = r"""
import inspect, sys, torch, transformers, gpuscope
from gpuscope.hf import GpuscopeCallback
class DS(torch.utils.data.Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return {"x": torch.randn(8), "labels": torch.tensor(i % 2)}
class M(torch.nn.Module):
    def __init__(self):
        super().__init__(); self.l = torch.nn.Linear(8, 2)
    def forward(self, x, labels=None):
        logits = self.l(x)
        return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}
kw = dict(output_dir=sys.argv[1], per_device_train_batch_size=8, num_train_epochs=1, logging_steps=2,
          report_to=[], save_strategy="no", disable_tqdm=True, dataloader_num_workers=0)
accepted = inspect.signature(transformers.TrainingArguments.__init__).parameters
kw.update({k: True for k in ("use_cpu", "no_cuda") if k in accepted})
args = transformers.TrainingArguments(**kw)
transformers.Trainer(model=M(), args=args, train_dataset=DS(), callbacks=[GpuscopeCallback()]).train()
"""


def test_hf_callback_with_real_transformers():
    p = subprocess.run([PYTHON, "-c", "import transformers, torch"], capture_output=True, text=True)
    if p.returncode != 0:
        skip_needs_pypi(f"transformers (with torch) is not importable by {PYTHON} ({p.stderr.strip().splitlines()[-1:]})")
    sb = Sandbox()
    try:
        job = os.path.join(sb.dir, "job.py")
        with open(job, "w") as f:
            f.write(JOB)
        sb.ok("run", "--name", "hf", "--", PYTHON, job, os.path.join(sb.dir, "out"), env={"PYTHONPATH": CLIENT})
        rows = sb.csv("show", "hf", "--metric", "step.n", "--csv")
        check(len(rows) == 8, f"{len(rows)} steps stored, want 8 (64 samples in batches of 8)")
        params = {r["key"]: r["value"] for r in sb.csv("show", "hf", "--params", "--csv")}
        check(params.get("framework") == "transformers" and params.get("batch_size") == "8", f"params {params}")
        loss = [r for r in sb.csv("show", "hf", "--metric", "loss", "--csv") if r["source"] == "client"]
        check(loss, "the Trainer's logged loss was not stored")
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
