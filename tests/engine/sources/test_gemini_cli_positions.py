"""Gemini CLI's reader finds a record's messages through an index of positions (issue 28: it scanned every message
for each record, 55 s for 4,000 turns). Checked against the scan it replaced (a reader whose ``_positions`` walks
the conversation, as before) on random sessions — records that grow (more tool calls: the messages after them
move), ``$set`` restatements and rollbacks, rewinds, compressions — fed whole and line by line: the same session
after every line."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from engine.sources.gemini_cli import GeminiCliReader
from engine.sources.model import IdMaker, SourceSession

HEADER = {"sessionId": "s-1", "projectHash": "h", "startTime": "2026-11-25T10:00:00.000Z",
          "lastUpdated": "2026-11-25T10:00:00.000Z", "kind": "main"}


class ScanningReader(GeminiCliReader):
    """The reader as it was: every lookup walks the conversation from ``live`` on."""

    def _positions(self, gid: str, live: int) -> list[int]:
        return [i for i in range(live, len(self._gid)) if self._gid[i] == gid]


def _ts(k: int) -> str:
    return f"2026-11-25T10:{k // 60 % 60:02d}:{k % 60:02d}.000Z"


def _gemini(gid: str, k: int, calls: int, tokens: int | None, text: str = "") -> dict[str, Any]:
    rec: dict[str, Any] = {"id": gid, "timestamp": _ts(k), "type": "gemini", "content": text, "thoughts": [],
                           "model": "gemini-2.5-pro"}
    if tokens is not None:
        rec["tokens"] = {"input": tokens, "output": 5, "cached": 0, "thoughts": 0, "tool": 0, "total": tokens + 5}
    if calls:
        rec["toolCalls"] = [{"id": f"{gid}-c{j}", "name": "ls", "args": {"n": j}, "status": "success"}
                            for j in range(calls)]
    return rec


def _user(gid: str, k: int, results: list[str]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"functionResponse": {"id": c, "name": "ls", "response": {"output": c}}}
                                   for c in results]
    return {"id": gid, "timestamp": _ts(k), "type": "user", "content": parts or [{"text": f"prompt {gid}"}]}


def _as_history(rec: dict[str, Any]) -> dict[str, Any]:
    content = rec["content"]
    if rec["type"] == "gemini":
        content = ([{"text": content}] if content else []) + [
            {"functionCall": {"name": c["name"], "args": c["args"], "id": c["id"]}} for c in rec.get("toolCalls", [])]
    return {"id": rec["id"], "timestamp": rec["timestamp"], "type": rec["type"], "content": content}


def random_session(seed: int, steps: int = 120) -> list[dict[str, Any]]:
    """Lines in the shapes Gemini CLI writes, drawn at random."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = [HEADER]
    live: list[dict[str, Any]] = []  # the records of the conversation as the model sees it
    n = 0
    for k in range(steps):
        roll = rng.random()
        gemini = [r for r in live if r["type"] == "gemini"]
        if roll < 0.3 or not live:
            n += 1
            rec = _user(f"u{n}", k, [c["id"] for c in (live[-1].get("toolCalls", []) if live else [])])
        elif roll < 0.6:
            n += 1
            rec = _gemini(f"g{n}", k, rng.randint(0, 2), rng.choice([None, 1000 + 10 * k]), rng.choice(["", "ok"]))
        elif roll < 0.75 and gemini:  # a record written again, grown: a model's (its tokens, more tool calls) or
            old = rng.choice(live[-4:])  # a user's (a text part added to its results: one message more)
            if old["type"] == "gemini":
                rec = _gemini(old["id"], k, len(old.get("toolCalls", [])) + rng.randint(0, 2), 1000 + 10 * k, "grown")
            else:
                rec = dict(old, content=[*old["content"], {"text": "and more"}])
            live[live.index(old)] = rec
            rows.append(rec)
            continue
        elif roll < 0.83:  # restated whole (a resume) or rolled back to a shorter list
            cut = rng.randint(0, len(live)) if rng.random() < 0.5 else len(live)
            live = live[:cut]
            rows.append({"$set": {"messages": [_as_history(r) for r in live], "lastUpdated": _ts(k)}})
            continue
        elif roll < 0.9 and live:  # /rewind
            at = rng.randrange(len(live))
            rows.append({"$rewindTo": live[at]["id"]})
            live = live[:at]
            continue
        elif roll < 0.95 and len(live) > 3:  # a compression: a new head, the recent part kept
            n += 1
            head = [_user(f"s{n}", k, []), _gemini(f"a{n}", k, 0, None, "Got it.")]
            head[0]["content"] = [{"text": "<state_snapshot>S</state_snapshot>"}]
            live = head + live[-2:]
            rows.append({"$set": {"messages": [_as_history(r) for r in live]}})
            continue
        else:
            rows.append({"$set": {"lastUpdated": _ts(k)}})
            continue
        live.append(rec)
        rows.append(rec)
    return rows


def _state(src: SourceSession) -> tuple[Any, ...]:
    return (src.messages, src.calls, src.compactions, src.live_start, src.skipped, src.ignored, src.model,
            src.off_chain, src.started, src.last_activity)


@pytest.mark.parametrize("seed", range(30))
def test_the_index_finds_what_the_scan_found(tmp_path: Path, seed: int) -> None:
    rows = random_session(seed)
    lines = [json.dumps(r).encode() + b"\n" for r in rows]
    path = tmp_path / "session-x.jsonl"
    fast, slow = GeminiCliReader(path), ScanningReader(path)
    fast.session.make_id, slow.session.make_id = IdMaker("a" * 24), IdMaker("a" * 24)  # the same ids
    for i, line in enumerate(lines):
        changes = fast.feed(line), slow.feed(line)
        assert changes[0] == changes[1], f"line {i + 1}"
        assert _state(fast.session) == _state(slow.session), f"line {i + 1}"
    whole, scanned = GeminiCliReader(path), ScanningReader(path)  # and read whole, in one feed
    whole.session.make_id, scanned.session.make_id = IdMaker("b" * 24), IdMaker("b" * 24)
    assert whole.feed(b"".join(lines)) == scanned.feed(b"".join(lines))
    assert _state(whole.finish()) == _state(scanned.finish())


def test_the_random_sessions_hold_what_the_index_must_survive(tmp_path: Path) -> None:
    """The seeds above grow records in the middle (the messages after them move), roll back, rewind and
    compress: each happens in some of them, or the comparison would prove little."""
    seen = {"moved": 0, "rewind": 0, "compaction": 0, "rollback": 0}
    for seed in range(30):
        reader = GeminiCliReader(tmp_path / "s.jsonl")
        for row in random_session(seed):
            before = len(reader.session.messages)
            changes = reader.feed(json.dumps(row).encode() + b"\n")
            if "$rewindTo" in row:
                seen["rewind"] += 1
            elif changes.compactions_from < len(reader.session.compactions):
                seen["compaction"] += 1
            elif "$set" in row and len(reader.session.messages) < before:
                seen["rollback"] += 1
            elif "id" in row and changes.messages_from < before and len(
                    reader.session.messages) != before:
                seen["moved"] += 1
    assert all(seen.values()), seen
