"""Plain attention functions that try to end, fool or corrupt the run (issue 31), named on the command line as
`tests.runner.hostile_kernels:NAME` (from the repository root). Never bundled: each runs in its own process.

`SDPA` is the honest computation each starts from; what follows it is the attack.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import tempfile
import time

import torch
import torch.nn.functional as F


def _sdpa(q, k, v, is_causal, scale):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=True)


def exits_0(q, k, v, is_causal=True, scale=None):
    sys.exit(0)


def exits_3(q, k, v, is_causal=True, scale=None):
    sys.exit(3)


class Escape(BaseException):
    """Not an Exception: `except Exception` in a harness would not see it."""


def raises_base_exception(q, k, v, is_causal=True, scale=None):
    raise Escape("the kernel's own BaseException")


def os_exits(q, k, v, is_causal=True, scale=None):
    os._exit(0)


def segfaults(q, k, v, is_causal=True, scale=None):
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def hangs_in_c(q, k, v, is_causal=True, scale=None):
    """Stuck where SIGALRM cannot reach it, as a thread is in a C call or a synchronize on a GPU kernel that
    never ends: the alarm is blocked, so the watchdog's handler never runs."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    while True:
        time.sleep(3600)


def changes_directory(q, k, v, is_causal=True, scale=None):
    os.chdir(tempfile.gettempdir())
    return _sdpa(q, k, v, is_causal, scale)


def prints(q, k, v, is_causal=True, scale=None):
    print("a kernel's own chatter on stdout")
    return _sdpa(q, k, v, is_causal, scale)


def writes_inputs(q, k, v, is_causal=True, scale=None):
    """Right output, then q = inf and k = 0 in place: what the next kernel would be handed."""
    out = _sdpa(q, k, v, is_causal, scale)
    q.fill_(float("inf"))
    k.zero_()
    return out


def watches_inputs(q, k, v, is_causal=True, scale=None):
    """Honest attention that refuses to run on what `writes_inputs` leaves behind."""
    if not bool(torch.isfinite(q).all()) or not bool(k.any()):
        raise RuntimeError("handed corrupted inputs: q holds inf or k is all zeros")
    return _sdpa(q, k, v, is_causal, scale)


def returns_float64(q, k, v, is_causal=True, scale=None):
    """Attention computed (and returned) in float64: more accurate than bf16, and another kernel."""
    return _sdpa(q.double(), k.double(), v.double(), is_causal, scale)


_calls = {"n": 0}


def writes_inputs_later(q, k, v, is_causal=True, scale=None):
    """Passes the gate honestly, then (from its 20th call, inside its timed chunks) zeroes k in place."""
    _calls["n"] += 1
    out = _sdpa(q, k, v, is_causal, scale)
    if _calls["n"] >= 20:
        k.zero_()
    return out


def honest(q, k, v, is_causal=True, scale=None):
    """Plain attention: a well-behaved user kernel, for endings that are the run's, not the kernel's."""
    return _sdpa(q, k, v, is_causal, scale)


def dies_on_quiet_inputs(q, k, v, is_causal=True, scale=None):
    """Honest on gaussian:1; its process dies (SIGSEGV) on the quieter gaussian:0.1 input (issue 41)."""
    if float(q.float().std()) < 0.5:
        ctypes.string_at(0)
    return _sdpa(q, k, v, is_causal, scale)


_writers: list = []


def leaves_a_writer(q, k, v, is_causal=True, scale=None):
    """Honest output, but its first call leaves a thread that keeps adding to q (issue 41): the next kernel's
    inputs must not be the ones it writes into. `stop_writers()` ends it (a thread inside a torch op when the
    interpreter exits aborts the process)."""
    import threading

    out = _sdpa(q, k, v, is_causal, scale)
    if not _writers:
        stop = threading.Event()

        def write():
            while not stop.is_set():
                q.add_(1.0)
                time.sleep(0.001)

        thread = threading.Thread(target=write, daemon=True)
        _writers.append((thread, stop))
        thread.start()
    return out


def stop_writers() -> None:
    for thread, stop in _writers:
        stop.set()
        thread.join(timeout=5)


def binary_stderr(q, k, v, is_causal=True, scale=None):
    """Honest, but writes bytes that are not UTF-8 to stderr on every call (adversarial round 3, B13)."""
    os.write(2, bytes(range(128, 256)) * 8 + b"\n")
    return _sdpa(q, k, v, is_causal, scale)


def forges_protocol(q, k, v, is_causal=True, scale=None):
    """Writes a forged `timed` message on every descriptor 3-19 it can (adversarial round 3, B14)."""
    for fd in range(3, 20):
        try:
            os.write(fd, b'{"event": "timed", "timing": {}}\n')
        except OSError:
            pass
    return _sdpa(q, k, v, is_causal, scale)
