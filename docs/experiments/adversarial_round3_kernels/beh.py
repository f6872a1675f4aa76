"""Kernels that misbehave in their process (adversarial round 3)."""
import os
import signal
import subprocess
import sys
import threading
import time

import torch
import torch.nn.functional as F


def _s(q, k, v, is_causal, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=True)


def grandchild_then_die(q, k, v, is_causal=True, scale=None):
    """Starts a process that inherits stdout/stderr and outlives it, then its own process dies."""
    subprocess.Popen(["sleep", "300"])
    os._exit(7)


def kills_parent(q, k, v, is_causal=True, scale=None):
    os.kill(os.getppid(), signal.SIGTERM)
    return _s(q, k, v, is_causal, scale)


def kills_own_group(q, k, v, is_causal=True, scale=None):
    os.killpg(os.getpgid(0), signal.SIGKILL)


def own_alarm(q, k, v, is_causal=True, scale=None):
    signal.signal(signal.SIGALRM, signal.SIG_IGN)
    signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
    return _s(q, k, v, is_causal, scale)


def ignores_sigint(q, k, v, is_causal=True, scale=None):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    return _s(q, k, v, is_causal, scale)


def default_dtype_f64(q, k, v, is_causal=True, scale=None):
    torch.set_default_dtype(torch.float64)
    return _s(q, k, v, is_causal, scale)


def closes_stderr(q, k, v, is_causal=True, scale=None):
    os.close(2)
    return _s(q, k, v, is_causal, scale)


def closes_stdout_fd(q, k, v, is_causal=True, scale=None):
    os.close(1)
    return _s(q, k, v, is_causal, scale)


def recursion(q, k, v, is_causal=True, scale=None):
    return recursion(q, k, v, is_causal, scale)


def memory_error(q, k, v, is_causal=True, scale=None):
    raise MemoryError("cannot allocate 1 TB")


def generator_exit(q, k, v, is_causal=True, scale=None):
    raise GeneratorExit()


def thread_raises(q, k, v, is_causal=True, scale=None):
    def boom():
        raise RuntimeError("from a thread")
    threading.Thread(target=boom).start()
    return _s(q, k, v, is_causal, scale)


def stops_itself(q, k, v, is_causal=True, scale=None):
    os.kill(os.getpid(), signal.SIGSTOP)
    return _s(q, k, v, is_causal, scale)


def binary_stderr(q, k, v, is_causal=True, scale=None):
    os.write(2, bytes(range(256)) * 4 + b"\n")
    return _s(q, k, v, is_causal, scale)


def fake_protocol_line(q, k, v, is_causal=True, scale=None):
    """Prints what looks like the child protocol's JSON on every fd it can find."""
    for fd in range(3, 20):
        try:
            os.write(fd, b'{"event": "timed", "timing": {}}\n')
        except OSError:
            pass
    return _s(q, k, v, is_causal, scale)


def sets_threads(q, k, v, is_causal=True, scale=None):
    torch.set_num_threads(64)
    return _s(q, k, v, is_causal, scale)


def slow_first_call(q, k, v, is_causal=True, scale=None):
    if not getattr(slow_first_call, "done", False):
        slow_first_call.done = True
        time.sleep(3)
    return _s(q, k, v, is_causal, scale)


def exit_in_thread(q, k, v, is_causal=True, scale=None):
    threading.Thread(target=lambda: sys.exit(5)).start()
    return _s(q, k, v, is_causal, scale)


def unicode_name_é(q, k, v, is_causal=True, scale=None):
    return _s(q, k, v, is_causal, scale)


def exits_3(q, k, v, is_causal=True, scale=None):
    sys.exit(3)


_calls = {"n": 0}


def zeros_after_gate(q, k, v, is_causal=True, scale=None):
    _calls["n"] += 1
    o = _s(q, k, v, is_causal, scale)
    return o if _calls["n"] <= 6 else torch.zeros_like(o)


def dies_on_quiet(q, k, v, is_causal=True, scale=None):
    if float(q.float().std()) < 0.5:
        os.kill(os.getpid(), signal.SIGKILL)
    return _s(q, k, v, is_causal, scale)
