"""HeightIndex (widgets/chat_view/height_index.py) against a plain list."""

from __future__ import annotations

import random
from typing import Any

from widgets.chat_view import HeightIndex


def test_height_index_matches_a_plain_list():
    rng = random.Random(7)
    heights = [rng.randint(1, 300) for _ in range(257)]
    idx = HeightIndex(heights[:100])
    for h in heights[100:]:
        idx.append(h)
    for _ in range(200):
        r = rng.randrange(len(heights))
        heights[r] = rng.randint(1, 300)
        idx.set(r, heights[r])
    for i in range(len(heights) + 1):
        assert idx.prefix(i) == sum(heights[:i])
    for y in [0, 1, 150, 5_000, sum(heights) - 1, sum(heights) + 100]:
        row = idx.find(y)
        if y < sum(heights):
            assert sum(heights[:row]) <= y < sum(heights[: row + 1])
        else:
            assert row == len(heights) - 1
    assert HeightIndex().find(10) == 0


def test_rows_taken_out_leave_the_sums_a_fresh_index_has() -> None:
    """Rows taken out anywhere (a run from the end, as a followed session's last message taken back, or from the
    middle) leave the very tree a fresh index of the rows left has; a few rows from the end of many are taken out
    without making the whole index again (no pass over every row for each message a follow takes back)."""
    rng = random.Random(28)
    heights = [rng.randint(1, 400) for _ in range(3_000)]
    idx = HeightIndex(heights)
    for _ in range(300):
        n = len(heights)
        first = rng.randrange(n) if rng.random() < 0.2 else max(0, n - rng.randint(1, 3))
        last = min(n - 1, first + rng.randint(0, 2))
        idx.remove(first, last)
        del heights[first:last + 1]
        fresh = HeightIndex(heights)
        assert idx.a == fresh.a and idx.t == fresh.t
        y = rng.randrange(max(1, fresh.total()))
        assert idx.find(y) == fresh.find(y) and idx.total() == sum(heights)
    made_again: list[int] = []
    real = HeightIndex.reset

    def counted(self: HeightIndex, rows: Any) -> None:
        made_again.append(1)
        real(self, rows)

    big = HeightIndex([rng.randint(1, 400) for _ in range(10_000)])
    HeightIndex.reset = counted  # type: ignore[method-assign]
    try:
        big.remove(9_998, 9_999)
    finally:
        HeightIndex.reset = real  # type: ignore[method-assign]
    assert made_again == [] and len(big) == 9_998


def test_the_index_holds_machine_integers_not_an_object_a_row() -> None:
    """A followed session's chat gains rows for as long as it grows: its heights and their sums are 8 bytes a row each
    (an int object and a list slot each were ~80 bytes a row), with the same sums."""
    import tracemalloc

    rng = random.Random(41)
    heights = [rng.randint(300, 5_000) for _ in range(20_000)]  # (rows taller than the small ints Python shares)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        idx = HeightIndex(heights[:10_000])
        for h in heights[10_000:]:
            idx.append(h)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 24 * len(heights), f"{held / len(heights):.0f} bytes a row"
    assert idx.total() == sum(heights) and idx.prefix(12_345) == sum(heights[:12_345])
    assert idx.find(sum(heights[:777])) == 777
