"""HeightIndex (widgets/chat_view/height_index.py) against a plain list."""

from __future__ import annotations

import random

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
