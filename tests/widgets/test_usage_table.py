"""widgets.usage_table alone: a table of plain records sorted by each column's key (numbers as numbers, no value
last either way, ties in the records' order), its texts in the shared formats and each row's path."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt

from widgets.usage_table import (
    PATH_ROLE,
    Column,
    UsageTable,
    int_column,
    int_text,
    pct_text,
    usd_column,
    usd_text,
)


def test_a_table_sorts_by_the_columns_key_and_keeps_each_rows_path(qtbot: Any) -> None:
    table = UsageTable([Column("Name", lambda r: str(r["name"])), int_column("Calls", "calls"),
                        usd_column("Cost", "cost_usd")], path="path")
    qtbot.addWidget(table)
    records = [{"name": "a", "calls": 9, "cost_usd": 0.5, "unpriced_calls": 0, "path": "/a.jsonl"},
               {"name": "b", "calls": 10, "cost_usd": None, "unpriced_calls": 2, "path": "/b.jsonl"},
               {"name": "c", "calls": 100, "cost_usd": 12.0, "unpriced_calls": 1, "path": "/c.jsonl"},
               {"name": "d", "calls": 10, "cost_usd": 0.25, "unpriced_calls": 0, "path": "/d.jsonl"}]
    table.set_records(records)
    assert table.row_count() == 4
    table.sort_by(1, Qt.SortOrder.DescendingOrder)  # 100, 10, 10, 9: numbers, not their text; ties kept in order
    assert [table.text(r, 0) for r in range(4)] == ["c", "b", "d", "a"]
    assert table.text(0, 1) == "100" and table.path(0) == "/c.jsonl"
    assert table.model().index(0, 0).data(PATH_ROLE) == "/c.jsonl"
    for order in (Qt.SortOrder.AscendingOrder, Qt.SortOrder.DescendingOrder):  # no price: last either way
        table.sort_by(2, order)
        assert table.text(3, 0) == "b" and table.text(3, 2) == "unknown"
    table.sort_by(2, Qt.SortOrder.AscendingOrder)
    assert [table.text(r, 2) for r in range(3)] == [usd_text(0.25), usd_text(0.5), usd_text(12.0, 1)]


def test_the_shared_number_formats() -> None:
    assert usd_text(None) == "" and usd_text(None, 1) == "unknown" and usd_text(3.0, 1) == "$3.00+"
    assert usd_text(True) == ""  # a bool is no figure
    assert pct_text(0.5) == "50 %" and pct_text(None) == ""
    assert int_text(12345) == "12,345" and int_text(None) == ""
