"""engine.model.snapshot: how each region of a snapshot or a call record was obtained (exact, estimated,
calibrated, inferred, set), as built by the one snapshot builder and as read back from events.jsonl."""

from __future__ import annotations

from engine.context.calibration import Calibrator
from engine.context.snapshots import build_snapshot
from engine.model.snapshot import (
    CALIBRATED,
    ESTIMATED,
    EXACT,
    INFERRED,
    SET,
    ContextSnapshot,
    WindowInfo,
    region_accuracy,
)

WINDOW = WindowInfo(context_window=10_000, max_tokens=500, source="model")
HISTORY = [{"id": "a", "role": "user", "content": "hi"}, {"id": "b", "role": "assistant", "content": "yo"}]


def _snap(estimator: str = "heuristic", calibrated: bool = False, **kw: bool) -> ContextSnapshot:
    calibrator = None
    if calibrated:
        calibrator = Calibrator()
        calibrator.record(1_000, 1_200, ["a", "b"], (300, 0, 200))
    return build_snapshot(window=WINDOW, system_tokens=300, summary_tokens=0, tools_tokens=200, history=HISTORY,
                          history_counts=[250, 250], estimator_name=estimator, threshold_ratio=0.8,
                          calibrator=calibrator, provider_prompt_tokens=1_200 if calibrated else None, **kw)


def test_our_own_requests_regions_share_the_snapshots_accuracy() -> None:
    heuristic = _snap().region_accuracy()
    assert {heuristic[k] for k in ("system", "summary", "history_user", "history_tool", "tools", "draft")} == \
        {ESTIMATED}
    assert heuristic["reserve"] == SET
    exact = _snap("exact").region_accuracy()
    assert exact["history_assistant"] == EXACT and exact["system"] == EXACT
    snap = _snap(calibrated=True)
    assert snap.accuracy == CALIBRATED and snap.region_accuracy()["history_user"] == CALIBRATED


def test_another_agents_prefix_is_held_as_sent_or_inferred() -> None:
    from_file = _snap(calibrated=True, exact_system=True, exact_tools=True)
    assert from_file.prefix_source == "file"
    acc = from_file.region_accuracy()
    assert acc["system"] == acc["tools"] == ESTIMATED and acc["history_user"] == CALIBRATED  # counted, not scaled
    assert _snap("exact", calibrated=True, exact_system=True, exact_tools=True).region_accuracy()["tools"] == EXACT
    inferred = _snap(calibrated=True, exact_system=True)
    assert inferred.prefix_source == "inferred"
    assert inferred.region_accuracy()["system"] == INFERRED and inferred.region_accuracy()["summary"] == CALIBRATED


def test_a_call_record_says_the_same_and_reads_back() -> None:
    snap = _snap(calibrated=True, exact_system=True)
    record = snap.call_record()
    assert region_accuracy(record) == snap.region_accuracy()
    record["prefix_source"] = None  # an import's record of a file without a prefix
    back = ContextSnapshot.from_json(record)
    assert back.prefix_source == "" and back.region_accuracy()["system"] == CALIBRATED
    assert ContextSnapshot.from_json(snap.to_json()).prefix_source == "inferred"
    assert region_accuracy({})["system"] == ESTIMATED  # an old record: nothing said, estimated
