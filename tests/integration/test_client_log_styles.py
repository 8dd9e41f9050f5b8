"""gpuscope.log takes the calls people already write: log("loss", x[, step]), log(loss=x, acc=y,
step=n) and W&B's log({"loss": x, "acc": y}, step=n[, commit=False]). Before, the keyword and dict
forms raised TypeError and killed the job. A value that is not a number is skipped and counted,
never raised."""
from gstest import *

CLIENT = os.path.join(SRC, "clients", "python")

_JOB = r'''
import gpuscope
gpuscope.log("a", 1.0)
gpuscope.log("a", 2.0, 1)
gpuscope.log(b=2.5, c=3, step=5)
gpuscope.log({"d": 4, "e": "not a number", "f": 6.5}, step=6)
gpuscope.log({"g": 1}, commit=False)
gpuscope.log({"h": 2}, step=7, i=8)
gpuscope.log()  # nothing
gpuscope.log({})
print("job done")
'''


def test_every_logging_style_reaches_the_store_and_none_raises():
    sb = Sandbox()
    try:
        job = os.path.join(sb.dir, "job.py")
        with open(job, "w") as f:
            f.write(_JOB)
        out = sb.ok("run", "--", PYTHON, job, env={"PYTHONPATH": CLIENT})
        check("job done" in out, out)
        series = sb.json("metrics", "last", "--json")
        names = {s["name"]: s for s in series if s.get("source") == "client" and not s["name"].startswith("step.")}
        for n, count in (("a", 2), ("b", 1), ("c", 1), ("d", 1), ("f", 1), ("g", 1), ("h", 1), ("i", 1)):
            check(n in names and names[n]["count"] == count, f"{n}: {names.get(n)}")
        check("e" not in names, "a value that is not a number is not stored")
        rows = [r for r in sb.csv("show", "last", "--metric", "f", "--csv") if r.get("source") == "client"]
        check(len(rows) == 1 and float(rows[0]["value"]) == 6.5, str(rows))
    finally:
        sb.close()


run_tests(globals())
