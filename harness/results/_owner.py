"""Which process writes a run, and whether it is still there: a run left `running` by a process that is gone.

Every way a run ends writes its status, except the ones no process can catch: SIGKILL, the out-of-memory
killer, a power cut, and `os._exit` or a crash in kernel code run in the run's own process (`--isolation
none`). Such a run stays `running` on disk forever. So the writer records who it is in `.owner.json` beside
runs.parquet (pid, host, and the process's start time, which tells a reused pid from the same process), and
readers (`bench list runs`, `bench report`, `read_run`) ask whether that process still runs: on this host, a
pid that is gone or now belongs to another process means the run was abandoned. On another host nothing can
be checked, and the text says so.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

__all__ = ["OWNER_FILE", "owner_facts", "write_owner", "run_process_state"]

OWNER_FILE = ".owner.json"


def _start_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
        return int(text[text.rindex(")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def owner_facts() -> dict:
    pid = os.getpid()
    return {"pid": pid, "host": socket.gethostname(), "start_ticks": _start_ticks(pid)}


def write_owner(run_dir: Path) -> None:
    """Record this process as the run's writer (best effort: a run that cannot record it is still a run)."""
    try:
        (Path(run_dir) / OWNER_FILE).write_text(json.dumps(owner_facts()), encoding="utf-8")
    except OSError:
        pass


def run_process_state(run_dir: Path) -> tuple[str, str]:
    """(state, words) of the process that writes `run_dir`: "alive", "gone", or "unknown" (no record, or another
    host), with a sentence for a `running` run's status."""
    try:
        owner = json.loads((Path(run_dir) / OWNER_FILE).read_text(encoding="utf-8"))
        pid, host = int(owner["pid"]), str(owner["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown", "the process that wrote it was not recorded, so whether it still runs is unknown"
    if host != socket.gethostname():
        return "unknown", f"it is written by process {pid} on {host}, which cannot be checked from this host"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        alive = False
    except PermissionError:  # another user's process holds that pid now, or still the writer under another uid
        alive = True
    else:
        alive = True
    if alive and owner.get("start_ticks") is not None and _start_ticks(pid) not in (None, owner["start_ticks"]):
        alive = False  # the pid was reused by another process
    if alive:
        return "alive", f"its process {pid} on {host} is still running"
    return "gone", (f"its process ({pid} on {host}) is gone: it was killed (SIGKILL, out of memory) or ended "
                    f"without writing its status (a crash or os._exit in kernel code under --isolation none); "
                    f"what it wrote is kept")
