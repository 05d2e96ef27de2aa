"""The long-chain benchmark (``python -m benchmarks long-chain``, issue 28) runs end to end on a small scale, and
its sessions are what it says: a Claude Code chain with one compaction whose context keeps growing (copies with
fresh ids, nothing collapsed or left off the chain), Gemini CLI sessions of the turns asked. The timings are the
benchmark's to judge, not this test's (a loaded machine)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import __main__ as bench_main
from benchmarks import longchain_bench
from benchmarks.bigsession import CLAUDE_SOURCE
from engine.sources.claude_code import read_claude_code
from engine.sources.gemini_cli import read_gemini_cli

MB = 1024 * 1024


def test_the_long_chain_has_one_compaction_and_grows(tmp_path: Path) -> None:
    if not CLAUDE_SOURCE.exists():
        pytest.skip(f"{CLAUDE_SOURCE} is not here")
    original = read_claude_code(CLAUDE_SOURCE, subagents=False)
    size = CLAUDE_SOURCE.stat().st_size
    path = longchain_bench.make_long_chain(tmp_path / "long.jsonl", 3 * size, seed=5)
    src = read_claude_code(path, subagents=False)
    assert len(src.compactions) == 1 == len(original.compactions)
    assert src.off_chain == 0 and not src.skipped
    assert len(src.calls) >= 3 * len(original.calls) - 5  # every copy's calls (copies are cut at a line)
    live = len(src.messages) - src.live_start
    assert live > 2 * (len(original.messages) - original.live_start)  # the context goes on growing
    last = src.calls[-1]
    assert last.message_index - src.segment_start(last.message_index) > 2 * len(original.messages)
    assert len({m["id"] for m in src.messages}) == len(src.messages)


def test_a_long_chain_of_calls_has_the_calls_asked(tmp_path: Path) -> None:
    if not CLAUDE_SOURCE.exists():
        pytest.skip(f"{CLAUDE_SOURCE} is not here")
    original = len(read_claude_code(CLAUDE_SOURCE, subagents=False).calls)
    for calls in (original - 7, 2 * original + 11):  # cut inside the first copy, and inside the third
        path = longchain_bench.make_long_chain(tmp_path / f"long-{calls}.jsonl", calls=calls, seed=3)
        src = read_claude_code(path, subagents=False)
        assert len(src.calls) == calls and src.off_chain == 0 and not src.skipped
    assert longchain_bench.cached_long_chain_calls(40, folder=tmp_path).name == "longchain-40calls-seed0.jsonl"
    with pytest.raises(ValueError):
        longchain_bench.make_long_chain(tmp_path / "both.jsonl", MB, calls=10)


def test_the_gemini_sessions_have_the_turns_asked(tmp_path: Path) -> None:
    src = read_gemini_cli(longchain_bench.make_gemini_session(tmp_path / "session-g.jsonl", 30))
    assert len(src.calls) == 60 and len(src.messages) == 120 and not src.skipped
    assert [m["role"] for m in src.messages[:4]] == ["user", "assistant", "tool", "assistant"]


def test_the_benchmark_runs_small(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not CLAUDE_SOURCE.exists():
        pytest.skip(f"{CLAUDE_SOURCE} is not here")
    monkeypatch.setattr(longchain_bench, "RUNS", 1)
    figures = {re.sub(r" \([^)]*\)", "", f.name): f
               for f in longchain_bench.bench_long_chain((100, 200), folder=tmp_path, open_mb=3)}
    assert set(figures) == {"Claude Code 100 calls: import", "Claude Code 100 calls: open",
                            "Claude Code 200 calls: import", "Claude Code 200 calls: open",
                            "Claude Code import: s/call at 200 ÷ at 100 calls",
                            "Claude Code open: s/call at 200 ÷ at 100 calls", "Claude Code 3 MB: open"}
    assert all(f.value > 0 for f in figures.values())
    named = [f.name for f in longchain_bench.bench_long_chain((100,), folder=tmp_path, open_mb=None)]
    assert named == ["Claude Code 100 calls (2 MB, 100 read): import", "Claude Code 100 calls (2 MB, 100 read): open"]
    gemini = longchain_bench.bench_gemini((40, 80))
    assert [f.name for f in gemini][:4] == ["Gemini CLI 40 calls (20 turns, 40 read): import",
                                            "Gemini CLI 40 calls (20 turns, 40 read): open",
                                            "Gemini CLI 40 calls (20 turns, 40 read): read",
                                            "Gemini CLI 80 calls (40 turns, 80 read): import"]
    assert [f.name for f in gemini][-3:] == [f"Gemini CLI {kind}: s/call at 80 ÷ at 40 calls"
                                             for kind in ("import", "open", "read")]
    assert all(f.ok is not None for f in gemini[-3:])


def test_the_benchmark_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.main(["no-such"]) == 2
    assert "long-chain" in capsys.readouterr().err.split("choose from", 1)[1].replace(",", " ").split()
