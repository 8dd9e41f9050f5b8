"""gpuscope.Store: reading runs back from Python — a notebook's way into the store.

    import gpuscope
    st = gpuscope.Store("sqlite:///home/a/.local/share/gpuscope/gpuscope.db")   # or None: the default
    runs = st.runs()                                  # [{"id": ..., "name": ..., "status": ...}, ...]
    loss = st.series(runs[0]["id"], "loss")           # [{"t_s": 0.5, "value": 2.31, "step": 100, ...}, ...]
    st.history("last")                                # W&B's run.history(): one row a step, one column a metric
    st.metric_history("last", "loss")                 # MLflow's get_metric_history: [Metric(key, value, ...)]
    st.params("last")                                 # {"batch_size": "64", "git.commit": "3f2c...", ...}
    loss.to_pandas()                                  # a DataFrame, when pandas is installed

Everything is read through the gpuscope binary's --json output (`runs --json`, `show RUN --json`,
`show --params/--events/--notes --json`, `log`), the one decoder of the store the project has: this
module parses JSON, never the store. The binary is found as gpuscope.start() finds it: GPUSCOPE_BIN,
else gpuscope on PATH. Answers are plain lists of dicts (a Table: a list with to_pandas()) and dicts.
A command this gpuscope does not have (`log` before it had one, `runs --where`) raises
NotAvailable, saying so. Standard library only."""
import json
import subprocess

from . import _attach

__all__ = ["Store", "Table", "Metric", "StoreError", "NotAvailable"]


class StoreError(RuntimeError):
    """The binary refused: its one-line message, and its exit code (2 bad input or unknown run, 3 the
    store cannot be opened; README "Exit codes")."""

    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


class NotAvailable(StoreError):
    """What was asked needs a command or option this gpuscope binary does not have."""


class Table(list):
    """A list of dicts (one per row), with to_pandas()."""

    def to_pandas(self):
        """The rows as a pandas DataFrame (columns: the dicts' keys). Raises ImportError when pandas
        is not installed."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("to_pandas() needs pandas, which is not installed (the rows are a plain list of "
                              "dicts without it)") from e
        return pandas.DataFrame(list(self))


class Metric:
    """One value of a metric, as MLflow's mlflow.entities.Metric has it: key, value, timestamp (Unix
    milliseconds), step (None when it was logged without one)."""

    __slots__ = ("key", "value", "timestamp", "step")

    def __init__(self, key, value, timestamp, step):
        self.key, self.value, self.timestamp, self.step = key, value, timestamp, step

    def __eq__(self, other):
        return isinstance(other, Metric) and all(getattr(self, a) == getattr(other, a) for a in self.__slots__)

    def __repr__(self):
        return f"<Metric: key={self.key!r}, value={self.value!r}, timestamp={self.timestamp!r}, step={self.step!r}>"


def _glob_literal(name):
    """name as a glob (the binary's --metric) that matches only itself."""
    return "".join(f"[{c}]" if c in "*?[]\\" else c for c in str(name))


class Store:
    """A gpuscope store by URL (sqlite:///path, a bare path, postgresql://user@host/db; None: the
    binary's default, $GPUSCOPE_STORE or the data folder's). binary: the gpuscope executable
    (default: GPUSCOPE_BIN, else PATH)."""

    def __init__(self, url=None, binary=None):
        self.url = url
        self.binary = binary or _attach.find_binary()
        if not self.binary:
            raise NotAvailable("the gpuscope binary was not found (PATH or GPUSCOPE_BIN)", None)

    def _run(self, *args):
        cmd = [self.binary, *args] + (["--store", str(self.url)] if self.url is not None else [])
        p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if p.returncode != 0:
            msg = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}"
            if msg.startswith("gpuscope: "):
                msg = msg[len("gpuscope: "):]
            unknown = "unknown command" in msg or "unknown option" in msg
            raise (NotAvailable if unknown else StoreError)(msg, p.returncode)
        return p.stdout

    def _json(self, *args):
        return json.loads(self._run(*args))

    def runs(self, where=None):
        """The runs, newest first: one dict each (id, name, status, start, duration_s, command, host,
        group, tags, as `gpuscope runs --json` gives them). where: an expression the binary's
        `runs --where` reads (NotAvailable when it has none), or a function of a run's dict that
        keeps the runs it is true for."""
        if where is None or callable(where):
            rows = self._json("runs", "--json")
            return Table(r for r in rows if where is None or where(r))
        return Table(self._json("runs", "--json", "--where", str(where)))

    def series(self, run, name, labels=None):
        """The samples of the run's series called name (a glob: "gpu.*"), each series' points in time
        order: one dict a point — t_s (seconds since the run's start), value, step (the step the job
        logged it with, else None), source, name, labels, unit. labels: only the series with exactly
        these labels ("gpu=0"). A name no series has is an empty table. A step is never a value: it
        is the step of its point, not a point of its own."""
        return self._series(self._json("show", str(run), "--metric", str(name), "--json"), labels)

    @staticmethod
    def _series(doc, labels=None):
        rows = Table()
        for s in doc.get("series", []):
            if labels is not None and s.get("labels") != labels:
                continue
            points, steps = s.get("points", []), s.get("steps")
            if not steps or len(steps) != len(points):
                steps = [None] * len(points)
            for (t, v), k in zip(points, steps):
                rows.append({"t_s": t, "value": v, "step": k, "source": s.get("source"), "name": s.get("name"),
                             "labels": s.get("labels"), "unit": s.get("unit")})
        return rows

    def _client_metrics(self, run, keys):
        """The rows of the job's own metrics (source client, unlabelled, not step.*) named in keys
        (None: every one the run has), and the run's record (for its start time)."""
        if keys is None:
            keys = sorted({s["name"] for s in self._json("metrics", str(run), "--json")
                           if s.get("source") == "client" and not s.get("labels") and
                           not s["name"].startswith("step.")})
        rows, rid = [], None
        for k in [keys] if isinstance(keys, str) else keys:
            doc = self._json("show", str(run), "--metric", _glob_literal(k), "--json")
            rid = doc.get("run", rid)
            rows += [r for r in self._series(doc, "") if r["source"] == "client" and r["name"] == k]
        rec = next((r for r in self._json("runs", "--json") if r.get("id") == rid), {}) if rows else {}
        return rows, rec

    def history(self, run, keys=None):
        """The job's metrics by step, as W&B's run.history() gives them: one row a step (in step
        order), one column a metric (keys: those only; a name or a list), and _step, _runtime
        (seconds since the run's start, at the step's first value) and _timestamp (Unix seconds). A
        metric not logged at a step is None there; values logged without a step are not in it
        (series() has them). A Table: to_pandas() makes it a DataFrame."""
        rows, rec = self._client_metrics(run, keys)
        start = rec.get("start_wall_ns")
        by = {}
        for r in rows:
            if r["step"] is None:
                continue
            row = by.get(r["step"])
            if row is None:
                row = by[r["step"]] = {"_step": r["step"], "_runtime": r["t_s"],
                                       "_timestamp": start / 1e9 + r["t_s"] if start is not None else None}
            row[r["name"]] = r["value"]
        names = sorted({r["name"] for r in rows if r["step"] is not None})
        base = ("_step", "_runtime", "_timestamp")
        return Table(dict({b: by[k][b] for b in base}, **{n: by[k].get(n) for n in names}) for k in sorted(by))

    def metric_history(self, run, key):
        """One metric's values in time order, as MLflow's MlflowClient.get_metric_history(run_id,
        key) gives them: a list of Metric (key, value, timestamp: Unix milliseconds, step: the step
        it was logged with, else None)."""
        rows, rec = self._client_metrics(run, [str(key)])
        start = rec.get("start_wall_ns")
        return [Metric(r["name"], r["value"], int(start / 1e6 + r["t_s"] * 1e3) if start is not None else None,
                       r["step"]) for r in rows]

    def params(self, run):
        """The run's params as a dict of strings (key -> value)."""
        return dict(self._json("show", str(run), "--params", "--json"))

    def events(self, run):
        """The run's events in time order: one dict each (t_s, kind, name, value, labels, text)."""
        return Table(self._json("show", str(run), "--events", "--json"))

    def notes(self, run):
        """The run's notes (what it missed, in words), in the order written."""
        return list(self._json("show", str(run), "--notes", "--json"))

    def log(self, run):
        """The job's output as the store kept it (`gpuscope log RUN`): a list of its lines. Raises
        NotAvailable when this gpuscope has no `log` command (it keeps no output)."""
        try:
            text = self._run("log", str(run))
        except NotAvailable as e:
            raise NotAvailable(f"the job's log is not available: this gpuscope has no 'log' command ({e})",
                               e.code) from None
        return text.splitlines()
