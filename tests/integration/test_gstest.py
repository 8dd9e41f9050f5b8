"""The integration tests' runner (gstest.run_tests, on unittest): a script whose tests all pass exits
0, a failed check() or any other exception exits 1, and a skip — gstest.skip() or a plain
unittest.SkipTest — exits 77 (ctest's SKIP_RETURN_CODE), never 0; a failure beside a skip is still a
failure. Under make check (GS_CHECK_STRICT=1) a skip is a failure, except a skip_needs_pypi().
Each case is a small script run by the same interpreter. make check's last line (tests/check_summary.py)
lists the needs-pypi tests that skipped and fails on any other skip."""
import os
import subprocess
import sys
import tempfile

from gstest import SKIP, check, run_tests

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
import check_summary  # noqa: E402


def run_script(body, strict=False):
    """Runs a script made of the gstest import, body and run_tests(globals()), with GS_CHECK_STRICT=1
    when strict (else without it, whatever this test runs under); returns (rc, output)."""
    with tempfile.TemporaryDirectory(prefix="gstest-runner-") as d:
        path = os.path.join(d, "t.py")
        with open(path, "w") as f:
            f.write(f"import sys, unittest\nsys.path.insert(0, {HERE!r})\nfrom gstest import *\n{body}\n"
                    "run_tests(globals())\n")
        env = {k: v for k, v in os.environ.items() if k not in ("GS_KEEP", "GS_CHECK_STRICT")}  # GS_KEEP keeps the sandboxes
        if strict:
            env["GS_CHECK_STRICT"] = "1"
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


def test_under_make_check_a_skip_is_a_failure_with_its_reason():
    rc, out = run_script("def test_a():\n    skip('no widget here')\ndef test_b():\n    pass", strict=True)
    check(rc == 1, f"exit {rc}\n{out}")
    check("FAIL: test_a" in out and "GS_CHECK_STRICT=1" in out and "no widget here" in out, out)


def test_under_make_check_a_plain_skiptest_is_a_failure():
    rc, out = run_script("def test_a():\n    raise unittest.SkipTest('not here')", strict=True)
    check(rc == 1, f"exit {rc}\n{out}")
    check("not here" in out, out)


def test_a_skip_for_a_pypi_package_stays_a_skip_under_make_check():
    rc, out = run_script("def test_a():\n    skip_needs_pypi('no lightning')", strict=True)
    check(rc == SKIP, f"exit {rc}\n{out}")
    check("needs-pypi: no lightning" in out, out)


def test_a_script_skip_exits_77_and_fails_under_make_check():
    body = "skip_script('no simulator here')\ndef test_a():\n    pass"
    rc, out = run_script(body)
    check(rc == SKIP and "SKIP: no simulator here" in out, f"exit {rc}\n{out}")
    rc, out = run_script(body, strict=True)
    check(rc == 1 and "FAIL: " in out and "no simulator here" in out, f"exit {rc}\n{out}")


def junit(**status):
    """A ctest JUnit file with one test case per name=status ("run", "fail", "notrun")."""
    cases = "".join(f'<testcase name="{n}" status="{s}">' + ('<skipped message="SKIP_RETURN_CODE=77"/>'
                    if s == "notrun" else "") + "</testcase>" for n, s in status.items())
    return f'<?xml version="1.0"?><testsuite tests="{len(status)}">{cases}</testsuite>'


def labels(**tests):
    """`ctest --show-only=json-v1` output with the given labels per test name."""
    import json
    return json.dumps({"tests": [{"name": n, "properties": [{"name": "LABELS", "value": v}]}
                                 for n, v in tests.items()]})


def test_make_checks_last_line_names_the_pypi_tests_that_skipped():
    meta = labels(it_a=["integration"], it_hf=["integration", "needs-pypi"], it_keras=["needs-pypi"])
    rc, lines = check_summary.summarise([(junit(it_a="run", it_hf="notrun", it_keras="notrun"), meta),
                                         (junit(it_a="run", it_hf="notrun"), meta)])
    check(rc == 0, f"{rc} {lines}")
    check(lines[-1].startswith("2 tests need packages this machine cannot install: it_hf, it_keras"), lines)


def test_make_check_fails_on_a_skip_outside_needs_pypi():
    meta = labels(it_a=["integration"], it_hf=["needs-pypi"])
    rc, lines = check_summary.summarise([(junit(it_a="notrun", it_hf="run"), meta)])
    check(rc == 1 and "it_a" in lines[0] and lines[0].startswith("FAIL"), f"{rc} {lines}")
    check(lines[-1] == "every test ran" or "it_a" not in lines[-1], lines)


def test_make_checks_last_line_when_every_test_ran():
    rc, lines = check_summary.summarise([(junit(it_a="run", it_b="fail"), labels(it_a=[], it_b=[]))])
    check(rc == 0 and lines == ["every test ran"], f"{rc} {lines}")


def test_the_shared_sandbox_is_removed_at_the_end():
    rc, out = run_script("get = shared_sandbox()\ndef test_a():\n    print('DIR', get().dir)")
    dirs = [ln.split()[-1] for ln in out.splitlines() if "DIR " in ln]
    check(rc == 0 and len(dirs) == 1, f"exit {rc}\n{out}")
    check(not os.path.exists(dirs[0]), f"{dirs[0]} is left behind")


if __name__ == "__main__":
    run_tests(globals())
