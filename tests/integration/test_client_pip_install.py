"""The Python client installs with plain `pip install clients/python` and needs no package index
(its build back end is in the tree). A ctest skip (with the reason) where GS_PYTHON has no pip;
test_client_pythonpath.py checks the client straight from the tree."""
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
        skip(f"{PYTHON} has no pip (python3-pip is not installed)")
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


if __name__ == "__main__":
    run_tests(globals())
