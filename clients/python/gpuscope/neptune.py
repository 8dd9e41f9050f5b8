"""gpuscope.neptune — a Neptune training script (the 1.x client or neptune-scale), changed only in its
import line, reports to gpuscope.

    import gpuscope.neptune as neptune                   # was: import neptune
    run = neptune.init_run(project="team/mnist", name="baseline", tags=["cnn"])
    run["parameters"] = {"lr": 1e-3, "batch_size": 64}
    for epoch in range(epochs):
        run["train/loss"].append(loss, step=epoch)       # 1.x; .log(loss) in the older API
    run["sys/tags"].add("done")
    run.stop()

    from gpuscope.neptune import Run                     # was: from neptune_scale import Run
    run = Run(experiment_name="baseline")
    run.log_configs({"lr": 1e-3, "batch_size": 64})
    run.log_metrics(data={"train/loss": loss}, step=epoch)
    run.add_tags(["cnn"])
    run.close()

Under `gpuscope run -- python train.py` the run joins that run; outside it, it starts one
(gpuscope.start(name=...)) and stop()/close() ends it. What maps where: a field assigned a value
(run["parameters"] = {...}, run["x"] = 3) and log_configs -> params named by the field's path
("parameters/lr"; batch_size, num_workers, pin_memory and precision at any depth also as the bare
key the doctor reads); append/log/extend and log_metrics -> metrics named by the path ("train/loss"),
with their step (a value appended without one gets the field's own next step, 0, 1, 2, ..., as
Neptune numbers it); sys/tags add and add_tags -> params tag.NAME = true; files and uploads are
counted and said once (unkept()). Every call keeps the client's promises: standard library only,
never blocks, never raises."""
from . import _dropin as _d

__all__ = ["init_run", "Run", "unkept", "ANONYMOUS_API_TOKEN"]

ANONYMOUS_API_TOKEN = "ANONYMOUS"
# params the doctor reads by their bare name (docs/protocol.md), whatever namespace holds them
_DOCTOR_KEYS = {"batch_size", "num_workers", "pin_memory", "prefetch_factor", "persistent_workers", "precision"}


def _config(flat):
    """Sends a flat {path: value} as params, and the doctor's keys also bare."""
    kv = dict(flat)
    for k, v in flat.items():
        leaf = str(k).rsplit("/", 1)[-1]
        if leaf in _DOCTOR_KEYS:
            kv.setdefault(leaf, v)
    _d.params(kv)


class Handler:
    """run["a/b"]: a field (or a namespace) of the run."""

    def __init__(self, run, path):
        self._run, self._path = run, path

    def __getitem__(self, key):
        return Handler(self._run, f"{self._path}/{key}")

    def __setitem__(self, key, value):
        self._run[f"{self._path}/{key}"] = value

    def assign(self, value, wait=False):
        self._run[self._path] = value

    def append(self, value, step=None, timestamp=None, wait=False, **kw):
        """One value of a series field; a dict appends to each of its fields."""
        self._run._append(self._path, value, step)

    log = append  # the API before 1.0

    def extend(self, values, steps=None, timestamps=None, wait=False, **kw):
        try:
            values = list(values)
            steps = list(steps) if steps is not None else [None] * len(values)
        except Exception:
            _d.client().count_error()
            return
        for v, s in zip(values, steps):
            self._run._append(self._path, v, s)

    def add(self, values, wait=False):
        """sys/tags (and other string sets): each a tag."""
        if self._path == "sys/tags":
            _d.tags(values)
        else:
            _config({self._path: ",".join([values] if isinstance(values, str) else list(values))})

    def upload(self, *args, **kwargs):
        _d.unkept("neptune file uploads", "gpuscope.neptune")

    upload_files = upload
    track_files = upload

    def fetch(self):
        return self._run._fields.get(self._path)


class Run:
    """A Neptune run: the 1.x object (run["path"] = value, run["path"].append(v, step=), stop()) and
    neptune-scale's Run (log_configs, log_metrics(data=, step=), add_tags, close)."""

    def __init__(self, *args, name=None, experiment_name=None, run_id=None, project=None, tags=None, mode=None,
                 **kwargs):
        self._name = name or experiment_name or run_id
        self._started = not _d.client().enabled()
        self._closed = False
        _d.join(self._name)
        self._steps = {}  # a series field's next step, when values come without one
        self._fields = {}
        info = {"neptune.project": project, "neptune.name": name, "neptune.experiment_name": experiment_name,
                "neptune.run_id": run_id}
        _d.params({k: v for k, v in info.items() if v is not None})
        if tags:
            _d.tags(tags)

    # -- 1.x --

    def __getitem__(self, path):
        return Handler(self, str(path))

    def __setitem__(self, path, value):
        try:
            path = str(path)
            if isinstance(value, dict):
                flat = _d.flatten(value, path, "/")
            else:
                flat = {path: value}
            self._fields.update(flat)
            _config(flat)
        except Exception:
            _d.client().count_error()

    def _append(self, path, value, step):
        try:
            if isinstance(value, dict):
                for k, v in _d.flatten(value, path, "/").items():
                    self._append(k, v, step)
                return
            if not _d.is_number(value):
                _d.unkept(f"a {type(value).__name__} series value ({path})", "gpuscope.neptune")
                return
            if step is None:
                step = self._steps.get(path, 0)
            n = _d._core._whole(step)
            if n is not None:
                self._steps[path] = n + 1
            _d.client().log({path: value}, step=step)
        except Exception:
            _d.client().count_error()

    def stop(self, seconds=None):
        self.close()

    def sync(self, wait=True):
        _d.client().flush()

    wait = sync

    def get_url(self):
        return None

    # -- neptune-scale --

    def log_configs(self, data=None, flatten=True, cast_unsupported=True):
        try:
            _config(_d.flatten(dict(data or {}), "", "/"))
        except Exception:
            _d.client().count_error()

    def log_metrics(self, data=None, step=None, timestamp=None, preview=False, **kw):
        try:
            _d.client().log(dict(data or {}), step=step)
        except Exception:
            _d.client().count_error()

    def add_tags(self, tags, group_tags=False):
        _d.tags(tags)

    def remove_tags(self, tags, group_tags=False):
        pass

    def assign_files(self, *args, **kwargs):
        _d.unkept("neptune file uploads", "gpuscope.neptune")

    def close(self, timeout=None):
        if self._closed:
            return
        self._closed = True
        c = _d.client()
        c.flush()
        if self._started:
            c.stop()

    def wait_for_processing(self, timeout=None, verbose=True):
        _d.client().flush()

    wait_for_submission = wait_for_processing

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _init_run(*args, **kwargs):
    return Run(*args, **kwargs)


init_run = _d.guard(_init_run)
init_run.__doc__ = "Neptune 1.x's init_run(project=, name=, tags=, ...): a Run. Never raises."
unkept = _d.unkept
