"""Dollar cost of a session's recorded calls (engine.usage.costs), the usage report over a date range
(engine.usage.report), and the cost column of the export."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from engine import export
from engine.usage.costs import call_record, folder_records, priced_record, record_cost, records_cost, session_cost
from engine.usage.index import UsageIndex
from engine.usage.prices import PriceTable, load_table
from engine.usage.report import usage_report
from tests.engine.usage.test_usage_index import _call, _result, _user

# a context record as written (the snapshot's regions and the call's figures)
_REGIONS = {"window": 200_000, "max_tokens": 1000, "system": 10, "summary": 0, "history_user": 500,
            "history_assistant": 500, "history_tool": 0, "tools": 100, "threshold_tokens": 150_000,
            "estimator": "heuristic", "accuracy": "calibrated"}
RECORD = {**_REGIONS, "type": "context", "model": "claude-opus-4-6", "provider_prompt_tokens": 1110,
          "cache_read_tokens": 1000, "cache_write_tokens": 100, "completion_tokens": 5, "reasoning_tokens": None}


def _expected() -> float:
    return load_table().cost("claude-opus-4-6", prompt=1110, completion=5, cache_read=1000, cache_write=100).usd or 0.0


def test_a_record_is_priced_from_its_own_figures() -> None:
    out = priced_record(RECORD)
    assert out["cost_usd"] == pytest.approx(_expected()) and out["cost_problem"] == ""
    assert "cost_usd" not in RECORD  # a copy: the record as read stays as it was


def test_an_unknown_model_costs_none_with_the_reason_never_zero() -> None:
    out = priced_record({**RECORD, "model": "no-such-model-xyz"})
    assert out["cost_usd"] is None and "no-such-model-xyz" in out["cost_problem"]
    assert record_cost(RECORD, None).usd is None  # no price table (litellm not installed)


def test_reasoning_on_top_of_the_output_for_gemini_cli() -> None:
    table = PriceTable({"m": {"input_cost_per_token": 1.0, "output_cost_per_token": 10.0}})
    rec = {"model": "m", "provider_prompt_tokens": 2, "completion_tokens": 3, "reasoning_tokens": 1}
    assert record_cost(rec, table).usd == pytest.approx(2 + 30)  # reasoning inside the output
    assert record_cost({**rec, "source_format": "gemini-cli"}, table).usd == pytest.approx(2 + 30 + 10)


def test_records_cost_sums_the_known_and_counts_the_others() -> None:
    priced = [priced_record(RECORD), priced_record({**RECORD, "model": "nope-model"})]
    cost = records_cost([*priced, RECORD])  # the last one is priced on the way
    assert cost.calls == 3 and cost.unpriced == 1 and cost.usd == pytest.approx(2 * _expected())
    assert "nope-model" in cost.problem
    assert records_cost([]).usd is None


def test_session_cost_of_a_folder_and_of_a_file(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "events.jsonl").write_text(json.dumps(RECORD) + "\n" + json.dumps({"type": "compaction"}) + "\n")
    cost = session_cost(folder)
    assert cost is not None and cost.total.calls == 1 and cost.usd == pytest.approx(_expected())
    # the context records only, as written (with the derived regions the JSON form adds)
    assert [{k: r.get(k) for k in RECORD} for r in folder_records(folder)] == [RECORD]
    assert folder_records(tmp_path) == []
    (tmp_path / "x.jsonl").write_text(_user(1, "2026-03-01T10:00:00.000Z") + _call(2, "2026-03-01T10:00:05.000Z"))
    cost = session_cost(tmp_path / "x.jsonl")
    assert cost is not None and cost.total.calls == 1 and cost.usd and cost.usd > 0


def test_call_record_carries_the_readers_figures() -> None:
    from engine.sources.model import ProviderCall

    call = ProviderCall(index=0, message_index=1, model="gpt-5", prompt_tokens=10, completion_tokens=2,
                        cache_read_tokens=4, cache_write_tokens=None, reasoning_tokens=1, ts="")
    rec = call_record(call, "opencode")
    assert rec["provider_prompt_tokens"] == 10 and rec["source_format"] == "opencode"


def test_the_export_has_a_cost_column(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "session.json").write_text(json.dumps({"title": "t"}))
    (folder / "history.jsonl").write_text("")
    (folder / "events.jsonl").write_text(json.dumps(RECORD) + "\n")
    data = export.read_session(folder)
    (row,) = export.call_rows(data)
    assert row["cost_usd"] == pytest.approx(_expected(), abs=1e-7) and "cost_usd" in export.CALL_FIELDS
    assert export.calls_csv([row]).splitlines()[0].endswith(",cost_usd")
    doc = json.loads(export.calls_json(data))
    assert doc["cost"]["cost_usd"] == pytest.approx(_expected(), abs=1e-7) and doc["cost"]["unpriced_calls"] == 0


# --------------------------------------------------------------------------- the usage report


@pytest.fixture
def index(tmp_path: Path) -> UsageIndex:
    home = tmp_path / "home"
    folder = home / ".claude" / "projects" / "-home-u-proj"
    folder.mkdir(parents=True)
    (folder / "s1.jsonl").write_text(
        _user(1, "2026-03-01T10:00:00.000Z") + _call(2, "2026-03-01T10:00:05.000Z", tool="Bash")
        + _result(3, "2026-03-01T10:00:06.000Z", "tu2") + _call(4, "2026-03-01T10:00:09.000Z")
        + _user(5, "2026-03-03T09:00:00.000Z") + _call(6, "2026-03-03T09:00:03.000Z", model="claude-sonnet-4-5"))
    ix = UsageIndex(tmp_path / "usage")
    ix.update(home=home, env={})
    return ix


def test_the_report_of_all_days(index: UsageIndex) -> None:
    report = usage_report(index)
    assert report.days() == ["2026-03-01", "2026-03-03"]
    assert set(report.model_names()) == {"claude-opus-4-6", "claude-sonnet-4-5"}
    assert report.model_names()[0] == "claude-opus-4-6"  # the most expensive first
    assert report.total["calls"] == 3 and len(report.sessions) == 1
    (session,) = report.sessions
    assert session["calls"] == 3 and session["path"].endswith("s1.jsonl") and session["compactions"] == 0
    assert session["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in report.by_day_model))
    (tool,) = report.tools
    assert tool["tool"] == "Bash" and tool["results"] == 1 and tool["sessions"] == 1
    assert report.projects[0]["project"] == "/home/u/proj"  # the full path of the folder
    assert json.dumps(report.to_json())  # plain data


def test_the_report_of_a_range(index: UsageIndex) -> None:
    report = usage_report(index, since=date(2026, 3, 2), until=date(2026, 3, 3))
    assert report.days() == ["2026-03-03"] and report.total["calls"] == 1 and report.tools == []
    assert (report.since, report.until) == ("2026-03-02", "2026-03-03")
    assert usage_report(index, until=date(2026, 3, 1)).total["calls"] == 2
    assert usage_report(index, since=date(2027, 1, 1)).total["calls"] == 0


# --------------------------------------------------------------------------- the Markdown export


def test_the_markdown_export_has_the_sessions_and_each_calls_cost(tmp_path: Path) -> None:
    table = load_table()
    entry = table.entries[table.lookup("claude-opus-4-6") or ""]
    by_hand = (10 * entry["input_cost_per_token"] + 1000 * entry["cache_read_input_token_cost"]
               + 100 * entry["cache_creation_input_token_cost"] + 5 * entry["output_cost_per_token"])  # RECORD
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "session.json").write_text(json.dumps(
        {"title": "t", "import": {"format": "claude-code", "source": "x.jsonl", "agent_cost_usd": 1.5}}))
    messages = [{"id": "m0", "role": "user", "content": "go", "ts": "2026-03-01T10:00:00.000+00:00"},
                {"id": "m1", "role": "assistant", "content": "a", "ts": "2026-03-01T10:00:01.000+00:00"},
                {"id": "m2", "role": "user", "content": "more", "ts": "2026-03-01T10:00:02.000+00:00"},
                {"id": "m3", "role": "assistant", "content": "b", "ts": "2026-03-01T10:00:03.000+00:00"}]
    (folder / "history.jsonl").write_text("".join(json.dumps(m) + "\n" for m in messages))
    records = [{**RECORD, "message_id": "m1", "source_format": "claude-code"},
               {**RECORD, "model": "nope-model", "message_id": "m3", "source_format": "claude-code"},
               {**RECORD, "message_id": None, "source_format": "claude-code"}]  # kept no message
    compaction = {"type": "compaction", "trigger": "manual", "result": "summarized", "tokens_before": 9,
                  "tokens_after": 2, "cost_usd": 0.25,
                  "cost": {"prompt_tokens": 1110, "completion_tokens": 5, "cache_read_tokens": 1000,
                           "cache_write_tokens": 100, "model": "claude-opus-4-6"}}
    (folder / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*records, compaction]))
    text = export.session_markdown(export.read_session(folder))
    lines = text.splitlines()
    # main + compaction calls (the session's one cost), with its parts
    assert (f"- **Cost:** ${3 * by_hand:,.4f} for 4 calls at litellm's prices (main ${2 * by_hand:,.4f}+ (3 calls) · "
            f"compaction ${by_hand:,.4f} (1 call)) (+ 1 calls without a price: no price for 'nope-model'") in text
    assert "- **The agent's own cost:** $1.50" in lines
    headings = [line for line in lines if line.startswith("### ")]
    assert headings[0].endswith("10:00:00.000+00:00")  # a user message: no call
    assert headings[1].endswith(f"10:00:01.000+00:00 · call 1 · ${by_hand:,.4f}")
    assert headings[3].endswith("· call 2 · cost unknown")
    assert headings[4] == "### Calls after the last message" and lines[-1] == f"- call 3 · ${by_hand:,.4f}"
    assert (f"*The compaction call: 1,110 prompt + 5 completion tokens · ${by_hand:,.4f} at litellm's prices.*"
            in lines)
    assert "*What compacting cost, by the agent's own figure: $0.2500.*" in lines


def test_a_running_cost_equals_the_cost_of_every_record_at_each_step() -> None:
    """RunningCost (the status bar's cost of a followed session, one record at a time) equals records_cost over
    all the records after every append and every change of the last one: the same sum to the last bit, the same
    counts of calls, unpriced and partial calls, the same first problem."""
    import random

    from engine.usage.costs import RunningCost, records_cost

    rng = random.Random(7)

    def record() -> dict[str, object]:
        kind = rng.random()
        if kind < 0.1:
            return {"cost_usd": None, "cost_problem": "no price for model x"}
        if kind < 0.15:
            return {"cost_usd": rng.random(), "completion_placeholder": 12, "completion_tokens": None}
        return {"cost_usd": rng.random() * 10 ** rng.randint(-6, 1)}

    start = [record() for _ in range(5)]
    records = list(start)
    running = RunningCost(start)
    assert running.cost() == records_cost(records)
    for _ in range(300):
        if records and rng.random() < 0.3:
            records[-1] = record()
            running.replace_last(records[-1])
        else:
            records.append(record())
            running.append(records[-1])
        assert running.cost() == records_cost(records)
    empty = RunningCost()
    assert empty.cost() == records_cost([])
    empty.replace_last({"cost_usd": 1.5})
    assert empty.cost() == records_cost([{"cost_usd": 1.5}])
