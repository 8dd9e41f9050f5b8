"""The scenario workloads' way to talk to gpuscope: the real client (clients/python/gpuscope) when it
is importable — the scenario harness puts it on PYTHONPATH — else a minimal stand-in that speaks
the same gs1 protocol (docs/protocol.md) over GPUSCOPE_SOCKET. Either way a workload calls
watch(loader), param(**kv) and mark(name, value), and without GPUSCOPE_SOCKET every call is a no-op.

The stand-in times a step as the real client does: `data` is the time spent inside the loader's
__next__, `compute` the rest of the iteration."""
import os
import socket
import time

try:  # the real client, when it is on PYTHONPATH
    import gpuscope as _real
    if not hasattr(_real, "watch"):
        _real = None
except ImportError:
    _real = None

REAL = _real is not None


class _Shim:
    def __init__(self):
        self.path = os.environ.get("GPUSCOPE_SOCKET")
        self.sock = None
        if self.path:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                self.sock.setblocking(False)
            except OSError:
                self.sock = None

    def send(self, line):
        if not self.sock:
            return
        try:
            self.sock.sendto(line.encode(), self.path)
        except OSError:
            pass  # a full socket drops the message: never block the job

    def param(self, **kv):
        for k, v in kv.items():
            self.send(f"gs1 param {k} {v}")

    def mark(self, name, value=None):
        self.send(f"gs1 mark {name}" + ("" if value is None else f" {value}") + f" t={time.monotonic():.6f}")

    def watch(self, loader):
        bs = getattr(loader, "batch_size", None)
        kv = {"batch_size": bs, "num_workers": getattr(loader, "num_workers", None),
              "pin_memory": getattr(loader, "pin_memory", None),
              "prefetch_factor": getattr(loader, "prefetch_factor", None),
              "persistent_workers": getattr(loader, "persistent_workers", None), "framework": "pytorch"}
        self.param(**{k: v for k, v in kv.items() if v is not None})
        n = 0
        t0 = time.monotonic()
        for batch in loader:
            t1 = time.monotonic()
            yield batch
            t2 = time.monotonic()
            self.send(f"gs1 step {n} data={t1 - t0:.6f} compute={t2 - t1:.6f} samples={bs or 1} t={t2:.6f}")
            n += 1
            t0 = t2


_shim = None if REAL else _Shim()


def watch(loader):
    return _real.watch(loader) if REAL else _shim.watch(loader)


def param(**kv):
    return _real.param(**kv) if REAL else _shim.param(**kv)


def mark(name, value=None):
    return _real.mark(name, value) if REAL else _shim.mark(name, value)
