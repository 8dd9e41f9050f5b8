"""gpuscope.wandb — a W&B training script, changed only in its import line, reports to gpuscope.

    import gpuscope.wandb as wandb                       # was: import wandb
    run = wandb.init(project="mnist", name="baseline", config={"lr": 1e-3, "batch_size": 64})
    for step, (x, y) in enumerate(loader):
        ...
        wandb.log({"loss": loss.item(), "acc": acc})     # W&B's implicit step: 0, 1, 2, ...
    run.summary["best_acc"] = best
    wandb.finish()

Under `gpuscope run -- python train.py` init() joins that run; outside it, it starts one
(gpuscope.start(name=...)) and finish() ends it. What maps where: config -> params (a nested dict
flattened as W&B's UI shows it: "optimizer.lr"); log() -> metrics with W&B's step rules (an implicit
counter; commit=False accumulates into the current step; an explicit step= moves it forward, and a
step lower than the current one is refused as W&B refuses it); define_metric(name,
step_metric="epoch") logs name against that metric's value; tags -> params tag.NAME = true; project,
group, job_type, notes -> params wandb.*; summary[k] = v -> param summary.k; alert() -> gpuscope.alert:
the run's alert destinations get it through the rule `job` (docs/alerts.md). Media,
tables, histograms and artifacts are counted and said once on stderr (unkept()), never raised. Every
call keeps the client's promises: standard library only, never blocks, never raises. Reading the
run back: gpuscope.Store().history(run), as W&B's run.history()."""
import fnmatch
import os

from . import _dropin as _d

__all__ = ["init", "log", "finish", "define_metric", "alert", "watch", "save", "config", "summary", "run",
           "unkept", "Run", "AlertLevel"]


class AlertLevel:
    INFO = "INFO"
    WARN = "WARN"
    ERROR = "ERROR"


class _Unkept:
    """W&B's media and data types (Image, Table, Histogram, Artifact, ...): accepted, never kept."""

    kind = "media"

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):  # artifact.add_file(...), table.add_data(...): accepted, nothing kept
        return lambda *a, **k: None


def _unkept_type(name):
    return type(name, (_Unkept,), {"kind": f"wandb.{name}"})


for _n in ("Image", "Table", "Histogram", "Artifact", "Video", "Audio", "Html", "Object3D", "Molecule",
           "Plotly", "Graph"):
    globals()[_n] = _unkept_type(_n)


class Config(dict):
    """run.config: item and attribute access, update(); every value set is sent as a param (a
    nested dict flattened with dots)."""

    def __init__(self):
        super().__init__()

    def __setitem__(self, k, v):
        super().__setitem__(k, v)
        _d.params(_d.flatten({k: v}))

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None

    def __setattr__(self, k, v):
        self[k] = v

    def update(self, d=None, allow_val_change=None, **kw):
        try:
            items = dict(d or {}, **kw)
            if hasattr(d, "__dict__") and not isinstance(d, dict):  # an argparse Namespace
                items = dict(vars(d), **kw)
            for k, v in items.items():
                super().__setitem__(k, v)
            _d.params(_d.flatten(items))
        except Exception:
            _d.client().count_error()

    def setdefaults(self, d):
        self.update({k: v for k, v in d.items() if k not in self})


class Summary(dict):
    """run.summary: summary[k] = v (or update()) is sent as the param summary.k."""

    def __setitem__(self, k, v):
        super().__setitem__(k, v)
        _d.params({f"summary.{k}": v})

    def update(self, d=None, **kw):
        for k, v in dict(d or {}, **kw).items():
            self[k] = v


class Run:
    """What wandb.init() returns: id, name, project, config, summary, step, and log(), finish(),
    define_metric(), alert()."""

    def __init__(self, project=None, name=None, config=None, tags=None, notes=None, group=None, job_type=None,
                 mode=None, **ignored):
        self.project, self.name, self.mode = project, name, mode
        self.recording = _d.join(name, mode)
        self.id = _d.run_id() or f"gpuscope-{os.getpid()}"
        self.config = Config()
        self.summary = Summary()
        self.step = 0  # the step the next log() writes to
        self._step_metrics = {}  # define_metric: glob -> step metric
        self._last = {}  # the latest value of each metric (a step metric's current value)
        self._finished = mode == "disabled"  # W&B's mode="disabled": every call does nothing
        if self._finished:
            return
        info = {"wandb.project": project, "wandb.group": group, "wandb.job_type": job_type, "wandb.notes": notes,
                "wandb.name": name}
        _d.params({k: v for k, v in info.items() if v is not None})
        if config:
            self.config.update(config)
        if tags:
            _d.tags(tags)

    def log(self, data, step=None, commit=None, sync=None):
        """W&B's log: data's numbers at the current step (or step=), then the step moves on unless
        commit=False; nested dicts flattened ("train.loss"); media and tables counted, not kept."""
        if self._finished or not isinstance(data, dict):
            if not isinstance(data, dict):
                _d.client().count_error()
            return
        if step is not None:
            n = _d._core._whole(step)
            if n is None or n < self.step:
                _d.say_once("wandb.step", f"gpuscope.wandb: step {step!r} is lower than the current step {self.step} "
                            "(or no step): its data is refused, as W&B refuses it; further ones only counted\n")
                _d.client().count_error("step", len(data))
                return
            self.step = n
        flat, cur = {}, self.step
        for k, v in _d.flatten(data).items():
            if isinstance(v, _Unkept):
                _d.unkept(v.kind, "gpuscope.wandb")
            elif isinstance(v, (list, tuple, set)) or isinstance(v, (str, bytes)):
                _d.unkept(f"a {type(v).__name__} value ({k})", "gpuscope.wandb")
            else:
                flat[k] = v
        self._last.update(flat)
        by_step = {}
        for k, v in flat.items():
            sm = self._step_metric(k)
            s = _d._core._whole(self._last.get(sm)) if sm is not None else cur
            by_step.setdefault(s, {})[k] = v
        c = _d.client()
        for s, kv in by_step.items():
            c.log(kv, step=s)
        if commit is not False:
            self.step += 1

    def _step_metric(self, key):
        for glob, sm in self._step_metrics.items():
            if key != sm and fnmatch.fnmatchcase(key, glob):
                return sm
        return None

    def define_metric(self, name, step_metric=None, **ignored):
        """name (a glob: "val/*") is logged against step_metric's latest value instead of the step."""
        if step_metric:
            self._step_metrics[str(name)] = str(step_metric)

    def alert(self, title, text="", level=None, wait_duration=None):
        """W&B's alert: through the run's alert destinations (the rule `job`, in the default rules;
        docs/alerts.md) and kept by the run (gpuscope.alert); wait_duration as W&B's."""
        _d.client().alert(title, text, level or "INFO", wait_duration)

    def watch(self, *args, **kwargs):
        """W&B's gradient and parameter histograms: not kept (said once)."""
        _d.unkept("wandb.watch (gradient histograms)", "gpuscope.wandb")

    def save(self, *args, **kwargs):
        _d.unkept("wandb.save (files)", "gpuscope.wandb")

    def log_artifact(self, *args, **kwargs):
        _d.unkept("wandb.Artifact", "gpuscope.wandb")

    def use_artifact(self, *args, **kwargs):
        _d.unkept("wandb.Artifact", "gpuscope.wandb")
        return Artifact()  # noqa: F821 (made above)

    def finish(self, exit_code=None, quiet=None):
        """Sends what is pending; ends the run when init() started it (outside `gpuscope run`)."""
        if self._finished:
            return
        self._finished = True
        if exit_code is not None:
            _d.params({"wandb.exit_code": exit_code})
        c = _d.client()
        c.flush()
        c.stop()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *rest):
        self.finish(exit_code=1 if exc_type else 0)
        return False


run = None
config = Config()
summary = Summary()


def init(project=None, name=None, config=None, tags=None, notes=None, group=None, job_type=None, mode=None,
         **kwargs):
    """W&B's init: the run (wandb.run) this process reports to. Never raises."""
    global run
    g = globals()
    r = Run(project=project, name=name, config=config, tags=tags, notes=notes, group=group, job_type=job_type,
            mode=mode, **kwargs)
    run = r
    g["config"], g["summary"] = r.config, r.summary
    return r


def _current():
    return run if run is not None else init()


log = _d.guard(lambda data, step=None, commit=None, sync=None: _current().log(data, step=step, commit=commit))
log.__doc__ = Run.log.__doc__
define_metric = _d.guard(lambda name, step_metric=None, **kw: _current().define_metric(name, step_metric))
alert = _d.guard(lambda title, text="", level=None, wait_duration=None: _current().alert(title, text, level,
                                                                                      wait_duration))
watch = _d.guard(lambda *a, **k: _current().watch())
save = _d.guard(lambda *a, **k: _current().save())
log_artifact = _d.guard(lambda *a, **k: _current().log_artifact())
finish = _d.guard(lambda exit_code=None, quiet=None: run.finish(exit_code) if run is not None else None)
unkept = _d.unkept
login = _d.guard(lambda *a, **k: True)
init = _d.guard(init)
