"""The `$PYTHON` of tests/workers/forked_python.py: hands its argv, working directory, environment and stdio to
the test process's server, which forks `python ARGS` from the preloaded helper, and exits with its status.
Run as `python -S -I forked_python_client.py SOCKET ARGS...`: the standard library only, no site, no torch."""

import json
import os
import signal
import socket
import struct
import sys


def main() -> None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(sys.argv[1])
    data = json.dumps({"argv": sys.argv[2:], "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(sock, [struct.pack("!I", len(data))], [0, 1, 2])
    sock.sendall(data)
    reply = b""
    while chunk := sock.recv(64):
        reply += chunk
    code = int(reply or b"127")
    if code < 0:  # ended by a signal: end by it too, as the shell would see it
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    sys.exit(code & 0xFF)


if __name__ == "__main__":  # never on import (pytest's --doctest-modules imports every file)
    main()
