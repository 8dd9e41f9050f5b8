"""The Python client's read API, gpuscope.Store (clients/python/gpuscope/_store.py), on a real store:
a run of a job speaking gs1 (params, 40 steps, a mark) read back through the binary's --json, the
same rows the binary itself prints — runs, a series' points, params, events, notes — plus the
errors: an unknown run (exit 2), a store that is not there (exit 3), `log` and `runs --where` said
"not available" while the binary has no such command, and to_pandas() without pandas (with it:
test_client_store_pandas.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F401,F403

sys.path.insert(0, os.path.join(SRC, "clients", "python"))
import gpuscope  # noqa: E402


def setup(sb):
    sb.ok("run", "--name", "read-me", "--", *sb.step_job(0.002, 0.002, 40, "batch_size=32", mark=True))
    sb.rid = sb.json("runs", "--json")[0]["id"]
    os.environ["GPUSCOPE_BIN"] = os.path.abspath(BIN)


shared = shared_sandbox(setup)


def store():
    sb = shared()
    return sb, gpuscope.Store(sb.store)


def test_runs_are_the_binarys_runs():
    sb, st = store()
    runs = st.runs()
    check(runs == sb.json("runs", "--json") and len(runs) == 1, f"runs: {runs}")
    check(runs[0]["name"] == "read-me" and runs[0]["status"] == "finished", f"the run: {runs[0]}")
    check(st.runs(where=lambda r: r["name"] == "other") == [], "a filter that keeps nothing")


def test_series_points_are_the_stored_ones():
    sb, st = store()
    rows = st.series(sb.rid, "step.total_s")
    shown = sb.json("show", sb.rid, "--metric", "step.total_s", "--json")["series"]
    check(len(shown) == 1 and len(shown[0]["points"]) >= 39, f"the step series as shown: {shown}")
    check([[r["t_s"], r["value"]] for r in rows] == shown[0]["points"], "the points differ from show --json")
    check(all(r["name"] == "step.total_s" and r["source"] == "client" for r in rows), f"row fields: {rows[:1]}")
    check(st.series(sb.rid, "no.such.series") == [], "a series the run lacks is an empty table")
    cpu = st.series(sb.rid, "host.cpu.busy_pct", labels="cpu=total")
    check(cpu and all(r["labels"] == "cpu=total" for r in cpu), "labels select one series")


def test_params_events_notes():
    sb, st = store()
    params = st.params(sb.rid)
    check(params.get("batch_size") == "32", f"params: {params}")
    check(params == sb.json("show", sb.rid, "--params", "--json"), "params differ from show --params --json")
    marks = [e for e in st.events(sb.rid) if e["kind"] == "mark"]
    check(len(marks) == 1 and marks[0]["name"] == "epoch", f"marks: {marks}")
    check(st.notes(sb.rid) == sb.json("show", sb.rid, "--notes", "--json"), "notes differ")


def test_errors_name_their_cause():
    sb, st = store()
    try:
        st.params("nosuchrun")
        check(False, "an unknown run read")
    except gpuscope.StoreError as e:
        check(e.code == 2 and "nosuchrun" in str(e), f"unknown run: {e!r} {e.code}")
    try:
        gpuscope.Store(os.path.join(sb.dir, "absent.db")).runs()
        check(False, "a missing store read")
    except gpuscope.StoreError as e:
        check(e.code == 3, f"missing store: {e!r} {e.code}")


def has_command(sb, *args):
    rc, _, err = sb.gs(*args)
    return rc == 0 or not ("unknown command" in err or "unknown option" in err)


def test_log_and_where_say_not_available_without_the_command():
    sb, st = store()
    if has_command(sb, "log", "--help"):
        check(isinstance(st.log(sb.rid), list), "log() gives the log's lines")
    else:
        try:
            st.log(sb.rid)
            check(False, "log() without a log command")
        except gpuscope.NotAvailable as e:
            check("not available" in str(e), f"log: {e}")
    if has_command(sb, "runs", "--where", "name = read-me", "--json"):
        check(len(st.runs(where="name = read-me")) == 1, "runs --where through the binary")
    else:
        try:
            st.runs(where="name = read-me")
            check(False, "runs(where=TEXT) without runs --where")
        except gpuscope.NotAvailable as e:
            check("--where" in str(e), f"where: {e}")


def test_to_pandas_without_pandas_says_so():
    sb, st = store()
    rows = st.series(sb.rid, "step.total_s")
    check(len(rows) >= 39, "rows to convert")
    saved = sys.modules.get("pandas")
    sys.modules["pandas"] = None  # what `import pandas` meets where it is not installed
    try:
        rows.to_pandas()
        check(False, "to_pandas() without pandas")
    except ImportError as e:
        check("needs pandas" in str(e), f"without pandas: {e}")
    finally:
        if saved is None:
            del sys.modules["pandas"]
        else:
            sys.modules["pandas"] = saved


run_tests(globals())
