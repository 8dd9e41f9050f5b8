"""The Python client installs with plain `pip install clients/python` and needs no package index
(its build back end is in the tree), and it also works straight from the tree with PYTHONPATH."""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")
PROBE = "import gpuscope, sys; print(gpuscope.__version__, gpuscope.__file__, gpuscope.enabled())"


def test_pip_install_works_offline():
    if subprocess.run([PYTHON, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        print(f"skip: {PYTHON} has no pip")
        return
    d = tempfile.mkdtemp(prefix="gstest-")
    try:
        src = os.path.join(d, "src")  # a copy, so pip's build leaves nothing in the source tree
        shutil.copytree(CLIENT, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        target = os.path.join(d, "site")
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        p = subprocess.run([PYTHON, "-m", "pip", "install", "--quiet", "--target", target, src], capture_output=True,
                           text=True, timeout=120, env=env)
        check(p.returncode == 0, f"pip install failed:\n{p.stdout}\n{p.stderr}")
        p = subprocess.run([PYTHON, "-c", PROBE], capture_output=True, text=True, cwd=d,
                           env=dict(os.environ, PYTHONPATH=target))
        out = p.stdout.split()
        check(p.returncode == 0 and out[0] == "0.1.0" and out[1].startswith(target), f"installed: {p.stdout}{p.stderr}")
        check(os.path.exists(os.path.join(target, "gpuscope", "lightning.py")), "callback modules not installed")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_pythonpath_works_and_callbacks_load_lazily():
    p = subprocess.run([PYTHON, "-c", PROBE + "; print('gpuscope.lightning' in sys.modules)"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=CLIENT))
    out = p.stdout.split()
    check(p.returncode == 0 and out[0] == "0.1.0" and out[1].startswith(CLIENT), f"{p.stdout}{p.stderr}")
    check(out[-1] == "False", "a framework callback module was imported eagerly")


if __name__ == "__main__":
    run_tests(globals())
