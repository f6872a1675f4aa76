"""Paths of the real H200 runs, and a helper that rewrites a copy's runs row (the fixtures stay untouched).

A module with a name of its own: several test folders have a conftest.py, so `from conftest import ...`
picks whichever was imported first.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ISSUE2 = FIXTURES / "h200" / "20261130-043508-issue2-b7147a"
SMOLLM2 = FIXTURES / "h200" / "20261130-043801-smollm2-217172"
RUN_A = FIXTURES / "compare" / "20261130-043508-issue2-b7147a-A"
RUN_B = FIXTURES / "compare" / "20261130-043508-issue2-b7147a-B"
PAIR = ("gaussian:0.1", "gaussian:1")
LOWP_TABLE_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "h200" / "lowp_recipes_table.py"


def lowp_recipes_table():
    """benchmarks/h200/lowp_recipes_table.py as a module (a script, not a package): its main(argv) prints the tables."""
    spec = importlib.util.spec_from_file_location("lowp_recipes_table", LOWP_TABLE_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def set_run_field(run_dir: Path, **fields) -> None:
    """Rewrite columns of runs.parquet in place, keeping its schema and metadata."""
    t = pq.read_table(run_dir / "runs.parquet")
    for name, value in fields.items():
        i = t.schema.get_field_index(name)
        t = t.set_column(i, t.schema.field(i), pa.array([value], t.schema.field(i).type))
    pq.write_table(t, run_dir / "runs.parquet")
ISSUE4 = FIXTURES / "h200" / "20261130-062902-issue4-8b108c"
COLD_BURST = FIXTURES / "h200" / "20261130-063318-cold-burst-3b3994"
COMMITS_BASE = FIXTURES / "h200" / "20261130-063951-commits-0-7e7d7002-a32e54"
COMMITS_HEAD = FIXTURES / "h200" / "20261130-063951-commits-1-3e5cbb24-4bc550"
