"""In-model timing (issue 43, acceptance 2): the plumbing of `bench in-model` on tiny models on the CPU. The swap
reaches every layer (a counting kernel), the per-layer timing adds up to the forward within its measured cost, a
kernel that fails the gate on any layer is refused for the whole model, FP8-style kernels need a working refresh(),
and a random-weights model is marked as such in every output."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from harness.analysis import attention_figures, compare_in_model
from harness.capture import MODELS, bind_forward, miniature, open_forward
from harness.config import SustainedProtocol
from harness.devices import open_device
from harness.errors import GateFailure, KernelError
from harness.kernels import Kernel, default_registry
from harness.report import in_model_comparison_figures, in_model_comparison_table, in_model_figures, in_model_sections
from harness.results import read_rows, read_run
from harness.runner import InModelConfig, run_in_model

REG = default_registry()
SDPA = REG.get("sdpa-cpu")
# A protocol of a few tens of milliseconds a measurement (the settle rule itself is tests/runner/test_protocol.py's).
FAST = SustainedProtocol.quick(idle_before_kernel_s=0.0, idle_before_config_s=0.0, warmin_min_s=0.0, chunk_s=0.02,
                               settle_trend_window_s=0.04, warmin_cap_s=0.06, window_s=0.06, repeats=2)


def _kernel(name, launch_of, **kw):
    """A bf16 CPU kernel whose launch is `launch_of(inputs, sdpa_launch)`."""
    def prepare(x):
        return launch_of(x, SDPA.prepare(x))

    return Kernel(name=name, prepare=prepare, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}),
                  source=f"tests.capture.test_in_model:{name}", **kw)


class _Registry:
    def __init__(self, *kernels):
        self.own = {k.name: k for k in kernels}

    def get(self, name):
        return self.own.get(name) or REG.get(name)


def _layer_of(x) -> int:
    return int(x.source.split(" layer ")[1].split()[0])


@pytest.fixture(scope="module")
def llama_forward(model_dirs, text_file):
    fwd = open_forward(model=str(model_dirs["llama"]), text=str(text_file), seq_len=48, windows=2, device="cpu")
    yield fwd
    fwd.close()


def test_the_swap_reaches_every_layer_and_the_model_uses_its_output(llama_forward):
    fwd = llama_forward
    prepared, launched = [], []

    def counting(x, inner):
        prepared.append(_layer_of(x))

        def launch():
            launched.append(_layer_of(x))
            return inner()
        return launch

    bound = bind_forward(fwd, _kernel("counting", counting))
    assert sorted(prepared) == [0, 1, 2] == list(fwd.layers)  # prepared once per layer, on that layer's inputs
    before = list(launched)  # the gate's own launches
    fwd.swap.count, fwd.swap.calls = True, []
    try:
        got = bound.run()
        bound.run()
    finally:
        fwd.swap.count = False
    assert fwd.swap.calls == [0, 1, 2] * 2
    assert launched[len(before):] == [0, 1, 2] * 2  # every attention call went to the kernel, none to the model's sdpa
    assert torch.allclose(got, fwd.run(), atol=2e-2)  # a correct kernel: the model's own forward, to bf16 rounding

    # The model computes with what the kernel returns: a kernel wrong in one layer changes the logits.
    def wrong_in_1(x, inner):
        return (lambda: inner() * 0.5) if _layer_of(x) == 1 else inner

    bad = bind_forward(fwd, _kernel("half", wrong_in_1), gate=False)
    assert not torch.allclose(bad.run(), got, atol=2e-2)


def test_a_kernel_failing_the_gate_in_one_layer_is_refused_for_the_whole_model(llama_forward):
    def zeros_in_2(x, inner):
        return (lambda: torch.zeros_like(inner())) if _layer_of(x) == 2 else inner

    with pytest.raises(GateFailure, match=r"layer 2 .*not timed in .* at all") as exc:
        bind_forward(llama_forward, _kernel("zeros-in-2", zeros_in_2))
    assert exc.value.gate["gate_max_abs_diff"] > 0.01
    with pytest.raises(KernelError, match=r"in layer 0 .* returned float32 \[2, 4, 48, 16\]"):
        bind_forward(llama_forward, _kernel("fp32-out", lambda x, inner: (lambda: inner().float())))


def _quantizing(name, *, refresh: str, on_launch=lambda: None, on_refresh=lambda: None):
    """An FP8-style kernel: it copies q, k, v in prepare() (reads_inputs_at_launch False), with a refresh() that
    copies them again (`good`), does nothing (`noop`), or no refresh at all (`none`). `on_launch` and `on_refresh`
    run in each launch and each good refresh (the virtual timeline's costs)."""

    def prepare(x):
        held = [t.clone() for t in (x.q, x.k, x.v)]

        def launch():
            on_launch()
            return torch.nn.functional.scaled_dot_product_attention(*held, is_causal=True, scale=x.scale,
                                                                    enable_gqa=True)

        def copy_again():
            on_refresh()
            for h, t in zip(held, (x.q, x.k, x.v)):
                h.copy_(t)

        if refresh == "good":
            launch.refresh = copy_again
        elif refresh == "noop":
            launch.refresh = lambda: None
        return launch

    return Kernel(name=name, prepare=prepare, dtypes=frozenset({"bfloat16"}), devices=frozenset({"cpu"}),
                  extra={"reads_inputs_at_launch": False}, source="tests")


def test_a_kernel_that_quantizes_in_prepare_needs_a_refresh_that_follows_the_inputs(llama_forward):
    with pytest.raises(KernelError, match="has no refresh"):
        bind_forward(llama_forward, _quantizing("no-refresh", refresh="none"))
    with pytest.raises(GateFailure, match="did not follow the new q"):
        bind_forward(llama_forward, _quantizing("noop-refresh", refresh="noop"))
    bound = bind_forward(llama_forward, _quantizing("good-refresh", refresh="good"))
    assert all(s.refresh is not None for s in bound.slots.values())
    ids = llama_forward.ids
    llama_forward.ids = ids.flip(-1)  # other tokens than the reference pass's: each call must use its own q, k, v
    try:
        assert torch.allclose(bound.run(), llama_forward.run(), atol=2e-2)
    finally:
        llama_forward.ids = ids


def test_attention_figures_refuse_a_forward_that_missed_a_layer():
    calls = [[(0, 1, 10), (1, 1, 20)], [(0, 1, 12), (1, 1, 18)]]
    f = attention_figures(plain_ns=[100, 104], marked_ns=[110, 112], calls=calls, layers=[0, 1])
    assert f["attention_ns"] == 30 and f["rest_ns"] == 72 and f["instrumentation_cost_ns"] == 9
    assert f["layer_attention_ns"] == [11, 19] and f["attention_share"] == pytest.approx(30 / 102)
    with pytest.raises(ValueError, match=r"layers \[0\]"):
        attention_figures(plain_ns=[100], marked_ns=[110], calls=[[(0, 1, 10)]], layers=[0, 1])


class _Virtual:
    """The CPU device on a virtual timeline: marks read `now` after costing MARK_NS each, the test's kernels and
    forwards advance it by what they are said to take. The run loop's clock and sleep are its too, so a whole run is
    exact and takes no wall time beyond the tiny model's own forwards."""

    def __init__(self, mark_ns: int):
        self._dev, self.now, self.mark_ns = open_device("cpu"), 0, mark_ns

    def __getattr__(self, name):
        return getattr(self._dev, name)

    def mark(self):
        from harness.devices import Mark

        self.now += self.mark_ns
        return Mark(self.now)

    def wait(self, mark) -> None:
        pass

    def elapsed_ns(self, start, end) -> int:
        return end.handle - start.handle

    def clock(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += int(seconds * 1e9)


# a slow kernel's call, the rest of a forward, one mark, a refresh()
K_NS, R_NS, MARK_NS, F_NS = 4_000_000, 5_000_000, 500_000, 1_500_000


def _virtual_run(tmp_path, monkeypatch, *, model, text_file, kernels, random_weights=False):
    """An in-model run on the virtual timeline: each forward takes R_NS besides its attention, each call of `slow`
    K_NS, of sdpa-cpu nothing."""
    from harness.capture import ModelForward

    dev = _Virtual(MARK_NS)
    own = ModelForward.run

    def run(self):
        dev.now += R_NS
        return own(self)

    monkeypatch.setattr(ModelForward, "run", run)

    def slow(x, inner):
        def launch():
            dev.now += K_NS
            return inner()
        return launch

    def zeros_in_2(x, inner):
        return (lambda: torch.zeros_like(inner())) if _layer_of(x) == 2 else inner

    def advance(ns):
        dev.now += ns

    reg = _Registry(_kernel("slow", slow), _kernel("zeros-in-2", zeros_in_2),
                    _quantizing("requant", refresh="good", on_launch=lambda: advance(K_NS),
                                on_refresh=lambda: advance(F_NS)))
    cfg = InModelConfig(model=model, kernels=tuple(kernels), reference=kernels[0], text=str(text_file), seq_len=48,
                        windows=2, device="cpu", random_weights=random_weights, protocol=FAST, attention_pass_s=0.01,
                        results_dir=tmp_path / "results")
    return run_in_model(cfg, registry=reg, device=dev, clock=dev.clock, sleep=dev.sleep)


def test_the_per_layer_timing_adds_up_to_the_forward_within_its_measured_cost(model_dirs, text_file, tmp_path,
                                                                              monkeypatch):
    result = _virtual_run(tmp_path, monkeypatch, model=str(model_dirs["llama"]), text_file=text_file,
                          kernels=["sdpa-cpu", "slow", "zeros-in-2"])
    layers = 3
    slow = [r for r in result.rows if r["kernel"] == "slow"]
    fast = [r for r in result.rows if r["kernel"] == "sdpa-cpu"]
    assert len(slow) == len(fast) == 2 and all(r["layers"] == layers == r["attention_calls"] for r in slow + fast)
    for r, k in [(r, K_NS) for r in slow] + [(r, 0) for r in fast]:
        forward = layers * k + R_NS  # what the forward takes without any instrument
        # Each bracket holds its call and the cost of the mark that closes it; the copies, the mark that opens it.
        assert r["layer_attention_ns"] == [k + MARK_NS] * layers and r["copy_ns"] == layers * MARK_NS
        # The plain forward between two marks; the marked one pays three marks a call more: that is the cost.
        assert r["pass_forward_ns"] == forward + MARK_NS
        assert r["instrumentation_cost_ns"] == 3 * layers * MARK_NS == r["pass_marked_forward_ns"] - r["pass_forward_ns"]
        # The layers' attention and the rest of the model add up to the plain forward within the measured cost.
        assert abs(r["attention_ns"] + R_NS - r["pass_forward_ns"]) <= r["instrumentation_cost_ns"]
        assert r["rest_ns"] == r["pass_forward_ns"] - r["attention_ns"]
        assert r["attention_share"] == pytest.approx(layers * (k + MARK_NS) / (forward + MARK_NS))
    m = {r["measurement_id"]: r for r in result.run.measurements}
    for r in slow + fast:  # the sustained window timed the same forward, back to back (a chunk's closing mark amortized)
        assert r["pass_forward_ns"] - MARK_NS <= m[r["measurement_id"]]["time_ns"] <= r["pass_forward_ns"]
        # a launch is a forward, not the inputs' attention: no FLOP figures from one layer's shape
        assert all(m[r["measurement_id"]][k] is None for k in ("flops_per_launch", "tflops", "tflop_per_j",
                                                             "flop_per_cycle_per_sm"))

    run = result.run  # the kernel that failed the gate in layer 2 alone is its own row; the others were timed
    refused = [r for r in run.measurements if r["kernel"] == "zeros-in-2"]
    assert [r["status"] for r in refused] == ["gate_failed"] and "layer 2" in refused[0]["error"]
    assert run.status == "complete" and {r["kernel"] for r in run.timed} == {"sdpa-cpu", "slow"}
    stored = read_rows(run.path, "in_model")
    assert {r["kernel"] for r in stored} == {"sdpa-cpu", "slow"}
    assert all(len(r["layer_gate_max_abs_diff"]) == layers and r["random_weights"] is False for r in stored)
    assert all(r["gate_reference"].endswith(f"(the worst of {layers} layers)") for r in run.timed)
    info = read_rows(run.path, "runs")[0]
    assert json.loads(info["config_json"])["kind"] == "in_model" and "RANDOM" not in (info["notes"] or "")
    rows = compare_in_model(measurements=run.measurements, in_model=stored, info=info, reference="sdpa-cpu")
    assert [r.kernel for r in rows] == ["slow"] and rows[0].sentence.startswith("slow vs sdpa-cpu: no isolated run")
    expected = (layers * (K_NS + MARK_NS)) / (layers * MARK_NS)  # the attention's own ratio, exact on this timeline
    assert rows[0].attention.time.value == pytest.approx(expected)
    assert rows[0].end_to_end.time.value == pytest.approx((layers * K_NS + R_NS) / R_NS, rel=0.01)


def test_a_kernels_refresh_is_timed_apart_inside_its_attention_and_named_in_the_sentence(model_dirs, text_file,
                                                                                       tmp_path, monkeypatch):
    # requant: refresh() F_NS then launch K_NS each call. Its bracket holds both and the two marks that close them;
    # its refresh, the refresh and the mark after it. A kernel without a refresh pays no extra mark and has none.
    result = _virtual_run(tmp_path, monkeypatch, model=str(model_dirs["llama"]), text_file=text_file,
                          kernels=["sdpa-cpu", "requant"])
    layers = 3
    stored = read_rows(result.run.path, "in_model")
    req = [r for r in stored if r["kernel"] == "requant"]
    ref = [r for r in stored if r["kernel"] == "sdpa-cpu"]
    assert req and ref
    for r in req:
        assert r["layer_attention_ns"] == [F_NS + K_NS + 2 * MARK_NS] * layers
        assert r["refresh_ns"] == layers * (F_NS + MARK_NS) and r["pass_refresh_ns"] == [r["refresh_ns"]] * len(
            r["pass_plain_ns"])
        assert r["instrumentation_cost_ns"] == 4 * layers * MARK_NS  # one mark more a call than without a refresh
    assert all(r["refresh_ns"] is None and r["pass_refresh_ns"] is None for r in ref)
    assert all(r["instrumentation_cost_ns"] == 3 * layers * MARK_NS for r in ref)
    info = read_rows(result.run.path, "runs")[0]
    (row,) = compare_in_model(measurements=result.run.measurements, in_model=stored, info=info, reference="sdpa-cpu")
    share = (F_NS + MARK_NS) / (F_NS + K_NS + 2 * MARK_NS)
    assert row.refresh_share == pytest.approx(share)
    assert f" {share:.0%} of its attention in the model is its refresh(): q, k, v quantized or copied again" in row.sentence
    # less its refresh, its attention is its launches and their closing marks: (K + mark) against the reference's mark
    launch = (K_NS + MARK_NS) / MARK_NS
    assert row.launch.time.value == pytest.approx(launch) and row.attention.time.value == pytest.approx(
        (F_NS + K_NS + 2 * MARK_NS) / MARK_NS)
    assert f" Without it, its attention in the model is time {launch:.3f}" in row.sentence
    (cmp,) = in_model_comparison_figures([row])
    assert cmp["launch"]["time_b_over_a"] == pytest.approx(launch)
    table = in_model_comparison_table([row], title="t")
    assert "less refresh" in table.columns and f"{launch:.3f}" in table.rows[0][table.columns.index("less refresh")]
    # a comparison of kernels without a refresh has neither the ratio nor the column
    plain = replace(row, launch=None, refresh_share=None)
    assert "less refresh" not in in_model_comparison_table([plain], title="t").columns
    assert in_model_comparison_figures([plain])[0]["launch"] is None
    (fig,) = [f for f in in_model_figures(result.run.measurements, stored) if f["kernel"] == "requant"]
    assert fig["refresh_ms"] == pytest.approx(layers * (F_NS + MARK_NS) / 1e6)
    assert [f["refresh_ms"] for f in in_model_figures(result.run.measurements, stored)
            if f["kernel"] == "sdpa-cpu"] == [None]


def test_attention_figures_sum_the_refresh_of_every_call_and_leave_it_none_without_one():
    calls = [[(0, 1, 10, 4), (1, 1, 20, 6)], [(0, 1, 12, 5), (1, 1, 18, 7)], [(0, 1, 11, 3), (1, 1, 19, 3)]]
    f = attention_figures(plain_ns=[100, 104, 102], marked_ns=[110, 112, 111], calls=calls, layers=[0, 1])
    assert f["pass_refresh_ns"] == [10, 12, 6] and f["refresh_ns"] == 10
    plain = attention_figures(plain_ns=[100], marked_ns=[110], calls=[[(0, 1, 10, 0), (1, 1, 20, 0)]], layers=[0, 1])
    old = attention_figures(plain_ns=[100], marked_ns=[110], calls=[[(0, 1, 10), (1, 1, 20)]], layers=[0, 1])
    assert plain["refresh_ns"] is plain["pass_refresh_ns"] is old["refresh_ns"] is None


def test_a_random_weights_model_is_marked_in_every_output(text_file, tmp_path, monkeypatch):
    from harness.report import in_model_comparison_figures, in_model_comparison_table, in_model_figures

    result = _virtual_run(tmp_path, monkeypatch, model=miniature(MODELS["smollm2-135m"]), text_file=text_file,
                          kernels=["sdpa-cpu", "slow"], random_weights=True)
    run = result.run
    info = read_rows(run.path, "runs")[0]
    assert result.random_weights and "RANDOM-WEIGHTS" in result.workload
    assert info["notes"].startswith("RANDOM WEIGHTS") and json.loads(info["config_json"])["random_weights"] is True
    assert all("RANDOM-WEIGHTS" in r["input_label"] for r in read_rows(run.path, "measurements"))
    assert all(r["random_weights"] for r in read_rows(run.path, "in_model"))
    rows = compare_in_model(measurements=run.measurements, in_model=result.rows, info=info, reference="sdpa-cpu")
    assert rows and all(r.random_weights and r.sentence.startswith("RANDOM WEIGHTS") for r in rows)
    assert all("(RANDOM WEIGHTS)" in r[0] for r in in_model_comparison_table(rows, title="t").rows)
    assert all(f["random_weights"] for f in in_model_figures(run.measurements, result.rows))
    assert all(f["random_weights"] for f in in_model_comparison_figures(rows))


def test_a_decode_step_reads_the_cache_in_place_and_is_the_models_own(model_dirs, text_file):
    fwd = open_forward(model=str(model_dirs["llama"]), text=str(text_file), seq_len=48, seq_len_q=2, windows=2,
                       device="cpu", dtype="bfloat16")
    try:
        assert fwd.phase == "decode" and fwd.shape().seq_len == 2 and fwd.shape().seq_len_kv == 48
        bound = bind_forward(fwd, REG.get("sdpa-kvcache"))
        assert all(s.shares_kv for s in bound.slots.values())  # a bf16 cache: nothing copied but q
        own = fwd.run()
        assert torch.allclose(bound.run(), own, atol=0.1) and torch.equal(bound.run(), bound.run())
    finally:
        fwd.close()


def _cli(args, tmp_path):
    return _bench(["in-model", *args, "--results", str(tmp_path / "r")])


def _bench(args):
    from typer.testing import CliRunner

    from harness.cli import app

    return CliRunner().invoke(app, args, env={"COLUMNS": "250"})


@pytest.mark.slow
def test_the_command_times_the_layer_alone_then_in_the_model_and_writes_valid_figures(model_dirs, text_file, tmp_path):
    import jsonschema

    from harness.report import FIGURES_SCHEMA

    out = tmp_path / "figures.json"
    res = _cli(["--model", str(model_dirs["llama"]), "--text", str(text_file), "--device", "cpu", "--seq-len", "48",
                "--windows", "2", "--layer", "1", "--captures", str(tmp_path / "c"), "-k", "sdpa-cpu,sdpa-kvcache",
                "--quick", "--window-s", "0.05", "--chunk-s", "0.05", "--idle-s", "0", "--warmin-cap-s", "0.2",
                "--attention-pass-s", "0.01", "--json", str(out)], tmp_path)
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "where a forward's time went" in text and "against sdpa-cpu: alone and in the model" in text
    assert "sdpa-kvcache vs sdpa-cpu: alone on L01:captured time" in text and "in the model its attention time" in text
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, json.loads(FIGURES_SCHEMA.read_text()))
    assert doc["command"] == "in-model" and len(doc["runs"]) == 2  # the isolated run, then the in-model run
    (row,) = doc["tables"]["in_model_comparison"]
    assert row["isolated"]["input_b"] == "L01:captured" and row["attention"]["time_b_over_a"] > 0
    assert {f["kernel"] for f in doc["tables"]["in_model"]} == {"sdpa-cpu", "sdpa-kvcache"}

    # The in-model run names its isolated run, so `bench report` of it alone recomputes what the command printed:
    # found beside it, after both runs moved together; without it, the report says why it has no isolated ratio.
    iso_dir, im_dir = (Path(r["run_dir"]) for r in doc["runs"])
    cfg = json.loads(read_rows(im_dir, "runs")[0]["config_json"])
    assert cfg["isolated_run"] == {"run_id": iso_dir.name, "path": str(iso_dir), "input": None}
    moved = tmp_path / "moved"
    moved.mkdir()
    for d in (iso_dir, im_dir):
        d.rename(moved / d.name)
    report = _report_sections(moved / im_dir.name)
    (against,) = [s for s in report if s.title == "In the model: against sdpa-cpu, alone and in the model"]
    assert against.points == (row["sentence"],) and against.text == f"Isolated run: {iso_dir.name}."
    assert "where a forward's time went" in report[0].tables[0].title
    (moved / iso_dir.name).rename(tmp_path / "elsewhere")
    (against,) = [s for s in _report_sections(moved / im_dir.name) if s.title.startswith("In the model: against")]
    assert f"Its isolated run {iso_dir.name} is neither beside it" in against.text
    assert against.points[0].startswith("sdpa-kvcache vs sdpa-cpu: no isolated run to compare with; in the model")
    shown = _bench(["report", str(moved / im_dir.name)])
    assert shown.exit_code == 0 and against.points[0] in " ".join(shown.output.split())


def _report_sections(run_dir):
    return in_model_sections(read_run(run_dir))


@pytest.mark.parametrize("args, says", [
    (["--device", "cpu"], "needs --model"),
    (["--model", "smollm2-135m", "--device", "cpu", "--layer", "3,15"], "give one --layer"),
    (["--model", "smollm2-135m", "--device", "cpu", "--l2", "cold"], "--l2 cold rotates"),
    (["--model", "smollm2-135m", "--device", "cpu", "--launch", "graph"], "--launch graph replays CUDA graphs"),
])
def test_what_the_command_refuses_before_loading_anything(tmp_path, args, says):
    res = _cli(args + ["--isolated", "none"], tmp_path)
    assert res.exit_code == 2 and says in " ".join(res.output.split()), res.output
