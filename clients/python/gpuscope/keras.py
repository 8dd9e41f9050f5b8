"""gpuscope.keras — a Keras callback that reports each training batch's data wait and compute, the
run's settings (framework and version, backend, precision policy, batch size) and each epoch's
metrics.

    from gpuscope.keras import GpuscopeCallback
    model.fit(ds, epochs=3, callbacks=[GpuscopeCallback(batch_size=64)])

Works with Keras 3 (`keras`) and tf.keras. Keras does not tell a callback the batch size, so pass it
to count samples. Data wait is the time from one batch's end to the next one's start; validation
time is not counted as data wait. Never raises into training."""
try:
    import keras as _keras
    _Callback = _keras.callbacks.Callback
except ImportError:
    from tensorflow import keras as _keras
    _Callback = _keras.callbacks.Callback

import gpuscope as _gs
from gpuscope import _core
from gpuscope._precision import from_keras as _from_keras


def _policy():
    for get in (lambda: _keras.mixed_precision.global_policy().name,
                lambda: _keras.config.dtype_policy().name):
        try:
            return str(get())
        except Exception:
            pass
    return None


class GpuscopeCallback(_Callback):
    def __init__(self, batch_size=None):
        super().__init__()
        self._timer = _core.StepTimer()
        self._batch_size = batch_size
        self._epoch = 0

    def on_train_begin(self, logs=None):
        try:
            kv = {"framework": "keras", "framework_version": getattr(_keras, "__version__", "")}
            try:
                kv["backend"] = _keras.backend.backend()
            except Exception:
                pass
            if self._batch_size is not None:
                kv["batch_size"] = self._batch_size
            _gs.param(**kv)
            pol = _policy()
            if pol is not None:  # a name the vocabulary lacks is sent as Keras spells it
                _core.default_client.auto_precision(_from_keras(pol) or pol, f"keras global dtype policy {pol}", 2)
            self._timer.reset()
        except Exception:
            _core.default_client.count_error()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        _gs.mark("epoch", epoch)
        self._timer.reset()

    def on_train_batch_begin(self, batch, logs=None):
        self._timer.begin(self._batch_size)

    def on_train_batch_end(self, batch, logs=None):
        self._timer.end()

    def on_test_end(self, logs=None):
        self._timer.reset()

    def on_epoch_end(self, epoch, logs=None):
        try:
            for k, v in (logs or {}).items():
                _gs.log(k, float(v), epoch)
        except Exception:
            _core.default_client.count_error()
        self._timer.reset()

    def on_train_end(self, logs=None):
        _gs.flush()
