"""gpuscope.hf — a Hugging Face transformers TrainerCallback that reports each optimizer step's
data wait and compute, the run's settings (framework and version, precision, batch size, loader
settings) and the Trainer's logged metrics.

    from gpuscope.hf import GpuscopeCallback
    trainer = transformers.Trainer(..., callbacks=[GpuscopeCallback()])

The Trainer fetches a step's batches between on_step_end and the next on_step_begin, so data wait is
that gap (with gradient accumulation, batches fetched inside the step count as compute). Evaluation
and checkpoints are not counted as data wait. Samples per step are per_device_train_batch_size x
gradient_accumulation_steps (this process). Never raises into training."""
import sys

import transformers as _tf
from transformers import TrainerCallback as _TrainerCallback

import gpuscope as _gs
from gpuscope import _core
from gpuscope._precision import from_hf as _from_hf, of_params as _of_params


def _send_precision(args, model):
    """TrainingArguments' bf16 / fp16 (AMP: mixed-bf16, mixed-fp16); neither: the model's parameter
    dtype (a model loaded with torch_dtype=torch.bfloat16 trains in bf16), else fp32, the Trainer's
    default."""
    cl = _core.default_client
    amp = _from_hf(args)
    if amp is not None:
        flag = "bf16" if amp == "mixed-bf16" else "fp16"
        cl.auto_precision(amp, f"transformers TrainingArguments {flag}=True", 2)
        return
    dt = _of_params(model) if model is not None else None
    if dt is not None:
        cl.auto_precision(dt, f"transformers: neither bf16 nor fp16 set, the model's parameters are {dt}", 2)
    else:
        cl.auto_precision("fp32", "transformers TrainingArguments: neither bf16 nor fp16 set", 2)


class GpuscopeCallback(_TrainerCallback):
    def __init__(self):
        self._timer = _core.StepTimer()
        self._samples = None

    def on_train_begin(self, args, state, control, **kwargs):
        try:
            bs = getattr(args, "per_device_train_batch_size", None)
            acc = getattr(args, "gradient_accumulation_steps", 1) or 1
            self._samples = bs * acc if bs else None
            kv = {"framework": "transformers", "framework_version": getattr(_tf, "__version__", ""),
                  "gradient_accumulation_steps": acc}
            if bs is not None:
                kv["batch_size"] = bs
            for src, key in (("dataloader_num_workers", "num_workers"), ("dataloader_pin_memory", "pin_memory")):
                if hasattr(args, src):
                    kv[key] = getattr(args, src)
            torch = sys.modules.get("torch")
            if torch is not None:
                kv["torch_version"] = getattr(torch, "__version__", "")
            _gs.param(**kv)
            _send_precision(args, kwargs.get("model"))
            self._timer.reset()
        except Exception:
            _core.default_client.count_error()

    def on_epoch_begin(self, args, state, control, **kwargs):
        self._timer.reset()

    def on_step_begin(self, args, state, control, **kwargs):
        self._timer.begin(self._samples)

    def on_step_end(self, args, state, control, **kwargs):
        self._timer.end()

    def on_evaluate(self, args, state, control, **kwargs):
        self._timer.reset()

    def on_save(self, args, state, control, **kwargs):
        self._timer.reset()

    def on_log(self, args, state, control, logs=None, **kwargs):
        try:
            for k, v in (logs or {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    _gs.log(k, v, getattr(state, "global_step", None))
        except Exception:
            _core.default_client.count_error()

    def on_train_end(self, args, state, control, **kwargs):
        _gs.flush()
