"""Kill the usage index's writer at every durable step (issue 26, item 1): ``ctxbench usage --refresh`` and an
incremental ``ctxbench usage`` after a session file grew are SIGKILLed right after the N-th ``os.fsync`` (the
sitecustomize hook of :mod:`tests.test_kill_harness`), for every N the traced run makes. After each kill,
``ctxbench usage --json --no-update`` answers the old totals or the new ones exactly (never 0 calls, never an
error), and a following ``ctxbench usage --json`` equals a clean build.

The runs use copies of the shared sessions (Claude Code and Codex) in a HOME of their own and a data dir per
kill point."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, SHARED
from tests.engine.usage.test_usage_index import _call
from tests.test_kill_harness import HOOK, ctxbench

pytestmark = pytest.mark.slow

SESSIONS = SHARED / "data" / "sessions"


@dataclass
class Rig:
    root: Path
    hook: Path
    home: Path
    grown: Path  # the session file an incremental update finds grown

    def env(self, data: Path, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("CTXBENCH_") and k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_DIR")}
        env.update(PYTHONPATH=f"{self.hook}{os.pathsep}{REPO}", HOME=str(self.home), CTXBENCH_DATA_DIR=str(data),
                   CTXBENCH_CONFIG_DIR=str(data / "config"), XDG_DATA_HOME=str(self.home / ".local" / "share"),
                   LITELLM_LOCAL_MODEL_COST_MAP="True", TZ="UTC")
        env.update(extra)
        return env

    def usage(self, data: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*ctxbench(), "usage", "--json", *args], cwd=REPO, env=self.env(data, **extra),
                              capture_output=True, text=True, timeout=120)


def _rounded(value: Any) -> Any:
    """``value`` with every float rounded to 9 places: DuckDB sums doubles in parallel, in no fixed order, so the
    same costs can sum to numbers that differ in the last bits from one run to the next."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _answer(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert out.returncode == 0, f"rc {out.returncode}: {out.stderr[-1500:]}"
    data = json.loads(out.stdout)
    return _rounded({"total": data["total"], "groups": data["groups"]})


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    if not (SESSIONS / "claude-code").is_dir():
        pytest.skip("the shared sessions are not on this machine")
    root = tmp_path_factory.mktemp("usage-kill")
    hook = root / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    home = root / "home"
    projects = home / ".claude" / "projects" / "-home-u-shared"
    shutil.copytree(SESSIONS / "claude-code", projects, ignore=shutil.ignore_patterns("*.md", "LICENSE"))
    codex = home / ".codex" / "sessions" / "2026" / "02" / "23"
    codex.mkdir(parents=True)
    for path in (SESSIONS / "codex").glob("rollout-*.jsonl"):
        shutil.copy(path, codex / path.name)
    for folder, dirs, files in os.walk(home):
        for name in dirs + files:
            os.chmod(Path(folder) / name, 0o755)
    yield Rig(root, hook, home, projects / "short.jsonl")


def _fsync_steps(rig: Rig, data: Path, *args: str) -> list[str]:
    trace = data.parent / f"{data.name}.trace"
    out = rig.usage(data, *args, CTXBENCH_KILL_TRACE=str(trace))
    _answer(out)
    return [line.split("\t", 1)[1] for line in trace.read_text().splitlines()] if trace.exists() else []


def _kill_runs(rig: Rig, name: str, base: Path, args: tuple[str, ...], old: dict[str, Any], new: dict[str, Any],
               steps: list[str]) -> list[str]:
    """One killed run per durable step, each on a copy of ``base``; the failures."""

    def one(n: int) -> str:
        data = rig.root / f"{name}-{n:03d}"
        shutil.copytree(base, data, symlinks=True)
        killed = rig.usage(data, *args, CTXBENCH_KILL_AT=str(n))
        where = f"{name}, killed after fsync {n} ({steps[n - 1]})"
        if killed.returncode != -signal.SIGKILL:
            return f"{where}: not killed (rc {killed.returncode}): {killed.stderr[-500:]}"
        try:
            seen = _answer(rig.usage(data, "--no-update"))
            assert seen["total"]["calls"], "0 calls"
            assert seen in (old, new), f"neither the old totals nor the new ones: {seen['total']}"
            assert _answer(rig.usage(data)) == new, "the next update is not a clean build's answer"
        except AssertionError as exc:
            return f"{where}: {exc}"
        finally:
            shutil.rmtree(data, ignore_errors=True)
        return ""

    with ThreadPoolExecutor(max_workers=2) as pool:  # two at a time: the machine has two cores
        return [f for f in pool.map(one, range(1, len(steps) + 1)) if f]


def test_a_killed_refresh_or_update_leaves_the_old_index_or_the_new(rig: Rig) -> None:
    base = rig.root / "base"
    old = _answer(rig.usage(base))
    assert old["total"]["calls"] > 100

    # --refresh: the same files read again, the same figures; the whole index written anew beside the old
    traced = rig.root / "traced-refresh"
    shutil.copytree(base, traced)
    steps = _fsync_steps(rig, traced, "--refresh")
    assert any("files.json" in s for s in steps) and any(".parquet" in s for s in steps), steps
    failures = _kill_runs(rig, "refresh", base, ("--refresh",), old, old, steps)

    # an incremental update after a session grew: new figures
    with open(rig.grown, "a") as fh:
        fh.write(_call(9001, "2026-02-28T10:00:05.000Z"))
    clean = rig.root / "clean"
    new = _answer(rig.usage(clean))
    assert new["total"]["calls"] == old["total"]["calls"] + 1
    traced = rig.root / "traced-grow"
    shutil.copytree(base, traced)
    grow_steps = _fsync_steps(rig, traced)
    assert any("files.json" in s for s in grow_steps) and any(".parquet" in s for s in grow_steps), grow_steps
    failures += _kill_runs(rig, "grow", base, (), old, new, grow_steps)
    assert not failures, "\n".join(failures)
