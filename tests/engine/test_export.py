"""Exports of a real imported Claude Code session (and a Codex one): Markdown, CSV, JSON; the cache
figures they carry (engine.context.cache)."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from engine import export
from engine.context.cache import analyze, call_figures
from engine.context.tokens import HeuristicEstimator
from engine.ingest import import_source
from engine.store.fsutil import read_jsonl_objects
from engine.usage.costs import folder_cost, usd_text
from tests.conftest import SHARED

SESSIONS = SHARED / "data" / "sessions"
CLAUDE = SESSIONS / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl"
# a Codex rollout with a compaction
CODEX = SESSIONS / "codex" / "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl"

HEADING = re.compile(r"^### \d+\. (user|assistant|tool|system)( `[^`]*`)? · [\d,]+ tokens")

pytestmark = pytest.mark.skipif(not CLAUDE.exists(), reason="the shared sessions are not on this machine")


@pytest.fixture(scope="module")
def claude_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export") / "cc"
    import_source(CLAUDE, session_dir=folder)
    return folder


@pytest.fixture(scope="module")
def codex_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export") / "codex"
    import_source(CODEX, session_dir=folder)
    return folder


def _records(folder: Path) -> list[dict[str, Any]]:
    return [e for e in read_jsonl_objects(folder / "events.jsonl") if e.get("type") == "context"]


def _all_messages(folder: Path) -> list[dict[str, Any]]:
    out = []
    for day in sorted((folder / "dialog").glob("*.jsonl")):
        out += read_jsonl_objects(day)
    return out + read_jsonl_objects(folder / "history.jsonl")


def test_markdown_has_every_message_with_its_tokens(claude_dir: Path, tmp_path: Path) -> None:
    out = export.export_session(claude_dir, "md", tmp_path / "s.md")
    text = out.read_text(encoding="utf-8")
    messages = _all_messages(claude_dir)
    assert len(messages) == 322
    est = HeuristicEstimator()
    headings = [line for line in text.splitlines() if HEADING.match(line)]
    assert len(headings) == len(messages)
    data = export.read_session(claude_dir)
    for n, (heading, msg) in enumerate(zip(headings, data.messages, strict=True), start=1):
        assert heading.startswith(f"### {n}. {msg['role']}")
        assert f"· {est.message(msg):,} tokens" in heading
        assert ("· archived" in heading) == (str(msg["id"]) not in data.live_ids)
    assert {str(m["id"]) for m in data.messages} == {str(m["id"]) for m in messages}
    # the compaction sits between the last archived message and the first live one
    lines = text.splitlines()
    comp = next(i for i, line in enumerate(lines) if line.startswith("## Compaction (auto)"))
    before = [h for h in lines[:comp] if HEADING.match(h)]
    after = [h for h in lines[comp:] if HEADING.match(h)]
    assert all("archived" in h for h in before) and not any("archived" in h for h in after)
    assert "167,731 → 42,603 prompt tokens (-75%)" in lines[comp]  # the basis every view shows
    first_user = next(m for m in data.messages if m["role"] == "user")
    assert first_user["content"].strip() in text


def test_markdown_says_the_cost_of_the_session_and_of_each_call(claude_dir: Path) -> None:
    data = export.read_session(claude_dir)
    rows = export.call_rows(data)
    lines = export.session_markdown(data).splitlines()
    main = sum(r["cost_usd"] for r in rows)
    cost = folder_cost(claude_dir)  # the session's one cost: main + subagents + compaction calls
    assert cost.main.usd == pytest.approx(main) and cost.main.calls == 143
    assert cost.subagents.calls == 13 and cost.compaction.calls == 1
    assert (f"- **Cost:** {usd_text(cost.total.usd or 0)} for 157 calls at litellm's prices "
            f"({cost.breakdown()})") in lines
    calls = [(h, re.search(r" · call (\d+) · \$([\d,.]+)$", h)) for h in lines if HEADING.match(h)]
    marked = [(h, m) for h, m in calls if m]
    # each call produced one assistant message (Claude Code), numbered in order, with the CSV's cost
    assert [int(m.group(1)) for _h, m in marked] == list(range(1, len(rows) + 1))
    assert all(re.match(r"### \d+\. assistant ", h) for h, _m in marked)
    assert [m.group(2) for _h, m in marked] == [f"{r['cost_usd']:,.4f}" for r in rows]
    assert "### Calls after the last message" not in lines


def test_markdown_uses_the_tokens_the_app_shows(claude_dir: Path) -> None:
    data = export.read_session(claude_dir)
    known = {str(m["id"]): 7 for m in data.messages[:3]}
    text = export.session_markdown(data, known=known)
    headings = [line for line in text.splitlines() if HEADING.match(line)]
    assert all("· 7 tokens" in h for h in headings[:3])
    assert "· 7 tokens" not in headings[3] or HeuristicEstimator().message(data.messages[3]) == 7


def test_csv_has_one_row_per_call_with_the_record_figures(claude_dir: Path, tmp_path: Path) -> None:
    out = export.export_session(claude_dir, "csv", tmp_path / "calls.csv")
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    records = _records(claude_dir)
    assert len(rows) == len(records) == 143
    assert tuple(rows[0].keys()) == export.CALL_FIELDS
    for row, rec in zip(rows, records, strict=True):
        for key in ("provider_prompt_tokens", "cache_read_tokens", "cache_write_tokens", "completion_tokens",
                    "window", "model", "ts"):
            assert row[key] == ("" if rec[key] is None else str(rec[key])), key
        uncached = rec["provider_prompt_tokens"] - rec["cache_read_tokens"] - rec["cache_write_tokens"]
        assert int(row["uncached_input_tokens"]) == uncached
    assert [int(r["call"]) for r in rows] == list(range(1, 144))
    rewrites = [int(r["call"]) - 1 for r in rows if r["cache_rewrite"] == "true"]
    assert rewrites == [0, 5, 6, 10, 71, 84, 85]


def test_json_round_trips(claude_dir: Path, tmp_path: Path) -> None:
    out = export.export_session(claude_dir, "json", tmp_path / "calls.json")
    doc = json.loads(out.read_text(encoding="utf-8"))
    data = export.read_session(claude_dir)
    assert doc["kind"] == export.JSON_KIND and doc["fields"] == list(export.CALL_FIELDS)
    assert doc["calls"] == export.call_rows(data)
    assert json.loads(json.dumps(doc)) == doc
    assert doc["session"]["calls"] == 143 and doc["session"]["source_format"] == "claude-code"
    assert [c["tokens_before"] for c in doc["compactions"]] == [167_731]
    records = _records(claude_dir)
    assert [c["provider_prompt_tokens"] for c in doc["calls"]] == [r["provider_prompt_tokens"] for r in records]


def test_codex_has_no_cache_write_and_its_misses_are_marked(codex_dir: Path) -> None:
    data = export.read_session(codex_dir)
    rows = export.call_rows(data)
    assert rows and all(r["cache_write_tokens"] is None for r in rows)
    for row in rows:
        assert row["uncached_input_tokens"] == row["provider_prompt_tokens"] - row["cache_read_tokens"]
    # no write figures: a call whose uncached input is over 3× the median and over half its prompt
    uncached = [r["provider_prompt_tokens"] - r["cache_read_tokens"] for r in _records(codex_dir)]
    median = statistics.median([u for u in uncached if u])
    prompts = [r["provider_prompt_tokens"] for r in rows]
    expected = [i for i, u in enumerate(uncached) if u > 3 * median and u > 0.5 * prompts[i]]
    assert [i for i, r in enumerate(rows) if r["cache_rewrite"]] == expected
    assert len(expected) == 14 and expected[:3] == [0, 10, 17]
    summary = analyze(_records(codex_dir))
    assert summary.basis == "uncached"
    assert "not read from the cache" in summary.calls[10].reason and "expired" in summary.calls[10].reason
    assert "written ×" not in summary.calls[10].reason
    lines = export.session_markdown(data).splitlines()
    comp = next(i for i, line in enumerate(lines) if line.startswith("## Compaction (auto)"))
    assert all("archived" in h for h in lines[:comp] if HEADING.match(h))
    assert not any("archived" in h for h in lines[comp:] if HEADING.match(h))
    text = export.calls_csv(rows)
    assert next(csv.DictReader(io.StringIO(text)))["cache_write_tokens"] == ""


def test_cache_rewrite_rule_and_reasons() -> None:
    def rec(prompt: int, read: int, write: int, ts: str, segment: int = 0) -> dict[str, Any]:
        return {"provider_prompt_tokens": prompt, "cache_read_tokens": read, "cache_write_tokens": write,
                "ts": ts, "segment": segment}

    records = [
        rec(10_000, 0, 10_000, "2026-01-01T10:00:00+00:00"),  # first call
        rec(10_500, 10_000, 500, "2026-01-01T10:00:10+00:00"),
        rec(11_000, 10_500, 500, "2026-01-01T10:00:20+00:00"),
        rec(11_400, 11_000, 400, "2026-01-01T10:00:30+00:00"),
        rec(12_000, 0, 12_000, "2026-01-01T10:20:00+00:00"),  # idle: expired
        rec(12_600, 12_000, 600, "2026-01-01T10:20:10+00:00"),
        rec(6_000, 2_000, 4_000, "2026-01-01T10:20:20+00:00", segment=1),  # after a compaction
        rec(6_500, 1_000, 5_500, "2026-01-01T10:20:30+00:00", segment=1),  # prefix changed
        rec(7_000, 6_500, 400, "2026-01-01T10:20:40+00:00", segment=1),  # 400 < 3× median: usual
    ]
    summary = analyze(records)
    assert summary.median_write == 600
    assert summary.rewrites == [0, 4, 6, 7]
    reasons = [summary.calls[i].reason for i in summary.rewrites]
    assert "first call" in reasons[0]
    assert "20 min after the previous call" in reasons[1] and "expired" in reasons[1]
    assert "after a compaction" in reasons[2]
    assert "something early in the prompt changed" in reasons[3]
    assert all("Input cost" in r for r in reasons)
    assert summary.has_usage and summary.has_write
    # > 3× median but under 10 % of the prompt is not a re-write
    big = [rec(100_000, 90_000, 100, "a"), rec(100_000, 90_000, 100, "b"), rec(200_000, 185_000, 15_000, "c")]
    assert analyze(big).rewrites == []
    fig = call_figures({"provider_prompt_tokens": 100, "cache_read_tokens": 80, "cache_write_tokens": None})
    assert (fig.uncached, fig.hit_rate, fig.write) == (20, 0.8, None)


def test_not_a_session_and_unknown_format(tmp_path: Path, claude_dir: Path) -> None:
    with pytest.raises(export.ExportError, match="not a session folder"):
        export.read_session(tmp_path)
    with pytest.raises(export.ExportError, match="unknown export format"):
        export.export_session(claude_dir, "pdf", tmp_path / "x.pdf")
    assert not (tmp_path / "x.pdf").exists()


def test_export_reads_only(claude_dir: Path, tmp_path: Path) -> None:
    before = {p: p.stat().st_mtime_ns for p in claude_dir.rglob("*") if p.is_file()}
    for fmt in export.EXPORT_FORMATS:
        export.export_session(claude_dir, fmt, tmp_path / f"out.{fmt}")
    after = {p: p.stat().st_mtime_ns for p in claude_dir.rglob("*") if p.is_file()}
    assert before == after
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv", "out.json", "out.md"]
    umask = os.umask(0o022)
    os.umask(umask)
    assert {(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()} == {0o666 & ~umask}
