"""engine.model.records: each kind of events.jsonl line round-trips, bad lines are named, old shapes read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.model.events import CompactionEvent, Outcome, event_to_json
from engine.model.records import (
    CompactionRecord,
    ContextRecord,
    RecordError,
    parse_record,
)
from engine.model.snapshot import ContextSnapshot
from engine.store.event_log import read_records


def _snap(**kw: Any) -> ContextSnapshot:
    base: dict[str, Any] = dict(window=1000, max_tokens=100, system=10, summary=0, history_user=20,
                                history_assistant=30, history_tool=5, tools=15, threshold_tokens=800,
                                estimator="heuristic", accuracy="estimated", model="m", ts="2026-01-01T00:00:00Z",
                                call_index=0, provider_prompt_tokens=70)
    base.update(kw)
    return ContextSnapshot(**base)


def _import_context_line() -> dict[str, Any]:
    data = _snap().to_json()
    data.update(type="context", message_count=4, message_tokens=[], message_id=None, segment=0, exact_input=True,
                source_format="claude_code", prefix_tokens=25, prefix_source=None, prefix_key=None,
                cache_read_tokens=40, cache_write_tokens=None, completion_tokens=12, reasoning_tokens=None,
                cache_write_1h_tokens=None, request_id="req_1", cache_breakpoints=[1, 2], prompt_unlike_file=False)
    return data


def test_context_record_round_trips_ours() -> None:
    rec = ContextRecord.from_snapshot(_snap(), message_count=4)
    assert rec.message_count == 4 and rec.snapshot.history == 55 and rec.provider_prompt_tokens == 70
    again = parse_record(json.loads(json.dumps(rec.to_json())))
    assert again == rec and again.to_json() == rec.to_json()


def test_context_record_round_trips_an_imports_line_unchanged() -> None:
    line = _import_context_line()
    rec = parse_record(line)
    assert isinstance(rec, ContextRecord)
    assert rec.cache_read_tokens == 40 and rec.completion_tokens == 12 and rec.request_id == "req_1"
    assert rec.source_format == "claude_code" and rec.extra["cache_breakpoints"] == [1, 2]
    out = rec.to_json()
    assert {k: v for k, v in line.items() if v is not None} == {k: v for k, v in out.items() if v is not None}
    assert out["prefix_source"] is None and "message_id" in out  # written back as they were
    assert parse_record(out) == rec


def test_compaction_record_round_trips_ours_and_an_imports() -> None:
    event = CompactionEvent("manual", 10, 5, 2, 2, 1.5, Outcome.SUMMARIZED, summary="## Goal", id="e1")
    rec = CompactionRecord.from_event(event)
    assert rec.result is Outcome.SUMMARIZED and rec.applied and rec.tokens_basis == "prompt"
    assert rec.to_json() == event_to_json(event) and parse_record(rec.to_json()) == rec
    imported = {"type": "compaction", "id": "x", "trigger": "auto", "trigger_source": "boundary",
                "tokens_before": None, "tokens_after": 900, "messages_compacted": 3, "messages_kept": None,
                "duration_ms": 0.0, "result": "replaced", "summary": "", "reason": "", "archive_day": "",
                "ts": "t", "source_format": "codex", "cost": {"model": "m", "prompt_tokens": 5}, "calls_before": 2}
    rec2 = parse_record(imported)
    assert isinstance(rec2, CompactionRecord) and rec2.result is Outcome.REPLACED and rec2.applied
    assert rec2.cost == {"model": "m", "prompt_tokens": 5} and rec2.calls_before == 2 and rec2.change().text()
    assert rec2.to_json() == imported


def test_older_shapes_read() -> None:
    old_comp = {"type": "compaction", "trigger": "auto", "tokens_before": 1, "tokens_after": 1,
                "messages_compacted": 0, "messages_kept": 4, "duration_ms": 0.5, "result": "nothing"}
    rec = parse_record(old_comp)
    assert isinstance(rec, CompactionRecord) and rec.tokens_basis == "" and rec.id == "" and not rec.applied
    assert rec.to_json()["result"] == "nothing"
    old_ctx = {k: v for k, v in _snap().to_json().items() if k not in ("message_tokens", "prefix_source")}
    old_ctx["type"] = "context"
    ctx = parse_record(old_ctx)
    assert isinstance(ctx, ContextRecord) and ctx.message_count is None and ctx.snapshot.prefix_source == ""


@pytest.mark.parametrize(("line", "says"), [
    ([1, 2], "not a JSON object"),
    ({"no": "type"}, "no record type (expected one of context, compaction)"),
    ({"type": "wizard"}, "unknown record type 'wizard'"),
    ({"type": "context", "window": 5}, "context record: snapshot field 'max_tokens' is missing"),
    ({**_snap().to_json(), "type": "context", "system": "ten"}, "'system' must be a number"),
    ({**_snap().to_json(), "type": "context", "completion_tokens": "x"}, "'completion_tokens' must be a number"),
    ({"type": "compaction", "trigger": "auto", "result": "exploded"}, "field 'result' must be one of"),
    ({"type": "compaction", "trigger": 3, "result": "dropped"}, "field 'trigger' must be a string"),
    ({"type": "compaction", "trigger": "auto", "result": "dropped", "tokens_before": True}, "'tokens_before'"),
    ({"type": "compaction", "trigger": "auto", "result": "dropped", "cost": 5}, "field 'cost' must be an object"),
])
def test_bad_lines_are_named(line: Any, says: str) -> None:
    with pytest.raises(RecordError) as err:
        parse_record(line)
    assert says in str(err.value)


def test_every_outcome_reads() -> None:
    for outcome in Outcome:
        rec = parse_record({"type": "compaction", "trigger": "auto", "result": outcome.value})
        assert isinstance(rec, CompactionRecord) and rec.result is outcome


def test_reader_skips_and_says_bad_lines_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    good = ContextRecord.from_snapshot(_snap(), 4)
    comp = CompactionRecord.from_event(CompactionEvent("auto", 1, 1, 0, 4, 0.5, Outcome.NOTHING))
    lines = [json.dumps(good.to_json()), '{"type": "wizard"}', "not json", "",
             json.dumps(comp.to_json()), '{"type": "cont']
    path.write_text("\n".join(lines))
    problems: list[str] = []
    assert read_records(path, problems) == [good, comp]
    assert problems[0] == ("events.jsonl line 2: skipped: unknown record type 'wizard' "
                           "(expected one of context, compaction)")
    assert problems[1].startswith("events.jsonl line 3: not JSON") and problems[2].startswith("events.jsonl line 6")
    assert read_records(tmp_path / "missing.jsonl") == []
    path.write_text(json.dumps({**good.to_json(), "system": "ten"}) + "\n")
    problems.clear()
    assert read_records(path, problems) == []
    assert problems == ["events.jsonl line 1: a context record was skipped (snapshot field 'system' must be a "
                        "number, got 'ten')"]


def test_records_that_write_the_same_extra_fields_hold_one_dict_of_them() -> None:
    """A followed view's calls of one segment write the same fields this type does not declare (``segment``,
    ``exact_input``, ``prefix_tokens``…): their records hold one dict of them, not one each (210 KB in ten minutes of
    following); records whose fields differ — in a value, its type, a float's sign or the keys' order — keep their
    own, and each writes back what it read."""
    line = _import_context_line()
    line["cache_breakpoints"] = None  # (scalars only are shared)
    first, second = parse_record(dict(line)), parse_record(dict(line, call_index=1, ts="2026-01-01T00:00:01Z"))
    assert isinstance(first, ContextRecord) and isinstance(second, ContextRecord)
    assert first.extra is second.extra and first.extra == {k: line[k] for k in first.extra}
    for other in (dict(line, segment=1), dict(line, exact_input=1), dict(line, prefix_tokens=25.0),
                  dict(line, agent_cost_usd=-0.0), dict(reversed(list(line.items())))):
        rec = parse_record(other)
        assert isinstance(rec, ContextRecord) and rec.extra is not first.extra
        assert rec.to_json() == {k: v for k, v in other.items() if k not in ("type",)} | {"type": "context"}
    zero = parse_record(dict(line, agent_cost_usd=0.0))
    assert isinstance(zero, ContextRecord) and repr(zero.to_json()["agent_cost_usd"]) == "0.0"


def test_a_call_s_record_and_its_column_hold_no_dict_of_attributes() -> None:
    """One record, snapshot, column and price a call, for as long as a followed session grows: their fields in
    slots, not a dict each."""
    from engine.model.timeline import Price, TimelineCall

    rec = ContextRecord.from_snapshot(_snap(), message_count=4)
    for obj in (rec, rec.snapshot, TimelineCall(rec, Price(0.5)), Price(None, "no price")):
        assert not hasattr(obj, "__dict__"), type(obj).__name__
