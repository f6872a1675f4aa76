"""Proton timelines: the parser and the per-warp image on synthetic Chrome traces in both Proton formats,
and the recording sequence with a fake profiler (no GPU here)."""

from __future__ import annotations

import json

import pytest

from harness.profiling import (
    NothingProfiled,
    parse_proton_trace,
    record_proton_trace,
    scope_summary,
    timeline_png,
)

SCOPES = (("load", 200), ("qk", 600), ("softmax", 900), ("pv", 500))


def synthetic_trace(*, cycles: bool = True, cores=(0, 1), ctas=(0, 1), warps=4, blocks=3) -> dict:
    """A trace shaped like Proton's: metadata and kernel events (to be skipped) and one X event per scope."""
    events = [{"ph": "M", "pid": 0, "tid": 0, "name": "process_name", "args": {"name": "Trace"}},
              {"ph": "X", "cat": "kernel", "name": "_attn_fwd", "pid": 0, "tid": 2, "ts": 0.0, "dur": 90.0}]
    for core in cores:
        for cta in ctas:
            for w in range(warps):
                t = 1000 * cta + 37 * w
                for _ in range(blocks):
                    for name, dur in SCOPES:
                        pid = f"_attn_fwd Core{core} CTA{cta}" + (" [measure in clock cycle (assume 1GHz)]" if cycles else "")
                        args = {"Unit": "GPU cycle"} if cycles else {"Init Time (ns)": 5, "call_stack": ["_attn_fwd"]}
                        events.append({"ph": "X", "name": name, "cat": "_attn_fwd", "pid": pid,
                                       "tid": f"warp {w} (line 0)", "ts": t / 1000, "dur": dur / 1000, "args": args})
                        t += dur
    return {"displayTimeUnit": "ns", "traceEvents": events}


@pytest.mark.parametrize("cycles, unit", [(True, "cycle"), (False, "ns")])
def test_parser_reads_both_proton_formats(cycles, unit):
    events, got = parse_proton_trace(synthetic_trace(cycles=cycles))
    assert got == unit
    assert len(events) == 2 * 2 * 4 * 3 * 4  # cores x CTAs x warps x blocks x scopes; kernel event skipped
    first = min(events, key=lambda e: (e.core, e.cta, e.warp, e.start))
    assert (first.scope, first.core, first.cta, first.warp, first.line, first.start, first.duration) == (
        "load", 0, 0, 0, 0, 0.0, 200.0)


def test_parser_takes_text_and_paths(tmp_path):
    trace = synthetic_trace(cores=(0,), ctas=(0,), warps=1, blocks=1)
    path = tmp_path / "t.chrome_trace"
    path.write_text(json.dumps(trace))
    assert parse_proton_trace(path)[0] == parse_proton_trace(json.dumps(trace))[0] == parse_proton_trace(trace)[0]


def test_scope_summary_gives_each_scopes_share():
    events, _ = parse_proton_trace(synthetic_trace())
    s = scope_summary(events)
    assert list(s) == ["softmax", "qk", "pv", "load"]  # by total time
    assert s["softmax"]["share"] == pytest.approx(900 / 2200)
    assert s["qk"]["mean"] == 600 and s["qk"]["count"] == 48


def test_timeline_image_is_a_png_of_one_sm():
    png = timeline_png(synthetic_trace(), title="triton-fp8-lean")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    one = timeline_png(synthetic_trace(cycles=False), core=1, max_rows=3)
    assert one[:4] == b"\x89PNG"


def test_timeline_of_a_kernel_without_scopes_says_what_to_add():
    trace = synthetic_trace(cores=())
    with pytest.raises(NothingProfiled) as err:
        timeline_png(trace)
    assert "pl.enter_scope" in str(err.value) and "enable_semantic" in str(err.value)
    with pytest.raises(NothingProfiled, match="No scope events on SM 7"):
        timeline_png(synthetic_trace(), core=7)


class FakeProton:
    """Records the calls; finalize writes the Chrome trace Proton would (suffix .chrome_trace)."""

    def __init__(self):
        self.calls = []
        self.name = None

    def start(self, name, *, data, backend, mode):
        self.calls.append(("start", backend, data, mode))
        self.name = name

    def finalize(self):
        self.calls.append(("finalize",))
        from pathlib import Path

        Path(self.name + ".chrome_trace").write_text(json.dumps(synthetic_trace(cores=(0,))))


def test_recording_compiles_then_warms_then_records_one_launch(tmp_path):
    fake, launches = FakeProton(), []
    ticks = iter([0.0, 0.0, 0.5, 1.0, 2.5])
    path = record_proton_trace(lambda: launches.append(len(fake.calls)), out=tmp_path / "tl.chrome_trace", warm_s=2.0,
                               synchronize=lambda: None, profiler=fake, clock=lambda: next(ticks))
    assert path == tmp_path / "tl.chrome_trace" and parse_proton_trace(path)[0]
    # warp granularity is Proton's default and is not spelled out: Triton 3.6 fails at kernel exit on
    # "default:granularity=warp" (seen on the H200); other granularities and buffer sizes are passed on
    assert fake.calls[0] == ("start", "instrumentation", "trace", "default")
    # one launch in the compile session, 3 x 10 warm launches outside any session, one recorded launch
    assert launches == [1] + [2] * 30 + [3]
    assert [c[0] for c in fake.calls] == ["start", "finalize", "start", "finalize"]


def test_other_granularities_and_buffer_sizes_reach_proton(tmp_path):
    fake = FakeProton()
    record_proton_trace(lambda: None, out=tmp_path / "tl.chrome_trace", warm_s=0.0, granularity="warp_group",
                        buffer_size=4096, synchronize=lambda: None, profiler=fake)
    assert fake.calls[0][3] == "default:granularity=warp_group:buffer_size=4096"


def test_recording_that_writes_nothing_is_an_error(tmp_path):
    class Silent(FakeProton):
        def finalize(self):
            self.calls.append(("finalize",))

    with pytest.raises(NothingProfiled, match="wrote no Chrome trace"):
        record_proton_trace(lambda: None, out=tmp_path / "x", warm_s=0.0, synchronize=lambda: None, profiler=Silent())


def test_child_proton_mode_asks_the_factory_for_scopes_and_draws_the_png(monkeypatch, tmp_path, capsys):
    from pathlib import Path

    from harness.inputs import AttentionShape, InputSpec
    from harness.kernels import KernelRegistry
    from harness.profiling._child import main, spec_to_json

    reg, seen = KernelRegistry(), {}

    @reg.kernel("scoped", dtypes={"float32"}, devices={"cpu"})
    def prepare(inputs, *, proton=False):
        seen["proton"] = proton
        return lambda: inputs.q * 2

    def fake_record(launch, *, out, warm_s, synchronize):
        launch()
        out.write_text(json.dumps(synthetic_trace()))
        return out

    monkeypatch.setattr("harness.profiling._child.default_registry", lambda: reg)
    monkeypatch.setattr("harness.profiling._child.record_proton_trace", fake_record)  # where main looks them up
    spec = InputSpec(shape=AttentionShape(batch=1, heads_q=1, heads_kv=1, seq_len=16, head_dim_qk=16), dtype="float32")
    out = tmp_path / "timeline-scoped.chrome_trace"
    assert main(["proton", "--kernel", "scoped", "--spec", spec_to_json(spec), "--device", "cpu", "--warm-s", "0",
                 "--out", str(out)]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1].removeprefix("TRACE-CHILD "))
    assert seen == {"proton": True} and info["unit"] == "cycle" and list(info["scopes"])[0] == "softmax"
    assert Path(info["png"]).read_bytes()[:4] == b"\x89PNG" and Path(info["png"]) == out.with_suffix(".png")
