"""The preloaded helper's program (harness/workers/_preload.py starts it by its path: `python _helper_main.py FD
MODULES`). It imports MODULES, then serves requests on the socket FD: fork a child that becomes `python -m module`
with the request's stdio, working directory, environment, argv and session, reply with its pid, and report each
child's exit status when it ends.

Each child gets a connection of its own to this helper (a socket whose descriptor, the child's pid and the
request's key are in HARNESS_PRELOAD_CONN), so that a child that is itself a parent (`bench sustained` run by a
test, a `bench commits` revision, a nested pytest session) forks its children here too instead of starting a
helper of its own: each such helper imported torch again, 1.3-3 s on the critical path of every nested command.
Requests come on any connection and their replies and exit statuses go back on that one. The helper ends when
every connection is closed: its first parent's, and those of the children (each closes at the child's exit).

Not a module of the harness's import graph: it imports only the standard library and MODULES, so a child (a
`bench commits` revision) imports its own harness."""

import atexit
import gc
import io
import json
import os
import random
import runpy
import select
import signal
import socket
import struct
import sys
import threading

conns: list = []  # the sockets served: the first parent's, then each child's own (set by main())
base_path: list = []  # the interpreter's own sys.path entries, without the parent's PYTHONPATH


def send(conn, msg):
    data = json.dumps(msg).encode()
    try:
        conn.sendall(struct.pack("!I", len(data)) + data)
    except OSError:  # the client is gone: what it asked for is nobody's to read
        drop(conn)


def drop(conn):
    if conn in conns:
        conns.remove(conn)
        conn.close()


def recv_request(sock):
    head, fds, _, _ = socket.recv_fds(sock, 4, 3)
    fds = list(fds)
    if not head:
        return None, []
    while len(head) < 4:
        more = sock.recv(4 - len(head))
        if not more:
            return None, fds
        head += more
    (n,) = struct.unpack("!I", head)
    data = b""
    while len(data) < n:
        more = sock.recv(n - len(data))
        if not more:
            return None, fds
        data += more
    return json.loads(data), fds


def child(req, fds, own):
    for conn in conns:
        conn.close()
    if req["new_session"]:
        os.setsid()
    for target, fd in zip((0, 1, 2), fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    # this child's connection: its pid, so a process that inherits the variable but not the socket (started any
    # other way) ignores it; the key, so it serves only children whose import-time environment is the helper's
    os.environ["HARNESS_PRELOAD_CONN"] = f"{own.detach()}:{os.getpid()}:{req.get('key', '')}"
    extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd()] + extra + base_path
    # stdio afresh on the new descriptors, as the interpreter makes them (line-buffered text on a terminal)
    def stream(fd, mode, like, line_buffering):
        raw = io.FileIO(fd, mode, closefd=False)
        buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
        return io.TextIOWrapper(buffered, encoding=like.encoding, errors=like.errors, line_buffering=line_buffering,
                                write_through=unbuffered and mode == "w")
    unbuffered = sys.stdout.write_through  # -u / PYTHONUNBUFFERED, which the helper was started with
    sys.stdin = stream(0, "r", sys.stdin, False)
    sys.stdout = stream(1, "w", sys.stdout, os.isatty(1))
    sys.stderr = stream(2, "w", sys.stderr, True)
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    code = 0
    try:
        sys.argv = [req["module"], *req["args"]]
        runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        c = exc.code
        if c is None:
            code = 0
        elif isinstance(c, int):
            code = c
        else:
            print(c, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        code = -signal.SIGINT
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    try:
        threading._shutdown()  # non-daemon threads, as the interpreter waits for them at its exit
    except Exception:
        pass
    try:
        atexit._run_exitfuncs()
    except Exception:
        pass
    for out in (sys.stdout, sys.stderr):
        try:
            out.flush()
        except Exception:
            pass
    if code < 0:  # an interrupt ends the process by its signal, as the interpreter does
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


def main() -> None:
    global base_path
    conns.append(socket.socket(fileno=int(sys.argv[1])))
    for name in sys.argv[2].split(","):
        if name:
            try:
                __import__(name)
            except Exception:
                pass  # the child imports it itself, and meets the error where it would without the helper
    if "torch" in sys.modules and sys.modules["torch"].cuda.is_initialized():
        sys.exit(0)  # a device initialised before the fork would be unusable in every child: serve none
    # The preloaded modules' objects (torch's: about 170,000) go to the permanent generation, which no
    # collection traverses: in a child a full collection took 60 ms with them and 7 ms without, and one falls in
    # a child's imports (0.26 -> 0.17 s for the runner's and the CLI's) or in its timed launches at any time.
    # Nor do the children's collections write to those objects' headers, so their pages stay shared (gc.freeze
    # is made for pre-fork servers; collected first, so no garbage is frozen).
    gc.collect()
    gc.freeze()
    base_path = sys.path[1:]  # without this script's folder (a child's first entry is its working directory)
    own_pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    base_path = [p for p in base_path if p not in own_pythonpath]
    owner = {}  # pid -> the connection that asked for it, where its exit status goes
    while conns:
        ready, _, _ = select.select(conns, [], [], 0.05 if owner else 1.0)
        for conn in ready:
            try:
                req, fds = recv_request(conn)
            except OSError:
                req, fds = None, []
            if req is None:
                for fd in fds:
                    os.close(fd)
                drop(conn)
                continue
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                pid = os.fork()
            except OSError as exc:
                pid = None
                send(conn, {"error": str(exc)})
            if pid == 0:
                ours.close()
                child(req, fds, theirs)
            theirs.close()
            for fd in fds:
                os.close(fd)
            if pid is None:
                ours.close()
                continue
            conns.append(ours)
            owner[pid] = conn
            send(conn, {"pid": pid})
        while owner:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = owner.pop(pid, None)
            if conn in conns:
                send(conn, {"exit": pid, "code": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    main()
