"""The chart's growing per-call series (widgets/chart_parts.py: Timeline)."""

from __future__ import annotations

import math
import random

import numpy as np

from engine.model.snapshot import ContextSnapshot
from engine.model.timeline import TimelineCall
from widgets.chart_parts import Timeline


def call(i: int, rng: random.Random) -> TimelineCall:
    snap = ContextSnapshot(
        window=rng.choice([0, 100_000, 200_000]), max_tokens=1_000, system=1_000 + rng.randrange(500),
        summary=0, history_assistant=rng.randrange(9_000), history_user=rng.randrange(20_000),
        history_tool=rng.randrange(90_000), tools=500,
        threshold_tokens=rng.choice([0, 80_000, 160_000]), estimator="heuristic", accuracy="calibrated",
        provider_prompt_tokens=rng.choice([None, rng.randrange(150_000)]), raw_prompt_tokens=rng.randrange(150_000),
        call_index=i,
    )
    return TimelineCall.from_json(snap.to_json())


def direct(tl: Timeline) -> tuple[float, float, float]:
    n = tl.n
    drawn = [0.0] + ([float(tl.values[:, :n].sum(axis=0).max())] if n else [])
    drawn += [float(v) for v in (*tl.provider[:n], *tl.raw[:n]) if not math.isnan(v)]
    window = max([0.0] + [float(v) for v in tl.window[:n] if not math.isnan(v)])
    threshold = max([0.0] + [float(v) for v in tl.threshold[:n] if not math.isnan(v)])
    return max(drawn), window, threshold


def test_peaks_follow_every_change_of_the_calls_and_are_kept_between():
    rng = random.Random(5)
    tl = Timeline()
    assert tl.peaks() == (0.0, 0.0, 0.0)
    for i in range(300):
        op = rng.random()
        if op < 0.75:
            tl.append(call(i, rng))
        elif op < 0.95:
            tl.replace_last(call(i, rng))
        else:
            tl.clear()
        assert tl.peaks() == direct(tl)
    tl.append(call(300, rng))
    assert tl.peaks() == direct(tl) and tl.peaks()[0] > 0
    for series in (tl.values[:, : tl.n], tl.provider[: tl.n], tl.raw[: tl.n]):
        series[...] = 0.0  # (not a change the chart makes: shows that the peaks are kept until one)
    assert direct(tl)[0] == 0.0 and tl.peaks()[0] > 0
    tl.append(call(301, rng))
    assert tl.peaks() == direct(tl)
    assert np.isfinite(tl.peaks()).all()
