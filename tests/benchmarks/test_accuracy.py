"""The calibrated count meets its accuracy target on the real trajectories (heuristic raw estimates)."""

from __future__ import annotations

from benchmarks.accuracy import TRAJECTORIES, calibrated_series, load_calls, measure, measure_sources, source_files
from engine.context.tokens import estimate_message_tokens


def test_trajectories_present() -> None:
    assert len(list(TRAJECTORIES.glob("*.traj.json"))) == 3


def test_calibrated_heuristic_meets_target() -> None:
    rows = {r.name: r for r in measure(exact=False)}
    cal = rows["calibrated heuristic"]
    assert cal.n > 200
    assert cal.median < 0.01 and cal.p90 < 0.02
    # and the raw heuristic really is far off: calibration is doing the work
    assert rows["heuristic (chars×2/5)"].median > 0.2


def test_calibration_uses_only_earlier_reports() -> None:
    path = sorted(TRAJECTORIES.glob("*.traj.json"))[0]
    _, calls = load_calls(path)
    raw = [sum(estimate_message_tokens(m) for m in c.request) for c in calls]
    series = calibrated_series(raw, calls)
    assert len(series) == len(calls) - 1
    # changing a later report must not change earlier calibrated values
    calls[-1].actual *= 3
    assert calibrated_series(raw, calls)[:-1] == series[:-1]


def test_other_agents_sessions() -> None:
    agents = [a for a, _ in source_files()]
    assert agents.count("claude-code") == 7 and agents.count("codex") == 3 and len(agents) == 15
    rows = {r.name: r for r in measure_sources()}
    claude, codex = rows["claude-code: all"], rows["codex: all"]
    assert claude.n == 321 and codex.n == 290 and rows["openhands: all"].n == 1  # every call after a session's first
    assert claude.median < 0.01 and claude.p90 < 0.02
    assert codex.median < 0.01 and codex.p90 < 0.03  # redacted text and encrypted reasoning: sized by length
    every = rows["all imported calls"]
    assert every.n == 612 and every.p90 < 0.05 and every.over_25 == 0
    assert every.other_basis == 11  # each one listed in tests/engine/context/test_source_calibration.py
    # the first call after each compaction is included, and measured on its own
    assert rows["first call after a compaction"].n == 3
