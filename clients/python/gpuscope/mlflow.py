"""gpuscope.mlflow — an MLflow tracking script, changed only in its import line, reports to gpuscope.

    import gpuscope.mlflow as mlflow                     # was: import mlflow
    mlflow.set_experiment("mnist")
    with mlflow.start_run(run_name="baseline"):
        mlflow.log_params({"lr": 1e-3, "batch_size": 64})
        for epoch in range(epochs):
            ...
            mlflow.log_metric("loss", loss, step=epoch)
        mlflow.set_tag("team", "vision")

Under `gpuscope run -- python train.py` start_run() joins that run; outside it, it starts one
(gpuscope.start(name=run_name)) and end_run() ends it. What maps where: log_param(s) -> params;
log_metric(s)(key, value, step=) -> metrics (a step left out stays out: missing is not zero, where
MLflow would write 0); set_tag(s)(k, v) -> params tag.k = v (`gpuscope runs --where 'tag.team =
vision'`); set_experiment(name) -> param mlflow.experiment. autolog() does nothing and says so once;
artifacts, models, figures, images, text, dicts and tables are counted and said once (unkept()),
never raised. Every call keeps the client's promises: standard library only, never blocks, never
raises. Reading the run back: gpuscope.Store().metric_history(run, key), as MlflowClient's
get_metric_history."""
from . import _dropin as _d

__all__ = ["start_run", "end_run", "active_run", "log_param", "log_params", "log_metric", "log_metrics", "set_tag",
           "set_tags", "set_experiment", "autolog", "unkept", "ActiveRun"]

_active = []  # the runs started and not ended, innermost last


class _Info:
    def __init__(self, run_id, run_name, experiment_id):
        self.run_id, self.run_name, self.experiment_id = run_id, run_name, experiment_id
        self.status = "RUNNING"


class ActiveRun:
    """What start_run() returns: .info.run_id, .info.run_name; a context manager that ends the run
    (status FAILED when the block raised)."""

    def __init__(self, run_name, experiment_id, started):
        self.info = _Info(_d.run_id() or "gpuscope", run_name, experiment_id)
        self.started = started

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *rest):
        end_run("FAILED" if exc_type else "FINISHED")
        return False


def _start_run(run_id=None, experiment_id=None, run_name=None, nested=False, tags=None, description=None, **kw):
    started = not _d.client().enabled()
    _d.join(run_name)
    r = ActiveRun(run_name, experiment_id, started)
    _active.append(r)
    info = {"mlflow.run_name": run_name, "mlflow.experiment_id": experiment_id, "mlflow.note": description}
    _d.params({k: v for k, v in info.items() if v is not None})
    if tags:
        set_tags(tags)
    return r


def _end_run(status="FINISHED"):
    if not _active:
        return
    r = _active.pop()
    r.info.status = status
    _d.params({"mlflow.status": status})
    c = _d.client()
    c.flush()
    if r.started and not _active:
        c.stop()


def _log_metrics(metrics, step=None, **kw):
    _d.client().log(dict(metrics), step=step)


def _set_tags(tags):
    _d.params({f"tag.{k}": v for k, v in dict(tags).items()})


def _autolog(*args, **kwargs):
    _d.say_once("mlflow.autolog", "gpuscope.mlflow: autolog() does nothing: log params and metrics with "
                "log_params() and log_metric(); gpuscope times the steps itself with gpuscope.watch(loader) "
                "or a framework callback (docs/protocol.md)\n")


def _unkept_fn(kind):
    return _d.guard(lambda *a, **k: _d.unkept(kind, "gpuscope.mlflow"))


start_run = _d.guard(_start_run)
start_run.__doc__ = "MLflow's start_run: joins the gpuscope run, or starts one. Returns an ActiveRun."
end_run = _d.guard(_end_run)
active_run = _d.guard(lambda: _active[-1] if _active else None)
log_param = _d.guard(lambda key, value, **kw: _d.params({key: value}))
log_params = _d.guard(lambda params, **kw: _d.params(dict(params)))
log_metric = _d.guard(lambda key, value, step=None, **kw: _d.client().log({key: value}, step=step))
log_metrics = _d.guard(_log_metrics)
set_tag = _d.guard(lambda key, value, **kw: _set_tags({key: value}))
set_tags = _d.guard(_set_tags)
set_experiment = _d.guard(lambda experiment_name=None, experiment_id=None: _d.params(
    {"mlflow.experiment": experiment_name or experiment_id}))
set_tracking_uri = _d.guard(lambda uri: None)
autolog = _d.guard(_autolog)
log_artifact = _unkept_fn("mlflow artifacts")
log_artifacts = _unkept_fn("mlflow artifacts")
log_figure = _unkept_fn("mlflow figures")
log_image = _unkept_fn("mlflow images")
log_text = _unkept_fn("mlflow text")
log_dict = _unkept_fn("mlflow dicts")
log_table = _unkept_fn("mlflow tables")
log_input = _unkept_fn("mlflow datasets")
unkept = _d.unkept


class _Flavor:
    """mlflow.pytorch, mlflow.sklearn, ...: log_model() and autolog() accepted, nothing kept."""

    def __init__(self, name):
        self.name = name

    def __getattr__(self, fn):
        if fn == "autolog":
            return autolog
        return _unkept_fn(f"mlflow.{self.name} models")


def __getattr__(name):
    """A model flavour module (mlflow.pytorch, mlflow.sklearn, ...)."""
    if name not in _FLAVORS:
        raise AttributeError(f"module 'gpuscope.mlflow' has no attribute '{name}'")
    return _Flavor(name)


_FLAVORS = {"pytorch", "sklearn", "tensorflow", "keras", "transformers", "lightgbm", "xgboost", "pyfunc", "onnx",
            "spark", "statsmodels", "catboost", "fastai", "prophet", "langchain", "openai", "lightning"}
