"""/metrics stays a page Prometheus takes whatever bytes reach its labels: a GPU whose model name is
not UTF-8 (the driver's bytes) and a host name that is not UTF-8 (the kernel's bytes; set in a UTS
namespace of the test's own) must not reach a label value raw — promtool rejects the page ("invalid
label value") and Prometheus drops the whole scrape. Every label value goes through one sanitiser:
the page decodes as UTF-8 and `promtool check metrics` finds no error."""
import os
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from gstest import *  # noqa: E402,F401

PROMTOOL = os.environ.get("GS_PROMTOOL", "/usr/bin/promtool")
SIM = os.path.join(BUILD, "tests/gpusim/libnvidia-ml.so.1")
SCN = (b"# a GPU whose model name is not UTF-8\n"
       b"driver 550.54.15\n"
       b"device 0\n"
       b"  name NVIDIA \xff\xfe H100 \xc3\x28\n"
       b"  memory 81559MiB\n"
       b"  at 0 util=50 mem_used=2GiB power=200 temp=50\n")


def scrape(sb, host=None):
    """The first /metrics page with a GPU line of an agent on the scenario above (host: its host name,
    set in a new UTS namespace), as bytes."""
    scn = os.path.join(sb.dir, "badname.scn")
    with open(scn, "wb") as f:
        f.write(SCN)
    env = dict(sb.env, GPUSIM_SCENARIO=scn, GPUSCOPE_NVML_LIB=SIM)
    cmd = [BIN, "agent", "--listen", "127.0.0.1:0", "--interval", "200ms"]
    if host is not None:
        cmd = ["unshare", "--uts", PYTHON, "-c",
               "import os, socket, sys; socket.sethostname(bytes.fromhex(sys.argv[1])); os.execv(sys.argv[2], sys.argv[2:])",
               host.hex(), *cmd]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = p.stdout.readline().decode(errors="replace")
        check(line.startswith("gpuscope agent: metrics at http://127.0.0.1:"),
              f"no address line: {line!r} {p.stderr.read(2000) if p.poll() is not None else ''}")
        url = line.strip().rsplit(" ", 1)[1]
        body = b""
        for _ in range(100):  # a bounded wait for the first GPU sample, not a timing assertion
            with urllib.request.urlopen(url, timeout=10) as r:
                body = r.read()
            if b"DCGM_FI_DEV_FB_USED{" in body:
                break
            # the agent's stderr is read only once it has exited: an f-string here is evaluated on every
            # pass, and reading a live agent's stderr pipe blocked the test for ever (1 run in ~50)
            if p.poll() is not None:
                check(False, f"the agent exited: {p.stderr.read(2000)!r}")
            time.sleep(0.1)
        check(b"DCGM_FI_DEV_FB_USED{" in body, f"no GPU line in:\n{body[:2000]!r}")
        return body
    finally:
        p.terminate()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def promtool_ok(body):
    """promtool parses the page without an error. Its lint remarks (exit 3: dcgm-exporter's own label
    names, help texts) are test_prometheus.py's business; a page it cannot parse exits 1."""
    p = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True)
    out = (p.stdout + p.stderr).decode(errors="replace")
    check(p.returncode in (0, 3) and "error" not in out and "invalid" not in out,
          f"promtool: rc {p.returncode}\n{out[:2000]}")


def test_a_model_name_that_is_not_utf8_is_replaced_in_every_label():
    sb = Sandbox()
    try:
        body = scrape(sb)
        text = body.decode("utf-8")  # strict: raises on a raw byte
        check('modelName="NVIDIA \ufffd\ufffd H100 \ufffd("' in text, text[:3000])
        promtool_ok(body)
    finally:
        sb.close()


def test_a_host_name_that_is_not_utf8_is_replaced_in_every_label():
    sb = Sandbox()
    try:
        if subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode != 0:
            skip("cannot make a UTS namespace here (unshare --uts needs CAP_SYS_ADMIN) to set a host name")
        body = scrape(sb, host=b"node-\xff\x01-7")
        text = body.decode("utf-8")
        check('Hostname="node-\ufffd\ufffd-7"' in text or 'hostname="node-\ufffd\ufffd-7"' in text, text[:3000])
        promtool_ok(body)
    finally:
        sb.close()


if __name__ == "__main__":
    run_tests(globals())
