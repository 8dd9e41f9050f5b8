"""gpuscope._precision — the run's numeric precision as the client can tell it without the user
saying it, in one vocabulary (docs/protocol.md, the `precision` param): `fp32`, `fp16`, `bf16` (the
model's weights and math in that type), `mixed-fp16`, `mixed-bf16` (autocast / AMP: fp32 weights,
the matrix math in the half type), `fp64`; None when nothing tells. Sources, in the order they are
believed: what the framework was told (Lightning's `trainer.precision`, Hugging Face
`TrainingArguments`' `bf16` / `fp16`, Keras' global dtype policy), then in plain PyTorch autocast's
state inside a step and the dtype of a model's parameters. The user's own `param(precision=...)`
always wins (Client.auto_precision).

Standard library only: torch is never imported here, only read from an object handed in or from
sys.modules when the job imported it. Every function returns None rather than raise."""
import sys

# Lightning's names (2.x strings; 1.x's 16 and "bf16" meant AMP), Keras' policy names, torch dtypes.
_NAMES = {
    "32": "fp32", "32-true": "fp32", "fp32": "fp32", "float32": "fp32",
    "16": "mixed-fp16", "16-mixed": "mixed-fp16", "mixed_float16": "mixed-fp16", "mixed-fp16": "mixed-fp16",
    "bf16": "mixed-bf16", "bf16-mixed": "mixed-bf16", "mixed_bfloat16": "mixed-bf16", "mixed-bf16": "mixed-bf16",
    "16-true": "fp16", "float16": "fp16", "fp16": "fp16", "half": "fp16",
    "bf16-true": "bf16", "bfloat16": "bf16",
    "64": "fp64", "64-true": "fp64", "float64": "fp64", "fp64": "fp64", "double": "fp64",
}


def from_lightning(value):
    """trainer.precision ("16-mixed", "bf16-true", 32, ...) in the vocabulary, or None."""
    try:
        if value is None:
            return None
        s = str(value).strip().lower()
        return _NAMES.get(s)
    except Exception:
        return None


def from_keras(name):
    """A Keras dtype policy's name ("mixed_bfloat16", "float32", ...) in the vocabulary, or None."""
    try:
        s = str(name).strip().lower()
        return _NAMES.get(s)
    except Exception:
        return None


def from_hf(args):
    """TrainingArguments: bf16=True or fp16=True is AMP (mixed-bf16, mixed-fp16); None when neither
    is set (the model's own dtype then says it)."""
    try:
        if getattr(args, "bf16", False) is True:
            return "mixed-bf16"
        if getattr(args, "fp16", False) is True:
            return "mixed-fp16"
    except Exception:
        pass
    return None


def from_dtype(dtype):
    """A torch dtype (torch.float32, or its str) as fp32 / fp16 / bf16 / fp64, else None."""
    try:
        s = str(dtype)
        return _NAMES.get(s[6:] if s.startswith("torch.") else s)
    except Exception:
        return None


def of_params(model, limit=64):
    """The dtype most of a model's first `limit` floating parameters have (a torch nn.Module, or
    anything with parameters()), in the vocabulary, or None."""
    try:
        counts = {}
        for i, p in enumerate(model.parameters()):
            if i >= limit:
                break
            if getattr(p, "is_floating_point", lambda: False)():
                k = from_dtype(p.dtype)
                if k:
                    counts[k] = counts.get(k, 0) + 1
        return max(counts, key=counts.get) if counts else None
    except Exception:
        return None


def autocast_now(torch=None):
    """mixed-bf16 / mixed-fp16 when autocast is on in this thread now (CUDA first, then CPU), else
    None (off, or no torch imported). Reads torch 1.10-2.x's functions; never imports torch."""
    torch = torch if torch is not None else sys.modules.get("torch")
    if torch is None:
        return None
    try:
        new_api = hasattr(torch, "get_autocast_dtype")  # torch >= 2.4: one function per question
        for dev in ("cuda", "cpu"):
            if new_api:
                on, dt = torch.is_autocast_enabled(dev), (lambda d=dev: torch.get_autocast_dtype(d))
            elif dev == "cuda":
                on, dt = torch.is_autocast_enabled(), torch.get_autocast_gpu_dtype
            else:
                on, dt = torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype
            k = from_dtype(dt()) if on else None
            if k in ("bf16", "fp16"):
                return "mixed-" + k
    except Exception:
        pass
    return None
