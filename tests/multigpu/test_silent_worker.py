"""A GPU's worker that goes silent is ended with its whole process group, SIGTERM first, and the merged run says
why it was stopped (not the worker's own last words on the way out). The worker is an `sh` one-liner."""

from __future__ import annotations

import queue

from harness.multigpu import GpuSlot
from harness.multigpu._orchestrate import _pump, _Worker
from tests.workers.proc_state import alive

# Ready, then silent: a grandchild holds the time (as a kernel's process would), and on SIGTERM the worker says
# it was interrupted, as harness.multigpu._worker does.
SILENT = ('trap \'echo "{\\"event\\": \\"error\\", \\"message\\": \\"interrupted\\"}"; exit 130\' TERM; '
          'sleep 30 & echo "{\\"event\\": \\"started\\", \\"run_dir\\": \\"/nowhere\\", \\"pid\\": $!}"; wait $!')



def test_a_silent_worker_is_stopped_with_its_group_and_the_reason_is_kept(tmp_path):
    events: queue.Queue = queue.Queue()
    w = _Worker(GpuSlot(index=0, gpu_id="cpu0", device="cpu"), argv=["sh", "-c", SILENT], env=None, cwd=tmp_path,
                log=tmp_path / "cpu0.log", events=events)
    seen = []
    try:
        _pump([w], events, lambda gpu, event: seen.append(event), timeout=0.2)
        grandchild = seen[0]["pid"]
        assert w.ended and not alive(grandchild)
        assert w.finish(wait_s=5) == 130  # it heard SIGTERM (its handler ran), not a bare SIGKILL
        assert {"event": "error", "message": "interrupted"} in seen  # relayed as it came
        assert w.final == {"event": "error", "message": "sent nothing for 0 s; stopped"}  # but not its verdict
    finally:
        w.proc.kill(grace_s=0)
