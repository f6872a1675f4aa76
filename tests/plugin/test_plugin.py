"""The `sustained` fixture under pytest on the CPU: the example kernel repository's tests, run by pytester in this
process (a fresh pytest session each, with the plugin loaded as an installed one is; -n 1's worker is a process).
The example's README commands, in processes of their own as a reader runs them: test_example_readme.py."""

from __future__ import annotations

import os
import shutil
from importlib.metadata import entry_points
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kernel_repo"
# 0.1 s windows: these tests check what the fixture reports and refuses, not its figures.
QUICK = ["--sustained-device", "cpu", "--sustained-quick", "--sustained-repeats", "1", "--sustained-window-s", "0.1",
         "-p", "no:cacheprovider"]


def _plugin_args() -> list[str]:
    # Installed, the plugin loads through its pytest11 entry point; from a bare source tree, name it.
    installed = any(ep.value == "harness.pytest_plugin" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "harness.pytest_plugin"]


@pytest.fixture
def example_repo(pytester, monkeypatch):
    shutil.copytree(EXAMPLE, pytester.path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # see tests/commits: OpenMP barriers on a shared 2-CPU machine
    # Not this suite's xdist worker's variables: pytest-benchmark reads PYTEST_XDIST_WORKER as "under xdist" and
    # then disables every benchmark of the session it sees them in.
    for name in [k for k in os.environ if k.startswith("PYTEST_XDIST_")]:
        monkeypatch.delenv(name)
    return pytester


def run(pytester, *args):
    return pytester.runpytest_inprocess(*_plugin_args(), *QUICK, *args)


@pytest.mark.slow
def test_kernel_by_name_and_attention_inputs(example_repo):
    example_repo.makepyfile(test_more="""
        import torch
        from harness.inputs import AttentionShape, InputSpec, make_inputs

        SHAPE = AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=64, head_dim_qk=16)

        def test_by_name(sustained):
            out = sustained("sdpa-cpu", InputSpec(shape=SHAPE, dtype="float32"))
            assert out.chunk_times_s and out.extra_info["kernel"] == "sdpa-cpu"

        def test_given_tensors(sustained):
            inputs = make_inputs(InputSpec(shape=SHAPE, dtype="float32", source="gaussian:1"), device="cpu")
            out = sustained("sdpa-cpu", inputs)
            assert out.extra_info["input"] == "given:gaussian:1"

        def test_twice_is_an_error(sustained):
            spec = InputSpec(shape=SHAPE, dtype="float32")
            sustained("sdpa-cpu", spec)
            sustained("sdpa-cpu", spec)
    """)
    result = run(example_repo, "test_more.py")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*already used in sustained(...) mode*"])


NAN_KERNEL = """
    from harness.inputs import AttentionShape, InputSpec

    def nan_attention(q, k, v, is_causal=True, scale=None):
        return q * float("nan")

    def test_nan_kernel(sustained):
        sustained(nan_attention, InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=32,
                                                                head_dim_qk=16), dtype="float32"))
"""


@pytest.mark.slow
def test_disabled_benchmarks_run_once_untimed_and_still_gate(example_repo):
    """--benchmark-disable runs each test once, untimed; issue 31: it skipped the gate, so a NaN kernel passed."""
    example_repo.makepyfile(test_nan=NAN_KERNEL)
    result = run(example_repo, "tests", "test_nan.py", "--benchmark-disable")
    result.assert_outcomes(passed=2, failed=1)
    assert "benchmark: 2 tests" not in result.stdout.str()  # no timing table: nothing was timed
    result.stdout.fnmatch_lines(["*sustained (benchmarks disabled, the gate still runs): Kernel*failed the "
                                 "correctness gate*NaN/Inf values*"])


@pytest.mark.slow
def test_under_xdist_the_fixture_still_gates(example_repo):
    """pytest-benchmark disables itself, unasked, under xdist (-n); issue 31: the fixture then skipped the gate."""
    example_repo.makepyfile(test_nan=NAN_KERNEL)
    result = run(example_repo, "test_nan.py", "-n", "1")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*failed the correctness gate*"])


def test_bad_arguments_say_what_is_expected(example_repo):
    example_repo.makepyfile(test_bad="""
        from harness.inputs import AttentionShape, InputSpec

        def test_bad_kernel(sustained):
            sustained(42, None)

        def test_unknown_kernel(sustained):
            sustained("flash9", InputSpec(shape=AttentionShape(batch=1, heads_q=2, heads_kv=2, seq_len=8, head_dim_qk=8)))
    """)
    result = run(example_repo, "test_bad.py")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*kernel must be an attention function, a harness.kernels.Kernel or a kernel name, not int*",
                                 "*sustained: No kernel named 'flash9'. Known kernels:*"])


def test_benchmark_skip_skips_sustained_tests(example_repo):
    result = run(example_repo, "tests", "--benchmark-skip")
    result.assert_outcomes(skipped=2)


@pytest.mark.slow
def test_plain_function_summary_line_results_dir_and_ignored_options(example_repo):
    """A plain function passed as an object (and one in flash-attn's layout) is timed; the terminal summary has
    a line per test with ms, clock, cycles, power and limiter; runs persist in .bench-results under the
    rootdir; a pytest-benchmark timing option is reported as ignored; a misfit names the signature."""
    example_repo.makepyfile(test_plain="""
        import torch.nn.functional as F
        from harness.inputs import AttentionShape, InputSpec

        SPEC = InputSpec(shape=AttentionShape(batch=1, heads_q=4, heads_kv=2, seq_len=64, head_dim_qk=16), dtype="float32")

        def my_attn(q, k, v, causal=True, scale=None, enable_gqa=False):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=enable_gqa)

        def fa_layout(q, k, v, causal=True, softmax_scale=None):
            assert q.shape[1] == 64, "gets [B, S, H, d]"
            out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                 is_causal=causal, scale=softmax_scale)
            return out.transpose(1, 2)

        def test_plain(sustained):
            out = sustained(my_attn, inputs=SPEC)
            assert out.extra_info["kernel_source"] == "test_plain:my_attn"

        def test_bshd(sustained):
            sustained(fa_layout, inputs=SPEC, layout="bshd", gqa="expand")

        def test_misfit(sustained):
            sustained(lambda q: q, inputs=SPEC)
    """)
    result = run(example_repo, "test_plain.py", "--benchmark-min-rounds=50", "-W", "default")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*sustained: Kernel * cannot be called as attention: it takes 1 positional parameter(s) (q)*",
        "*= sustained =*",
        "test_plain.py::test_plain: * ms, clock - MHz (none; SMI -, in-band -), - Mcycles, - W, limiter none, quick*",
        "test_plain.py::test_bshd: * ms, *",
    ])
    assert "IgnoredOptionWarning" in out and "ignores --benchmark-min-rounds" in out
    runs = list((example_repo.path / ".bench-results").iterdir())
    assert len(runs) == 2 and all((r / "runs.parquet").is_file() for r in runs)
