"""The rows handed to DuckDB (``engine.usage.storage._text_columns``): the columns taken apart in C when every row has
the same keys in the same order, and an all-ASCII text column handed over as it is, give the arrays the row-by-row
path gives."""

from __future__ import annotations

from typing import Any

import numpy as np

from engine.usage import storage

COLUMNS = {"name": "VARCHAR", "count": "BIGINT", "share": "DOUBLE", "tools": "VARCHAR[]", "when": "TIMESTAMP"}


def _rows() -> list[dict[str, Any]]:
    return [
        {"name": "plain", "count": 3, "share": 0.5, "tools": ["Read", "Bash"], "when": "2026-03-01 10:00:00"},
        {"name": None, "count": None, "share": None, "tools": [], "when": None},
        {"name": "ascii too", "count": 2**40, "share": 1, "tools": ["Edit"], "when": "2026-03-01 10:00:01.5"},
    ]


def _same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert a[k].dtype == b[k].dtype and a[k].tolist() == b[k].tolist(), k
        assert np.ma.getmaskarray(a[k]).tolist() == np.ma.getmaskarray(b[k]).tolist(), k


def test_rows_of_one_shape_give_the_row_by_row_arrays() -> None:
    rows = _rows()
    assert storage._transposed(rows) is not None
    shuffled = [rows[0], dict(reversed(list(rows[1].items()))), rows[2]]  # one row's keys in another order
    assert storage._transposed(shuffled) is None
    _same(storage._text_columns(COLUMNS, rows), storage._text_columns(COLUMNS, shuffled))


def test_text_that_is_not_plain_ascii_goes_through_db_text() -> None:
    for odd, shown in (("caf\u00e9", "caf\u00e9"), ("a\ud800b", "a\\ud800b"), (42, "42")):
        rows = [{**row, "name": odd if i == 2 else row["name"]} for i, row in enumerate(_rows())]
        assert not storage._plain_text([r["name"] for r in rows])
        assert storage._text_columns(COLUMNS, rows)["name"].tolist() == ["plain", None, shown]
    assert storage._plain_text(["plain", None, "ascii too"]) and storage._plain_text([None, None])


def test_a_row_without_a_column_gives_none_there() -> None:
    rows = _rows()
    del rows[1]["when"]
    arrays = storage._text_columns(COLUMNS, rows)
    assert arrays["when"].tolist() == ["2026-03-01 10:00:00", None, "2026-03-01 10:00:01.5"]
