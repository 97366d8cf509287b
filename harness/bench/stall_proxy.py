#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 for fault benchmarks (harness/bench/farm_soak.sh).

Usage: stall_proxy.py LISTEN_PORT TARGET_PORT

Forwards each accepted connection to 127.0.0.1:TARGET_PORT in a forked child
of its own, so a fault injector can stall one live connection with SIGSTOP on
that child (`pgrep -P PROXY_PID`): both directions stop, and when the host
gives up on the silent peer and closes its side, the agent's side stays open
(a half-open connection as the agent sees it) until the child is killed.
Prints "listening on 127.0.0.1:PORT" once it accepts. Exits on SIGTERM; its
children die with it (PR_SET_PDEATHSIG).
"""
import ctypes
import os
import selectors
import signal
import socket
import sys

PR_SET_PDEATHSIG = 1


def forward(client: socket.socket, target_port: int) -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        upstream = socket.create_connection(("127.0.0.1", target_port))
    except OSError:
        return
    sel = selectors.DefaultSelector()
    sel.register(client, selectors.EVENT_READ, upstream)
    sel.register(upstream, selectors.EVENT_READ, client)
    while True:
        for key, _ in sel.select():
            data = key.fileobj.recv(65536)
            if not data:
                return
            key.data.sendall(data)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    listen_port, target_port = int(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen_port))
    server.listen(64)
    print(f"listening on 127.0.0.1:{server.getsockname()[1]}", flush=True)
    while True:
        client, _ = server.accept()
        if os.fork() == 0:
            server.close()
            try:
                forward(client, target_port)
            finally:
                os._exit(0)
        client.close()


if __name__ == "__main__":
    sys.exit(main())
