"""gpuscope — the job's side of gpuscope: tell the agent about steps, metrics, params and marks.

    import gpuscope
    gpuscope.param(model="resnet50", precision="bf16")
    for x, y in gpuscope.watch(loader):          # times data wait and compute of every step
        with gpuscope.phase("h2d"):              # optional: an explicit phase inside the step
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
        loss = train_step(x, y)
        gpuscope.log("loss", loss_value, step)   # pass a Python number (a GPU tensor would sync)
    gpuscope.mark("epoch", 1)

Under `gpuscope run -- python train.py` the agent sets GPUSCOPE_SOCKET; this module sends gs1 text
messages (docs/protocol.md) to it over a UNIX datagram socket. Without GPUSCOPE_SOCKET every call is
a cheap no-op and watch() hands the loader's own iterator back.

Promises: standard library only, Python >= 3.8; never blocks (non-blocking socket); never raises
into the training loop (every error is swallowed and counted: dropped()); never adds a CUDA
synchronisation; messages are batched to at most 20 sends a second (more only when over 4 KiB of
messages pile up within 50 ms), flushed when a watched loop ends and at exit. Framework callbacks
load on first use: gpuscope.lightning, gpuscope.keras, gpuscope.hf (each a GpuscopeCallback).
"""
import atexit
import os
import socket
import sys
import threading
import time

__all__ = ["log", "param", "mark", "watch", "phase", "flush", "dropped", "enabled", "set_rank"]
__version__ = "0.1.0"
PROTOCOL = "gs1"

_MAX_DATAGRAM = 4096
_MAX_VALUE = 1024
_FLUSH_EVERY_S = 0.05
_FLUSH_BYTES = 3072
_mono = time.monotonic  # CLOCK_MONOTONIC on Linux: the agent's clock
_CTRL = {c: " " for c in list(range(32)) + [127]}


class _Channel:
    """The pending lines and the socket. One per process; a forked child starts with an empty one."""

    __slots__ = ("path", "sock", "lines", "nbytes", "last", "dropped", "lock", "params")

    def __init__(self, path):
        self.path = path
        self.sock = None
        self.lines = []
        self.nbytes = 0
        self.last = 0.0
        self.dropped = 0
        self.lock = threading.Lock()
        self.params = {}

    def add(self, line):
        with self.lock:
            self.lines.append(line)
            self.nbytes += len(line) + 1
            now = _mono()
            if now - self.last >= _FLUSH_EVERY_S or self.nbytes >= _FLUSH_BYTES:
                self._flush(now)

    def flush(self):
        with self.lock:
            self._flush(_mono())

    def _flush(self, now):
        self.last = now
        lines, self.lines, self.nbytes = self.lines, [], 0
        if not lines:
            return
        try:
            if self.sock is None:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                s.setblocking(False)
                self.sock = s
        except Exception:
            self.dropped += len(lines)
            return
        chunk, size = [], 0
        for line in lines:
            b = line.encode("utf-8", "replace")
            if len(b) > _MAX_DATAGRAM:
                self.dropped += 1
                continue
            if chunk and size + 1 + len(b) > _MAX_DATAGRAM:
                self._send(chunk)
                chunk, size = [], 0
            size += len(b) + (1 if chunk else 0)
            chunk.append(b)
        if chunk:
            self._send(chunk)

    def _send(self, chunk):
        try:
            self.sock.sendto(b"\n".join(chunk), self.path)
        except Exception:  # full (EAGAIN), agent gone (ENOENT, ECONNREFUSED), anything
            self.dropped += len(chunk)


_chan = _Channel(os.environ["GPUSCOPE_SOCKET"]) if os.environ.get("GPUSCOPE_SOCKET") else None
_current = None  # the phase times of the step in progress (a dict), or None
_step_n = 0  # steps numbered from 0 across every watched loop and callback of the process


def _env_rank():
    """This process's rank as the usual launchers give it (torchrun and accelerate: RANK; Slurm,
    Open MPI, MPICH), or 0."""
    for var in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"):
        v = os.environ.get(var, "")
        if v:
            return int(v) if v.isdigit() and 0 < int(v) <= 65535 else 0
    return 0


_rank = _env_rank()  # > 0: steps carry rank=N, so each rank keeps its own step series


def set_rank(rank):
    """Sets this process's rank in a distributed job when no launcher variable says it (for example
    under torch.multiprocessing.spawn). Rank 0 is the job's main loop; the agent keeps every other
    rank's steps apart, labelled rank=N. Never raises."""
    global _rank
    try:
        r = int(rank)
        _rank = r if 0 <= r <= 65535 else 0
    except Exception:
        _count_error()


def _after_fork_in_child():
    global _chan
    if _chan is not None:
        _chan = _Channel(_chan.path)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(lambda: flush())


def enabled():
    """True when this process reports to an agent (GPUSCOPE_SOCKET was set at import)."""
    return _chan is not None


def dropped():
    """Messages that did not reach the agent: socket full or gone, or a bad argument. Never raises."""
    return _chan.dropped if _chan is not None else 0


def flush():
    """Sends whatever is pending now. Never raises."""
    try:
        if _chan is not None:
            _chan.flush()
    except Exception:
        pass


def _count_error():
    try:
        _chan.dropped += 1
    except Exception:
        pass


def log(name, value, step=None):
    """Logs a metric value (a Python number). name: 1-128 of [A-Za-z0-9_./-]; step: int or None."""
    if _chan is None:
        return
    try:
        v = float(value)
        if step is None:
            _chan.add(f"gs1 metric {name} {v!r} t={_mono():.6f}")
        else:
            _chan.add(f"gs1 metric {name} {v!r} {int(step)} t={_mono():.6f}")
    except Exception:
        _count_error()


def _param_text(v):
    if v is True or v is False:
        s = "true" if v else "false"
    elif v is None:
        s = "none"
    else:
        s = str(v).translate(_CTRL)
    b = s.encode("utf-8", "replace")
    if len(b) > _MAX_VALUE:
        s = b[:_MAX_VALUE].decode("utf-8", "ignore")
    return s


def param(**kv):
    """Records run parameters: param(batch_size=64, precision="bf16"). Booleans are sent as
    true/false, None as none; a value repeated unchanged is not sent again."""
    if _chan is None:
        return
    for k, v in kv.items():
        try:
            s = _param_text(v)
            if _chan.params.get(k) != s:
                _chan.params[k] = s
                _chan.add(f"gs1 param {k} {s}")
        except Exception:
            _count_error()


def mark(name, value=None):
    """Records a marker event (epoch, eval, checkpoint) with an optional number."""
    if _chan is None:
        return
    try:
        if value is None:
            _chan.add(f"gs1 mark {name} t={_mono():.6f}")
        else:
            _chan.add(f"gs1 mark {name} {float(value)!r} t={_mono():.6f}")
    except Exception:
        _count_error()


_PHASE_NAMES = {}
_RESERVED = {"n", "t", "total", "samples", "rank"}


def _phase_name(name):
    """The name as the protocol allows it: [A-Za-z0-9_./-], at most 64 characters."""
    clean = _PHASE_NAMES.get(name)
    if clean is None:
        s = "".join(c if c.isascii() and (c.isalnum() or c in "_./-") else "_" for c in str(name))[:64] or "phase"
        clean = s + "_phase" if s in _RESERVED else s
        _PHASE_NAMES[name] = clean
    return clean


class phase:
    """`with gpuscope.phase("h2d"):` times an explicit phase of the current step. "h2d" and "data"
    go to the step's h2d= and data= fields, any other name to its own field (step.<name>_s); the
    step's compute is what is left. Outside a watched step it does nothing. Phases should not nest."""

    __slots__ = ("name", "t0")

    def __init__(self, name):
        try:
            self.name = _phase_name(name)
        except Exception:
            self.name = "phase"

    def __enter__(self):
        self.t0 = _mono()
        return self

    def __exit__(self, *exc):
        cur = _current
        if cur is not None:
            try:
                cur[self.name] = cur.get(self.name, 0.0) + (_mono() - self.t0)
            except Exception:
                pass
        return False


def _first_dim(x):
    s = getattr(x, "shape", None)
    if s is not None:
        return int(s[0]) if len(s) else None
    return len(x)


def _count(batch, samples):
    """Samples in a batch: samples itself (an int), samples(batch) (a callable), or inferred from
    the batch's first dimension (a tensor's shape[0]; a list/tuple's or dict's first element's)."""
    try:
        if samples is not None:
            return int(samples(batch) if callable(samples) else samples)
        s = getattr(batch, "shape", None)
        if s is not None:
            return int(s[0]) if len(s) else None
        if isinstance(batch, (list, tuple)) and batch:
            return _first_dim(batch[0])
        if isinstance(batch, dict) and batch:
            return _first_dim(next(iter(batch.values())))
    except Exception:
        pass
    return None


def _emit_step(data, span, phases, samples, t_end):
    """Sends one step: data wait, then the step's other phases; compute is span minus the phases.
    A step without a timed h2d phase carries no h2d= field: not measured is not zero."""
    global _step_n
    n = _step_n
    _step_n += 1
    try:
        h2d = phases.pop("h2d", None)
        data += phases.pop("data", 0.0)
        phases.pop("compute", None)  # compute is the rest of the step anyway
        compute = span - (h2d or 0.0) - sum(phases.values())
        if compute < 0:
            compute = 0.0
        line = f"gs1 step {n} data={data:.9f}"
        if h2d is not None:
            line += f" h2d={h2d:.9f}"
        line += f" compute={compute:.9f}"
        if samples is not None and samples >= 0:
            line += f" samples={samples}"
        for k, v in phases.items():
            line += f" {k}={v:.9f}"
        if _rank > 0:
            line += f" rank={_rank}"
        _chan.add(line + f" t={t_end:.6f}")
    except Exception:
        _count_error()


def _is_torch_loader(loader):
    return any(c.__name__ == "DataLoader" and c.__module__.startswith("torch.utils.data")
               for c in type(loader).__mro__)


def _record_loader(loader):
    """A torch DataLoader's settings as params (without importing torch)."""
    try:
        if not _is_torch_loader(loader):
            return
        kv = {}
        for key in ("batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers"):
            if hasattr(loader, key):
                kv[key] = getattr(loader, key)
        torch = sys.modules.get("torch")
        kv["framework"] = "pytorch"
        if torch is not None:
            kv["framework_version"] = getattr(torch, "__version__", "")
        param(**kv)
    except Exception:
        _count_error()


def _watch(loader, samples):
    global _current
    outer = _current
    step = None  # (t0, t1, phases, samples) of the step in progress
    t0 = _mono()
    try:
        it = iter(loader)
        while True:
            try:
                batch = next(it)
            except StopIteration:
                break
            t1 = _mono()
            phases = {}
            step = (t0, t1, phases, _count(batch, samples))
            _current = phases
            yield batch
            t2 = _mono()
            _current = outer
            _emit_step(t1 - t0, t2 - t1, phases, step[3], t2)
            step = None
            t0 = t2
    finally:
        _current = outer
        if step is not None:  # the loop left early (break, exception): the step ended now
            t2 = _mono()
            _emit_step(step[1] - step[0], t2 - step[1], step[2], step[3], t2)
        flush()


class _Watched:
    __slots__ = ("loader", "samples")

    def __init__(self, loader, samples):
        self.loader = loader
        self.samples = samples

    def __iter__(self):
        if _chan is None:
            return iter(self.loader)
        return _watch(self.loader, self.samples)

    def __len__(self):
        return len(self.loader)


def watch(loader, samples=None):
    """Wraps an iterable of batches: `for batch in gpuscope.watch(loader):`. Each step's data wait
    (the time next() takes) and compute (the rest of the iteration) are timed and sent; samples per
    step are samples (an int), samples(batch), or the batch's first dimension. For a torch
    DataLoader, batch_size, num_workers, pin_memory, prefetch_factor and persistent_workers are
    recorded as params. len() works when the loader has one."""
    if _chan is not None:
        _record_loader(loader)
    return _Watched(loader, samples)


class _StepTimer:
    """Steps timed from a framework's begin/end hooks: data wait is the gap since the previous
    step's end (or since reset()), compute the hooked span less explicit phases."""

    __slots__ = ("last_end", "t_begin", "phases", "outer", "samples")

    def __init__(self):
        self.last_end = None
        self.t_begin = None
        self.phases = None
        self.outer = None
        self.samples = None

    def reset(self):
        """Starts the data-wait clock now (train or epoch start, after eval or a checkpoint)."""
        self.last_end = _mono()

    def begin(self, samples=None):
        global _current
        if _chan is None:
            return
        self.t_begin = _mono()
        if self.last_end is None:
            self.last_end = self.t_begin
        self.samples = samples
        self.phases = {}
        self.outer = _current
        _current = self.phases

    def end(self):
        global _current
        if _chan is None or self.t_begin is None:
            return
        now = _mono()
        _current = self.outer
        _emit_step(self.t_begin - self.last_end, now - self.t_begin, self.phases, self.samples, now)
        self.last_end = now
        self.t_begin = None


def __getattr__(name):
    """Loads a framework callback module on first use (gpuscope.lightning, .keras, .hf)."""
    if name in ("lightning", "keras", "hf"):
        import importlib
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'gpuscope' has no attribute '{name}'")
