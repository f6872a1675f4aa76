"""The model-level error in `bench report`: a run of `bench error --model` (written here from made-up rows, no
model) gets its table and per-layer figure and no timing sections; a sustained run gets no model section."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness.results import RunWriter, read_rows, read_run

pytest.importorskip("polars")


def _write_run(root, *, layers=(0, 1, 2), kernels=(("sdpa-cudnn", "floor", 1e-4), ("triton-fp8-lean", "kernel", 3e-4)),
               docs=4, tokens=16, random_weights=False):
    w = RunWriter(root, "20261203-000000-me-abcdef")
    w.write_run({"status": "running", "device_name": "NVIDIA H200", "command": "bench error --model smollm2-135m",
                 "config_json": json.dumps({"kind": "model_error", "model": "smollm2-135m", "seq_len": tokens,
                                            "random_weights": random_weights, "text": "pydoc",
                                            "provenance": {"text": {"origin": "CPython pydoc", "unit": "documents"}}})})
    g = np.random.default_rng(0)
    rows = []
    for name, role, scale in kernels:
        for scope, layer in [("all", None), *(("layer", i) for i in layers)]:
            for d in range(docs):
                kl = g.exponential(scale * (1 if layer is None else 0.1 * (layer + 1)), size=tokens)
                top1 = g.random(tokens) < 0.98
                rows.append({"kernel": name, "kernel_source": "m:f", "role": role, "scope": scope, "layer": layer,
                             "document": d, "document_index": d, "document_title": f"doc {d}", "tokens": tokens,
                             "seq_len": tokens, "kernel_dtype": "bfloat16", "kl_mean_nats": float(kl.mean()),
                             "kl_max_nats": float(kl.max()), "top1_agreement": float(top1.mean()),
                             "kl_nats": kl.tolist(), "top1_match": top1.tolist()})
    w.append_rows("model_error", rows[: len(rows) // 2])  # two parts, as two batches of documents write them
    w.append_rows("model_error", rows[len(rows) // 2:])
    w.finish("complete")
    return w.path, rows


def test_a_model_error_run_reports_its_table_and_figure_and_no_timing(tmp_path):
    from harness.report import build_report, write_report

    path, rows = _write_run(tmp_path)
    stored = read_rows(path, "model_error")
    assert len(stored) == len(rows) and stored[0]["kl_nats"] == pytest.approx(rows[0]["kl_nats"], rel=1e-6)
    report = build_report(read_run(path))
    titles = [s.title for s in report.sections]
    assert titles == ["Model error: KL divergence of the next-token distribution", "Model error per layer", "Provenance"]
    assert "no timing" in report.header and "WARNING" not in report.header
    sec, per = report.sections[:2]
    (table,) = sec.tables
    assert [r[:2] for r in table.rows] == [("sdpa-cudnn (floor)", "every layer"), ("triton-fp8-lean", "every layer")]
    assert table.rows[1][2] == "4 x 16" and "[" in table.rows[1][3] and table.rows[0][7] == "1 [1, 1]"
    assert table.rows[1][6] == "-" and table.rows[0][8:] == ("-", "-")  # no dNLL kept; the floor is the band
    assert table.rows[1][9] == "above band" and float(table.rows[1][8]) > 1e-4  # 3x the floor's KL, 4 documents
    (layers,) = per.tables
    assert len(layers.rows) == 2 * 3 and layers.rows[-1][1] == "layer 2" and not per.figures
    (fig,) = sec.figures
    assert fig.key == "model-error" and fig.png.startswith(b"\x89PNG")
    written = write_report(report, html=tmp_path / "r.html", md=tmp_path / "r.md")
    html = (tmp_path / "r.html").read_text()
    assert "KL mean (nats)" in html and "data:image/png;base64" in html and "Clock, power" not in html
    assert (tmp_path / "r-model-error.png") in written and "r-model-error.png" in (tmp_path / "r.md").read_text()


def test_random_weights_and_an_unfinished_run_are_said(tmp_path):
    from harness.report import build_report
    from harness.results import RunWriter

    path, _ = _write_run(tmp_path, random_weights=True)
    run = read_run(path)
    text = build_report(run).sections[0].text
    assert "RANDOM WEIGHTS" in text and "RANDOM" in build_report(run).header.upper()
    w = RunWriter.__new__(RunWriter)  # rewrite the status only
    w.path, w.run_id, w._run_row = path, path.name, dict(run.info)
    w.finish("incomplete", "stopped by SIGINT (Ctrl-C)")
    assert "WARNING: the run is 'incomplete'" in build_report(read_run(path)).header


def test_a_sustained_run_has_no_model_error_section():
    from pathlib import Path

    from harness.report import build_report

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "h200" / "20261202-153119-smollm2-d64-3a35f6"
    report = build_report(read_run(fixture), figures=False)
    assert not any("Model error" in s.title for s in report.sections)
    assert read_rows(fixture, "model_error") == []
