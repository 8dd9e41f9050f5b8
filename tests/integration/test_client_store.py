"""The Python client's read API, gpuscope.Store (clients/python/gpuscope/_store.py), on a real store:
a run of a job speaking gs1 (params, 40 steps, a mark) read back through the binary's --json, the
same rows the binary itself prints — runs, a series' points, params, events, notes — plus the
errors: an unknown run (exit 2), a store that is not there (exit 3), `log` and `runs --where` through
the binary, NotAvailable on the binary's own "unknown command" / "unknown option" and without a
binary, and to_pandas() without pandas (with it: test_client_store_pandas.py)."""
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


def test_log_and_where_go_through_the_binary():
    """This gpuscope has `log` and `runs --where`: log() is `gpuscope log RUN`'s lines, runs(where=TEXT)
    the binary's own filter."""
    sb, st = store()
    rc, out, err = sb.gs("log", sb.rid)
    check(rc == 0, f"gpuscope log: exit {rc}\n{err}")
    check(st.log(sb.rid) == out.splitlines(), f"log() differs from gpuscope log: {st.log(sb.rid)!r} vs {out!r}")
    check([r["id"] for r in st.runs(where="name = read-me")] == [sb.rid], "runs --where through the binary")
    check(st.runs(where="name = other") == [], "a --where that keeps nothing")


def test_what_the_binary_does_not_have_is_not_available():
    """The client's NotAvailable, on this binary's own words: a command it does not know ("unknown
    command") and an option it does not know ("unknown option") — what an older gpuscope without `log`
    or `--where` says — are NotAvailable, a bad run a StoreError that is not; and no binary at all
    (GPUSCOPE_BIN empty, nothing on PATH) is NotAvailable from the start."""
    sb, st = store()
    for args, says in ((["nosuch"], "unknown command"), (["runs", "--no-such-option"], "unknown option")):
        try:
            st._run(*args)
            check(False, f"{args} ran")
        except gpuscope.NotAvailable as e:
            check(says in str(e) and e.code == 2, f"{args}: {e!r}")
    try:
        st.log("nosuchrun")
        check(False, "the log of an unknown run")
    except gpuscope.StoreError as e:
        check(not isinstance(e, gpuscope.NotAvailable) and e.code == 2, f"an unknown run: {e!r}")
    saved = {k: os.environ.get(k) for k in ("GPUSCOPE_BIN", "PATH")}
    os.environ["GPUSCOPE_BIN"], os.environ["PATH"] = "", sb.dir
    try:
        gpuscope.Store(sb.store)
        check(False, "a Store without a binary")
    except gpuscope.NotAvailable as e:
        check("not found" in str(e), f"without a binary: {e}")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
