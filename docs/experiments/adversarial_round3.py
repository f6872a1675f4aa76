"""Adversarial pass, round 3 (issue 41): the real `bench` CLI run as a hostile user would, on the CPU.

Each case is one shell command (run from a scratch folder holding the kernels of `adversarial_round3_kernels/`),
with a deadline; what it printed, its exit status, its wall time and what it left on disk are written to
CASES.json beside the scratch folder, from which the table in adversarial-round3.md was written (the verdict
column is a person's reading of each case against what the README promises).

    .venv/bin/python docs/experiments/adversarial_round3.py SCRATCH [CASE_ID ...]
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCH = str(Path(sys.executable).parent / "bench")
T = ("--device cpu --quick --seq-len 64 --heads 2 --head-dim 16 --dtype float32 --repeats 1 --telemetry none "
     "--idle-s 0 --window-s 0.1 --launch-timeout-s 5")


def S(case: str, kernels: str, extra: str = "") -> str:
    return f"{BENCH} sustained {kernels} -i gaussian:1 {T} --results R/{case} {extra}"


# (id, kind, what, command, deadline s); commands run under bash in SCRATCH.
CASES = [
    # -- A. what a kernel returns ------------------------------------------------------------------------------
    ("A1", "return value", "returns (out, None)", S("A1", "-k ret.py:tuple_out"), 60),
    ("A2", "return value", "returns a numpy array", S("A2", "-k ret.py:numpy_out"), 60),
    ("A3", "return value", "returns a Python list", S("A3", "-k ret.py:list_out"), 60),
    ("A4", "return value", "right values, non-contiguous strides", S("A4", "-k ret.py:noncontig"), 60),
    ("A5", "return value", "returns q itself (aliased output)", S("A5", "-k ret.py:alias_q"), 60),
    ("A6", "return value", "writes the output into q and returns q", S("A6", "-k ret.py:writes_into_q"), 60),
    ("A7", "return value", "returns int32", S("A7", "-k ret.py:int_out"), 60),
    ("A8", "return value", "returns a 0-dim tensor", S("A8", "-k ret.py:zero_dim"), 60),
    ("A9", "return value", "returns a tensor that requires grad", S("A9", "-k ret.py:requires_grad"), 60),
    ("A10", "return value", "returns a torch.Tensor subclass", S("A10", "-k ret.py:subclass"), 60),
    ("A11", "return value", "returns a view into a bigger buffer", S("A11", "-k ret.py:view_of_bigger"), 60),
    ("A12", "return value", "honest, one persistent output buffer (out= style)", S("A12", "-k ret.py:persistent_buffer"), 60),
    ("A13", "return value", "NaN output after the gate", S("A13", "-k ret.py:nan_after_gate"), 60),
    ("A14", "return value", "returns clones of a private cache after the gate (no work)",
     S("A14", "-k ret.py:cached_clone_after_gate"), 60),
    ("A15", "return value", "output x 1.01 after the gate", S("A15", "-k ret.py:scaled_after_gate"), 60),
    ("A16", "path", "kernel file in a folder with spaces and unicode",
     S("A16", "-k 'dir with spaces é/ker nel.py:persistent_buffer'"), 60),
    ("A17", "return value", "returns (out, None) in the run's process", S("A17", "-k ret.py:tuple_out", "--isolation none"), 60),
    # -- B. what a kernel does to its process ------------------------------------------------------------------
    ("B1", "process", "starts a grandchild that keeps the pipes, then os._exit(7)",
     S("B1", "-k beh.py:grandchild_then_die -k sdpa-cpu -i gaussian:0.1"), 90),
    ("B2", "process", "sends SIGTERM to the run's process", S("B2", "-k beh.py:kills_parent -k sdpa-cpu"), 60),
    ("B3", "process", "SIGKILLs its own process group", S("B3", "-k beh.py:kills_own_group -k sdpa-cpu"), 60),
    ("B4", "process", "installs its own SIGALRM timer and ignores it", S("B4", "-k beh.py:own_alarm -k sdpa-cpu"), 60),
    ("B5", "process", "sets torch's default dtype to float64 (run's process)",
     S("B5", "-k beh.py:default_dtype_f64 -k sdpa-cpu", "--isolation none"), 60),
    ("B6", "process", "closes its stderr", S("B6", "-k beh.py:closes_stderr -k sdpa-cpu"), 60),
    ("B7", "process", "closes fd 1 in the run's process, --json to a file",
     S("B7", "-k beh.py:closes_stdout_fd -k sdpa-cpu", "--isolation none --json R/B7.json"), 60),
    ("B8", "process", "infinite recursion", S("B8", "-k beh.py:recursion -k sdpa-cpu"), 60),
    ("B9", "process", "raises MemoryError", S("B9", "-k beh.py:memory_error -k sdpa-cpu"), 60),
    ("B10", "process", "raises GeneratorExit (a BaseException), run's process",
     S("B10", "-k beh.py:generator_exit -k sdpa-cpu", "--isolation none"), 60),
    ("B11", "process", "a thread of its own raises", S("B11", "-k beh.py:thread_raises"), 60),
    ("B12", "process", "SIGSTOPs itself in prepare()", S("B12", "-k beh.py:stops_itself -k sdpa-cpu"), 90),
    ("B13", "process", "writes 1 KB of invalid UTF-8 to stderr on every call",
     S("B13", "-k beh.py:binary_stderr -k sdpa-cpu"), 90),
    ("B14", "process", "writes forged protocol lines on every fd 3-19",
     S("B14", "-k beh.py:fake_protocol_line -k sdpa-cpu"), 90),
    ("B15", "process", "torch.set_num_threads(64)", S("B15", "-k beh.py:sets_threads"), 60),
    ("B16", "process", "sys.exit(5) in a thread it starts", S("B16", "-k beh.py:exit_in_thread"), 60),
    ("B17", "process", "a function named with a non-ASCII letter", S("B17", "-k beh.py:unicode_name_é"), 60),
    ("B18", "process", "3 s first call, launch timeout 5 s", S("B18", "-k beh.py:slow_first_call"), 60),
    # -- C. flag values ----------------------------------------------------------------------------------------
    ("C1", "flag value", "--repeats 0", S("C1", "-k sdpa-cpu", "--repeats 0"), 60),
    ("C2", "flag value", "--repeats -1", S("C2", "-k sdpa-cpu", "--repeats -1"), 60),
    ("C3", "flag value", "--window-s 0", S("C3", "-k sdpa-cpu", "--window-s 0"), 60),
    ("C4", "flag value", "--window-s nan", S("C4", "-k sdpa-cpu", "--window-s nan"), 60),
    ("C5", "flag value", "--window-s inf", S("C5", "-k sdpa-cpu", "--window-s inf"), 30),
    ("C6", "flag value", "--launch-timeout-s 0", S("C6", "-k sdpa-cpu", "--launch-timeout-s 0"), 60),
    ("C7", "flag value", "--launch-timeout-s 1e-9", S("C7", "-k sdpa-cpu", "--launch-timeout-s 1e-9"), 60),
    ("C8", "flag value", "--idle-s -1", S("C8", "-k sdpa-cpu", "--idle-s -1"), 60),
    ("C9", "flag value", "--seq-len 0", S("C9", "-k sdpa-cpu", "--seq-len 0"), 60),
    ("C10", "flag value", "--seq-len 10000000 on the CPU", S("C10", "-k sdpa-cpu", "--seq-len 10000000"), 60),
    ("C11", "flag value", "--heads 3 --heads-kv 2", S("C11", "-k sdpa-cpu", "--heads 3 --heads-kv 2"), 60),
    ("C12", "flag value", "--head-dim 7", S("C12", "-k sdpa-cpu", "--head-dim 7"), 60),
    ("C13", "flag value", "--batch 0", S("C13", "-k sdpa-cpu", "--batch 0"), 60),
    ("C14", "flag value", "--dtype fp4", S("C14", "-k sdpa-cpu", "--dtype fp4"), 60),
    ("C15", "flag value", "--sample-period-ms 0 (host telemetry)", S("C15", "-k sdpa-cpu", "--sample-period-ms 0"), 60),
    ("C16", "flag value", "--until-ci 0%", S("C16", "-k sdpa-cpu", "--until-ci 0%"), 60),
    ("C17", "flag value", "--until-ci abc", S("C17", "-k sdpa-cpu", "--until-ci abc"), 60),
    ("C18", "flag value", "--seed -1", S("C18", "-k sdpa-cpu", "--seed -1"), 60),
    ("C19", "flag value", "--seed 2**70", S("C19", "-k sdpa-cpu", "--seed 1180591620717411303424"), 60),
    ("C20", "flag value", "--name ''", S("C20", "-k sdpa-cpu", "--name ''"), 60),
    ("C21", "flag value", "--chunk-s 1e9", S("C21", "-k sdpa-cpu", "--chunk-s 1e9"), 40),
    ("C22", "flag value", "--repeats 1000000000 (stopped after 12 s)",
     f"timeout -s TERM 12 {S('C22', '-k sdpa-cpu', '--repeats 1000000000')}", 60),
    ("C23", "flag value", "burst --timed 0", f"{BENCH} burst -k sdpa-cpu -i gaussian:1 --device cpu --seq-len 64 "
     f"--heads 2 --head-dim 16 --dtype float32 --telemetry none --timed 0 --results R/C23", 60),
    # -- D. paths ----------------------------------------------------------------------------------------------
    ("D1", "path", "--results with spaces and unicode", S("D1", "-k sdpa-cpu", "--results 'R/D1 dir é'"), 60),
    ("D2", "path", "--results is a file", f"touch R/D2file; {S('D2', '-k sdpa-cpu', '--results R/D2file')}", 60),
    ("D3", "path", "--results under /proc", S("D3", "-k sdpa-cpu", "--results /proc/adv41"), 60),
    ("D4", "path", "--json whose folder is a file",
     f"mkdir -p R/D4 && touch R/D4/f; {S('D4', '-k sdpa-cpu', '--json R/D4/f/x.json')}", 60),
    ("D5", "path", "--results is a symlink loop",
     f"ln -sfn loopB R/loopA; ln -sfn loopA R/loopB; {S('D5', '-k sdpa-cpu', '--results R/loopA')}", 60),
    ("D6", "path", "report --md into a folder", f"{BENCH} report R/A4/* --md R", 60),
    ("D7", "path", "--results on a 160 KiB filesystem (tmpfs): the disk fills mid-run",
     f"mkdir -p R/D7 && mount -t tmpfs -o size=160k tmpfs R/D7 && {S('D7', '-k sdpa-cpu', '--results R/D7 --repeats 3 --window-s 0.5 --telemetry host --sample-period-ms 1')}; "
     f"ls R/D7/*/; umount R/D7", 120),
    ("D8", "path", "--json and --csv into a new nested folder", S("D8", "-k sdpa-cpu", "--json R/D8/a/b/c.json"), 60),
    # -- E. concurrency ----------------------------------------------------------------------------------------
    ("E1", "concurrency", "two runs at once, one --results, one --name",
     f"({S('E1', '-k sdpa-cpu', '--name same')} > R/E1a.log 2>&1 &); {S('E1', '-k sdpa-cpu', '--name same')}; "
     f"sleep 8; cat R/E1a.log | tail -2; {BENCH} list runs --results R/E1", 120),
    ("E2", "concurrency", "report and list runs while a run measures",
     f"({S('E2', '-k sdpa-cpu', '--repeats 4 --window-s 2 --warmin-cap-s 3')} > /dev/null 2>&1 &); sleep 12; "
     f"{BENCH} list runs --results R/E2; {BENCH} report R/E2/* | head -3; sleep 30", 90),
    ("E3", "concurrency", "compare against a run still measuring",
     f"({S('E3', '-k sdpa-cpu', '--repeats 4 --window-s 2 --warmin-cap-s 3 --name live')} > /dev/null 2>&1 &); "
     f"{S('E3', '-k sdpa-cpu', '--name done --repeats 2')} > /dev/null 2>&1; "
     f"{BENCH} compare done live --results R/E3; echo exit=$?; sleep 30", 120),
    # -- F. signals at odd moments -----------------------------------------------------------------------------
    # Signals go to the processes this script started, by pid ($! and its children by `pgrep -P`).
    ("F1", "signal", "SIGTERM while the kernel's module is being imported (5 s import)",
     f"{S('F1', '-k slowimport.py:attn')} > R/F1.log 2>&1 & P=$!; sleep 3; C=$(pgrep -P $P | head -1); "
     f"kill -TERM $P; wait $P; echo exit=$?; tail -2 R/F1.log; ls R/F1 2>&1; sleep 2; "
     f"kill -0 $C 2>/dev/null && echo child-alive || echo child-gone", 60),
    ("F2", "signal", "SIGHUP while the kernel's own process measures",
     f"{S('F2', '-k ret.py:persistent_buffer', '--window-s 5 --warmin-cap-s 5')} > R/F2.log 2>&1 & P=$!; sleep 9; "
     f"kill -HUP $P; wait $P; echo exit=$?; tail -2 R/F2.log; {BENCH} list runs --results R/F2", 60),
    ("F3", "signal", "SIGKILL of the run's process while its kernel's process measures",
     f"{S('F3', '-k ret.py:persistent_buffer', '--window-s 5 --warmin-cap-s 5')} > /dev/null 2>&1 & P=$!; sleep 9; "
     f"C=$(pgrep -P $P | head -1); kill -KILL $P; sleep 3; {BENCH} list runs --results R/F3; "
     f"kill -0 $C 2>/dev/null && echo child-alive || echo child-gone", 60),
    ("F4", "signal", "two SIGINTs 50 ms apart during the window (bench in the foreground, as in a terminal)",
     f"(sleep 8; kill -INT $$; sleep 0.05; kill -INT $$) & exec {S('F4', '-k sdpa-cpu', '--window-s 5 --warmin-cap-s 5')}"
     f" > R/F4.log 2>&1", 60),
    ("F4b", "signal", "F4's outcome: exit status and the run's status",
     f"tail -2 R/F4.log; {BENCH} list runs --results R/F4", 30),
    ("F5", "signal", "SIGSTOP of the kernel's process for 3 s mid-window, then SIGCONT",
     f"{S('F5', '-k ret.py:persistent_buffer', '--window-s 4 --warmin-cap-s 4')} > R/F5.log 2>&1 & P=$!; sleep 8; "
     f"C=$(pgrep -P $P | head -1); kill -STOP $C; sleep 3; kill -CONT $C; wait $P; echo exit=$?; tail -3 R/F5.log", 60),
    ("F6", "signal", "SIGTERM during the gate of an in-process kernel (3 s first call)",
     f"{S('F6', '-k beh.py:slow_first_call', '--isolation none')} > R/F6.log 2>&1 & P=$!; sleep 6; kill -TERM $P; "
     f"wait $P; echo exit=$?; tail -2 R/F6.log; {BENCH} list runs --results R/F6", 60),
    # -- G. malformed files ------------------------------------------------------------------------------------
    ("G1", "malformed file", "runs.parquet cut in half (report)",
     f"rm -rf R/G1; cp -r R/A4 R/G1 && f=$(ls -d R/G1/*)/runs.parquet && head -c 300 $f > $f.x && mv $f.x $f && "
     f"{BENCH} report R/G1/*", 60),
    ("G2", "malformed file", "runs.parquet of a future schema version (v99)",
     f"rm -rf R/G2; cp -r R/A4 R/G2 && {sys.executable} -c \"import glob,pyarrow.parquet as pq;p=glob.glob('R/G2/*/runs.parquet')[0];"
     f"t=pq.read_table(p);pq.write_table(t.replace_schema_metadata({{b'harness_schema_version':b'99'}}),p)\" && "
     f"{BENCH} report R/G2/*", 60),
    ("G3", "malformed file", "a measurements part with an unknown column only",
     f"rm -rf R/G3; cp -r R/A4 R/G3 && {sys.executable} -c \"import glob,pyarrow as pa,pyarrow.parquet as pq;"
     f"d=glob.glob('R/G3/*/measurements')[0];pq.write_table(pa.table({{'x':[1]}}),d+'/part-00009.parquet')\" && "
     f"{BENCH} report R/G3/*", 60),
    ("G4", "malformed file", "compare a run with itself", f"{BENCH} compare R/A4/* R/A4/*", 60),
    ("G5", "malformed file", "a capture whose manifest is not JSON",
     f"{BENCH} capture --model smollm2-135m --device cpu --layers 3 --seq-len 128 --captures caps > /dev/null 2>&1; "
     f"for m in $(find caps -name '*.json'); do echo '{{not json' > $m; done; "
     f"{BENCH} sustained -k sdpa-cpu --model smollm2-135m --layer 3 --seq-len 128 --captures caps --device cpu --quick --repeats 1 "
     f"--telemetry none --results R/G5", 300),
    ("G6", "malformed file", "a capture whose tensor file is cut short",
     f"{BENCH} capture --model smollm2-135m --device cpu --layers 3 --seq-len 128 --captures caps2 > /dev/null 2>&1; "
     f"for t in $(find caps2 -name '*.safetensors'); do head -c 1000 $t > $t.x && mv $t.x $t; done; "
     f"{BENCH} sustained -k sdpa-cpu --model smollm2-135m --layer 3 --seq-len 128 --captures caps2 --device cpu --quick --repeats 1 "
     f"--telemetry none --results R/G6", 300),
    ("G7", "malformed file", "a run folder without its measurements/ (compare)",
     f"rm -rf R/G7; cp -r R/A4 R/G7 && rm -r R/G7/*/measurements && {BENCH} compare R/A4/* R/G7/*", 60),
    # -- H. CLI misuse -----------------------------------------------------------------------------------------
    ("H1", "CLI misuse", "compare with one run", f"{BENCH} compare R/A4/*", 30),
    ("H2", "CLI misuse", "list runs of a folder that does not exist", f"{BENCH} list runs --results R/nowhere", 30),
    ("H3", "CLI misuse", "--format bogus", S("H3", "-k sdpa-cpu", "--format bogus"), 30),
    ("H4", "CLI misuse", "-k ''", S("H4", "-k ''"), 30),
    ("H5", "CLI misuse", "report --pair-kernels of kernels the run does not hold",
     f"{BENCH} report R/A4/* --pair-kernels x=y", 30),
    ("H6", "CLI misuse", "an unknown subcommand", f"{BENCH} sustaned", 30),
    ("H7", "CLI misuse", "--isolation sometimes", S("H7", "-k sdpa-cpu", "--isolation sometimes"), 30),
    # -- J. other commands and workloads with hostile or plain kernels ------------------------------------------
    ("J1", "other command", "bench error (per call, run's process) with a kernel that calls sys.exit(3)",
     f"{BENCH} error -k beh.py:exits_3 -k sdpa-cpu --device cpu --seq-len 64 --heads 2 --head-dim 16 --dtype fp32 "
     f"-i gaussian:1", 60),
    ("J2", "other command", "bench repro with a kernel that calls sys.exit(3)",
     f"{BENCH} repro -k beh.py:exits_3 -k sdpa-cpu --device cpu --seq-len 64 --heads 2 --head-dim 16 --dtype fp32 "
     f"-i gaussian:1 --launches 5 --interfere none", 60),
    ("J3", "other command", "bench burst with a kernel that returns zeros after the gate",
     f"{BENCH} burst -k beh.py:zeros_after_gate -k sdpa-cpu -i gaussian:1 --device cpu --seq-len 64 --heads 2 "
     f"--head-dim 16 --dtype float32 --telemetry none --warmup 5 --timed 5 --repeats 1 --idle-s 0 --results R/J3", 90),
    ("J4", "other command", "bench burst, a kernel whose process dies on the second of two inputs",
     f"{BENCH} burst -k beh.py:dies_on_quiet -k sdpa-cpu -i gaussian:1 -i gaussian:0.1 --device cpu --seq-len 64 "
     f"--heads 2 --head-dim 16 --dtype float32 --telemetry none --warmup 5 --timed 5 --repeats 2 --idle-s 0 "
     f"--results R/J4", 120),
    ("J5", "odd shape", "decode (S_q 1, S_kv 128), a plain function, checked while timed",
     f"{BENCH} sustained -k ret.py:persistent_buffer -i gaussian:1 --device cpu --quick --seq-len-q 1 --seq-len-kv 128 "
     f"--heads 4 --heads-kv 2 --head-dim 16 --dtype float32 --repeats 1 --telemetry none --idle-s 0 --window-s 0.1 "
     f"--results R/J5", 60),
    ("J6", "odd shape", "paged KV cache (page 16) and varlen with sdpa-kvcache, checked while timed",
     f"{BENCH} sustained -k sdpa-kvcache -i gaussian:1 --device cpu --quick --seq-len-q 1 --seq-len-kv 128 "
     f"--page-size 16 --varlen uniform --batch 3 --heads 4 --heads-kv 2 --head-dim 16 --dtype float32 --repeats 1 "
     f"--telemetry none --idle-s 0 --window-s 0.1 --results R/J6", 60),
    ("J7", "odd shape", "--l2 cold with an honest plain function (copies rotate: the v x 2 check is left out)",
     f"{BENCH} sustained -k ret.py:persistent_buffer -i gaussian:1 --device cpu --quick --seq-len 2048 --heads 8 "
     f"--head-dim 64 --dtype float32 --repeats 1 --telemetry none --idle-s 0 --window-s 0.2 --l2 cold --results R/J7",
     120),
    ("J8", "odd shape", "GQA 8/1 with bf16 inputs, an honest plain function",
     f"{BENCH} sustained -k ret.py:persistent_buffer -i gaussian:1 --device cpu --quick --seq-len 64 --heads 8 "
     f"--heads-kv 1 --head-dim 16 --dtype bf16 --repeats 2 --telemetry none --idle-s 0 --window-s 0.1 --results R/J8",
     60),
    ("J9", "other command", "bench error --model with a kernel that calls sys.exit(3)",
     f"{BENCH} error --model smollm2-135m --device cpu --documents 2 --no-all-layers --layer 3 -k beh.py:exits_3 "
     f"--results R/J9", 180),
    # -- I. environment and output streams --------------------------------------------------------------------
    ("I1", "environment", "COLUMNS=abc", f"COLUMNS=abc {S('I1', '-k sdpa-cpu')}", 60),
    ("I2", "environment", "a terminal of COLUMNS=20", f"COLUMNS=20 script -qc \"{S('I2', '-k sdpa-cpu')}\" /dev/null "
     f"| sed 's/\\x1b\\[[0-9;]*m//g' | awk '{{ if (length($0) > 20) n++ }} END {{ print n+0, \"lines over 20\" }}'", 60),
    ("I3", "environment", "stdout is /dev/full", f"{S('I3', '-k sdpa-cpu')} > /dev/full; echo exit=$?; "
     f"{BENCH} list runs --results R/I3", 60),
    ("I4", "environment", "stdout closed", f"{S('I4', '-k sdpa-cpu')} >&-; echo exit=$?; {BENCH} list runs --results R/I4", 60),
    ("I5", "environment", "LC_ALL=C and a unicode results path", f"LC_ALL=C LANG=C {S('I5', '-k sdpa-cpu', '--results R/I5é')}", 60),
    ("I6", "environment", "--json - piped into a reader that closes at once",
     f"{S('I6', '-k sdpa-cpu', '--json -')} | head -c 10; echo; echo exit=${{PIPESTATUS[0]}}; {BENCH} list runs --results R/I6", 60),
]


def run(scratch: Path, only: list[str]) -> None:
    scratch.mkdir(parents=True, exist_ok=True)
    for f in (HERE / "adversarial_round3_kernels").glob("*.py"):
        shutil.copy(f, scratch / f.name)
    spaced = scratch / "dir with spaces é"
    spaced.mkdir(exist_ok=True)
    shutil.copy(HERE / "adversarial_round3_kernels" / "ret.py", spaced / "ker nel.py")
    (scratch / "R").mkdir(exist_ok=True)
    out_file = scratch / "CASES.json"
    done = json.loads(out_file.read_text()) if out_file.exists() else {}
    for cid, kind, what, cmd, deadline in CASES:
        if only and cid not in only:
            continue
        t0 = time.monotonic()
        proc = subprocess.Popen(["bash", "-c", cmd], cwd=scratch, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", start_new_session=True,
                                env={**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": os.environ.get("COLUMNS", "120")})
        try:
            out, _ = proc.communicate(timeout=deadline)
            rc = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            rc = "DEADLINE"
        wall = time.monotonic() - t0
        done[cid] = {"kind": kind, "what": what, "command": cmd.replace(BENCH, "bench"), "rc": rc,
                     "wall_s": round(wall, 1), "tail": out[-1500:]}
        print(f"{cid:4} rc={rc!s:8} {wall:6.1f}s  {what}\n      {out.strip().splitlines()[-1][:200] if out.strip() else ''}",
              flush=True)
        out_file.write_text(json.dumps(done, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2:])
