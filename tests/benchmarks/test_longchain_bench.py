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


def test_the_gemini_sessions_have_the_turns_asked(tmp_path: Path) -> None:
    src = read_gemini_cli(longchain_bench.make_gemini_session(tmp_path / "session-g.jsonl", 30))
    assert len(src.calls) == 60 and len(src.messages) == 120 and not src.skipped
    assert [m["role"] for m in src.messages[:4]] == ["user", "assistant", "tool", "assistant"]


def test_the_benchmark_runs_small(tmp_path: Path) -> None:
    if not CLAUDE_SOURCE.exists():
        pytest.skip(f"{CLAUDE_SOURCE} is not here")
    figures = {re.sub(r" \([0-9,]+ calls\)", "", f.name): f
               for f in longchain_bench.bench_long_chain((3, 6), folder=tmp_path)}
    assert set(figures) == {"long chain 3 MB: import", "long chain 3 MB: open", "long chain 6 MB: import",
                            "long chain 6 MB: open", "long chain import: s/call at 6 MB ÷ at 3 MB",
                            "long chain open: s/call at 6 MB ÷ at 3 MB"}
    assert all(f.value > 0 for f in figures.values())
    gemini = longchain_bench.bench_gemini((40, 80))
    assert [f.name for f in gemini][:2] == ["Gemini CLI 40 turns (80 calls): read",
                                            "Gemini CLI 80 turns (160 calls): read"]
    assert gemini[-1].ok is not None


def test_the_benchmark_is_registered(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main.main(["no-such"]) == 2
    assert "long-chain" in capsys.readouterr().err.split("choose from", 1)[1].replace(",", " ").split()
