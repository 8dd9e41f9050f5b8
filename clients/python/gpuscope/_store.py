"""gpuscope.Store: reading runs back from Python — a notebook's way into the store.

    import gpuscope
    st = gpuscope.Store("sqlite:///home/a/.local/share/gpuscope/gpuscope.db")   # or None: the default
    runs = st.runs()                                  # [{"id": ..., "name": ..., "status": ...}, ...]
    loss = st.series(runs[0]["id"], "loss")           # [{"t_s": 0.5, "value": 2.31, "name": "loss", ...}, ...]
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

__all__ = ["Store", "Table", "StoreError", "NotAvailable"]


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
        order: one dict a point — t_s (seconds since the run's start), value, source, name, labels,
        unit. labels: only the series with exactly these labels ("gpu=0"). A name no series has is
        an empty table."""
        doc = self._json("show", str(run), "--metric", str(name), "--json")
        rows = Table()
        for s in doc.get("series", []):
            if labels is not None and s.get("labels") != labels:
                continue
            for t, v in s.get("points", []):
                rows.append({"t_s": t, "value": v, "source": s.get("source"), "name": s.get("name"),
                             "labels": s.get("labels"), "unit": s.get("unit")})
        return rows

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
