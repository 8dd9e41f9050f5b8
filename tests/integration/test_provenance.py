"""Where a run came from, recorded without the user doing anything (agent/provenance.c): the git
commit, branch and state of the job's folder — the diff's hash is what `git diff --no-ext-diff HEAD
| sha256sum` prints — the scheduler's ids and the container; nothing where there is nothing (no
repository); a git that hangs costs the run 2 s and a note, never the run; compare lists a changed
commit but not the ever-changing job ids."""
import hashlib
import subprocess

from gstest import *


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


def _run_in(sb, cwd, *args, env=None):
    e = dict(sb.env)
    e.update(env or {})
    p = subprocess.run([BIN, "run", *args, "--", "true"], cwd=cwd, env=e, capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, p.stdout + p.stderr)


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
