"""The README's "Your own kernel" walk-through (a prefill and a decode example) and its continuation in
docs/kernels.md and docs/workloads.md, run as a reader would: every file they show is written as shown, every
`bench` command they show is run (on the CPU: `--device cpu --quick` and a small shape added, the GPU-only
sdpa-cudnn swapped for sdpa-cpu, as the section says), and the `inputs` table names exactly the fields a factory
receives. An edit that breaks a step fails here."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
import tomllib

from tests.workers.forked_run import run as forked_run

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
README_SECTION = README[README.index("## Your own kernel\n"):README.index("## Reading the output\n")]
PAGES = ("docs/kernels.md", "docs/workloads.md")  # the walk-through goes on there
SECTION = README_SECTION + "".join((ROOT / page).read_text() for page in PAGES)
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", SECTION, flags=re.S)
# What "on a CPU" means in the section, plus a small shape and the shortest warm-in and window, so the whole
# walk-through takes seconds (a CPU never settles; its figures are not the point here, that each step runs is).
CPU = ["--device", "cpu", "--quick", "--repeats", "1", "--seq-len", "64", "--head-dim", "16", "--dtype", "fp32",
       "--telemetry", "none", "--warmin-cap-s", "0.3", "--window-s", "0.1", "--idle-s", "0"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A folder holding every file the section shows, written from the README's own text."""
    where = tmp_path_factory.mktemp("own-kernel")
    for lang, body in BLOCKS:
        if lang == "python":
            name = body.splitlines()[0].removeprefix("# ").strip()
            assert name.endswith(".py"), f"a python block must start with its file name: {body[:80]!r}"
            (where / name).write_text(body)
    return where


def bench(folder: Path, args: list[str]):
    # A bare environment, as a reader's shell, but for the suite's one OpenMP thread (conftest.py): with torch's
    # default of one per CPU, two processes on the 2-CPU machine stall each other at every barrier (a 0.03 ms
    # launch took 6 ms, and each command 3x as long).
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200", "PYTHONPATH": str(ROOT),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    proc = forked_run([sys.executable, "-m", "harness.cli", *args], cwd=folder, timeout=240, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def cpu_args(command: str, results: Path) -> list[str]:
    args = shlex.split(command)[1:]
    args = ["sdpa-cpu" if a == "sdpa-cudnn" else a for a in args]
    extra = list(CPU) + ([] if "--heads" in args else ["--heads", "4"])
    if "--seq-len-kv" in args:  # a decode command: its cache shortened instead of --seq-len given
        args[args.index("--seq-len-kv") + 1] = "64"
        extra = [a for i, a in enumerate(extra) if a != "--seq-len" and (i == 0 or extra[i - 1] != "--seq-len")]
    extra += [] if "-i" in args else ["-i", "gaussian:1"]  # one input: the second Gaussian takes the same path
    return [*args, *extra, "--results", str(results)]


COMMANDS = [line for lang, body in BLOCKS if lang == "sh" for line in body.splitlines() if line.startswith("bench ")]


def test_the_section_shows_files_commands_and_the_entry_point():
    langs = [lang for lang, _ in BLOCKS]
    assert langs.count("python") >= 4 and "toml" in langs and len(COMMANDS) >= 4, langs


def test_the_readme_itself_shows_a_prefill_and_a_decode_example():
    files = [body.splitlines()[0] for lang, body in re.findall(r"```(\w+)\n(.*?)```", README_SECTION, flags=re.S)
             if lang == "python"]
    assert files == ["# mykern.py", "# mydecode.py"]
    commands = [line for line in README_SECTION.splitlines() if line.startswith("bench ")]
    assert any("mykern:attn" in c for c in commands)
    assert any("mydecode:paged_decode@decode" in c and "--page-size" in c and "--seq-len-q 1" in c for c in commands)
    assert "def paged_decode(q, k_cache, v_cache, *, block_table, seq_lens" in README_SECTION  # keyword-only


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_of_the_walk_through_runs(folder, tmp_path, command):
    code, out = bench(folder, cpu_args(command, tmp_path / "r"))
    assert code == 0, f"{command}\n{out}"
    assert "ended complete" in out and "failed the correctness gate" not in out, out


def test_the_refusals_it_describes_happen_as_described(folder, tmp_path):
    code, out = bench(folder, cpu_args("bench sustained -k mykern:attn", tmp_path / "r"))  # no --no-causal
    text = " ".join(out.split())
    assert code == 2, out
    for fix in ("Pass --no-causal", "`is_causal=True` keyword", "convention(causal=True)"):
        assert fix in text, text
    code, out = bench(folder, cpu_args("bench sustained -k flashlike.py:attn", tmp_path / "r"))  # @bshd forgotten
    assert code == 4 and "It would pass as layout bshd" in " ".join(out.split()), out


def test_the_entry_point_it_shows_registers_the_factory(folder, monkeypatch):
    from harness.kernels import KernelRegistry

    ENTRY_POINT_GROUP = "harness.kernels"  # the group harness/kernels/_registry.py loads

    (toml,) = [body for lang, body in BLOCKS if lang == "toml"]
    (target,) = tomllib.loads(toml)["project"]["entry-points"][ENTRY_POINT_GROUP].values()
    module, _, attr = target.partition(":")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, module, raising=False)
    registry = KernelRegistry()
    getattr(__import__(module), attr)(registry)
    kernel = registry.get("my-attention")
    assert kernel.dtypes == frozenset({"bfloat16", "float16", "float32"})  # declared as bf16, fp16, fp32


def test_the_inputs_table_names_every_field_a_factory_receives():
    from harness.inputs import AttentionInputs, AttentionShape

    table = SECTION[SECTION.index("| field | what |"):]
    rows = [ln for ln in table.splitlines() if ln.startswith("| `")]
    named = {n for ln in rows for n in re.findall(r"`(\w+)`", ln.split("|")[1])}
    assert named == {f.name for f in dataclasses.fields(AttentionInputs)}
    (shape_row,) = [ln for ln in rows if ln.startswith("| `shape`")]
    listed = set(re.findall(r"`(\w+)`", shape_row.split("|")[2])) - {"AttentionShape"}
    assert listed == {f.name for f in dataclasses.fields(AttentionShape)}
