"""Shared helpers for integration tests: run the real gpuscope binary in a throw-away store.

Each test script does `from gstest import *`, makes a Sandbox, and calls gs(...) which returns
(exit code, stdout, stderr). Failures raise AssertionError with the command's output."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

BIN = os.environ.get("GPUSCOPE_BIN", os.path.join(os.path.dirname(__file__), "../../build/gpuscope"))
SRC = os.environ.get("GS_SOURCE_DIR", os.path.abspath(os.path.join(os.path.dirname(__file__), "../..")))
BUILD = os.environ.get("GS_BUILD_DIR", os.path.join(SRC, "build"))
PYTHON = os.environ.get("GS_PYTHON", "/usr/bin/python3")


class Sandbox:
    """A temporary directory with its own store; removed at exit unless GS_KEEP is set."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gstest-")
        self.db = os.path.join(self.dir, "gs.db")
        self.store = "sqlite://" + self.db
        self.env = dict(os.environ)
        self.env["GPUSCOPE_STORE"] = self.store
        self.env["XDG_DATA_HOME"] = os.path.join(self.dir, "xdg")
        self.env.pop("GPUSCOPE_NVML_LIB", None)

    def gs(self, *args, env=None, timeout=120, input=None):
        e = dict(self.env)
        if env:
            e.update(env)
        p = subprocess.run([BIN, *args], capture_output=True, text=True, env=e, timeout=timeout,
                           input=input)
        return p.returncode, p.stdout, p.stderr

    def ok(self, *args, **kw):
        rc, out, err = self.gs(*args, **kw)
        check(rc == 0, f"gpuscope {' '.join(args)} exited {rc}\nstdout:\n{out}\nstderr:\n{err}")
        return out

    def json(self, *args, **kw):
        return json.loads(self.ok(*args, **kw))

    def csv(self, *args, **kw):
        """Rows of `show --csv` as dicts."""
        import csv, io
        return list(csv.DictReader(io.StringIO(self.ok(*args, **kw))))

    def close(self):
        if not os.environ.get("GS_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)


def check(cond, msg="check failed"):
    if not cond:
        raise AssertionError(msg)


def run_tests(globs):
    """Runs every function named test_* in globs, prints one line each, exits 1 on any failure."""
    failed = 0
    for name, fn in sorted(globs.items()):
        if name.startswith("test_") and callable(fn):
            try:
                fn()
                print(f"ok   {name}")
            except Exception as ex:  # report and go on
                failed += 1
                print(f"FAIL {name}: {ex}")
    sys.exit(1 if failed else 0)
