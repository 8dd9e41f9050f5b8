"""Alerts' delivery when the receiver is not well (src/alert/deliver.c, docs/alerts.md): four alerts at
once into a webhook that accepts and never answers, or refuses, cost dropped and failed alerts,
counted in the run's params and summary, and not one tick of the agent's (counted in the store
against the run's length); a webhook goes through the proxy the environment names; an https
receiver with a certificate no one trusts is refused (TLS verified). And the node agent (`agent
--record`) alerts on its node run as `run` does."""
from alertlib import *


def ticks_match_the_run(w, held_s):
    """The agent's own ticks: host.mem.used_bytes is read once per tick; a sampling loop held by a
    delivery would skip the ticks of that delivery's whole wait (it never shifts its grid: it skips
    the missed ones), a gap of at least held_s (one delivery's timeout). A loaded machine delays a
    tick, and may skip a few here and there, but the loop was held by no delivery when no gap
    between consecutive ticks is that long."""
    ts = sorted(float(r["t_s"]) for r in w.rows("--metric", "host.mem.used_bytes"))
    check(len(ts) >= 10, f"the run has {len(ts)} ticks")
    gaps = [b - a for a, b in zip(ts, ts[1:])]
    check(max(gaps) < held_s, f"a gap of {max(gaps):.2f} s between ticks (a delivery's timeout: {held_s} s) among "
          f"{len(ts)} ticks over {ts[-1] - ts[0]:.1f} s: sampling was held")


def _unanswered(make_url, what):
    """Four idle GPUs fire four alerts at once into a receiver that does not take them."""
    sb = Sandbox()
    url, srv = make_url()
    w = Watched(sb, "dead", ["--alert", "gpu_idle<10%:for=1s", "--alert-webhook", url, "--alert-set", "timeout=1s",
                             "--alert-set", "retries=1", "--alert-set", "queue=1"], gpus=4, u0=0)
    try:
        w.wait(lambda: len([r for r in w.rows("--events") if r["kind"] == "alert"]) == 4, "four alerts in the events")
        w.wait(lambda: len(w.rows("--metric", "host.mem.used_bytes")) >= 30, "a few more ticks")
        check(w.finish() == 0, "the run exits 0:\n" + w.out)
        ticks_match_the_run(w, 1.0)  # timeout=1s
        p = params(sb, "dead")
        check(p.get("alert.fired") == "4" and int(p.get("alert.dropped", "0")) >= 2,
              f"4 fired, the queue of 1 dropped some ({what}): {p}")
        check(p.get("alert.sent") == "0", f"none sent to a receiver that {what}: {p}")
        check("dropped" in w.out and "alerts: 4 fired" in w.out, "the summary says so:\n" + w.out)
        return p
    finally:
        w.close()
        if srv:
            srv.close()
        sb.close()


def test_a_receiver_that_hangs_costs_dropped_alerts_not_ticks():
    def hanging():
        h = Hanging()
        return h.url, h
    _unanswered(hanging, "never answers")


def test_a_receiver_that_refuses_costs_failed_and_dropped_alerts_not_ticks():
    p = _unanswered(lambda: (refused_url(), None), "refuses")
    check(int(p.get("alert.failed", "0")) >= 1, f"a refused delivery counts as failed: {p}")


def test_a_webhook_goes_through_the_proxy_the_environment_names():
    sb, rx = Sandbox(), Receiver()
    try:
        rc, _, err = sb.gs("run", "--alert", "exit", "--alert-webhook", "http://alerts.invalid/hook", "--", "sh", "-c",
                           "exit 3", env={"http_proxy": rx.url, "no_proxy": ""})
        check(rc == 3, f"the run exits with the job's status: {rc}\n{err}")
        with rx.lock:
            paths = [p for p, _ in rx.posts]
        check(paths == ["http://alerts.invalid/hook"], f"the proxy got the absolute URL, once: {paths}\n{err}")
        check(rx.got()[0]["title"] == "the run failed" and "status 3" in rx.got()[0]["text"], rx.got())
    finally:
        rx.close()
        sb.close()


def test_an_https_webhook_with_a_certificate_no_one_trusts_is_refused():
    import shutil
    import ssl
    openssl = shutil.which("openssl")
    if not openssl:
        skip("openssl (Debian's openssl) makes the test's certificate")
    sb, rx = Sandbox(), Receiver()
    try:
        key, crt = os.path.join(sb.dir, "k.pem"), os.path.join(sb.dir, "c.pem")
        subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
                        "-days", "1", "-subj", "/CN=127.0.0.1"], check=True, capture_output=True)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(crt, key)
        rx.srv.socket = ctx.wrap_socket(rx.srv.socket, server_side=True)
        port = rx.srv.server_address[1]
        rc, _, err = sb.gs("run", "--alert", "exit", "--alert-webhook", f"https://127.0.0.1:{port}/hook",
                           "--alert-set", "retries=0", "--", "sh", "-c", "exit 4")
        check(rc == 4, f"the run exits with the job's status: {rc}\n{err}")
        check(not rx.got() and "1 failed" in err and "certificate" in err.lower(),
              "the self-signed receiver never got the alert; the summary says why:\n" + err)
    finally:
        rx.close()
        sb.close()



def test_the_node_agent_alerts_on_its_recorded_run():
    sb, rx = Sandbox(), Receiver()
    scn = os.path.join(sb.dir, "node.scn")
    with open(scn, "w") as f:
        f.write("device 0\n  name NVIDIA H100 PCIe\n  memory 81559MiB\n  at 0 util=0 mem_used=1GiB power=50\n")
    env = dict(sb.env, GPUSCOPE_NVML_LIB=SIM, GPUSIM_SCENARIO=scn)
    p = subprocess.Popen([BIN, "agent", "--record", "--name", "node", "--listen", "127.0.0.1:0", "--interval", "0.2s",
                          "--alert", "gpu_idle<10%:for=1s", "--alert-every", "0.5s", "--alert-webhook", rx.url],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: rx.got(), "the node agent's alert", timeout=120, proc=p, every=0.1)
        p.terminate()
        out, err = p.communicate(timeout=120)
        check(p.returncode == 0, f"the agent exits 0 on SIGTERM: {p.returncode}\n{err}")
        got = [(b["state"], b["rule"], b["labels"], b["run"]["name"]) for b in rx.got()]
        check(got == [("firing", "gpu_idle", "gpu=0", "node"), ("resolved", "gpu_idle", "gpu=0", "node")],
              f"one firing, resolved when the agent stops: {got}")
        check("alerts: 1 fired, 1 resolved; 2 sent" in err, "its summary line:\n" + err)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
        rx.close()
        sb.close()


run_tests(globals())
