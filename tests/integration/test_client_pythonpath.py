"""The Python client works straight from the tree with PYTHONPATH (no install), and importing it
loads no framework callback module."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa: E402,F403

CLIENT = os.path.join(SRC, "clients", "python")
PROBE = "import gpuscope, sys; print(gpuscope.__version__, gpuscope.__file__, gpuscope.enabled())"


def test_pythonpath_works_and_callbacks_load_lazily():
    p = subprocess.run([PYTHON, "-c", PROBE + "; print('gpuscope.lightning' in sys.modules)"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHONPATH=CLIENT))
    out = p.stdout.split()
    check(p.returncode == 0 and out[0] == "0.1.0" and out[1].startswith(CLIENT), f"{p.stdout}{p.stderr}")
    check(out[-1] == "False", "a framework callback module was imported eagerly")


if __name__ == "__main__":
    run_tests(globals())
