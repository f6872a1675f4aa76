"""A `$PYTHON` for the shell steps the suite runs as written (docs/ci/kernel-repo.yml's job, ci/nightly.sh): each
`"$PYTHON" -m harness ...` of a step is forked from the harness's preloaded helper (harness.workers.preloaded_popen)
instead of importing torch afresh (1.3-3 s a command, eight commands a workflow run).

`forked_python(folder)` writes `folder/python`, a launcher that runs forked_python_client.py (the standard library
only) with the step's argv, working directory, environment and stdin/stdout/stderr; the server thread here starts
`[sys.executable, *argv]` with them (forked when argv is `-m module ...`, as Popen otherwise) and sends back its exit
status. Signals are not relayed: the steps it serves are run to their end."""

from __future__ import annotations

import json
import os
import shlex
import socket
import struct
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from harness.workers import preloaded_popen

__all__ = ["forked_python"]

CLIENT = Path(__file__).with_name("forked_python_client.py")


def _serve(conn: socket.socket) -> None:
    fds: list[int] = []
    try:
        head, fds, _, _ = socket.recv_fds(conn, 4, 3)
        (n,) = struct.unpack("!I", head)
        data = b""
        while len(data) < n:
            data += conn.recv(n - len(data))
        req = json.loads(data)
        proc = preloaded_popen([sys.executable, *req["argv"]], stdin=fds[0], stdout=fds[1], stderr=fds[2],
                               cwd=req["cwd"], env=req["env"])
        for fd in fds:
            os.close(fd)
        fds = []
        code = proc.wait()
    except Exception as exc:  # the step sees a failed command with the reason, never a hang
        print(f"forked_python: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 127
    finally:
        for fd in fds:
            os.close(fd)
    try:
        conn.sendall(str(code).encode())
    finally:
        conn.close()


@contextmanager
def forked_python(folder: Path) -> Iterator[str]:
    """The path of a `python` to give the steps as $PYTHON, served while the block runs."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "s.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(8)
    launcher = folder / "python"
    launcher.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -S -I {shlex.quote(str(CLIENT))} '
                        f'{shlex.quote(str(path))} "$@"\n')
    launcher.chmod(0o755)

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return  # closed: the block ended
            threading.Thread(target=_serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield str(launcher)
    finally:
        srv.close()
        path.unlink(missing_ok=True)
