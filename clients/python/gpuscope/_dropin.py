"""gpuscope._dropin — what the drop-in modules (gpuscope.wandb, .neptune, .mlflow) share: joining
or starting a run, params from nested dicts, tags, and saying once what gpuscope does not keep.

Everything here maps onto the client's own calls (param, log, mark, start, stop) and keeps their
promises: standard library only, never blocks, never raises into the training loop. What another
tracker keeps and gpuscope does not (media, tables, artifacts, models, files) is counted per kind
(unkept()), said once on stderr, and never an exception."""
import os
import sys

from . import _core

_said = set()
_unkept = {}


def client():
    return _core.default_client


def guard(fn):
    """fn(*args) wrapped so that nothing it raises reaches the job: an error is counted as a bad
    argument (gpuscope.rejected()["argument"]) and None returned."""
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception:
            client().count_error()
            return None
    wrapped.__name__ = getattr(fn, "__name__", "wrapped")
    wrapped.__doc__ = getattr(fn, "__doc__", None)
    return wrapped


def join(name=None, mode=None):
    """Under `gpuscope run` (or an attached agent) the job already reports to its run; otherwise the
    script starts one of its own (gpuscope.start(name=...)), unless mode is "disabled" or
    "offline" is asked to record nothing. Returns True when an agent records this process."""
    if mode == "disabled":
        return False
    c = client()
    if c.enabled():
        return True
    return c.start(name=name)


def run_id():
    """The gpuscope run's id where the agent said it (GPUSCOPE_RUN_ID), else None."""
    return os.environ.get("GPUSCOPE_RUN_ID") or None


def flatten(d, prefix="", sep="."):
    """A nested dict as one level, keys joined by sep ({"opt": {"lr": 1}} -> {"opt.lr": 1}), as
    W&B's UI shows a nested config and Neptune's namespaces (sep "/") name its fields."""
    out = {}
    for k, v in d.items():
        key = f"{prefix}{sep}{k}" if prefix else str(k)
        if isinstance(v, dict) and v:
            out.update(flatten(v, key, sep))
        else:
            out[key] = v
    return out


def param_key(k):
    """A param key the protocol carries: [A-Za-z0-9_./-], 1-128 (other characters become "_")."""
    s = "".join(c if c.isascii() and (c.isalnum() or c in "_./-") else "_" for c in str(k))[:128]
    return s or "_"


def params(kv):
    """Sends kv (a flat dict) as run params, each key made one the protocol carries."""
    c = client()
    out = {}
    for k, v in kv.items():
        key = param_key(k)
        if key.startswith("ingest."):  # the agent's own counters
            key = "_" + key
        out[key] = v if isinstance(v, (bool, int, float, str, type(None))) else repr(v)
    if out:
        c.param(**out)


def tags(names):
    """Each tag as the param tag.NAME = true, which `gpuscope runs --where 'tag.NAME = true'` finds."""
    if isinstance(names, str):
        names = [names]
    params({f"tag.{param_key(t)}": True for t in names or ()})


def unkept(kind=None, who="gpuscope"):
    """Counts one thing of kind gpuscope does not keep (an image, a table, an artifact) and says so
    once per kind on stderr; without kind, the counts so far ({kind: n})."""
    if kind is None:
        return dict(_unkept)
    _unkept[kind] = _unkept.get(kind, 0) + 1
    if kind not in _said:
        _said.add(kind)
        sys.stderr.write(f"{who}: {kind} not kept: gpuscope keeps params, metrics, tags and marks, not media, "
                         "tables, artifacts or files; further ones are only counted\n")
    return None


def say_once(what, text):
    if what not in _said:
        _said.add(what)
        sys.stderr.write(text)


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) or hasattr(v, "__float__") and not \
        isinstance(v, (str, bytes))
