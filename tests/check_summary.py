#!/usr/bin/python3
"""The last word of `make check`: reads what each ctest pass wrote (its JUnit file, --output-junit)
and which tests carry the label needs-pypi (`ctest --show-only=json-v1`), then prints one last line.
make check has installed every Debian package a test needs, so a test that skipped is a failure —
unless it needs a package only pip has (label needs-pypi), and those are named on the last line:
"3 tests need packages this machine cannot install: …". docs/testing.md, "Skips".

    tests/check_summary.py BUILD_DIR [BUILD_DIR...]

Each BUILD_DIR must hold check-junit.xml (the Makefile's ctest runs write it). Exits 1 when a test
outside needs-pypi skipped (or did not run), 2 when a file is missing, else 0."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

JUNIT = "check-junit.xml"


def not_run(junit_text):
    """Names of the tests a ctest JUnit file shows as not run (skipped, or not run at all)."""
    root = ET.fromstring(junit_text)
    return [c.get("name") for c in root.iter("testcase") if c.get("status") != "run" and c.get("status") != "fail"]


def pypi_tests(tests_json):
    """Names of the tests labelled needs-pypi in `ctest --show-only=json-v1` output."""
    names = set()
    for t in json.loads(tests_json).get("tests", []):
        for p in t.get("properties", []):
            if p.get("name") == "LABELS" and "needs-pypi" in p.get("value", []):
                names.add(t["name"])
    return names


def summarise(passes):
    """passes: [(junit_text, tests_json)] of each ctest pass. Returns (exit code, lines to print),
    the last line the one make check ends with."""
    hidden, pypi = [], []
    for junit_text, tests_json in passes:
        allowed = pypi_tests(tests_json)
        for name in not_run(junit_text):
            if name in allowed:
                if name not in pypi:
                    pypi.append(name)
            elif name not in hidden:
                hidden.append(name)
    lines = []
    if hidden:
        lines.append(f"FAIL: {len(hidden)} test{'s' if len(hidden) != 1 else ''} did not run under make check, "
                     f"which installs what they need: {', '.join(hidden)}")
    if pypi:
        lines.append(f"{len(pypi)} test{'s need' if len(pypi) != 1 else ' needs'} packages this machine cannot "
                     f"install: {', '.join(sorted(pypi))} (not in Debian; they run where pip installs them)")
    else:
        lines.append("every test ran")
    return (1 if hidden else 0), lines


def main(argv):
    if len(argv) < 2:
        print(__doc__.split("\n\n")[1].strip(), file=sys.stderr)
        return 2
    passes = []
    for build in argv[1:]:
        path = os.path.join(build, JUNIT)
        try:
            with open(path, encoding="utf-8") as f:
                junit_text = f.read()
        except OSError as e:
            print(f"check_summary: cannot read {path}: {e.strerror}", file=sys.stderr)
            return 2
        p = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"check_summary: ctest --show-only in {build} exited {p.returncode}: {p.stderr.strip()}",
                  file=sys.stderr)
            return 2
        passes.append((junit_text, p.stdout))
    rc, lines = summarise(passes)
    print("\n".join(lines))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
