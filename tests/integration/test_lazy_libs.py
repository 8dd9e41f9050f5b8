"""libpq, libmicrohttpd and libcurl are loaded on first use (store/pq_api.c, serve/mhd_api.c,
alert/curl_api.c): a run into SQLite without --listen never maps them, nor a run whose alerts have a
webhook but have not fired, and when one cannot be loaded the command that needs it
fails with one line naming the Debian package, never a crash."""
from gstest import *

# The job reads its parent's (the agent's) memory map while the agent is sampling, then exits.
_MAPS_JOB = r'''
import os, sys
with open(f"/proc/{os.getppid()}/maps") as f, open(sys.argv[1], "w") as out:
    out.write(f.read())
'''


def _agent_maps(sb, *run_args):
    job = os.path.join(sb.dir, "maps_job.py")
    with open(job, "w") as f:
        f.write(_MAPS_JOB)
    maps = os.path.join(sb.dir, "maps.txt")
    sb.ok("run", *run_args, "--", PYTHON, job, maps)
    with open(maps) as f:
        return f.read()


def test_a_sqlite_run_maps_neither_libpq_nor_libmicrohttpd():
    sb = Sandbox()
    try:
        maps = _agent_maps(sb)
        check("libsqlite3" in maps, "the map was read from the agent (it holds SQLite):\n" + maps[:2000])
        for lib in ("libpq.so", "libmicrohttpd.so", "libcurl", "libssl", "libgnutls", "libkrb5", "libldap"):
            check(lib not in maps, f"a SQLite run without --listen maps {lib}")
    finally:
        sb.close()


def test_a_run_with_a_webhook_maps_libcurl_only_once_an_alert_goes_out():
    sb = Sandbox()
    try:
        maps = _agent_maps(sb, "--alert", "exit", "--alert-webhook", "http://127.0.0.1:9/")
        check("libsqlite3" in maps, "the map was read from the agent")
        for lib in ("libcurl", "libssl", "libnghttp2"):
            check(lib not in maps, f"a run whose alert has not fired maps {lib}")
    finally:
        sb.close()


def test_a_missing_libcurl_is_a_failed_alert_naming_the_package_not_a_failed_run():
    sb = Sandbox()
    try:
        rc, out, err = sb.gs("run", "--alert", "exit", "--alert-webhook", "http://127.0.0.1:9/", "--", "sh", "-c",
                             "exit 3", env={"GPUSCOPE_LIBCURL": os.path.join(sb.dir, "no-libcurl.so.4")})
        check(rc == 3, f"the run exits with the job's status: {rc}\n{err}")
        check("1 failed" in err and "install the Debian package libcurl4" in err,
              "the summary says the alert failed and names libcurl4:\n" + err)
    finally:
        sb.close()


def test_a_run_with_listen_maps_libmicrohttpd_only():
    sb = Sandbox()
    try:
        maps = _agent_maps(sb, "--listen", "127.0.0.1:0")
        check("libmicrohttpd.so" in maps, "--listen loads libmicrohttpd")
        check("libpq.so" not in maps, "--listen into SQLite does not load libpq")
    finally:
        sb.close()


def test_a_missing_libpq_is_one_line_naming_the_package():
    sb = Sandbox()
    try:
        rc, out, err = sb.gs("runs", "--store", "postgresql://127.0.0.1:1/none",
                             env={"GPUSCOPE_LIBPQ": os.path.join(sb.dir, "no-libpq.so.5")})
        check(rc != 0 and rc < 128, f"exit {rc}: an error, not a crash")
        lines = [l for l in err.splitlines() if l.strip()]
        check(len(lines) == 1 and "libpq5" in lines[0], "one line naming libpq5:\n" + err)
    finally:
        sb.close()


def test_a_missing_libmicrohttpd_is_one_line_naming_the_package():
    sb = Sandbox()
    try:
        sb.ok("run", "--", "true")
        rc, out, err = sb.gs("serve", "--listen", "127.0.0.1:0",
                             env={"GPUSCOPE_LIBMHD": os.path.join(sb.dir, "no-mhd.so.12")}, timeout=30)
        check(rc != 0 and rc < 128, f"exit {rc}: an error, not a crash")
        lines = [l for l in err.splitlines() if l.strip()]
        check(len(lines) == 1 and "libmicrohttpd12" in lines[0], "one line naming libmicrohttpd12:\n" + err)
    finally:
        sb.close()


run_tests(globals())
