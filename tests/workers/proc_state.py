"""What the worker tests ask of /proc about a process they started (not a test module)."""


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for a parent that does not reap it does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
