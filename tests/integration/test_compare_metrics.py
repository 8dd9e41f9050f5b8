"""compare shows the job's own metrics side by side: each metric's last and best value per run (best:
lowest for a loss or an error, highest for the rest), "—" for a run that did not log it, in the text
table and in --json."""
from gstest import *

CLIENT = os.path.join(SRC, "clients", "python")
_JOB = r'''
import gpuscope, sys
losses = [float(x) for x in sys.argv[1].split(",")]
for i, l in enumerate(losses):
    gpuscope.log(loss=l, step=i)
if len(sys.argv) > 2:
    for i, a in enumerate(sys.argv[2].split(",")):
        gpuscope.log({"accuracy": float(a)}, step=i)
'''


def _setup(sb):
    job = os.path.join(sb.dir, "job.py")
    with open(job, "w") as f:
        f.write(_JOB)
    env = {"PYTHONPATH": CLIENT}
    sb.ok("run", "--name", "first", "--", PYTHON, job, "2.0,1.0,0.5,0.75", "0.5,0.7,0.6", env=env)
    sb.ok("run", "--name", "second", "--", PYTHON, job, "1.5,0.25,0.3", env=env)


SB = shared_sandbox(_setup)


def test_the_json_has_each_metric_s_last_and_best_per_run():
    m = SB().json("compare", "first", "second", "--json")["job_metrics"]
    check(sorted(m) == ["accuracy", "loss"], str(m))
    check(m["loss"]["better"] == "lower" and m["accuracy"]["better"] == "higher", str(m))
    a, b = m["loss"]["runs"]
    check((a["n"], a["last"], a["best"]) == (4, 0.75, 0.5), str(a))
    check((b["n"], b["last"], b["best"]) == (3, 0.3, 0.25), str(b))
    acc = m["accuracy"]["runs"]
    check(acc[0]["best"] == 0.7 and acc[0]["last"] == 0.6 and acc[1] is None, str(acc))


def test_the_text_table_has_a_row_per_metric():
    out = SB().ok("compare", "first", "second")
    check("job metrics (last / best)" in out, out)
    loss = [l for l in out.splitlines() if l.strip().startswith("loss ")]
    acc = [l for l in out.splitlines() if l.strip().startswith("accuracy ")]
    check(len(loss) == 1 and "0.75 / 0.5" in loss[0] and "0.3 / 0.25" in loss[0], out)
    check(len(acc) == 1 and "0.6 / 0.7" in acc[0] and "—" in acc[0], out)


run_tests(globals())
