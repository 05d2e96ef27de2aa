"""The large-session generator (``benchmarks/bigsession.py``) makes sessions that do not collapse: a
file of N copies of a real session reads as N times its calls and messages, one chain, no rebuild."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bigsession import CLAUDE_SOURCE, SHARED, ClaudeCopies, make_claude_session
from engine.sources.claude_code import ClaudeCodeReader, read_claude_code

MB = 1024 * 1024


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is not here")
    return path


@pytest.mark.parametrize("name", ["subagent.jsonl", CLAUDE_SOURCE.name])
def test_a_generated_session_has_n_times_the_original(tmp_path: Path, name: str) -> None:
    source = _need(SHARED / "claude-code" / name)
    size = source.stat().st_size
    copies = max(3, round(3 * MB / size))  # about 3 MB (3 copies of the 2.9 MB session)
    dest = make_claude_session(tmp_path / "big.jsonl", copies * size, seed=7, source=source)
    assert copies * size <= dest.stat().st_size < copies * size + 64 * 1024
    original = read_claude_code(source, subagents=False)
    big = read_claude_code(dest, subagents=False)
    assert len(big.calls) == copies * len(original.calls)
    assert abs(len(big.messages) - copies * len(original.messages)) <= copies  # copies' ends may merge
    assert len(big.compactions) == copies * len(original.compactions)
    assert big.off_chain == copies * original.off_chain  # one chain: nothing left off as a branch
    assert big.session_id == original.session_id
    # followed 20 lines at a time, the incremental reader never has to rebuild: the chain goes on
    reader = ClaudeCodeReader(dest)
    data = dest.read_bytes().splitlines(keepends=True)
    for at in range(0, len(data), 20):
        reader.feed(b"".join(data[at:at + 20]))
    followed = reader.finish(subagents=False)
    assert reader.rebuilds == 0
    assert len(followed.messages) == len(big.messages) and len(followed.calls) == len(big.calls)


def test_ids_are_fresh_and_the_chain_and_time_go_on(tmp_path: Path) -> None:
    source = _need(CLAUDE_SOURCE)
    copies = ClaudeCopies(source, seed=3)
    first, second = copies.copy(), copies.copy()
    objs = [json.loads(x) for x in first + second]
    a, b = objs[:len(first)], objs[len(first):]
    uuids_a = {o["uuid"] for o in a if "uuid" in o}
    uuids_b = {o["uuid"] for o in b if "uuid" in o}
    assert uuids_a and not uuids_a & uuids_b
    ids = [{(o["message"].get("id"), o.get("requestId")) for o in part if o.get("type") == "assistant"}
           for part in (a, b)]
    assert not ids[0] & ids[1]
    assert {o.get("sessionId") for o in a + b} - {None} == {a[copies.root]["sessionId"]}
    # the second copy's root hangs off the first copy's last line on the chain
    assert b[copies.root]["parentUuid"] == copies.tip.decode()
    # every parent of the second copy names a line of the second copy (or the first's tip)
    parents = {o["parentUuid"] for o in b if o.get("parentUuid")}
    assert parents <= uuids_b | {copies.tip.decode()}
    boundary = [o for o in b if o.get("subtype") == "compact_boundary"]
    assert all(o["logicalParentUuid"] in uuids_b for o in boundary)
    assert max(o["timestamp"] for o in a if "timestamp" in o) < min(o["timestamp"] for o in b if "timestamp" in o)


def test_a_generated_codex_rollout_has_n_times_the_original(tmp_path: Path) -> None:
    from benchmarks.bigsession import CODEX_SOURCE, make_codex_session
    from engine.sources.codex import read_codex

    source = _need(CODEX_SOURCE)
    size = source.stat().st_size
    copies = 3
    dest = make_codex_session(tmp_path / "rollout.jsonl", copies * size, seed=5, source=source)
    original, big = read_codex(source), read_codex(dest)
    # the file is cut at the size: the last copy may lack its last line or two
    assert copies * len(original.calls) - 2 <= len(big.calls) <= copies * len(original.calls)
    assert len(big.messages) >= copies * len(original.messages) - 10
    assert len(big.compactions) == copies * len(original.compactions)
    assert big.session_id == original.session_id
    assert dest.read_bytes().count(b'"type":"session_meta"') == 1
