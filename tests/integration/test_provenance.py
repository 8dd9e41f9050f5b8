"""Where a run came from, recorded without the user doing anything (agent/provenance.c): the git
commit, branch and state of the job's folder — the diff's hash is what `git diff --no-ext-diff HEAD
| sha256sum` prints — the scheduler's ids and the container; nothing where there is nothing (no
repository); a git that hangs costs the run 2 s and a note, never the run; compare lists a changed
commit but not the ever-changing job ids. --save-diff keeps the diff itself (at most 1 MiB, else only
its hash and a note). A real PyTorch job (/usr/bin/python3) records the Python executable and version
and torch's versions through the client; NVML (the simulator) the driver's and its CUDA's version;
`report` shows them, and `compare` names the version that differs ("550.54.15 → 560.35.03")."""
import hashlib
import json
import subprocess

from gstest import *
from test_serve_api import Server

SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
CLIENT = os.path.join(SRC, "clients", "python")


def _git(repo, *args):
    return subprocess.run(["git", "-C", repo, "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                          check=True, capture_output=True, text=True).stdout


def _repo(sb, name):
    repo = os.path.join(sb.dir, name)
    os.makedirs(repo)
    _git(repo, "init", "-q", "-b", "trunk")
    with open(os.path.join(repo, "train.py"), "w") as f:
        f.write("print('hi')\n")
    _git(repo, "add", "train.py")
    _git(repo, "commit", "-q", "-m", "first")
    return repo


def _params(sb, ref="last"):
    return sb.json("show", ref, "--params", "--json")


def _run_in(sb, cwd, *args, env=None, job=("true",)):
    e = dict(sb.env)
    e.update(env or {})
    p = subprocess.run([BIN, "run", *args, "--", *job], cwd=cwd, env=e, capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, p.stdout + p.stderr)


def _diff(repo):
    return subprocess.run(["git", "-C", repo, "diff", "--no-ext-diff", "HEAD"], capture_output=True, check=True).stdout


def test_save_diff_keeps_the_diff_itself_and_a_clean_tree_keeps_none():
    sb = Sandbox()
    try:
        repo = _repo(sb, "r")
        _run_in(sb, repo, "--save-diff", "--name", "clean")
        check("git.diff" not in _params(sb, "clean") and _params(sb, "clean").get("git.dirty") == "false", "clean")
        with open(os.path.join(repo, "train.py"), "a") as f:
            f.write("print('a change \u00e9')\n")
        _run_in(sb, repo, "--name", "hash-only")
        check("git.diff" not in _params(sb, "hash-only"), "without --save-diff only the hash is kept")
        _run_in(sb, repo, "--save-diff", "--name", "kept")
        p = _params(sb, "kept")
        diff = _diff(repo)
        check(p.get("git.diff", "").encode() == diff, f"the kept diff is git's: {p.get('git.diff')!r} vs {diff!r}")
        check(p.get("git.diff_sha256") == hashlib.sha256(diff).hexdigest(), "the hash of the kept diff")
        report = sb.ok("report", "kept")
        check("dirty (diff %d bytes" % len(diff) in report and "kept" in report, report[:800])
        check("git.diff=" not in report, "the diff is not printed among the params")
    finally:
        sb.close()


def test_save_diff_over_its_bound_or_not_text_keeps_only_the_hash_and_says_so():
    sb = Sandbox()
    try:
        repo = _repo(sb, "r")
        with open(os.path.join(repo, "train.py"), "a") as f:
            f.write(("x = 1  # padding\n" * 80000))  # 1.4 MB of diff: over the 1 MiB bound
        _run_in(sb, repo, "--save-diff")
        p = _params(sb)
        check("git.diff" not in p and p.get("git.diff_bytes") == str(len(_diff(repo))), str(p.get("git.diff_bytes")))
        notes = sb.json("show", "last", "--notes", "--json")
        check(any("over --save-diff's 1048576" in n for n in notes), str(notes))
        latin = _repo(sb, "latin1")
        with open(os.path.join(latin, "train.py"), "ab") as f:
            f.write(b"# caf\xe9\n")  # Latin-1: not UTF-8, which no store keeps as text
        _run_in(sb, latin, "--save-diff")
        p = _params(sb)
        check("git.diff" not in p and p.get("git.diff_sha256") == hashlib.sha256(_diff(latin)).hexdigest(), str(p))
        notes = sb.json("show", "last", "--notes", "--json")
        check(any("not UTF-8 text" in n for n in notes), str(notes))
    finally:
        sb.close()


TORCH_JOB = r"""
import json, platform, sys, torch, gpuscope
for x in gpuscope.watch([torch.zeros(2, 2)] * 10):
    pass
cudnn = torch.backends.cudnn.version()
json.dump({"python.executable": sys.executable, "python.version": platform.python_version(),
           "torch.version": torch.__version__, "torch.cuda": torch.version.cuda,
           "torch.cudnn": str(cudnn) if cudnn else None}, open(sys.argv[1], "w"))
"""


def test_a_real_pytorch_job_records_python_and_torch_versions():
    sb = Sandbox()
    try:
        job, seen = os.path.join(sb.dir, "job.py"), os.path.join(sb.dir, "seen.json")
        with open(job, "w") as f:
            f.write(TORCH_JOB)
        _run_in(sb, sb.dir, "--name", "torch", env={"PYTHONPATH": CLIENT}, job=(PYTHON, job, seen))
        with open(seen) as f:
            want = {k: v for k, v in json.load(f).items() if v is not None}
        p = _params(sb, "torch")
        got = {k: p.get(k) for k in ("python.executable", "python.version", "torch.version", "torch.cuda", "torch.cudnn")
               if k in p}
        check(got == want and "torch.version" in got, f"the job's versions: {got} vs what it saw: {want}")
        report = sb.ok("report", "torch")
        check(f"python:   {want['python.version']} ({want['python.executable']}); torch {want['torch.version']}" in report,
              report[:800])
    finally:
        sb.close()


def _scenario(sb, name, driver, cuda):
    path = os.path.join(sb.dir, name + ".scn")
    with open(path, "w") as f:
        f.write(f"driver {driver}\ncuda {cuda}\ndevice 0\n  name NVIDIA H100 80GB HBM3\n")
    return {"GPUSCOPE_NVML_LIB": SIM, "GPUSIM_SCENARIO": path}


def test_compare_names_the_driver_version_that_differs():
    sb = Sandbox()
    try:
        _run_in(sb, sb.dir, "--name", "old", env=_scenario(sb, "old", "550.54.15", "12.4"))
        _run_in(sb, sb.dir, "--name", "new", env=_scenario(sb, "new", "560.35.03", "12.6"))
        _run_in(sb, sb.dir, "--name", "nocuda", env=_scenario(sb, "nocuda", "560.35.03", "unsupported"))
        p = _params(sb, "old")
        check(p.get("nvml.driver_version") == "550.54.15" and p.get("nvml.cuda_driver_version") == "12.4", str(p))
        check("nvml.cuda_driver_version" not in _params(sb, "nocuda"), "an unsupported call is no version")
        text = sb.ok("compare", "old", "new")
        check("where they came from" in text and "550.54.15 → 560.35.03" in text and "12.4 → 12.6" in text, text)
        j = sb.json("compare", "old", "new", "--json")
        check(j["origin_differing"] == {"nvml.driver_version": ["550.54.15", "560.35.03"],
                                        "nvml.cuda_driver_version": ["12.4", "12.6"]}, str(j["origin_differing"]))
        check("driver:   NVIDIA 560.35.03, CUDA 12.6" in sb.ok("report", "new"), "report shows the driver")
        server = Server(sb)
        try:
            api = server.json("/api/compare?runs=old,new")["origin_differ"]
        finally:
            server.stop()
        check(api == [{"key": "nvml.driver_version", "label": "NVIDIA driver", "values": ["550.54.15", "560.35.03"]},
                      {"key": "nvml.cuda_driver_version", "label": "driver CUDA", "values": ["12.4", "12.6"]}],
              f"the compare page's answer: {api}")
    finally:
        sb.close()


def test_a_dirty_repository_is_recorded_with_its_diff_hash():
    sb = Sandbox()
    try:
        repo = _repo(sb, "r")
        with open(os.path.join(repo, "train.py"), "a") as f:
            f.write("print('changed')\n")
        _run_in(sb, repo)
        p = _params(sb)
        check(p.get("git.commit") == _git(repo, "rev-parse", "HEAD").strip(), str(p))
        check(p.get("git.branch") == "trunk" and p.get("git.dirty") == "true", str(p))
        diff = subprocess.run(["git", "-C", repo, "diff", "--no-ext-diff", "HEAD"], capture_output=True, check=True).stdout
        check(p.get("git.diff_sha256") == hashlib.sha256(diff).hexdigest(), f"{p} vs {hashlib.sha256(diff).hexdigest()}")
        check(p.get("git.diff_bytes") == str(len(diff)), str(p))
    finally:
        sb.close()


def test_a_clean_repository_has_no_diff_and_no_repository_has_no_git_params():
    sb = Sandbox()
    try:
        repo = _repo(sb, "r")
        _run_in(sb, repo)
        p = _params(sb)
        check(p.get("git.dirty") == "false" and "git.diff_sha256" not in p, str(p))
        plain = os.path.join(sb.dir, "plain")
        os.makedirs(plain)
        _run_in(sb, plain, env={"GIT_CEILING_DIRECTORIES": sb.dir})
        p = _params(sb)
        check(not [k for k in p if k.startswith("git.")], f"no repository, no git params: {p}")
    finally:
        sb.close()


def test_the_scheduler_s_ids_are_recorded():
    sb = Sandbox()
    try:
        _run_in(sb, sb.dir, env={"SLURM_JOB_ID": "4242", "SLURM_STEP_ID": "0", "POD_NAME": "trainer-0",
                                 "POD_NAMESPACE": "ml", "PBS_JOBID": ""})
        p = _params(sb)
        check(p.get("sched.slurm_job_id") == "4242" and p.get("sched.slurm_step_id") == "0", str(p))
        check(p.get("sched.k8s_pod") == "trainer-0" and p.get("sched.k8s_namespace") == "ml", str(p))
        check("sched.pbs_job_id" not in p, "an empty variable is not an id")
    finally:
        sb.close()


def test_a_git_that_hangs_costs_a_note_not_the_run():
    sb = Sandbox()
    try:
        bindir = os.path.join(sb.dir, "bin")
        os.makedirs(bindir)
        fake = os.path.join(bindir, "git")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nexec sleep 600\n")
        os.chmod(fake, 0o755)
        _run_in(sb, sb.dir, env={"PATH": bindir + ":" + os.environ["PATH"]})
        notes = sb.json("show", "last", "--notes", "--json")
        check(any("git did not answer" in n for n in notes), str(notes))
        check(not [k for k in _params(sb) if k.startswith("git.")], "nothing made up")
    finally:
        sb.close()


def test_compare_lists_a_changed_commit_but_not_the_job_ids():
    sb = Sandbox()
    try:
        repo = _repo(sb, "r")
        _run_in(sb, repo, "--name", "one", env={"SLURM_JOB_ID": "1"})
        with open(os.path.join(repo, "train.py"), "a") as f:
            f.write("print('two')\n")
        _git(repo, "commit", "-q", "-am", "second")
        _run_in(sb, repo, "--name", "two", env={"SLURM_JOB_ID": "2"})
        j = sb.json("compare", "one", "two", "--json")
        keys = list(j["params_differing"])
        check("git.commit" in keys and "sched.slurm_job_id" not in keys, str(keys))
    finally:
        sb.close()


run_tests(globals())
