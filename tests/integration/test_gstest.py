"""The integration tests' runner (gstest.run_tests, on unittest): a script whose tests all pass exits
0, a failed check() or any other exception exits 1, and a skip — gstest.skip() or a plain
unittest.SkipTest — exits 77 (ctest's SKIP_RETURN_CODE), never 0; a failure beside a skip is still a
failure. Each case is a small script run by the same interpreter."""
import os
import subprocess
import sys
import tempfile

from gstest import SKIP, check, run_tests

HERE = os.path.dirname(os.path.abspath(__file__))


def run_script(body):
    """Runs a script made of the gstest import, body and run_tests(globals()); returns (rc, output)."""
    with tempfile.TemporaryDirectory(prefix="gstest-runner-") as d:
        path = os.path.join(d, "t.py")
        with open(path, "w") as f:
            f.write(f"import sys, unittest\nsys.path.insert(0, {HERE!r})\nfrom gstest import *\n{body}\n"
                    "run_tests(globals())\n")
        env = {k: v for k, v in os.environ.items() if k != "GS_KEEP"}  # GS_KEEP keeps the sandboxes
        p = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=60, env=env)
        return p.returncode, p.stdout + p.stderr


def test_all_passing_exits_0():
    rc, out = run_script("def test_a():\n    check(True)\ndef test_b():\n    pass")
    check(rc == 0, f"exit {rc}\n{out}")
    check("test_a ... ok" in out and "test_b ... ok" in out, out)


def test_a_failed_check_exits_1_with_its_message():
    rc, out = run_script("def test_a():\n    check(1 == 2, 'one is not two')\ndef test_b():\n    pass")
    check(rc == 1, f"exit {rc}\n{out}")
    check("FAIL: test_a" in out and "one is not two" in out, out)
    check("test_b ... ok" in out, f"the other test still runs\n{out}")


def test_an_exception_exits_1():
    rc, out = run_script("def test_a():\n    raise ValueError('boom')")
    check(rc == 1, f"exit {rc}\n{out}")
    check("ERROR: test_a" in out and "boom" in out, out)


def test_a_skip_exits_77_with_its_reason():
    rc, out = run_script("def test_a():\n    skip('no widget here')\ndef test_b():\n    pass")
    check(rc == SKIP, f"exit {rc}\n{out}")
    check("no widget here" in out, out)


def test_a_plain_skiptest_exits_77():
    rc, out = run_script("def test_a():\n    raise unittest.SkipTest('not here')")
    check(rc == SKIP, f"exit {rc}\n{out}")


def test_a_failure_beside_a_skip_exits_1():
    rc, out = run_script("def test_a():\n    skip('later')\ndef test_b():\n    check(False, 'broken')")
    check(rc == 1, f"exit {rc}\n{out}")


def test_the_shared_sandbox_is_removed_at_the_end():
    rc, out = run_script("get = shared_sandbox()\ndef test_a():\n    print('DIR', get().dir)")
    dirs = [ln.split()[-1] for ln in out.splitlines() if "DIR " in ln]
    check(rc == 0 and len(dirs) == 1, f"exit {rc}\n{out}")
    check(not os.path.exists(dirs[0]), f"{dirs[0]} is left behind")


if __name__ == "__main__":
    run_tests(globals())
