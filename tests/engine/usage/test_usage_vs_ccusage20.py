"""The usage index side by side with ccusage 20 (:mod:`tests.ccusage20`: the native program, pinned in
tests/agents/package.json) on the shared Claude Code and Codex sessions, per day, with ``--offline`` (its own bundled
prices). The files the real agents write are compared in their tests (tests/agents: Claude Code, Gemini CLI, Pi,
Kilo, OpenCode and Codex equal; the compactions' own calls of Claude Code 2.1.3xx, Copilot CLI and Qwen Code, and
Qwen Code's input, with the differences their tests name).

ccusage 20 reads what ours reads, figure for figure, with one difference, checked rather than hidden:

- a Claude Code compaction's own call (``subagents/agent-acompact-*.jsonl``, Claude Code 2.1.39) whose file holds
  only the first line of its response: ``output_tokens`` there is the streaming placeholder (6 tokens for a summary
  of thousands). ccusage counts the 6; ours says the output is unknown (``completion_placeholder`` keeps the 6, the
  cost is priced without it and says so). So ours + the placeholders = ccusage's output, and the costs differ by
  those placeholders' price only.

Subagent calls only a parent file's ``progress`` records hold (no subagent file of their own) are counted by both
(ccusage 16 did not read them): five of the shared sessions' are, and the figures are equal with them.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from engine.usage.index import UsageIndex
from tests import ccusage20
from tests.conftest import SHARED
from tests.engine.usage.test_usage_vs_ccusage import progress_only

SESSIONS = SHARED / "data" / "sessions"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A HOME with the shared Claude Code sessions (each in a project folder of its own, its subagents beside it)
    and the shared Codex rollouts where Codex keeps them."""
    if not (SESSIONS / "claude-code").is_dir() or not (SESSIONS / "codex").is_dir():
        pytest.skip("the shared sessions are not on this machine")
    root = tmp_path_factory.mktemp("home")
    projects = root / ".claude" / "projects"
    for main in sorted((SESSIONS / "claude-code").glob("*.jsonl")):
        folder = projects / f"p-{main.stem}"
        folder.mkdir(parents=True)
        shutil.copyfile(main, folder / main.name)
        if (SESSIONS / "claude-code" / main.stem).is_dir():
            shutil.copytree(SESSIONS / "claude-code" / main.stem, folder / main.stem, copy_function=shutil.copyfile)
    rollouts = root / ".codex" / "sessions" / "2026" / "02" / "23"
    rollouts.mkdir(parents=True)
    for rollout in sorted((SESSIONS / "codex").glob("rollout-*.jsonl")):
        shutil.copyfile(rollout, rollouts / rollout.name)
    for folder, dirs, _ in os.walk(root):
        for name in dirs:
            os.chmod(Path(folder) / name, 0o755)
    return root


@pytest.fixture(scope="module")
def ours(home: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Every call row of the usage index of ``home``, with its file's path."""
    ix = UsageIndex(tmp_path_factory.mktemp("usage"))
    report = ix.update(home=home, env={})
    assert not report.failed
    con = ix.connect()
    try:
        cur = con.execute("""SELECT c.agent, CAST(c.day AS VARCHAR) AS day, c.request_id, c.input_tokens,
                                    c.cache_read_tokens, c.cache_write_tokens, c.output_tokens, c.reasoning_tokens,
                                    c.cost_usd, c.model, c.subagent, c.kind
                             FROM calls c""")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


def placeholders(home: Path) -> dict[str, int]:
    """{requestId: output_tokens} of the compaction calls whose file holds only the first line of the response (the
    streaming placeholder): one line per request in an ``agent-acompact-*.jsonl``."""
    lines: dict[str, list[int]] = defaultdict(list)
    for path in sorted(home.rglob("agent-acompact-*.jsonl")):
        for raw in path.read_text().splitlines():
            obj = json.loads(raw)
            usage = (obj.get("message") or {}).get("usage")
            if obj.get("type") == "assistant" and isinstance(usage, dict):
                lines[str(obj.get("requestId"))].append(int(usage.get("output_tokens") or 0))
    return {request: outs[0] for request, outs in lines.items() if len(outs) == 1}


def _sums(rows: list[dict[str, Any]], extra: dict[str, int]) -> dict[str, dict[str, float]]:
    by_day: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        day = by_day[r["day"]]
        for key in ("input_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "reasoning_tokens",
                    "cost_usd"):
            day[key] += r[key] or 0
        if r["output_tokens"] is None:
            day["placeholder"] += extra.get(r["request_id"], 0)
    return by_day


def test_claude_code_per_day(home: Path, ours: list[dict[str, Any]]) -> None:
    extra = placeholders(home)
    rows = [r for r in ours if r["agent"] == "claude-code"]
    streamed = progress_only(home)  # (ours counts each once; the sums below show ccusage 20 does too)
    assert len(streamed) == 5 and sum(r["request_id"] in streamed for r in rows) == 5
    unknown = {r["request_id"] for r in rows if r["output_tokens"] is None}
    assert unknown == set(extra) and len(extra) == 2  # the two compactions of 2026-02-11 (Claude Code 2.1.39)
    assert all(r["kind"] == "compaction" and r["subagent"].startswith("acompact-") for r in rows
               if r["request_id"] in unknown)
    mine = _sums(rows, extra)
    them = ccusage20.daily(home, "claude")
    assert sorted(mine) == sorted(them) == ["2026-02-10", "2026-02-11"]
    for day, m in mine.items():
        t = them[day]
        assert (m["input_tokens"], m["cache_read_tokens"], m["cache_write_tokens"]) == (
            t["inputTokens"], t["cacheReadTokens"], t["cacheCreationTokens"]), day
        assert m["output_tokens"] + m["placeholder"] == t["outputTokens"], day
        # the same prices but for the placeholders' output, which ours does not price (under 0.1 ‰ here)
        assert m["cost_usd"] <= t["totalCost"] and t["totalCost"] - m["cost_usd"] <= 1e-4 * t["totalCost"], day
    assert mine["2026-02-11"]["placeholder"] == 12


def test_codex_per_day(home: Path, ours: list[dict[str, Any]]) -> None:
    rows = [r for r in ours if r["agent"] == "codex"]
    assert len(rows) == 293
    mine = _sums(rows, {})
    them = ccusage20.daily(home, "codex")
    assert sorted(mine) == sorted(them) == ["2026-02-23", "2026-02-24"]
    for day, m in mine.items():
        t = them[day]
        assert (m["input_tokens"], m["cache_read_tokens"], m["output_tokens"], m["reasoning_tokens"]) == (
            t["inputTokens"], t["cacheReadTokens"], t["outputTokens"], t["reasoningOutputTokens"]), day
        assert m["cache_write_tokens"] == t["cacheCreationTokens"] == 0, day  # (Codex records no cache write)
        assert m["cost_usd"] == pytest.approx(t["costUSD"], rel=1e-6), day
