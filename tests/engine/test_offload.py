"""engine.context.offload: SPEC §3 — the cut, the notice, limits, re-truncation, strategies, retention."""

from __future__ import annotations

import os
import re
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from engine.context import offload
from engine.context.conversation import Session
from engine.context.offload import (
    Offloader,
    cleanup_retention,
    count_lines,
    list_offloaded,
    middle_out,
    plan_prune,
    recent_indexes,
    referenced_files,
    truncate_text_output,
)
from engine.model.messages import assistant, tool_call, tool_result, user
from engine.store.config import Settings

HINT = re.compile(r"start_line=(\d+)")


def _lines(n: int, width: int = 10) -> str:
    """n lines of exactly ``width`` bytes each (newline included)."""
    return "".join(f"{i:0{width - 1}d}\n"[-width:] for i in range(1, n + 1))


def _hint(text: str) -> int:
    found = HINT.findall(text)
    assert found, f"no start_line hint in {text[-300:]!r}"
    return int(found[-1])


# --------------------------------------------------------------------------- truncate_text_output


def test_within_limit_comes_back_unchanged() -> None:
    text = _lines(5)  # 50 bytes
    assert truncate_text_output(text, start_line=1, total_lines=5, max_bytes=50, file_path="f") == text
    assert truncate_text_output(text, start_line=1, total_lines=5, max_bytes=500, file_path="f") == text


def test_cut_and_notice_arithmetic_on_known_lines() -> None:
    text = _lines(100)  # 100 lines × 10 bytes
    out = truncate_text_output(text, start_line=1, total_lines=100, max_bytes=35, file_path="tool_results/x.txt")
    cut = text[:35]  # 3 whole lines + 5 bytes: nl = 3
    assert out.startswith(cut)
    notice = out[len(cut) :]
    assert "100 lines" in notice
    assert "starts at line 1 " in notice
    assert "covers 35 bytes" in notice
    assert "tool_results/x.txt" in notice
    assert _hint(out) == 1 + 3


def test_start_line_offsets_the_hint() -> None:
    text = _lines(50)
    out = truncate_text_output(text, start_line=10, total_lines=100, max_bytes=40, file_path="p")
    assert _hint(out) == 10 + 4  # 40 bytes hold exactly 4 newlines


def test_no_newline_in_cut_still_advances_one_line() -> None:
    text = "x" * 500 + "\n" + "y" * 10
    out = truncate_text_output(text, start_line=1, total_lines=2, max_bytes=100, file_path="p")
    assert out.startswith("x" * 100)
    assert _hint(out) == 2  # max(1, nl=0)


def test_next_past_end_points_at_last_line() -> None:
    text = _lines(5)
    out = truncate_text_output(text, start_line=98, total_lines=100, max_bytes=45, file_path="p")
    # nl = 4 → next = 102 > 100, and 98 < 100 → read from the last line
    assert _hint(out) == 100


def test_nothing_more_to_read_adds_no_notice() -> None:
    text = "z" * 1000  # one giant line
    out = truncate_text_output(text, start_line=1, total_lines=1, max_bytes=100, file_path="p")
    assert out == "z" * 100
    out = truncate_text_output(_lines(10), start_line=7, total_lines=7, max_bytes=20, file_path="p")
    assert out == _lines(2)


def test_equality_at_the_next_boundary() -> None:
    text = _lines(10)
    out = truncate_text_output(text, start_line=1, total_lines=4, max_bytes=30, file_path="p")
    assert _hint(out) == 4  # next = 1 + 3 == total_lines: allowed (≤)


@hsettings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(["a", "\n", "é", "€", "😀", "ß"]), min_size=1, max_size=60),
    st.integers(min_value=0, max_value=80),
)
def test_byte_cut_never_splits_a_character(text: str, max_bytes: int) -> None:
    total = count_lines(text) + 5
    out = truncate_text_output(text, start_line=1, total_lines=total, max_bytes=max_bytes, file_path="p")
    data = text.encode()
    if len(data) <= max_bytes:
        assert out == text
        return
    at = out.find(offload.NOTICE_MARK)
    cut = out[:at] if at >= 0 else out
    assert text.startswith(cut)
    assert len(cut.encode()) <= max_bytes
    nxt = text[len(cut) : len(cut) + 1]
    assert len(cut.encode()) + len(nxt.encode()) > max_bytes  # the longest prefix that fits
    assert f"covers {len(cut.encode())} bytes" in out


def test_truncate_does_not_encode_the_whole_text() -> None:
    """Cutting 50 MB to 1,000 bytes allocates kilobytes, never a copy of the text (its time is a
    benchmark figure: ``python -m benchmarks truncate``)."""
    big = "a" * 50_000_000
    tracemalloc.start()
    try:
        out = truncate_text_output(big, start_line=1, total_lines=1, max_bytes=1000, file_path="p")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out == "a" * 1000
    assert peak < 1_000_000, peak  # an encode() of the whole text would be 50 MB


# --------------------------------------------------------------------------- middle_out


def test_middle_out_keeps_head_and_tail_and_counts_the_cut() -> None:
    text = "HEAD\n" + "m" * 10_000 + "\nTAIL-ERROR: boom"
    out = middle_out(text, max_bytes=200, file_path="tool_results/f.txt", total_lines=3)
    assert out.startswith("HEAD\n")
    assert out.endswith("TAIL-ERROR: boom")
    m = re.search(r"(\d+) tokens \((\d+) characters\)", out)
    assert m
    head = out[: out.index(offload.MIDDLE_MARK)]
    tail_len = len(out) - out.rindex("…]\n\n") - len("…]\n\n")
    removed = len(text) - len(head) - tail_len
    assert int(m.group(2)) == removed
    assert int(m.group(1)) == removed * 2 // 5
    assert "tool_results/f.txt" in out and "start_line=2" in out
    assert middle_out("short", max_bytes=100, file_path="f") == "short"


def test_middle_out_never_splits_characters() -> None:
    text = "€" * 1000
    out = middle_out(text, max_bytes=101, file_path="f")
    out.encode("utf-8")  # valid
    head = out[: out.index(offload.MIDDLE_MARK)]
    assert set(head) == {"€"} and len(head.encode()) <= 50


# --------------------------------------------------------------------------- the Offloader


def _settings(**kw: Any) -> Settings:
    return Settings(**kw)


def _tool_step(output: str, cid: str, name: str = "run_shell") -> list[dict[str, Any]]:
    return [
        assistant(None, [tool_call(cid, name, '{"command": "x"}')]),
        tool_result(cid, output),
    ]


def test_recent_indexes_trailing_run_and_last_n() -> None:
    h = [user("u"), *_tool_step("a", "c1"), assistant(None, [tool_call("c2", "f", "{}"), tool_call("c3", "f", "{}")])]
    h += [tool_result("c2", "b"), tool_result("c3", "c")]
    assert recent_indexes(h, 2) == {4, 5}
    assert recent_indexes(h, 4) == {2, 3, 4, 5}
    assert recent_indexes(h, 0) == {4, 5}  # the trailing run of tool results
    h.append(assistant("done"))
    assert recent_indexes(h, 2) == {5, 6}


@pytest.mark.asyncio
async def test_offload_writes_full_text_and_cuts_with_notice(tmp_path: Path) -> None:
    text = _lines(10_000, 12)  # 120,000 bytes
    h = [user("go"), *_tool_step(text, "c1")]
    off = Offloader(tmp_path, _settings())
    records = await off.offload_step(h)
    assert len(records) == 1 and records[0].action == "offloaded"
    msg = h[2]
    info = msg["offload"]
    assert re.fullmatch(r"tool_results/[0-9a-f]{32}\.txt", info["path"])
    assert info["bytes"] == 120_000 and info["lines"] == 10_000
    assert (tmp_path / info["path"]).read_text() == text
    assert msg["content"].startswith(text[:50_000])
    assert _hint(msg["content"]) == 1 + 50_000 // 12
    assert f"{info['path']}" in msg["content"]
    assert records[0].tool_name == "run_shell" and records[0].after_bytes < 50_400
    assert not list((tmp_path / "tool_results").glob("*.part"))


@pytest.mark.asyncio
async def test_grace_of_100_bytes(tmp_path: Path) -> None:
    s = _settings(offload_recent_bytes=1000)
    h = [user("go"), *_tool_step("a" * 1100, "c1")]
    assert await Offloader(tmp_path, s).offload_step(h) == []
    h = [user("go"), *_tool_step("a" * 1101, "c1")]
    assert len(await Offloader(tmp_path, s).offload_step(h)) == 1


@pytest.mark.asyncio
async def test_old_results_get_the_small_limit_and_recut_in_place(tmp_path: Path) -> None:
    s = _settings(offload_recent_bytes=50_000, offload_old_bytes=3_000, offload_recent_n=2)
    text = _lines(8_000, 10)  # 80,000 bytes
    h = [user("go"), *_tool_step(text, "c1")]
    off = Offloader(tmp_path, s)
    await off.offload_step(h)
    first_hint = _hint(h[2]["content"])
    path = h[2]["offload"]["path"]
    assert first_hint == 5_001
    # a later tool step: the first result ages into the old limit
    h += _tool_step("small", "c2")
    records = await off.offload_step(h)
    assert [r.action for r in records] == ["recut"]
    assert h[2]["offload"]["path"] == path  # same file
    assert len(list((tmp_path / "tool_results").glob("*.txt"))) == 1  # no new file
    hints = [first_hint, _hint(h[2]["content"])]
    assert hints[1] == 301
    assert h[2]["content"].count(offload.NOTICE_MARK) == 1
    # running again changes nothing
    assert await off.offload_step(h) == []
    # smaller and smaller limits: the read-more line strictly decreases
    for limit in (2_000, 1_000, 450, 95):
        off.settings = _settings(offload_old_bytes=limit, offload_recent_n=2)
        recs = await off.offload_step(h)
        assert [r.action for r in recs] == ["recut"]
        hints.append(_hint(h[2]["content"]))
        assert h[2]["content"].startswith(text[: len(text[:limit]) // 10 * 10])
        assert f"covers {limit} bytes" in h[2]["content"]
    assert hints == sorted(hints, reverse=True) and len(set(hints)) == len(hints)
    assert hints[-4:] == [201, 101, 46, 10]


@pytest.mark.asyncio
async def test_single_giant_line_still_names_the_file(tmp_path: Path) -> None:
    h = [user("go"), *_tool_step("x" * 200_000, "c1")]
    await Offloader(tmp_path, _settings()).offload_step(h)
    content = h[2]["content"]
    assert content.startswith("x" * 50_000)
    assert h[2]["offload"]["path"] in content and "200000 bytes" in content


@pytest.mark.asyncio
async def test_file_names_never_come_from_model_output(tmp_path: Path) -> None:
    h = [
        user("go"),
        assistant(None, [tool_call("../../../etc/passwd", "../evil", "{}")]),
        tool_result("../../../etc/passwd", "y" * 100_000, name="../../evil"),
    ]
    await Offloader(tmp_path, _settings()).offload_step(h)
    files = list((tmp_path / "tool_results").iterdir())
    names = {p.name for p in files}
    assert "index.jsonl" in names and len(names) == 2
    (data,) = names - {"index.jsonl"}
    assert re.fullmatch(r"[0-9a-f]{32}\.txt", data)
    assert not (tmp_path.parent / "etc").exists()


@pytest.mark.asyncio
async def test_list_content_keeps_media_parts(tmp_path: Path) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    msg = tool_result("c1", "")
    msg["content"] = [{"type": "text", "text": "t" * 60_000}, image]
    h = [user("go"), assistant(None, [tool_call("c1", "shot", "{}")]), msg]
    await Offloader(tmp_path, _settings()).offload_step(h)
    content = h[2]["content"]
    assert isinstance(content, list) and content[1] == image
    assert content[0]["text"].startswith("t" * 50_000) and offload.NOTICE_MARK in content[0]["text"]


@pytest.mark.asyncio
async def test_binary_output_round_trips_and_context_is_valid_utf8(tmp_path: Path) -> None:
    raw = bytes(range(256)) * 400  # not UTF-8
    text = raw.decode("utf-8", "surrogateescape")
    h = [user("go"), *_tool_step(text, "c1")]
    await Offloader(tmp_path, _settings()).offload_step(h)
    assert (tmp_path / h[2]["offload"]["path"]).read_bytes() == raw
    h[2]["content"].encode("utf-8")  # no lone surrogates left in the context


@pytest.mark.asyncio
async def test_middle_out_strategy_and_recut(tmp_path: Path) -> None:
    s = _settings(offload_strategy="middle_out", offload_old_bytes=1_000)
    text = "start\n" + _lines(9_000) + "FINAL ERROR\n"
    h = [user("go"), *_tool_step(text, "c1")]
    off = Offloader(tmp_path, s)
    await off.offload_step(h)
    c = h[2]["content"]
    assert c.startswith("start\n") and c.endswith("FINAL ERROR\n")
    assert (tmp_path / h[2]["offload"]["path"]).read_text() == text
    h += _tool_step("ok", "c2")
    recs = await off.offload_step(h)
    assert [r.action for r in recs] == ["recut"]
    c2 = h[2]["content"]
    assert c2.startswith("start\n") and c2.endswith("FINAL ERROR\n") and len(c2) < 1_400
    m = re.search(r"(\d+) characters", c2)
    assert m and int(m.group(1)) == len(text) - h[2]["offload"]["head_chars"] - h[2]["offload"]["tail_chars"]


# --------------------------------------------------------------------------- prune


def test_plan_prune_rule() -> None:
    h: list[dict[str, Any]] = []
    counts: list[int] = []
    for t in range(6):
        h.append(user(f"turn {t}"))
        counts.append(5)
        h += _tool_step("x", f"c{t}")
        counts += [5, 15_000]
    # last 2 turns protected: users at 0,3,6,9,12,15 → boundary 12
    got = plan_prune(h, counts, protect_tokens=40_000, minimum_tokens=20_000, protect_turns=2)
    # walking back from 11: tool outputs at 11, 8, 5, 2 → 15k, 30k, 45k (> 40k: candidate), 60k
    assert got == [2, 5]
    assert plan_prune(h, counts, protect_tokens=40_000, minimum_tokens=30_000, protect_turns=2) == []
    assert plan_prune(h, counts, protect_tokens=40_000, minimum_tokens=29_999, protect_turns=2) == [2, 5]
    assert plan_prune(h[:4], counts[:4], protect_tokens=0, minimum_tokens=0, protect_turns=2) == []
    assert plan_prune(h, counts, protect_tokens=0, minimum_tokens=0, protect_turns=0) == [2, 5, 8, 11, 14, 17]


@pytest.mark.asyncio
async def test_prune_strategy_replaces_old_outputs_with_markers_naming_files(tmp_path: Path) -> None:
    s = _settings(offload_strategy="prune", prune_protect_tokens=1_500, prune_minimum_tokens=500)
    h: list[dict[str, Any]] = []
    outputs = {}
    for t in range(5):
        h.append(user(f"turn {t}"))
        out = f"output {t}\n" * 300  # 1,085 tokens each
        outputs[f"c{t}"] = out
        h += _tool_step(out, f"c{t}")
    recs = await Offloader(tmp_path, s).offload_step(h)
    pruned = [r for r in recs if r.action == "pruned"]
    assert [r.tool_call_id for r in pruned] == ["c0", "c1"]
    for r in pruned:
        msg = next(m for m in h if m.get("tool_call_id") == r.tool_call_id)
        assert msg["content"].startswith(offload.PRUNE_MARK) and r.path in msg["content"]
        assert (tmp_path / r.path).read_text() == outputs[r.tool_call_id]
    assert h[8]["content"] == outputs["c2"]  # protected by the token budget
    again = await Offloader(tmp_path, s).offload_step(h)
    assert again == []


# --------------------------------------------------------------------------- big outputs


@pytest.mark.asyncio
@pytest.mark.slow
async def test_100mb_output_does_not_block_the_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole-output work (writing the 100 MB file) runs in a worker thread, so the loop
    stays free; the longest the loop waits is a benchmark figure (``python -m benchmarks offload``)."""
    big = ("0123456789abcdef" * 4 + "\n") * (100 * 1024 * 1024 // 65)
    h = [user("go"), *_tool_step(big, "c1")]
    ran_on: dict[str, list[int]] = {}

    def on_thread(name: str) -> None:
        real = getattr(offload, name)

        def spy(*args: Any) -> Any:
            ran_on.setdefault(name, []).append(threading.get_ident())
            return real(*args)

        monkeypatch.setattr(offload, name, spy)

    on_thread("_write_text_file")  # the text is ASCII: no _context_text pass
    await Offloader(tmp_path, _settings()).offload_step(h)
    loop_thread = threading.get_ident()
    assert set(ran_on) == {"_write_text_file"}
    assert all(loop_thread not in idents for idents in ran_on.values()), ran_on
    assert (tmp_path / h[2]["offload"]["path"]).stat().st_size == len(big)


@pytest.mark.asyncio
async def test_large_output_is_not_held_twice_in_memory(tmp_path: Path) -> None:
    big = "x" * (20 * 1024 * 1024)
    h = [user("go"), *_tool_step(big, "c1")]
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        await Offloader(tmp_path, _settings()).offload_step(h)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < len(big) // 4, f"peak extra memory {peak} bytes for a {len(big)}-byte output"


# --------------------------------------------------------------------------- with a session


@pytest.mark.asyncio
async def test_offload_session_cuts_pending_before_first_write(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", "t")
    session.extend([user("go"), *_tool_step("old " * 20_000, "c1")])
    step = _tool_step("new " * 30_000, "c2")
    session.append(step[0])
    records = await Offloader(session.path, _settings()).offload_session(session, [step[1]])
    assert {r.action for r in records} == {"offloaded"}
    raw = session.history_path.read_bytes()
    assert b"new new" in raw and len(raw) < 60_000  # the 120 kB result never reached history.jsonl
    again = Session.load(session.path)
    assert [m["id"] for m in again.messages] == [m["id"] for m in session.messages]
    assert again.messages[2]["offload"]["path"] and again.messages[4]["offload"]["path"]
    assert again.ledger.total == session.ledger.total


# --------------------------------------------------------------------------- listing and retention


@pytest.mark.asyncio
async def test_list_offloaded(tmp_path: Path) -> None:
    h = [user("go"), *_tool_step("a\n" * 40_000, "c1", name="search_text")]
    await Offloader(tmp_path, _settings()).offload_step(h)
    files = list_offloaded(tmp_path)
    assert len(files) == 1
    f = files[0]
    assert f.path == h[2]["offload"]["path"] and f.size == 80_000 and f.lines == 40_000
    assert f.tool_name == "search_text" and f.message_id == h[2]["id"] and f.tool_call_id == "c1"
    assert list_offloaded(tmp_path / "nowhere") == []


def test_cleanup_retention_keeps_live_references(tmp_path: Path) -> None:
    folder = tmp_path / "tool_results"
    folder.mkdir()
    old = time.time() - 6 * 86400
    names = [f"{i:032x}.txt" for i in range(4)]
    for n in names:
        (folder / n).write_text("data")
    for n in names[:3]:
        os.utime(folder / n, (old, old))
    (folder / "abc.txt.part").write_text("half")
    os.utime(folder / "abc.txt.part", (old, old))
    msgs = [tool_result("c", "cut", offload={"path": f"tool_results/{names[0]}", "bytes": 4, "lines": 1})]
    summary = f"see tool_results/{names[1]} for the log"
    refs = referenced_files(msgs, summary)
    assert refs == {names[0], names[1]}
    removed = cleanup_retention(tmp_path, refs, 5)
    assert sorted(p.name for p in removed) == sorted([names[2], "abc.txt.part"])
    assert sorted(p.name for p in folder.iterdir()) == sorted([names[0], names[1], names[3]])
    assert cleanup_retention(tmp_path / "missing", set(), 5) == []


def test_session_cleanup_uses_history_and_summary(tmp_path: Path) -> None:
    session = Session.create(tmp_path / "s", "t")
    folder = session.path / "tool_results"
    folder.mkdir()
    live, stale = "a" * 32 + ".txt", "b" * 32 + ".txt"
    for n in (live, stale):
        (folder / n).write_text("x")
        os.utime(folder / n, (time.time() - 10 * 86400,) * 2)
    session.extend([user("u"), *_tool_step("cut", "c1")])
    session.messages[2]["offload"] = {"path": f"tool_results/{live}", "bytes": 1, "lines": 1}
    session.update_message(session.messages[2]["id"], session.messages[2])
    session.close()
    reopened = Session.load(session.path, retention_days=5)
    assert reopened.messages[2]["offload"]["path"].endswith(live)
    assert sorted(p.name for p in folder.iterdir()) == [live]


@pytest.mark.asyncio
async def test_offload_session_survives_a_compaction_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = Session.create(tmp_path / "s", "t")
    session.extend([user("go"), *_tool_step("old " * 20_000, "c1"), user("next"), *_tool_step("ok", "c2")])
    real_save = Offloader._save

    async def save_then_compact(self: Offloader, msg: Any, text: str, name: str) -> Any:
        out = await real_save(self, msg, text, name)
        session.rewrite(session.messages[3:])  # a background compaction archived the first turn
        return out

    monkeypatch.setattr(Offloader, "_save", save_then_compact)
    records = await Offloader(session.path, _settings()).offload_session(session)
    assert [r.action for r in records] == ["offloaded"]
    assert [m["role"] for m in Session.load(session.path).messages] == ["user", "assistant", "tool"]
