"""`bench commits` when one revision's worker dies (issue 31): SIGKILL, SIGTERM or an import failure at the
second revision. The dead worker's run must not stay `running`, and the first revision's run, stopped because
of it, must say so rather than "interrupted by the user (KeyboardInterrupt)"."""

from __future__ import annotations

import pytest
from commits_repo import KERNEL_FILE, SMALL, TWO_CALLS, commit_all
from typer.testing import CliRunner

from harness.cli import app
from harness.results import read_run

KILLS = {
    "SIGKILL": "        import os, signal\n        os.kill(os.getpid(), signal.SIGKILL)\n",
    "SIGTERM": "        import os, signal\n        os.kill(os.getpid(), signal.SIGTERM)\n",
}


def _runs(results):
    """{revision index: Run} of the runs the workers created (run names are commits-<index>-<sha>)."""
    return {int(p.name.split("-commits-")[1].split("-")[0]): read_run(p) for p in results.iterdir()
            if (p / "runs.parquet").is_file()}


def _break_main(kernel_repo, how: str) -> None:
    path = kernel_repo / KERNEL_FILE
    text = path.read_text()
    if how == "import":
        text = text.replace("from harness.kernels import KernelRegistry",
                            "from harness.kernels import KernelRegistry\nimport no_such_module_anywhere")
    else:  # the worker's process dies in the revision's first launch, inside its gate
        assert TWO_CALLS in text  # the kernel_repo fixture's last commit
        text = text.replace(TWO_CALLS, TWO_CALLS.replace("    def launch():\n", "    def launch():\n" + KILLS[how]))
    path.write_text(text)
    commit_all(kernel_repo, f"break: {how}")


def _commits(kernel_repo, results):
    res = CliRunner().invoke(app, ["commits", "--repo", str(kernel_repo), "--kernel", "example-attention", *SMALL,
                                   "--repeats", "1", "--window-s", "0.1", "--results", str(results), "one", "main"],
                             env={"COLUMNS": "240"})
    return res.exit_code, " ".join(res.output.split())


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_a_worker_killed_by_a_signal_leaves_no_run_running_and_the_other_run_names_it(kernel_repo, quiet_cpu,
                                                                                      tmp_path, sig):
    _break_main(kernel_repo, sig)
    code, out = _commits(kernel_repo, tmp_path)
    assert code == 2, out
    runs = _runs(tmp_path)
    dead, other = runs[1].info, runs[0].info
    if sig == "SIGKILL":  # it could not write its ending: the orchestrator did
        assert "The worker of revision main (" in out and ") was killed by SIGKILL while" in out
        assert dead["status"] == "failed" and "was killed by SIGKILL" in dead["status_detail"]
    else:  # it wrote its own, naming the signal
        assert dead["status"] == "incomplete" and "interrupted by SIGTERM" in dead["status_detail"], dead["status_detail"]
    assert other["status"] == "incomplete", other["status_detail"]
    assert "stopped by bench commits because the worker of revision main (" in other["status_detail"]
    assert (sig if sig == "SIGKILL" else "stopped by SIGTERM") in other["status_detail"], other["status_detail"]
    assert "KeyboardInterrupt" not in other["status_detail"] + dead["status_detail"]


@pytest.mark.slow
def test_an_import_failure_at_one_revision_stops_the_other_run_naming_it(kernel_repo, quiet_cpu, tmp_path):
    _break_main(kernel_repo, "import")
    code, out = _commits(kernel_repo, tmp_path)
    assert code == 2 and "no_such_module_anywhere" in out, out
    runs = _runs(tmp_path)
    assert list(runs) == [0]  # the broken revision never got as far as a run
    other = runs[0].info
    assert other["status"] == "incomplete", other["status_detail"]
    assert "stopped by bench commits because the worker of revision main (" in other["status_detail"]
    assert ") failed: " in other["status_detail"] and "no_such_module_anywhere" in other["status_detail"]
    assert "KeyboardInterrupt" not in other["status_detail"]
