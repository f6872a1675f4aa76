"""Child processes of the harness, from both ends: how one is started, heard, waited on and ended.

Three kinds of child measure for the harness: a user's kernel in a process of its own (runner isolation), one
worker per GPU (multigpu) and one per revision (commits). What they share is here, once:

- start: `Worker.start` runs argv in a session of its own, so a Ctrl-C in the terminal reaches the parent
  alone (which passes on what it means to: one SIGINT, a stop message), and a kill of the group also ends
  whatever the child started (a compile helper, a process holding the device or the pipe).
- relay: the child's stdout carries JSON lines, one message each, read by a thread into a queue (anything
  else on it is ignored); its stderr goes to a log file or, line by line, to a callback, and the last lines
  are kept for the text of a death. On the child's side `protocol_channel()` keeps the real stdout for the
  messages and points fd 1 at stderr, so a print or a library's logging cannot corrupt them, and
  `stop_on_signals()` makes SIGTERM / SIGHUP end its run as Ctrl-C does (kept, `incomplete`, the signal named).
- deadline: every wait takes one (`receive`, `receive_any`, `wait`, `finish`); there is no wait without one.
  A leader that has ended is never waited on for its pipe: a process it left behind holding stdout is killed
  after `drain_s`, and its end arrives. `Deadline` is a restartable deadline on an injected clock.
- kill: `kill(grace_s=...)` ends the whole process group: SIGTERM (a worker's handler marks its run
  incomplete), SIGKILL after the grace for whatever is left (grace 0: SIGKILL at once), the leader reaped.
  `finish` asks first (EOF on stdin is "stop"), then kills; afterwards no process of the group is alive.
- busy-device exceptions: `tolerate_pids` / `tolerate_children_of` wrap a device so that its busy check does
  not count the processes of the same measurement (a multi-GPU run's orchestrator, the other revisions'
  workers, a run's own kernel processes): they sit blocked on a pipe while one of them measures and cannot
  change its clock. Any other process still makes the device busy.
- preload: a child that is `python -m module` is forked from a helper process that has imported torch once
  (`_preload`), so it starts in milliseconds instead of the seconds of torch's import (`prestart` starts the
  helper ahead of the first child); what the child sees is what `python -m` gives it. A child that starts
  children of its own forks them from the same helper, and the helper's imports are frozen out of every
  collection a child makes (`gc.freeze`). HARNESS_NO_PRELOAD=1 starts every child the ordinary way.
"""

from harness.workers._busy import tolerate_children_of, tolerate_pids
from harness.workers._channel import JsonLinesChannel, protocol_channel, stop_on_signals
from harness.workers._deadline import Deadline, WaitExpired
from harness.workers._preload import PreloadedPopen, forkable, preloaded_popen, prestart
from harness.workers._process import Worker, child_env, harness_root, receive_any
from harness.workers._processes import exit_words, group_alive, parent_of, process_stopped, signal_name

__all__ = ["Deadline", "JsonLinesChannel", "WaitExpired", "Worker", "child_env", "exit_words", "group_alive",
           "harness_root", "parent_of", "process_stopped", "protocol_channel", "receive_any", "signal_name",
           "stop_on_signals", "tolerate_children_of", "tolerate_pids", "PreloadedPopen", "forkable",
           "preloaded_popen", "prestart"]
