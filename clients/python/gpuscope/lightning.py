"""gpuscope.lightning — a Lightning callback that reports each training step's data wait and compute
and the run's settings (framework and version, precision, batch size, loader settings).

    from gpuscope.lightning import GpuscopeCallback
    trainer = lightning.Trainer(callbacks=[GpuscopeCallback()])

Works with `lightning` (lightning.pytorch) and the older `pytorch_lightning` package. Data wait is
the time from one batch's end to the next one's start (Lightning fetches and moves the batch then);
time spent in validation is not counted as data wait. Never raises into training."""
try:
    import lightning.pytorch as _pl
except ImportError:  # the pre-2.0 package name
    import pytorch_lightning as _pl

import gpuscope as _gs
from gpuscope import _core
from gpuscope._precision import from_lightning as _precision_of, of_params as _of_params


def _precision(trainer):
    """trainer.precision (the plugin's on older releases) as Lightning names it, or None."""
    p = getattr(trainer, "precision", None)
    if p is None:
        p = getattr(getattr(trainer, "precision_plugin", None), "precision", None)
    return str(p) if p is not None else None


def _send_precision(trainer, pl_module):
    """The precision in the protocol's vocabulary (a name it does not know is sent as Lightning
    spells it), else the module's parameter dtype."""
    raw = _precision(trainer)
    if raw is not None:
        _core.default_client.auto_precision(_precision_of(raw) or raw, f"lightning trainer.precision={raw}", 2)
    else:
        _core.default_client.auto_precision(_of_params(pl_module), "lightning: the module's parameters", 1)


class GpuscopeCallback(_pl.Callback):
    """samples: samples per step (an int or a callable of the batch); default: the batch's first
    dimension."""

    def __init__(self, samples=None):
        super().__init__()
        self._timer = _core.StepTimer()
        self._samples = samples

    def on_train_start(self, trainer, pl_module):
        try:
            kv = {"framework": "lightning", "framework_version": getattr(_pl, "__version__", "")}
            for key in ("accumulate_grad_batches", "num_devices", "max_epochs"):
                if getattr(trainer, key, None) is not None:
                    kv[key] = getattr(trainer, key)
            loader = getattr(trainer, "train_dataloader", None)
            if loader is not None and getattr(loader, "batch_size", None) is not None:
                kv["batch_size"] = loader.batch_size
                _core.default_client.record_loader(loader)
            _gs.param(**kv)
            _send_precision(trainer, pl_module)
            self._timer.reset()
        except Exception:
            _core.default_client.count_error()

    def on_train_epoch_start(self, trainer, pl_module):
        self._timer.reset()

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx, *args):
        self._timer.begin(_core.count_samples(batch, self._samples))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
        self._timer.end()

    def on_validation_end(self, trainer, pl_module):
        self._timer.reset()

    def on_train_end(self, trainer, pl_module):
        _gs.flush()
