"""ccusage 20, the native program people run beside agents, for the tests that compare the usage index with it.

Pinned in ``tests/agents/package.json`` as ``@ccusage/ccusage-linux-x64`` (the package holding its binary;
``make test`` installs it with the agents). npm installs the binary without its exec bit (the package names no
``bin``; the ``ccusage`` launcher sets the bit at its first run), so :func:`runnable` copies it and sets the bit.
:func:`daily` is ``ccusage <agent> daily --offline --json`` (its own bundled prices) over a HOME, by day (UTC).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

NATIVE = Path(__file__).resolve().parent / "agents" / "node_modules" / "@ccusage" / "ccusage-linux-x64" / "bin" / \
    "ccusage"
_RUNNABLE: list[Path] = []


def runnable() -> Path:
    """A copy of the pinned binary with its exec bit set (made once per test process); the test fails, saying how to
    install it, when it is not installed."""
    if _RUNNABLE and _RUNNABLE[0].is_file():
        return _RUNNABLE[0]
    if not NATIVE.is_file():
        pytest.fail("ccusage 20 is not installed: `make test` installs it with the agents (`npm ci --prefix "
                    "tests/agents`)", pytrace=False)
    folder = tempfile.mkdtemp(prefix="ccusage20-")
    atexit.register(shutil.rmtree, folder, True)
    copy = Path(folder) / "ccusage"
    shutil.copyfile(NATIVE, copy)
    copy.chmod(copy.stat().st_mode | stat.S_IXUSR)
    version = subprocess.run([str(copy), "--version"], capture_output=True, text=True, timeout=60, check=True).stdout
    assert version.split()[-1].startswith("20."), version
    _RUNNABLE[:] = [copy]
    return copy


def daily(home: Path, agent: str) -> dict[str, dict[str, Any]]:
    """``ccusage <agent> daily --offline --json -z UTC`` with ``home`` as HOME: its rows by day."""
    env = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")}
    env.update(HOME=str(home), TZ="UTC", NO_COLOR="1")
    done = subprocess.run([str(runnable()), agent, "daily", "--offline", "--json", "-z", "UTC"], capture_output=True,
                          text=True, env=env, timeout=300, check=True)
    return {str(d["date"])[:10]: d for d in json.loads(done.stdout)["daily"]}


def our_days(home: Path, data: Path, *, compactions: bool = True) -> dict[str, dict[str, int]]:
    """The usage index of ``home`` (kept in ``data``), by day: calls, prompt, uncached input, cache read, cache write
    and output tokens (``compactions``: a compaction's own call counted too)."""
    from engine.usage.index import UsageIndex

    ix = UsageIndex(data)
    report = ix.update(home=home, env={})
    assert not report.failed, report.failed
    con = ix.connect()
    try:
        rows = con.execute("SELECT CAST(day AS VARCHAR), kind, prompt_tokens, input_tokens, cache_read_tokens, "
                           "cache_write_tokens, output_tokens FROM calls").fetchall()
    finally:
        con.close()
    days: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for day, kind, *figures in rows:
        if kind == "compaction" and not compactions:
            continue
        sums = days[day]
        sums["calls"] += 1
        for name, value in zip(("prompt", "input", "cache_read", "cache_write", "output"), figures, strict=True):
            sums[name] += value or 0
    return {day: dict(sums) for day, sums in days.items()}


def assert_same_tokens(home: Path, data: Path, agent: str, *, compactions: bool = True) -> dict[str, dict[str, int]]:
    """ccusage 20's uncached input, cache read, cache write and output tokens of ``agent`` equal the index's, day by
    day (``compactions``: False where ccusage does not count a compaction's own call, which ours does — the scripted
    server's request log holds it); the index's days returned."""
    ours, theirs = our_days(home, data, compactions=compactions), daily(home, agent)
    assert sorted(ours) == sorted(theirs) and ours, (ours, theirs)
    for day, sums in ours.items():
        them = theirs[day]
        assert (sums["input"], sums["cache_read"], sums["cache_write"], sums["output"]) == (
            them["inputTokens"], them["cacheReadTokens"], them["cacheCreationTokens"], them["outputTokens"]), (
            day, sums, them)
    return ours
