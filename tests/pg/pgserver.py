"""A throw-away PostgreSQL server for the tests that need one (standard library only).

    PgServer() makes a cluster with initdb in a temp folder and starts it on a free loopback port
    (TCP only, no Unix socket), as the user `nobody` when the tests run as root (PostgreSQL refuses
    root; CI runs as root). Its superuser is `gpuscope` with a password, which clients read from a
    libpq password file (PGPASSFILE, mode 0600): the credentials travel the libpq way, never in a URL.
    stop() and start() stop and start the same cluster (the outage tests); close() stops it and
    removes the folder.

As a program, it runs a command with a server up and GS_TEST_STORE_URL / PGPASSFILE set:

    python3 tests/pg/pgserver.py -- CMD ARGS...    (exit status: CMD's)

fsync is off (a test server's data is thrown away; GS_PG_FSYNC=on for benchmarks). The server's
binaries are found in $GS_PG_BINDIR, else `pg_config --bindir`, else
/usr/lib/postgresql/*/bin."""
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PASSWORD = "s3cret-pw-7h"  # the tests check it is never printed
USER = "gpuscope"


def bindir():
    d = os.environ.get("GS_PG_BINDIR")
    if d and os.path.exists(os.path.join(d, "initdb")):
        return d
    try:
        d = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True).stdout.strip()
        if d and os.path.exists(os.path.join(d, "initdb")):
            return d
    except OSError:
        pass
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return os.path.dirname(found[-1])
    raise RuntimeError("no PostgreSQL server binaries (install the Debian package postgresql)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    def __init__(self):
        self.bin = bindir()
        self.dir = tempfile.mkdtemp(prefix="gs-pg-")
        os.chmod(self.dir, 0o755)
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "server.log")
        self.port = free_port()
        self.as_user = None
        if os.geteuid() == 0:
            self.as_user = "nobody"
            nobody = pwd.getpwnam("nobody")
            os.mkdir(self.data, 0o700)
            os.chown(self.data, nobody.pw_uid, nobody.pw_gid)
            open(self.log, "w").close()
            os.chown(self.log, nobody.pw_uid, nobody.pw_gid)
        pwfile = os.path.join(self.dir, "pw")
        with open(pwfile, "w") as f:
            f.write(PASSWORD + "\n")
        os.chmod(pwfile, 0o644)
        self._run("initdb", "-D", self.data, "-U", USER, "--pwfile", pwfile, "--auth-host=scram-sha-256",
                  "--auth-local=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
        os.unlink(pwfile)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write(f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\nunix_socket_directories = ''\n"
                    f"fsync = {os.environ.get('GS_PG_FSYNC', 'off')}\nmax_connections = 100\n"
                    "shared_buffers = 128MB\n")
        self.passfile = os.path.join(self.dir, "pgpass")
        with open(self.passfile, "w") as f:
            f.write(f"127.0.0.1:{self.port}:*:{USER}:{PASSWORD}\n")
        os.chmod(self.passfile, 0o600)
        self.start()

    def _run(self, prog, *args):
        cmd = [os.path.join(self.bin, prog), *args]
        if self.as_user:
            cmd = ["runuser", "-u", self.as_user, "--", *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=self.dir)
        if r.returncode != 0:
            raise RuntimeError(f"{prog} failed ({r.returncode}): {r.stdout}{r.stderr}")
        return r

    def start(self):
        self._run("pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "start")

    def stop(self):
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "-t", "60", "stop")

    def url(self, db="gpuscope"):
        """A URL without a password: libpq finds it in the password file (env())."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{db}"

    def env(self, base=None):
        e = dict(os.environ if base is None else base)
        e["PGPASSFILE"] = self.passfile
        for k in ("PGPASSWORD", "PGSERVICE", "PGHOST", "PGPORT", "PGDATABASE", "PGUSER"):
            e.pop(k, None)
        return e

    def psql(self, sql, db="gpuscope"):
        """Runs sql with psql; returns its unaligned, tuples-only output."""
        r = subprocess.run([os.path.join(self.bin, "psql"), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d",
                            self.url(db), "-c", sql], capture_output=True, text=True, env=self.env())
        if r.returncode != 0:
            raise RuntimeError(f"psql failed: {r.stderr}")
        return r.stdout.strip()

    def close(self):
        try:
            self.stop()
        except RuntimeError:
            pass
        if not os.environ.get("GS_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def main(argv):
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print("usage: pgserver.py -- CMD [ARGS...]", file=sys.stderr)
        return 2
    cmd = argv[argv.index("--") + 1:]
    # a ctest timeout or a ^C stops the server too: SIGTERM unwinds through the with block
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with PgServer() as pg:
        env = pg.env()
        # the store suite appends each test's own name: one database per test, made by the store
        env["GS_TEST_STORE_URL"] = f"postgresql://{USER}@127.0.0.1:{pg.port}/gs_test_"
        return subprocess.run(cmd, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
