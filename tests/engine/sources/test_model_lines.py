"""engine.sources.model.lines_holding: the lines of a file that hold a needle, found by blocks."""

from __future__ import annotations

import io

import pytest

from engine.sources import model
from tests.engine.sources.conftest import BIG_CLAUDE


@pytest.mark.parametrize("block", [5, 333, 65_536, 8 * 2**20])
def test_the_lines_holding_a_needle_are_the_ones_a_pass_line_by_line_finds(
        monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    monkeypatch.setattr(model, "MAX_LINE_BYTES", 50_000)
    lines = BIG_CLAUDE.read_bytes().splitlines(keepends=True)
    long_line = b'{"usage": "' + b"u" * 60_000 + b'"}\n'  # over the cap: passed over unread
    data = b"".join(lines[:3]) + long_line + b"".join(lines[3:]) + b'{"usage": 1'  # a partial last line
    needle = b'"usage"'
    want = [ln for ln in data.splitlines(keepends=True) if needle in ln and ln.endswith(b"\n") and len(ln) <= 50_001]
    got = list(model.lines_holding(io.BytesIO(data), needle, block=block))
    assert got == want and len(got) > 100
