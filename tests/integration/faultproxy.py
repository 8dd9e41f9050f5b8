"""A fault-injecting TCP proxy for the store fault tests (standard library only).

    FaultProxy(target_port) listens on a free loopback port (bind port 0) and forwards every
    connection to 127.0.0.1:target_port, in threads of the test's own process. set_mode(mode)
    changes what it does, at once, to the connections open and to the ones that come:

      pass       forward both ways (the start)
      drop       close every open connection in order (FIN both ways), as a server or a middle box
                 that closes without notice would; new connections are forwarded
      reset      abort every open connection (RST both ways: SO_LINGER 0); new ones are forwarded
      blackhole  read and forward nothing more, either way: the sockets stay open and nothing
                 answers (a network partition without RST); new connections are accepted and held
                 the same way; back to pass, what was held flows again (the partition heals)
      slow       forward, each piece of data held `delay` seconds first (a congested link)

    close() stops it and closes every socket. held() says how many connections are held open."""
import socket
import threading
import time


class FaultProxy:
    def __init__(self, target_port, delay=0.05):
        self.target = ("127.0.0.1", target_port)
        self.delay = delay
        self.mode = "pass"
        self.lock = threading.Lock()
        self.conns = []  # (client socket, server socket) pairs still open
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.port = self.lsock.getsockname()[1]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def set_mode(self, mode):
        with self.lock:
            self.mode = mode
            pairs = list(self.conns) if mode in ("drop", "reset") else []
            if pairs:
                self.conns = []
        for c, s in pairs:
            for sock in (c, s):
                if mode == "reset":
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                else:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                try:
                    sock.close()
                except OSError:
                    pass

    def held(self):
        with self.lock:
            return len(self.conns)

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(self.target, timeout=10)
                s.settimeout(None)
            except OSError:
                c.close()  # the server is not there: the client sees a closed connection
                continue
            with self.lock:
                self.conns.append((c, s))
            threading.Thread(target=self._pump, args=(c, s), daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c), daemon=True).start()

    def _pump(self, src, dst):
        while True:
            if self.mode == "blackhole":  # held: nothing read, nothing forwarded, nothing closed
                if self.closed:
                    return
                time.sleep(0.05)
                continue
            try:
                data = src.recv(65536)
            except OSError:
                return
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            if self.mode == "slow":
                time.sleep(self.delay)
            while self.mode == "blackhole" and not self.closed:  # cut while this piece was on its way
                time.sleep(0.05)
            try:
                dst.sendall(data)
            except OSError:
                return

    def close(self):
        self.closed = True
        try:
            self.lsock.close()
        except OSError:
            pass
        self.set_mode("drop")
