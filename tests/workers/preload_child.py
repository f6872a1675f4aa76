"""A child for tests/workers/test_preload.py: says what it sees, then does what its first argument asks."""

import gc
import json
import os
import random
import signal
import subprocess
import sys
import time

preloaded = "torch" in sys.modules  # before anything here imports it: what the process started with

if __name__ == "__main__":
    what = sys.argv[1]
    print(json.dumps({"preloaded": preloaded, "argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0],
                      "env": os.environ.get("PRELOAD_TEST"), "sid": os.getsid(0), "pid": os.getpid(),
                      "random": random.random(), "main": __name__, "file": __file__, "ppid": os.getppid(),
                      "conn": os.environ.get("HARNESS_PRELOAD_CONN"), "frozen": gc.get_freeze_count()}), flush=True)
    if what == "echo":
        for line in sys.stdin:
            print("echo " + line.strip(), flush=True)
    elif what == "exit":
        sys.exit(int(sys.argv[2]))
    elif what == "raise":
        raise RuntimeError("raised in the child")
    elif what == "signal":
        os.kill(os.getpid(), signal.SIGKILL)
    elif what == "stderr":
        print("to stderr", file=sys.stderr)
    elif what == "big":  # more than a pipe holds, on both streams
        sys.stdout.write("o" * 300000)
        sys.stderr.write("e" * 300000)
    elif what == "sleep":
        time.sleep(60)
    elif what == "nested":  # a parent itself: its child through the preloaded path, with argv[2:] put in its env
        from harness.workers import _preload

        env = dict(os.environ, **dict(kv.split("=", 1) for kv in sys.argv[2:]))
        proc = _preload.preloaded_popen([sys.executable, "-m", "tests.workers.preload_child", "exit", "0"],
                                        stdout=subprocess.PIPE, text=True, env=env)
        seen = json.loads(proc.stdout.readline())
        print(json.dumps({"nested": seen, "code": proc.wait(timeout=60), "forked": type(proc).__name__,
                          "conn_left": os.environ.get(_preload.CONN_VAR)}), flush=True)
    elif what == "grandchild":  # a process of its own group that outlives nothing: killed with the group
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(json.dumps({"grandchild": p.pid}), flush=True)
        time.sleep(60)
