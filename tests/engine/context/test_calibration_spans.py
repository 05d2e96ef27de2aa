"""Issue 28, linear in calls: a request's message ids are a span of the running history's list (``IdSpan``), not a
copy, and a calibrator matches them against an earlier call's in constant time when both are spans of one list from
one start — with exactly the answers of comparing the ids, whatever the history did in between."""

from __future__ import annotations

import random

from engine.context.calibration import Calibrator, IdSpan, SourceCalibrator, starts_with
from engine.context.snapshots import RunningHistory
from engine.model.messages import Message


def _history(ids: list[str]) -> RunningHistory:
    running = RunningHistory()
    running.extend([Message(role="user", content="x", id=i) for i in ids], [1] * len(ids))
    return running


def test_a_span_reads_as_the_ids_it_stands_for() -> None:
    running = _history(["a", "b", "c", "d", "e"])
    span = running.ids_of(1, 4)
    assert isinstance(span, IdSpan)
    assert len(span) == 3 and list(span) == ["b", "c", "d"] and span[0] == "b" and span[-1] == "d"
    assert span[:2] == ("b", "c") and span[1:] == ("c", "d") and span[::-1] == ("d", "c", "b")
    assert span == ("b", "c", "d") and span == ["b", "c", "d"] and span != ("b", "c")
    assert hash(span) == hash(("b", "c", "d"))
    running.extend([Message(role="user", content="y", id="f")], [1])
    assert list(span) == ["b", "c", "d"]  # what is appended later is not in it


def test_a_cut_history_gives_new_spans_and_keeps_the_old_ones() -> None:
    running = _history(["a", "b", "c"])
    before = running.ids_of(0, 3)
    running.truncate(1)
    running.extend([Message(role="user", content="z", id=i) for i in ("B", "c")], [1, 1])
    after = running.ids_of(0, 3)
    assert list(before) == ["a", "b", "c"] and list(after) == ["a", "B", "c"]
    assert not starts_with(after, before)  # not the same list: compared, and they differ
    assert starts_with(running.ids_of(0, 3), running.ids_of(0, 2))  # the same list and start: at once
    assert starts_with(after, ("a", "B")) and not starts_with(after, ("a", "b"))


def test_spans_and_tuples_calibrate_alike_through_rewinds() -> None:
    """Two calibrators fed the same calls — one the running history's spans, one tuples of the same ids — give the
    same estimate for every request, through growth, cuts (rewinds) and compactions (a new start)."""
    rng = random.Random(7)
    running = RunningHistory()
    by_span, by_tuple = SourceCalibrator(), SourceCalibrator()
    base, plain = Calibrator(), Calibrator()
    start, fresh = 0, 0
    for step in range(600):
        roll = rng.random()
        if roll < 0.08 and len(running) > start + 2:
            running.truncate(rng.randrange(start + 1, len(running)))
        elif roll < 0.1:
            start = len(running)
            by_span.restart()
            by_tuple.restart()
        adds = rng.randrange(1, 4)
        running.extend([Message(role="user", content="m", id=f"m{fresh + i}") for i in range(adds)], [5] * adds)
        fresh += adds
        span = running.ids_of(start, len(running))
        raw = 100 + 5 * len(span)
        fixed = (10, 0, 20)
        assert by_span.calibrate(raw, span, fixed) == by_tuple.calibrate(raw, tuple(span), fixed), step
        assert base.calibrate(raw, span, fixed) == plain.calibrate(raw, tuple(span), fixed), step
        actual = round(raw * rng.uniform(0.5, 1.2))
        by_span.record(raw, actual, span, fixed)
        by_tuple.record(raw, actual, tuple(span), fixed)
        base.record(raw, actual, span, fixed)
        plain.record(raw, actual, tuple(span), fixed)
    assert base.to_json() == plain.to_json()
