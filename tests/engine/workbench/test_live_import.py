"""A followed view kept up to date from its reader's changes ends with the same chart records, messages and
compactions as a whole import of the same file (the proof that following needs no re-import)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.context.conversation import Session
from engine.ingest import import_source
from engine.store.config import Settings
from engine.workbench.source_views import LiveSource, new_prefix, swap_folders

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "sessions"
FILES = [
    SHARED / "claude-code" / "8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl",
    SHARED / "claude-code" / "tool_heavy.jsonl",
    SHARED / "codex" / "rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9.jsonl",
    SHARED / "codex" / "rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl",
]
FIELDS = ("call_index", "provider_prompt_tokens", "system", "tools", "summary", "history_user", "history_assistant",
          "history_tool", "message_count", "segment", "cache_read_tokens", "cache_write_tokens", "completion_tokens",
          "window", "prefix_source")


def records(folder: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]
    calls = [tuple(e.get(k) for k in FIELDS) for e in events if e["type"] == "context"]
    comps = [(e["trigger"], e["tokens_before"], e["tokens_after"], e["summary"], e["calls_before"],
              e["messages_compacted"]) for e in events if e["type"] == "compaction"]
    return calls, comps


def follow_in_pieces(source: Path, tmp: Path, seed: int, cut: int | None = None) -> tuple[Path, int, int]:
    """Write ``source`` into a growing file in random pieces, following it as the window does; the view
    folder at the end, the rewrites and the plans applied."""
    data = source.read_bytes()
    rng = random.Random(seed)
    cut = len(data) // 4 if cut is None else cut
    live_file = tmp / source.name
    live_file.write_bytes(data[:cut])
    root = tmp / "views"
    root.mkdir()
    folder = root / "view"
    live = LiveSource(live_file, "claude-code" if source.parent.name == "claude-code" else "codex", new_prefix(),
                      Settings(), None)
    live.open(folder)
    session = Session.load(folder)
    rewrites = plans = 0
    at = cut
    try:
        while at < len(data):
            n = rng.choice((200, 3_000, 40_000, 150_000))
            with open(live_file, "ab") as fh:
                fh.write(data[at:at + n])
            at += n
            plan = live.poll()
            if plan is None:
                rewrites += 1
                fresh = root / f"fresh-{rewrites}"
                live.rewrite(fresh)
                session.close()
                shutil.rmtree(swap_folders(folder, fresh))
                session = Session.load(folder)
            elif not plan.empty:
                plans += 1
                live.importer.apply(session, plan)
    finally:
        session.close()
    return folder, rewrites, plans


@pytest.mark.parametrize("source", FILES, ids=lambda p: p.name[:16])
def test_following_in_pieces_ends_as_the_whole_import(source: Path, tmp_path: Path) -> None:
    if not source.exists():
        pytest.skip(f"{source} is not here")
    folder, _, plans = follow_in_pieces(source, tmp_path, seed=7)
    whole = tmp_path / "whole"
    import_source(tmp_path / source.name, session_dir=whole)
    assert plans > 0  # the changes were applied, not only written again
    got, want = records(folder), records(whole)
    assert got[0] == want[0]  # every chart column, figure for figure
    assert got[1] == want[1]  # the compactions
    live = [json.loads(x) for x in (folder / "history.jsonl").read_text().splitlines()]
    full = [json.loads(x) for x in (whole / "history.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in m.items() if k != "id"} for m in live] == [
        {k: v for k, v in m.items() if k != "id"} for m in full]
    assert _archived(folder) == _archived(whole)  # what the compactions took out, day by day, in order


def _archived(folder: Path) -> dict[str, list[dict[str, Any]]]:
    return {day.name: [{k: v for k, v in json.loads(x).items() if k != "id"} for x in day.read_text().splitlines()]
            for day in sorted((folder / "dialog").glob("*.jsonl"))}


@pytest.mark.parametrize("seed", [1, 7, 11])
def test_a_claude_code_compaction_that_preserves_an_answer_is_applied_in_place(seed: int, tmp_path: Path) -> None:
    """Claude Code 2.1.3xx's ``/compact`` (its boundary preserving the last answer, attachments around it): the
    followed view takes the compaction as a change (no folder written again) and ends as the whole import."""
    from tests.engine.workbench.claude_file import write_session

    source = write_session(tmp_path / "claude-code")  # (the folder names the format to follow_in_pieces)
    (tmp_path / "follow").mkdir()
    data = source.read_bytes()
    first = data.index(b"\n", data.index(b'"type": "assistant"')) + 1  # opened at its first answer
    folder, rewrites, plans = follow_in_pieces(source, tmp_path / "follow", seed=seed, cut=first)
    whole = tmp_path / "whole"
    import_source(tmp_path / "follow" / source.name, session_dir=whole)
    assert rewrites == 0 and plans > 0
    assert records(folder) == records(whole) and records(whole)[1]  # a compaction, with every call
    live = [json.loads(x) for x in (folder / "history.jsonl").read_text().splitlines()]
    full = [json.loads(x) for x in (whole / "history.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in m.items() if k != "id"} for m in live] == [
        {k: v for k, v in m.items() if k != "id"} for m in full]
    assert _archived(folder) == _archived(whole)


@pytest.mark.parametrize("source", FILES[:3], ids=lambda p: p.name[:16])
def test_a_view_primed_with_the_records_written_reads_what_the_file_holds(source: Path, tmp_path: Path) -> None:
    """LiveSource.prime gives the session loaded from the folder open wrote the records written (no second parse
    of events.jsonl): the very records a read of the file gives, once."""
    if not source.exists():
        pytest.skip("shared session missing")
    live = LiveSource(source, "claude-code" if source.parent.name == "claude-code" else "codex", new_prefix(),
                      Settings(), None)
    live.open(tmp_path / "view")
    primed, read = Session.load(tmp_path / "view"), Session.load(tmp_path / "view")
    try:
        live.prime(primed)
        assert live.importer.written is None
        assert primed.read_records() == read.read_records()
        assert len(read.read_records()) >= 4
        assert primed.read_events() == read.read_events()
    finally:
        primed.close()
        read.close()


def test_a_followed_view_keeps_a_few_message_shapes_counted(tmp_path: Path) -> None:
    """The import that opens a view counts every message through a memo of their shapes; following counts each new
    message once (a grown response again): the memo is emptied once the view is written and holds at most
    FOLLOW_MEMO shapes from then on (it held every message's, for as long as the file grew), the records the same."""
    from engine.context.tokens import FOLLOW_MEMO

    source = FILES[0]
    if not source.exists():
        pytest.skip("shared session missing")
    data = source.read_bytes()
    live_file = tmp_path / source.name
    live_file.write_bytes(data[:len(data) // 4])
    live = LiveSource(live_file, "claude-code", new_prefix(), Settings(), None)
    live.open(tmp_path / "view")
    memo = live.importer.recorder.cache
    assert not memo._memo and memo.max_entries == FOLLOW_MEMO
    seen = 0
    for at in range(len(data) // 4, len(data), 20_000):
        with open(live_file, "ab") as fh:
            fh.write(data[at:at + 20_000])
        live.poll()
        seen = max(seen, len(memo._memo))
    assert 0 < seen <= FOLLOW_MEMO


def test_a_view_is_read_with_the_collector_paused(tmp_path: Path) -> None:
    """Opening a view reads the whole file in bulk, as an import does: no cyclic collection walks what the read has
    made so far (at thousands of calls they made the open's time per call grow with the session)."""
    from tests.engine.test_staging import collections_during

    source = FILES[2]
    if not source.exists():
        pytest.skip(f"{source} is not here")
    live = LiveSource(source, "codex", new_prefix(), Settings(), None)
    _, collections = collections_during(lambda: live.open(tmp_path / "view"), young=200)
    assert live.session.calls and len(collections) <= 1  # at most one as the pause ends, none in it


@pytest.mark.parametrize("source", [FILES[0], FILES[2]], ids=["claude-code", "codex"])
def test_a_followed_view_holds_the_reader_s_messages_not_copies(source: Path, tmp_path: Path) -> None:
    """A Claude Code reader never changes a message it made (a grown response is a new dict in its place): the view
    holds the reader's own dicts, handed over as they are (a copy of each beside them was 0.45 MB in ten minutes of
    following), and none changes once handed over. A reader that grows its messages in place (Codex) hands copies.
    The fingerprints kept to find a grown message are the last MAX_REPLACED messages', not one a message."""
    from engine.ingest import MAX_REPLACED

    if not source.exists():
        pytest.skip(f"{source} is not here")
    data = source.read_bytes()
    live_file = tmp_path / source.name
    live_file.write_bytes(data[:len(data) // 4])
    live = LiveSource(live_file, "claude-code" if "claude" in source.parent.name else "codex", new_prefix(),
                      Settings(), None)
    live.open(tmp_path / "view")
    session = Session.load(tmp_path / "view")
    own = source.parent.name == "claude-code"
    handed: list[tuple[dict[str, Any], str]] = []
    grown = 0
    try:
        for at in range(len(data) // 4, len(data), 5_000):
            with open(live_file, "ab") as fh:
                fh.write(data[at:at + 5_000])
            plan = live.poll()
            if plan is None or plan.empty:
                continue
            reader = {str(m["id"]): m for m in live.session.messages[-MAX_REPLACED - len(plan.added):]}
            for msg in [*plan.replaced, *plan.added]:
                assert (msg is reader[str(msg["id"])]) == own
                handed.append((msg, json.dumps(msg, sort_keys=True)))
            grown += len(plan.replaced)
            live.importer.apply(session, plan)
            assert len(live.importer.signatures) <= MAX_REPLACED
    finally:
        session.close()
    assert handed and (grown > 0 or not own) and live.session.fresh_on_change == own
    if own:  # none changed once handed over (a Codex copy is shallow: a response's tool_calls list grows in it)
        assert all(json.dumps(msg, sort_keys=True) == was for msg, was in handed)
