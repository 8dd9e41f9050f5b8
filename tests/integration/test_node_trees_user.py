"""The node agent and a process of another user (the half of test_node_trees.py that needs root, in
a script of its own so that its skip elsewhere skips nothing else): an agent running as `nobody`
watches root's GPU process. Its stat is readable, its io file is not, so the tree has its process
count and CPU but no I/O line — never a 0 for what could not be read."""
import os
import pwd
import signal
import sys

sys.path.insert(0, os.path.dirname(__file__))
from gstest import *  # noqa: E402,F401
from test_metrics import get, stop, wait_for  # noqa: E402
from test_node_trees import dead_pid, start_agent, start_job, tree_of  # noqa: E402

sandbox = shared_sandbox()


def test_another_users_process_has_no_io_line():
    sb = sandbox()
    if os.geteuid() != 0:
        skip("needs root: an agent as an unprivileged user watching root's process")
    nobody = pwd.getpwnam("nobody").pw_uid
    job = start_job(sb)
    os.chmod(sb.dir, 0o755)
    try:
        agent, url = start_agent(sb, job, dead_pid(), user=nobody)
    except (AssertionError, PermissionError) as e:
        job.kill()
        skip(f"the agent cannot run as nobody here: {e}")
    try:
        body = wait_for(lambda: (lambda b: b if tree_of(b, job.pid)["gpuscope_tree_cpu_ratio"] else None)(get(url)[1]),
                        60, "no CPU for root's process from an agent running as nobody")
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=30)
        stop(agent)
    io = [l for l in body.splitlines() if "_bytes_per_second" in l and f'pid="{job.pid}"' in l]
    check(not io, f"I/O lines for a process whose io cannot be read: {io}")
    check(tree_of(body, job.pid)["gpuscope_tree_procs"][0][1] == 3, "processes of root's tree")


if __name__ == "__main__":
    run_tests(globals())
