"""`gpuscope import mlruns/` brings a team's MLflow history in (issue 39): an MLflow file store written
here by the format's own rules (mlruns/EXPERIMENT/meta.yaml, RUN/meta.yaml with MLflow's numeric
status, metrics/KEY lines "TIMESTAMP VALUE STEP", keys with "/" as folders, params/ and tags/ files
holding the value) is imported with its names, params, tags, metrics by step and time, start and
end, and where it came from; a second import adds nothing; a damaged meta.yaml or metric file is one
line naming the file and the byte offset, and nothing is written (not even a store file)."""
import shutil

from gstest import *

CLIENT = os.path.join(SRC, "clients", "python")
START = 1796000000000  # ms

RUNS = {
    "0a1b2c3d4e5f60718293a4b5c6d7e8f9": {"name": "resnet-a", "status": 3, "lr": "0.01",
                                         "loss": [(START + 1000, 0.5, 0), (START + 2000, 0.25, 1),
                                                  (START + 3500, 0.125, 2)],
                                         "train/acc": [(START + 1000, 0.6, 0), (START + 2000, 0.7, 1)]},
    "ffeeddccbbaa99887766554433221100": {"name": "resnet-b", "status": 4, "lr": "0.1",
                                         "loss": [(START + 1500, 0.9, 0), (START + 1500, 0.8, 1)],
                                         "train/acc": []},
}


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def mlruns(root):
    """An MLflow file store as MLflow's FileStore writes it."""
    write(os.path.join(root, "0", "meta.yaml"),
          f"artifact_location: file://{root}/0\ncreation_time: {START}\nexperiment_id: '0'\n"
          f"last_update_time: {START}\nlifecycle_stage: active\nname: vision-baselines\n")
    for rid, r in RUNS.items():
        d = os.path.join(root, "0", rid)
        write(os.path.join(d, "meta.yaml"),
              f"artifact_uri: file://{d}/artifacts\nend_time: {START + 60000}\nentry_point_name: ''\n"
              f"experiment_id: '0'\nlifecycle_stage: active\nrun_id: {rid}\nrun_name: {r['name']}\n"
              f"run_uuid: {rid}\nsource_name: ''\nsource_type: 4\nsource_version: ''\nstart_time: {START}\n"
              f"status: {r['status']}\ntags: []\nuser_id: alice\n")
        write(os.path.join(d, "params", "lr"), r["lr"])
        write(os.path.join(d, "params", "batch_size"), "64")
        write(os.path.join(d, "tags", "team"), "vision")
        write(os.path.join(d, "tags", "mlflow.runName"), r["name"])
        write(os.path.join(d, "tags", "mlflow.source.git.commit"), "3f2c" * 10)
        for key in ("loss", "train/acc"):
            if r[key]:
                write(os.path.join(d, "metrics", key), "".join(f"{t} {v} {s}\n" for t, v, s in r[key]))
    # a deleted run stays out
    write(os.path.join(root, "0", "00000000000000000000000000000000", "meta.yaml"),
          f"run_id: {'0' * 32}\nstart_time: {START}\nstatus: 3\nlifecycle_stage: deleted\n")


def test_an_mlflow_store_comes_in_whole_once_and_a_damaged_one_not_at_all():
    sb = Sandbox()
    try:
        root = os.path.join(sb.dir, "mlruns")
        mlruns(root)
        rc, out, err = sb.gs("import", root)
        check(rc == 0, f"import exited {rc}: {out}{err}")
        check("2 MLflow runs added, 0 in the store already" in err, err)
        runs = {r["name"]: r for r in sb.json("runs", "--json")}
        check(sorted(runs) == ["resnet-a", "resnet-b"], str(runs))
        check(runs["resnet-a"]["status"] == "finished" and runs["resnet-b"]["status"] == "failed", str(runs))
        check(runs["resnet-a"]["id"] == "ml0a1b2c3d4e5f60718293a4b5c6d7e", runs["resnet-a"]["id"])
        check(runs["resnet-a"]["start_wall_ns"] == START * 1000000 and runs["resnet-a"]["duration_s"] == 60,
              str(runs["resnet-a"]))
        import sys
        sys.path.insert(0, CLIENT)
        import gpuscope
        os.environ["GPUSCOPE_BIN"] = BIN
        st = gpuscope.Store(sb.store)
        for rid, r in RUNS.items():
            prm = st.params(r["name"])
            want = {"lr": r["lr"], "batch_size": "64", "tag.team": "vision", "import.format": "mlflow",
                    "mlflow.run_id": rid, "mlflow.experiment": "vision-baselines", "git.commit": "3f2c" * 10}
            for k, v in want.items():
                check(prm.get(k) == v, f"{r['name']}: {k} = {prm.get(k)!r}, want {v!r}")
            check(prm.get("import.path", "").endswith(rid), str(prm))
            for key in ("loss", "train/acc"):
                # two values of one millisecond are kept a nanosecond apart
                got = [(round(x["t_s"] * 1000) + START, x["value"], x["step"]) for x in st.series(r["name"], key)]
                want = sorted(r[key], key=lambda p: (p[0], p[2]))
                check(got == want, f"{r['name']} {key}: {got}, want {want}")
        check(any("MLflow file store" in n for n in st.notes("resnet-a")), st.notes("resnet-a"))
        hist = st.history("resnet-a")
        check([(h["_step"], h["loss"], h["train/acc"]) for h in hist] == [(0, 0.5, 0.6), (1, 0.25, 0.7),
                                                                           (2, 0.125, None)], str(hist))
        found = sb.json("runs", "--where", "param.import.format = mlflow and param.lr = 0.01", "--json")
        check([r["name"] for r in found] == ["resnet-a"], f"--where finds them: {found}")
        # side by side with a run of gpuscope's own that logs the same metric by step
        job = os.path.join(sb.dir, "job.py")
        write(job, "import gpuscope\nfor i in range(3):\n    gpuscope.log({'loss': 0.4 / (i + 1)}, step=i)\n")
        sb.ok("run", "--name", "ours", "--", PYTHON, job, env={"PYTHONPATH": CLIENT})
        out = sb.ok("compare", "resnet-a", "resnet-b", "ours")
        check("job metrics" in out and "train/acc" in out, out)
        loss = [ln for ln in out.splitlines() if ln.strip().startswith("loss ")]
        check(len(loss) == 1 and "0.125" in loss[0] and "0.1333" in loss[0], f"loss side by side: {loss}")
        # an imported run is not judged (nothing measured): no finding is said to have appeared or gone
        check(out.count("appeared, disappeared: cannot tell (") == 2 and "disappeared: —" not in out, out)

        before = sb.json("runs", "--json")
        rc, out, err = sb.gs("import", root)
        check(rc == 0 and "0 MLflow runs added, 2 in the store already" in err, f"{rc}: {out}{err}")
        check(sb.json("runs", "--json") == before, "a second import added something")
    finally:
        sb.close()


def test_a_damaged_mlflow_file_is_one_line_with_its_offset_and_nothing_is_written():
    sb = Sandbox()
    try:
        for what, rel, text, off in (
                ("meta.yaml", os.path.join("0", "ffeeddccbbaa99887766554433221100", "meta.yaml"),
                 "run_id: ffeeddccbbaa99887766554433221100\nstart_time: [1, 2\n", None),
                ("metric", os.path.join("0", "0a1b2c3d4e5f60718293a4b5c6d7e8f9", "metrics", "loss"),
                 f"{START} 0.5 0\n{START + 1} oops 1\n", f"offset {len(str(START)) + 7}")):
            root = os.path.join(sb.dir, f"mlruns-{what}")
            mlruns(root)
            write(os.path.join(root, rel), text)
            rc, out, err = sb.gs("import", root)
            lines = err.strip().splitlines()
            check(rc == 2 and len(lines) == 1, f"{what}: exit {rc}, {err!r}")
            check(os.path.join(root, rel) in lines[0] and "offset " in lines[0], f"{what}: {lines[0]}")
            if off:
                check(off in lines[0], f"{what}: {lines[0]} (want {off})")
            check(not os.path.exists(sb.db), f"{what}: the store was written")
        # truncated in the middle of a metric line: the same
        root = os.path.join(sb.dir, "mlruns-cut")
        mlruns(root)
        write(os.path.join(root, "0", "0a1b2c3d4e5f60718293a4b5c6d7e8f9", "metrics", "loss"), f"{START} 0.5 0\n{START}")
        rc, _, err = sb.gs("import", root)
        check(rc == 2 and "offset " in err and not os.path.exists(sb.db), err)
    finally:
        sb.close()


run_tests(globals())
