"""The index rows' timestamps (``engine.usage.rows._ts``): the shortcuts for the forms the readers make give what the
datetime parse gives, for every time and for the strings that only look like one."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from engine.usage.rows import _ts
from engine.usage.rows import _ts_parsed as _parsed  # (what _ts gives without its shortcuts)

ODD = ["2026-02-12T01:41:40.000+00:00", "2026-02-30T01:41:40.277+00:00", "2026-02-12 01:41:40.277+00:00",
       "2026-02-12X01:41:40.277+00:00", "2026-02-12T24:41:40.277+00:00", "2026-02-12T01:41:40,277+00:00",
       "\u0662\u0660\u0662\u0666-02-12T01:41:40.277+00:00", "2026-02-12T01:41:60.277+00:00",
       "0001-01-01T00:00:00.001+00:00", "9999-12-31T23:59:59.999+00:00", "2026-02-12T01:41:40.277-00:00",
       "2026-02-12T01:41:40.2770+00:00", "2026-02-12T01:41:4.2770+00:00", "2026-02-12T01:41:40.277+01:00",
       "2026-02-12T01:41:40.27a+00:00", "2026-02-12T01:41:40.277+00:0Z", "not a time at all, 29 chars..",
       "2026-W07-4T01:41:40.277+00:00", "2026-043T01:41:40.2770+00:00", "2026-02-12T01-41-40.277+00:00",
       "2026-02-12T1:41:40.2777+00:00", "+2026-02-1T01:41:40.277+00:00"]


@pytest.mark.parametrize("ts", ODD)
def test_a_string_shaped_like_a_readers_time_is_read_as_the_parse_reads_it(ts: str) -> None:
    assert _ts(ts) == _parsed(ts)


def test_every_time_the_readers_make_is_read_as_the_parse_reads_it() -> None:
    rng = random.Random(28)
    start = datetime(1, 1, 1, tzinfo=UTC)
    for _ in range(20_000):
        when = start + timedelta(milliseconds=rng.randrange(0, 3 * 10**14))
        iso = when.isoformat(timespec="milliseconds")  # what engine.sources.model.iso makes: ...+00:00
        assert _ts(iso) == _parsed(iso)
