"""tests/ordering.py: the files go to the workers longest first, each file's tests together and in their order."""

from __future__ import annotations

import json

from tests.ordering import DURATIONS, file_order, read_durations


class Item:
    def __init__(self, nodeid: str, slow: bool = False) -> None:
        self.nodeid, self._slow = nodeid, slow

    def get_closest_marker(self, name: str):
        return object() if name == "slow" and self._slow else None


def test_files_longest_first_with_their_tests_together_and_in_order():
    items = [Item("a.py::one"), Item("a.py::two"), Item("b.py::one"), Item("c.py::one"), Item("c.py::two"),
             Item("d.py::x")]
    got = [i.nodeid for i in file_order(items, {"a.py": 1.0, "b.py": 30.0, "c.py": 5.0, "d.py": 5.0})]
    assert got == ["b.py::one", "c.py::one", "c.py::two", "d.py::x", "a.py::one", "a.py::two"]


def test_a_file_missing_from_the_table_goes_first_when_slow_and_last_when_not():
    items = [Item("new_fast.py::t"), Item("known.py::t"), Item("new_slow.py::a"), Item("new_slow.py::b", slow=True)]
    got = [i.nodeid for i in file_order(items, {"known.py": 12.0})]
    assert got == ["new_slow.py::a", "new_slow.py::b", "known.py::t", "new_fast.py::t"]
    # without a table: the slow files first, the rest as collected
    assert [i.nodeid for i in file_order(items, {})] == ["new_slow.py::a", "new_slow.py::b", "new_fast.py::t",
                                                         "known.py::t"]


def test_the_committed_table_names_files_that_exist(tmp_path):
    # a renamed or deleted file leaves a stale row: harmless to the order, but the table should be rewritten
    root = DURATIONS.parents[1]
    table = read_durations(DURATIONS)
    assert table, f"{DURATIONS} is missing or empty: run scripts/test_durations.py"
    missing = [f for f in table if not (root / f).is_file()]
    assert not missing, f"{DURATIONS} names files that no longer exist, {missing}: run scripts/test_durations.py"
    assert read_durations(tmp_path / "absent.json") == {}
    (tmp_path / "t.json").write_text(json.dumps({"seconds": {"x.py": 1.5}}))
    assert read_durations(tmp_path / "t.json") == {"x.py": 1.5}
