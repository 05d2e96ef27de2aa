"""Calibration of other agents' sessions (:class:`engine.context.calibration.SourceCalibrator`) and the
bound every recorded call's estimate keeps: never above the window when the provider reported less.

The corpus tests measure every reported call of the shared sessions as ``ctxbench import`` records it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from benchmarks.accuracy import SourceCall, _p90, source_call_errors, source_files
from engine.context.calibration import (
    MAX_ANCHORS,
    NEUTRAL_RATIO,
    RATIO_BOUNDS,
    RESTART_RATIO,
    Calibrator,
    SourceCalibrator,
)
from engine.context.snapshots import build_snapshot
from engine.ingest import context_records
from engine.model.messages import Message
from engine.model.snapshot import CALIBRATED, ESTIMATED, ContextSnapshot, WindowInfo
from engine.sources.model import Compaction, ProviderCall, RequestPrefix, SourceSession
from engine.sources.readers import read_source
from tests.conftest import SHARED

SESSIONS = SHARED / "data" / "sessions"
FIXED = (100, 0, 0)


def ids(n: int) -> list[str]:
    return [f"m{i}" for i in range(n)]


# --------------------------------------------------------------------------- the calibrator


def test_nothing_reported_is_the_raw_estimate() -> None:
    cal = SourceCalibrator(exact_prefix=100, prefix_known=True)
    assert not cal.calibrated and cal.ratio is None
    assert cal.calibrate(5_000, ids(3), FIXED) == 5_000
    cal.record(5_000, None, ids(3), FIXED)
    cal.record(5_000, 0, ids(3), FIXED)
    assert not cal.calibrated


def test_the_first_increment_is_scaled_by_the_neutral_ratio() -> None:
    # the first figure only sized the inferred prefix (its history counts 1:1 by construction): no ratio yet
    cal = SourceCalibrator(exact_prefix=1_000, prefix_known=True)
    cal.record(1_100, 1_100, ids(1), FIXED)
    assert cal.prefix_scale == 1.0 and cal.ratio == NEUTRAL_RATIO
    assert cal.calibrate(3_100, ids(3), FIXED) == 1_100 + round(2_000 * NEUTRAL_RATIO)


def test_increments_use_the_recent_ratio_of_the_segment() -> None:
    cal = SourceCalibrator(exact_prefix=1_000, prefix_known=True)
    cal.record(1_100, 1_100, ids(1), FIXED)
    cal.record(2_100, 1_600, ids(2), FIXED)  # +1000 raw, +500 reported
    cal.record(3_100, 2_100, ids(3), FIXED)
    assert cal.ratio == pytest.approx(0.5)
    assert cal.calibrate(4_100, ids(4), FIXED) == 2_100 + 500
    # an older stretch of another make-up is forgotten after RECENT_STEPS increments
    for n in range(4, 12):
        cal.record(1_000 * n + 100, 2_100 + 900 * (n - 3), ids(n), FIXED)
    assert cal.ratio == pytest.approx(0.9)


def test_the_ratio_stays_in_a_plausible_tokenizer_range() -> None:
    # the Codex 0.169 case: a prefix counted low by the heuristic made the rest's ratio 15
    lo, hi = RATIO_BOUNDS
    cal = SourceCalibrator(exact_prefix=1_000, prefix_known=True)
    cal.record(1_100, 1_100, ids(1), FIXED)
    cal.record(1_200, 2_600, ids(2), FIXED)  # +100 raw, +1500 reported
    assert cal.ratio == hi
    assert cal.calibrate(21_200, ids(3), FIXED) == 2_600 + round(20_000 * hi)
    cal.record(21_200, 2_700, ids(3), FIXED)
    cal.record(41_200, 2_800, ids(4), FIXED)
    cal.record(61_200, 2_700, ids(5), FIXED)  # the reported prompt shrank while the file grew
    assert cal.ratio == lo


def test_a_compaction_restarts_from_the_prefix_and_not_from_the_ratio_before() -> None:
    # the shared Codex rollout: tool outputs cut before sending made the ratio ~0.46; the context after the
    # compaction holds none of them
    cal = SourceCalibrator(exact_prefix=14_006, prefix_known=True)
    cal.record(17_088, 17_088, ids(5), FIXED)
    for n in range(6, 12):
        cal.record(17_088 + 40_000 * (n - 5), 17_088 + 18_000 * (n - 5), ids(n), FIXED)
    assert cal.ratio == pytest.approx(0.45)
    cal.restart()
    after = ["s0", "k1", "k2"]
    estimate = cal.calibrate(44_439, after, (9_384, 5_364, 4_622))
    assert estimate == 14_006 + round((44_439 - 14_006) * RESTART_RATIO)
    assert abs(estimate - 48_297) / 48_297 < 0.25  # the ratio before gave 28,478 (-41 %)
    # the next call anchors on the first figure after the compaction; the increments before it are forgotten
    cal.record(44_439, 48_297, after, (9_384, 5_364, 4_622))
    assert cal.ratio == NEUTRAL_RATIO
    assert cal.calibrate(45_439, [*after, "n"], (9_384, 5_364, 4_622)) == 48_297 + round(1_000 * NEUTRAL_RATIO)


def test_a_rewind_anchors_on_the_call_it_went_back_to() -> None:
    cal = SourceCalibrator()
    for n in range(1, 6):
        cal.record(1_000 * n, 800 * n, ids(n), FIXED)
    branch = [*ids(2), "b0"]  # back to the second call's messages, then a new one
    assert cal.calibrate(2_500, branch, FIXED) == 1_600 + round(500 * cal.ratio)  # type: ignore[operator]
    # a rewind further back than MAX_ANCHORS calls restarts from the prefix
    for n in range(6, 6 + MAX_ANCHORS):
        cal.record(1_000 * n, 800 * n, ids(n), FIXED)
    assert cal.calibrate(2_500, branch, FIXED) == round(2_500 * RESTART_RATIO)


def test_a_prefix_counted_from_the_file_is_scaled_by_the_first_figure() -> None:
    # a Codex agent's rollout: base_instructions as sent, 8,583 by the heuristic; the provider counted more
    cal = SourceCalibrator(exact_prefix=8_583)
    cal.record(8_767, 9_157, ids(2), (8_583, 0, 0))
    scale = (9_157 - NEUTRAL_RATIO * 184) / 8_583
    assert cal.prefix_scale == pytest.approx(scale)
    cal.restart()
    estimate = cal.calibrate(11_221, ["a", "b", "c", "d"], (8_583, 186, 0))
    assert estimate == round(8_583 * scale) + round(2_638 * RESTART_RATIO)
    assert abs(estimate - 9_305) / 9_305 < 0.25  # the ratio of the rest (3.1) drew 14,296


def test_calibrate_known_is_calibrate_for_the_last_call() -> None:
    cal = SourceCalibrator(exact_prefix=100, prefix_known=True)
    cal.record(1_000, 900, ids(2), FIXED)
    cal.record(2_000, 1_500, ids(3), FIXED)
    assert cal.calibrate_known(2_400, True, FIXED) == cal.calibrate(2_400, ids(4), FIXED)
    assert cal.calibrate_known(2_400, False, FIXED) == cal.calibrate(2_400, ["x"], FIXED)


def test_the_own_agents_calibrator_keeps_its_ratio_across_a_rewrite() -> None:
    # the app builds its own requests: the ratio is the tokenizer's, right after its own compactions too
    cal = Calibrator()
    cal.record(10_000, 8_000, ids(10), FIXED)
    assert cal.calibrate(5_000, ["c"], FIXED) == 4_000


# --------------------------------------------------------------------------- the window bound


class _Over(Calibrator):
    """A calibrator whose figure is far above the request (what a runaway ratio did)."""

    def __init__(self) -> None:
        super().__init__(last_raw=1, last_actual=1)

    def calibrate(self, raw_total: int, message_ids: Sequence[str] = (),
                  fixed: tuple[int, int, int] = (0, 0, 0)) -> int:
        return raw_total * 20


def _snap(reported: int | None, *, window: int = 10_000, calibrator: Calibrator | None = None,
          exact: bool = False) -> ContextSnapshot:
    history: list[Message] = [{"id": "u", "role": "user", "content": "x"}, {"id": "t", "role": "tool", "content": "y"}]
    return build_snapshot(
        window=WindowInfo(window, 500, "source"), system_tokens=1_000, summary_tokens=0, tools_tokens=0,
        history=history, history_counts=[2_000, 3_000], estimator_name="heuristic", threshold_ratio=0.8,
        calibrator=calibrator, provider_prompt_tokens=reported, exact_system=exact)


@pytest.mark.parametrize("exact", [False, True])
def test_an_estimate_is_never_above_the_window_when_the_provider_reported_less(exact: bool) -> None:
    snap = _snap(4_000, calibrator=_Over(), exact=exact)
    assert snap.accuracy == CALIBRATED and snap.prompt == 10_000
    assert snap.history_tool > snap.history_user > 0
    if exact:
        assert snap.system == 1_000
    raw = _snap(4_000, window=5_000)  # the raw estimate (6,000) above a window the request fit in
    assert raw.accuracy == ESTIMATED and raw.prompt == 5_000 and raw.raw_prompt_tokens == 6_000


def test_a_real_overflow_or_no_figure_is_drawn_as_estimated() -> None:
    assert _snap(12_000, calibrator=_Over()).prompt == 120_000  # the provider took more than the window
    assert _snap(None, calibrator=_Over()).prompt == 120_000  # the next request: no figure yet
    assert _snap(4_000).prompt == 6_000  # within the window: untouched


def _msg(i: int, role: str, chars: int) -> Message:
    return {"id": f"m{i}", "role": role, "content": "word " * (chars // 5)}


def test_a_codex_compaction_with_a_file_prefix_is_drawn_under_the_window() -> None:
    # Codex 0.169: base_instructions as sent, which the heuristic counts low; the first calls' rest is tiny, so
    # the ratio of the rest was ~4-15 and the call after the compaction drew several times what was reported,
    # above the window line (316,314 against 13,642 in a 258,400 window)
    messages = [_msg(0, "user", 200), _msg(1, "assistant", 100), _msg(2, "user", 100), _msg(3, "assistant", 100),
                _msg(4, "user", 30_000), _msg(5, "user", 40), _msg(6, "assistant", 100)]
    src = SourceSession("codex", Path("rollout.jsonl"), "r", messages=messages, window=50_000, live_start=4,
                        prefixes={"base": RequestPrefix("base", "instructions " * 2_000)})  # 10,400 raw tokens
    src.calls = [
        ProviderCall(0, 11_000, 10, None, None, message_index=1, prefix_key="base"),
        ProviderCall(1, 11_100, 10, None, None, message_index=3, prefix_key="base"),
        ProviderCall(2, 18_000, 10, None, None, message_index=6, prefix_key="base"),
    ]
    src.compactions = [Compaction(0, "auto", "auto", "", message_index=4, calls_before=2, tokens_before=11_100,
                                  summary="the summary " * 100)]
    recs = context_records(src)
    first, last = recs[0], recs[-1]
    assert first["system"] == 10_400 and first["raw_prompt_tokens"] - 10_400 < 100
    drawn = last["system"] + last["summary"] + last["history"] + last["tools"]
    assert last["segment"] == 1 and last["accuracy"] == CALIBRATED
    assert last["raw_prompt_tokens"] > 22_000 and drawn <= last["window"]
    assert abs(drawn - 18_000) / 18_000 < 0.25  # the ratio of the rest (~4) drew ~60,000


# --------------------------------------------------------------------------- the shared sessions

# Calls whose provider figure counts what the file does not hold, labelled so by the readers
# (ProviderCall.prompt_unlike_file → the record's ``prompt_unlike_file``): (file, call) → the reason's first words.
OTHER_BASIS: dict[tuple[str, int], str] = {
    ("258c7280-ae70-4798-800f-63464d01a85d.jsonl", 102): "the first request after a compaction holds the files",
    ("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", 71): "the first request after a compaction holds the files",
    **{("rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl", k):
       "its prompt figure includes the results of the web search" for k in (2, 69, 240, 243, 245, 258)},
    **{("rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl", k):
       "Codex wrote the session's initial instructions again" for k in (10, 17, 38)},
}


def _shared() -> list[tuple[str, Path, list[SourceCall]]]:
    if not SESSIONS.is_dir():
        pytest.skip(f"no shared sessions at {SESSIONS}")
    out = [(fmt, path, source_call_errors(fmt, path)) for fmt, path in source_files()]
    return [(fmt, path, calls) for fmt, path, calls in out if calls]


def test_every_imported_call_is_within_25_percent_or_labelled_another_basis() -> None:
    """Issue 27: calibrated error on every imported call within 25 %, p90 within 5 % — a call the file cannot
    estimate (the provider counted what it does not hold) is labelled so, never a silent outlier."""
    files = _shared()
    errors: list[float] = []
    labelled: dict[tuple[str, int], str] = {}
    for _fmt, path, calls in files:
        for c in calls:
            errors.append(c.error)
            if c.unlike_file:
                labelled[(path.name, c.call)] = c.unlike_file
            else:
                assert c.error <= 0.25, (path.name, c.call, c.estimate, c.actual)
    assert {"claude-code", "codex", "openhands"} <= {fmt for fmt, _, _ in files}  # SWE-agent's report no usage
    assert len(errors) >= 600
    assert set(labelled) == set(OTHER_BASIS), "a call labelled another basis that is not listed, or the reverse"
    for key, reason in labelled.items():
        assert reason.startswith(OTHER_BASIS[key]), (key, reason)
    assert _p90(errors) <= 0.05  # over every call, the labelled ones included
    assert sorted(errors)[len(errors) // 2] <= 0.005
    assert max(errors) <= 0.35  # a labelled call is still drawn from what the file holds, not wildly off


def test_a_call_on_another_basis_teaches_the_calibration_nothing() -> None:
    """A web search's figure (its results are not sent again) anchors nothing; a resumed request's figure is an
    anchor (the context is that size now) but no increment is learnt from it."""
    cal = SourceCalibrator()
    cal.record(1_000, 800, ids(2), FIXED)
    cal.record(1_100, 860, ids(4), FIXED)  # an increment: 60 / 100
    assert cal.ratio == pytest.approx(0.6)
    cal.record_unlike(1_200, 2_000, ids(6), FIXED, transient=True)  # a search ran: +1,140 counted, none in the file
    assert cal.calibrate(1_300, ids(8), FIXED) == 860 + round(200 * 0.6)  # on the call before it, same ratio
    cal.record_unlike(1_300, 1_500, ids(8), FIXED)  # a rebuilt request: the context is that size now
    assert cal.ratio == pytest.approx(0.6)  # its +640 for +200 was not learnt
    assert cal.calibrate(1_400, ids(10), FIXED) == 1_500 + 60


def test_the_readers_label_what_the_file_does_not_hold() -> None:
    """The Codex reader labels the call that ran a web search and the first after a resumed thread's
    instructions; the Claude Code reader the first call after a compaction in a file without its requests."""
    if not SESSIONS.is_dir():
        pytest.skip(f"no shared sessions at {SESSIONS}")
    codex = read_source(SESSIONS / "codex" / "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl",
                        "codex")
    transient = [k for k, c in enumerate(codex.calls) if c.prompt_transient]
    assert transient == [k for k, c in enumerate(codex.calls) if c.prompt_unlike_file.startswith("its prompt")]
    assert len(transient) == 6  # the rollout's seven web_search_call items, two of them in one response
    comp_first = codex.calls[codex.compactions[0].calls_before]
    assert not comp_first.prompt_unlike_file  # the instructions a replacement history repeats are no resume
    claude = read_source(SESSIONS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", "claude-code")
    labelled = [k for k, c in enumerate(claude.calls) if c.prompt_unlike_file]
    assert labelled == [claude.compactions[0].calls_before]


def test_the_first_call_after_each_compaction_is_within_the_bound() -> None:
    firsts = [(path.name, c) for _fmt, path, calls in _shared() for c in calls if c.after_compaction]
    assert len(firsts) == 3  # two Claude Code sessions and a Codex rollout each compacted once
    for name, c in firsts:
        assert c.error <= (0.35 if c.unlike_file else 0.25), (name, c.call, c.estimate, c.actual)


def test_no_recorded_call_is_drawn_above_the_window_the_provider_fit_in() -> None:
    if not SESSIONS.is_dir():
        pytest.skip(f"no shared sessions at {SESSIONS}")
    checked = 0
    for fmt, path in source_files():
        for rec in context_records(read_source(path, fmt)):  # type: ignore[arg-type]
            reported = rec["provider_prompt_tokens"]
            if reported and reported <= rec["window"]:
                checked += 1
                drawn = rec["system"] + rec["summary"] + rec["history"] + rec["tools"]
                assert drawn <= rec["window"], (path.name, rec["call_index"], drawn, reported, rec["window"])
    assert checked >= 600
