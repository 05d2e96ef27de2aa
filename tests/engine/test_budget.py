from __future__ import annotations

from typing import Any

import pytest

from engine.context.budget import is_over_context_budget
from engine.context.calibration import Calibrator
from engine.context.snapshots import build_snapshot
from engine.context.tokens import estimate_message_tokens, estimate_tool_defs_tokens
from engine.context.window import resolve_context_window, resolve_window
from engine.model.snapshot import CALIBRATED, ESTIMATED, EXACT, ContextSnapshot, WindowInfo, history_budget

TOOLS = [{"type": "function", "function": {"name": "bash", "description": "run", "parameters": {"type": "object"}}}]


def _msgs(n: int, size: int = 50) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "x" * size, "id": f"m{i}"} for i in range(n)]


def test_over_budget_strictly_greater() -> None:
    msgs = _msgs(3)
    used = sum(estimate_message_tokens(m) for m in msgs) + estimate_tool_defs_tokens(TOOLS)
    assert not is_over_context_budget(used + 100, msgs, TOOLS, 100)  # equality is not over
    assert is_over_context_budget(used + 99, msgs, TOOLS, 100)
    assert not is_over_context_budget(100, [], [], 100)
    assert is_over_context_budget(99, [], None, 100)


def test_history_budget_formula() -> None:
    assert history_budget(1000, 100, 50, 30, 200) == 620
    assert history_budget(100, 100, 50, 30, 200) < 0


def test_window_override_model_fallback() -> None:
    assert resolve_window(128_000, None, 4096) == WindowInfo(128_000, 4096, "model")
    assert resolve_window(128_000, 8000, 4096) == WindowInfo(8000, 4096, "override")
    assert resolve_window(None, None, 4096) == WindowInfo(16_384, 4096, "fallback")
    assert resolve_window(0, None, 1000).context_window == 4000
    with pytest.raises(ValueError, match="max_tokens"):
        resolve_window(None, None, 0)
    with pytest.raises(ValueError, match="override"):
        resolve_window(None, -5, 10)


def test_resolve_context_window_unknown_model_falls_back() -> None:
    def boom(model: str) -> dict[str, Any]:
        raise ImportError("No module named 'litellm'")

    info = resolve_context_window("nobody/knows", None, 2048, model_info=lambda m: None)  # a model litellm lacks
    assert info == WindowInfo(8192, 2048, "fallback")
    assert resolve_context_window("nobody/knows", None, 2048, model_info=boom) == info  # litellm cannot be loaded
    info = resolve_context_window("x", None, 2048, model_info=lambda m: {"max_input_tokens": 32_000})
    assert info.context_window == 32_000 and info.source == "model"
    # max_tokens is the output limit, never the window
    info = resolve_context_window("x", None, 2048, model_info=lambda m: {"max_input_tokens": None})
    assert info.context_window == 8192


def _snapshot(calibrator: Calibrator | None = None, draft: int = 0, window: int = 10_000) -> ContextSnapshot:
    history = [
        {"role": "user", "content": "u" * 500, "id": "a"},
        {"role": "assistant", "content": "a" * 250, "id": "b"},
        {"role": "tool", "content": "t" * 1000, "tool_call_id": "c", "id": "c"},
    ]
    counts = [estimate_message_tokens(m) for m in history]
    return build_snapshot(
        window=WindowInfo(window, 1000, "model"),
        system_tokens=100,
        summary_tokens=50,
        tools_tokens=30,
        history=history,
        history_counts=counts,
        estimator_name="heuristic",
        threshold_ratio=0.8,
        calibrator=calibrator,
        draft_tokens=draft,
    )


def test_snapshot_regions_add_up_to_window() -> None:
    snap = _snapshot()
    assert snap.accuracy == ESTIMATED
    assert snap.history_user == (500 + 12) * 2 // 5
    assert snap.history_tool == (1000 + 1 + 12) * 2 // 5
    regions = snap.regions()
    assert list(regions) == ["system", "summary", "history", "tools", "reserve", "free"]
    assert sum(regions.values()) == snap.window
    assert snap.threshold_tokens == 8000
    assert snap.message_tokens[0] == ("a", snap.history_user)
    assert not snap.over_threshold and not snap.over_budget


def test_snapshot_overflow_never_negative_free() -> None:
    snap = _snapshot(window=1200)
    assert snap.free == 0
    assert snap.overflow == snap.used - 1200
    assert snap.over_budget


def test_snapshot_draft_reduces_free() -> None:
    a, b = _snapshot(), _snapshot(draft=200)
    assert a.free - b.free == 200


def test_snapshot_json_round_trip() -> None:
    snap = _snapshot()
    data = snap.to_json()
    assert data["window"] == 10_000
    assert set(data["regions"]) == {"system", "summary", "history", "tools", "reserve", "free"}
    assert all(isinstance(v, int) for v in data["regions"].values())
    back = ContextSnapshot.from_json(data)
    assert back == snap


def test_exact_estimator_label() -> None:
    snap = build_snapshot(
        window=WindowInfo(1000, 100, "model"), system_tokens=1, summary_tokens=0, tools_tokens=0, history=[],
        history_counts=[], estimator_name="exact", threshold_ratio=0.5,
    )
    assert snap.accuracy == EXACT


def test_calibrator_uses_reported_tokens_plus_scaled_increment() -> None:
    cal = Calibrator()
    assert cal.calibrate(1000, ["a"]) == 1000  # no report yet → raw
    cal.record(1000, 800, ["a", "b"], (10, 0, 5))
    assert cal.ratio == pytest.approx(0.8)
    # same prefix, 100 raw tokens added → 800 + 80
    assert cal.calibrate(1100, ["a", "b", "c"], (10, 0, 5)) == 880
    # prefix changed (compaction) → scale everything
    assert cal.calibrate(500, ["c"], (10, 0, 5)) == 400
    # system/summary/tools changed → scale everything
    assert cal.calibrate(1100, ["a", "b", "c"], (10, 20, 5)) == 880
    assert cal.calibrate(1200, ["a", "b", "c"], (10, 20, 5)) == 960


def test_calibrator_ignores_missing_reports() -> None:
    cal = Calibrator()
    cal.record(1000, None)
    cal.record(1000, 0)
    cal.record(0, 50)
    assert not cal.calibrated


def test_calibrator_json_round_trip() -> None:
    cal = Calibrator()
    cal.record(100, 90, ["x"], (1, 2, 3))
    assert Calibrator.from_json(cal.to_json()) == cal
    assert Calibrator.from_json(None) == Calibrator()


def test_calibrated_snapshot_scales_regions_to_calibrated_total() -> None:
    raw = _snapshot()
    cal = Calibrator()
    cal.record(raw.prompt, raw.prompt // 2, [], (100, 50, 30))
    snap = _snapshot(calibrator=cal, draft=100)
    assert snap.accuracy == CALIBRATED
    # prefix () is a prefix of anything, same fixed parts, nothing added → the reported number
    assert snap.prompt == raw.prompt // 2
    assert snap.draft == 50
    assert sum(snap.regions().values()) + snap.draft == snap.window
    assert snap.raw_prompt_tokens == raw.prompt


def test_detailed_regions_split_history_and_include_the_draft() -> None:
    snap = _snapshot(draft=200)
    d = snap.detailed_regions()
    assert list(d) == ["system", "summary", "history_user", "history_assistant", "history_tool", "tools", "draft",
                       "reserve", "free"]
    assert d["history_user"] + d["history_assistant"] + d["history_tool"] == snap.history
    assert sum(d.values()) == snap.window and d["free"] == snap.free
    typed = snap.detailed_regions(draft=500)
    assert typed["draft"] == 500 and typed["free"] == snap.free - 300
