"""gpuscope — the job's side of gpuscope: tell the agent about steps, metrics, params and marks.

    import gpuscope
    gpuscope.param(model="resnet50", precision="bf16")
    for x, y in gpuscope.watch(loader):          # times data wait and compute of every step
        with gpuscope.phase("h2d"):              # optional: an explicit phase inside the step
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = train_step(x, y)
        gpuscope.log("loss", loss_value, step)   # pass a Python number (a GPU tensor would sync)
    gpuscope.mark("epoch", 1)
    gpuscope.alert("loss is NaN", f"at step {step}", "ERROR")  # to the run's alert destinations

Under `gpuscope run -- python train.py` the agent sets GPUSCOPE_SOCKET; this module sends gs1 text
messages (docs/protocol.md) to it over a UNIX datagram socket. Without GPUSCOPE_SOCKET every call is
a cheap no-op but for a look, at most every 2 s, for the socket of an agent that `gpuscope attach`
started on this process later (GPUSCOPE_ATTACH=0: never; then watch() hands the loader's own iterator
back). gpuscope.start(name=...) runs that agent from inside the script (a notebook's first cell);
gpuscope.stop() ends its run.

Promises: standard library only, Python >= 3.8; never blocks (non-blocking socket); never raises
into the training loop (every error is swallowed and counted: dropped() what could not be sent,
rejected() what was refused, by cause); never adds a CUDA
synchronisation; messages are batched to at most 20 sends a second (more only when over 4 KiB of
messages pile up within 50 ms), flushed when a watched loop ends and at exit. Framework callbacks
load on first use: gpuscope.lightning, gpuscope.keras, gpuscope.hf (each a GpuscopeCallback).
A W&B, Neptune or MLflow script reports here by its import line alone: `import gpuscope.wandb as
wandb`, `import gpuscope.neptune as neptune`, `import gpuscope.mlflow as mlflow`.

The functions are bound methods of one default client (gpuscope._core.default_client, set up from
the environment at import), as the random module's are of its hidden Random instance.

Reading runs back: gpuscope.Store(url).runs(), .series(run, name), .history(run),
.metric_history(run, key), .params(run), .events(run), .notes(run), .log(run) — plain lists and
dicts read through the binary's --json (gpuscope._store;
loaded on first use).
"""
from . import _core

__all__ = ["log", "param", "mark", "alert", "watch", "phase", "flush", "dropped", "rejected", "enabled", "set_rank", "start",
           "stop"]
__version__ = "0.1.0"
PROTOCOL = _core.PROTOCOL

_inst = _core.default_client
log = _inst.log
param = _inst.param
mark = _inst.mark
alert = _inst.alert
watch = _inst.watch
flush = _inst.flush
dropped = _inst.dropped
rejected = _inst.rejected
enabled = _inst.enabled
set_rank = _inst.set_rank
start = _inst.start
stop = _inst.stop
phase = _core.phase


def __getattr__(name):
    """Loads a framework callback module on first use (gpuscope.lightning, .keras, .hf), a drop-in
    tracker module (gpuscope.wandb, .neptune, .mlflow), and the
    store reader (gpuscope.Store and its Table, StoreError, NotAvailable)."""
    if name in ("lightning", "keras", "hf", "wandb", "neptune", "mlflow"):
        import importlib
        return importlib.import_module("." + name, __name__)
    if name in ("Store", "Table", "Metric", "StoreError", "NotAvailable"):
        from . import _store
        return getattr(_store, name)
    raise AttributeError(f"module 'gpuscope' has no attribute '{name}'")
